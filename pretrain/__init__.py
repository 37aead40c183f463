"""Tokens → checkpoints with megatron-core (train.py), exported to Hugging Face (export.py)."""

import warnings

# megatron-core warns at import wherever Transformer Engine or Apex is absent (always on CPU):
# it then uses its local implementations, which is what the suite builds on
warnings.filterwarnings("ignore", message="Transformer Engine and Apex are not installed", category=UserWarning,
                        module="megatron")
