"""Training and measuring tools of the arithmetic world, and its PRM experiment (`prm_annotate.world`
holds what the demo runs).

    train.py      trains the world's policy, judge and the PRMs' base
    measure.py    measures the shipped world models in vLLM
    corrupt.py    wrong responses with a known first error (the judge's training data)
    prm/          the PRM experiment (`python -m lab.world.prm`, docs/world-prm.md)
    prm_heads.py  world PRMs compared on one split (docs/world-prm.md, "The PRM: one that checks steps")
    seed_critic.py  the first judge distilled from the pipeline's own seed slice (`train --head critic`), measured
    models/       the model only the experiment uses: `prm-base`, the PRMs' base (models/README.md)
"""
from pathlib import Path

from prm_annotate.world import model_setting as package_model_setting

LAB_MODELS_DIR = Path(__file__).resolve().parent / "models"
# The base of the world's PRMs: the policy trained on further (models/README.md), a better reckoner.
PRM_BASE_DIR = LAB_MODELS_DIR / "prm-base"


def model_setting(path: Path) -> str:
    """A model as the experiment's settings record it: one of the repository's world models by its
    name (the same in every checkout, so a moved checkout resumes its runs), any other by its
    resolved path. The lab's models are named as the package's are (`shipped:NAME`), as they were
    when prm-base shipped in the package: a run started before it moved here keeps its settings."""
    resolved = Path(path).resolve()
    return f"shipped:{resolved.name}" if resolved.parent == LAB_MODELS_DIR else package_model_setting(resolved)
