"""`prm-annotate world report` end to end on a very small world, through the real engines.

One real process (the policy's engine for sample and rollout, then the judge's), then every number
the report gives is recomputed here from the files it wrote, without `compare`: the truth from the
problems and the responses, each source's ProcessBench metric, the consensus ids and kept-label
precision, the tokens. The printed table is rendered from the same report and must show them.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import orjson
import pytest

from prm_annotate.engines.quiet import QUIET_ENV
from prm_annotate.world.truth import true_first_error
from testing.heavy import ENGINE_START_TIMEOUT
from testing.jsonl_files import group_alive
from testing.jsonl_files import read_jsonl as read

CLI = [sys.executable, "-m", "prm_annotate"]
TIMEOUT = ENGINE_START_TIMEOUT + 120


def processbench(truth: dict[str, int], preds: dict[str, int | None]) -> dict[str, float | None]:
    """Error acc, correct acc, F1 (percent), written out independently of prm_annotate.reports.evaluate."""
    err = [rid for rid, t in truth.items() if t != -1]
    ok = [rid for rid, t in truth.items() if t == -1]
    error_acc = 100.0 * sum(preds.get(r) == truth[r] for r in err) / len(err) if err else None
    correct_acc = 100.0 * sum(preds.get(r) == -1 for r in ok) / len(ok) if ok else None
    if error_acc is None or correct_acc is None:
        f1 = None
    else:
        f1 = 2 * error_acc * correct_acc / (error_acc + correct_acc) if error_acc + correct_acc else 0.0
    return {"error_acc": error_acc, "correct_acc": correct_acc, "f1": f1}


def close(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) < 1e-9)


@pytest.mark.engine
def test_world_report_numbers_match_the_files(tmp_path, capsys):
    workdir = tmp_path / "world"
    workdir.mkdir()
    # A stale file of an earlier report must not leak into this one (stages resume from disk).
    (workdir / "consensus.jsonl").write_bytes(orjson.dumps({"id": "stale/0"}) + b"\n")
    cmd = [*CLI, "world", "report", "--problems", "6", "-n", "2", "-k", "2", "--seed", "1",
           "--workdir", str(workdir), "--json"]
    # As a user's shell would start it: an in-process engine of an earlier test sets
    # VLLM_LOGGING_LEVEL in this process, and the report leaves a variable the user set alone.
    env = {k: v for k, v in os.environ.items() if k not in QUIET_ENV}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=env)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, err[-4000:]
    assert group_alive(proc.pid) == [], "the report left engine processes running"
    # The pipeline's own lines only: the stages' summaries and consensus's table, no library's
    # warning, log line or progress bar (--verbose shows those).
    ours = re.compile(r"^(sample|rollout|judge|consensus): |^ *MC vs judge: first error *$|^[┏┃┡│├└]")
    assert [line for line in err.splitlines() if line.strip() and not ours.match(line)] == []
    report = orjson.loads(out)

    problems = {p["id"]: p for p in read(workdir / "problems.jsonl")}
    responses = read(workdir / "responses.jsonl")
    rollouts = {r["id"]: r for r in read(workdir / "rollouts.jsonl")}
    judged = {r["id"]: r for r in read(workdir / "judged.jsonl")}
    consensus = {r["id"]: r for r in read(workdir / "consensus.jsonl")}
    gold = {g["id"]: g for g in read(workdir / "gold.jsonl")}
    assert len(problems) == 6 and len(responses) == 12 == report["responses"]
    ids = {r["id"] for r in responses}
    assert set(rollouts) == set(judged) == set(gold) == ids

    # The truth, recomputed from the problems and the sampled steps.
    truth = {r["id"]: true_first_error(problems[r["problem_id"]], r["steps"]) for r in responses}
    assert {rid: g["label"] for rid, g in gold.items()} == truth
    assert report["truth"]["with_error"] == sum(t != -1 for t in truth.values())

    # Consensus = exactly the ids where MC and the judge name the same first error.
    agree = {rid for rid in ids if rollouts[rid]["mc"]["first_error"] == judged[rid]["judge"]["first_error"]}
    assert set(consensus) == agree
    assert report["consensus_kept"] == len(agree)
    assert close(report["consensus_kept_percent"], 100.0 * len(agree) / 12)

    # Each source's metric on the responses it labels.
    preds = {
        "MC": {rid: r["mc"]["first_error"] for rid, r in rollouts.items()},
        "judge": {rid: r["judge"]["first_error"] for rid, r in judged.items()},
        "consensus": {rid: r["first_error"] for rid, r in consensus.items()},
    }
    for name, p in preds.items():
        labelled = {rid: t for rid, t in truth.items() if p.get(rid) is not None}
        mine = processbench(labelled, p)
        theirs = report["compare"]["sources"][name]["kept"]["overall"]
        for key in ("error_acc", "correct_acc", "f1"):
            assert close(mine[key], theirs[key]), (name, key, mine, theirs)
        assert report["compare"]["sources"][name]["labelled"] == len(labelled)

    # Kept step labels of consensus against the truth's step labels (none after the first error).
    matched = compared = 0
    for rid, rec in consensus.items():
        t, n = truth[rid], len(rollouts[rid]["steps"])
        want = [True] * n if t == -1 else [True] * t + [False]
        assert len(rec["labels"]) == len(rec["steps"])
        for ours, theirs in zip(rec["labels"], want):
            compared += 1
            matched += ours == theirs
    source = report["compare"]["sources"]["consensus"]
    assert source["step_labels_compared"] == compared
    assert close(source["step_label_precision"], 100.0 * matched / compared if compared else None)

    # Tokens: summed from the records, and equal to what the engine counted for the stage.
    tokens = report["tokens"]
    assert tokens["sample"] == sum(r["generator"]["generated_tokens"] for r in responses) > 0
    assert tokens["rollout"] == sum(r["mc"]["generated_tokens"] for r in rollouts.values()) > 0
    assert tokens["judge"] == sum(r["judge"]["generated_tokens"] for r in judged.values()) > 0
    for stage, name in (("sample", "responses"), ("rollout", "rollouts"), ("judge", "judged")):
        manifest = orjson.loads((workdir / f"{name}.manifest.json").read_bytes())
        assert manifest["runs"][-1]["stats"]["generated_tokens"] == tokens[stage]
    assert set(report["seconds"]) >= {"sample", "rollout", "judge", "consensus"}

    # The printed table shows these numbers.
    from prm_annotate.world.report import print_report

    print_report(report)
    table = capsys.readouterr().out
    for name, p in preds.items():
        labelled = {rid: t for rid, t in truth.items() if p.get(rid) is not None}
        row = next(line for line in table.splitlines() if line.strip("│┃ ").startswith(name))
        assert f"{len(labelled)}/12" in row
        f1 = processbench(labelled, p)["f1"]
        assert (f"{f1:.1f}" if f1 is not None else "—") in row
    assert f"{tokens['rollout']:,}" in table
