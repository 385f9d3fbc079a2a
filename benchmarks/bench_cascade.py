"""The judge cascade against the paper's pipeline on the arithmetic world: one run, same seeds,
every road's kept share, kept step labels against the truth, F1, and labelling compute at the
world's sizes and the paper's (testing/cascade_bench.py says what is billed and how).

    .venv/bin/python benchmarks/bench_cascade.py [--problems 40 -n 4] [--seed-problems 50] [--budgets 0,2,5,10,20,40] [--engine-lock FILE]

Phases (one engine at a time, each closed before the next starts; with `--engine-lock`, each of
1, 2 and 4 holds the lock, released while the PRM trains):
  1. the world policy samples the bulk (`--problems` x n, split "bench") and the seed slice
     (`--seed-problems` x n, split "seed": other problems); reused when --workdir holds them;
  2. the world judge judges the seed slice and the bulk; the policy verifies the seed slice
     (`rollout --strategy verify --judged`: consensus keeps the agreeing) and rolls out roads a, b;
  3. `export --format trl` -> `train --head likelihood --base lab/world/models/prm-base` -> `score` the
     bulk (the first judge: a PRM; no engine, transformers in process);
  4. [`--critic`: the critic judges the bulk, `--verdict-logprobs`;] the world judge runs the cascade at
     every budget (`JudgeStage` with `--escalate-from` the first judge's file); the policy verifies each.
Prints the frontier, the compute by part and T1 met / not met.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PRM_BASE = ROOT / "lab" / "world" / "models" / "prm-base"
CLI = [sys.executable, "-m", "prm_annotate"]


def engine_lock(path: Path | None):
    """Each engine phase under `--engine-lock` (a machine shared by several users: the lock is held
    while an engine runs, not while the PRM trains)."""
    @contextlib.contextmanager
    def held():
        if path is None:
            yield
            return
        with open(path, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
    return held


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cli(*args: str) -> str:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode != 0:
        raise RuntimeError(f"prm-annotate {' '.join(args[:2])} failed ({done.returncode}): {done.stderr[-3000:]}")
    return done.stdout


def manifest_bill(path: Path):
    from prm_annotate.engines.bill import Bill
    from prm_annotate.io.manifest import own_runs

    bills = [Bill.read(run["bill"]) for run in own_runs(str(path)) if isinstance(run.get("bill"), dict)]
    return sum(bills[1:], bills[0])


def judge_file(engine, src: Path, out: Path, seed: int, max_tokens: int, **cascade):
    """The world judge over `src` (a cascade with `cascade` settings), through the real runner; its
    stage's bill and, for a cascade, the first judge's and the escalated count."""
    from prm_annotate.engines.bill import Bill
    from prm_annotate.judging.cascade import first_judge_bill
    from prm_annotate.pipeline.runner import RunOptions, run_stage
    from prm_annotate.stages.judge import JudgeStage
    from prm_annotate.world import WORLD_JUDGE_PROMPT
    from testing.rollout_bench import reset_prefix_cache

    stage = JudgeStage(engine, prompt=WORLD_JUDGE_PROMPT, max_tokens=max_tokens, seed=seed, **cascade)
    reset_prefix_cache(engine)
    out.unlink(missing_ok=True)  # a reused --workdir's file would be resumed: its records unbilled
    try:
        run_stage(stage, RunOptions(str(src), str(out), batch_size=1024, quiet=True))
    finally:
        stage.close()
    second = Bill.of(stage.stats, None)
    if stage.cascade is None:
        return second, None, None
    first = first_judge_bill({"settings": {"cascade": stage.cascade.settings()}, "stats": dict(stage.stats)})
    return second, first, stage.cascade.settings()["escalated"]


@dataclass(frozen=True)
class World:
    """What differs between the two worlds: the policy, its budgets, how it samples, the truth."""

    name: str
    policy: Path
    max_tokens: int  # per response and per completion
    judge_max_tokens: int
    prm_max_length: int
    thinks: bool

    def sample(self, engine, problems: list[dict], path: Path, n: int, seed: int) -> list[dict]:
        from prm_annotate.pipeline.runner import RunOptions, run_stage
        from prm_annotate.stages.sample import SampleStage
        from prm_annotate.world import WORLD_SYSTEM_PROMPT
        from prm_annotate.world.think_report import TEMPERATURE
        from testing.consensus_bench import read_jsonl, write_jsonl
        from testing.rollout_bench import sample_responses

        if not self.thinks:
            return read_jsonl(write_jsonl(path, sample_responses(engine, problems, n=n, max_tokens=self.max_tokens,
                                                                 seed=seed)))
        source = write_jsonl(path.with_suffix(".problems.jsonl"), problems)
        stage = SampleStage(engine, n=n, temperature=TEMPERATURE, max_tokens=self.max_tokens, seed=seed,
                            system_prompt=WORLD_SYSTEM_PROMPT, reasoning="think")
        try:
            run_stage(stage, RunOptions(str(source), str(path), quiet=True))
        finally:
            stage.close()
        return read_jsonl(path)

    def truth(self, path: Path, gold: Path) -> list[dict]:
        """The gold file of the responses at `path` (their true first errors; traces' slips too)."""
        from prm_annotate.world import true_first_error
        from prm_annotate.world.think_report import trace_gold
        from testing.consensus_bench import read_jsonl, write_jsonl

        if self.thinks:
            return trace_gold(path.with_suffix(".problems.jsonl"), path, gold)
        return read_jsonl(write_jsonl(gold, [{"id": r["id"], "steps": r["steps"], "label": true_first_error(r, r["steps"])}
                                             for r in read_jsonl(path)]))


def worlds() -> dict[str, World]:
    from prm_annotate.world import POLICY_DIR, THINKER_DIR
    from prm_annotate.world.think_report import ThinkConfig

    think = ThinkConfig()
    return {"arithmetic": World("arithmetic", POLICY_DIR, 128, 256, 256, False),
            "think": World("thinking", THINKER_DIR, think.max_tokens, think.judge_max_tokens, 1024, True)}


def rollout_road(engine, src: Path, judged: Path, label: str, workdir: Path, args, world: World,
                 exhaustive: bool = False):
    from prm_annotate.strategies.exhaustive import Exhaustive
    from prm_annotate.strategies.verify import Verify
    from prm_annotate.world import WORLD_SYSTEM_PROMPT
    from testing.consensus_bench import Road, run_road

    road = Road(label, Exhaustive) if exhaustive else Road(label, Verify, True)
    return run_road(engine, src, judged, road, workdir, k=args.k, max_tokens=world.max_tokens, window=args.window,
                    seed=args.seed, system_prompt=WORLD_SYSTEM_PROMPT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=40, help="bulk problems (x -n responses)")
    parser.add_argument("--seed-problems", type=int, default=50, help="seed slice problems (x -n responses)")
    parser.add_argument("-n", type=int, default=4)
    parser.add_argument("-k", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budgets", type=lambda t: [float(x) for x in t.split(",")], default=[0, 2, 5, 10, 20, 40],
                        help="cascade budgets, percent of the bulk sent to the big judge (0: the first judge alone)")
    parser.add_argument("--train-steps", type=int, default=100)
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--critic", type=Path, default=None,
                        help="a trained critic (train --head critic) as a second first judge: its roads beside the PRM's")
    parser.add_argument("--critic-train-tokens", type=int, default=None,
                        help="the critic's training tokens, for its 3 x params x tokens (default: its world.json's "
                             "train_tokens, else its training left out, said so)")
    parser.add_argument("--world", choices=("arithmetic", "think"), default="arithmetic",
                        help="think: the shipped thinker's traces against the trace truth (corrected slips apart)")
    parser.add_argument("--engine-lock", type=Path, default=None,
                        help="a lock file each engine phase holds (flock), released between phases")
    parser.add_argument("--one-hold", action="store_true",
                        help="with --engine-lock: hold it once from the first judge to the last rollout (a shared "
                             "machine's queue is then waited for once; keep the run small)")
    args = parser.parse_args()

    from prm_annotate.engines.bill import count_parameters
    from prm_annotate.engines.vllm_engine import VLLMEngine
    from prm_annotate.io.prompt_files import SYSTEM_PROMPTS, load_prompt
    from prm_annotate.world import JUDGE_DIR, WORLD_SYSTEM_PROMPT, make_problems
    from testing.consensus_bench import read_jsonl
    from testing.cascade_bench import (COMPLETER_B, JUDGE_B, PRM_B, Part, Road, Training, check_t1, critic_paper_b,
                                       format_corrected, format_frontier, format_parts, score_road)

    world = worlds()[args.world]
    POLICY_DIR = world.policy

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-cascade-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    locked = engine_lock(args.engine_lock)
    policy_p, judge_p, prm_p = (count_parameters(str(d)) for d in (POLICY_DIR, JUDGE_DIR, PRM_BASE))

    # 1. responses: the bulk and the seed slice (other problems); reused from --workdir when there
    bulk_path, seed_path, gold = workdir / "bulk.jsonl", workdir / "seed.jsonl", workdir / "gold.jsonl"
    if all(p.is_file() for p in (bulk_path, seed_path, gold)):
        bulk, seed_slice, truth = (read_jsonl(p) for p in (bulk_path, seed_path, gold))
        log(f"reused {len(bulk)} bulk and {len(seed_slice)} seed responses from {workdir}")
    else:
        with locked():
            engine = VLLMEngine(str(POLICY_DIR), max_model_len=2048, start_timeout=300)
            try:
                bulk = world.sample(engine, make_problems(args.problems, seed=args.seed, split="bench"), bulk_path,
                                    args.n, args.seed)
                seed_slice = world.sample(engine, make_problems(args.seed_problems, seed=args.seed, split="seed"),
                                          seed_path, args.n, args.seed)
            finally:
                engine.close()
        truth = world.truth(bulk_path, gold)
        log(f"sampled {len(bulk)} bulk and {len(seed_slice)} seed responses ({time.perf_counter() - started:.0f} s)")

    hold = locked() if args.one_hold else contextlib.nullcontext()
    if args.one_hold:
        locked = contextlib.nullcontext  # type: ignore[assignment]  # the phases below run under `hold`
    hold.__enter__()

    # 2. the big judge on the seed slice and the bulk; the policy verifies the seed slice (its consensus:
    # the first judge's training labels) and rolls out roads (a) and (b). One hold of the lock.
    with locked():
        engine = VLLMEngine(str(JUDGE_DIR), max_model_len=2048, start_timeout=300)
        try:
            seed_judge, _, _ = judge_file(engine, seed_path, workdir / "seed.judged.jsonl", args.seed,
                                          world.judge_max_tokens)
            judge_bill, _, _ = judge_file(engine, bulk_path, workdir / "judged.jsonl", args.seed, world.judge_max_tokens)
        finally:
            engine.close()
        engine = VLLMEngine(str(POLICY_DIR), max_model_len=2048, start_timeout=300)
        try:
            seed_row = rollout_road(engine, seed_path, workdir / "seed.judged.jsonl", "seed slice: judge + verify",
                                    workdir, args, world)
            rows = {"a": rollout_road(engine, bulk_path, workdir / "judged.jsonl", "(a) exhaustive + judge", workdir,
                                      args, world, exhaustive=True),
                    "b": rollout_road(engine, bulk_path, workdir / "judged.jsonl", "(b) judge + verify", workdir, args,
                                      world)}
        finally:
            engine.close()
    log(f"judged {len(seed_slice) + len(bulk)}, rolled out the seed slice ({len(seed_row.kept)} of {len(seed_slice)} "
        f"kept) and roads a, b ({time.perf_counter() - started:.0f} s)")

    # 3. the first judge: a likelihood PRM on prm-base from the seed slice's consensus, scoring the bulk
    prm_dir = workdir / "prm"
    cli("export", seed_row.extra["consensus"], "--format", "trl", "-o", str(workdir / "seed.trl.jsonl"))
    system = load_prompt(WORLD_SYSTEM_PROMPT, SYSTEM_PROMPTS).text.strip()
    trained = orjson.loads(cli("train", str(workdir / "seed.trl.jsonl"), "--base", str(PRM_BASE), "--head", "likelihood",
                               "-o", str(prm_dir), "--steps", str(args.train_steps), "--batch-size", "16", "--lr", "3e-3",
                               "--eval-split", "0.1", "--eval-every", "50", "--save-every", "50", "--max-length",
                               str(world.prm_max_length), "--system-prompt", system, "--seed", str(args.seed),
                               "--overwrite", "--json"))
    cli("score", str(bulk_path), "-o", str(workdir / "prm.scored.jsonl"), "--model", str(prm_dir), "--quiet")
    prm_bill = manifest_bill(workdir / "prm.scored.jsonl")
    log(f"PRM: trained on {trained['examples']} responses ({trained['tokens']:,} tokens, threshold "
        f"{trained['threshold']}), scored the bulk ({time.perf_counter() - started:.0f} s)")

    # 4. [a trained critic's verdicts on the bulk,] the cascade at every budget from every first judge,
    # the policy's verify on each. One hold of the lock.
    firsts = {"PRM": workdir / "prm.scored.jsonl"}
    cascades = {}
    with locked():
        if args.critic is not None:
            engine = VLLMEngine(str(args.critic), max_model_len=2048, start_timeout=300)
            try:
                critic_bill, _, _ = judge_file(engine, bulk_path, workdir / "critic.first.jsonl", args.seed,
                                               world.judge_max_tokens, verdict_logprobs=True)
            finally:
                engine.close()
            firsts["critic"] = workdir / "critic.first.jsonl"
        engine = VLLMEngine(str(JUDGE_DIR), max_model_len=2048, start_timeout=300)
        try:
            for first, first_path in firsts.items():
                for budget in args.budgets:
                    out = workdir / f"cascade-{first}-{budget:g}.jsonl"
                    cascades[first, budget] = (out, *judge_file(engine, bulk_path, out, args.seed, world.judge_max_tokens,
                                                                escalate_from=str(first_path), budget=f"{budget:g}%"))
        finally:
            engine.close()
        engine = VLLMEngine(str(POLICY_DIR), max_model_len=2048, start_timeout=300)
        try:
            for (first, budget), (out, *_rest) in cascades.items():
                rows[first, budget] = rollout_road(engine, bulk_path, out, f"cascade {first} {budget:g}%", workdir, args,
                                                   world)
        finally:
            engine.close()
    log(f"{len(cascades)} cascades judged and rolled out ({time.perf_counter() - started:.0f} s)")
    hold.__exit__(None, None, None)

    def rollout_part(row) -> Part:
        return Part("rollouts", row.rollout.bill, policy_p, COMPLETER_B)

    seed_parts = [Part("seed judge", seed_judge, judge_p, JUDGE_B), rollout_part(seed_row)]
    first_parts = {"PRM": (Part("first judge (PRM, score)", prm_bill, prm_p, PRM_B),
                           Training(seed_parts, trained["tokens"], prm_p, PRM_B))}
    critic_note = ""
    if args.critic is not None:
        critic_p = count_parameters(str(args.critic))
        critic_b = critic_paper_b(critic_p, judge_p)
        tokens = args.critic_train_tokens
        if tokens is None:
            built = args.critic / "world.json"
            tokens = orjson.loads(built.read_bytes()).get("train_tokens") if built.is_file() else None
        critic_note = (f" The critic ({args.critic}, {critic_p:,} parameters: billed at {critic_b:g}B at paper sizes) "
                       + ("with its training left out (its tokens unknown)." if tokens is None else
                          f"trained on {tokens:,} tokens."))
        first_parts["critic"] = (Part("first judge (critic, judge)", critic_bill, critic_p, critic_b),
                                 Training(seed_parts, tokens or 0, critic_p, critic_b))
    n = len(bulk)
    roads = [Road("(a) exhaustive MC + judge", [rollout_part(rows["a"]), Part("judge", judge_bill, judge_p, JUDGE_B)],
                  n, str(workdir / "judged.jsonl"), rows["a"].extra["consensus"]),
             Road("(b) judge + verify", [rollout_part(rows["b"]), Part("judge", judge_bill, judge_p, JUDGE_B)],
                  n, str(workdir / "judged.jsonl"), rows["b"].extra["consensus"])]
    for (first, budget), (out, second, _first, escalated) in cascades.items():
        road = "(e)" if first == "PRM" else "(d)"
        # at 0% the records without a verdict still go to the big judge: "alone" only when none did
        label = (f"(c) {first} alone + verify" if budget == 0 and not escalated else
                 f"{road} {first} -> judge cascade, budget {budget:g}% + verify")
        part, training = first_parts[first]
        parts = [rollout_part(rows[first, budget]), part]
        if second.requests:
            parts.append(Part("second judge (escalated)", second, judge_p, JUDGE_B))
        roads.append(Road(label, parts, n, str(out), rows[first, budget].extra["consensus"], training, escalated))
    for road in roads:
        score_road(road, gold)

    right = sum(bool(r["correct"]) for r in bulk)
    print(f"Judge cascade on the {world.name} world: bulk {args.problems} problems x {args.n} = {n} responses ({right} "
          f"right answers), K={args.k}; seed slice {args.seed_problems} other problems x {args.n} = {len(seed_slice)} "
          f"responses, consensus kept {len(seed_row.kept)}: the PRM (`train --head likelihood` on prm-base, "
          f"{trained['steps']} steps, {trained['tokens']:,} training tokens, eval F1 {trained['eval'].get('f1', float('nan')):.1f}, "
          f"threshold {trained['threshold']}) learnt from them only. Sizes, world: policy {policy_p:,}, judge "
          f"{judge_p:,}, PRM {prm_p:,} parameters; paper: completer {COMPLETER_B:g}B, judge {JUDGE_B:g}B, PRM {PRM_B:g}B. "
          f"Compute in billion-parameter-tokens per kept response.{critic_note} Files: {workdir}. "
          f"{time.perf_counter() - started:.0f} s on a shared machine.\n")
    print(format_frontier(roads))
    if world.thinks:
        print("\nTraces with a corrected slip (the truth: the slip is the first error), road by road:\n")
        print(format_corrected(roads, truth))
    print("\nWhere the compute goes (the whole bulk run):\n")
    print(format_parts(roads))
    print("\nTargets:")
    for text, ok in check_t1(roads):
        print(f"- [{'met' if ok else 'NOT met'}] {text}")


if __name__ == "__main__":
    main()
