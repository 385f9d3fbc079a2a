"""Lab equipment beside the product package: tools that build and measure the models the package
ships (run from a checkout, e.g. `python -m lab.world.train`). Nothing in `prm_annotate` imports
this package; it uses `prm_annotate` only through its public modules.

    tokenizer.py     the byte-level BPE builder (the world's shipped tokenizer, and testing's tiny model)
    world/train.py   trains the arithmetic world's tiny policy and judge (and prm-base)
    world/corrupt.py wrong responses with a known first error (the judge's training data)
    world/measure.py measures the shipped world models through the engine protocol
    world/prm/       the world's PRM experiment and its statistics (`python -m lab.world.prm`, make demo-loop)
    world/models/    the model only that experiment uses (prm-base)
"""
