"""A PRM reward in verl's reward-function shape: `compute_score(data_source, solution_str,
ground_truth, extra_info=None, **reward_kwargs)` (verl 0.9.1: `custom_reward_function.path` /
`.name` / `.reward_kwargs`, loaded by `verl.utils.import_utils.load_extern_object` and called by its
reward managers with those four keywords and the reward kwargs). It returns verl's dict form:
`score` (the aggregate, which verl takes as the reward) and, as extra info verl logs, `step_rewards`
and `aggregate`.

The PRM is reached one of two ways, named in `reward_kwargs`:
- `url`: a running `prm-annotate reward-server` (its `/score` form; `key_env` names the variable
  holding its bearer key, PRM_REWARD_KEY by default when set);
- `model`: the PRM loaded in this process (once per process; `base_url` for a PRM behind
  `vllm serve`), through the same scorers as `score`.
The problem the PRM reads is `extra_info["question"]` (verl's math recipes put it there) or
`extra_info["problem"]`; the response is split into steps on `step_sep` ("\\n\\n"). A response the PRM
cannot read scores `fallback` (0.0) with `error` saying why.
"""
from __future__ import annotations

import os
import threading
from typing import Any

from prm_annotate.reward.protocols import TextRules
from prm_annotate.reports.aggregates import DEFAULT_AGGREGATE, reward_aggregate, reward_names
from prm_annotate.reward.scoring import Item, Reward, RewardScorer

_SCORERS: dict[tuple[str, str | None], RewardScorer] = {}
_LOCK = threading.Lock()


def _problem(extra_info: dict[str, Any] | None) -> str:
    info = extra_info or {}
    for key in ("question", "problem"):
        if isinstance(info.get(key), str) and info[key].strip():
            return info[key]
    raise ValueError("compute_score needs the problem in extra_info['question'] or extra_info['problem'] "
                     "(the PRM scores each step against the question)")


def _in_process(model: str, base_url: str | None) -> RewardScorer:
    with _LOCK:
        if (model, base_url) not in _SCORERS:
            from prm_annotate.engines import EngineConfig
            from prm_annotate.prm.checkpoint import locate
            from prm_annotate.prm.scorers import scorer_for

            checkpoint = locate(model)
            kind = scorer_for(checkpoint, served=base_url is not None)
            _SCORERS[(model, base_url)] = RewardScorer(kind.start(checkpoint, EngineConfig(model=model, base_url=base_url)))
        return _SCORERS[(model, base_url)]


def _served(url: str, item: Item, aggregate: str, key_env: str, timeout: float) -> Reward:
    import httpx

    key = os.environ.get(key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    reply = httpx.post(url.rstrip("/") + "/score", json={"responses": [{"problem": item.problem, "steps": item.steps}],
                                                          "aggregate": aggregate}, headers=headers, timeout=timeout)
    if reply.status_code != 200:
        raise RuntimeError(f"reward server {url}: HTTP {reply.status_code}: {reply.text[:300]}")
    body = reply.json()
    return Reward(body["step_rewards"][0], body["errors"][0])


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None,
                  *, url: str | None = None, model: str | None = None, base_url: str | None = None,
                  aggregate: str = DEFAULT_AGGREGATE, step_sep: str = "\n\n", fallback: float = 0.0,
                  key_env: str = "PRM_REWARD_KEY", timeout: float = 300.0, **_: Any) -> dict[str, Any]:
    kind = reward_aggregate(aggregate)
    if kind is None:
        raise ValueError(f"aggregate must be one of {reward_names()}, got {aggregate!r}")
    aggregate = kind.name
    if (url is None) == (model is None):
        raise ValueError("compute_score needs reward_kwargs `url` (a prm-annotate reward-server) or `model` (a PRM "
                         "loaded in this process), one of them")
    item = Item(_problem(extra_info), TextRules(step_sep).steps(solution_str))
    if url is not None:
        reward = _served(url, item, aggregate, key_env, timeout)
    else:
        reward = _in_process(model, base_url).rewards([item])[0]  # type: ignore[arg-type]
    value = reward.aggregate(aggregate)
    return {"score": fallback if value is None else value, "step_rewards": reward.step_rewards or [],
            "aggregate": aggregate, "error": reward.error or ""}
