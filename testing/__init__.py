"""Test and benchmark equipment, shared by tests/ and benchmarks/ (not part of the product package).

    tiny_model.py     a random 1M-parameter Qwen2 with a local tokenizer, built in seconds
    vllm_server.py    start/stop a local `vllm serve` (the OpenAI-compatible engine's counterpart)
    rollout_bench.py  every rollout strategy on the same responses, costs as ratios to exhaustive
    lockstep.py       the baseline the scheduler is measured against: a stage's jobs in lock-step batches

Tests get it through pytest's `pythonpath` (pyproject.toml); benchmarks put the repository root on
sys.path themselves.
"""
