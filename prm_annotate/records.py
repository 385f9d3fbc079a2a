"""Every record shape of the contract (docs/contract.md), in one place.

Models keep unknown fields (`extra="allow"`) so each stage copies through what it does not own,
and files stay joinable by `id`. Validation is strict about what a stage relies on: types,
non-empty steps, first-error ranges. Every model is strict (pydantic strict mode, nested models
too): where the contract says integer, "1", 2.0 and true are refused, in every command alike.
`check_first_error` and `check_labels` are the one place a first error and step labels are checked,
for the models here and for readers of raw records (evaluate's gold labels).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator,
                      model_validator)

from prm_annotate.recovery.labels import Recovery

def _answer_to_str(value: Any) -> Any:
    # Gold answers often arrive as JSON numbers (18, 2.5); they are compared as text.
    if isinstance(value, bool):
        return value  # let pydantic reject it: a boolean is not an answer
    if isinstance(value, (int, float)):
        return str(value)
    return value


_R = TypeVar("_R", bound="Record")


def describe_validation_error(exc: ValidationError) -> str:
    """The first three problems of a record that does not validate, as one line."""
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(x) for x in err["loc"]) or "record"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


class Record(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    id: str = Field(min_length=1)

    @classmethod
    def make(cls: type[_R], data: dict[str, Any]) -> _R:
        """A stage's output record, validated as it is made, so a drift fails in the stage that made
        it. `dump()` keeps `data`'s key order, nested objects included: pydantic would put declared
        fields before the ones passed through, and a rerun must write the same bytes as before."""
        record = cls.model_validate(data)
        # Kept where pydantic keeps private attributes, without declaring one: a declared private
        # attribute makes pydantic run a hook after every validation (a tenth of a record's).
        object.__setattr__(record, "__pydantic_private__", {"order": _key_order(data)})
        return record

    def dump(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        order = _made_order(self)
        return data if order is None else _in_order(data, order)

    def plain(self) -> dict[str, Any]:
        """`dump()` without its copy, for a caller that serialises it at once (the runner's writer,
        consensus's join): the same dict, sharing the record's values (a tenth of the time)."""
        data = plain_dump(self)
        order = _made_order(self)
        return data if order is None else _in_order(data, order)


def _made_order(record: Record) -> dict[str, Any] | None:
    """The key order of the data `make` made `record` from; None: the model's order."""
    private = record.__pydantic_private__
    return private.get("order") if private else None


_M = TypeVar("_M", bound=BaseModel)


def trusted(cls: type[_M], data: dict[str, Any]) -> _M:
    """A model of `data` made of values already validated (a join of validated records), without
    validating them again: what `cls.model_construct(**data)` makes (declared fields, their defaults
    where absent, the rest as extras in `data`'s order), at a fraction of its cost, which was a
    validation's. The models here declare no private attributes."""
    names = _construction(cls)
    values = {name: data[name] for name in names if name in data}
    if len(values) < len(names):
        for name, info in cls.model_fields.items():
            if name not in values:
                if info.is_required():
                    raise ValueError(f"{cls.__name__}: {name} is required")
                values[name] = info.get_default(call_default_factory=True)
    extra = {k: v for k, v in data.items() if k not in values}
    model = cls.__new__(cls)
    object.__setattr__(model, "__dict__", values)
    object.__setattr__(model, "__pydantic_fields_set__", set(values))
    object.__setattr__(model, "__pydantic_extra__", extra if cls.model_config.get("extra") == "allow" else None)
    object.__setattr__(model, "__pydantic_private__", None)
    return model


_CONSTRUCTION: dict[type, tuple[str, ...]] = {}


def _construction(cls: type[BaseModel]) -> tuple[str, ...]:
    """A model's declared fields (a model with private attributes would need them set: refused)."""
    made = _CONSTRUCTION.get(cls)
    if made is None:
        if cls.__private_attributes__:
            raise TypeError(f"{cls.__name__} has private attributes: make it with model_construct")
        made = _CONSTRUCTION[cls] = tuple(cls.model_fields)
    return made


def plain_dump(model: BaseModel) -> dict[str, Any]:
    """What `model_dump(mode="json")` gives for the models here, whose fields hold JSON values
    (strings, numbers, lists, nested models) and whose extras came from JSON or a stage's dicts:
    declared fields in the model's order, then the extras in theirs; values shared, not copied."""
    out: dict[str, Any] = {}
    values = model.__dict__  # the declared fields' values (pydantic keeps them there)
    for name, nested in _fields(type(model)):
        value = values[name]
        out[name] = plain_dump(value) if nested and isinstance(value, BaseModel) else value
    if model.__pydantic_extra__:
        out.update(model.__pydantic_extra__)
    return out


_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}


