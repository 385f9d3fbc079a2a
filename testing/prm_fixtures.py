"""Labelled arithmetic-world responses for the PRM tests: each problem's reference solution and
corrupted copies of it (lab/world/corrupt.py), labelled by the world's truth, as `trl` export rows and as
responses to score; a PRM trained on them; a base checkpoint with the tag already a token; and
`score` (vLLM) against transformers on a trained checkpoint."""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from lab.world.corrupt import corrupt_solution
from prm_annotate.evaluation.labels import step_labels
from prm_annotate.world.problems import World, make_problems, solution_steps
from prm_annotate.world.truth import true_first_error


def world_responses(n_problems: int, seed: int, split: str = "train") -> list[dict]:
    """Two responses per problem: the reference solution and one with a mistake, with `label`
    (the true first error)."""
    rng = random.Random(seed)
    out = []
    for p in make_problems(n_problems, seed=seed, split=split):
        world = World.from_json(p["world"])
        for j, steps in enumerate([solution_steps(world), corrupt_solution(world, rng)]):
            out.append({"id": f"{p['id']}/{j}", "problem_id": p["id"], "problem": p["problem"], "answer": p["answer"],
                        "steps": steps, "label": true_first_error(p, steps)})
    return out


def trl_rows(responses: list[dict]) -> list[dict]:
    rows = []
    for r in responses:
        labels = step_labels(r["label"], len(r["steps"]))
        rows.append({"id": r["id"], "prompt": r["problem"], "completions": r["steps"][:len(labels)], "labels": labels})
    return rows


def eval_truth(rows: list[dict]) -> list[int]:
    """The true first error of each trl row: its first step labelled wrong, -1 if none."""
    return [next((i for i, ok in enumerate(r["labels"]) if not ok), -1) for r in rows]


def padded_tag_base(policy_dir: Path, out: Path, multiple: int = 64) -> Path:
    """The world policy with `<extra_0>` already one token of its tokenizer and an embedding matrix
    padded past the tokenizer (as Qwen2.5's bases are: 151936 rows for 151665 tokens)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(policy_dir)
    tokenizer.add_tokens(["<extra_0>"], special_tokens=True)
    model = AutoModelForCausalLM.from_pretrained(policy_dir, dtype=torch.float32)
    model.resize_token_embeddings(len(tokenizer), pad_to_multiple_of=multiple, mean_resizing=False)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def train_world_prm(tmp: Path, name: str = "prm") -> Path:
    """A PRM trained by `train` in seconds (15 steps on the world policy): tag `<extra_0>`, which the
    world tokenizer did not have (so its id is not vLLM's default step tag)."""
    from prm_annotate.prm.train import TrainConfig, train
    from prm_annotate.world import POLICY_DIR
    from testing.jsonl_files import write_jsonl

    data = write_jsonl(tmp / f"{name}-train.jsonl", trl_rows(world_responses(8, seed=2)))
    train(TrainConfig(data=str(data), base=str(POLICY_DIR), output=str(tmp / name), steps=15, batch_size=8,
                      lr=3e-3, quiet=True))
    return tmp / name


def prm_server(heavy, prm: Path, logs: Path, name: str, pooler_config: dict | None):
    """`vllm serve` of a PRM with vLLM's pooling runner from the shared slot (its name says the
    pooling: "step" with the step tag, "default", "all"); tests that share one are marked
    `slot("server:prm-step")` and so run one after the other."""
    from testing.heavy import start_server

    return heavy.get(f"server:prm-{name}",
                     lambda: start_server(prm, f"tiny-prm-{name}", logs, runner="pooling", pooler_config=pooler_config,
                                          max_model_len=1024, dtype="float32"),
                     lambda s: s.stop())


def score_with_vllm(prm_dir: Path, responses: list[dict], tmp: Path, timeout: float = 600) -> list[dict]:
    """`prm-annotate score` (vLLM's pooling runner, a child process) over `responses`."""
    import subprocess
    import sys

    from testing.jsonl_files import read_jsonl, write_jsonl

    src = write_jsonl(tmp / f"{prm_dir.name}-responses.jsonl",
                      [{k: v for k, v in r.items() if k != "label"} for r in responses])
    out = tmp / f"{prm_dir.name}-scored.jsonl"
    cmd = [sys.executable, "-m", "prm_annotate", "score", str(src), "-o", str(out), "--model", str(prm_dir),
           "--dtype", "float32", "--batch-size", "8", "--start-timeout", "300", "--quiet"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stderr[-3000:]
    return read_jsonl(out)


@dataclass(frozen=True)
class ScoredWorld:
    """`score` (in process, vLLM's pooling runner, a child process) over held-out world responses,
    run once: `responses` as given (with `label`), `records` as written to `out` by `cmd`."""

    responses: list[dict]
    records: list[dict]
    out: Path
    cmd: list[str]


SCORED_WORLD_THRESHOLD = 0.8


def score_world_once(prm_dir: Path, tmp: Path, timeout: float = 900) -> ScoredWorld:
    """256 held-out world responses (128 problems, seed 7; `world_responses(n, seed=7, split="test")`
    for n <= 128 is their first 2n) scored at threshold 0.8 in one batch of 256, as the reward
    server's one request of 256 is scored."""
    import subprocess
    import sys

    from testing.jsonl_files import read_jsonl, write_jsonl

    responses = world_responses(128, seed=7, split="test")
    src = write_jsonl(tmp / "responses.jsonl", [{k: v for k, v in r.items() if k != "label"} for r in responses])
    out = tmp / "scored.jsonl"
    cmd = [sys.executable, "-m", "prm_annotate", "score", str(src), "-o", str(out), "--model", str(prm_dir),
           "--dtype", "float32", "--threshold", str(SCORED_WORLD_THRESHOLD), "--batch-size", "256",
           "--start-timeout", "300", "--quiet"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stderr[-3000:]
    return ScoredWorld(responses, read_jsonl(out), out, cmd)


def vllm_vs_transformers(prm_dir: Path, scored: list[dict]) -> tuple[float, list[list[float]]]:
    """The largest difference between vLLM's step scores and transformers' on the same checkpoint,
    and transformers' scores of each record."""
    from prm_annotate.prm.checkpoint import load_model, transformers_step_scores

    model, tokenizer, fmt = load_model(prm_dir)
    worst, refs = 0.0, []
    for rec in scored:
        refs.append(transformers_step_scores(model, tokenizer, fmt, rec["problem"], rec["steps"]))
        assert len(rec["prm"]["scores"]) == len(rec["steps"]) == len(refs[-1])
        worst = max(worst, *(abs(a - b) for a, b in zip(rec["prm"]["scores"], refs[-1])))
    return worst, refs
