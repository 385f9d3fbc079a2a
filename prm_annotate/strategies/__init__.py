"""Rollout strategies, by name. Add a strategy: a module here and one line in STRATEGIES."""
from __future__ import annotations

from typing import Callable

from prm_annotate.errors import UsageError
from prm_annotate.strategies.base import (Plan, PlanResult, Probe, ProbeResult, Strategy, first_error_of,
                                          hard_label, last_step_score)
from prm_annotate.strategies.binary import Binary
from prm_annotate.strategies.early_stop import EarlyStop
from prm_annotate.strategies.exhaustive import Exhaustive
from prm_annotate.strategies.scan import Scan

# Reasoning and measurements: docs/rollout-strategies.md.
STRATEGIES: dict[str, Callable[[], Strategy]] = {
    "exhaustive": Exhaustive,
    "early-stop": EarlyStop,
    "binary": Binary,
    "scan": Scan,
}


def get_strategy(name: str, label: str = "hard") -> Strategy:
    if name not in STRATEGIES:
        raise UsageError(f"--strategy {name}: unknown (choose from {', '.join(STRATEGIES)})")
    strategy = STRATEGIES[name]()
    if label == "soft" and not strategy.supports_soft:
        raise UsageError(f"--strategy {name} does not sample all K completions at every step, so it cannot "
                         "give --label soft (soft labels: --strategy exhaustive only); use --label hard")
    return strategy


__all__ = ["STRATEGIES", "Plan", "PlanResult", "Probe", "ProbeResult", "Strategy", "first_error_of",
           "get_strategy", "hard_label", "last_step_score"]
