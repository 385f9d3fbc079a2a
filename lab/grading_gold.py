"""How tests/data/grading's olympiad verdict files were derived (tests/data/SOURCES.md): ProcessBench
responses joined, by problem text, with the gold answers of the benchmark they come from.

    python -m lab.grading_gold PROCESSBENCH_SPLIT.json GOLD.jsonl --gold-field final_answer -o OUT.jsonl
    python -m lab.grading_gold math.json MATH_TEST.jsonl --gold-field answer --gold-in-box \
        --level-field level --exclude tests/data/grading/processbench-math-gold.jsonl -o OUT.jsonl

PROCESSBENCH_SPLIT.json is a JSON array of ProcessBench records `{id, generator, problem, steps,
final_answer_correct, label}`; GOLD.jsonl has one problem a line, its text in `question` or
`problem`, its gold answer in --gold-field (a string, or a list of one string as OlympiadBench's
`final_answer`), or, with --gold-in-box, the content of the last `\\boxed{}` of a worked solution in
that field (how the MATH data set gives its answers; MATH-500's `answer` is exactly that). A response is kept, in ProcessBench's order, when its problem text (runs of white
space read as one space) matches exactly one gold answer; the others are left out (their count is
printed), and so are the ids of the --exclude files (responses already in another verdict file).
Each output line is `{id, generator, problem, steps, answer, final_answer_correct, label}`, the
ProcessBench fields unchanged, plus `level` from --level-field when given. Nothing is read from the
responses but their problem and id.
"""
from __future__ import annotations

import argparse
import json
import sys

from prm_annotate.boxed import find_boxes


def _text(s: str) -> str:
    return " ".join(s.split())


def last_box(solution: str) -> str | None:
    boxes = [b for b in find_boxes(solution, last=1) if b.closed]
    return boxes[-1].content.strip() if boxes else None


def golds(path: str, field: str, in_box: bool = False,
          level_field: str | None = None) -> dict[str, tuple[str, str | None] | None]:
    """Problem text -> (its gold answer, its level); None when the text appears with different
    answers or (--gold-in-box) its solution has no box."""
    found: dict[str, tuple[str, str | None] | None] = {}
    for line in open(path, encoding="utf-8"):
        r = json.loads(line)
        answer = r[field]
        if isinstance(answer, list):
            if len(answer) != 1:
                raise SystemExit(f"{path}: {field} is a list of {len(answer)}")
            answer = answer[0]
        if in_box:
            answer = last_box(answer)
        entry = None if answer is None else (answer, r[level_field] if level_field else None)
        problem = _text(r.get("question") or r["problem"])
        found[problem] = entry if found.get(problem, entry) == entry else None
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("processbench")
    ap.add_argument("gold")
    ap.add_argument("--gold-field", required=True)
    ap.add_argument("--gold-in-box", action="store_true",
                    help="the gold is the last \\boxed{} of the solution in --gold-field")
    ap.add_argument("--level-field", help="copy this field of the gold record as `level`")
    ap.add_argument("--exclude", action="append", default=[],
                    help="a JSONL verdict file whose ids are left out (repeatable)")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    answers = golds(args.gold, args.gold_field, args.gold_in_box, args.level_field)
    excluded = {json.loads(line)["id"] for path in args.exclude for line in open(path, encoding="utf-8")}
    kept = dropped = skipped = 0
    with open(args.output, "w", encoding="utf-8") as out:
        for r in json.load(open(args.processbench, encoding="utf-8")):
            if r["id"] in excluded:
                skipped += 1
                continue
            entry = answers.get(_text(r["problem"]))
            if entry is None:
                dropped += 1
                continue
            kept += 1
            row = {"id": r["id"], "generator": r["generator"], "problem": r["problem"],
                   "steps": r["steps"], "answer": entry[0],
                   "final_answer_correct": r["final_answer_correct"], "label": r["label"]}
            if args.level_field:
                row["level"] = entry[1]
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{kept} kept, {dropped} without exactly one gold answer, {skipped} excluded", file=sys.stderr)


if __name__ == "__main__":
    main()
