"""Reading, validating and crash-safe writing: the foundation every stage stands on."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from testing.paragraph_steps import split_steps
from pydantic import ValidationError

from prm_annotate.errors import InputError
from prm_annotate.io.inputs import read_records
from prm_annotate.io.jsonl import dumps, iter_jsonl
from prm_annotate.io.output import OutputLocked, ResumableWriter
from prm_annotate.io.sharding import shard_of
from prm_annotate.pipeline.runner import RunOptions, read_validated
from prm_annotate.records import Problem, Response, Rollout
from prm_annotate.steps import join_steps
from testing.paths import TEST_DATA

SHARED = TEST_DATA


def write_lines(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


# --- readers -------------------------------------------------------------------------------

def test_gsm8k_reader_takes_answer_after_hashes_and_makes_ids():
    rows = list(read_records(SHARED / "gsm8k" / "test.jsonl"))
    assert len(rows) == 40
    where, first = rows[0]
    assert where == "line 1"
    assert first["id"] == "gsm8k-test-0" and first["answer"] == "18"
    assert first["problem"].startswith("Janet")
    assert rows[7][1]["id"] == "gsm8k-test-7"
    Problem.model_validate(first)


def test_math_reader_uses_answer_field_or_last_boxed(tmp_path):
    rows = list(read_records(SHARED / "math500" / "test.jsonl"))
    assert len(rows) == 40 and rows[0][1]["id"] == "math-test-0"
    assert rows[0][1]["answer"] == r"\left( 3, \frac{\pi}{2} \right)"
    assert rows[0][1]["subject"] == "Precalculus"  # other fields pass through
    no_answer = write_lines(tmp_path / "m.jsonl", [orjson.dumps({"problem": "1+1?", "solution": r"so \boxed{\frac{1}{2}}."})])
    assert list(read_records(no_answer))[0][1]["answer"] == r"\frac{1}{2}"


def test_processbench_reader_reads_the_json_array():
    rows = list(read_records(SHARED / "processbench" / "gsm8k.json"))
    assert len(rows) == 150
    where, rec = rows[3]
    assert where == "record 3" and rec["id"] == "gsm8k-3"
    Response.model_validate(rec)


def test_generic_reader_with_field_mapping(tmp_path):
    from prm_annotate.io.inputs import FieldMap

    path = write_lines(tmp_path / "p.jsonl", [orjson.dumps({"qid": "q1", "text": "2+2?", "gold": 4, "extra": [1]})])
    rec = list(read_records(path, "generic", FieldMap(id="qid", problem="text", answer="gold")))[0][1]
    problem = Problem.model_validate(rec)
    assert (problem.id, problem.problem, problem.answer) == ("q1", "2+2?", "4")
    assert problem.dump()["extra"] == [1]


# --- validation ------------------------------------------------------------------------------

BAD_LINES = {
    "invalid JSON": (b'{"id": "b", "problem": ', "invalid JSON"),
    "missing field": (b'{"id": "b", "answer": "1"}', "problem"),
    "wrong type": (b'{"id": "b", "problem": ["x"], "answer": "1"}', "problem"),
    "not an object": (b'[1, 2]', "expected a JSON object"),
    "non-UTF-8": (b'{"id": "b", "problem": "caf\xe9", "answer": "1"}', "UTF-8"),
    "duplicate id": (b'{"id": "a", "problem": "again", "answer": "1"}', "duplicate id"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_bad_line_names_file_and_line(tmp_path, case):
    bad, needle = BAD_LINES[case]
    path = write_lines(tmp_path / "in.jsonl", [b'{"id": "a", "problem": "1+1?", "answer": "2"}', bad])
    with pytest.raises(InputError) as err:
        list(read_validated(str(path), Problem, RunOptions(input=str(path)), None))
    assert str(err.value).startswith(f"{path}:2: ")
    assert needle in str(err.value)


def test_empty_steps_are_bad_input(tmp_path):
    for steps, needle in (([], "steps is empty"), (["ok", "  "], "step 1 is empty")):
        path = write_lines(tmp_path / "r.jsonl", [orjson.dumps({"id": "r", "problem": "p", "steps": steps})])
        with pytest.raises(InputError, match=needle):
            list(read_validated(str(path), Response, RunOptions(input=str(path)), None))


def test_numbers_as_gold_answers_are_text_but_booleans_are_not(tmp_path):
    assert Problem.model_validate({"id": "a", "problem": "p", "answer": 18}).answer == "18"
    with pytest.raises(Exception):
        Problem.model_validate({"id": "a", "problem": "p", "answer": True})


# --- steps -------------------------------------------------------------------------------------

def test_a_made_record_is_validated_and_dumps_in_the_order_it_was_made():
    """Stages make their output records with `Model.make`: a drift fails where the record is made,
    and the key order the stage wrote (passed-through fields in their place) is kept."""
    made = Rollout.make({"id": "r", "problem_id": "p", "problem": "q", "answer": "3", "src": "t",
                         "steps": ["a", "b"], "mc": {"k": 2, "label": "hard", "strategy": "exhaustive",
                                                     "scores": [0.5, 1.0], "first_error": -1, "completions": 2,
                                                     "shared_completions": 0, "generated_tokens": 5, "model": "m"}})
    # fields the maker left to their defaults come after the ones it gave
    assert list(made.dump()) == ["id", "problem_id", "problem", "answer", "src", "steps", "mc", "final_answer", "correct"]
    assert list(made.dump()["mc"])[6:] == ["shared_completions", "generated_tokens", "model"]
    # validated as any read record, unlike a dict literal: the same data read back reorders, not changes
    assert Rollout.model_validate(made.dump()).dump() == made.dump()
    assert list(Rollout.model_validate(made.dump()).dump())[:3] == ["id", "problem", "steps"]
    with pytest.raises(ValidationError, match="mc.scores has 1 entries for 2 steps"):
        Rollout.make({**made.dump(), "mc": {**made.dump()["mc"], "scores": [0.5]}})


def test_split_drops_empty_pieces_and_join_rebuilds_text():
    text = "Step one.\n\nStep two\nstill two.\n\n\\boxed{3}"
    steps = split_steps(text)
    assert steps == ["Step one.", "Step two\nstill two.", "\\boxed{3}"]
    assert join_steps(steps) == text
    assert split_steps("a\n\n\n\n \n\nb") == ["a", "b"]
    assert split_steps("a\nb\n", "\n") == ["a", "b"]


# --- crash-safe output -------------------------------------------------------------------------

def test_torn_last_line_is_dropped_and_ids_are_resumed(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    out.write_bytes(dumps({"id": "a"}) + dumps({"id": "b"}) + b'{"id": "c", "tex')
    with ResumableWriter(out) as writer:
        assert writer.done_ids == {"a", "b"} and writer.torn_bytes > 0
        writer.write({"id": "c", "text": "whole"})
    assert [orjson.loads(line)["id"] for line in out.read_bytes().splitlines()] == ["a", "b", "c"]
    assert "torn last line" in capsys.readouterr().err


def test_second_writer_on_same_output_is_refused(tmp_path):
    out = tmp_path / "out.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from prm_annotate.io.output import ResumableWriter
        w = ResumableWriter({str(out)!r})
        print("locked", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(OutputLocked, match="another process is writing"):
            ResumableWriter(out)
    finally:
        holder.kill()
        holder.wait()
    # The kernel released the dead holder's lock: no stale lock file to clean up.
    ResumableWriter(out).close()


WRITER_SCRIPT = """
import sys, time
from prm_annotate.io.output import ResumableWriter
w = ResumableWriter(sys.argv[1], flush_every=1)
for i in range(200):
    if "r%03d" % i in w.done_ids:
        continue
    w.write({"id": "r%03d" % i, "payload": "x" * 5000})
    print(i, flush=True)
    time.sleep(0.01)
