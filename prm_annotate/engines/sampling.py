"""`Sampling`: the values that shape how a request is sampled, one type from the command line to the
engine. A stage config holds one (`config.sampling`, its command's --temperature, --top-p...), a
`GenerationRequest` carries one, each engine maps it in one function (`vllm_engine.sampling_params`,
`openai_engine.sampling_body`), and `sampling_record` writes it into records and manifests.

Adding a sampling parameter: its field here, its option in cli/sampling_options.py, and its line in
the two engine mappings; records, manifests, the judge protocols' checks and every stage's requests
follow (tests/test_extension_points.py makes that change in a copy of the package).
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Optional

from prm_annotate.errors import UsageError


@dataclass(frozen=True)
class Sampling:
    """How one request is sampled; the defaults are a bare request's.

    Attributes:
        temperature: softmax temperature; 0 is greedy.
        top_p: nucleus sampling: the smallest set of tokens holding this much probability.
        top_k: sample from the k likeliest tokens only; 0: off.
        max_tokens: tokens to generate at most.
        seed: a request's own seed (the same seed and model give the same text whatever else is in
            the batch); in a stage config, the run seed each request's seed derives from. None:
            unseeded.
    """

    temperature: float = 0.7
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 512
    seed: Optional[int] = None

    def __post_init__(self) -> None:
        if not self.temperature >= 0:
            raise UsageError(f"sampling: temperature {self.temperature} is below 0")
        if not 0 <= self.top_p <= 1:
            raise UsageError(f"sampling: top_p {self.top_p} is not within 0..1")
        if self.top_k < 0:
            raise UsageError(f"sampling: top_k {self.top_k} is below 0 (0 is off)")
        if self.max_tokens < 1:
            raise UsageError(f"sampling: max_tokens {self.max_tokens} is below 1")


def sampling_record(sampling: Sampling) -> dict[str, Any]:
    """A sampling as records and manifests write it: every field, in field order."""
    return dataclasses.asdict(sampling)


def _overrides() -> type:
    """`SamplingOverrides`: `Sampling`'s fields, each None unless given."""
    hints = typing.get_type_hints(Sampling)
    fields = [(f.name, Optional[hints[f.name]], dataclasses.field(default=None)) for f in dataclasses.fields(Sampling)]

    def given(self: Any) -> dict[str, Any]:
        """The fields given (not None)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    doc = ("Sampling values as given, None where not: what fills the rest is the user's (a judge protocol: "
           "`JudgeProtocol.sampling`). The fields are `Sampling`'s.")
    return dataclasses.make_dataclass("SamplingOverrides", fields, frozen=True,
                                      namespace={"given": given, "__doc__": doc, "__module__": __name__})


SamplingOverrides = _overrides()


def sampling_fields() -> tuple[str, ...]:
    """The names of `Sampling`'s fields, in order."""
    return tuple(f.name for f in dataclasses.fields(Sampling))
