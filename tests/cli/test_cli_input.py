"""Bad input through the real CLI: exit 2, file and line named, outputs left as they were."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from testing.paths import REPO, TEST_DATA

CLI = [sys.executable, "-m", "prm_annotate"]
GOOD = [
    {"id": "a", "answer": "18", "response": "So she makes $18.\n\nThe answer is \\boxed{18}."},
    {"id": "b", "answer": "3", "steps": ["1 + 1 = 2", "\\boxed{2}"]},
    {"id": "c", "answer": "5", "steps": ["2 + 3 = 5", "\\boxed{5}"]},
]


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, timeout=120)


def jsonl(records: list) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def ids(path: Path) -> list[str]:
    return [orjson.loads(line)["id"] for line in path.read_bytes().splitlines()]


def test_help_lists_the_pipeline_first_as_the_contract_does():
    """prm_annotate/cli/__init__.py promises it: the pipeline's commands first, in pipeline order."""
    out = run("--help").stdout.decode()
    listed = re.findall(r"^│ ([a-z]+) {2,}", out, re.M)
    pipeline = ["sample", "rollout", "judge", "consensus"]
    assert listed[:4] == pipeline, listed
    assert set(listed) > {"grade", "evaluate", "export", "compare", "stats", "merge", "models", "world"}
    contract = (REPO / "docs" / "contract.md").read_text()
    assert re.findall(r"^prm-annotate ([a-z]+)", contract, re.M)[:4] == pipeline


def test_grade_writes_verdicts(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(jsonl(GOOD))
    result = run("grade", str(src), "-o", str(tmp_path / "out.jsonl"))
    assert result.returncode == 0, result.stderr
    out = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert [(r["id"], r["final_answer"], r["correct"]) for r in out] == [("a", "18", True), ("b", "2", False), ("c", "5", True)]
    assert result.stderr.decode().splitlines()[-1].startswith("grade: 3 responses read: 3 graded (2 correct); ")
    manifest = orjson.loads((tmp_path / "out.manifest.json").read_bytes())
    assert manifest["runs"][0]["counts"]["written"] == 3


BAD = {
    "invalid JSON": b'{"id": "x", "answer": ',
    "missing answer": b'{"id": "x", "response": "\\\\boxed{1}"}',
    "wrong type": b'{"id": "x", "answer": "1", "steps": "not a list"}',
    "empty steps": b'{"id": "x", "answer": "1", "steps": []}',
    "duplicate id": b'{"id": "a", "answer": "1", "response": "1"}',
    "non-UTF-8": b'{"id": "x", "answer": "1", "response": "\xff\xfe"}',
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_file_input_exits_2_and_leaves_output_untouched(tmp_path, case):
    src = tmp_path / "in.jsonl"
    src.write_bytes(jsonl(GOOD[:2]) + BAD[case] + b"\n" + jsonl(GOOD[2:]))
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"id": "earlier"}\n')
    result = run("grade", str(src), "-o", str(out))
    assert result.returncode == 2
    assert f"{src}:3:" in result.stderr.decode()
    assert out.read_bytes() == b'{"id": "earlier"}\n'


def test_bad_line_on_a_stream_keeps_the_good_records_before_it(tmp_path):
    out = tmp_path / "out.jsonl"
    result = run("grade", "-", "-o", str(out), stdin=jsonl(GOOD[:2]) + b"garbage\n" + jsonl(GOOD[2:]))
    assert result.returncode == 2
    assert "-:3: invalid JSON" in result.stderr.decode()
    assert ids(out) == ["a", "b"]


def test_skip_invalid_sets_bad_lines_aside(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(jsonl(GOOD[:1]) + b"garbage\n" + BAD["missing answer"] + b"\n" + jsonl(GOOD[1:]))
    out = tmp_path / "out.jsonl"
    result = run("grade", str(src), "-o", str(out), "--skip-invalid")
    assert result.returncode == 0, result.stderr
    assert ids(out) == ["a", "b", "c"]
    rejects = [orjson.loads(line) for line in (tmp_path / "out.rejects.jsonl").read_bytes().splitlines()]
    assert [r["where"] for r in rejects] == ["line 2", "line 3"]
    # 5 lines read = 3 graded + 2 invalid, set aside
    assert result.stderr.decode().splitlines()[-1].startswith("grade: 5 responses read: 3 graded (2 correct), "
                                                              "2 set aside (2 invalid); ")


def test_stdin_to_stdout_and_resume_skips_finished_ids(tmp_path):
    result = run("grade", "-", stdin=jsonl(GOOD))
    assert result.returncode == 0
    assert [orjson.loads(line)["id"] for line in result.stdout.splitlines()] == ["a", "b", "c"]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_bytes(jsonl(GOOD))
    assert run("grade", str(src), "-o", str(out), "--limit", "2").returncode == 0
    assert ids(out) == ["a", "b"]
    again = run("grade", str(src), "-o", str(out))
    assert "3 responses read: 1 graded (1 correct), 2 already done; " in again.stderr.decode()
    assert ids(out) == ["a", "b", "c"]


def test_concurrent_writer_is_refused_with_exit_2(tmp_path):
    out = tmp_path / "out.jsonl"
    holder = subprocess.Popen([sys.executable, "-c",
                               "import time; from prm_annotate.io.output import ResumableWriter as W; "
                               f"w = W({str(out)!r}); print('ok', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE)
    try:
        holder.stdout.readline()
        src = tmp_path / "in.jsonl"
        src.write_bytes(jsonl(GOOD))
        result = run("grade", str(src), "-o", str(out))
        assert result.returncode == 2
        assert "another process is writing" in result.stderr.decode()
    finally:
        holder.kill()
        holder.wait()


def test_missing_input_file_is_exit_2(tmp_path):
    result = run("grade", str(tmp_path / "nope.jsonl"))
    assert result.returncode == 2 and "no such file" in result.stderr.decode()


@pytest.mark.parametrize("split", ["gsm8k", "math"])
def test_grade_agrees_with_human_verdicts_on_processbench(tmp_path, split):
    gold = TEST_DATA / "grading" / f"processbench-{split}-gold.jsonl"
    result = run("grade", str(gold), "-o", str(tmp_path / "graded.jsonl"), "-q")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.decode().splitlines()
    line = [x for x in lines if "agrees with final_answer_correct" in x][0]
    agreed, total = (int(x) for x in line.split(" on ")[1].split(" (")[0].split(" of "))
    assert total == {"gsm8k": 400, "math": 112}[split]
    assert agreed / total >= 0.99
    # Plain math-verify on the same records beside it, and the disagreements split both times.
    plain = [x for x in lines if "plain math-verify agrees on" in x][0]
    plain_agreed, plain_total = (int(x) for x in plain.split(" on ")[1].split(" (")[0].split(" of "))
    assert plain_total == total and agreed >= plain_agreed
    for summary, agree in ((line, agreed), (plain, plain_agreed)):
        accepts, rejects = (int(summary.split(f" {kind}")[0].rsplit(" ", 1)[1]) for kind in ("false accepts", "false rejects"))
        assert agree + accepts + rejects == total
