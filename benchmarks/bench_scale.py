"""Every command at scale: peak memory flat in the input's size, time near a plain pass (issue 59).

    .venv/bin/python benchmarks/bench_scale.py [--full] [--sizes 10000,100000] [--long-sizes 10000]
        [--only consensus,stats] [--workdir runs/scale] [--keep]

Two record sets, copied with new ids to each size: today's world (`make demo`'s files, kept in
benchmarks/data/world: 160 responses of 40 problems with their rollouts, judgements and truth), and
long traces built from the 30 real thinking traces of tests/data/long_traces.jsonl (20-60 KB
records, cut into steps at their blank lines, with a made-up MC and judge verdict each). Each command runs
in a child process (`python -m prm_annotate ...`, or for sample, rollout --judged and judge a small
driver here with a scripted engine: the driver's own cost, testing/scripted_engine.py); its peak
resident memory is read from the operating system (testing/peak_memory.py: the rusage of that child, started by a small process) and its wall
time beside a plain orjson pass over the same files in the same run (read every input, write the
first input's records back; for consensus: read both files, join on id, write the kept pairs, the
judged records found by id through their offsets, as a join that holds no records would; for `plan`,
which tokenizes, a bare pass of the same tokenizer over each record's problem and steps).

Targets, printed met / not met: at each size above the smallest, peak memory at most 1 GB and at
most 300 bytes a record above the smallest size's figure (the growth per record added); consensus
at most 4x its plain join. --full adds 10^6 world records and 10^5 long traces: about 20 GB of disk
(check `df -h`) and most of an hour on 2 cores. Times are wall times on a shared machine: compare
within a run.
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testing.peak_memory import run_measured  # noqa: E402  (the repository on the path first)

SEED = ROOT / "benchmarks" / "data" / "world"
LONG = ROOT / "tests" / "data" / "long_traces.jsonl"
PY = sys.executable
MODELS = ROOT / "prm_annotate" / "world" / "models"  # plan reads their tokenizers and configs
GB = 1 << 30
PER_RECORD = 300  # bytes of peak memory a record may add
CONSENSUS_FACTOR = 4.0

# The plain pass a command is measured against, run in a child like the command.
PLAIN = r"""
import sys, orjson
mode, out, *inputs = sys.argv[1:]
if mode == "join":
    offsets, at = {}, 0
    with open(inputs[1], "rb") as fh:
        for line in fh:
            offsets[orjson.loads(line)["id"]] = at
            at += len(line)
    with open(inputs[0], "rb") as fh, open(inputs[1], "rb") as jh, open(out, "wb") as w:
        for line in fh:
            r = orjson.loads(line); at = offsets.get(r["id"])
            if at is not None:
                jh.seek(at); j = orjson.loads(jh.readline())
                if r["mc"]["first_error"] == j["judge"]["first_error"]:
                    w.write(orjson.dumps({**j, **r}) + b"\n")
elif mode.startswith("tokenize:"):  # plan's baseline: a bare tokenizer pass over the same texts
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(mode.partition(":")[2])
    with open(inputs[0], "rb") as fh, open(out, "wb") as w:
        for line in fh:
            r = orjson.loads(line)
            n = len(tok(r["problem"] + "\n\n" + "\n\n".join(r["steps"]))["input_ids"])
            w.write(orjson.dumps({"id": r["id"], "tokens": n}) + b"\n")
else:
    with open(out, "wb") as w:
        for i, path in enumerate(inputs):
            with open(path, "rb") as fh:
                for line in fh:
                    obj = orjson.loads(line)
                    if i == 0:
                        w.write(orjson.dumps(obj) + b"\n")
"""


# ---- the record sets ------------------------------------------------------------------------------

def _copy_id(rid: str, copy: int) -> str:
    """A new id per copy that keeps the shapes merge reads (`<problem id>/<i>`)."""
    head, sep, tail = rid.rpartition("/")
    return f"{head}.c{copy}{sep}{tail}" if sep else f"{rid}.c{copy}"


def _copies(seed: list[dict], n: int) -> Iterator[dict]:
    """`n` records: the seed's records again and again, each copy with new ids."""
    copy = 0
    while True:
        for obj in seed:
            if n <= 0:
                return
            out = dict(obj)
            out["id"] = _copy_id(obj["id"], copy)
            if isinstance(obj.get("problem_id"), str):
                out["problem_id"] = _copy_id(obj["problem_id"], copy)
            n -= 1
            yield out
        copy += 1


