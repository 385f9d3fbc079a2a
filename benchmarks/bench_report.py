"""`prm-annotate report` at size: 10,000 responses of ten ~150-character steps, with rollouts (two kept
completions per step) and judgements, against writing the same records as plain JSONL (the baseline,
measured in this run), then the page opened in real headless Chromium.

    .venv/bin/python benchmarks/bench_report.py [--responses 10000] [--repeat 2]

Prints, for the default page (the overview of every record, 1,000 responses to browse) and for a page
holding every response (--max-responses 10000): the seconds to write it, the ratio to the baseline,
the file's size, and when Chromium painted the overview (the page's own mark after the overview is
built, and the browser's first-contentful-paint, from navigation start: performance timing). The
issue's bars: written in under 30 s on 2 cores, the overview painted in under 5 s. Each write is
timed --repeat times and the fastest kept: on a shared machine the other runs measure the neighbours.
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prm_annotate.reports.html import write_report  # noqa: E402
from testing.browser import chromium_page, missing  # noqa: E402

WORDS = ("add", "the", "apples", "then", "multiply", "by", "three", "so", "we", "get", "total", "which", "is")


def text(rng: random.Random, length: int) -> str:
    out = []
    while sum(len(w) + 1 for w in out) < length:
        out.append(rng.choice(WORDS) if rng.random() < 0.8 else str(rng.randint(1, 99)))
    return " ".join(out)


def make_files(folder: Path, n: int, seed: int = 0) -> tuple[list[str], list[list[dict]]]:
    rng = random.Random(seed)
    responses, rollouts, judged, consensus = [], [], [], []
    for i in range(n):
        steps = [text(rng, 150) for _ in range(10)]
        base = {"id": f"p{i // 8}/{i % 8}", "problem": "Problem " + text(rng, 120), "problem_id": f"p{i // 8}",
                "steps": steps, "answer": "12", "correct": rng.random() < 0.5}
        mfe = rng.choice([-1, -1, *range(10)])
        scores = [1.0 if mfe == -1 or s < mfe else round(rng.random() * 0.5, 3) if s == mfe else 0.0 for s in range(10)]
        kept = [[{"text": text(rng, 80), "correct": rng.random() < scores[s], "cut": False} for _ in range(2)]
                for s in range(9)] + [None]
        jfe = mfe if rng.random() < 0.7 else rng.choice([-1, None, *range(10)])
        mc = {"k": 8, "label": "hard", "strategy": "exhaustive", "scores": scores, "first_error": mfe,
              "completions": 72, "generated_tokens": 2000, "model": "policy", "kept_completions": kept}
        judge = {"first_error": jfe, "votes": [jfe], "parse_failures": int(jfe is None), "model": "judge",
                 "prompt": "paper", "outputs": ["".join(f"<analysis_{s + 1}>{text(rng, 60)}</analysis_{s + 1}>"
                                                      for s in range(10)) + "<conclusion>Correct</conclusion>"]}
        responses.append(base)
        rollouts.append({**base, "mc": mc})
        judged.append({**base, "judge": judge})
        if mfe == jfe:
            cut = 10 if mfe == -1 else mfe + 1
            consensus.append({**base, "steps": steps[:cut], "labels": [s != mfe for s in range(cut)],
                              "first_error": mfe, "mc": mc, "judge": judge, "steps_total": 10})
    paths = []
    records = [responses, rollouts, judged, consensus]
    for name, recs in zip(("responses", "rollouts", "judged", "consensus"), records):
        path = folder / f"{name}.jsonl"
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
        paths.append(str(path))
    return paths, records


def fastest(repeat: int, fn):
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def paint_times(page, html: Path) -> tuple[float, float]:
    page.goto(html.as_uri(), timeout=120_000)
    page.wait_for_selector("body[data-ready='1']", timeout=120_000)
    page.wait_for_function("performance.getEntriesByType('paint').length > 0", timeout=120_000)
    mark = page.evaluate("window.__overviewPainted")
    fcp = page.evaluate("performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint').startTime")
    return mark / 1000, fcp / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths, records = make_files(folder, args.responses)
        base, _ = fastest(args.repeat, lambda: (folder / "plain.jsonl").write_bytes(
            b"".join(orjson.dumps(r) + b"\n" for recs in records for r in recs)))
        print(f"{args.responses:,} responses x 10 steps; input files "
              f"{sum(Path(p).stat().st_size for p in paths) / 1e6:.1f} MB; baseline (the same records as plain "
              f"JSONL): {base:.2f} s")
        pages = {}
        for label, max_responses in (("default page (1,000 browsable)", 1000), ("every response browsable", args.responses)):
            html = folder / f"report-{max_responses}.html"
            took, written = fastest(args.repeat, lambda: write_report(paths, str(html), max_responses=max_responses))
            pages[label] = html
            verdict = "under" if took < 30 else "OVER"
            print(f"  {label:32s} written in {took:6.2f} s ({took / base:5.1f}x the baseline; {verdict} 30 s), "
                  f"{written.bytes / 1e6:.1f} MB")
        why = missing()
        if why is not None:
            print(f"  Chromium: not measured ({why})")
            return
        with chromium_page() as page:
            for label, html in pages.items():
                mark, fcp = paint_times(page, html)
                verdict = "under" if max(mark, fcp) < 5 else "OVER"
                print(f"  {label:32s} overview built at {mark:5.2f} s, first contentful paint at {fcp:5.2f} s "
                      f"after navigation ({verdict} 5 s)")


if __name__ == "__main__":
    main()
