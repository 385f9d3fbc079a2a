"""Rollout strategies against exhaustive: the same responses, the same seeds, one engine, one run.

Workload 1 (always): the arithmetic world. Problems from `make_problems`, responses sampled by the
shipped tiny policy (T=0.7), rolled out with K=8 by every strategy, with and without prefix
sharing. Prints generated tokens, completions, wall time (fastest of --repeats runs, taken in turns) and
the engine's busy share as ratios to exhaustive, lock-step rows as the baseline (testing/lockstep.py), agreement of
first_error with exhaustive, and accuracy against the world's true first error.
Workload 2 (`--smollm2`, slow: ~150 tokens/s here): SmolLM2-135M-Instruct on a few GSM8K problems.
The consensus section (`--consensus`, on the world; `--consensus-smollm2` on SmolLM2/GSM8K): what
the consensus set costs per road, the paper's order (exhaustive or binary +share, then the judge)
against the cheap road (judge, then rollout --strategy verify), with its quality against the truth
(testing/consensus_bench.py), compute by the bill at the paper's sizes, and the verify road's floor
(testing/verify_floor.py: its completions with foresight of exhaustive's own, kept with
--keep-completions K). `--world think` runs it on the thinking world (the shipped thinker's traces,
the trace truth; `--think-problems` x -n traces).

    .venv/bin/python benchmarks/bench_rollout_strategies.py [--smollm2] [--consensus [--consensus-only]] [--world think]

One engine at a time; each is closed before the next starts and before the process exits.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test equipment (testing/) lives at the repository root
GSM8K = ROOT / "data" / "gsm8k" / "test.jsonl"

from testing.rollout_bench import (compare_strategies, format_table, format_targets, lockstep,  # noqa: E402
                                   sample_responses, throughput_curve, variants, with_zero_rule,
                                   without_speculation)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def world_workload(args) -> str:
    from prm_annotate.engines.vllm_engine import VLLMEngine
    from prm_annotate.world import POLICY_DIR, make_problems, true_first_error

    problems = make_problems(args.problems, seed=args.seed, split="bench")
    engine = VLLMEngine(str(POLICY_DIR), max_model_len=2048, start_timeout=300)
    try:
        t0 = time.perf_counter()
        responses = sample_responses(engine, problems, n=args.n, max_tokens=128, seed=args.seed)
        right = sum(bool(r["correct"]) for r in responses)
        truth = {r["id"]: true_first_error(r, r["steps"]) for r in responses}
        flawed = sum(1 for r in responses if r["correct"] and truth[r["id"]] >= 0)
        steps = sum(len(r["steps"]) for r in responses) / len(responses)
        log(f"world: {len(responses)} responses in {time.perf_counter() - t0:.1f} s")
        plain = variants(speculate=args.speculate)
        chosen = plain + [without_speculation(v) for v in plain if v.label in ("binary +share", "scan +share")] \
            + [lockstep(v) for v in plain if v.label in ("exhaustive", "binary +share")] \
            + [with_zero_rule(v, "beta-binomial") for v in plain if v.label in ("binary +share", "adaptive-binary +share")]
        if args.variants:
            chosen = [v for v in chosen if v.label == "exhaustive" or v.label in args.variants]
        curve = throughput_curve(engine, [p["problem"] for p in problems], (1, 8, 32, 64, 128, 256))
        rows = compare_strategies(engine, responses, chosen, k=args.k, max_tokens=128,
                                  window=args.window, truth=lambda r: truth[r["id"]], seed=args.seed,
                                  progress=log, repeats=args.repeats)
    finally:
        engine.close()
    head = (f"Arithmetic world: {args.problems} problems x {args.n} responses (shipped policy, T=0.7), "
            f"K={args.k}, {steps:.1f} steps per response; {right} of {len(responses)} final answers right "
            f"({flawed} of them with a wrong step); {sum(v >= 0 for v in truth.values())} responses have a "
            f"true first error.")
    return (head + "\n\n" + format_table(rows) + "\n\nTargets:\n" + format_targets(rows)
            + "\n\nThe engine's throughput by requests at once (32-token completions):\n\n" + curve)


def smollm2_workload(args) -> str:
    from prm_annotate.engines.local_models import prepare_smollm2
    from prm_annotate.engines.vllm_engine import VLLMEngine
    from prm_annotate.io.inputs import read_records

    problems = [rec for _, rec in read_records(args.gsm8k, "gsm8k")][: args.smollm2_problems]
    # SmolLM2 mostly breaks lines with a single newline: "\n" gives it steps of about a sentence.
    sep = args.smollm2_step_sep.encode().decode("unicode_escape")
    model = prepare_smollm2()
    engine = VLLMEngine(str(model), max_model_len=2048, dtype="float32", start_timeout=600)
    try:
        responses = sample_responses(engine, problems, n=args.smollm2_n, max_tokens=args.smollm2_max_tokens,
                                     seed=args.seed, step_sep=sep)
        if args.save_responses:
            Path(args.save_responses).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in responses))
        right = sum(bool(r["correct"]) for r in responses)
        steps = sum(len(r["steps"]) for r in responses) / len(responses)
        chosen = [v for v in variants(shared=False, speculate=args.speculate) if v.label != "scan verify"]
        chosen += [without_speculation(v) for v in chosen[1:]] + [lockstep(chosen[0])]
        if args.variants:
            chosen = [v for v in chosen if v.label == "exhaustive" or v.label in args.variants]
        curve = throughput_curve(engine, [p["problem"] for p in problems], (1, 4, 16, 32, 64))
        rows = compare_strategies(engine, responses, chosen, k=args.smollm2_k,
                                  max_tokens=args.smollm2_max_tokens, window=args.window, seed=args.seed,
                                  progress=log, step_sep=sep, repeats=args.repeats)
    finally:
        engine.close()
    head = (f"SmolLM2-135M-Instruct on GSM8K test: {len(problems)} problems x {args.smollm2_n} responses, "
            f"K={args.smollm2_k}, max {args.smollm2_max_tokens} tokens, steps split on {sep!r}, "
            f"{steps:.1f} steps per response; "
            f"{right} of {len(responses)} final answers right (no true first error: accuracy not measured).")
    return (head + "\n\n" + format_table(rows) + "\n\nTargets:\n" + format_targets(rows, adaptive_faster=False)
            + "\n\nThe engine's throughput by requests at once (32-token completions):\n\n" + curve)


def consensus_report(rows, judge, head: str, truth: bool, floor=None) -> str:
    from testing.consensus_bench import format_outcomes, format_roads, format_targets

    return (head + "\n\n" + format_roads(rows, judge, floor) + "\n\nWhat verify found of the judge's claims:\n\n"
            + format_outcomes(rows) + ("\n\nTargets:\n" + format_targets(rows, floor=floor) if truth else ""))


def run_roads(args, policy: Path, responses_path: Path, judged: Path, workdir: Path, *, k: int, max_tokens: int,
              system_prompt: str):
    """Every chosen road on one engine of `policy`; exhaustive keeps all K completions per step, so
    the verify road's floor (testing/verify_floor.py) is read from its own run. (rows, the floor or None)."""
    from prm_annotate.engines.vllm_engine import VLLMEngine
    from prm_annotate.stages.judged_file import JudgedFile
    from testing.consensus_bench import ROADS, run_road
    from testing.verify_floor import prompt_ids_of, text_counter, verify_floor

    roads = [r for r in ROADS if args.roads is None or r.label == ROADS[0].label or r.label in args.roads]
    engine = VLLMEngine(str(policy), max_model_len=2048, start_timeout=300)
    try:
        rows = []
        for road in roads:
            rows.append(run_road(engine, responses_path, judged, road, workdir, k=k, max_tokens=max_tokens,
                                 window=args.window, seed=args.seed, speculate=args.speculate,
                                 system_prompt=system_prompt, keep_completions=k if road is ROADS[0] else 0))
            log(f"{road.label}: {rows[-1].rollout.tokens:,} tokens in {rows[-1].rollout.wall:.1f} s, "
                f"{len(rows[-1].kept)} kept")
    finally:
        engine.close()
    if "judge + verify" not in {r.label for r in rows}:
        return rows, None
    floor = verify_floor(Path(rows[0].extra["rollouts"]), JudgedFile.load(str(judged)).claim,
                         text_counter(str(policy)),
                         prompt_ids_of(responses_path, str(policy), k=k, max_tokens=max_tokens, seed=args.seed,
                                           temperature=0.7, system_prompt=system_prompt))
    return rows, floor


