"""Rollout strategies, by name. Add a strategy: a module here with a `Strategy` (and its `Plan`),
one entry in STRATEGIES, and its test; `rollout --strategy` lists it with its `summary`."""
from __future__ import annotations

from prm_annotate.errors import UsageError
from prm_annotate.registry import Registry
from prm_annotate.strategies.base import (Plan, PlanResult, Probe, ProbeResult, Strategy, first_error_of,
                                          hard_label, last_step_score)
from prm_annotate.strategies.adaptive_binary import AdaptiveBinary
from prm_annotate.strategies.binary import Binary
from prm_annotate.strategies.early_stop import EarlyStop
from prm_annotate.strategies.exhaustive import Exhaustive
from prm_annotate.strategies.scan import Scan
from prm_annotate.strategies.verify import JudgeClaim, Verify

# Reasoning and measurements: docs/rollout-strategies.md.
STRATEGIES: Registry[type[Strategy]] = Registry("--strategy", "Which probes to run", "docs/rollout-strategies.md", (
    Exhaustive,
    EarlyStop,
    Binary,
    AdaptiveBinary,
    Scan,
    Verify,
))


def get_strategy(name: str, label: str = "hard") -> Strategy:
    strategy = STRATEGIES.named(name)()
    if label == "soft" and not strategy.supports_soft:
        raise UsageError(f"--strategy {name} does not sample all K completions at every step, so it cannot "
                         "give --label soft (soft labels: --strategy exhaustive only); use --label hard")
    return strategy


__all__ = ["STRATEGIES", "JudgeClaim", "Plan", "PlanResult", "Probe", "ProbeResult", "Strategy", "first_error_of",
           "get_strategy", "hard_label", "last_step_score"]