def _write(path: Path, records: Iterator[dict]) -> None:
    with open(path, "wb") as fh:
        for obj in records:
            fh.write(orjson.dumps(obj) + b"\n")


def _read(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        return [orjson.loads(line) for line in fh if line.strip()]


def long_seed() -> dict[str, list[dict]]:
    """The 30 long traces cut into steps at their blank lines, with made-up verdicts."""
    raw = [{k: v for k, v in obj.items() if k != "source"} for obj in _read(LONG)]
    responses = [{**obj, "problem_id": obj["id"],
                  "steps": [p.strip() for p in obj["response"].split("\n\n") if p.strip()]} for obj in raw]
    rollouts, judged, gold = [], [], []
    for i, obj in enumerate(responses):
        n = len(obj["steps"])
        mc_error = -1 if i % 3 == 0 else (i * 7) % n
        judge_error = mc_error if i % 4 else -1
        scores = [1.0 if mc_error == -1 or s < mc_error else 0.0 for s in range(n)]
        rollouts.append({**obj, "mc": {"k": 8, "label": "hard", "strategy": "exhaustive", "scores": scores,
                                       "first_error": mc_error, "completions": 8 * n, "generated_tokens": 400 * n,
                                       "model": "policy"}})
        judged.append({**obj, "judge": {"first_error": judge_error, "votes": [judge_error], "parse_failures": 0,
                                        "model": "judge", "prompt": "processbench",
                                        "outputs": [f"The first wrong paragraph: \\boxed{{{judge_error}}}"]}})
        gold.append({"id": obj["id"], "problem_id": obj["id"], "steps": obj["steps"], "label": mc_error,
                     "final_answer_correct": bool(obj.get("correct"))})
    problems = [{"id": obj["id"], "problem": obj["problem"], "answer": obj["answer"]} for obj in raw]
    return {"problems": problems, "responses": responses, "rollouts": rollouts, "judged": judged, "gold": gold}


def world_seed() -> dict[str, list[dict]]:
    return {name: _read(SEED / f"{name}.jsonl.gz") for name in ("problems", "responses", "rollouts", "judged", "gold")}


def build(seed: dict[str, list[dict]], n: int, folder: Path) -> dict[str, Path]:
    """The set at `n` responses (its problems in proportion), and four shards of its rollouts."""
    from prm_annotate.io.sharding import shard_of

    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    per_problem = max(1, len(seed["responses"]) // len(seed["problems"]))
    for name, records in seed.items():
        path = folder / f"{name}.jsonl"
        if not path.exists():
            _write(path, _copies(records, n // per_problem if name == "problems" else n))
        files[name] = path
    shards = [folder / f"shard{i}.jsonl" for i in range(4)]
    if not shards[-1].exists():
        handles = [open(p, "wb") for p in shards]
        with open(files["rollouts"], "rb") as fh:
            for line in fh:
                handles[shard_of(orjson.loads(line)["id"], 4)].write(line)
        for h in handles:
            h.close()
    files.update({f"shard{i}": p for i, p in enumerate(shards)})
    return files


# ---- the commands ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Command:
    name: str
    argv: Callable[[dict[str, Path], Path], list[str]]  # (files, output) -> the child's argv
    inputs: tuple[str, ...]  # the files its plain pass reads
    plain: str = "copy"
    world_only: bool = False  # needs what the made-up long-trace verdicts lack, or too slow on long traces


def cli(*args: str) -> list[str]:
    return [PY, "-m", "prm_annotate", *args]


def driver(stage: str, *args: str) -> list[str]:
    return [PY, str(Path(__file__).resolve()), "--child", stage, *args]


COMMANDS = (
    Command("consensus", lambda f, o: cli("consensus", str(f["rollouts"]), str(f["judged"]), "-o", str(o), "-q"),
            ("rollouts", "judged"), plain="join"),
    *(Command(f"export {fmt}", lambda f, o, fmt=fmt: cli("export", str(f["consensus"]), "--format", fmt, "-o",
                                                          str(o)), ("consensus",))
      for fmt in ("trl", "openrlhf", "qwen", "math-shepherd", "hf")),
    Command("export parquet", lambda f, o: cli("export", str(f["consensus"]), "--format", "trl", "-o",
                                               str(o.with_suffix(".parquet"))), ("consensus",)),
    Command("export hf-split", lambda f, o: cli("export", str(f["consensus"]), "--format", "hf", "--test-split",
                                                "0.1", "-o", str(o)), ("consensus",)),
    *(Command(f"export {fmt}", lambda f, o, fmt=fmt: cli("export", str(f["consensus"]), "--format", fmt, "--judged",
                                                          str(f["judged"]), "-o", str(o)), ("consensus", "judged"),
              world_only=True) for fmt in ("critic", "critic-hf")),
    Command("merge", lambda f, o: cli("merge", *(str(f[f"shard{i}"]) for i in range(4)), "--input",
                                      str(f["responses"]), "-o", str(o)),
            ("shard0", "shard1", "shard2", "shard3", "responses")),
    Command("stats", lambda f, o: cli("stats", str(f["rollouts"])), ("rollouts",)),
    Command("report", lambda f, o: cli("report", str(f["rollouts"]), str(f["judged"]), str(f["consensus"]),
                                       "-o", str(o.with_suffix(".html"))), ("rollouts", "judged", "consensus")),
    Command("compare", lambda f, o: cli("compare", str(f["rollouts"]), str(f["judged"]), str(f["consensus"]),
                                        "--gold", str(f["gold"])), ("rollouts", "judged", "consensus", "gold")),
    Command("evaluate", lambda f, o: cli("evaluate", str(f["judged"]), "--gold", str(f["gold"])),
            ("judged", "gold")),
    Command("segment", lambda f, o: cli("segment", str(f["responses"]), "-o", str(o)), ("responses",)),
    # plan on long traces: a tokenizer over every step's prefix of a 20-60 KB record (rollout) or the
    # whole record twice (judge) takes seconds a record, hours at these sizes: the world sets only
    Command("plan judge", lambda f, o: cli("plan", "judge", str(f["responses"]), "--model", str(MODELS / "judge"),
                                           "-o", str(o)), ("responses",), plain=f"tokenize:{MODELS / 'judge'}",
            world_only=True),
    Command("plan rollout", lambda f, o: cli("plan", "rollout", str(f["responses"]), "--model",
                                             str(MODELS / "policy"), "-k", "8", "-o", str(o)),
            ("responses",), plain=f"tokenize:{MODELS / 'policy'}", world_only=True),
    Command("grade", lambda f, o: cli("grade", str(f["responses"]), "-o", str(o), "-q"), ("responses",)),
    Command("sample (scripted)", lambda f, o: driver("sample", str(f["problems"]), str(o)), ("problems",)),
    Command("rollout --judged (scripted)", lambda f, o: driver("rollout", str(f["responses"]), str(o),
                                                                str(f["judged"])), ("responses", "judged")),
    Command("judge (scripted)", lambda f, o: driver("judge", str(f["responses"]), str(o)), ("responses",)),
)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def measure(argv: list[str]) -> tuple[float, int, int]:
    """(wall seconds, peak resident bytes, exit status) of a child process, its memory from the OS."""
    status, err, peak, seconds = run_measured(argv, env=_env())
    if status not in (0, 1):
        sys.stderr.write(err[-2000:])
    return seconds, peak, status


@dataclass
class Row:
    set: str
    command: str
    n: int
    seconds: float
    rss: int
    plain_seconds: float
    plain_rss: int
    status: int


def run_set(name: str, seed: dict[str, list[dict]], sizes: list[int], folder: Path, only: set[str] | None,
            keep: bool) -> list[Row]:
    rows = []
    for n in sizes:
        where = folder / f"{name}-{n}"
        files = build(seed, n, where)
        out = where / "out"
        out.mkdir(exist_ok=True)
        # consensus first: its output is export's, report's and compare's input
        files["consensus"] = out / "consensus.jsonl"
        for command in COMMANDS:
            if only and command.name.split()[0] not in only and command.name != "consensus":
                continue
            if command.world_only and name != "world":
                continue
            target = out / (command.name.split()[0] + ("-" + command.name.split()[1] if " " in command.name and
                                                       not command.name.endswith(")") else "") + ".jsonl")
            for path in (target, target.with_suffix(".manifest.json"), target.with_suffix(".html")):
                shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
            seconds, rss, status = measure(command.argv(files, target))
            plain_out = where / "plain.jsonl"
            plain_seconds, plain_rss, _ = measure([PY, "-c", PLAIN, command.plain, str(plain_out),
                                                   *(str(files[i]) for i in command.inputs)])
            plain_out.unlink(missing_ok=True)
            row = Row(name, command.name, n, seconds, rss, plain_seconds, plain_rss, status)
            rows.append(row)
            print(f"  {name:6} {n:>9,} {command.name:28} {seconds:8.1f} s {rss / 2**20:8.0f} MB   plain "
                  f"{plain_seconds:6.1f} s {plain_rss / 2**20:6.0f} MB   exit {status}", file=sys.stderr, flush=True)
        if not keep:
            shutil.rmtree(where)
    return rows


def verdicts(rows: list[Row]) -> list[str]:
    """The table with each row's targets, met or not."""
    lines = [f"| set | command | records | s | records/s | peak MB | plain s | plain MB | x plain | bytes/record "
             "above the smallest | targets |", "|" + "---|" * 11]
    smallest: dict[tuple[str, str], Row] = {}
    for row in sorted(rows, key=lambda r: (r.set, r.command, r.n)):
        base = smallest.setdefault((row.set, row.command), row)
        growth = (row.rss - base.rss) / (row.n - base.n) if row.n > base.n else None
        ratio = row.seconds / row.plain_seconds if row.plain_seconds else float("inf")
        targets = []
        if growth is not None:
            targets.append(f"memory {'met' if row.rss <= GB and growth <= PER_RECORD else 'NOT MET'}")
        if row.command == "consensus":
            targets.append(f"<= {CONSENSUS_FACTOR:g}x join {'met' if ratio <= CONSENSUS_FACTOR else 'NOT MET'}")
        if row.status not in (0, 1):
            targets.append(f"FAILED (exit {row.status})")
        lines.append(f"| {row.set} | {row.command} | {row.n:,} | {row.seconds:.1f} | {row.n / row.seconds:,.0f} | "
                     f"{row.rss / 2**20:.0f} | {row.plain_seconds:.1f} | {row.plain_rss / 2**20:.0f} | {ratio:.1f} | "
                     f"{'' if growth is None else f'{growth:.0f}'} | {', '.join(targets)} |")
    return lines


# ---- the scripted drivers (a child's own process) -------------------------------------------------

def child(stage_name: str, args: list[str]) -> int:
    from collections import deque

    from prm_annotate.pipeline.runner import RunOptions, run_and_close
    from testing.scripted_engine import ScriptedEngine

    def engine(script: Callable) -> ScriptedEngine:
        e = ScriptedEngine(script)
        e.requests = deque(maxlen=0)  # type: ignore[assignment]  # the scripted engine keeps nothing here
        return e

    source, output = args[0], args[1]
    if stage_name == "sample":
        from prm_annotate.stages.sample import SampleStage
        stage = SampleStage(engine(lambda r: ["Step 1: 2 + 1 = 3.\n\nThe answer is \\boxed{3}."] * r.n), n=4)
    elif stage_name == "rollout":
        from prm_annotate.stages.judged_file import JudgedFile
        from prm_annotate.stages.rollout import RolloutStage
        stage = RolloutStage(engine(lambda r: ["The answer is \\boxed{3}."] * r.n), k=2, strategy="verify",
                             judged=args[2], judged_file=JudgedFile.load(args[2]))
    else:
        from prm_annotate.stages.judge import JudgeStage
        stage = JudgeStage(engine(lambda r: ["\\boxed{-1}"] * r.n), prompt="processbench")
    return run_and_close(stage, RunOptions(source, output, quiet=True)).exit_code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="add 10^6 world records and 10^5 long traces")
    parser.add_argument("--sizes", default="10000,100000", help="world sizes")
    parser.add_argument("--long-sizes", default="10000", help="long-trace sizes")
    parser.add_argument("--only", default=None, help="commands to run, by their first word (consensus always runs)")
    parser.add_argument("--workdir", default=str(ROOT / "runs" / "scale"))
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.child:
        return child(args.child, rest)
    sizes = [int(float(s)) for s in args.sizes.split(",") if s] + ([1_000_000] if args.full else [])
    long_sizes = [int(float(s)) for s in args.long_sizes.split(",")] + ([100_000] if args.full else [])
    only = set(args.only.split(",")) if args.only else None
    folder = Path(args.workdir)
    rows = run_set("world", world_seed(), sizes, folder, only, args.keep)
    if long_sizes and long_sizes != [0]:
        rows += run_set("long", long_seed(), [1_000, *long_sizes] if len(long_sizes) == 1
                        else long_sizes, folder, only, args.keep)
    print("\n".join(verdicts(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
