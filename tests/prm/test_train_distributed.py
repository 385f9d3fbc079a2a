"""`train` as real processes: two with torchrun (gloo, CPU) against one at the same global batch,
a run SIGKILLed after its first checkpoint and resumed, and vLLM (`score`) loading a checkpoint trained
from a base with padded embeddings.

Tolerances: one process and two take the same global batches (the length-grouped sampler works on
the global batch) and the loss is normalised by the global label count, so they differ only by
the order of float sums: eval losses within 1e-4 (measured: ~1e-7). A resumed run restores the
weights, optimizer, schedule and RNG and reshuffles each epoch from (seed, epoch), so it ends where
an uninterrupted run ends, within the same 1e-4."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from prm_annotate.prm.train import complete_checkpoints
from prm_annotate.world import POLICY_DIR
from testing.jsonl_files import read_jsonl, write_jsonl
from testing.paths import REPO
from testing.prm_fixtures import (padded_tag_base, score_with_vllm, trl_rows, vllm_vs_transformers,
                                  world_responses)

CLI = [sys.executable, "-m", "prm_annotate"]
CRITIC_ROWS = REPO / "tests" / "data" / "critic" / "world_critic_rows.jsonl"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
TIMEOUT = 900
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def _args(tmp: Path, out: str, steps: int, data: str = "train.jsonl", eval_data: str = "eval.jsonl",
          *extra: str) -> list[str]:
    return ["train", str(tmp / data), "--base", str(POLICY_DIR), "-o", str(tmp / out), "--steps", str(steps),
            "--batch-size", "8", "--lr", "3e-3", "--eval", str(tmp / eval_data), "--save-every", "5",
            "--log-every", "1", "--json", *extra]


# The critic's runs (--head critic): the world pipeline's critic rows, the first 8 for evaluation.
CRITIC = ("critic-train.jsonl", "critic-eval.jsonl", "--head", "critic", "--key-weight", "3")


def _run(cmd: list[str]) -> tuple[dict, str]:
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=ENV)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout), run.stderr  # one JSON document: only the main process prints


def _history(ckpts: Path) -> list[dict]:
    return json.loads((complete_checkpoints(ckpts)[-1] / "trainer_state.json").read_text())["log_history"]


def _max_weight_diff(a: Path, b: Path) -> float:
    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert wa.keys() == wb.keys()
    return max(float((wa[k] - wb[k]).abs().max()) for k in wa)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dist")
    write_jsonl(tmp / "train.jsonl", trl_rows(world_responses(8, seed=1)))  # 16 responses: 2 full batches
    write_jsonl(tmp / "eval.jsonl", trl_rows(world_responses(4, seed=3, split="test")))
    rows = read_jsonl(CRITIC_ROWS)
    write_jsonl(tmp / CRITIC[0], rows[8:24])  # 16 rows: 2 full batches (a short one is evened out over processes)
    write_jsonl(tmp / CRITIC[1], rows[:8])
    return tmp


@pytest.fixture(scope="module")
def two_processes(data):
    one, _ = _run([*CLI, *_args(data, "one", 10), "--quiet"])
    two, stderr = _run([*TORCHRUN, "-m", "prm_annotate", *_args(data, "two", 10)])
    return one, two, stderr


def test_two_processes_train_as_one(data, two_processes):
    one, two, stderr = two_processes
    assert (one["processes"], two["processes"]) == (1, 2) and one["steps"] == two["steps"] == 10
    h1, h2 = _history(data / "one.checkpoints"), _history(data / "two.checkpoints")
    evals1 = {e["step"]: e["eval_step_loss"] for e in h1 if "eval_step_loss" in e}
    evals2 = {e["step"]: e["eval_step_loss"] for e in h2 if "eval_step_loss" in e}
    assert sorted(evals1) == sorted(evals2) == [5, 10]
    assert all(abs(evals1[s] - evals2[s]) < 1e-4 for s in evals1), (evals1, evals2)
    losses1, losses2 = [e["loss"] for e in h1 if "loss" in e], [e["loss"] for e in h2 if "loss" in e]
    assert len(losses1) == len(losses2) == 10 and max(abs(a - b) for a, b in zip(losses1, losses2)) < 1e-4
    # Not trivially equal: training moved the model, and the two runs moved it alike.
    assert evals1[10] != evals1[5] and _max_weight_diff(data / "one", data / "two") < 1e-4
    # Written alike: the same files, the same weight names, shapes and dtypes (no wrapper's prefix), the
    # same config but for the run's record; so what vLLM loads of a one-process run
    # (tests/stages/test_score.py) it loads of this one.
    assert sorted(p.name for p in (data / "one").iterdir()) == sorted(p.name for p in (data / "two").iterdir())
    w1, w2 = load_file(str(data / "one" / "model.safetensors")), load_file(str(data / "two" / "model.safetensors"))
    assert {k: (v.shape, v.dtype) for k, v in w1.items()} == {k: (v.shape, v.dtype) for k, v in w2.items()}
    c1, c2 = (json.loads((data / name / "config.json").read_text()) for name in ("one", "two"))
    for c in (c1, c2):  # the run's own record (times, processes, eval) and the threshold tuned on its eval
        del c["prm_annotate"]["result"], c["prm_annotate"]["threshold"]
    assert c1 == c2
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        assert (data / "one" / name).read_bytes() == (data / "two" / name).read_bytes(), name
    # Rank 0 alone reported and wrote, once: one summary (_run parsed it), one log line a step, no
    # partial directory left.
    assert stderr.count("train: step 10/10 ") == 1
    assert sorted(p.name for p in data.iterdir() if p.name.startswith((".two", "two"))) == ["two", "two.checkpoints"]
    assert sorted(p.name for p in (data / "two.checkpoints").iterdir()) == ["checkpoint-10", "checkpoint-5",
                                                                             "train_config.json"]


def test_two_processes_train_a_critic_as_one(data):
    """--head critic on the same stack: its weighted token loss is normalised by the global batch's
    assistant tokens, so two processes take one process's steps."""
    one, _ = _run([*CLI, *_args(data, "critic-one", 10, *CRITIC), "--quiet"])
    two, _ = _run([*TORCHRUN, "-m", "prm_annotate", *_args(data, "critic-two", 10, *CRITIC), "--quiet"])
    assert (one["processes"], two["processes"]) == (1, 2) and one["steps"] == two["steps"] == 10
    h1, h2 = _history(data / "critic-one.checkpoints"), _history(data / "critic-two.checkpoints")
    evals1 = {e["step"]: e["eval_token_loss"] for e in h1 if "eval_token_loss" in e}
    evals2 = {e["step"]: e["eval_token_loss"] for e in h2 if "eval_token_loss" in e}
    assert sorted(evals1) == sorted(evals2) == [5, 10] and evals1[10] < evals1[5]
    assert all(abs(evals1[s] - evals2[s]) < 1e-4 for s in evals1), (evals1, evals2)
    assert _max_weight_diff(data / "critic-one", data / "critic-two") < 1e-4


