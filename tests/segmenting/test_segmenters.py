"""The segmenters: steps and joins give the text back (generated and real traces), merge's default
budget on real long traces, a new segmenter as one module and one registry line, confidence's cuts,
and the `segment` command."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from testing.paragraph_steps import split_steps
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.engines.sampling import TokenLogprob, align_tokens
from prm_annotate.segmenting import SEGMENTERS, SegmentError, Segmenter, get_segmenter, segment_text
from prm_annotate.segmenting.base import Span
from prm_annotate.segmenting.merge import DEFAULT_BUDGET
from prm_annotate.steps import join_record, join_steps, prefix_text, record_joins

TRACES = Path(__file__).resolve().parents[1] / "data" / "long_traces.jsonl"


def real_traces() -> list[dict]:
    return [json.loads(line) for line in TRACES.read_text(encoding="utf-8").splitlines()]


def tokens_of(text: str, seed: int) -> list[TokenLogprob]:
    """Made-up sampled tokens: the text in pieces of 1-5 characters, each with a log-probability."""
    out, pos, k = [], 0, seed
    while pos < len(text):
        k = (k * 1103515245 + 12345) % 2**31
        n = 1 + k % 5
        out.append(TokenLogprob(pos, -((k >> 8) % 1000) / 100))
        pos += n
    return out


def untagged(text: str) -> str:
    return text.replace("</think>", "").replace("<think>", "")


def check_round_trip(text: str, steps: list[str], joins: list[str]) -> None:
    """The steps and joins give the text back but for white space and tags at either end; no step
    holds a tag or is blank."""
    joined = join_steps(steps, joins)
    at = text.find(joined)
    assert at >= 0 and not untagged(text[:at]).strip() and not untagged(text[at + len(joined):]).strip(), "text lost"
    assert all(s.strip() for s in steps), "a blank step"
    assert not any("<think>" in s or "</think>" in s for s in steps), "a tag in a step"
    assert len(joins) == max(len(steps) - 1, 0)


ALL = [("paragraphs", {}), ("merge", {"budget": "40"}), ("merge", {}), ("reflection", {}),
       ("reflection", {"at": "sentence"}), ("confidence", {"cuts": "5"}), ("confidence", {"threshold": "-5"})]

pieces = st.sampled_from(["Wait", "Hmm, no.", " ", "\n", "\n\n", "x = 2.", "Alternatively", "é", "𝑥", "\t", "But wait",
                          ". ", "Let me check", "**Wait**", "a", "<think>", "</think>"])


@settings(max_examples=150, deadline=None)
@given(st.lists(pieces, max_size=40).map("".join), st.integers(0, 2**16))
@pytest.mark.parametrize("name,options", ALL)
def test_steps_and_joins_give_generated_text_back(name, options, text, seed):
    steps, joins = get_segmenter(name, options).segment(text, tokens_of(text, seed))
    check_round_trip(text, steps, joins)
    if not text.strip():
        assert steps == []


@pytest.mark.parametrize("name,options", ALL)
def test_steps_and_joins_give_real_traces_back(name, options):
    """The 30 real traces open their thought with `<think>\n`: the steps start after it, the thought's
    end at `</think>`, and the text from the first step on comes back byte for byte."""
    for r in real_traces():
        text = r["response"]
        made = segment_text(text, get_segmenter(name, options), tokens_of(text, 7), thinks=True)
        check_round_trip(text, made.steps, made.joins)
        assert text.startswith("<think>\n") and join_steps(made.steps, made.joins) == text[len("<think>\n"):].rstrip()
        assert 0 < made.thought_steps < len(made.steps)
        assert "</think>" in made.joins[made.thought_steps - 1]
        assert "</think>" not in join_steps(made.steps[:made.thought_steps], made.joins[:made.thought_steps - 1])


def test_paragraphs_is_todays_rule_with_the_dropped_pieces_in_the_joins():
    text = "A\n\n  \n\nB  \n\n\n\nC"
    steps, joins = get_segmenter("paragraphs").segment(text)
    assert steps == split_steps(text) == ["A", "B  ", "C"]
    assert joins == ["\n\n  \n\n", "\n\n\n\n"]
    assert record_joins(joins, "\n\n") == joins
    assert record_joins(["\n\n", "\n\n"], "\n\n") is None  # today's records stay as they were
    assert prefix_text(steps, joins, 0) == "A\n\n  \n\n"  # what a rollout continues after step 0
    assert prefix_text(steps, None, 0) == "A\n\n" and prefix_text(steps, joins, 2) == text + "\n\n"
    from prm_annotate.records import Response
    row = {"id": "r", "problem": "q", "steps": steps, "step_joins": joins}
    assert join_record(row) == join_record(Response.model_validate(row)) == text
    assert join_record({"steps": ["a", "b"], "segmenter": {"name": "paragraphs", "sep": "\n"}}) == "a\nb"
    assert join_record({"steps": ["a", "b"]}) == "a\n\nb"


def test_merge_default_budget_brings_every_real_trace_under_40_steps():
    traces = real_traces()
    assert len(traces) >= 24
    paragraphs = [len(get_segmenter("paragraphs").segment(r["response"])[0]) for r in traces]
    merged = [len(get_segmenter("merge").segment(r["response"])[0]) for r in traces]
    assert min(paragraphs) >= 80  # the baseline: not one real trace is under 40 paragraphs
    assert max(merged) < 40, merged
    assert get_segmenter("merge").record()["budget"] == DEFAULT_BUDGET
    # A tighter budget is a real knob: at 64 tokens the longest traces go over 40 again.
    assert max(len(get_segmenter("merge", {"budget": "64"}).segment(r["response"])[0]) for r in traces) >= 40


def test_merge_never_cuts_inside_a_paragraph_and_counts_by_a_tokenizer(tiny_model_dir):
    text = "x" * 100 + "\n\nshort\n\nalso short\n\n" + "y" * 100
    steps, _ = get_segmenter("merge", {"budget": "10"}).segment(text)
    assert steps == ["x" * 100, "short\n\nalso short", "y" * 100]
    counted = get_segmenter("merge", {"budget": "10", "tokenizer": str(tiny_model_dir)})
    assert counted.record()["tokenizer"] == str(tiny_model_dir)
    check_round_trip(text, *counted.segment(text))


def test_reflection_cuts_where_the_trace_turns():
    text = "Let x = 2.\n\nSo y = 4.\n\nWait, y = 3. Hmm, no.\n\nThus 4.\n\nWaiting is not a turn."
    steps, joins = get_segmenter("reflection").segment(text)
    assert steps == ["Let x = 2.\n\nSo y = 4.", "Wait, y = 3. Hmm, no.\n\nThus 4.\n\nWaiting is not a turn."]
    steps, joins = get_segmenter("reflection", {"at": "sentence"}).segment(text)
    assert steps[1:] == ["Wait, y = 3.", "Hmm, no.\n\nThus 4.\n\nWaiting is not a turn."] and joins[1] == " "
    steps, _ = get_segmenter("reflection", {"markers": "Thus"}).segment(text)
    assert steps[-1].startswith("Thus 4.")


def test_confidence_cuts_before_the_least_confident_tokens_never_inside_a_character():
    text = "We have é𝑥 = 3. So the answer is 9."
    # Tokens as an engine decodes them one by one: the 4-byte 𝑥 comes as two pieces (U+FFFD each).
    pieces = [("We", -0.1), (" have", -0.2), (" é", -9.0), ("\ufffd", -8.0), ("\ufffd", -7.5), (" =", -0.1),
              (" 3", -0.3), (".", -0.1), (" So", -6.0), (" the", -0.1), (" answer", -0.2), (" is", -0.1),
              (" 9", -0.4), (".", -0.1)]
    tokens = align_tokens(text, pieces)
    assert [t.offset for t in tokens[:6]] == [0, 2, 7, None, None, 10]  # the 𝑥's pieces: no offset
    steps, joins = get_segmenter("confidence", {"cuts": "2"}).segment(text, tokens)
    assert steps == ["We have", "é𝑥 = 3.", "So the answer is 9."] and joins == [" ", " "]
    steps, _ = get_segmenter("confidence", {"threshold": "-5.5"}).segment(text, tokens)
    assert len(steps) == 3
    with pytest.raises(SegmentError):
        get_segmenter("confidence").segment(text)


def test_a_new_segmenter_is_one_module_and_one_registry_line(monkeypatch, tmp_path):
    @dataclasses.dataclass(frozen=True)
    class Lines(Segmenter):  # the module's whole content
        name = "lines"
        summary = "a step per line"

        def spans(self, text, tokens):
            spans, pos = [], 0
            for line in text.split("\n"):
                if line.strip():
                    spans.append(Span(pos, pos + len(line)))
                pos += len(line) + 1
            return spans

    monkeypatch.setitem(SEGMENTERS, "lines", Lines)  # the registry line
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps({"id": "a", "problem": "p", "steps": ["one\ntwo", "three"]}) + "\n")
    out = tmp_path / "o.jsonl"
    res = CliRunner().invoke(app, ["segment", str(src), "-o", str(out), "--segment", "lines"])
    assert res.exit_code == 0, res.output
    rec = json.loads(out.read_text())
    assert rec["steps"] == ["one", "two", "three"] and rec["segmenter"] == {"name": "lines"}
    assert rec["step_joins"] == ["\n", "\n\n"]


def test_segment_command_recuts_and_refuses_confidence_without_logprobs(tmp_path):
    trace = real_traces()[0]
    src = tmp_path / "responses.jsonl"
    rows = [{"id": "a", "problem": trace["problem"], "steps": split_steps(trace["response"])},
            {"id": "b", "problem": "p", "steps": ["1", "2"]}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "merged.jsonl"
    res = CliRunner().invoke(app, ["segment", str(src), "-o", str(out), "--segment", "merge"])
    assert res.exit_code == 0, res.output
    merged = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(merged[0]["steps"]) < 40 < len(rows[0]["steps"])
    assert join_steps(merged[0]["steps"], merged[0].get("step_joins")) == join_steps(rows[0]["steps"])
    assert merged[0]["segmenter"]["name"] == "merge"
    manifest = json.loads((tmp_path / "merged.manifest.json").read_text())
    assert manifest["runs"][-1]["segmenter"]["budget"] == DEFAULT_BUDGET
    # Back to paragraphs: the records as they were (no joins field: every join is the separator).
    back = tmp_path / "back.jsonl"
    assert CliRunner().invoke(app, ["segment", str(out), "-o", str(back)]).exit_code == 0
    assert [json.loads(x)["steps"] for x in back.read_text().splitlines()] == [r["steps"] for r in rows]
    assert "step_joins" not in json.loads(back.read_text().splitlines()[0])

    res = CliRunner().invoke(app, ["segment", str(src), "-o", str(tmp_path / "c.jsonl"), "--segment", "confidence"])
    assert res.exit_code == 2
    assert f"{src}:1:" in res.output and "token_logprobs" in res.output
    assert not (tmp_path / "c.jsonl").exists()
    res = CliRunner().invoke(app, ["segment", str(src), "--segment", "merge", "--segment-option", "budgt=3"])
    assert res.exit_code == 2 and "budgt" in res.output


def test_sample_records_its_segmenter_and_joins_and_refuses_confidence_without_logprobs():
    from prm_annotate.errors import UsageError
    from prm_annotate.records import Problem
    from prm_annotate.stages.sample import SampleStage
    from testing.scripted_engine import ScriptedEngine

    text = "First.\n\n\n\nWait, no.\n\nSo \\boxed{8}"
    problem = Problem.model_validate({"id": "p", "problem": "q", "answer": "8"})
    (out,) = SampleStage(ScriptedEngine(lambda r: text), n=1, segment="reflection").process([problem])
    (row,) = [r.dump() for r in out.records]
    assert row["steps"] == ["First.", "Wait, no.\n\nSo \\boxed{8}"] and row["step_joins"] == ["\n\n\n\n"]
    assert row["segmenter"]["name"] == "reflection" and "token_logprobs" not in row
    (out,) = SampleStage(ScriptedEngine(lambda r: text), n=1).process([problem])
    (row,) = [r.dump() for r in out.records]
    assert row["steps"] == ["First.", "Wait, no.", "So \\boxed{8}"]  # today's rule
    assert row["step_joins"] == ["\n\n\n\n", "\n\n"]  # the dropped blank piece kept in its join
    (out,) = SampleStage(ScriptedEngine(lambda r: "A\n\nB"), n=1).process([problem])
    assert "step_joins" not in out.records[0].dump()  # every join the separator: the record as before
    with pytest.raises(UsageError, match="log-probabilities"):
        list(SampleStage(ScriptedEngine(lambda r: text), n=1, segment="confidence").process([problem]))
    with pytest.raises(UsageError, match="budget"):
        SampleStage(ScriptedEngine(lambda r: text), n=1, segment="merge", segment_options=["budget=0"])


def test_rollout_continues_the_text_as_the_record_joins_it():
    """A record cut by a segmenter (its joins are not the separator): each prefix a rollout continues
    is the response's own text up to the step, with the join after it — never a re-split."""
    from prm_annotate.stages.rollout import RolloutInput, RolloutStage
    from testing.scripted_engine import ScriptedEngine

    text = "We start with 3 apples. Then 3 + 5 = 8.\n\n\n\nWait, 8 * 2 = 17.\n\nSo \\boxed{17}."
    steps, joins = get_segmenter("reflection", {"at": "sentence", "markers": "Then,Wait"}).segment(text)
    assert steps[:2] == ["We start with 3 apples.", "Then 3 + 5 = 8."] and joins[:2] == [" ", "\n\n\n\n"]
    rec = RolloutInput.model_validate({"id": "p/0", "problem": "Tom...", "answer": "16", "steps": steps,
                                       "step_joins": joins, "correct": False})
    engine = ScriptedEngine(lambda r: "The answer is \\boxed{16}.")
    stage = RolloutStage(engine, k=1)
    (out,) = stage.process([rec])
    assert out.error is None
    prefixes = {r.messages[-1]["content"] for r in engine.requests}
    assert prefixes == {prefix_text(steps, joins, j) for j in range(len(steps) - 1)}
    assert "We start with 3 apples. Then 3 + 5 = 8.\n\n\n\n" in prefixes  # the text as written
    # Without the joins (today's records) the same steps would be continued as "\n\n"-joined text.
    assert "We start with 3 apples.\n\n" not in prefixes