def floor_note(floor, rows) -> str:
    ex = rows[0]
    counted = floor.retokenized_all + floor.stops_all
    diff = counted - floor.engine_all
    return (f"The floor: {floor.completions:,} completions on {floor.responses_rolled_out} responses, "
            f"{floor.decode_tokens:,} tokens (exhaustive's kept texts re-tokenized by the completer's tokenizer, "
            f"{floor.decode_tokens - floor.stop_tokens:,}, plus the stop token of each of the {floor.stop_tokens:,} "
            f"completions not cut at the budget) and {floor.prefill_tokens:,} prefill tokens (a perfect prefix cache: "
            f"each distinct token prefix of the prompts it needs, once). Counted so, all of exhaustive's {ex.extra['completions']:,} completions make "
            f"{counted:,} tokens ({floor.retokenized_all:,} re-tokenized + {floor.stops_all:,} stop tokens) against "
            f"the engine's {floor.engine_all:,} generated_tokens ({diff:+,}, "
            f"{100.0 * diff / max(1, floor.engine_all):+.3f}%)." + "".join(
                f" {r.label}: {r.rollout.tokens:,} tokens = {r.rollout.tokens - r.extra['unused']:,} its plans asked "
                f"for (one completion a round) + {r.extra['unused']:,} of speculation never used; "
                f"{r.rollout.tokens / max(1, floor.decode_tokens):.2f}x the floor, "
                f"{(r.rollout.tokens - r.extra['unused']) / max(1, floor.decode_tokens):.2f}x without the speculation."
                for r in rows if r.label.startswith("judge + verify")))


