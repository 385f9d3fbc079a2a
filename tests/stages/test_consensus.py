"""consensus on crafted inputs: every row of the confusion table, ids in only one input,
truncation and labels, bad input, resume, and the CLI's exit statuses and stderr table."""
from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from prm_annotate.errors import InputError, UsageError
from prm_annotate.io.jsonl import iter_jsonl
from prm_annotate.records import MC, Consensus, Judgement, trusted
from prm_annotate.stages.consensus import (
    JUDGE_EARLIER,
    JUDGE_LATER,
    ONE_NO_ERROR,
    SAME,
    UNPARSED,
    confusion_row,
    run_consensus,
)
from prm_annotate.stages.judged_file import JudgedIndex

STEPS = ["a = 1.", "b = 2.", "c = 4.", "\\boxed{4}"]


def base(rid, steps=STEPS):
    return {"id": rid, "problem": "p", "answer": "3", "steps": steps, "final_answer": "4", "correct": False,
            "generator": {"model": "m"}}


def rollout(rid, first_error, steps=STEPS):
    scores = [1.0 if first_error == -1 or i < first_error else 0.0 for i in range(len(steps))]
    return {**base(rid, steps), "mc": {"k": 8, "label": "hard", "strategy": "exhaustive", "scores": scores,
                                       "first_error": first_error, "completions": 24, "generated_tokens": 100,
                                       "model": "m"}}


def judged(rid, first_error, steps=STEPS, **extra):
    votes = [first_error] if first_error is not None else [None]
    return {**base(rid, steps), **extra, "judge": {"first_error": first_error, "votes": votes,
                                                   "parse_failures": int(first_error is None), "model": "j",
                                                   "prompt": "paper"}}


def write(path, rows):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return str(path)


# (id, mc first error, judge first error, row)
CASES = [
    ("same-error", 2, 2, SAME),
    ("same-none", -1, -1, SAME),
    ("same-first", 0, 0, SAME),
    ("earlier", 2, 1, JUDGE_EARLIER),
    ("later", 1, 3, JUDGE_LATER),
    ("mc-none", -1, 2, ONE_NO_ERROR),
    ("judge-none", 2, -1, ONE_NO_ERROR),
    ("unparsed", 2, None, UNPARSED),
    ("unparsed-none", -1, None, UNPARSED),
]


def test_confusion_rows():
    for _, mc, jd, row in CASES:
        assert confusion_row(mc, jd) == row


@pytest.fixture
def inputs(tmp_path):
    r = write(tmp_path / "rollouts.jsonl", [rollout(i, mc) for i, mc, _, _ in CASES] + [rollout("only-r", 1)])
    j = write(tmp_path / "judged.jsonl", [judged("only-j", 1)] + [judged(i, jd, note="from judge")
                                                                  for i, _, jd, _ in reversed(CASES)])
    return r, j


def test_every_row_and_the_kept_records(inputs, tmp_path):
    out = tmp_path / "consensus.jsonl"
    summary = run_consensus(*inputs, str(out))
    assert summary.rollouts == 10 and summary.judged == 10 and summary.joined == 9
    assert dict(summary.rows) == {SAME: 3, JUDGE_EARLIER: 1, JUDGE_LATER: 1, ONE_NO_ERROR: 2, UNPARSED: 2}
    assert summary.agreed == 3 and summary.written == 3 and round(summary.kept_percent(), 1) == 33.3
    assert summary.only_rollouts == ["only-r"] and summary.only_judged == ["only-j"]
    kept = {obj["id"]: Consensus.model_validate(obj) for _, obj in iter_jsonl(out)}
    assert list(kept) == ["same-error", "same-none", "same-first"]  # rollout order
    assert kept["same-error"].steps == STEPS[:3] and kept["same-error"].labels == [True, True, False]
    assert kept["same-none"].steps == STEPS and kept["same-none"].labels == [True] * 4
    assert kept["same-first"].steps == STEPS[:1] and kept["same-first"].labels == [False]
    row = kept["same-error"].dump()
    assert row["first_error"] == 2 and row["mc"]["first_error"] == 2 and row["judge"]["first_error"] == 2
    # fields of either input are copied through
    assert row["generator"] == {"model": "m"} and row["note"] == "from judge" and row["answer"] == "3"
    assert row["steps_total"] == 4


