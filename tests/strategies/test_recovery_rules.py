"""recovery_rules: MC's soft-drop reading of slips and corrections, and rollout's option for it."""
from __future__ import annotations

import pytest

from prm_annotate.errors import UsageError
from prm_annotate.recovery import Recovery, Slip
from prm_annotate.stages.config import RolloutConfig
from prm_annotate.strategies.recovery_rules import SoftDrop, make_recovery_rule


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
    with pytest.raises(UsageError, match="choose soft-drop"):
        RolloutConfig(recovery_rule="soft-rise")
    with pytest.raises(UsageError, match="only"):
        RolloutConfig(recovery_drop=0.3)
    with pytest.raises(UsageError, match=r"\(0, 1\]"):
        make_recovery_rule("soft-drop", 0.0)
    with pytest.raises(ValueError, match="no score"):
        SoftDrop().read([0.5, None], 0.0)