def consensus_world(args) -> str:
    from prm_annotate.engines.vllm_engine import VLLMEngine
    from prm_annotate.world import JUDGE_DIR, POLICY_DIR, WORLD_JUDGE_PROMPT, make_problems, true_first_error
    from testing.consensus_bench import floor_row, judge_responses, score_roads, write_jsonl
    from testing.rollout_bench import SYSTEM_PROMPT

    workdir = Path(tempfile.mkdtemp(prefix="bench-consensus-"))
    problems = make_problems(args.consensus_problems, seed=args.seed, split="bench")
    engine = VLLMEngine(str(POLICY_DIR), max_model_len=2048, start_timeout=300)
    try:
        responses = sample_responses(engine, problems, n=args.n, max_tokens=128, seed=args.seed)
    finally:
        engine.close()
    responses_path = write_jsonl(workdir / "responses.jsonl", responses)
    truth = {r["id"]: true_first_error(r, r["steps"]) for r in responses}
    gold = write_jsonl(workdir / "gold.jsonl", [{"id": r["id"], "steps": r["steps"], "label": truth[r["id"]]}
                                                for r in responses])
    judged = workdir / "judged.jsonl"
    engine = VLLMEngine(str(JUDGE_DIR), max_model_len=2048, start_timeout=300)
    try:
        judge = judge_responses(engine, responses_path, judged, prompt=WORLD_JUDGE_PROMPT, max_tokens=256,
                                seed=args.seed)
    finally:
        engine.close()
    log(f"consensus: judged {len(responses)} responses, {judge.tokens:,} tokens in {judge.wall:.1f} s")
    rows, floor = run_roads(args, POLICY_DIR, responses_path, judged, workdir, k=args.k, max_tokens=128,
                                      system_prompt=SYSTEM_PROMPT)
    score_roads(rows, gold)
    right = sum(bool(r["correct"]) for r in responses)
    unparsed = sum(r["judge"]["first_error"] is None for r in map(orjson.loads, judged.read_bytes().splitlines()))
    head = (f"Consensus on the arithmetic world: {args.consensus_problems} problems x {args.n} responses, K={args.k}; "
            f"{right} of {len(responses)} final answers right, {sum(v >= 0 for v in truth.values())} with a true "
            f"first error; the judge (shipped, {WORLD_JUDGE_PROMPT} prompt) left {unparsed} unparsed, "
            f"{judge.tokens:,} tokens in {judge.wall:.1f} s. Files: {workdir}")
    return consensus_report(rows, judge, head, truth=True, floor=floor_row(floor, rows) if floor else None) + (
        "\n\n" + floor_note(floor, rows) if floor else "")


