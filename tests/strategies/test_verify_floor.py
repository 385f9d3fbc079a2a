"""The verify road's floor (testing/verify_floor.py) on hand-made completion lists, against the
verify plan itself driven one completion at a time (a second way to the same count)."""
from __future__ import annotations

import random

import orjson
import pytest

from prm_annotate.strategies.base import ProbeResult
from prm_annotate.strategies.verify import JudgeClaim, Verify
from testing.verify_floor import distinct_prefixes, first_needed, floor_counts, verify_floor

K = 8
F, T = False, True


def driven(n_steps: int, last_correct: bool, claim: JudgeClaim, rights, k: int = K) -> dict[int, int]:
    """The baseline: the real plan asks, and is answered one completion at a time in seed order (the
    first probe of each round only), until it is settled; the completions it was answered."""
    plan = Verify().plan(n_steps, k, 0.0, last_correct, claim)
    used: dict[int, int] = {}
    while True:
        probes = plan.next_round()
        if not probes:
            break
        probe = probes[0]
        used[probe.step] = used.get(probe.step, 0) + 1
        plan.observe([ProbeResult(probe, rights[probe.step][probe.index])])
    return used


@pytest.mark.parametrize("n_steps, last_correct, j, rights, expected", [
    # j refuted at its third completion: nothing at j-1
    (5, F, 2, {2: [F, F, T, F, F, F, F, F]}, {2: 3}),
    # j holds (all K wrong); j-1's second completion is right: confirmed
    (5, F, 2, {2: [F] * K, 1: [F, T] + [F] * 6}, {2: 8, 1: 2}),
    # j holds and j-1 has no right one: refuted at j-1 after all K
    (5, F, 2, {2: [F] * K, 1: [F] * K}, {2: 8, 1: 8}),
    # j = 0: no step before it
    (5, F, 0, {0: [F] * K}, {0: 8}),
    # j = last with a wrong answer: the answer decides j, so only j-1 (up to its first right one)
    (5, F, 4, {3: [F, F, F, T] + [F] * 4}, {3: 4}),
    # a right answer the judge faults before the last step (the prized case) is probed
    (5, T, 1, {1: [F] * K, 0: [T] + [F] * 7}, {1: 8, 0: 1}),
    # ungraded completions (None) count as not right
    (4, F, 1, {1: [None] * K, 0: [None, None, T] + [F] * 5}, {1: 8, 0: 3}),
])
def test_floor_on_hand_made_lists(n_steps, last_correct, j, rights, expected):
    full = [rights.get(s, [F] * K) for s in range(n_steps)]
    got = floor_counts(n_steps, last_correct, JudgeClaim(j), full, K)
    assert got == expected
    assert got == driven(n_steps, last_correct, JudgeClaim(j), full)


@pytest.mark.parametrize("n_steps, last_correct, claim", [
    (5, T, JudgeClaim(-1)),  # no error, right answer: confirmed by the answer
    (5, F, JudgeClaim(-1)),  # no error, wrong answer: refuted by the answer
    (5, T, JudgeClaim(4)),  # j = last with a right answer: refuted by the answer
    (5, F, JudgeClaim(None)),  # unparsed
    (5, F, JudgeClaim(None, missing=True)),  # no verdict
    (1, F, JudgeClaim(0)),  # one step, wrong answer, judge says step 0
])
def test_no_floor_where_verify_rolls_out_nothing(n_steps, last_correct, claim):
    rights = [[T] * K for _ in range(n_steps)]
    assert floor_counts(n_steps, last_correct, claim, rights, K) == {}
    assert driven(n_steps, last_correct, claim, rights) == {}


def test_floor_equals_the_driven_plan_on_random_lists():
    rng = random.Random(7)
    for _ in range(2000):
        n = rng.randint(1, 7)
        p = rng.choice([0.0, 0.05, 0.3, 0.9])
        rights = [[rng.random() < p for _ in range(K)] for _ in range(n)]
        claim = JudgeClaim(rng.choice([None, -1] + list(range(n))))
        last = rng.random() < 0.5
        assert floor_counts(n, last, claim, rights, K) == driven(n, last, claim, rights), (n, last, claim, rights)


def test_distinct_prefixes_against_a_set_of_prefixes():
    rng = random.Random(3)
    prompts = [[rng.randint(0, 3) for _ in range(rng.randint(0, 9))] for _ in range(300)]
    baseline = len({tuple(p[:n]) for p in prompts for n in range(1, len(p) + 1)})
    assert distinct_prefixes(prompts) == baseline
    assert distinct_prefixes([[1, 2, 3], [1, 2], [1, 2, 3]]) == 3 and distinct_prefixes([]) == 0


def test_fewer_kept_than_k_is_refused_only_when_needed():
    assert first_needed([F, T], K) == (2, True)  # decided before the list ends
    with pytest.raises(ValueError, match="--keep-completions K"):
        first_needed([F, F], K)


def test_verify_floor_reads_an_exhaustive_file(tmp_path):
    def step(rights, words=2):  # the last completion of a step was cut at its budget
        return [{"text": " ".join(["w"] * (words + i)), "correct": ok, "cut": i == len(rights) - 1}
                for i, ok in enumerate(rights)]

    records = [
        # j = 1 holds, j-1 = 0 right at its 2nd: completions 8 at step 1, 2 at step 0
        {"id": "a", "steps": ["s0", "s1", "s2"], "mc": {
            "strategy": "exhaustive", "k": K, "scores": [0.1, 0.0, 0.0], "generated_tokens": 100,
            "kept_completions": [step([F, T] + [F] * 6), step([F] * K), None]}},
        # judge says -1 with a right answer: nothing
        {"id": "b", "steps": ["s0", "s1"], "mc": {
            "strategy": "exhaustive", "k": K, "scores": [1.0, 1.0], "generated_tokens": 50,
            "kept_completions": [step([T] * K), None]}},
    ]
    path = tmp_path / "exhaustive.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    claims = {"a": JudgeClaim(1), "b": JudgeClaim(-1)}
    # step s's prompt: 10 shared tokens, then s + 1 tokens of its own prefix (step 0's is the start of step 1's)
    floor = verify_floor(path, claims.__getitem__, lambda text: len(text.split()),
                         lambda record, s: list(range(10 + s + 1)))
    # texts have 2 + i words: step 1's 8 completions 2..9 words, step 0's first two 2 and 3; a stop
    # token for each but step 1's last (cut)
    assert (floor.completions, floor.decode_tokens, floor.stop_tokens) == (10, sum(range(2, 10)) + 2 + 3 + 9, 9)
    assert floor.prefill_tokens == 12  # step 1's 12 tokens; step 0's 11 are its start
    assert floor.responses_rolled_out == 1 and floor.by_step == {"a": {1: 8, 0: 2}}
    assert floor.retokenized_all == 3 * sum(range(2, 10)) and floor.engine_all == 150
    assert floor.stops_all == 3 * 7
    assert floor.compute(7e9) == pytest.approx((12 + 49 + 9) * 7)
    bad = tmp_path / "binary.jsonl"
    bad.write_bytes(orjson.dumps({**records[0], "mc": {**records[0]["mc"], "strategy": "binary"}}) + b"\n")
    with pytest.raises(ValueError, match="not exhaustive"):
        verify_floor(bad, claims.__getitem__, len)
