"""The corpus flow, WARC records to equal-budget token datasets, one package per stage in the order
data passes them:

    read/         input files in, records out (WARC files; reference corpora)
    extractors/   records → main content: the record guard and record-level filters, then one
                  extractor per arm (trafilatura, dripper, block_classifier, baselines, gold)
    postprocess/  identical post-processing of every arm (exact dedup … MinHash)
    tokens/       the shared tokenizer, tokenisation, the equal token budget
    accounting/   every record through every stage (summary, ledger)
    flow/         the flow that runs them: here, on Slurm, or as a pilot (plan)

`sample/` writes the WARCs the project tests and demos on; `stage.py` is what every stage package
builds; `shims.py` holds every reach into a dependency's private API.
"""

from corpus.shims import distributions_by_name, gzip_without_timestamps

# every process that runs a corpus step imports this package first (steps are unpickled from it)
gzip_without_timestamps()
distributions_by_name()
