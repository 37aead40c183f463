"""What lm-eval runs: the benchmark suite (`suite.yaml`, read by `suite.py`), the project's task
YAMLs (`lm_eval_tasks/`), their offline data (`offline.py`), the clean-text tasks (`clean_text.py`),
and every reach into lm-eval's private API (`shims.py`)."""