def _fields(cls: type[BaseModel]) -> tuple[tuple[str, bool], ...]:
    """A model's declared fields in order, each with whether it may hold a model, worked out once per
    class: pydantic's `model_fields` goes through a descriptor on every access, and an isinstance
    check against BaseModel's metaclass on every value was a third of a dump's time."""
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = tuple((name, _may_hold_model(info.annotation))
                                      for name, info in cls.model_fields.items())
    return fields


def _may_hold_model(annotation: Any) -> bool:
    if annotation is Any:
        return True
    if isinstance(annotation, type):
        return issubclass(annotation, BaseModel)
    return any(_may_hold_model(arg) for arg in get_args(annotation))


def _key_order(data: dict[str, Any]) -> dict[str, Any]:
    return {k: _key_order(v) if isinstance(v, dict) else None for k, v in data.items()}


def _in_order(data: dict[str, Any], order: dict[str, Any]) -> dict[str, Any]:
    """`data` with the keys of `order` first, in its order (recursively); any others after them."""
    out = {k: _in_order(data[k], sub) if sub is not None and isinstance(data[k], dict) else data[k]
           for k, sub in order.items() if k in data}
    out.update((k, v) for k, v in data.items() if k not in out)
    return out


class Problem(Record):
    problem: str = Field(min_length=1)
    answer: str = Field(min_length=1)

    _coerce_answer = field_validator("answer", mode="before")(_answer_to_str)


def _check_steps(steps: list[str]) -> list[str]:
    if not steps:
        raise ValueError("steps is empty")
    for i, step in enumerate(steps):
        if not step or step.isspace():  # `not step.strip()` without copying every step
            raise ValueError(f"step {i} is empty")
    return steps


def check_first_error(first_error: int | None, n_steps: int, field: str) -> None:
    if first_error is not None and not -1 <= first_error < n_steps:
        raise ValueError(f"{field} = {first_error} is outside -1..{n_steps - 1} for {n_steps} steps")


def step_labels(first_error: int, n_steps: int) -> list[bool]:
    """Labels of the steps that have one: right before the first error, wrong at it, none after."""
    if first_error == -1:
        return [True] * n_steps
    return [True] * min(first_error, n_steps) + ([False] if first_error < n_steps else [])


def check_labels(labels: list[bool], first_error: int, n_steps: int) -> None:
    """Labels as `consensus` writes them: right before the first error, wrong at it, nothing after
    (the steps end there); all right when the first error is -1."""
    if len(labels) != n_steps:
        raise ValueError(f"{len(labels)} labels for {n_steps} steps")
    check_first_error(first_error, n_steps, "first_error")
    if labels != step_labels(first_error, n_steps):
        raise ValueError(f"labels do not match first_error = {first_error} over {n_steps} steps "
                         "(right before it, wrong at it, no steps after it)")


def _check_probabilities(scores: list[float | None]) -> list[float | None]:
    """Per-step scores are probabilities (None: a step not probed)."""
    for s in scores:
        if s is not None and not 0.0 <= s <= 1.0:
            raise ValueError(f"score {s} is outside [0, 1]")
    return scores


def _check_step_scores(scores: list, first_error: int | None, n_steps: int, field: str) -> None:
    if len(scores) != n_steps:
        raise ValueError(f"{field}.scores has {len(scores)} entries for {n_steps} steps")
    check_first_error(first_error, n_steps, f"{field}.first_error")


def recovery_of(obj: Any, n_steps: int, field: str = "recovery") -> Recovery | None:
    """The optional `recovery` of a record or verdict (prm_annotate/recovery/labels.py), read strictly;
    None when absent or null. It is an extra field, so records without it are written as before."""
    extra = obj.model_extra if isinstance(obj, BaseModel) else obj
    value = (extra or {}).get("recovery")
    if value is None:
        return None
    try:
        return Recovery.from_json(value, n_steps)
    except ValueError as exc:
        raise ValueError(f"{field}: {exc}") from None


def _verdict_fits_steps(field: str, *, scores: bool) -> Any:
    """A response's after-validator: the verdict in `field` (MC's, the judge's, a PRM's) names a
    first error within the steps and, with `scores`, has one score per step; its `recovery`, when
    there is one, fits the steps."""
    def check(self: Any) -> Any:
        verdict = getattr(self, field)
        if scores:
            _check_step_scores(verdict.scores, verdict.first_error, len(self.steps), field)
        else:
            check_first_error(verdict.first_error, len(self.steps), f"{field}.first_error")
        recovery_of(verdict, len(self.steps), f"{field}.recovery")
        return self

    return model_validator(mode="after")(check)


