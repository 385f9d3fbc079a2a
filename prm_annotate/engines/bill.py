"""The bill: what a model stage's run cost, one definition that every stage, its manifest, its last
line, `stats` and `plan` use (docs/cost.md).

Per run of a model stage (sample, rollout, judge):

- prefill: the prompt tokens the engine computed, prompt tokens minus those its prefix cache served
  (vLLM's prefix caching: a prefix many requests share is computed about once). An engine that does
  not say what it served from its cache has every prompt token counted.
- decode: the tokens generated, thought and answer apart where a thinking model's are told. The
  tokens of speculative requests the stage started and did not use (rollout's `--speculate`) are
  decode too: the engine made them.
- compute: (prefill + decode) x the model's parameter count, in billion-parameter-tokens (one is
  1e9 parameter-tokens; a forward pass costs about 2 FLOP per parameter-token, so 1 is ~2 GFLOP).
  The count is read from the model's config.json without loading its weights, or given
  (`--model-params`, for a served model or to bill at another model's size).

`charge` adds one result to a stage's counters; `Bill.of(stats, params)` is the run's bill, written
in the manifest under `bill` (docs/contract.md).
"""
from __future__ import annotations

import functools
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from prm_annotate.engines.base import GenerationResult

UNIT = "billion-parameter-tokens"
# The counters a stage keeps (Counter keys) that the bill reads.
REQUESTS, PROMPT, CACHED, GENERATED, THOUGHT = (
    "requests", "prompt_tokens", "cached_prompt_tokens", "generated_tokens", "thought_tokens")
UNTOLD = "cache_untold"  # requests whose engine did not say how much of the prompt its cache served
UNUSED = "ahead_unused_tokens"  # pipeline/speculation.py: tokens of speculative requests not used


def charge(stats: Counter, result: GenerationResult, thought: int | None = None) -> None:
    """Count one engine result into a stage's counters. `thought`: its thought's tokens when the
    stage knows them and the result does not say (sample reads them from its trace)."""
    stats[REQUESTS] += 1
    stats[PROMPT] += result.prompt_tokens
    stats[GENERATED] += result.generated_tokens
    if result.cached_prompt_tokens is None:
        stats[UNTOLD] += result.ok
    else:
        stats[CACHED] += result.cached_prompt_tokens
    told = result.reasoning_tokens if result.reasoning_tokens is not None else thought
    if told:
        stats[THOUGHT] += told


# Not the cached prompt tokens: what the prefix cache served depends on what else was in it (the
# order requests ran, a resumed run's empty cache), and a record must be the same bytes on a rerun.
RECORD_KEYS = (REQUESTS, PROMPT, GENERATED, THOUGHT)


def record_bill(counted: Mapping[str, int]) -> dict[str, int]:
    """What one output record's requests cost, as it carries it (`generator.bill`, `mc.bill`,
    `judge.bill`): the counters `charge` keeps but the cache's, so the records of a run sum to its manifest's bill
    (docs/cost.md says when they do not: shared completions, speculation, failed records)."""
    return {key: int(counted.get(key, 0)) for key in RECORD_KEYS}


