"""`stats FILE...`'s bill: read from the files' manifests, a row per model stage, each stage's share of
the compute and the stage that dominates; --params bills a stage at another size (the paper's)."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.engines.bill import Bill

runner = CliRunner()
# Tokens of a small world run: the rollouts' prompts are many and mostly cached, the judge's few.
STAGES = {
    "sample": {"requests": 40, "prompt_tokens": 3_000, "cached_prompt_tokens": 1_000, "generated_tokens": 2_000},
    "rollout": {"requests": 900, "prompt_tokens": 90_000, "cached_prompt_tokens": 70_000, "generated_tokens": 25_000},
    "judge": {"requests": 40, "prompt_tokens": 9_000, "cached_prompt_tokens": 1_000, "generated_tokens": 3_000},
}
SIZE = 1_141_120


def write_run(tmp_path, stage: str, stats: dict, bill: bool = True) -> str:
    path = tmp_path / f"{stage}.jsonl"
    path.write_text(json.dumps({"id": "x", "problem": "p", "steps": ["a"]}) + "\n")
    run = {"stage": stage, "settings": {"model": f"/models/{stage}"}, "stats": stats}
    if bill:
        run["bill"] = Bill.of(stats, SIZE).record()
    (tmp_path / f"{stage}.manifest.json").write_text(json.dumps({"runs": [run]}))
    return str(path)


def bill_of(files, *params) -> dict:
    result = runner.invoke(app, ["stats", *files, "--json", *[a for p in params for a in ("--params", p)]])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    return out["bill"]


def test_stats_names_the_dominating_stage_and_the_paper_sizes_move_it_to_the_judge(tmp_path):
    files = [write_run(tmp_path, stage, stats) for stage, stats in STAGES.items()]
    same = bill_of(files)
    rows = {r["stage"]: r for r in same["stages"]}
    for stage, stats in STAGES.items():  # the sums the manifests hold, at the model's own size
        tokens = stats["prompt_tokens"] - stats["cached_prompt_tokens"] + stats["generated_tokens"]
        assert rows[stage]["compute"] == round(tokens * SIZE / 1e9, 6)
    assert same["dominant"] == "rollout"  # at one size the most tokens win
    assert abs(sum(r["share"] for r in same["stages"]) - 1) < 1e-9
    paper = bill_of(files, "sample=7B", "rollout=7B", "judge=72B")
    rows = {r["stage"]: r for r in paper["stages"]}
    assert paper["dominant"] == "judge" and rows["judge"]["params"] == 72_000_000_000
    judge_tokens = 8_000 + 3_000
    assert rows["judge"]["compute"] == judge_tokens * 72
    expected = judge_tokens * 72 / (judge_tokens * 72 + (20_000 + 25_000) * 7 + (2_000 + 2_000) * 7)
    assert abs(rows["judge"]["share"] - expected) < 1e-9
    shown = runner.invoke(app, ["stats", *files, "--params", "judge=72B", "--params", "rollout=7B",
                                "--params", "sample=7B"])
    assert shown.exit_code == 0 and f"judge dominates: {100 * expected:.1f}% of" in shown.stdout


def test_a_manifest_from_before_the_bill_is_billed_from_its_counters_and_a_bad_size_is_exit_2(tmp_path):
    old = write_run(tmp_path, "judge", STAGES["judge"], bill=False)
    out = bill_of([old], "judge=72e9")
    assert out["stages"][0]["prefill_tokens"] == 8_000 and out["stages"][0]["compute"] == 11_000 * 72
    assert out["unknown_size"] == [] and bill_of([old])["unknown_size"] == ["judge"]  # /models/judge: no config
    bad = runner.invoke(app, ["stats", old, "--params", "judge=lots"])
    assert bad.exit_code == 2 and "--params judge=lots" in bad.output


def test_one_file_keeps_its_stats_shape_with_the_bill_beside(tmp_path):
    path = write_run(tmp_path, "rollout", STAGES["rollout"])
    out = json.loads(runner.invoke(app, ["stats", path, "--json"]).stdout)
    assert out["path"] == path and out["records"] == 1 and out["bill"]["dominant"] == "rollout"
