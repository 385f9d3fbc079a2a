"""steps: splitting and joining, and the separator a user types in a shell."""
from __future__ import annotations

import codecs

import pytest

from testing.paragraph_steps import split_steps

from prm_annotate.steps import decode_sep, join_steps


@pytest.mark.parametrize(("typed", "meant"), [
    (r"\n\n", "\n\n"), (r"\t", "\t"), (r"\\", "\\"), ("plain", "plain"), (r"\u043a\u0438", "ки"),
    (r" ки\n", " ки\n"),  # Math-Shepherd's step tag, then a newline
    (r"→\n", "→\n"), (r"é\n", "é\n"), (r"步骤\n\n", "步骤\n\n"), ("ки", "ки"),
])
def test_escapes_are_decoded_and_other_text_is_kept(typed, meant):
    assert decode_sep(typed) == meant
    if typed.isascii():  # where the plain codec is right, the rule agrees with it
        assert decode_sep(typed) == codecs.decode(typed, "unicode_escape")


def test_a_decoded_separator_splits_what_it_joined():
    steps = ["Step 1: 2+2=4.", "Step 2: so 4."]
    sep = decode_sep(r" ки\n")
    assert split_steps(join_steps(steps, sep=sep), sep) == steps


def test_a_trace_is_read_back_by_the_one_join_rule():
    """segmenting.record_trace joins a record's steps with steps.join_steps (it had its own copy, which zipped a
    short list of joins away and lost a step): a record's joins either give its text back or fail."""
    from prm_annotate.segmenting import record_trace, segment_text
    from prm_annotate.segmenting.paragraphs import Paragraphs

    made = segment_text("A\n\nB\nC", Paragraphs(sep="\n"))
    assert made.joins == made.record_joins == ["\n\n", "\n"]
    assert record_trace(made.steps, made.joins, None, None).text == "A\n\nB\nC"
    assert segment_text("A\n\nB", Paragraphs()).record_joins is None  # every join the separator
    with pytest.raises(ValueError, match="1 joins for 3 steps"):
        record_trace(["A", "B", "C"], ["\n"], None, None)  # the old copy gave "A\nC"
