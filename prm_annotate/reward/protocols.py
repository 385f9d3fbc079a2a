"""The requests the reward server answers, read strictly: a request that is not of the shape is
refused with the reason (`BadRequest`, HTTP 400), never half-read.

OpenRLHF's remote reward model (`--remote_rm_url`; OpenRLHF 0.11.2, `openrlhf/utils/agent.py`,
`SingleTurnAgentExecutor._fetch_rewards_via_http`, the same payload as 0.9.0's
`remote_rm_utils.request_api_wrapper`): POST `{"query": [text], "prompts": [text], "labels": [any]}`,
answered with `{"rewards": [float], "scores": [float], "extra_logs": {name: [float]}}`, one entry per
query in order (as its `serve_rm.py` answers). A query is the decoded prompt and response, special
tokens kept: the response is what follows the prompt (or, when the query does not start with it, as
when the trainer cut a long prompt, what follows the query's last ChatML assistant header), less
trailing end-of-turn tokens; the problem
the PRM reads is the prompt's last user turn when the prompt is a ChatML chat (`<|im_start|>user`),
else the prompt itself. Besides OpenRLHF's keys the answer carries `step_rewards` (each response's
per-step rewards), `aggregate` and `errors` (null, or why a response was not scored and got the
fallback reward).

This server's own form (`/score`, what verl's `compute_score` here sends): POST `{"responses":
[{"problem": text, "steps": [text]} | {"problem": text, "response": text}], "aggregate": name?}`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prm_annotate.reports.aggregates import reward_aggregate, reward_names
from prm_annotate.reward.scoring import Item, Reward
from prm_annotate.segmenting import get_segmenter, segment_text
from prm_annotate.settings import declare
from prm_annotate.steps import DEFAULT_SEP, STEP_SEP

END_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "</s>")
_USER = "<|im_start|>user\n"
_TURN_END = "<|im_end|>"
_ASSISTANT = "<|im_start|>assistant\n"


class BadRequest(ValueError):
    """A request the server refuses (HTTP 400), with the reason."""


@dataclass(frozen=True)
class TextRules:
    """How a response's text becomes steps.

    Attributes:
        step_sep: the separator between steps.
        end_tokens: end-of-turn tokens cut from the end of a response.
    """
    step_sep: str = declare(STEP_SEP, DEFAULT_SEP)
    end_tokens: tuple[str, ...] = END_TOKENS

    def steps(self, response: str) -> list[str]:
        text = response.rstrip()
        while any(text.endswith(t) for t in self.end_tokens):
            text = next(text[: -len(t)] for t in self.end_tokens if text.endswith(t)).rstrip()
        # Bare text from an RL client, cut as sample cuts a completion (segmenting/texts.py: a thinking
        # policy's `<think>` tags fall between steps, never in one), by the named default rule.
        return segment_text(text, get_segmenter("paragraphs", {"sep": self.step_sep})).steps


def problem_of_prompt(prompt: str) -> str:
    if _USER in prompt:
        turn = prompt.rsplit(_USER, 1)[1]
        return turn.split(_TURN_END, 1)[0].strip()
    return prompt.strip()


def _string_list(body: dict[str, Any], key: str, n: int | None = None) -> list[str]:
    value = body.get(key)
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise BadRequest(f"`{key}` must be a list of strings")
    if n is not None and len(value) != n:
        raise BadRequest(f"`{key}` has {len(value)} entries for {n} queries")
    return value


def _check_size(n: int, max_batch: int) -> None:
    if n == 0:
        raise BadRequest("no responses in the request")
    if n > max_batch:
        raise BadRequest(f"{n} responses in one request; this server takes at most {max_batch}")


def openrlhf_items(body: Any, rules: TextRules, max_batch: int) -> tuple[list[Item | str], str | None]:
    """(one Item per query, or why it cannot be read, for its fallback reward; the aggregate asked for)."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object with `query`, `prompts` and `labels`")
    queries = _string_list(body, "query")
    _check_size(len(queries), max_batch)
    prompts = _string_list(body, "prompts", len(queries))
    labels = body.get("labels")
    if labels is not None and (not isinstance(labels, list) or len(labels) != len(queries)):
        raise BadRequest(f"`labels` must be a list of {len(queries)} entries (or absent)")
    items: list[Item | str] = []
    for query, prompt in zip(queries, prompts):
        if query.startswith(prompt):
            items.append(Item(problem_of_prompt(prompt), rules.steps(query[len(prompt):])))
        elif _ASSISTANT in query:  # a prompt the trainer cut or re-decoded: the chat's own turns
            head, response = query.rsplit(_ASSISTANT, 1)
            items.append(Item(problem_of_prompt(head), rules.steps(response)))
        else:
            items.append("the query does not start with its prompt (and is no ChatML chat)")
    return items, _aggregate(body)


def score_items(body: Any, rules: TextRules, max_batch: int) -> tuple[list[Item | str], str | None]:
    if not isinstance(body, dict) or not isinstance(body.get("responses"), list):
        raise BadRequest("the body must be a JSON object with `responses`, a list")
    responses = body["responses"]
    _check_size(len(responses), max_batch)
    items: list[Item | str] = []
    for i, r in enumerate(responses):
        if not isinstance(r, dict) or not isinstance(r.get("problem"), str):
            raise BadRequest(f"responses[{i}] must be an object with a string `problem`")
        steps, text = r.get("steps"), r.get("response")
        if steps is not None:
            if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
                raise BadRequest(f"responses[{i}].steps must be a list of strings")
            items.append(Item(r["problem"], steps))
        elif isinstance(text, str):
            items.append(Item(r["problem"], rules.steps(text)))
        else:
            raise BadRequest(f"responses[{i}] needs `steps` (a list of strings) or `response` (a string)")
    return items, _aggregate(body)


def _aggregate(body: dict[str, Any]) -> str | None:
    name = body.get("aggregate")
    if name is None:
        return None
    kind = reward_aggregate(name) if isinstance(name, str) else None
    if kind is None:
        raise BadRequest(f"`aggregate` must be one of {reward_names()}, got {name!r}")
    return kind.name


def answer(rewards: list[Reward], aggregate: str, fallback: float) -> dict[str, Any]:
    values = [r.aggregate(aggregate) for r in rewards]
    rewards_out = [fallback if v is None else v for v in values]
    return {"rewards": rewards_out, "scores": rewards_out,
            "extra_logs": {"prm_steps": [float(len(r.step_rewards or [])) for r in rewards],
                           "prm_failed": [float(r.step_rewards is None) for r in rewards]},
            "step_rewards": [r.step_rewards for r in rewards], "aggregate": aggregate,
            "errors": [r.error for r in rewards]}
