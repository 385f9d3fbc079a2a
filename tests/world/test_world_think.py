"""`prm-annotate world think` (make demo-think) on a few traces, through the shared world engines.

The pipeline runs on the shared thinker engine (sample, rollout), then the shared judge (the test
goes on to the judge's engine, so it comes last among the thinker's tests); every number the
report gives is then recomputed here from the files: the truth by reading each trace's whole text
(`read_trace`, not the record's steps the report reads), each source's ProcessBench metric, the
segmenters' step counts, and the bill of the manifests with `plan`'s estimate beside it. The printed
text must show them.
"""
from __future__ import annotations

import io

import orjson
import pytest

from prm_annotate.steps import join_record
from prm_annotate.world.trace_truth import read_trace
from testing.jsonl_files import read_jsonl as read
from tests.world.test_world_report import close, processbench


@pytest.fixture
def think_run(tmp_path_factory, request):
    from prm_annotate.world import THINKER_DIR
    from prm_annotate.world.think_report import ThinkConfig, run_think_pipeline, think_quality

    cfg = ThinkConfig(workdir=tmp_path_factory.mktemp("world-think") / "think", problems=5, n=2, k=2,
                      max_tokens=256, judge_max_tokens=384)
    engines = {THINKER_DIR: "world_thinker"}

    def open_engine(model):  # the shared engines; asking for the judge closes the thinker's
        return request.getfixturevalue(engines.get(model, "world_judge"))

    timings, failures = run_think_pipeline(cfg, open_engine)
    return cfg, think_quality(cfg, timings, failures)


@pytest.mark.engine
@pytest.mark.switches_engine
def test_think_report_numbers_match_the_files(world_thinker, think_run):
    from rich.console import Console

    from prm_annotate.world.think_report import render_think

    cfg, report = think_run
    paths = cfg.paths()
    problems = {p["id"]: p for p in read(paths["problems"])}
    responses = read(paths["responses"])
    assert report["responses"] == len(responses) == cfg.problems * cfg.n and not report["failures"]
    assert all(r["thought_steps"] is not None and r["steps"] for r in responses)

    # The truth from each trace's whole text, as a thinking model wrote it.
    truths = {r["id"]: read_trace(problems[r["problem_id"]], "\n".join(["<think>", join_record(r)]))
              for r in responses}
    gold = {g["id"]: g["label"] for g in read(paths["gold"])}
    assert gold == {rid: t.first_error for rid, t in truths.items()}
    t = report["truth"]
    assert t["corrected_slip"] == sum(bool(x.corrected_slips) for x in truths.values())
    assert t["uncaught_slip"] == sum(bool(x.uncaught_slips) for x in truths.values())
    assert t["with_error"] == sum(x.first_error != -1 for x in truths.values())
    assert t["answer_correct"] == sum(r["correct"] is True for r in responses)

    # Each source against the truth, on the responses it labels.
    fields = {"MC": ("rollouts", "mc"), "judge": ("judged", "judge"), "consensus": ("consensus", None)}
    for name, (role, key) in fields.items():
        preds = {r["id"]: (r[key]["first_error"] if key else r["first_error"]) for r in read(paths[role])}
        labelled = {rid: p for rid, p in preds.items() if p is not None}
        want = processbench({rid: gold[rid] for rid in labelled}, labelled)
        got = report["compare"]["sources"][name]["kept"]["overall"]
        assert all(close(want[m], got[m]) for m in want), (name, want, got)
        assert report["compare"]["sources"][name]["labelled"] == len(labelled)
        # The baseline: the same predictions against the truth one paragraph late score otherwise
        # wherever there is an error to find.
        late = processbench({rid: gold[rid] + 1 if gold[rid] != -1 else -1 for rid in labelled}, labelled)
        if any(gold[rid] != -1 and labelled[rid] == gold[rid] for rid in labelled):
            assert not close(late["error_acc"], got["error_acc"])

    # Steps per response: the paragraphs segmenter gives the records' own steps back.
    steps = report["segmenters"]
    assert steps["paragraphs"]["steps"] == sum(len(r["steps"]) for r in responses)
    assert set(steps) == {"paragraphs", "merge", "reflection", "confidence"}
    assert all("error" not in row and row["records"] == len(responses) for row in steps.values())
    assert steps["merge"]["steps"] <= steps["paragraphs"]["steps"]

    # The bill as the manifests hold it, the thought's tokens apart; `plan`'s guaranteed figures hold it.
    sample_bill = orjson.loads((paths["responses"].parent / "responses.manifest.json").read_bytes())["runs"][-1]["bill"]
    billed = {row["stage"]: row for row in report["bill"]["world"]["stages"]}
    assert billed["sample"]["decode_tokens"] == sum(r["generator"]["generated_tokens"] for r in responses)
    assert billed["sample"]["thought_tokens"] == sample_bill["thought_tokens"] > 0
    for stage, figures in report["plan"].items():
        for name, f in figures.items():
            assert f["low"] <= f["measured"] <= f["high"] * (1 + 1e-9), (stage, name, f)

    out = io.StringIO()
    Console(file=out, width=200).print(render_think(report))
    text = out.getvalue()
    for name in fields:
        row = report["compare"]["sources"][name]["kept"]["overall"]
        assert f"{row['f1']:.1f}" in text if row["f1"] is not None else True
    assert f"{t['corrected_slip']} ({100.0 * t['corrected_slip'] / len(responses):.1f}%)" in text
    assert f"{steps['paragraphs']['steps']:,}" in text
    assert f"{billed['sample']['thought_tokens']:,}" in text and "dominates" in text
