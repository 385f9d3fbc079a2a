"""How tests/data/grading's olympiad verdict files were derived (tests/data/SOURCES.md): ProcessBench
responses joined, by problem text, with the gold answers of the benchmark they come from.

    python -m lab.grading_gold PROCESSBENCH_SPLIT.json GOLD.jsonl --gold-field final_answer -o OUT.jsonl

PROCESSBENCH_SPLIT.json is a JSON array of ProcessBench records `{id, generator, problem, steps,
final_answer_correct, label}`; GOLD.jsonl has one problem a line, its text in `question` or
`problem`, its gold answer in --gold-field (a string, or a list of one string as OlympiadBench's
`final_answer`). A response is kept, in ProcessBench's order, when its problem text (runs of white
space read as one space) matches exactly one gold answer; the others are left out (their count is
printed). Each output line is `{id, generator, problem, steps, answer, final_answer_correct,
label}`, the ProcessBench fields unchanged. Nothing is read from the responses but their problem.
"""
from __future__ import annotations

import argparse
import json
import sys


def _text(s: str) -> str:
    return " ".join(s.split())


def golds(path: str, field: str) -> dict[str, str | None]:
    """Problem text -> its gold answer; None when the text appears with different answers."""
    found: dict[str, str | None] = {}
    for line in open(path, encoding="utf-8"):
        r = json.loads(line)
        answer = r[field]
        if isinstance(answer, list):
            if len(answer) != 1:
                raise SystemExit(f"{path}: {field} is a list of {len(answer)}")
            answer = answer[0]
        problem = _text(r.get("question") or r["problem"])
        found[problem] = answer if found.get(problem, answer) == answer else None
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("processbench")
    ap.add_argument("gold")
    ap.add_argument("--gold-field", required=True)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    answers = golds(args.gold, args.gold_field)
    kept = dropped = 0
    with open(args.output, "w", encoding="utf-8") as out:
        for r in json.load(open(args.processbench, encoding="utf-8")):
            answer = answers.get(_text(r["problem"]))
            if answer is None:
                dropped += 1
                continue
            kept += 1
            out.write(json.dumps({"id": r["id"], "generator": r["generator"], "problem": r["problem"],
                                  "steps": r["steps"], "answer": answer,
                                  "final_answer_correct": r["final_answer_correct"], "label": r["label"]},
                                 ensure_ascii=False) + "\n")
    print(f"{kept} kept, {dropped} without exactly one gold answer", file=sys.stderr)


if __name__ == "__main__":
    main()