def consensus_think(args) -> str:
    """The roads on the thinking world: the shipped thinker's traces (`--reasoning think`, steps
    cut by paragraphs, as `make demo-think` samples them), the world judge, the trace truth."""
    from prm_annotate.engines.vllm_engine import VLLMEngine
    from prm_annotate.pipeline.runner import RunOptions, run_stage
    from prm_annotate.stages.sample import SampleStage
    from prm_annotate.world import JUDGE_DIR, THINKER_DIR, WORLD_JUDGE_PROMPT, WORLD_SYSTEM_PROMPT, make_problems
    from prm_annotate.world.think_report import TEMPERATURE, ThinkConfig, trace_gold
    from testing.consensus_bench import floor_row, judge_responses, score_roads, write_jsonl

    defaults = ThinkConfig()
    workdir = Path(tempfile.mkdtemp(prefix="bench-consensus-think-"))
    problems_path = write_jsonl(workdir / "problems.jsonl",
                                make_problems(args.think_problems, seed=args.seed, split="bench"))
    responses_path, judged, gold = workdir / "responses.jsonl", workdir / "judged.jsonl", workdir / "gold.jsonl"
    engine = VLLMEngine(str(THINKER_DIR), max_model_len=2048, start_timeout=300)
    t0 = time.perf_counter()
    try:
        stage = SampleStage(engine, n=args.n, temperature=TEMPERATURE, max_tokens=defaults.max_tokens, seed=args.seed,
                            system_prompt=WORLD_SYSTEM_PROMPT, reasoning="think")
        try:
            run_stage(stage, RunOptions(str(problems_path), str(responses_path), quiet=True))
        finally:
            stage.close()
    finally:
        engine.close()
    log(f"think: sampled in {time.perf_counter() - t0:.1f} s")
    truth = trace_gold(problems_path, responses_path, gold)
    engine = VLLMEngine(str(JUDGE_DIR), max_model_len=2048, start_timeout=300)
    try:
        judge = judge_responses(engine, responses_path, judged, prompt=WORLD_JUDGE_PROMPT,
                                max_tokens=defaults.judge_max_tokens, seed=args.seed)
    finally:
        engine.close()
    log(f"think: judged {len(truth)} responses, {judge.tokens:,} tokens in {judge.wall:.1f} s")
    rows, floor = run_roads(args, THINKER_DIR, responses_path, judged, workdir, k=args.k,
                                      max_tokens=defaults.max_tokens, system_prompt=WORLD_SYSTEM_PROMPT)
    score_roads(rows, gold)
    records = [orjson.loads(line) for line in responses_path.read_bytes().splitlines()]
    steps = sum(len(r["steps"]) for r in records) / max(1, len(records))
    unparsed = sum(r["judge"]["first_error"] is None for r in map(orjson.loads, judged.read_bytes().splitlines()))
    n = len(truth)
    head = (f"Consensus on the thinking world: {args.think_problems} problems x {args.n} traces of the shipped thinker "
            f"(T={TEMPERATURE}, --reasoning think, max {defaults.max_tokens} tokens), {n} responses, {steps:.1f} steps "
            f"(paragraphs of thought and answer) per response, K={args.k}; truth (trace_truth): "
            f"{sum(g['label'] != -1 for g in truth)} with a wrong paragraph, {sum(g['corrected_slips'] > 0 for g in truth)} "
            f"with a corrected slip, {sum(g['uncaught_slips'] > 0 for g in truth)} with a slip never caught, "
            f"{sum(g['final_answer_correct'] is True for g in truth)} right answers, "
            f"{sum(not g['finished'] for g in truth)} thoughts cut; the judge (shipped, {WORLD_JUDGE_PROMPT} prompt, "
            f"max {defaults.judge_max_tokens} tokens) left {unparsed} unparsed, {judge.tokens:,} tokens in "
            f"{judge.wall:.1f} s. Files: {workdir}")
    return consensus_report(rows, judge, head, truth=True, floor=floor_row(floor, rows) if floor else None) + (
        "\n\n" + floor_note(floor, rows) if floor else "")