class Response(Record):
    """A solution split into steps. `answer` (gold) is optional here: judging needs none."""

    problem: str = Field(min_length=1)
    steps: list[str]
    answer: str | None = None
    problem_id: str | None = None
    final_answer: str | None = None
    correct: bool | None = None
    _coerce_answer = field_validator("answer", mode="before")(_answer_to_str)
    _steps_nonempty = field_validator("steps")(_check_steps)

    # A thinking policy's response (prm_annotate/thinking/tags.py), fields absent from other records (kept
    # as extra fields, so a record without them is written as before): steps[:thought_steps] are
    # the thought's, the rest the answer's; `step_joins` the text between consecutive steps (absent:
    # the separator); `thought_finished` False: no `</think>` before the completion ended.

    @property
    def thought_steps(self) -> int | None:
        return (self.model_extra or {}).get("thought_steps")

    @property
    def thought_finished(self) -> bool | None:
        return (self.model_extra or {}).get("thought_finished")

    @property
    def step_joins(self) -> list[str] | None:
        return (self.model_extra or {}).get("step_joins")

    @model_validator(mode="after")
    def _trace_fits_steps(self) -> "Response":
        extra = self.__pydantic_extra__
        if not extra or not ("thought_steps" in extra or "thought_finished" in extra or "step_joins" in extra):
            return self  # no thinking trace: nothing here to check
        for name, ok in (("thought_steps", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
                         ("thought_finished", lambda v: isinstance(v, bool)),
                         ("step_joins", lambda v: isinstance(v, list) and all(isinstance(j, str) for j in v))):
            if extra.get(name) is not None and not ok(extra[name]):
                raise ValueError(f"{name} must be {'a count' if name == 'thought_steps' else 'true or false' if name == 'thought_finished' else 'a list of strings'}, got {extra[name]!r}")
        if self.thought_steps is not None and self.thought_steps > len(self.steps):
            raise ValueError(f"thought_steps {self.thought_steps} is more than the {len(self.steps)} steps")
        if self.step_joins is not None and len(self.step_joins) != len(self.steps) - 1:
            raise ValueError(f"step_joins has {len(self.step_joins)} joins for {len(self.steps)} steps "
                             f"(one between each two)")
        return self

    @property
    def unfinished_thought(self) -> bool:
        """A thought cut (or stopped) before `</think>`: the response has no answer to grade or label."""
        return self.thought_finished is False


class GradeInput(Record):
    """What `grade` reads: an id, a gold answer, and the response as steps or whole text."""

    answer: str = Field(min_length=1)
    steps: list[str] | None = None
    response: str | None = None

    _coerce_answer = field_validator("answer", mode="before")(_answer_to_str)

    @model_validator(mode="after")
    def _has_text(self) -> "GradeInput":
        if self.steps is None and self.response is None:
            raise ValueError("needs `steps` or `response`")
        if self.steps is not None:
            _check_steps(self.steps)
        return self


class Graded(GradeInput):
    """What `grade` writes: its input with the grader's verdict (`grade_error` beside a null one)."""

    final_answer: str | None
    correct: bool | None


class MC(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    k: int = Field(ge=1)
    label: Literal["hard", "soft"]
    strategy: str
    scores: Annotated[list[float | None], AfterValidator(_check_probabilities)]
    first_error: int
    completions: int = Field(ge=0)
    generated_tokens: int = Field(ge=0)
    model: str


class Rollout(Response):
    answer: str = Field(min_length=1)
    mc: MC

    _mc_matches_steps = _verdict_fits_steps("mc", scores=True)


class Judgement(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    first_error: int | None
    votes: list[int | None]
    parse_failures: int = Field(ge=0)
    model: str
    prompt: str


class Judged(Response):
    judge: Judgement

    _judge_in_range = _verdict_fits_steps("judge", scores=False)


class Consensus(Record):
    problem: str
    steps: list[str]
    labels: list[bool]
    first_error: int
    mc: MC
    judge: Judgement

    @model_validator(mode="after")
    def _labels_match(self) -> "Consensus":
        _check_steps(self.steps)
        recovery = recovery_of(self, len(self.steps))
        if recovery is None:
            check_labels(self.labels, self.first_error, len(self.steps))
            return self
        # The recovery rule's record: every step kept, labelled by its slips and corrections.
        if self.first_error != recovery.first_error():
            raise ValueError(f"first_error = {self.first_error} is not the first slip of recovery "
                             f"({recovery.first_error()})")
        if self.labels != recovery.step_labels(len(self.steps)):
            raise ValueError("labels do not match recovery (a slip wrong, wrong while a slip is uncorrected, "
                             "right from its correction on)")
        return self

    @property
    def recovery(self) -> Recovery | None:
        return recovery_of(self, len(self.steps))


class PRMScores(BaseModel):
    """What `score` writes: each step's probability of being right under a PRM, and the first
    step below `threshold` (-1: none)."""

    model_config = ConfigDict(extra="allow", strict=True)

    scores: Annotated[list[float], AfterValidator(_check_probabilities)]
    first_error: int
    threshold: float
    model: str


class Scored(Response):
    prm: PRMScores

    _prm_matches_steps = _verdict_fits_steps("prm", scores=True)
