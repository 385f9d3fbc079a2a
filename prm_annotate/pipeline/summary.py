"""A run's last line, in words: what was read, what was made of it, what was set aside and why,
what was already done, the tokens and the time. One sentence for every stage, whose figures add
up: read = made + set aside (by reason) + already done + in other shards. A stage gives only its
nouns (`Nouns`); the figures come from the run (`Account`, which `runner.RunSummary.account`
builds). The full counters stay in the manifest and `stats`.

    rollout: 1,200 responses read: 1,180 labelled (412 with a first error), 12 set aside
    (8 failed at the engine, 4 invalid), 8 already done; cost 512,004 prefill + 310,511 decode
    tokens, 5.8M billion-parameter-tokens, 2 min 13 s.

A model stage's cost is its bill (engines/bill.py: prefill, decode, compute at its model's size);
another stage's, its token counters if it has any.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from prm_annotate.engines.bill import Bill, amount, cost_phrase

# Reasons a record is set aside that more than one stage gives (a stage may name its own).
ENGINE_FAILED = "failed at the engine"  # a request failed after its retries: a rerun retries it
INVALID = "invalid"  # an input line that is not a valid record (--skip-invalid sets it aside)
FAILED = "failed"  # a failure its stage gave no reason for: a rerun retries it
NOTHING_MADE = "nothing made"  # a stage finished a record, wrote nothing, and said no reason
# A record whose prompt leaves no room in the model's context (engines/context.py): a rerun
# refuses it again, so the summary never offers it as a retry.
OVER_CONTEXT = "refused for good: too long for the context"


@dataclass(frozen=True)
class Nouns:
    """What a stage calls its records in its summary sentence.

    Attributes:
        read: one input record, singular ("problem", "response"); the plural adds an s.
        made: what the stage did to one, a past participle ("sampled", "judged", "kept").
        output: one output record, singular, when an input makes several ("response": sample);
            then the sentence says how many were written.
        details: (stats key, words) said of what was made when the count is not zero, in this
            order: (("correct", "correct"),) says "(86 correct)".
    """

    read: str = "record"
    made: str = "done"
    output: str | None = None
    details: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Account:
    """A run's figures as its sentence says them; `read` counts input records, invalid lines included.

    Attributes:
        stage: the stage's name, the sentence's first word.
        read: input records read (the invalid lines set aside included).
        made: input records this run made output from.
        set_aside: input records this run made nothing from, by reason (failed ones, a rerun
            retries them; invalid lines; a stage's own, such as consensus's disagreements).
        already_done: input records an earlier run finished, skipped.
        other_shards: input records of other shards (`--shard`), left alone.
        written: output records written (sample writes n per input).
        stats: the stage's counters: its details, and the tokens (`prompt_tokens`,
            `cached_prompt_tokens`, `generated_tokens`).
        seconds: the run's wall time.
        bill: a model stage's bill (engines/bill.py), as the manifest writes it: then the sentence
            says its prefill, decode and compute instead of the bare token counts.
    """

    stage: str
    read: int
    made: int
    set_aside: Mapping[str, int] = field(default_factory=dict)
    already_done: int = 0
    other_shards: int = 0
    written: int = 0
    stats: Mapping[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    bill: Mapping[str, Any] | None = None

    @property
    def adds_up(self) -> bool:
        return self.read == self.made + sum(self.set_aside.values()) + self.already_done + self.other_shards


def sentence(account: Account, nouns: Nouns) -> str:
    """The run's last line; see the module docstring."""
    a = account
    spent = cost_phrase(Bill.read(a.bill)) if a.bill is not None else tokens(a.stats)
    cost = "; " + ", ".join(filter(None, (spent, duration(a.seconds)))) + "."
    head = f"{a.stage}: {counted(a.read, nouns.read)} read"
    if not a.read:
        return head + cost
    made = f"{a.made:,} {nouns.made}"
    if nouns.output is not None and a.made:
        made += f" into {counted(a.written, nouns.output)}"
    said = [f"{a.stats[key]:,} {words}" for key, words in nouns.details if a.stats.get(key)]
    if said:
        made += f" ({', '.join(said)})"
    parts = [made]
    reasons = sorted(((n, why) for why, n in a.set_aside.items() if n), key=lambda x: (-x[0], x[1]))
    if reasons:
        parts.append(f"{sum(n for n, _ in reasons):,} set aside (" + ", ".join(f"{n:,} {why}" for n, why in reasons) + ")")
    if a.already_done:
        parts.append(f"{a.already_done:,} already done")
    if a.other_shards:
        parts.append(f"{a.other_shards:,} in other shards")
    return head + ": " + ", ".join(parts) + cost


def counted(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def tokens(stats: Mapping[str, int]) -> str:
    """'375,728 prompt (321,536 cached) and 78,892 generated tokens', or '' when none were counted."""
    prompt, cached, generated = (stats.get(k, 0) for k in ("prompt_tokens", "cached_prompt_tokens", "generated_tokens"))
    said = []
    if prompt:
        said.append(f"{amount(prompt)} prompt" + (f" ({amount(cached)} cached)" if cached else ""))
    if generated:
        said.append(f"{amount(generated)} generated")
    return " and ".join(said) + " tokens" if said else ""


def duration(seconds: float) -> str:
    """12.2 s; 2 min 13 s; 1 h 5 min."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
