"""The verify road's floor: what `judge + verify` would need with foresight of the completions.

An exhaustive run with `--keep-completions K` (no prefix sharing) holds, per probed step, all K of
its completions in seed order: the same per-response seeds `judge + verify` without sharing draws,
so verify's step j and j-1 see exactly these completions, as a prefix of them. With foresight a
verify run would ask for no completion it does not use:

- at the judge's step j: completions up to its first right one (the claim is refuted there) or all K;
- at step j-1, only when step j held (all K wrong) or j is not probed (the last step): up to its
  first right one (confirmed) or all K (refuted at j-1);
- nothing where verify rolls out nothing (judge -1, j = last with a right answer, unparsed, ...).

Which steps verify probes is asked of the strategy's own plan (`VerifyPlan`: its `at_j` and `before`
samplers, or an outcome decided without rollouts), so the floor follows verify's rules as they are.
A completion's tokens are its kept text re-tokenized by the completer's tokenizer, plus the
end-of-sequence token the engine generated and the text does not hold when it was not cut at its
budget (`Floor.retokenized_all` against `engine_all` says how close that comes to the engine's own
count on the whole exhaustive run).

Only the order and the stopping are foresight's: the speculation, the rounds of 1, 2 and the rest,
and prefix sharing are what a real run adds to (or, by sharing, takes from) this count.

    counts = floor_counts(n_steps, last_correct, claim, rights, k)   # step -> completions needed
    floor = verify_floor(exhaustive_rollouts, judged, count_text, prompt_ids)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import orjson

from prm_annotate.strategies.verify import JudgeClaim, Verify

# The label of a step: more than threshold x K right. With the default threshold 0, one right completion.
DEFAULT_THRESHOLD = 0.0


def first_needed(rights: Sequence[bool | None], k: int, threshold: float = DEFAULT_THRESHOLD) -> tuple[int, bool]:
    """(completions up to the one that decides label 1, or all k; the label). `rights`: the step's
    completions in seed order (None: ungraded, not right)."""
    needed, right = math.floor(threshold * k) + 1, 0
    for n, ok in enumerate(rights[:k], 1):
        right += ok is True
        if right >= needed:
            return n, True
    if len(rights) < k:
        raise ValueError(f"{len(rights)} completions kept, K={k}: the floor needs every one (--keep-completions K)")
    return k, False


def floor_counts(n_steps: int, last_correct: bool, claim: JudgeClaim, rights: Sequence[Sequence[bool | None] | None],
                 k: int, threshold: float = DEFAULT_THRESHOLD) -> dict[int, int]:
    """Per probed step, the completions verify needs with foresight (module docstring); {} when it
    rolls out nothing. `rights[s]`: step s's completions' verdicts in seed order (exhaustive's)."""
    plan = Verify().plan(n_steps, k, threshold, last_correct, claim)
    counts: dict[int, int] = {}
    j_holds = True
    if plan.at_j is not None:
        counts[plan.at_j.step], label = first_needed(rights[plan.at_j.step], k, threshold)
        j_holds = not label
    if plan.before is not None and j_holds:
        counts[plan.before.step], _ = first_needed(rights[plan.before.step], k, threshold)
    return counts


@dataclass
class Floor:
    """The floor over a run: completions, their tokens (re-tokenized), the prompts they need."""

    completions: int = 0
    decode_tokens: int = 0  # the floor's completions: their texts re-tokenized, + the stop token of an uncut one
    stop_tokens: int = 0  # of decode_tokens, the stop tokens (one per completion not cut)
    prefill_tokens: int = 0  # the distinct token prefixes of the floor's prompts (a perfect prefix cache)
    responses_rolled_out: int = 0
    # The whole exhaustive run re-tokenized against what the engine counted (generated_tokens).
    retokenized_all: int = 0  # texts only
    stops_all: int = 0  # completions not cut (each generated a stop token its text does not hold)
    engine_all: int = 0
    by_step: dict[str, dict[int, int]] = field(default_factory=dict)  # id -> step -> completions

    def compute(self, params: float) -> float:
        """(prefill + decode) x params, in billion-parameter-tokens (engines/bill.py's unit)."""
        return (self.prefill_tokens + self.decode_tokens) * params / 1e9


def distinct_prefixes(prompts: Iterable[Sequence[int]]) -> int:
    """The tokens a perfect prefix cache computes for these prompts: every distinct token prefix
    once (the nodes of their trie). One prompt that is the start of another costs nothing more."""
    root: dict = {}
    nodes = 0
    for ids in prompts:
        node = root
        for token in ids:
            if token not in node:
                node[token] = {}
                nodes += 1
            node = node[token]
    return nodes


def verify_floor(exhaustive: Path, claims: Callable[[str], JudgeClaim], count_text: Callable[[str], int],
                 prompt_ids: Callable[[dict, int], Sequence[int]] | None = None,
                 threshold: float = DEFAULT_THRESHOLD) -> Floor:
    """The floor of `judge + verify` from an exhaustive run's rollouts with `--keep-completions K`.

    `claims(id)`: the judge's claim (JudgedFile.claim); `count_text`: the completer's tokenizer's
    count of a completion's text; `prompt_ids(record, step)`: the prompt's token ids of a completion
    from `step` (None: prefill not counted). The floor's prefill is that of a perfect prefix cache
    over the whole run: each distinct token prefix of the prompts it needs, once (the engine's cache
    works in blocks, so no run reaches it)."""
    floor = Floor()
    prompts: list[Sequence[int]] = []
    for line in exhaustive.read_bytes().splitlines():
        if not line.strip():
            continue
        record = orjson.loads(line)
        mc = record["mc"]
        if mc.get("strategy") != "exhaustive" or "kept_completions" not in mc:
            raise ValueError(f"{exhaustive}: record {record['id']} is not exhaustive with --keep-completions")
        k, kept = mc["k"], mc["kept_completions"]
        floor.engine_all += mc["generated_tokens"]
        floor.retokenized_all += sum(count_text(c["text"]) for step in kept if step for c in step)
        floor.stops_all += sum(not c["cut"] for step in kept if step for c in step)
        rights = [None if step is None else [c["correct"] for c in step] for step in kept]
        last_correct = mc["scores"][-1] == 1.0  # the response's own answer decides the last step
        counts = floor_counts(len(record["steps"]), last_correct, claims(record["id"]), rights, k, threshold)
        if not counts:
            continue
        floor.responses_rolled_out += 1
        floor.by_step[record["id"]] = counts
        for step, n in counts.items():
            floor.completions += n
            stops = sum(not c["cut"] for c in kept[step][:n])
            floor.decode_tokens += sum(count_text(c["text"]) for c in kept[step][:n]) + stops
            floor.stop_tokens += stops
            if prompt_ids is not None:
                prompts.append(prompt_ids(record, step))
    floor.prefill_tokens = distinct_prefixes(prompts)
    return floor


def text_counter(model: str) -> Callable[[str], int]:
    """The completer's tokenizer's count of a text (no special tokens: a completion's own tokens)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


def prompt_ids_of(responses: Path, model: str, **rollout_settings) -> Callable[[dict, int], list[int]]:
    """`prompt_ids(record, step)`: the prompt token ids of a completion from `step` of the response
    with the record's id, the request built by the rollout stage itself and rendered as the
    in-process engine renders it (as `plan rollout` counts it)."""
    from transformers import AutoTokenizer

    from prm_annotate.engines.vllm_engine import render_prompt
    from prm_annotate.stages.rollout import RolloutStage, rollout_input_model
    from prm_annotate.strategies import Probe

    tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    stage = RolloutStage(None, engine_info={"model": model}, **rollout_settings)
    model_type = rollout_input_model(stage.prompts)
    inputs = {r["id"]: model_type.model_validate(r)
              for r in map(orjson.loads, responses.read_bytes().splitlines()) if r}
    return lambda record, step: tokenizer.encode(
        render_prompt(tokenizer, stage._request(inputs[record["id"]], Probe(step, 0))), add_special_tokens=False)