def test_a_kept_record_is_the_bytes_a_whole_validation_writes(tmp_path):
    """The kept record is made from records validated once (the judged one read again by offset, not
    validated again): validating what was written gives it back byte for byte, extras of both inputs,
    a judged answer written as a number, ints where the scores are floats and a thinking trace included."""
    r = rollout("a", 1)
    r["mc"]["scores"] = [1, 0, 0.0, 0]  # validated as floats
    r.update(thought_steps=2, step_joins=["\n\n"] * 3, thought_finished=True)
    j = judged("a", 1, note={"nested": [1, None]}, answer=3)
    j["judge"]["reasoning"] = "why"
    out = tmp_path / "c.jsonl"
    run_consensus(write(tmp_path / "r.jsonl", [r]), write(tmp_path / "j.jsonl", [j]), str(out))
    (line,) = out.read_bytes().splitlines()
    again = Consensus.model_validate(orjson.loads(line)).plain()
    assert orjson.dumps(again) == line
    obj = orjson.loads(line)
    assert b'"scores":[1.0,0.0,0.0,0.0]' in line and obj["answer"] == "3"
    assert obj["note"] == {"nested": [1, None]} and obj["judge"]["reasoning"] == "why"
    assert obj["step_joins"] == ["\n\n"] and obj["thought_steps"] == 2


def test_a_judged_line_that_changed_after_the_index_is_refused(tmp_path):
    path = tmp_path / "j.jsonl"
    write(path, [judged("a", 1), judged("b", 2)])
    index = JudgedIndex.read(str(path))
    assert index.raw(index.slot("b"))["judge"]["first_error"] == 2
    write(path, [judged("a", 1), judged("b", 3)])  # the same length and offsets: only the stamp tells
    with pytest.raises(InputError, match=r"j.jsonl \(byte \d+\): written since it was validated \(the file changed"):
        index.raw(index.slot("b"))
    fresh = JudgedIndex.read(str(path))  # the file as it is now, validated again
    assert fresh.raw(fresh.slot("b"))["judge"]["first_error"] == 3


def test_trusted_makes_what_model_construct_makes():
    data = {**judged("a", 1, note="n"), "labels": [True, False], "first_error": 1, "steps": STEPS[:2]}
    data["mc"] = MC.model_validate(rollout("a", 1)["mc"])
    data["judge"] = trusted(Judgement, {**data["judge"], "extra": 1})
    made = trusted(Consensus, dict(data))
    assert made == Consensus.model_construct(**dict(data)) == Consensus.model_validate(made.plain())
    assert list(made.plain()) == list(Consensus.model_validate(made.plain()).plain())
    with pytest.raises(ValueError, match="judge is required"):
        trusted(Consensus, {k: v for k, v in data.items() if k != "judge"})


def test_rerun_is_resumable_and_writes_nothing_twice(inputs, tmp_path):
    out = tmp_path / "consensus.jsonl"
    run_consensus(*inputs, str(out))
    first = out.read_bytes()
    # a killed run's torn last line is dropped and the record written again
    out.write_bytes(first + first.splitlines()[0][:20])
    summary = run_consensus(*inputs, str(out))
    assert out.read_bytes() == first and summary.skipped == 3 and summary.written == 0


def test_limit_reads_the_first_rollouts_and_does_not_blame_judged(inputs, tmp_path):
    summary = run_consensus(*inputs, str(tmp_path / "c.jsonl"), limit=4)
    assert summary.joined == 4 and summary.only_judged == []


def test_bad_inputs(tmp_path):
    r = write(tmp_path / "r.jsonl", [rollout("a", 1), rollout("a", 2)])
    j = write(tmp_path / "j.jsonl", [judged("a", 1)])
    with pytest.raises(InputError, match="duplicate id 'a'"):
        run_consensus(r, j, str(tmp_path / "c.jsonl"))
    r = write(tmp_path / "r.jsonl", [rollout("a", 1)])
    j = write(tmp_path / "j.jsonl", [judged("a", 1, steps=["x", "y"])])
    with pytest.raises(UsageError, match="different steps"):
        run_consensus(r, j, str(tmp_path / "c.jsonl"))
    j = write(tmp_path / "j.jsonl", [judged("a", 7)])  # out of range for 4 steps
    with pytest.raises(InputError, match="j.jsonl:1"):
        run_consensus(r, j, str(tmp_path / "c.jsonl"))
    assert not (tmp_path / "c.jsonl").exists() or (tmp_path / "c.jsonl").read_bytes() == b""


