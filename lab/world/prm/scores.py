"""Scoring held-out responses with a trained PRM, and the metrics `world prm` takes of any scorer.

A scorer is a step score per held-out response (a PRM's P(right), the MC scores of the rollouts,
the judge's verdict as 1 before its first error and 0 from it) and a threshold. Its metrics, all
against the world's truth and all computed by the project's own reports:

- ProcessBench F1, error and correct accuracy of the first step scored below the threshold
  (`evaluation.evaluate.evaluate_scores`), per held-out problem too (the bootstrap's counts);
- step AUC of the scores against the true step labels (steps up to the true first error,
  `evaluation.metrics.auc`);
- right over wrong: within each held-out problem, the share of (right answer, wrong answer)
  response pairs whose lowest step score ranks the right one higher (a tie counts half): 50 is a
  scorer that cannot tell them apart, whatever its F1;
- score range: the median, over the held-out problems with two or more different responses, of
  the range (highest - lowest) of their responses' lowest step scores: near 0, a scorer that
  scores the problem and not the response;
- Best-of-N by min and by product for N = 1, 2, 4, ..., majority vote and pass@N, and the paper's
  two diagnostics (`reports.bon.best_of_n`), with each problem's pick right or not per N (the
  bootstrap's picks).

Beside them, what a selector blind to correctness gets (`blind_baselines`): a random one of the
first N responses, and a random one of their different texts. A scorer that reads a response but
not whether it is right gives copies one score and orders the rest by chance: it lands on the
second, and the right answer is more often one text written several times than a wrong one.

Scoring runs the checkpoint with plain transformers in float32, in right-padded batches of
responses of similar length: on a causal model a padded token comes after every real one, so the
scores are those of one response at a time (`prm.checkpoint.transformers_step_scores`, which the
tests hold equal to vLLM's pooling runner), which tests/world/test_world_prm.py checks.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from prm_annotate.reports.bon import Problem, best_of_n, prm_pick
from prm_annotate.evaluation.labels import Gold, step_labels

AGGREGATIONS = ("min", "prod")
NEUTRAL = 0.5  # the step score of a response a scorer left unscored (an unparsed verdict), for Best-of-N


def batched_step_scores(model: Any, tokenizer: Any, fmt: Any, responses: list[dict[str, Any]],
                        batch_size: int = 64) -> list[list[float]]:
    """P(right) at each step tag of each response, in the responses' order."""
    import torch

    from prm_annotate.prm.checkpoint import prm_token_ids, step_tag_id

    tag = step_tag_id(tokenizer, fmt.step_tag)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    encoded = [prm_token_ids(tokenizer, fmt, r["problem"], r["steps"]) for r in responses]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    out: list[list[float]] = [[] for _ in encoded]
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            width = max(len(encoded[i]) for i in rows)
            ids = torch.full((len(rows), width), pad, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for b, i in enumerate(rows):
                ids[b, :len(encoded[i])] = torch.tensor(encoded[i])
                mask[b, :len(encoded[i])] = 1
            probs = torch.softmax(model(input_ids=ids, attention_mask=mask).logits.float(), dim=-1)[..., 1]
            for b, i in enumerate(rows):
                positions = [p for p, t in enumerate(encoded[i]) if t == tag]
                if len(positions) != len(responses[i]["steps"]):
                    raise ValueError(f"{responses[i]['id']}: {len(positions)} step tags for "
                                     f"{len(responses[i]['steps'])} steps")
                out[i] = probs[b, positions].tolist()
    return out


def checkpoint_step_scores(path: Any, responses: list[dict[str, Any]],
                           readings: Any = None) -> tuple[list[list[float]], float]:
    """(P(right) at each step of each response, the checkpoint's threshold) for a checkpoint `train`
    wrote: a likelihood PRM through `score`'s own in-process scorer (prm/likelihood.py), a
    Qwen2ForProcessRewardModel with transformers in batches (batched_step_scores)."""
    from prm_annotate.prm.checkpoint import LIKELIHOOD_ARCHITECTURE, load_model, locate

    checkpoint = locate(str(path))
    if LIKELIHOOD_ARCHITECTURE in checkpoint.architectures:
        from prm_annotate.prm.likelihood import LikelihoodScorer

        scorer = LikelihoodScorer(checkpoint, progress=False, readings=readings)
        try:
            out = scorer.step_probabilities([scorer.token_ids(r["problem"], r["steps"]) for r in responses])
        finally:
            scorer.close()
        for r, s in zip(responses, out):
            if isinstance(s, str) or len(s) != len(r["steps"]):
                raise ValueError(f"{r['id']}: {s if isinstance(s, str) else len(s)} step scores for "
                                 f"{len(r['steps'])} steps")
        return [list(s) for s in out], scorer.format.threshold
    model, tokenizer, fmt = load_model(path)
    return batched_step_scores(model, tokenizer, fmt, responses), fmt.threshold


def likelihood_baseline_scores(base: Any, responses: list[dict[str, Any]],
                               system_prompt: str | None = None) -> list[list[float]]:
    """No training: per step, the causal LM's lowest probability of a token of the step given the
    ones before it (prm/likelihood.py's statistics, its text and its reading)."""
    from prm_annotate.prm.likelihood import lowest_token_probabilities

    return lowest_token_probabilities(base, [(r["problem"], r["steps"]) for r in responses],
                                      system_prompt=system_prompt)


@dataclass
class Heldout:
    """The held-out problems (in order), the truth of their responses, their responses graded
    once for Best-of-N (the scores in `problems` are replaced per scorer), and each response's
    steps (which responses are copies of one another)."""
    problem_ids: list[str]
    gold: dict[str, Gold]
    problems: list[Problem]
    steps: dict[str, tuple[str, ...]]


def with_scores(problems: list[Problem], scores: dict[str, list[float] | None]) -> list[Problem]:
    out = []
    for p in problems:
        cands = [replace(c, scores=scores.get(c.id) or [NEUTRAL] * len(c.scores)) for c in p.candidates]
        out.append(Problem(p.key, cands))
    return out


def step_auc(gold: dict[str, Gold], scores: dict[str, list[float] | None]) -> float | None:
    from prm_annotate.evaluation.metrics import auc

    values, right = [], []
    for rid, g in gold.items():
        s = scores.get(rid)
        if s is None:
            continue
        labels = step_labels(g.label, len(s))
        values += s[:len(labels)]
        right += labels
    return auc(np.asarray(values, dtype=float), np.asarray(right, dtype=bool))


def f1_part(held: Heldout, scores: dict[str, list[float] | None], threshold: float) -> dict[str, Any]:
    """ProcessBench metric at `threshold`, overall and as (error hits, erroneous, correct hits,
    correct) per held-out problem."""
    from prm_annotate.evaluation.evaluate import Report, SplitMetrics
    from prm_annotate.evaluation.labels import MISSING, get_path
    from prm_annotate.evaluation.metrics import first_below

    splits: dict[str, SplitMetrics] = defaultdict(SplitMetrics)  # by problem
    for rid, g in held.gold.items():
        s = scores.get(rid)
        pid = get_path(g.record, "problem_id")
        splits["unknown" if pid is MISSING or pid is None else str(pid)].add(
            g.label, None if s is None else first_below(s, threshold), g.n_steps)
    overall = Report(dict(splits)).overall
    counts = [[m.error_hits, m.n_error, m.correct_hits, m.n_correct]
              for m in (splits[pid] for pid in held.problem_ids)]
    return {"f1": overall.f1, "error_acc": overall.error_acc, "correct_acc": overall.correct_acc,
            "threshold": threshold, "f1_counts": counts}


def bon_part(held: Heldout, scores: dict[str, list[float] | None]) -> dict[str, Any]:
    """Best-of-N as `bon` reports it, and per N and aggregation each problem's pick (1 right, 0 not)."""
    problems = with_scores(held.problems, scores)
    by_key = {p.key: p for p in problems}
    result = best_of_n(problems, held.gold, aggregations=AGGREGATIONS)
    picks = {agg: {str(n): [int(prm_pick(by_key[pid].candidates[:n], agg).correct) for pid in held.problem_ids]
                   for n in result["n"]} for agg in AGGREGATIONS}
    return {"bon": result, "picks": picks}


def right_over_wrong(held: Heldout, scores: dict[str, list[float] | None]) -> tuple[float | None, list[list[float]]]:
    """Percent of (right, wrong) response pairs of one problem that the min step score orders right,
    and (wins, pairs) per held-out problem (the bootstrap's counts)."""
    by_key = {p.key: p for p in with_scores(held.problems, scores)}
    counts = []
    for pid in held.problem_ids:
        p = by_key[pid]
        right = [min(c.scores) for c in p.candidates if c.correct is True]
        wrong = [min(c.scores) for c in p.candidates if c.correct is False]
        wins = sum(1.0 if r > w else 0.5 if r == w else 0.0 for r in right for w in wrong)
        counts.append([wins, len(right) * len(wrong)])
    wins, pairs = (sum(c[i] for c in counts) for i in (0, 1))
    return (100 * wins / pairs if pairs else None), counts


def score_range(held: Heldout, scores: dict[str, list[float] | None]) -> float | None:
    """The median, over problems with two or more different scored responses, of the range of
    their lowest step scores."""
    ranges = []
    for p in held.problems:
        scored = [c for c in p.candidates if scores.get(c.id)]
        if len({held.steps[c.id] for c in scored}) > 1:
            lows = [min(scores[c.id]) for c in scored]  # type: ignore[arg-type]
            ranges.append(max(lows) - min(lows))
    return statistics.median(ranges) if ranges else None


def blind_baselines(held: Heldout, ns: list[int]) -> dict[str, dict[str, float]]:
    """Expected Best-of-N accuracy (%) of a random one of each problem's first N responses, and of
    a random one of their different texts (copies of a text are graded alike)."""
    def share(pick_from: Any) -> dict[str, float]:
        out = {}
        for n in ns:
            per_problem = []
            for p in held.problems:
                pool = pick_from(p.candidates[:n])
                per_problem.append(sum(correct for correct in pool) / len(pool))
            out[str(n)] = 100 * statistics.fmean(per_problem)
        return out

    return {"random response": share(lambda cands: [c.correct for c in cands]),
            "random text": share(lambda cands: list({held.steps[c.id]: c.correct for c in cands}.values()))}


def scorer_metrics(held: Heldout, scores: dict[str, list[float] | None], threshold: float) -> dict[str, Any]:
    """Every metric of one scorer on the held-out responses (module docstring)."""
    f1 = f1_part(held, scores, threshold)
    at_half = f1_part(held, scores, 0.5)["f1"] if threshold != 0.5 else f1["f1"]
    rw, rw_counts = right_over_wrong(held, scores)
    return {**f1, "f1_at_0.5": at_half, "step_auc": step_auc(held.gold, scores),
            "right_over_wrong": rw, "rw_counts": rw_counts, "score_range": score_range(held, scores),
            **bon_part(held, scores)}
