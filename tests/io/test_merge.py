"""`--shard I/N` runs joined by `prm-annotate merge`: nothing lost, nothing doubled, same as one run."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from prm_annotate.errors import UsageError
from prm_annotate.io.merge import merge
from testing.jsonl_files import read_jsonl, write_jsonl

CLI = [sys.executable, "-m", "prm_annotate"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, timeout=180)


def responses(n: int) -> list[dict]:
    """Grade input: every third answer wrong, some with whole text, some with steps."""
    out = []
    for i in range(n):
        final = i if i % 3 else i + 1
        if i % 2:
            out.append({"id": f"p{i}/0", "problem_id": f"p{i}", "answer": str(i),
                        "steps": [f"{i} - 0 = {final}", f"\\boxed{{{final}}}"]})
        else:
            out.append({"id": f"p{i}/0", "problem_id": f"p{i}", "answer": str(i),
                        "response": f"Count them.\n\nThe answer is \\boxed{{{final}}}."})
    return out


def test_sharded_grade_runs_merged_equal_the_unsharded_run(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", responses(40))
    whole = tmp_path / "whole.jsonl"
    assert run("grade", str(src), "-o", str(whole), "-q").returncode == 0
    parts = []
    for i in range(3):
        part = tmp_path / f"part{i}.jsonl"
        result = run("grade", str(src), "-o", str(part), "--shard", f"{i}/3", "-q")
        assert result.returncode == 0, result.stderr
        parts.append(str(part))
    sizes = [len(read_jsonl(Path(p))) for p in parts]
    assert sum(sizes) == 40 and min(sizes) > 0  # a real split, not one shard doing it all
    merged = tmp_path / "merged.jsonl"
    result = run("merge", *parts, "-o", str(merged), "--input", str(src))
    assert result.returncode == 0, result.stderr
    assert "40 of 40 input ids complete" in result.stderr.decode()
    # Byte for byte the unsharded output, in the input's order.
    assert merged.read_bytes() == whole.read_bytes()


def test_merge_reports_a_missing_id_and_still_writes(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": f"q{i}", "problem": "?", "answer": "1"} for i in range(5)])
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": "q0"}, {"id": "q3"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": "q1"}, {"id": "q4"}])
    out = tmp_path / "out.jsonl"
    result = run("merge", str(a), str(b), "-o", str(out), "--input", str(src))
    assert result.returncode == 1
    err = result.stderr.decode()
    assert "missing q2" in err and "4 of 5 input ids complete, 1 missing" in err
    assert [r["id"] for r in read_jsonl(out)] == ["q0", "q1", "q3", "q4"]  # input order


def test_merge_refuses_a_duplicated_id_naming_both_files(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": "q0"}, {"id": "q1"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": "q2"}, {"id": "q1"}])
    out = tmp_path / "out.jsonl"
    result = run("merge", str(a), str(b), "-o", str(out))
    assert result.returncode == 2
    err = result.stderr.decode()
    assert "duplicate id 'q1'" in err and f"{a}:2" in err and f"{b}:2" in err
    assert not out.exists()


def test_sample_outputs_checked_per_problem(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": f"q{i}", "problem": "?", "answer": "1"} for i in range(3)])
    # q0 complete, q1 has one of two samples (a crashed shard), q2 none.
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": "q0/0", "problem_id": "q0"}, {"id": "q0/1", "problem_id": "q0"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": "q1/1", "problem_id": "q1"}])
    report = merge([str(a), str(b)], str(tmp_path / "o.jsonl"), input=str(src), expect_per_input=2)
    assert report.missing == ["q1", "q2"] and report.incomplete == {"q1": 1} and report.exit_code == 1
    # Without the count, ownership by problem_id still finds q2, and notes the uneven counts.
    report = merge([str(a), str(b)], str(tmp_path / "o.jsonl"), input=str(src))
    assert report.missing == ["q2"] and report.uneven == {1: 1, 2: 1}
    result = run("merge", str(a), str(b), "-o", str(tmp_path / "o.jsonl"), "--input", str(src),
                 "--expect-per-input", "2")
    assert result.returncode == 1 and "missing q1 (1 of 2 outputs)" in result.stderr.decode()


def test_bad_shard_files_are_bad_input(tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", [{"id": "q0"}])
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b'{"id": "q1"}\n{"id": "q')
    result = run("merge", str(good), str(torn), "-o", str(tmp_path / "o.jsonl"))
    assert result.returncode == 2 and f"{torn}:2" in result.stderr.decode() and "torn" in result.stderr.decode()
    noid = write_jsonl(tmp_path / "noid.jsonl", [{"id": "q2"}, {"text": "x"}])
    with pytest.raises(UsageError, match=r"noid.jsonl:2: not a record with a string id"):
        merge([str(noid)], str(tmp_path / "o.jsonl"))
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "q0", "problem": "?", "answer": "1"}])
    stranger = write_jsonl(tmp_path / "s.jsonl", [{"id": "zz"}])
    with pytest.raises(UsageError, match="belongs to no id"):
        merge([str(good), str(stranger)], str(tmp_path / "o.jsonl"), input=str(src))
    with pytest.raises(UsageError, match="the output is the input"):
        merge([str(good)], str(good))


def test_expected_ids_are_counted_by_their_exact_names(tmp_path):
    """--expect-per-input keeps a byte per `<input id>/<i>`: an id that only looks like one ("q0/01",
    "q0/2" past n, a head that is no input id) is not counted, and a duplicate of any id is found."""
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "q0", "problem": "?", "answer": "1"},
                                               {"id": "a/b", "problem": "?", "answer": "1"}])
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": "q0/0"}, {"id": "q0/01", "problem_id": "q0"},
                                           {"id": "q0/2", "problem_id": "q0"}, {"id": "a/b/1"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": "a/b/0"}, {"id": "q0/01", "problem_id": "q0"}])
    with pytest.raises(UsageError, match=r"duplicate id 'q0/01': in .*a.jsonl:2 and .*b.jsonl:2"):
        merge([str(a), str(b)], str(tmp_path / "o.jsonl"), input=str(src), expect_per_input=2)
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": "a/b/0"}, {"id": "a/b/1"}])
    with pytest.raises(UsageError, match=r"duplicate id 'a/b/1': in .*a.jsonl:4 and .*b.jsonl:2"):
        merge([str(a), str(b)], str(tmp_path / "o.jsonl"), input=str(src), expect_per_input=2)
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": "a/b/0"}])
    report = merge([str(a), str(b)], str(tmp_path / "o.jsonl"), input=str(src), expect_per_input=2)
    assert report.missing == ["q0"] and report.incomplete == {"q0": 1}
    assert [r["id"] for r in read_jsonl(tmp_path / "o.jsonl")] == ["q0/0", "q0/01", "q0/2", "a/b/1", "a/b/0"]
