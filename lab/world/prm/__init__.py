"""The PRM experiment of the arithmetic world: does a PRM trained on consensus labels beat one
trained on MC labels, and with how much certainty (docs/world-prm.md)?

    python -m lab.world.prm [--workdir runs/world-prm] [--seeds 3]   # make demo-loop

    experiment.py  the run: labels, PRMs per source and seed, scoring, references
    labels.py      one `world report`, the split, each seed's training sets per label source
    scores.py      held-out responses scored by a PRM, and every metric the experiment takes
    bootstrap.py   paired bootstrap intervals over held-out problems (and seeds)
    results.py     results.json, the table and the picture

It uses `prm_annotate` through its public modules only (the world report runs as the product's
command); nothing in `prm_annotate` imports it.
"""