w.close()
"""


def test_resume_after_sigkill_of_a_real_writer(tmp_path):
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", WRITER_SCRIPT, str(out)], stdout=subprocess.PIPE, text=True)
    for _ in range(40):
        proc.stdout.readline()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = out.read_bytes().count(b"\n")
    assert 0 < partial < 200
    subprocess.run([sys.executable, "-c", WRITER_SCRIPT, str(out)], check=True, stdout=subprocess.DEVNULL)
    ids = [orjson.loads(line)["id"] for line in out.read_bytes().splitlines()]
    assert ids == [f"r{i:03d}" for i in range(200)]


def test_shards_are_stable_and_complete():
    ids = [f"gsm8k-test-{i}/{j}" for i in range(300) for j in range(4)]
    shards = [shard_of(i, 4) for i in ids]
    assert shards == [shard_of(i, 4) for i in ids]
    assert {0, 1, 2, 3} == set(shards)
    assert min(shards.count(s) for s in range(4)) > 200  # roughly even
    # Same record, same shard, regardless of what else is in the input or its order.
    assert shard_of("gsm8k-test-7/3", 4) == shard_of("gsm8k-test-7/3", 4)
    assert shard_of("x", 1) == 0


def test_jsonl_stream_reader_stops_at_first_bad_line(tmp_path):
    path = write_lines(tmp_path / "s.jsonl", [b'{"id": "a"}', b"", b"nope", b'{"id": "c"}'])
    seen = []
    with pytest.raises(InputError, match=":3: invalid JSON"):
        for where, obj in iter_jsonl(path):
            seen.append(obj["id"])
    assert seen == ["a"]
