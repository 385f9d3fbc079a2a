"""The thinking world's traces in DeltaBench's format, so `evaluate --benchmark deltabench` runs end
to end here (DeltaBench's own rows may not be shipped: its repository has no licence).

A trace (world/thinking.py, `trace_for`) becomes one row: `question` the problem, `sections_content`
its paragraphs (the thought's, then the answer's) grouped `per_section` at a time into `section1:`
... blocks as DeltaBench writes them, `reason_error_section_numbers` the sections holding a slip as
the truth reads the text (world/trace_truth.py: kinds "slip" and "wrong_correction"; a paragraph
wrong only because it carries an earlier slip is no new error, as DeltaBench's critic prompt says),
`reason_unuseful_section_numbers` empty (the world has no unuseful reasoning), `task_l1` "math".
Beside them, this project's fields (not DeltaBench's): `paragraphs`, `paragraph_sections` (each
paragraph's 1-based section: a PRM that scores paragraphs gives them as `step_sections` beside its
scores, and `evaluate` takes a section's lowest paragraph score) and
`truth` (the truth's first error, slips and corrections, 0-based paragraphs).

    python -m prm_annotate.world.deltabench --count 200 --seed 0 -o deltabench-world.jsonl
"""
from __future__ import annotations

import argparse
import sys

import orjson

from prm_annotate.world.thinking import TraceMix, trace_for
from prm_annotate.world.trace_truth import check_trace

SPLIT = "deltabench"


def sections_text(sections: list[str]) -> str:
    return "\n\n".join(f"section{k}:\n{text}" for k, text in enumerate(sections, 1))


def trace_row(index: int, seed: int, per_section: int = 1, mix: TraceMix = TraceMix()) -> dict:
    """Trace `index` under `seed` as a DeltaBench row."""
    if per_section < 1:
        raise ValueError(f"per_section must be at least 1, got {per_section}")
    problem, trace = trace_for(SPLIT, index, seed, mix)
    truth = check_trace(problem, list(trace.thought), list(trace.answer))
    steps = trace.steps
    step_sections = [i // per_section + 1 for i in range(len(steps))]
    sections = ["\n\n".join(steps[k:k + per_section]) for k in range(0, len(steps), per_section)]
    errors = sorted({step_sections[s.index] for s in truth.slips})
    return {
        "id": f"{SPLIT}-{seed}-{index}",
        "question": problem["problem"],
        "sections_content": sections_text(sections),
        "reason_error_section_numbers": errors,
        "reason_unuseful_section_numbers": [],
        "task_l1": "math",
        "paragraphs": steps,
        "paragraph_sections": step_sections,
        "truth": {"first_error": truth.first_error, "final_correct": truth.final_correct,
                  "slips": [{"step": s.index, "kind": s.kind, "corrected_at": s.corrected_at} for s in truth.slips]},
    }


def trace_rows(count: int, seed: int = 0, per_section: int = 1, mix: TraceMix = TraceMix()) -> list[dict]:
    return [trace_row(i, seed, per_section, mix) for i in range(count)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the thinking world's traces as DeltaBench rows (JSONL).")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-section", type=int, default=1, help="paragraphs per section")
    parser.add_argument("-o", "--output", default="-")
    args = parser.parse_args(argv)
    out = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")
    try:
        for row in trace_rows(args.count, args.seed, args.per_section):
            out.write(orjson.dumps(row) + b"\n")
    finally:
        if out is not sys.stdout.buffer:
            out.close()


if __name__ == "__main__":
    main()
