"""confidence on real engines: the sampled tokens' log-probabilities in process and over HTTP
(`vllm serve`), the same cuts from both; and `sample --segment confidence` keeping what `segment`
needs to cut the records again."""
from __future__ import annotations

import pytest

from prm_annotate.engines.base import GenerationRequest
from prm_annotate.engines.sampling import Sampling
from prm_annotate.records import Problem
from prm_annotate.segmenting import get_segmenter
from prm_annotate.steps import join_steps
from prm_annotate.stages.sample import SampleStage
from prm_annotate.stages.segment import Resegmented, resegment

PROMPT = ({"role": "user", "content": "Count from one to twenty, a number per line, then say done."},)
CONFIDENCE = get_segmenter("confidence", {"cuts": "4"})


def ask(logprobs: bool) -> GenerationRequest:
    return GenerationRequest(key="t", messages=PROMPT, sampling=Sampling(temperature=1.0, max_tokens=64, seed=4321),
                             logprobs=logprobs)


def check_tokens(result) -> None:
    (tokens,) = result.token_logprobs
    assert len(tokens) == result.generated_tokens
    assert all(lp <= 0 for _, lp in tokens)
    offsets = [o for o, _ in tokens if o is not None]
    assert offsets == sorted(offsets) and offsets[0] == 0 and offsets[-1] < len(result.texts[0])


@pytest.mark.engine
def test_sample_keeps_logprobs_and_segment_cuts_the_records_again(vllm_engine):
    problem = Problem.model_validate({"id": "p", "problem": PROMPT[0]["content"], "answer": "20"})
    stage = SampleStage(vllm_engine, n=2, max_tokens=64, seed=3, segment="confidence", segment_options=["cuts=3"])
    (out,) = stage.process([problem])
    assert out.error is None
    rows = [r.dump() for r in out.records]
    for row in rows:
        assert row["segmenter"] == {"name": "confidence", "cuts": 3, "threshold": None}
        assert len(row["token_logprobs"]) == row["generator"]["generated_tokens"]
        assert 1 < len(row["steps"]) <= 4
    assert stage.settings()["segmenter"]["name"] == "confidence"
    # `segment` reads the kept log-probabilities: the same cuts again, and other cuts from other settings.
    again = list(resegment(((f"line {i}", r) for i, r in enumerate(rows)), get_segmenter("confidence", {"cuts": "3"}),
                           "responses.jsonl", Resegmented()))
    assert [a["steps"] for a in again] == [r["steps"] for r in rows]
    fewer = list(resegment(((f"line {i}", r) for i, r in enumerate(rows)), get_segmenter("confidence", {"cuts": "1"}),
                           "responses.jsonl", Resegmented()))
    assert all(len(f["steps"]) <= 2 for f in fewer)
    assert [join_steps(f["steps"], f.get("step_joins")) for f in fewer] == [
        join_steps(r["steps"], r.get("step_joins")) for r in rows]


@pytest.mark.engine
@pytest.mark.switches_engine
def test_confidence_gives_the_same_cuts_in_process_and_over_http(vllm_engine, request):
    """The same seeded request in process and to `vllm serve`: the same sampled tokens with the same
    log-probabilities and offsets, so the same cuts. Both engines here, one after the other."""
    assert vllm_engine.generate([ask(False)])["t"].token_logprobs == []  # opt-in: none unless asked
    local = vllm_engine.generate([ask(True)])["t"]
    check_tokens(local)
    local_cut = CONFIDENCE.segment(local.texts[0], local.token_logprobs[0])
    assert len(local_cut[0]) > 1
    remote = request.getfixturevalue("openai_engine").generate([ask(True)])["t"]
    assert remote.texts == local.texts
    check_tokens(remote)
    assert [o for o, _ in remote.token_logprobs[0]] == [o for o, _ in local.token_logprobs[0]]
    assert [lp for _, lp in remote.token_logprobs[0]] == pytest.approx([lp for _, lp in local.token_logprobs[0]], abs=1e-3)
    assert CONFIDENCE.segment(remote.texts[0], remote.token_logprobs[0]) == local_cut
