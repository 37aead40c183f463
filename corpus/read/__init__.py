"""Read: the input files in, records out. `inputs` resolves the WARC files every arm reads (a local
list, Common Crawl, or the generated sample) and fixes the list for the output root's life;
`manifest` records each file's expected size (and sha256, records); `framing` walks a file's whole
records up to that size; `warc` turns every response record into a document; `reference` and
`reference_steps` read an existing corpus for a reference-corpus arm."""
