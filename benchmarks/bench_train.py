"""`train` (transformers' Trainer) against a plain torch loop: training throughput and padding.

    .venv/bin/python benchmarks/bench_train.py [--steps N] [--repeat N]

The same data (arithmetic-world responses: a reference solution and a corrupted copy per
problem, as `trl` rows), the same model (the world policy with the PRM head, built by `train`'s
own `load_base` with the same seed), the same batch (--batch-size responses a step), the same
optimiser (AdamW, constant learning rate, gradient clipping at 1) and the same loss, in one run:

- plain loop: shuffled batches, `StepCollator`, forward, backward, clip, step: nothing else;
- train: `prm.train.train` without length grouping (the same kind of batches as the plain loop:
  what the Trainer costs), and with it (the default: what a user gets).

Throughput is real (non-pad) tokens per second of the training steps alone, from the first step's
start to the last one's end (model loading, the Trainer's setup and the final save left out, as
the plain loop's setup is), each variant timed --repeat times and the fastest kept: on a shared machine the slower runs measure
the neighbours. Targets: `train` with its defaults no slower than the plain loop, and without
length grouping within 5% of it (the Trainer's own cost per step; 5% for noise).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prm_annotate.prm.checkpoint import PRMFormat  # noqa: E402
from prm_annotate.prm.data import StepCollator, encode, read_examples  # noqa: E402
from prm_annotate.prm.train import TrainConfig, load_base, train  # noqa: E402
from prm_annotate.world import POLICY_DIR  # noqa: E402
from testing.jsonl_files import write_jsonl  # noqa: E402
from testing.prm_fixtures import trl_rows, world_responses  # noqa: E402

LR = 1e-3


def plain_loop(data: str, steps: int, batch: int, seed: int) -> tuple[float, float]:
    """(real tokens per second, pad share) of a hand-written loop over shuffled batches."""
    import torch
    from transformers import set_seed

    set_seed(seed)
    fmt = PRMFormat()
    model, tokenizer = load_base(str(POLICY_DIR), fmt)
    features = encode(read_examples(data, "trl", soft=False)["train"], tokenizer, fmt, 2048, {})
    collator = StepCollator(tokenizer.pad_token_id or 0)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    generator = torch.Generator().manual_seed(seed)
    order: list[int] = []
    started = time.perf_counter()
    for _ in range(steps):
        if len(order) < batch:
            order += torch.randperm(len(features), generator=generator).tolist()
        inputs = collator([features[i] for i in order[:batch]])
        del order[:batch]
        loss = model(**inputs).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    seconds = time.perf_counter() - started
    return collator.tokens / seconds, collator.pad_share


def with_train(data: str, steps: int, batch: int, seed: int, grouped: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        result = train(TrainConfig(data=data, base=str(POLICY_DIR), output=f"{tmp}/prm", steps=steps,
                                   batch_size=batch, lr=LR, lr_scheduler="constant", warmup=0, seed=seed,
                                   save_every=steps + 1, group_by_length=grouped, quiet=True))
    return result.tokens / result.train_seconds, result.pad_share


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=64)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3, help="time each variant N times, keep the fastest")
    args = ap.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as tmp:
        data = str(write_jsonl(Path(tmp) / "train.jsonl", trl_rows(world_responses(args.problems, seed=0))))
        runs = {"plain torch loop": lambda: plain_loop(data, args.steps, args.batch_size, 0),
                "train, no length grouping": lambda: with_train(data, args.steps, args.batch_size, 0, False),
                "train (default: length grouping)": lambda: with_train(data, args.steps, args.batch_size, 0, True)}
        best: dict[str, tuple[float, float]] = {}
        for _ in range(args.repeat):  # interleaved, so a busy spell of the machine hits every variant
            for name, run in runs.items():
                rate, pad = run()
                if name not in best or rate > best[name][0]:
                    best[name] = (rate, pad)
    plain = best["plain torch loop"][0]
    print(f"{args.problems * 2} world responses, batch {args.batch_size}, {args.steps} steps, fastest of {args.repeat}")
    print(f"{'variant':36} {'tokens/s':>9} {'vs plain':>9} {'pad share':>10}")
    for name, (rate, pad) in best.items():
        print(f"{name:36} {rate:9.0f} {rate / plain:8.2f}x {100 * pad:9.1f}%")
    ungrouped, grouped = best["train, no length grouping"][0], best["train (default: length grouping)"][0]
    ok = grouped >= plain and ungrouped >= 0.95 * plain
    print(f"target (default no slower than plain; without grouping within 5%): {'met' if ok else 'NOT met'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
