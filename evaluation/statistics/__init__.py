"""The statistics of the report, apart from how it is shown: paired generalized intervals and Holm
(`intervals.py`); signal, noise, SNR and its floor (`noise.py`). The power of a design,
`python -m evaluation.power`, is built on them."""
