"""Every file in the repository with reference verdicts on final answers, as (id, gold, response
text, verdict) rows: the ProcessBench responses of tests/data/grading (human
`final_answer_correct`) and the GPT-3 GSM8K solutions of data/gsm8k (`is_correct`). Used by
tests/grading/ and benchmarks/bench_grading.py.

The GSM8K and MATH responses are the grader's first development set. The olympiad-level ones
(OlympiadBench, Omni-MATH) are split in two by a fixed rule on the id, chosen before any rule was
written from them (`held_out`): the development half is what the rules for prose endings were
written from; the held-out half was not looked at while writing them, only measured.

The second development set for prose endings (`unboxed_math`): MATH's own level-5 solutions with
their boxes taken off, each right against its gold by construction, and the same texts against the
next problem's gold as a control for false accepts. The olympiad-level one
(`olympiad_solutions`): the human solutions of Omni-MATH-Rule and OlympiadBench on the problems the
verdict files do not hold, unboxed likewise, with the same control."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from prm_annotate.boxed import find_boxes
from prm_annotate.grading.answers import normalize_answer

ROOT = Path(__file__).resolve().parents[1]
GRADING_DIR = ROOT / "tests" / "data" / "grading"
GPT3_FILE = ROOT / "data" / "gsm8k" / "example_model_solutions.jsonl"
GPT3_KEYS = ["6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification"]
# The olympiad-level verdict files, split into a development and a held-out half.
OLYMPIAD = ("processbench-olympiadbench-gold.jsonl", "processbench-omnimath-gold.jsonl")

MATH_LEVEL5 = ROOT / "tests" / "data" / "math" / "test-level5.jsonl"
# Olympiad-level solutions on problems none of the verdict files has (lab/olympiad_dev_files.py).
OMNI_REST = ROOT / "tests" / "data" / "omnimath" / "omni-math-rule-rest.jsonl"
OLYMPIADBENCH_REST = ROOT / "tests" / "data" / "olympiadbench" / "test-rest.jsonl"

Row = tuple[str, str, str, bool]


def held_out(rid: str) -> bool:
    """The split rule, fixed before any rule was written from these files: a response is held out
    when the first byte of the SHA-256 of its id (UTF-8) is 128 or more (about half)."""
    return hashlib.sha256(rid.encode()).digest()[0] >= 128


def processbench(path: Path) -> list[Row]:
    rows = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        rows.append((r["id"], r["answer"], "\n\n".join(r["steps"]), r["final_answer_correct"]))
    return rows


def gpt3(path: Path = GPT3_FILE) -> list[Row]:
    rows = []
    for i, line in enumerate(path.read_text().splitlines()):
        r = json.loads(line)
        gold = r["ground_truth"].rsplit("A:", 1)[1].strip()
        rows.extend((f"{i}/{k}", gold, r[k]["solution"], r[k]["is_correct"]) for k in GPT3_KEYS)
    return rows


def verdict_files() -> dict[str, list[Row]]:
    """Name -> rows, for every verdict file (a new file in tests/data/grading is picked up)."""
    files = {p.relative_to(ROOT).as_posix(): processbench(p) for p in sorted(GRADING_DIR.glob("*.jsonl"))}
    files[GPT3_FILE.relative_to(ROOT).as_posix()] = gpt3()
    return files


def olympiad_split() -> dict[str, list[Row]]:
    """"dev" and "held-out": the olympiad-level responses of both files, by `held_out`."""
    rows = [row for name in OLYMPIAD for row in processbench(GRADING_DIR / name)]
    return {"dev": [r for r in rows if not held_out(r[0])], "held-out": [r for r in rows if held_out(r[0])]}


def unbox(solution: str) -> str:
    """The solution with every box replaced by its content ("... there are $\\boxed{20}$ rolls" ->
    "... there are $20$ rolls"); a box inside a box is unboxed with its outer one."""
    boxes = [b for b in find_boxes(solution, last=50) if b.closed]
    parts, pos = [], 0
    for b in boxes:
        if b.start >= pos:
            parts += [solution[pos:b.start], b.content]
            pos = b.end
    return "".join(parts + [solution[pos:]])


def unboxed_math(path: Path = MATH_LEVEL5) -> list[Row]:
    """MATH level-5 solutions ending in prose: the gold is the last `\\boxed{}` of the solution
    (how MATH gives its answers), and the text is the solution unboxed (`unbox`); verdict True."""
    rows = []
    for i, line in enumerate(path.read_text().splitlines()):
        solution = json.loads(line)["answer"]
        boxes = [b for b in find_boxes(solution, last=50) if b.closed]
        if boxes:
            rows.append((f"math-level5-{i}", boxes[-1].content.strip(), unbox(solution), True))
    return rows


def olympiad_solutions() -> list[Row]:
    """The olympiad-level development set for prose endings: the human solutions of Omni-MATH-Rule
    and OlympiadBench (its first solution) on the problems that no verdict file holds, unboxed, each
    against its benchmark's gold answer; verdict True (a solution states the answer it proves)."""
    rows = []
    for i, line in enumerate(OMNI_REST.read_text().splitlines()):
        r = json.loads(line)
        rows.append((f"omni-math-rule-rest-{i}", r["answer"], unbox(r["solution"]), True))
    for i, line in enumerate(OLYMPIADBENCH_REST.read_text().splitlines()):
        r = json.loads(line)
        rows.append((f"olympiadbench-rest-{r['id']}", r["final_answer"][0], unbox(r["solution"][0]), True))
    return rows


def control(rows: list[Row]) -> list[Row]:
    """Each unboxed solution against the gold of the next one, where the two golds differ as
    strings once normalised: verdict False (a wrong answer that the text never states)."""
    out = []
    for k, (rid, gold, text, _) in enumerate(rows):
        other = rows[(k + 1) % len(rows)][1]
        if normalize_answer(other) != normalize_answer(gold):
            out.append((rid + "/control", other, text, False))
    return out
