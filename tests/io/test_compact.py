"""io/compact.py (and io/id_keys.py's IdHashes) against the standard library it stands in for: the same numbers, to the last bit,
on values drawn to hit its edges (ties of a median, -0.0, sums that round, integers past 2**53)."""
from __future__ import annotations

import math
import random
import statistics

import pytest

from prm_annotate.io.compact import IntSum, Numbers
from prm_annotate.io.id_keys import IdHashes, id_hash


def draws(rng: random.Random, n: int) -> list[float]:
    pools = [lambda: rng.choice([0.0, -0.0, 1.0, 0.125, 0.5, 1 / 3, 2 / 3]),
             lambda: rng.random() * 10 ** rng.randint(-20, 20),
             lambda: rng.choice([1e16, 1.0, -1e16, 3.0, 1e-300])]
    pool = rng.choice(pools)
    return [pool() for _ in range(n)]


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("cap", [None, 3])
def test_numbers_give_fsum_fmean_and_median_of_the_list(seed, cap):
    rng = random.Random(seed)
    values = draws(rng, rng.randint(1, 200))
    kept = Numbers(cap=cap)
    kept.extend(values)
    assert math.copysign(1, kept.fsum()) == math.copysign(1, math.fsum(values))
    assert kept.fsum() == math.fsum(values) and kept.fmean() == statistics.fmean(values) and kept.n == len(values)
    if cap is None:
        assert repr(kept.median()) == repr(statistics.median(values))
        assert (kept.min(), kept.max()) == (min(values), max(values))


def test_a_sum_of_zeros_has_the_sign_fsum_gives_it():
    kept = Numbers()
    kept.extend([-0.0, -0.0])
    assert repr(kept.fsum()) == repr(math.fsum([-0.0, -0.0]))
    kept.add(0.0)
    assert repr(kept.fsum()) == repr(math.fsum([-0.0, -0.0, 0.0])) == "0.0"


@pytest.mark.parametrize("seed", range(20))
def test_integers_give_sum_median_and_mean(seed):
    rng = random.Random(seed)
    values = [rng.choice([rng.randint(0, 40), rng.randint(2 ** 53, 2 ** 60)]) for _ in range(rng.randint(1, 50))]
    kept, summed = Numbers(), IntSum()
    for v in values:
        kept.add(v)
        summed.add(v)
    assert repr(kept.median()) == repr(statistics.median(values)) and kept.total() == sum(values)
    assert summed.total == sum(values) and summed.fmean() == statistics.fmean(values)
    assert summed.nonzero == sum(1 for v in values if v)


def test_id_hashes_find_the_ids_seen_twice():
    ids = IdHashes()
    for rid in ["a", "b", "c", "b", "d", "a", "a"]:
        ids.add(rid)
    assert ids.clashes() == {id_hash("a"), id_hash("b")} and ids.distinct() == 4 and len(ids) == 7
    assert IdHashes().clashes() == set() and IdHashes().distinct() == 0
