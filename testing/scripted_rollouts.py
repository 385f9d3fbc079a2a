"""Rollouts on hand-made cases: a scripted engine whose completions are right exactly where a test
says, driving the real rollout stage with the real grader (tests/strategies/)."""
from __future__ import annotations

from prm_annotate.stages.rollout import RolloutInput, RolloutStage
from testing.scripted_engine import ScriptedEngine

K = 4


def response(rid: str, n_steps: int, correct: bool, steps: list[str] | None = None) -> RolloutInput:
    steps = steps or [f"Step {i + 1}: {rid} {i}." for i in range(n_steps - 1)] + ["\\boxed{16}"]
    return RolloutInput.model_validate({"id": rid, "problem": "P?", "answer": "16", "steps": steps,
                                        "correct": correct})


def stage_for(strategy, right: dict[tuple[str, int], set[int]], k: int = K, threshold: float = 0.0,
              share: bool = False, **settings) -> tuple[RolloutStage, ScriptedEngine]:
    """Completion j of the prefix ending at step i of record rid is right iff j in right[(rid, i)].
    With share=True the rule is keyed by the prefix's last step text instead of the record.
    `settings`: more of RolloutStage's (verify: judged, judged_file)."""
    stage = RolloutStage(ScriptedEngine(lambda r: ""), k=k, strategy=strategy, threshold=threshold,
                         share_prefixes=share, **settings)

    seeds: dict[int, tuple[str, int, int]] = {}  # completion seed -> (record, step, index), built once

    def script(request):
        prefix = request.messages[-1]["content"]
        steps = [s for s in prefix.split("\n\n") if s]
        step = len(steps) - 1
        if share:
            words = steps[-1].split()
            good = right.get((words[2], step)) if len(words) > 2 else None
            for j in range(k):
                if good is not None and stage.shared_seed("P?", prefix, j) == request.sampling.seed:
                    return f"\\boxed{{{16 if j in good else 99}}}"
            return "\\boxed{99}"
        if not seeds:
            seeds.update({stage.completion_seed(rid, s, j): (rid, s, j) for rid, s in right for j in range(k)})
        hit = seeds.get(request.sampling.seed)
        if hit is not None and hit[1] == step:
            return f"\\boxed{{{16 if hit[2] in right[hit[:2]] else 99}}}"
        return "\\boxed{99}"  # a (record, step) without a rule: every completion wrong

    engine = ScriptedEngine(script)
    stage.engine = engine
    return stage, engine


def mc_of(stage: RolloutStage, records: list[RolloutInput]) -> dict[str, dict]:
    out = {}
    for o in stage.process(records):
        assert o.error is None, o.error
        out[o.id] = o.records[0].dump()["mc"]
    return out


def rules(rid: str, labels: list[int], first_right: int = 1) -> dict[tuple[str, int], set[int]]:
    """Step i with label 1 gets exactly one right completion, at index `first_right` (so early
    stopping needs more than one round); label 0 gets none."""
    return {(rid, i): ({first_right} if lab else set()) for i, lab in enumerate(labels)}
