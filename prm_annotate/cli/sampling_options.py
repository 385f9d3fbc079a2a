"""The command-line options of `Sampling`'s fields (engines/sampling.py), one entry per field: a model
stage's config holds a `Sampling` (judge: a `SamplingOverrides`), and `sampling_options` gives the
options of that field for `option_groups`, worded for what the stage generates.
"""
from __future__ import annotations

from typing import Any

import typer

# Field -> (flags, typer.Option keywords); "{output}" and "{request}" in a help are the stage's words.
SAMPLING_OPTIONS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "temperature": (("--temperature",), dict(min=0.0)),
    "top_p": (("--top-p",), dict(min=0.0, max=1.0)),
    "top_k": (("--top-k",), dict(min=0, help="Sample from the k likeliest tokens only; 0: off.")),
    "max_tokens": (("--max-tokens",), dict(min=1, help="Tokens per {output}.")),
    "seed": (("--seed",), dict(help="Run seed; each {request}'s seed derives from it.")),
}


def sampling_options(output: str, request: str, **changes: dict[str, Any]) -> dict[str, Any]:
    """The options of a config's `sampling` field: `output` is what --max-tokens bounds (a response),
    `request` what each seed is for; `changes` replace a field's keywords (`top_p={"show_default": "1.0"}`)."""
    options = {}
    for name, (flags, keywords) in SAMPLING_OPTIONS.items():
        keywords = {**keywords, **changes.get(name, {})}
        if "help" in keywords:
            keywords["help"] = keywords["help"].format(output=output, request=request)
        options[name] = typer.Option(*flags, **keywords)
    return options
