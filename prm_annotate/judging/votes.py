"""Several verdicts of one response made into one first error."""
from __future__ import annotations


def aggregate_votes(votes: list[int | None]) -> int | None:
    """Majority of the parsed votes; a tie goes to the earliest error (-1, "no error", counts as
    later than any step), since a PRM label should not pass a step that judges flagged as often as
    they passed it. No parsed vote: None."""
    counts: dict[int, int] = {}
    for v in votes:
        if v is not None:
            counts[v] = counts.get(v, 0) + 1
    if not counts:
        return None
    top = max(counts.values())
    tied = [v for v, c in counts.items() if c == top]
    errors = [v for v in tied if v >= 0]
    return min(errors) if errors else -1
