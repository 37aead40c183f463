"""Post-processing, identical for every arm: `steps` names the steps in order (SHA-256 exact dedup,
language id, Gopher quality and repetition, URL and keyword blocklists, MinHash), `stages` runs
them as datatrove stages, `exact_dedup` and `filters` are the steps datatrove lacks."""
