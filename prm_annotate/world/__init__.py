"""The arithmetic world: problems with exact truth, and tiny trained policy, judge and thinker models.

    problems.py  seeded word problems + reference solutions (`python -m prm_annotate.world.problems`)
    truth.py     true_first_error(problem_record, steps): the gold first wrong step
    thinking.py  seeded thinking traces: slips corrected or not, wrong corrections, re-checks
    trace_truth.py  read_trace(problem_record, text): a trace's first error, slips and corrections
    report.py    `prm-annotate world report`: the pipeline on the world, scored against the truth
    think_report.py  `prm-annotate world think`: the same on the thinker's traces, against the trace truth
    models/      the shipped checkpoints: policy, judge and thinker (see models/README.md)

The tools that train and measure the models, and the PRM experiment with the model only it uses
(the PRMs' base), live beside the package, in lab/world/.
"""
from pathlib import Path

from prm_annotate.world.problems import make_problem, make_problems
from prm_annotate.world.truth import true_first_error

MODELS_DIR = Path(__file__).resolve().parent / "models"
POLICY_DIR = MODELS_DIR / "policy"
JUDGE_DIR = MODELS_DIR / "judge"
# The thinking world's policy: `<think>` traces with slips, corrections and re-checks, then the answer.
THINKER_DIR = MODELS_DIR / "thinker"
# The built-in prompts the world's models were trained on (lab/world/train.py), by name: the
# world names them wherever it runs a stage, whatever the stages' defaults are.
WORLD_SYSTEM_PROMPT = "step"
WORLD_JUDGE_PROMPT = "processbench"


def model_setting(path: Path) -> str:
    """A model as a run's settings record it: a shipped one by its name in the package (the same
    in every checkout, so a moved checkout resumes its runs), any other by its resolved path."""
    resolved = Path(path).resolve()
    return f"shipped:{resolved.name}" if resolved.parent == MODELS_DIR else str(resolved)


__all__ = ["make_problem", "make_problems", "true_first_error", "MODELS_DIR", "POLICY_DIR", "JUDGE_DIR",
           "THINKER_DIR", "WORLD_SYSTEM_PROMPT", "WORLD_JUDGE_PROMPT", "model_setting"]
