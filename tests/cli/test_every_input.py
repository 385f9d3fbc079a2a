"""Every command's input path, fed malformed and foreign records (hypothesis): never a traceback.

A line that is no JSON object (torn JSON, not UTF-8, a number, a list, null) ends every command in
exit status 2 naming the file and line, before any engine starts and with no output written. Any
other record -- a record of another stage, fields of the wrong type, fields missing -- is either
taken (exit 0) or refused the same way (exit 2, file and line); the model stages, which need an
engine, may also stop at the engine (a model that does not exist). Commands run in process
(typer's runner), so a stray exception shows as `result.exception`, never hidden in a subprocess.

The bad-input promises of single commands (output left untouched, streams keeping the records before
a bad line, --skip-invalid) are tests/cli/test_cli_input.py's and test_hostile.py's; this file is
the sweep over all of them.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from typer.testing import CliRunner

from prm_annotate.cli import app

# Each command with its input at {src} (twice where it reads two files) and its outputs under {tmp}.
# The model stages name a model that does not exist: bad input must be said before they look.
COMMANDS = {
    "sample": ["sample", "{src}", "-o", "{out}", "--model", "{tmp}/no-model"],
    "rollout": ["rollout", "{src}", "-o", "{out}", "--model", "{tmp}/no-model"],
    "judge": ["judge", "{src}", "-o", "{out}", "--model", "{tmp}/no-model"],
    "score": ["score", "{src}", "-o", "{out}", "--model", "{prm}"],
    "consensus": ["consensus", "{src}", "{src}", "-o", "{out}"],
    "grade": ["grade", "{src}", "-o", "{out}"],
    "evaluate": ["evaluate", "{src}", "--gold", "{src}"],
    "export": ["export", "{src}", "-o", "{out}", "--format", "trl"],
    "compare": ["compare", "{src}", "--gold", "{src}"],
    "bon": ["bon", "{src}"],
    "stats": ["stats", "{src}"],
    "report": ["report", "{src}", "-o", "{tmp}/report.html"],
    "merge": ["merge", "{src}", "-o", "{out}"],
    "segment": ["segment", "{src}", "-o", "{out}"],
    "plan rollout": ["plan", "rollout", "{src}", "--model", "no-such/model"],
    "plan judge": ["plan", "judge", "{src}", "--model", "no-such/model"],
    "train": ["train", "{src}", "-o", "{tmp}/model", "--base", "{tmp}/no-model"],
}
# What a model stage may say of a record it takes: its engine (or PRM, or train's base) cannot start here.
ENGINE_STOPS = ("cannot start the engine", "model path does not exist", "no such checkpoint directory")

STEPS = ["Step 1: 3 + 5 = 8.", "So the answer is \\boxed{8}."]
FOREIGN = [  # a record of every shape the pipeline writes or reads
    {"id": "p", "problem": "What is 3 + 5?", "answer": "8"},
    {"id": "p/0", "problem_id": "p", "problem": "What is 3 + 5?", "answer": "8", "steps": STEPS, "correct": True},
    {"id": "p/1", "problem": "What is 3 + 5?", "answer": "8", "steps": ["A.", "B."], "thought_steps": 1,
     "thought_finished": True, "step_joins": ["\n</think>\n\n"]},
    {"id": "p/0", "problem": "x", "answer": "8", "steps": STEPS,
     "mc": {"k": 8, "label": "hard", "strategy": "exhaustive", "scores": [1.0, 1.0], "first_error": -1}},
    {"id": "p/0", "problem": "x", "answer": "8", "steps": STEPS, "judge": {"first_error": -1, "votes": [-1]}},
    {"id": "p/0", "problem": "x", "steps": STEPS, "labels": [True, True], "first_error": -1},
    {"id": "gsm8k-0", "generator": "m", "problem": "x", "steps": STEPS, "final_answer_correct": True, "label": -1},
    {"id": "p/0", "problem": "x", "steps": STEPS, "prm": {"scores": [0.9, 0.8], "first_error": -1}},
    {"prompt": "x", "completions": STEPS, "labels": [True, True]},
]
FIELDS = sorted({k for r in FOREIGN for k in r} | {"response", "token_logprobs", "generator"})
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False, width=16),
                    st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.sampled_from(FIELDS + ["scores", "k"]),
                                                                       inner, max_size=3)), max_leaves=6)


def _broken(record: dict, how: int) -> bytes:
    whole = orjson.dumps(record)
    return [whole[: max(1, len(whole) // 2)], b"\xff\xfe" + whole, b"42", b'"text"', b"[1, 2]", b"null",
            whole.replace(b"{", b"{{", 1)][how % 7]


# A line that is no JSON object: every command refuses it.
malformed = st.builds(_broken, st.sampled_from(FOREIGN), st.integers(0, 6))


@st.composite
def foreign(draw) -> bytes:
    """A record of some stage, perhaps with fields changed to values of any type or left out."""
    record = dict(draw(st.sampled_from(FOREIGN)))
    for key in draw(st.lists(st.sampled_from(FIELDS), max_size=3)):
        if draw(st.booleans()):
            record[key] = draw(values)
        else:
            record.pop(key, None)
    return orjson.dumps(record)


@pytest.fixture(scope="module")
def prm(tmp_path_factory) -> Path:
    """A real PRM checkpoint (tiny, random): `score` reads its config before the input."""
    from testing.tiny_prms import build_qwen_card_prm

    return build_qwen_card_prm(tmp_path_factory.mktemp("prm") / "prm")


def invoke(name: str, lines: list[bytes], bad: int | None, tmp: Path, prm: Path):
    src, out = tmp / "in.jsonl", tmp / "out.jsonl"
    for p in (out, tmp / "report.html"):
        p.unlink(missing_ok=True)
    src.write_bytes(b"".join(line + b"\n" for line in lines))
    args = [a.format(src=src, out=out, tmp=tmp, prm=prm) for a in COMMANDS[name]]
    result = CliRunner().invoke(app, args)
    said = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (name, lines, said)
    assert "Traceback" not in said, (name, said)
    assert result.exit_code in (0, 1, 2), (name, result.exit_code, said)
    if result.exit_code == 2:
        named = f"{src}:" in said or f"{src} (record" in said
        assert named or any(s in said for s in ENGINE_STOPS), (name, lines, said)
        if named and "-o" in args:
            assert not out.exists(), (name, "output written after a refusal")
    return result


GOOD_LINE = orjson.dumps(FOREIGN[1])
BOUNDED = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("name", sorted(COMMANDS))
@BOUNDED
@given(line=malformed, before=st.integers(0, 2))
def test_a_line_that_is_no_json_object_is_exit_2_with_file_and_line(name, line, before, tmp_path, prm):
    if name == "score" and before:  # a record score takes would start its engine
        before = 0
    lines = [GOOD_LINE.replace(b'"p/0"', f'"p/{i}"'.encode()) for i in range(before)] + [line]
    result = invoke(name, lines, before, tmp_path, prm)
    said = result.output
    assert result.exit_code == 2, (name, lines, said)
    # A JSON array file is read as records ("record N"); any other as lines ("file:N"): the broken
    # line, or a line before it that this command does not take (records of one stage's shape).
    at = re.search(re.escape(f"{tmp_path / 'in.jsonl'}") + r":(\d+):", said)
    assert "(record" in said or (at and 1 <= int(at.group(1)) <= before + 1), (name, said)


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - {"score"}))
@BOUNDED
@given(line=foreign())
def test_a_foreign_or_loose_record_is_taken_or_refused_never_a_traceback(name, line, tmp_path, prm):
    invoke(name, [line], 0, tmp_path, prm)


def test_score_refuses_a_bad_line_before_its_engine_starts(tmp_path, prm):
    """`score` reads a PRM's config first; a bad record is said then, not after the engine started."""
    lines = [orjson.dumps({"id": "a", "problem": "p", "steps": ["x"]}), orjson.dumps({"id": 5})]
    result = invoke("score", lines, 1, tmp_path, prm)
    assert result.exit_code == 2 and f"{tmp_path / 'in.jsonl'}:2: id" in result.output, result.output


def test_the_sweep_names_every_command_that_reads_records():
    """A new command that reads a file is added here (those that read none: models, world, reward-server)."""
    from typer.main import get_command

    group = get_command(app)
    names = set(group.commands) - {"models", "world", "reward-server", "plan"}
    names |= {f"plan {c}" for c in group.commands["plan"].commands}
    assert names == set(COMMANDS), sorted(names ^ set(COMMANDS))
    assert json.loads(json.dumps(FOREIGN))  # plain JSON, as files hold
