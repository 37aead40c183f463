"""The corpus flow: extraction arms, reference corpora, post-processing, tokenisation, budget."""

from corpus.shims import gzip_without_timestamps

# every process that runs a corpus step imports this package first (steps are unpickled from it)
gzip_without_timestamps()