def test_cli_summary_table_and_exit_status(inputs, tmp_path):
    out = tmp_path / "c.jsonl"
    run = subprocess.run([sys.executable, "-m", "prm_annotate", "consensus", *inputs, "-o", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    for text in ("judge earlier", "judge later", "one says no error", "judge unparsed", "only in rollouts: only-r",
                 "only in judged: only-j"):
        assert text in run.stderr, text
    # The last line, a sentence: 10 rollouts = 3 kept + 7 set aside, each by its row of the table.
    assert run.stderr.splitlines()[-1].startswith(
        "consensus: 10 rollouts read: 3 kept, 7 set aside (2 judge unparsed, 2 one says no error, 1 judge earlier, "
        "1 judge later, 1 not in the judged file); "), run.stderr
    assert len(out.read_bytes().splitlines()) == 3 and out.with_suffix(".manifest.json").exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    run = subprocess.run([sys.executable, "-m", "prm_annotate", "consensus", str(bad), inputs[1], "-o", "-"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "bad.jsonl:1" in run.stderr


def test_a_partial_output_is_resumed_through_the_runner(inputs, tmp_path):
    """A run stopped after its first kept record: the rerun writes the rest, in the order a whole
    run writes them, and each run is in the manifest."""
    whole = tmp_path / "whole.jsonl"
    run_consensus(*inputs, str(whole))
    out = tmp_path / "c.jsonl"
    lines = whole.read_bytes().splitlines(keepends=True)
    out.write_bytes(lines[0] + lines[1][:15])  # one record, then a torn line
    summary = run_consensus(*inputs, str(out))
    assert out.read_bytes() == whole.read_bytes()
    assert (summary.skipped, summary.written, summary.joined, summary.agreed) == (1, 2, 8, 2)
    assert summary.only_judged == ["only-j"] and summary.only_rollouts == ["only-r"]
    runs = orjson.loads(out.with_suffix(".manifest.json").read_bytes())["runs"]
    assert [r["stage"] for r in runs] == ["consensus"]
    assert runs[0]["counts"]["skipped"] == 1 and runs[0]["counts"]["written"] == 2
    assert runs[0]["inputs"] == {"rollouts": inputs[0], "judged": inputs[1]} and runs[0]["stats"]["joined"] == 8


def test_skip_invalid_sets_a_bad_rollout_aside_and_a_stream_is_joined_as_read(inputs, tmp_path):
    bad = tmp_path / "bad.jsonl"
    good = open(inputs[0], "rb").read()
    bad.write_bytes(good + b'{"id": "broken"}\n')
    out = tmp_path / "c.jsonl"
    refused = subprocess.run([sys.executable, "-m", "prm_annotate", "consensus", str(bad), inputs[1], "-o", str(out)],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "bad.jsonl:11" in refused.stderr and not out.exists()
    run = subprocess.run([sys.executable, "-m", "prm_annotate", "consensus", str(bad), inputs[1], "-o", str(out),
                          "--skip-invalid", "-q"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert len(out.read_bytes().splitlines()) == 3 and "11 rollouts read: 3 kept, 8 set aside (" in run.stderr
    rejects = [orjson.loads(line) for line in (tmp_path / "c.rejects.jsonl").read_bytes().splitlines()]
    assert [(r["where"], r["record"]) for r in rejects] == [("line 11", {"id": "broken"})]
    assert "1 invalid" in run.stderr.splitlines()[-1]
    # from standard input: the same records
    piped = subprocess.run([sys.executable, "-m", "prm_annotate", "consensus", "-", inputs[1], "-o", "-", "-q"],
                           input=good.decode(), capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and piped.stdout.encode() == out.read_bytes()
    # a pair with different steps, met on a stream: bad input there too
    other = write(tmp_path / "other.jsonl", [rollout("same-error", 2, steps=["x", "y", "z"])])
    mismatch = subprocess.run([sys.executable, "-m", "prm_annotate", "consensus", "-", inputs[1], "-o", "-", "-q"],
                              input=open(other).read(), capture_output=True, text=True, timeout=120)
    assert mismatch.returncode == 2 and "different steps for id 'same-error'" in mismatch.stderr


def with_recovery(record, key, slips):
    record[key]["recovery"] = None if slips is None else {
        "slips": [{"step": s, "corrected_at": c} for s, c in slips]}
    return record


# (id, MC's slips, the judge's slips, row); the paper's first errors of both are the first slip's.
RECOVERY_CASES = [
    ("corrected", [(1, 2)], [(1, 2)], SAME),
    ("clean", [], [], SAME),
    ("two", [(0, 1), (2, None)], [(0, 1), (2, None)], SAME),
    ("elsewhere", [(1, 2)], [(1, None)], "corrections differ"),
    ("other-slip", [(1, 2)], [(2, None)], "slips differ"),
    ("unparsed", [(1, 2)], None, UNPARSED),
]


def test_the_recovery_rule_keeps_corrected_traces_the_papers_rule_drops(tmp_path):
    rollouts, judgeds = [], []
    for rid, mc, jd, _ in RECOVERY_CASES:
        # Hard MC cannot see a corrected slip: its first error is the first uncaught one.
        hard = next((s for s, c in mc if c is None), -1)
        rollouts.append(with_recovery(rollout(rid, hard), "mc", mc))
        judgeds.append(with_recovery(judged(rid, jd[0][0] if jd else (-1 if jd == [] else None)), "judge", jd))
    r, j = write(tmp_path / "r.jsonl", rollouts), write(tmp_path / "j.jsonl", judgeds)
    paper = run_consensus(r, j, str(tmp_path / "paper.jsonl"))
    recovery = run_consensus(r, j, str(tmp_path / "recovery.jsonl"), rule="recovery")
    assert recovery.rows == {SAME: 3, "corrections differ": 1, "slips differ": 1, UNPARSED: 1}
    kept = {o["id"]: o for _, o in iter_jsonl(str(tmp_path / "recovery.jsonl"))}
    paper_kept = {o["id"] for _, o in iter_jsonl(str(tmp_path / "paper.jsonl"))}
    assert "corrected" in kept and "corrected" not in paper_kept and paper.agreed == 1  # "clean" only
    assert kept["corrected"]["labels"] == [True, False, True, True] and kept["corrected"]["first_error"] == 1
    assert kept["two"]["labels"] == [False, True, False, False] and len(kept["two"]["steps"]) == 4
    assert kept["clean"]["labels"] == [True] * 4 and kept["clean"]["recovery"] == {"slips": []}
    assert all(Consensus.model_validate(o).recovery is not None for o in kept.values())
    # The hf card names the rule that kept the rows, with its table's rows.
    from prm_annotate.export.hf import consensus_lines
    from prm_annotate.io.manifest import source_runs

    card = "\n".join(consensus_lines(source_runs(str(tmp_path / "recovery.jsonl"))))
    assert "mc.recovery" in card and "dropped: slips differ" in card and "| 6 | 3 |" in card
    paper_card = "\n".join(consensus_lines(source_runs(str(tmp_path / "paper.jsonl"))))
    assert "mc.recovery" not in paper_card and "dropped: judge earlier" in paper_card


def test_the_recovery_rule_refuses_files_without_the_readings(tmp_path, inputs):
    with pytest.raises(UsageError, match="no mc.recovery"):
        run_consensus(*inputs, str(tmp_path / "c.jsonl"), rule="recovery")
    r = write(tmp_path / "r.jsonl", [with_recovery(rollout("a", 1), "mc", [(1, None)])])
    j = write(tmp_path / "j.jsonl", [judged("a", 1)])
    with pytest.raises(UsageError, match="no judge.recovery"):
        run_consensus(r, j, str(tmp_path / "c2.jsonl"), rule="recovery")
    with pytest.raises(UsageError, match="choose from paper, recovery"):
        run_consensus(r, j, str(tmp_path / "c3.jsonl"), rule="both")


def test_a_consensus_record_with_recovery_labels_must_match_them():
    record = {**base("a"), "labels": [True, False, True, True], "first_error": 1,
              "recovery": {"slips": [{"step": 1, "corrected_at": 2}]}, "mc": rollout("a", -1)["mc"],
              "judge": judged("a", 1)["judge"]}
    assert Consensus.model_validate(record).recovery.first_error() == 1
    with pytest.raises(ValueError, match="labels do not match recovery"):
        Consensus.model_validate({**record, "labels": [True, False, False, False]})
    with pytest.raises(ValueError, match="first slip"):
        Consensus.model_validate({**record, "first_error": 2})
    with pytest.raises(ValueError, match="out of range"):
        Consensus.model_validate({**record, "recovery": {"slips": [{"step": 4, "corrected_at": None}]}})
