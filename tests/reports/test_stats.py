"""`stats` on real record files of every type, numbers checked against the fixtures themselves."""
from __future__ import annotations

import json
from collections import Counter

from typer.testing import CliRunner

from prm_annotate.cli import app
from testing.labelled_fixtures import PROCESSBENCH, processbench, write_jsonl

runner = CliRunner()


def stats(path) -> dict:
    result = runner.invoke(app, ["stats", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def histogram(values) -> dict[str, int]:
    c = Counter("null" if v is None else str(v) if v < 10 else "10+" for v in values)
    return dict(c)


def test_rollout_stats(labelled):
    _, built, files = labelled
    rows = built["rollouts"]
    out = stats(files["rollouts"])
    assert (out["records"], out["kind"]) == (len(rows), "rollout")
    assert out["first_error"]["mc.first_error"] == histogram(r["mc"]["first_error"] for r in rows)
    assert out["steps"]["total"] == sum(len(r["steps"]) for r in rows)
    assert sum(out["steps_histogram"].values()) == len(rows)
    scores = [s for r in rows for s in r["mc"]["scores"]]
    assert out["mc_scores"]["steps scored"] == sum(s is not None for s in scores)
    assert out["mc_scores"]["not probed (null)"] == scores.count(None)
    assert out["mc_scores"]["0"] == scores.count(0.0) and out["mc_scores"]["1"] == scores.count(1.0)
    bins = ("0", "(0, .25]", "(.25, .5]", "(.5, .75]", "(.75, 1)", "1")
    assert sum(out["mc_scores"][b] for b in bins) == out["mc_scores"]["steps scored"]
    assert out["mc"]["generated_tokens"] == sum(r["mc"]["generated_tokens"] for r in rows)
    assert out["mc"]["completions"] == sum(r["mc"]["completions"] for r in rows)
    assert out["tokens"] == {"mc.generated_tokens": out["mc"]["generated_tokens"]}


def test_judged_stats_count_parse_failures(labelled):
    _, built, files = labelled
    rows = built["judged"]
    out = stats(files["judged"])
    unparsed = sum(r["judge"]["first_error"] is None for r in rows)
    assert unparsed > 0
    assert out["kind"] == "judged"
    assert out["judge"]["parse_failures"] == sum(r["judge"]["parse_failures"] for r in rows)
    assert out["judge"]["no parsed vote (first_error null)"] == unparsed
    assert out["first_error"]["judge.first_error"]["null"] == unparsed


def test_judged_stats_show_the_judges_cost_its_unparsed_share_with_reasons_and_its_cut_share(tmp_path):
    """Records as the judge stage writes them, from a scripted reasoning judge: the stats read back
    the stage's own counts."""
    from prm_annotate.engines.base import GenerationResult
    from prm_annotate.records import Response
    from prm_annotate.stages.judge import JudgeStage
    from testing.scripted_engine import ScriptedEngine

    texts = ["<think>hm</think>\\boxed{1}", "<think>hm</think>\\boxed{1} or \\boxed{2}", "<think>still thinking",
             "<think>hm</think>no box", "<think>hm</think>\\boxed{9}"]

    def script(r):
        text = texts[int(r.key.split("\x1f")[-1].split("\x00")[0])]
        thought, ended, answer = text.removeprefix("<think>").partition("</think>")
        return GenerationResult(key=r.key, texts=[answer], reasonings=[thought],
                                finish_reasons=["stop" if ended else "length"], prompt_tokens=50,
                                generated_tokens=len(text), reasoning_tokens=len(thought))

    stage = JudgeStage(ScriptedEngine(script), prompt="processbench", reasoning="think")
    records = [Response.model_validate({"id": str(i), "problem": "p", "steps": ["a", "b", "c"]}) for i in range(5)]
    path = tmp_path / "judged.jsonl"
    write_jsonl(path, [o.records[0].dump() for o in stage.process(records)])
    out = stats(path)
    assert out["judge"]["votes not parsed (%)"] == 80.0 and out["judge"]["votes cut at max tokens (%)"] == 20.0
    assert {k: v for k, v in out["judge"].items() if k.startswith("not parsed: ")} == {
        "not parsed: conflicting answers": 1, "not parsed: cut at --max-tokens": 1, "not parsed: no \\boxed{} answer": 1,
        "not parsed: index N is outside -N..N": 1}
    assert out["tokens"]["judge.prompt_tokens"] == 250 == stage.stats["prompt_tokens"]
    assert out["tokens"]["judge.generated_tokens"] == sum(map(len, texts)) == stage.stats["generated_tokens"]
    assert out["tokens"]["judge.reasoning_tokens"] == stage.stats["reasoning_tokens"] > 0
    assert out["tokens"]["judge.answer_tokens"] == stage.stats["generated_tokens"] - stage.stats["reasoning_tokens"]
    assert dict(stage.reasons) == {k.removeprefix("not parsed: "): v for k, v in out["judge"].items()
                                   if k.startswith("not parsed: ")}


def test_consensus_stats_count_step_labels(labelled):
    _, built, files = labelled
    rows = built["consensus"]
    out = stats(files["consensus"])
    assert out["kind"] == "consensus" and out["records"] == len(rows)
    labels = [v for r in rows for v in r["labels"]]
    assert out["step_labels"] == {k: v for k, v in {"right": labels.count(True), "wrong": labels.count(False)}.items() if v}


def test_processbench_file(labelled):
    rows = processbench("math")
    out = stats(PROCESSBENCH / "math.json")
    assert (out["records"], out["kind"]) == (len(rows), "processbench")
    assert out["first_error"]["label"] == histogram(r["label"] for r in rows)
    assert out["steps"]["max"] == max(len(r["steps"]) for r in rows)
    right = sum(r["final_answer_correct"] for r in rows)
    assert out["answers"] == {"final_answer_correct": right, "final_answer_incorrect": len(rows) - right}


def test_table_and_bad_input(labelled, tmp_path):
    _, _, files = labelled
    table = runner.invoke(app, ["stats", str(files["rollouts"])])
    assert table.exit_code == 0 and "mc scores" in table.stdout and "rollout" in table.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "steps": ["x"]}\n[1, 2]\n')
    r = runner.invoke(app, ["stats", str(bad)])
    assert r.exit_code == 2 and f"{bad}:2:" in r.stderr


def test_mixed_file(labelled, tmp_path):
    _, built, _ = labelled
    path = write_jsonl(tmp_path / "mixed.jsonl", built["rollouts"][:3] + built["judged"][3:5])
    out = stats(path)
    assert out["kind"] == "mixed" and out["kinds"] == {"rollout": 3, "judged": 2}


def test_ids_are_counted_exactly_when_their_hashes_collide(tmp_path, monkeypatch):
    """stats keeps 8 bytes an id (a hash): with a hash that collides all the time, the file is read
    again for the ids of a repeated hash, and the counts are those of the ids themselves."""
    import prm_annotate.io.id_keys as id_keys
    import prm_annotate.reports.stats as stats_module

    def weak(rid: str) -> int:
        return len(rid) % 3

    monkeypatch.setattr(id_keys, "id_hash", weak)
    monkeypatch.setattr(stats_module, "id_hash", weak)
    ids = ["a", "bb", "ccc", "dd", "e", "bb", "ffff", "a", "a", None, None, "g"]
    rows = [{"id": rid, "problem": "?"} if rid is not None else {"problem": "?"} for rid in ids]
    out = stats_module.file_stats(str(write_jsonl(tmp_path / "ids.jsonl", rows)))
    counted = Counter(ids)
    assert out["ids"] == {"unique": sum(1 for k in counted if k is not None),
                          "duplicated": sum(1 for c in counted.values() if c > 1), "missing": 2}
    assert out["ids"] == {"unique": 7, "duplicated": 3, "missing": 2}  # a, bb and the missing ones
