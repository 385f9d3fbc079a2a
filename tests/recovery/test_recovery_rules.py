"""recovery/rules.py: MC's soft-drop reading of slips and corrections, and rollout's option for it."""
from __future__ import annotations

import pytest

from prm_annotate.errors import UsageError
from prm_annotate.recovery.labels import Recovery, Slip
from prm_annotate.stages.config import RolloutConfig
from prm_annotate.recovery.rules import SoftDrop, make_recovery_rule


def test_a_drop_is_a_slip_and_a_rise_its_correction():
    # 0.9 -> 0.4 drops (a slip), 0.4 -> 0.5 is no rise of 0.25, 0.5 -> 1.0 corrects it.
    assert SoftDrop().read([0.9, 0.4, 0.5, 1.0], 0.0) == Recovery((Slip(1, 3),))
    # A drop to 0 that never comes back: uncaught, and hard MC's first error is there too.
    assert SoftDrop().read([0.8, 0.0, 0.0, 0.0], 0.0) == Recovery((Slip(1, None),))
    # Step 0 has no step before: a slip only where hard MC calls it 0.
    assert SoftDrop().read([0.0, 0.0, 0.9], 0.0) == Recovery((Slip(0, 2),))
    assert SoftDrop().read([0.3, 0.3, 0.3], 0.0) == Recovery()
    # Two slips open at once are both corrected by the rise; a later slip opens again.
    assert SoftDrop().read([1.0, 0.7, 0.4, 0.9, 0.5], 0.0) == Recovery((Slip(1, 3), Slip(2, 3), Slip(4, None)))


def test_the_drop_is_the_rules_setting_and_hard_mc_misses_what_it_finds():
    scores = [1.0, 0.75, 1.0]  # a corrected slip: hard MC (score > 0) calls every step right
    assert SoftDrop(0.25).read(scores, 0.0) == Recovery((Slip(1, 2),))
    assert SoftDrop(0.3).read(scores, 0.0) == Recovery()
    assert all(s > 0 for s in scores)


def test_rollout_refuses_the_rule_without_every_steps_score_and_unknown_rules():
    assert RolloutConfig(recovery_rule="soft-drop").recovery_rule_object == SoftDrop()
    assert RolloutConfig(recovery_rule="soft-drop", recovery_drop=0.5).recovery_rule_object == SoftDrop(0.5)
    assert RolloutConfig().recovery_rule_object is None
    with pytest.raises(UsageError, match="exhaustive"):
        RolloutConfig(recovery_rule="soft-drop", strategy="binary")
    with pytest.raises(UsageError, match="choose from soft-drop"):
        RolloutConfig(recovery_rule="soft-rise")
    with pytest.raises(UsageError, match="only"):
        RolloutConfig(recovery_drop=0.3)
    with pytest.raises(UsageError, match=r"\(0, 1\]"):
        make_recovery_rule("soft-drop", 0.0)
    with pytest.raises(ValueError, match="no score"):
        SoftDrop().read([0.5, None], 0.0)


def test_soft_drop_finds_corrected_slips_hard_mc_cannot_on_simulated_rollouts():
    """Generated thinking traces (data the rule was not written from), each step's K=8 completions
    drawn as a policy that finishes right with p = 0.9 from a right prefix and 0.3 from one holding
    an uncorrected slip (it sometimes corrects it itself): soft-drop against the truth, beside hard
    MC read as one uncaught slip at its first error (the baseline)."""
    import random

    from prm_annotate.recovery.report import agreement
    from prm_annotate.world.thinking import trace_for
    from prm_annotate.world.trace_truth import read_trace

    rng = random.Random(0)
    gold, soft, hard = {}, {}, {}
    for i in range(300):
        problem, t = trace_for("simulated", i, 0)
        truth = read_trace(problem, t.text).recovery()
        n = len(t.steps)
        right = truth.step_labels(n)
        scores = [sum(rng.random() < (0.9 if ok else 0.3) for _ in range(8)) / 8 for ok in right[:-1]]
        scores.append(1.0 if right[-1] else 0.0)  # the last step: the response's own answer
        first = next((j for j, s in enumerate(scores) if s <= 0.0), -1)
        gold[str(i)], soft[str(i)] = (truth, n), (SoftDrop().read(scores, 0.0), n)
        hard[str(i)] = (Recovery(() if first == -1 else (Slip(first, None),)), n)
    found, baseline = agreement(soft, gold), agreement(hard, gold)
    assert baseline["correction_recall"] == 0.0
    assert found["correction_recall"] > 40.0 and found["slip_f1"] > baseline["slip_f1"]
    assert found["step_label_agreement"] > baseline["step_label_agreement"]
