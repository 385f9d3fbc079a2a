"""recovery: the shape of labels beyond the first error, its roles, step labels and strict JSON."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prm_annotate.recovery.labels import Recovery, Slip


def test_roles_and_step_labels_of_a_corrected_and_an_uncaught_slip():
    r = Recovery((Slip(1, 3), Slip(5, None)))
    assert r.roles(7) == ["ok", "slip", "ok", "correction", "ok", "slip", "ok"]
    # Between a slip and its correction the trace builds on the error; after an uncaught one, too.
    assert r.step_labels(7) == [True, False, False, True, True, False, False]
    assert r.first_error() == 1
    assert r.corrected == (Slip(1, 3),) and r.uncaught == (Slip(5, None),)


def test_one_step_correcting_two_slips_is_one_correction_and_a_correcting_slip_is_a_slip():
    r = Recovery((Slip(0, 3), Slip(1, 3)))
    assert r.roles(4) == ["slip", "slip", "ok", "correction"]
    assert r.step_labels(4) == [False, False, False, True]
    both = Recovery((Slip(0, 2), Slip(2, None)))  # step 2 corrects step 0 and slips itself
    assert both.roles(3) == ["slip", "ok", "slip"]
    assert both.step_labels(3) == [False, False, False]


def test_no_slip_is_first_error_minus_one_and_every_step_right():
    assert Recovery().first_error() == -1
    assert Recovery().roles(3) == ["ok"] * 3 and Recovery().step_labels(3) == [True] * 3


@pytest.mark.parametrize(("obj", "says"), [
    ([], "one key"),
    ({"slips": [], "x": 1}, "one key"),
    ({"slips": {}}, "must be a list"),
    ({"slips": [{"step": 1}]}, "slips[0] must be an object"),
    ({"slips": [{"step": "1", "corrected_at": None}]}, "slips[0].step must be an integer"),
    ({"slips": [{"step": True, "corrected_at": None}]}, "slips[0].step must be an integer"),
    ({"slips": [{"step": 1, "corrected_at": 2.0}]}, "slips[0].corrected_at"),
    ({"slips": [{"step": 2, "corrected_at": None}, {"step": 1, "corrected_at": None}]}, "sorted"),
    ({"slips": [{"step": 1, "corrected_at": None}, {"step": 1, "corrected_at": 2}]}, "distinct"),
    ({"slips": [{"step": 2, "corrected_at": 2}]}, "not after it"),
    ({"slips": [{"step": -1, "corrected_at": None}]}, "negative"),
    ({"slips": [{"step": 4, "corrected_at": None}]}, "step 4 is out of range for 4 steps"),
    ({"slips": [{"step": 1, "corrected_at": 4}]}, "corrected_at 4 is out of range"),
])
def test_from_json_refuses_and_names_what_is_wrong(obj, says):
    with pytest.raises(ValueError, match="recovery") as err:
        Recovery.from_json(obj, 4)
    assert says in str(err.value)


@st.composite
def recoveries(draw):
    n = draw(st.integers(1, 12))
    steps = sorted(draw(st.sets(st.integers(0, n - 1), max_size=n)))
    slips = tuple(Slip(s, draw(st.one_of(st.none(), st.integers(s + 1, n))) if s + 1 < n else None)
                  for s in steps)
    slips = tuple(Slip(s.step, None if s.corrected_at == n else s.corrected_at) for s in slips)
    return Recovery(slips), n


@settings(max_examples=300, deadline=None)
@given(recoveries())
def test_json_round_trips_and_labels_agree_with_the_first_error(case):
    r, n = case
    assert Recovery.from_json(r.to_json(), n) == r
    labels = r.step_labels(n)
    first = r.first_error()
    # The paper's cut: everything before the first slip is right under both readings.
    assert labels[: first if first != -1 else n] == [True] * (first if first != -1 else n)
    assert (first == -1) == all(labels)
    roles = r.roles(n)
    assert [i for i, x in enumerate(roles) if x == "slip"] == [s.step for s in r.slips]
    assert all(not labels[i] for i, x in enumerate(roles) if x == "slip")
    # A trace whose every slip is corrected ends right; one with an uncaught slip ends wrong.
    assert labels[-1] == (not r.uncaught)
