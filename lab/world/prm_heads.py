"""Compare world PRMs on one split, with the true labels: the table of docs/world-prm.md ("The
PRM: one that checks steps").

    python -m lab.world.prm_heads sample --workdir runs/prm-heads
    python -m lab.world.prm_heads untrained --workdir runs/prm-heads
    python -m lab.world.prm_heads train --workdir runs/prm-heads --name token-score -- --head likelihood --lr 3e-3 --steps 150
    python -m lab.world.prm_heads train --workdir runs/prm-heads --tree ../other-checkout --name step-stats-main -- ...
    python -m lab.world.prm_heads compare --workdir runs/prm-heads token-score step-stats-main

`sample`: `--train-problems` training and `--heldout-problems` held-out problems (the world's train
and test splits), `-n` responses each from the world policy with transformers (temperature 0.7, the
report's sample stage's), each labelled by the world's truth (`label`: the first wrong step) and
graded (`right`: the boxed answer). The training problems' responses become `trl` rows with the
true labels, `--val-share` of the problems (drawn with `--seed`) for validation.
`untrained`: the held-out responses scored without training by the policy's likelihood statistics
(prm/likelihood.py; `--policy-prompt`: read with the policy's system prompt). `train NAME -- ARGS`: `prm-annotate train` on the training rows with ARGS
(`--base`, `--eval`, `-o` and the fixed settings are given here), then `prm-annotate score` on the
held-out responses, each a child process, timed. Every row's metrics (right > wrong, step AUC,
F1 at its threshold: the checkpoint's, 0.5 for a statistic) go to `<workdir>/results.jsonl` and
print as a table row, right > wrong with its 95% bootstrap interval over the held-out problems;
they are the world experiment's own (lab/world/prm/scores.py, bootstrap.py). `--tree DIR`
trains and scores with another checkout's prm_annotate (main's, for the head it had);
`--policy-prompt` trains the PRM to read with the policy's system prompt. `measure NAME` measures a
trained PRM again from its files; `compare A B`: A's right > wrong minus B's, paired over problems.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

from prm_annotate.world import POLICY_DIR

TRAIN_SETTINGS = ["--steps", "350", "--batch-size", "16", "--save-every", "50", "--save-total-limit", "1",
                  "--max-length", "256", "--system-prompt", "", "--seed", "0", "--quiet", "--overwrite"]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def sample(problems: list[dict], n: int, seed: int, batch: int = 64, max_new_tokens: int = 256) -> list[dict]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lab.world.measure import final_answer, split
    from lab.world.train import default_system_prompt, policy_messages
    from prm_annotate.world.truth import true_first_error

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(POLICY_DIR, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(POLICY_DIR, dtype=torch.float32).eval()
    system = default_system_prompt()
    out = []
    for start in range(0, len(problems), batch):
        chunk = problems[start:start + batch]
        texts = [tokenizer.apply_chat_template(policy_messages(p, system), tokenize=False, add_generation_prompt=True)
                 for p in chunk]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.inference_mode():
            gen = model.generate(**enc, do_sample=True, temperature=0.7, top_p=1.0, top_k=0, num_return_sequences=n,
                                 max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id)
        decoded = tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        for i, p in enumerate(chunk):
            for j in range(n):
                steps = split(decoded[i * n + j])
                if not steps:
                    continue
                out.append({"id": f"{p['id']}/{j}", "problem_id": p["id"], "problem": p["problem"],
                            "answer": p["answer"], "steps": steps, "label": true_first_error(p, steps),
                            "right": final_answer(decoded[i * n + j]) == p["answer"]})
        print(f"sampled {min(start + batch, len(problems))}/{len(problems)} problems", file=sys.stderr, flush=True)
    return out


def sampled(path: Path, problems: list[dict], n: int, seed: int) -> list[dict]:
    """The responses sampled for `problems`, kept in `path` (sampled again only if it is missing)."""
    if not path.is_file():
        write_jsonl(path, sample(problems, n, seed))
    return read_jsonl(path)


def trl_rows(responses: list[dict]) -> list[dict]:
    from prm_annotate.evaluation.labels import step_labels

    rows = []
    for r in responses:
        labels = step_labels(r["label"], len(r["steps"]))
        rows.append({"id": r["id"], "prompt": r["problem"], "completions": r["steps"][:len(labels)], "labels": labels})
    return rows


def cmd_sample(args: argparse.Namespace) -> None:
    from prm_annotate.world.problems import make_problems

    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    train = sampled(work / "train.sampled.jsonl", make_problems(args.train_problems, seed=args.seed, split="train"),
                    args.n, args.seed)
    held = sampled(work / "heldout.jsonl", make_problems(args.heldout_problems, seed=args.seed + 1, split="test"),
                   args.n, args.seed + 1)
    pids = sorted({r["problem_id"] for r in train})
    val = set(random.Random(args.seed).sample(pids, max(1, round(args.val_share * len(pids)))))
    write_jsonl(work / "train.trl.jsonl", trl_rows([r for r in train if r["problem_id"] not in val]))
    write_jsonl(work / "val.trl.jsonl", trl_rows([r for r in train if r["problem_id"] in val]))
    write_gold(work, held)
    right = sum(r["right"] for r in held)
    print(f"{len(train)} training responses ({len(val)} validation problems), {len(held)} held out "
          f"({right} right), {time.time() - started:.0f} s", file=sys.stderr)


def write_gold(work: Path, held: list[dict]) -> None:
    write_jsonl(work / "heldout.gold.jsonl", [{"id": r["id"], "problem_id": r["problem_id"], "label": r["label"]}
                                              for r in held])


def heldout(work: Path):
    from prm_annotate.reports.bon import read_scored
    from prm_annotate.evaluation.labels import load_gold
    from lab.world.prm.scores import Heldout

    records = read_jsonl(work / "heldout.jsonl")
    write_gold(work, records)
    scored = write_jsonl(work / "heldout.placeholder.jsonl",
                         [{**r, "prm": {"scores": [0.5] * len(r["steps"])}} for r in records])
    problems, _ = read_scored(str(scored))
    pids = list(dict.fromkeys(r["problem_id"] for r in records))
    return Heldout(pids, load_gold(str(work / "heldout.gold.jsonl")), problems,
                   {r["id"]: tuple(r["steps"]) for r in records}), records


def measure(work: Path, name: str, scores: dict[str, list[float]], threshold: float, **extra: object) -> dict:
    from lab.world.prm.scores import scorer_metrics

    import numpy as np

    from lab.world.prm.bootstrap import Draws, accuracy_metric, single

    held, _ = heldout(work)
    m = scorer_metrics(held, scores, threshold)
    pairs = int(sum(c[1] for c in m["rw_counts"]))
    iv = single(Draws(len(m["rw_counts"]), 1), np.asarray(m["rw_counts"], float), accuracy_metric)
    row = {"name": name, "right_over_wrong": m["right_over_wrong"], "rw_95": [iv.low, iv.high], "pairs": pairs,
           "step_auc": m["step_auc"], "f1": m["f1"], "threshold": threshold, **extra, "rw_counts": m["rw_counts"]}
    with (work / "results.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"| {name} | {row['right_over_wrong']:.1f} [{iv.low:.1f}, {iv.high:.1f}] ({pairs} pairs) | "
          f"{row['step_auc']:.3f} | {row['f1']:.1f} | {extra} |")
    return row


def cmd_compare(args: argparse.Namespace) -> None:
    """right > wrong of row a minus row b (the last of each name in results.jsonl), paired over problems."""
    import numpy as np

    from lab.world.prm.bootstrap import Draws, accuracy_metric, paired

    rows = {r["name"]: r for r in read_jsonl(args.workdir / "results.jsonl")}
    a, b = (np.asarray(rows[n]["rw_counts"], float) for n in (args.a, args.b))
    iv = paired(Draws(len(a), 1), a, b, accuracy_metric)
    print(f"right > wrong, {args.a} - {args.b}: {iv.estimate:+.1f} [{iv.low:+.1f}, {iv.high:+.1f}] ({iv.reading})")


def cmd_untrained(args: argparse.Namespace) -> None:
    from prm_annotate.prm.likelihood import UNTRAINED, untrained_step_probabilities

    from lab.world.train import default_system_prompt

    records = read_jsonl(args.workdir / "heldout.jsonl")
    system = default_system_prompt() if args.policy_prompt else None
    for stat in args.stats or list(UNTRAINED):
        started = time.time()
        out = untrained_step_probabilities(POLICY_DIR, [(r["problem"], r["steps"]) for r in records], stat,
                                           system_prompt=system)
        measure(args.workdir, f"untrained {stat}" + (" (policy's system prompt)" if system else ""),
                {r["id"]: s for r, s in zip(records, out)}, 0.5, seconds=round(time.time() - started, 1))


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def cmd_train(args: argparse.Namespace) -> None:
    import os

    work = args.workdir.resolve()
    # `--tree DIR`: the children run DIR's prm_annotate (`python -m` puts the working directory first).
    child = {"cwd": str(args.tree), "env": {**os.environ, "PYTHONPATH": str(args.tree)}} if args.tree else {}
    out = work / "prms" / args.name
    if args.policy_prompt:
        from lab.world.train import default_system_prompt

        args.args = [*args.args, "--system-prompt", default_system_prompt()]
    cmd = [sys.executable, "-m", "prm_annotate", "train", str(work / "train.trl.jsonl"), "--base", str(POLICY_DIR),
           "-o", str(out), "--eval", str(work / "val.trl.jsonl"), *TRAIN_SETTINGS, "--json", *args.args]
    run = subprocess.run(cmd, capture_output=True, text=True, **child)
    if run.returncode:
        sys.exit(run.stderr[-3000:])
    scored = work / "prms" / f"{args.name}.scored.jsonl"
    src = write_jsonl(work / "heldout.responses.jsonl",
                      [{k: r[k] for k in ("id", "problem", "steps")} for r in read_jsonl(work / "heldout.jsonl")])
    started = time.time()
    run = subprocess.run([sys.executable, "-m", "prm_annotate", "score", str(src), "--model", str(out), "-o",
                          str(scored), "--quiet"], capture_output=True, text=True, **child)
    if run.returncode:
        sys.exit(run.stderr[-3000:])
    measure_trained(work, args.name, {"score_s": round(time.time() - started), "args": " ".join(args.args)})


def measure_trained(work: Path, name: str, extra: dict) -> None:
    """The metrics of the PRM `name` from its scored file, with its training summary (config.json)."""
    out, scored = work / "prms" / name, work / "prms" / f"{name}.scored.jsonl"
    rows = read_jsonl(scored)
    config = json.loads((out / "config.json").read_text())
    summary = config["prm_annotate"]["result"]
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), "pt") as f:
        parameters = sum(_numel(f.get_slice(k).get_shape()) for k in f.keys() if k.startswith("score."))
    threshold = config["prm_annotate"].get("threshold") or 0.5
    measure(work, name, {r["id"]: r["prm"]["scores"] for r in rows}, threshold,
            train_s=round(summary["seconds"]), best_step=summary.get("best_step"),
            val_f1=summary.get("eval", {}).get("f1"), parameters=parameters,
            head_type=config.get("head_type", "step-stats"), **extra)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--train-problems", type=int, default=230)
    s.add_argument("--heldout-problems", type=int, default=88)
    s.add_argument("-n", type=int, default=8)
    s.add_argument("--val-share", type=float, default=0.1)
    s.add_argument("--seed", type=int, default=0)
    u = sub.add_parser("untrained")
    u.add_argument("--stats", nargs="*")
    u.add_argument("--policy-prompt", action="store_true", help="read with the policy's system prompt")
    t = sub.add_parser("train")
    t.add_argument("--name", required=True)
    t.add_argument("--tree", type=Path, help="a checkout whose prm_annotate trains and scores")
    t.add_argument("--policy-prompt", action="store_true", help="the PRM reads with the policy's system prompt")
    t.add_argument("args", nargs="*")
    c = sub.add_parser("compare", help="a paired difference of two measured rows' right > wrong")
    c.add_argument("a")
    c.add_argument("b")
    m = sub.add_parser("measure", help="measure a trained PRM again from its scored file")
    m.add_argument("--name", required=True)
    for p in (s, u, t, m, c):
        p.add_argument("--workdir", type=Path, default=Path("runs/prm-heads"))
    args = parser.parse_args(argv)
    if args.command == "measure":
        measure_trained(args.workdir.resolve(), args.name, {})
        return
    {"sample": cmd_sample, "untrained": cmd_untrained, "train": cmd_train, "compare": cmd_compare}[args.command](args)


if __name__ == "__main__":
    main()
