"""The scheduler on the real engine: every model stage writes byte-identical records whether its
records stream (many in flight, each advancing alone, any window) or run in lock-step batches
(testing/lockstep.py, the baseline), and the run keeps the engine busy."""
from __future__ import annotations

import orjson
import pytest

from prm_annotate.records import Problem, Response
from prm_annotate.stages.judge import JudgeStage
from prm_annotate.stages.rollout import RolloutInput, RolloutStage
from prm_annotate.stages.sample import SampleStage
from prm_annotate.strategies import get_strategy
from testing.lockstep import stream as lockstep_stream

pytestmark = pytest.mark.engine


def records_of(stage, inputs, window, lockstep):
    try:
        runs = lockstep_stream(stage, iter(inputs), window) if lockstep else stage.stream(iter(inputs), window)
        out = [o for outcomes in runs for o in outcomes]
    finally:
        stage.close()
    assert all(o.error is None for o in out), [o.error for o in out if o.error]
    return b"".join(orjson.dumps(r.dump()) + b"\n" for o in out for r in o.records)


@pytest.fixture
def world_responses(world_policy):
    from prm_annotate.world import make_problems
    from testing.rollout_bench import sample_responses

    return sample_responses(world_policy, make_problems(6, seed=5, split="scheduler"), n=3, max_tokens=96)


@pytest.mark.parametrize("strategy,share,speculate", [
    ("exhaustive", False, 0), ("early-stop", False, 0), ("binary", False, 0), ("binary", True, 0), ("scan", True, 0),
    ("early-stop", False, 64), ("binary", True, 64)])
def test_rollout_streams_the_same_records_as_lockstep(world_policy, world_responses, strategy, share, speculate):
    inputs = [RolloutInput.model_validate(r) for r in world_responses]
    assert {r.correct for r in inputs} == {True, False}  # real right and wrong responses

    def run(window, lockstep, ahead=0):
        stage = RolloutStage(world_policy, k=4, strategy=get_strategy(strategy, "hard"), max_tokens=96, seed=2,
                             share_prefixes=share, speculate=ahead)
        return records_of(stage, inputs, window, lockstep), stage.stats

    baseline, base_stats = run(window=len(inputs), lockstep=True)
    streamed, stats = run(window=4, lockstep=False, ahead=speculate)
    assert streamed == baseline
    # The window changes nothing either (3 responses per problem: windows cut through problems).
    assert run(window=1, lockstep=False)[0] == baseline
    if speculate:  # completions started ahead (some cancelled in vLLM) change no record
        assert stats["ahead_started"] > 0
    else:
        assert stats["generated_tokens"] == base_stats["generated_tokens"]
    firsts = {orjson.loads(line)["mc"]["first_error"] for line in baseline.splitlines()}
    assert -1 in firsts and max(firsts) >= 0  # some responses with a first error, some without


@pytest.mark.switches_engine
def test_sample_and_judge_votes_stream_the_same_records_as_lockstep(world_policy, request):
    from prm_annotate.world import make_problems

    problems = [Problem.model_validate(p) for p in make_problems(8, seed=6, split="scheduler")]

    def sample(window, lockstep):
        return records_of(SampleStage(world_policy, n=3, max_tokens=96, seed=4), problems, window, lockstep)

    sampled = sample(len(problems), True)
    assert sample(3, False) == sampled

    judge_engine = request.getfixturevalue("world_judge")  # the next group's engine: this test comes last
    responses = [Response.model_validate(orjson.loads(line)) for line in sampled.splitlines()]

    def judge(window, lockstep, constrained):
        stage = JudgeStage(judge_engine, votes=3, temperature=0.7, max_tokens=64, seed=1, constrained=constrained)
        return records_of(stage, responses, window, lockstep)

    for constrained in (False, True):
        assert judge(5, False, constrained) == judge(len(responses), True, constrained), constrained
