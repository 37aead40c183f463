"""Read: the input files in, records out. `inputs` resolves the WARC files every arm reads (a local
list, Common Crawl, or the generated sample); `warc` turns every response record into a document;
`reference` and `reference_steps` read an existing corpus for a reference-corpus arm."""
