"""The pure parts of the recovery PRM experiment (lab/world/prm/recovery.py): which slip each
correction is paired with, the shuffled control, the export of the three label sets, and the
bootstrap interval of a hand-made case against a plain computation. No training here."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from lab.world.prm.bootstrap import Draws, pooled
from lab.world.prm.recovery import (corrected_pairs, export_sets, judged_records, mean_metric, pair_stats,
                                    recovery_of_record, share_metric, shuffled_recoveries, trace_stats)
from prm_annotate.recovery.labels import Recovery, Slip
from prm_annotate.world.report import read_jsonl
from prm_annotate.world.thinking import trace_for


def test_pairs_are_the_generators_corrected_slips():
    """Read from the text by the truth checker, the pairs are the generator's own record of which
    paragraph corrected which slip (a record the checker never sees)."""
    records = judged_records("prm-test", 150, 3)
    found = 0
    for i, r in enumerate(records):
        _, t = trace_for("prm-test", i, 3)
        want = [(s.index, s.corrected_at) for s in t.slips if s.corrected_at is not None]
        pairs = corrected_pairs(recovery_of_record(r))
        assert pairs == want, r["id"]
        roles = recovery_of_record(r).roles(len(r["steps"]))
        assert all(roles[s] == "slip" and roles[c] == "correction" for s, c in pairs)
        found += len(pairs)
    assert found >= 40  # the check ran on traces that have corrections
    assert corrected_pairs(Recovery((Slip(1, 3), Slip(4, None), Slip(5, 6)))) == [(1, 3), (5, 6)]


def test_pair_stats_by_hand():
    # d = 0.9 - 0.2 = 0.7 (up), 0.1 - 0.4 = -0.3 (down), 0.5 - 0.5 = 0 (a tie: half)
    scores = [0.4, 0.2, 0.9, 0.1, 0.5, 0.5]
    assert pair_stats([(1, 2), (0, 3), (4, 5)], scores) == pytest.approx([0.4, 3.0, 1.5])
    assert pair_stats([], scores) == [0.0, 0.0, 0]


def test_shuffle_keeps_every_label_count_and_moves_every_trace_it_can():
    records = judged_records("prm-test", 200, 5)
    shuffled = shuffled_recoveries(records, 0)
    assert shuffled == shuffled_recoveries(records, 0)  # seeded
    by_length = Counter(len(r["steps"]) for r in records)
    moved = kept = 0
    for n in by_length:
        before = [r for r in records if len(r["steps"]) == n]
        after = [r for r in shuffled if len(r["steps"]) == n]
        # The same recoveries, each used once, within each length: so the same labels per position.
        key = lambda r: repr(r["judge"]["recovery"])  # noqa: E731
        assert sorted(map(key, before)) == sorted(map(key, after))
        for b, a in zip(before, after):
            assert a["steps"] == b["steps"] and a["id"] == b["id"]
            assert a["judge"]["first_error"] == recovery_of_record(a).first_error()
            if by_length[n] == 1:
                kept += a["judge"] == b["judge"]
            else:
                moved += 1
                assert a["judge"]["recovery"] is not b["judge"]["recovery"]  # taken from another trace
    assert moved > 150 and kept == sum(1 for n in by_length.values() if n == 1)
    # The labels say something else of most texts: the control has lost the link to the text.
    differ = sum(recovery_of_record(a).step_labels(len(a["steps"])) != recovery_of_record(b).step_labels(len(b["steps"]))
                 for a, b in zip(shuffled, records))
    assert differ > 0.4 * len(records)


def test_the_three_label_sets_as_exported(tmp_path):
    records = judged_records("prm-test", 60, 1)
    paths = export_sets(records, tmp_path, 0)
    rows = {name: read_jsonl(path) for name, path in paths.items()}
    count = {name: Counter(v for r in rs for v in r["labels"]) for name, rs in rows.items()}
    assert count["recovery"] == count["shuffled"]  # the control keeps the label counts
    cut = 0
    for r, rec, fe in zip(records, rows["recovery"], rows["first-error"]):
        recovery = recovery_of_record(r)
        assert rec["labels"] == recovery.step_labels(len(r["steps"]))
        first = recovery.first_error()
        assert fe["labels"] == ([True] * len(r["steps"]) if first == -1 else [True] * first + [False])
        cut += len(rec["labels"]) - len(fe["labels"])
    assert cut > 0 and count["first-error"][False] < count["recovery"][False]


def test_interval_by_hand_against_a_plain_bootstrap():
    """Three traces' pairs of d: the pooled estimate is the mean of every d, and the interval is the
    2.5/97.5 percentiles of the mean over the same resamples of traces, computed plainly."""
    ds = [[0.5, -0.1], [0.2], [-0.4, 0.3, 0.1]]
    stats = np.array([[sum(d), len(d), sum(x > 0 for x in d)] for d in ds], dtype=float)
    draws = Draws(3, 1, draws=2000, seed=7)
    got = pooled(draws, [stats], None, mean_metric)
    assert got.estimate == pytest.approx(np.mean([x for d in ds for x in d]))
    plain = []
    for weights in draws.problems:
        resampled = [x for w, d in zip(weights, ds) for _ in range(int(w)) for x in d]
        plain.append(np.mean(resampled))
    low, high = np.percentile(plain, [2.5, 97.5])
    assert (got.low, got.high) == pytest.approx((low, high))
    assert low < got.estimate < high and high - low > 0.1  # a real spread, not a degenerate case
    share = pooled(draws, [stats], None, share_metric)
    assert share.estimate == pytest.approx(100 * 4 / 6)
    # Paired: a PRM against itself differs by exactly 0 on every draw.
    same = pooled(draws, [stats], [stats], mean_metric)
    assert (same.estimate, same.low, same.high) == (0.0, 0.0, 0.0)


def test_trace_stats_follows_the_pairs_order():
    pairs = {"a": [(0, 1)], "b": [(1, 2), (0, 2)]}
    scores = {"b": [0.1, 0.2, 0.9], "a": [0.3, 0.2]}
    assert np.allclose(trace_stats(pairs, scores), [[-0.1, 1, 0], [0.7 + 0.8, 2, 2]])