@dataclass(frozen=True)
class Bill:
    """A run's bill (module docstring).

    Attributes:
        requests: engine requests answered (ok or not).
        prompt_tokens: prompt tokens sent.
        cached_prompt_tokens: of them, those the engine's prefix cache served.
        decode_tokens: generated tokens, speculation's unused ones included.
        thought_tokens: of the decode, a thinking model's thought (0: none told).
        params: the model's parameter count; None: unknown (compute unknown).
        params_from: "config" (counted from config.json), "given" (--model-params) or "unknown".
    """

    requests: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    decode_tokens: int = 0
    thought_tokens: int = 0
    params: int | None = None
    params_from: str = "unknown"

    @classmethod
    def of(cls, stats: Mapping[str, int], params: int | None, params_from: str = "config") -> "Bill":
        prompt, cached = int(stats.get(PROMPT, 0)), int(stats.get(CACHED, 0))
        return cls(requests=int(stats.get(REQUESTS, 0)), prompt_tokens=prompt, cached_prompt_tokens=cached,
                   decode_tokens=int(stats.get(GENERATED, 0)) + int(stats.get(UNUSED, 0)),
                   thought_tokens=int(stats.get(THOUGHT, 0)),
                   params=params, params_from=params_from if params is not None else "unknown")

    @property
    def prefill_tokens(self) -> int:
        """Prompt tokens computed: those the prefix cache did not serve."""
        return self.prompt_tokens - self.cached_prompt_tokens

    @property
    def answer_tokens(self) -> int:
        return self.decode_tokens - self.thought_tokens

    @property
    def compute(self) -> float | None:
        """(prefill + decode) x params, in billion-parameter-tokens; None when params are unknown."""
        return None if self.params is None else billions(self.prefill_tokens + self.decode_tokens, self.params)

    def record(self) -> dict[str, Any]:
        """As the manifest writes it (`bill`)."""
        return {"requests": self.requests, "prompt_tokens": self.prompt_tokens,
                "cached_prompt_tokens": self.cached_prompt_tokens, "prefill_tokens": self.prefill_tokens,
                "decode_tokens": self.decode_tokens, "thought_tokens": self.thought_tokens,
                "answer_tokens": self.answer_tokens, "params": self.params, "params_from": self.params_from,
                "compute": None if self.compute is None else round(self.compute, 6), "unit": UNIT}

    @classmethod
    def read(cls, entry: Mapping[str, Any]) -> "Bill":
        """A manifest's `bill` back (`compute` is derived, not read)."""
        return cls(**{k: entry[k] for k in ("requests", "prompt_tokens", "cached_prompt_tokens",
                                            "decode_tokens", "thought_tokens", "params", "params_from")})

    def at(self, params: int, params_from: str = "given") -> "Bill":
        """The same tokens billed at another parameter count (the paper's sizes)."""
        return Bill(**{**self.__dict__, "params": params, "params_from": params_from})

    def __add__(self, other: "Bill") -> "Bill":
        """Two runs of one model stage (a resumed run): the tokens add, the size is the last one's."""
        summed = {k: getattr(self, k) + getattr(other, k) for k in (
            "requests", "prompt_tokens", "cached_prompt_tokens", "decode_tokens", "thought_tokens")}
        params = other.params if other.params is not None else self.params
        return Bill(**summed, params=params, params_from=other.params_from if other.params is not None
                    else self.params_from)


def billions(tokens: float, params: float) -> float:
    return tokens * params / 1e9


_SIZE = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?(?:e\d+)?)\s*(?P<unit>[kKmMbBtT]?)\s*$")
_UNITS = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def parse_params(text: str) -> int:
    """A parameter count as people write it: 7e9, 7B, 72b, 1.06M, 135000000. ValueError otherwise."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"not a parameter count: {text!r} (write it as 7B, 1.5e9 or 135M)")
    value = float(m["n"]) * _UNITS[m["unit"].lower()]
    if value < 1:
        raise ValueError(f"not a parameter count: {text!r} (at least 1)")
    return round(value)


@functools.lru_cache(maxsize=32)
def count_parameters(model: str) -> int | None:
    """The parameter count of `model` (a local checkpoint or a name in the local Hugging Face cache)
    from its config.json, built on the meta device: no weight is read or allocated. Tied embeddings
    count once. None when no config is found or transformers cannot build the architecture."""
    try:
        from accelerate import init_empty_weights
        from transformers import AutoConfig, AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        local = Path(model).is_dir()
        if local and not (Path(model) / "config.json").is_file():
            return None
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        try:
            config = AutoConfig.from_pretrained(model, local_files_only=True)
            with init_empty_weights():
                built = AutoModelForCausalLM.from_config(config)
            built.tie_weights()  # on the meta device the tying is not done by itself: tied weights count once
        finally:
            hf_logging.set_verbosity(verbosity)
        return int(sum(p.numel() for p in built.parameters()))
    except (OSError, ValueError, KeyError, ImportError, json.JSONDecodeError):
        return None


def model_params(engine_info: Mapping[str, Any]) -> tuple[int | None, str]:
    """A stage's model size and where it came from: `--model-params` when given (recorded in the
    engine's description), else counted from the model's config; (None, "unknown") if neither."""
    given = engine_info.get("model_params")
    if given is not None:
        return int(given), "given"
    counted = count_parameters(str(engine_info.get("model", "")))
    return (counted, "config") if counted is not None else (None, "unknown")


def amount(n: float) -> str:
    """A figure a person reads at a glance: 78,892; 3.4M; 1.2B."""
    if n >= 1e9:
        return f"{n / 1e9:.1f}B"
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    return f"{n:,.0f}" if float(n).is_integer() or n >= 100 else f"{n:.3g}"


def cost_phrase(bill: Bill) -> str:
    """What a stage's last line says of its bill: 'cost 12,345 prefill + 6,789 decode tokens, 0.021
    billion-parameter-tokens' (compute unknown: 'at an unknown model size')."""
    said = f"cost {amount(bill.prefill_tokens)} prefill + {amount(bill.decode_tokens)} decode tokens"
    if bill.thought_tokens:
        said += f" ({amount(bill.thought_tokens)} of thought)"
    compute = bill.compute
    if compute is None:
        return said + " (model size unknown: --model-params)"
    return said + f", {amount(compute) if compute >= 1000 else f'{compute:.3g}'} {UNIT}"
