"""Speculation: starting requests a job may ask for in a later round before it asks.

A round may name, beside the requests it waits for, `ahead` requests the job may ask for later
and, less likely, `spare` ones (see `scheduler.Round`). Once no new unit can start (the scheduler
checks that: a new unit's requests are all needed, a guess may not be), the first start while
fewer requests than the guess budget are in flight, the second only while fewer than `speculate`
are (the engine has idle capacity), whatever the budget has grown to. A guess the job then asks
for is handed over (at once if it has finished); one that a round no longer names, or that is
still unused when the job ends, is not needed: cancelled at once if still running, so the engine
stops spending on it, dropped if finished.

The budget follows how often the jobs' `ahead` names turn out asked for, started or not (so a
run that stopped guessing still learns, and starts again when guesses would pay): none while
fewer than half are, since a guess more likely unused than used spends more tokens than the
rounds it saves; from there it grows with the share (`speculate * asked / unasked`), so that the
guesses in flight that end up unneeded stay below `speculate`, and never past the names settled
so far (a run's first guesses start before any is settled: on the thinking world an opening burst
of `speculate` guesses was 27% of verify's tokens). Where a step's remaining
completions are nearly always needed (a weak policy: most steps 0) it grows until every guess can
start, as exhaustive starts every completion at once; where a policy recovers from the steps
verify probes (a thinking one: most claims refuted at the judge's step) no guess starts and the
rollout draws what its rule needs, one round at a time.

`Speculation` decides and keeps the counts for a whole run; `Guesses` is one job's share of it.
It never talks to the scheduler's bookkeeping: the scheduler hands it a `send` or `cancel` for
the job at hand.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Container, Sequence

from prm_annotate.engines.base import Engine, GenerationRequest, GenerationResult

# The budget starts as if this many names had been asked for and as many not (budget `speculate`),
# so a few early ones do not open or close it.
_NAMED_PRIOR = 16

Send = Callable[[list[GenerationRequest]], None]
Cancel = Callable[[list[str]], int]  # stops running requests by key; the tokens they had generated


@dataclass
class Guesses:
    """One job's guesses, by the job's own request keys."""

    ahead: dict[str, GenerationRequest] = field(default_factory=dict)  # started early, not asked for yet
    kept: dict[str, GenerationResult] = field(default_factory=dict)  # finished early, not asked for yet
    may_ask: list[GenerationRequest] = field(default_factory=list)  # the last round's `ahead`
    may_ask_spare: list[GenerationRequest] = field(default_factory=list)  # the last round's `spare`
    named: set[str] = field(default_factory=set)  # named `ahead`, not asked for yet, started or not


class Speculation:
    """The guesses of one run on one engine. `counts` gets `ahead_started`, `ahead_used`,
    `ahead_cancelled` (while running), `ahead_dropped` (finished unused), `ahead_unused_tokens`,
    the largest budget reached (`ahead_budget_max`) and, for every `ahead` name whether started or
    not, `named_asked` and `named_unasked` (what the budget follows)."""

    def __init__(self, engine: Engine, speculate: int, max_requests: int):
        self.engine = engine
        self.speculate = speculate
        self.max_requests = max_requests
        self.counts: Counter = Counter()

    def budget(self) -> int:
        """Requests in flight below which an `ahead` guess may start (0: speculation is off, or
        fewer than half of the names were asked for)."""
        if not self.speculate:
            return 0
        asked = self.counts["named_asked"] + _NAMED_PRIOR
        unasked = self.counts["named_unasked"] + _NAMED_PRIOR
        # Never more in flight than names settled (with the prior's): a run's first burst of
        # guesses, started before any name is settled, stays small.
        budget = 0 if asked < unasked else min(self.max_requests, asked + unasked,
                                                round(self.speculate * asked / unasked))
        self.counts["ahead_budget_max"] = max(self.counts["ahead_budget_max"], budget)
        return budget

    def has_room(self) -> bool:
        return bool(self.speculate) and self.budget() > self.engine.in_flight()

    def hand_over(self, guesses: Guesses, requests: Sequence[GenerationRequest]
                  ) -> tuple[dict[str, GenerationResult], dict[str, GenerationRequest], list[GenerationRequest]]:
        """A round's requests as (results already here, requests now awaited, requests to send):
        a guess that finished gives its result, one still running is awaited as it is."""
        results: dict[str, GenerationResult] = {}
        waiting: dict[str, GenerationRequest] = {}
        send: list[GenerationRequest] = []
        for r in requests:
            if r.key in guesses.named:
                guesses.named.discard(r.key)
                self.counts["named_asked"] += 1
            if r.key in guesses.kept:
                results[r.key] = guesses.kept.pop(r.key)
                self.counts["ahead_used"] += 1
            elif r.key in guesses.ahead:
                waiting[r.key] = guesses.ahead.pop(r.key)
                self.counts["ahead_used"] += 1
            else:
                waiting[r.key] = r
                send.append(r)
        return results, waiting, send

    def expect(self, guesses: Guesses, ahead: list[GenerationRequest], spare: list[GenerationRequest],
               cancel: Cancel) -> None:
        """What the job's latest round says it may ask for; the guesses it no longer names go."""
        self.drop(guesses, cancel, keep={r.key for r in ahead} | {r.key for r in spare})
        guesses.may_ask, guesses.may_ask_spare = ahead, spare
        named = {r.key for r in ahead}
        self.counts["named_unasked"] += len(guesses.named - named)
        guesses.named = named

    def finish(self, guesses: Guesses, cancel: Cancel) -> None:
        """The job is done: none of its guesses is needed."""
        guesses.may_ask, guesses.may_ask_spare = [], []
        self.counts["named_unasked"] += len(guesses.named)
        guesses.named = set()
        self.drop(guesses, cancel)

    def drop(self, guesses: Guesses, cancel: Cancel, keep: Container[str] = frozenset()) -> None:
        running = [k for k in guesses.ahead if k not in keep]
        for key in running:
            del guesses.ahead[key]
        if running:
            self.counts["ahead_cancelled"] += len(running)
            # Tokens generated before the stop: spent for nothing, like an unused finished one's.
            self.counts["ahead_unused_tokens"] += cancel(running)
        for key in [k for k in guesses.kept if k not in keep]:
            self.counts["ahead_dropped"] += 1
            self.counts["ahead_unused_tokens"] += guesses.kept.pop(key).generated_tokens

    def start(self, guesses: Guesses, asked: Container[str], send: Send) -> None:
        """Start what the job may ask for and has not (`asked`): its `ahead` guesses while fewer
        requests than the budget are in flight, then its spare ones while fewer than `speculate`;
        neither while the budget is 0."""
        ahead_budget = self.budget()
        if not (guesses.may_ask or guesses.may_ask_spare) or not ahead_budget:
            return
        for candidates, budget in ((guesses.may_ask, ahead_budget), (guesses.may_ask_spare, self.speculate)):
            room = budget - self.engine.in_flight()
            chosen: list[GenerationRequest] = []
            for r in candidates:
                if len(chosen) >= room:
                    break
                if r.key not in asked and r.key not in guesses.ahead and r.key not in guesses.kept:
                    guesses.ahead[r.key] = r
                    chosen.append(r)
            self.counts["ahead_started"] += len(chosen)
            send(chosen)

    def finished_early(self, guesses: Guesses, key: str, result: GenerationResult) -> bool:
        """File a result that came back before the job asked for it; False when it was asked for."""
        if key not in guesses.ahead:
            return False
        del guesses.ahead[key]
        guesses.kept[key] = result
        return True
