"""A stage's summary sentence (prm_annotate/pipeline/summary.py) read back into its figures, written
from the sentence's grammar and not from the code that writes it, and checked against the run's
manifest: the tests' way to hold the last line to what the run did."""
from __future__ import annotations

import re
from typing import Any

_HEAD = re.compile(r"^(?P<stage>[\w-]+): (?P<read>[\d,]+) (?P<noun>\w+) read(?:: (?P<body>.*?))?; (?P<cost>[^;]*)\.$")
_NUMBER = re.compile(r"^(?P<n>[\d,]+) (?P<words>.+)$")


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _split(text: str) -> list[str]:
    """`text` cut at the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _counts(inside: str) -> dict[str, int]:
    out = {}
    for part in _split(inside):
        m = _NUMBER.match(part)
        assert m, f"not 'N words': {part!r}"
        out[m["words"]] = _int(m["n"])
    return out


def parse_sentence(line: str) -> dict[str, Any]:
    """The figures of a summary sentence: stage, read, made, written (when said), details,
    set_aside (reason -> n), already_done, other_shards, cost (the text after the semicolon)."""
    m = _HEAD.match(line)
    assert m, f"not a summary sentence: {line!r}"
    out: dict[str, Any] = {"stage": m["stage"], "read": _int(m["read"]), "made": 0, "written": None, "details": {},
                           "set_aside": {}, "already_done": 0, "other_shards": 0, "cost": m["cost"]}
    parts = _split(m["body"] or "")
    if parts:
        made = re.match(r"^(?P<n>[\d,]+) [\w -]+?(?: into (?P<w>[\d,]+) \w+)?(?: \((?P<d>.*)\))?$", parts[0])
        assert made, f"not what was made: {parts[0]!r}"
        out["made"] = _int(made["n"])
        out["written"] = _int(made["w"]) if made["w"] else None
        out["details"] = _counts(made["d"]) if made["d"] else {}
    for part in parts[1:]:
        aside = re.match(r"^(?P<n>[\d,]+) set aside \((?P<why>.*)\)$", part)
        if aside:
            out["set_aside"] = _counts(aside["why"])
            assert sum(out["set_aside"].values()) == _int(aside["n"]), f"the reasons do not add up: {part!r}"
        elif part.endswith(" already done"):
            out["already_done"] = _int(part.split()[0])
        elif part.endswith(" in other shards"):
            out["other_shards"] = _int(part.split()[0])
        else:
            raise AssertionError(f"an unknown part of the sentence: {part!r}")
    return out


def last_sentence(stderr: str, stage: str) -> str:
    """The stage's summary sentence in a command's standard error: its last line but for what a
    library prints as the process exits (vLLM's resource tracker warns then)."""
    lines = [line for line in stderr.splitlines() if line.startswith(f"{stage}: ")]
    assert lines, f"no {stage} summary in: {stderr[-2000:]}"
    return lines[-1]


def check_sentence(line: str, run: dict[str, Any]) -> dict[str, Any]:
    """Parse `line`, assert that its figures add up (read = made + set aside + already done + in
    other shards) and are the manifest `run`'s counters; return the figures."""
    said = parse_sentence(line)
    aside = sum(said["set_aside"].values())
    assert said["read"] == said["made"] + aside + said["already_done"] + said["other_shards"], said
    counts = run["counts"]
    assert said["stage"] == run["stage"]
    assert said["read"] == counts["read"] + counts["rejected"], (said, counts)  # invalid lines are read too
    assert said["made"] == counts["made"], (said, counts)
    assert said["set_aside"] == counts["set_aside"], (said, counts)
    assert aside == counts["failed"] + counts["rejected"] + counts["done"] - counts["made"], (said, counts)
    assert said["already_done"] == counts["skipped"] and said["other_shards"] == counts["other_shards"], (said, counts)
    if said["written"] is not None:
        assert said["written"] == counts["written"], (said, counts)
    return said