def kill_and_resume(data: Path, name: str, *critic: str) -> tuple[int, dict, str, dict]:
    """A run SIGKILLed once its first checkpoint is complete, then resumed; and the same run
    uninterrupted, for reference."""
    out, ckpts = data / name, data / f"{name}.checkpoints"
    log = (data / f"{name}.log").open("w")
    proc = subprocess.Popen([*CLI, *_args(data, name, 20, *critic), "--quiet"], stdout=log, stderr=log, env=ENV)
    deadline = time.monotonic() + TIMEOUT
    while not complete_checkpoints(ckpts) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = int(complete_checkpoints(ckpts)[-1].name.split("-")[1])
    assert not out.exists()  # the output appears only when complete
    result, stderr = _run([*CLI, *_args(data, name, 20, *critic), "--resume"])
    reference, _ = _run([*CLI, *_args(data, f"{name}-whole", 20, *critic), "--quiet"])
    return killed_at, result, stderr, reference


@pytest.fixture(scope="module")
def resumed(data):
    return kill_and_resume(data, "killed")


def test_a_killed_run_resumes_from_its_last_checkpoint(data, resumed):
    from prm_annotate.prm.checkpoint import load_model

    killed_at, result, stderr, reference = resumed
    assert 5 <= killed_at < 20
    assert result["resumed_from"] == str(data / "killed.checkpoints" / f"checkpoint-{killed_at}")
    logged = [int(s) for s in re.findall(r"train: step (\d+)/20", stderr)]
    assert logged and min(logged) == killed_at + 1 and max(logged) == 20  # not from step 0
    assert result["steps"] == reference["steps"] == 20
    assert abs(result["eval"]["step_loss"] - reference["eval"]["step_loss"]) < 1e-4
    assert _max_weight_diff(data / "killed", data / "killed-whole") < 1e-4
    model, _, fmt = load_model(data / "killed")  # transformers loads it, every weight matched
    assert fmt.threshold == result["threshold"]


def test_a_killed_critic_run_resumes_from_its_last_checkpoint(data):
    killed_at, result, stderr, reference = kill_and_resume(data, "critic-killed", *CRITIC)
    assert 5 <= killed_at < 20 and result["resumed_from"].endswith(f"checkpoint-{killed_at}")
    assert min(int(s) for s in re.findall(r"train: step (\d+)/20", stderr)) == killed_at + 1
    assert abs(result["eval"]["token_loss"] - reference["eval"]["token_loss"]) < 1e-4
    assert _max_weight_diff(data / "critic-killed", data / "critic-killed-whole") < 1e-4


@pytest.mark.engine
def test_vllm_loads_what_train_wrote(data, heavy, tmp_path):
    """score (vLLM's pooling runner) on a checkpoint from a base with the tag already a token and
    padded embeddings, against transformers. (A two-process run writes what a one-process run writes,
    test_two_processes_train_as_one, and vLLM loads a one-process run's, tests/stages/test_score.py; a
    resumed run writes the same checkpoint as an uninterrupted one:
    test_a_killed_run_resumes_from_its_last_checkpoint.)"""
    from prm_annotate.prm.train import TrainConfig, train

    heavy.release()  # one engine at a time on this machine: these run in child processes
    base = padded_tag_base(POLICY_DIR, tmp_path / "base")
    train(TrainConfig(data=str(data / "train.jsonl"), base=str(base), output=str(tmp_path / "padded"), steps=2,
                      batch_size=8, lr=1e-3, quiet=True))
    held_out = world_responses(3, seed=7, split="test")
    for prm_dir in (tmp_path / "padded",):
        scored = score_with_vllm(prm_dir, held_out, tmp_path)
        assert vllm_vs_transformers(prm_dir, scored)[0] < 1e-3, prm_dir
        threshold = json.loads((prm_dir / "config.json").read_text())["prm_annotate"]["threshold"]
        assert all(r["prm"]["threshold"] == (threshold if threshold is not None else 0.5) for r in scored)
