"""How tests/data/omnimath/ and tests/data/olympiadbench/ were cut (tests/data/SOURCES.md): the
problems of a benchmark's file whose text is in none of the verdict files, lines copied unchanged.

    python -m lab.olympiad_dev_files omni_math_rule.jsonl problem \
        tests/data/grading/processbench-omnimath-gold.jsonl -o tests/data/omnimath/omni-math-rule-rest.jsonl
    python -m lab.olympiad_dev_files olympiadbench/test.jsonl question \
        tests/data/grading/processbench-olympiadbench-gold.jsonl -o tests/data/olympiadbench/test-rest.jsonl

A line is kept, in file order, when its problem text (runs of white space read as one space) is
not the problem of any record of the --exclude files: the olympiad-level development sets of the
grader (`testing/verdict_files.py`, `olympiad_solutions`) share no problem, and so no gold answer,
with the human verdicts it is measured on.
"""
from __future__ import annotations

import argparse
import json


def _text(s: str) -> str:
    return " ".join(s.split())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source")
    p.add_argument("field", help="the field of the problem text")
    p.add_argument("exclude", nargs="+", help="verdict files whose problems are left out")
    p.add_argument("-o", "--out", required=True)
    a = p.parse_args()
    seen = {_text(json.loads(line)["problem"]) for path in a.exclude for line in open(path, encoding="utf-8")}
    kept = total = 0
    with open(a.source, encoding="utf-8") as src, open(a.out, "w", encoding="utf-8") as out:
        for line in src:
            total += 1
            if _text(json.loads(line)[a.field]) not in seen:
                out.write(line if line.endswith("\n") else line + "\n")
                kept += 1
    print(f"{a.out}: {kept} of {total} kept")


if __name__ == "__main__":
    main()
