"""The world's first judge distilled from the pipeline's own seed slice (issue 60, T2), with the
product's commands only, as a user would run them:

    python -m lab.world.seed_critic measure                       # the shipped critic against the truth
    python -m lab.world.seed_critic train --out runs/seed-critic   # a critic from a fresh seed slice
    python -m lab.world.seed_critic train --out lab/world/models   # ... replacing the shipped one

1. The seed slice: `prm-annotate world report --problems P --seed S` for each `--slice-seed` (the big
   judge and MC with K = 8 on the world policy's responses, consensus), then `export --format critic
   --judged` of each consensus set: the big judge's critiques that agree with MC.
2. `train --head critic` on those rows from `--base` (a base a user could have: the world policy or
   the lab's prm-base, never the judge's weights), with `--key-weight` on the deciding tokens
   (` wrong` and the verdict's `\\boxed{k}`).
3. Measured on held-out responses (another world report: `--held-seed`, problems no slice has):
   `judge --model CRITIC --prompt processbench` (the world judge's settings), then `evaluate
   --min-f1` against the truth (`gold.jsonl`) and against the big judge (its `judged.jsonl`): F1 with
   a bootstrap interval, agreement with a Wilson one. The big judge's own F1 on the same responses
   is the target's reference (T2: within 5 points of it).

Every engine runs in a child process (the commands themselves); run it under the engine lock on a
shared machine. Files are kept in --workdir and reused when complete (a rerun measures again).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from lab.world import LAB_MODELS_DIR, PRM_BASE_DIR

SHIPPED = LAB_MODELS_DIR / "seed-critic"
KEY_PATTERN = r" wrong|\\boxed\{-?\d+\}"  # where the world judge stops copying, and its verdict
T2_POINTS = 5.0  # the critic's F1 against the truth within this many points of the big judge's


def run(*args: str, out: Path | None = None) -> str:
    """One product command, as a child process (its engines live and die with it)."""
    cmd = [sys.executable, "-m", "prm_annotate", *args]
    print("$ prm-annotate " + " ".join(args), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "ERROR")})
    if done.returncode:
        raise SystemExit(f"prm-annotate {args[0]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    if out is not None:
        out.write_text(done.stdout)
    return done.stdout


def world_report(workdir: Path, problems: int, seed: int) -> Path:
    """A world report's files (reused when its JSON says it finished)."""
    if not (workdir.with_suffix(".json")).is_file():
        run("world", "report", "--workdir", str(workdir), "--problems", str(problems), "--seed", str(seed),
            "--resume", "--json", out=workdir.with_suffix(".json"))
    return workdir


def seed_rows(workdir: Path, problems: int, seeds: list[int]) -> Path:
    """The critic rows of every seed slice, in one file."""
    rows = workdir / "critic-rows.jsonl"
    parts = []
    for seed in seeds:
        slice_dir = world_report(workdir / f"slice-{seed}", problems, seed)
        part = slice_dir / "critic.jsonl"
        if not part.is_file():
            run("export", str(slice_dir / "consensus.jsonl"), "--format", "critic", "--judged",
                str(slice_dir / "judged.jsonl"), "-o", str(part))
        parts.append(part.read_text())
    rows.write_text("".join(parts))
    return rows


def train_critic(args: argparse.Namespace) -> Path:
    rows = seed_rows(args.workdir, args.problems, args.slice_seed)
    out = args.out / "seed-critic"
    run("train", str(rows), "--head", "critic", "--base", str(args.base), "-o", str(out), "--overwrite",
        "--steps", str(args.steps), "--batch-size", str(args.batch_size), "--lr", str(args.lr), "--warmup",
        str(args.warmup), "--lr-scheduler", "linear", "--eval-split", "0.05", "--save-every", "50",
        "--key-weight", str(args.key_weight), "--key-pattern", KEY_PATTERN, "--quiet", "--json",
        out=args.workdir / "train.json")
    return out


def measure(critic: Path, workdir: Path, problems: int, seed: int) -> dict:
    """The critic and the big judge on held-out responses, against the truth; the critic against
    the big judge too."""
    held = world_report(workdir / f"held-{seed}", problems, seed)
    judged = workdir / f"held-{seed}.{critic.name}.jsonl"
    judged.unlink(missing_ok=True)  # a judge output that exists would be resumed, not judged again
    run("judge", str(held / "responses.jsonl"), "--model", str(critic.resolve()), "--prompt", "processbench",
        "--max-tokens", "256", "--seed", "0", "--quiet", "-o", str(judged))

    def check(predictions: Path, gold: Path, label_field: str) -> dict:
        out = json.loads(run("evaluate", str(predictions), "--gold", str(gold), "--label-field", label_field,
                             "--min-f1", "0", "--json"))
        return {**out["check"], "unparsed": out["splits"]["arith"]["missing"]}

    truth = held / "gold.jsonl"
    result = {"critic": str(critic), "responses": str(held / "responses.jsonl"),
              "critic_vs_truth": check(judged, truth, "label"),
              "judge_vs_truth": check(held / "judged.jsonl", truth, "label"),
              "critic_vs_judge": check(judged, held / "judged.jsonl", "judge.first_error")}
    gap = result["judge_vs_truth"]["f1"] - result["critic_vs_truth"]["f1"]
    result["t2"] = {"gap": gap, "met": gap <= T2_POINTS}
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["train", "measure"])
    p.add_argument("--workdir", type=Path, default=Path("runs/seed-critic"))
    p.add_argument("--out", type=Path, default=Path("runs/seed-critic/model"),
                   help="train: writes OUT/seed-critic (the shipped one: lab/world/models)")
    p.add_argument("--critic", type=Path, default=SHIPPED, help="measure: the critic (default: the shipped one)")
    p.add_argument("--base", type=Path, default=PRM_BASE_DIR)
    p.add_argument("--problems", type=int, default=600, help="problems per seed slice (4 responses each)")
    p.add_argument("--slice-seed", type=int, action="append", default=None, help="repeatable (default: 0 and 2)")
    p.add_argument("--held-problems", type=int, default=200)
    p.add_argument("--held-seed", type=int, default=1)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--key-weight", type=float, default=5.0)
    args = p.parse_args(argv)
    args.slice_seed = args.slice_seed or [0, 2]
    args.workdir.mkdir(parents=True, exist_ok=True)
    critic = args.critic
    if args.what == "train":
        critic = train_critic(args)
        meta = critic / "world.json"
        meta.write_text(json.dumps({"kind": "seed-critic", "command": "python -m lab.world.seed_critic " +
                                    " ".join(argv if argv is not None else sys.argv[1:]),
                                    "base": str(args.base), "slice_seeds": args.slice_seed,
                                    "problems_per_slice": args.problems, "steps": args.steps,
                                    "batch": args.batch_size, "lr": args.lr, "key_weight": args.key_weight,
                                    "key_pattern": KEY_PATTERN,
                                    # the tokens training read (3 x params x tokens: the roads benchmark's bill)
                                    "train_tokens": json.loads((args.workdir / "train.json").read_text())["tokens"]},
                                   indent=2) + "\n")
        for sub in critic.parent.glob("seed-critic.checkpoints"):
            shutil.rmtree(sub)  # the run's checkpoints do not ship
    print(json.dumps(measure(critic, args.workdir, args.held_problems, args.held_seed), indent=2))


if __name__ == "__main__":
    main()