def consensus_smollm2(args) -> str:
    from prm_annotate.engines.local_models import prepare_smollm2
    from prm_annotate.engines.vllm_engine import VLLMEngine
    from prm_annotate.io.inputs import read_records
    from testing.consensus_bench import ROADS, judge_responses, run_road, score_roads, write_jsonl

    workdir = Path(tempfile.mkdtemp(prefix="bench-consensus-smollm2-"))
    problems = [rec for _, rec in read_records(args.gsm8k, "gsm8k")][: args.smollm2_problems]
    sep = args.smollm2_step_sep.encode().decode("unicode_escape")
    engine = VLLMEngine(str(prepare_smollm2()), max_model_len=2048, dtype="float32", start_timeout=600)
    try:
        responses = sample_responses(engine, problems, n=args.smollm2_n, max_tokens=args.smollm2_max_tokens,
                                     seed=args.seed, step_sep=sep)
        responses_path = write_jsonl(workdir / "responses.jsonl", responses)
        judged = workdir / "judged.jsonl"
        # The 135M model as its own judge, as `make demo-real` runs it: ProcessBench's template, the index forced.
        judge = judge_responses(engine, responses_path, judged, prompt="processbench", constrained=True,
                                max_tokens=args.smollm2_max_tokens, seed=args.seed)
        log(f"consensus (SmolLM2): judged {len(responses)} responses, {judge.tokens:,} tokens in {judge.wall:.1f} s")
        roads = [r for r in ROADS if args.roads is None or r.label == ROADS[0].label or r.label in args.roads]
        rows = []
        for road in roads:
            rows.append(run_road(engine, responses_path, judged, road, workdir, k=args.smollm2_k,
                                 max_tokens=args.smollm2_max_tokens, window=args.window, seed=args.seed,
                                 step_sep=sep, speculate=args.speculate))
            log(f"{road.label}: {rows[-1].rollout.tokens:,} tokens in {rows[-1].rollout.wall:.1f} s, "
                f"{len(rows[-1].kept)} kept")
    finally:
        engine.close()
    score_roads(rows, None)
    right = sum(bool(r["correct"]) for r in responses)
    head = (f"Consensus with SmolLM2-135M-Instruct on GSM8K test (policy, completer and judge): {len(problems)} problems "
            f"x {args.smollm2_n} responses, K={args.smollm2_k}, max {args.smollm2_max_tokens} tokens, steps split on "
            f"{sep!r}; {right} of {len(responses)} final answers right; no truth (quality only against exhaustive's "
            f"consensus). Files: {workdir}")
    return consensus_report(rows, judge, head, truth=False)


def main() -> None:
    from prm_annotate.engines.defaults import SPECULATE_IN_PROCESS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=60)
    parser.add_argument("-n", type=int, default=4, help="responses per problem")
    parser.add_argument("-k", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", type=lambda text: text.split(","), default=None,
                        help="only these rows (exhaustive always), comma-separated, "
                             "e.g. 'binary +share,binary +share --speculate 0'")
    parser.add_argument("--repeats", type=int, default=2, help="runs of every row, in turns; the fastest is shown")
    parser.add_argument("--window", type=int, default=1024,
                        help="records in flight (lock-step rows: records per batch), as rollout's --batch-size")
    parser.add_argument("--speculate", type=int, default=SPECULATE_IN_PROCESS,
                        help="rollout's --speculate for every row but the '--speculate 0' and lock-step ones")
    parser.add_argument("--smollm2", action="store_true", help="also run the (slow) SmolLM2 GSM8K workload")
    parser.add_argument("--smollm2-only", action="store_true")
    parser.add_argument("--gsm8k", type=Path, default=GSM8K, help="GSM8K-format problems for the SmolLM2 workload")
    parser.add_argument("--smollm2-problems", type=int, default=3)
    parser.add_argument("--smollm2-n", type=int, default=2)
    parser.add_argument("--smollm2-k", type=int, default=4)
    parser.add_argument("--smollm2-max-tokens", type=int, default=256)
    parser.add_argument("--smollm2-step-sep", default=r"\n\n", help=r"step separator for SmolLM2 (e.g. '\n')")
    parser.add_argument("--save-responses", help="write the SmolLM2 responses here (JSONL)")
    parser.add_argument("--consensus", action="store_true", help="also run the consensus section on the world")
    parser.add_argument("--consensus-only", action="store_true", help="only the consensus section (world)")
    parser.add_argument("--consensus-smollm2", action="store_true", help="the consensus section on SmolLM2/GSM8K")
    parser.add_argument("--consensus-problems", type=int, default=240)
    parser.add_argument("--world", choices=("arithmetic", "think"), default="arithmetic",
                        help="the consensus section's world: arithmetic, or the thinking world's traces")
    parser.add_argument("--think-problems", type=int, default=32, help="problems of --world think (x -n traces)")
    parser.add_argument("--roads", type=lambda text: text.split(","), default=None,
                        help="only these consensus roads (exhaustive + judge always), comma-separated")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from prm_annotate.engines import exit_process

    code = 0
    try:
        only = args.smollm2_only or args.consensus_only or (args.consensus_smollm2 and not args.consensus)
        if not only:
            print(world_workload(args), flush=True)
        if args.smollm2 or args.smollm2_only:
            print("\n" + smollm2_workload(args), flush=True)
        if args.consensus or args.consensus_only:
            print("\n" + (consensus_think(args) if args.world == "think" else consensus_world(args)), flush=True)
        if args.consensus_smollm2:
            print("\n" + consensus_smollm2(args), flush=True)
    except Exception as exc:  # engines are closed by now; say what failed and leave with status 1
        log(f"bench_rollout_strategies: {type(exc).__name__}: {exc}")
        code = 1
    exit_process(code)


if __name__ == "__main__":
    main()
