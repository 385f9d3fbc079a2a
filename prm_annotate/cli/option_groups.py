"""Option groups: dataclasses whose fields are a command's options, declared once and shared by commands.

A command takes the group as one keyword-only parameter; `@option_groups` shows Typer the group's
fields in its place (so the command line is as if each command listed them) and hands the command
one instance built from them:

    @app.command()
    @option_groups
    def judge(input: InputArg, ..., *, config: JudgeConfig, stage_opts: ModelStageOptions) -> None:
        run = stage_opts.prepare(input, output, seed=config.run_seed)

A group's options are its fields: a field of a plain dataclass of the library (a stage config,
`EngineConfig`, `Sampling`) declared with `prm_annotate.settings.setting` is the option its metadata
says (flags, bounds, help); a field of a group of cli/ (e.g. `CommonRunOptions`) annotated
`Annotated[int, typer.Option(...)]` is that option; any other field is no option and keeps its
default. A field holding a dataclass is a group of its own, expanded in its place, read as its
`settings.group(...)` metadata (or `Annotated[Group, settings.Group(...)]`) says: the words of its
helps, the changed keywords of a few fields, the fields left out.

A default instance of the group, e.g. `run: CommonRunOptions = CommonRunOptions(batch_size=8)`,
gives the command its own defaults. The group parameter's own name never reaches the command line;
its fields' names must not clash with the command's other parameters.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from typing import Annotated, Any, Callable, Mapping, TypeVar

import typer

from prm_annotate.cli.declared import typer_option
from prm_annotate.settings import Group, Setting, declared

F = TypeVar("F", bound=Callable[..., Any])


def option_groups(func: F) -> F:
    """Expand every dataclass-typed parameter of `func` into its fields for Typer."""
    signature = inspect.signature(func, eval_str=True)
    groups: dict[str, tuple[type, Group | None]] = {}  # parameter -> (dataclass, how it reads here)
    params: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        group, spec = group_of(param.annotation)
        if group is None:
            params.append(param)
            continue
        # A default instance (`run: Group = Group(batch_size=8)`) sets this command's defaults.
        given = param.default if isinstance(param.default, group) else None
        params.extend(_parameters(group, spec, given))
        groups[param.name] = (group, spec)
    flat = [p.name for p in params]
    clashes = {n for n in flat if flat.count(n) > 1}
    if clashes:
        raise TypeError(f"{func.__name__}: option group fields clash with parameters: {sorted(clashes)}")

    @functools.wraps(func)
    def command(**kwargs: Any) -> Any:
        from prm_annotate.cli.app import handled

        with handled():  # a group that refuses its options (a UsageError) is exit 2, as the command's own checks
            for name, (group, spec) in groups.items():
                kwargs[name] = _build(group, spec, kwargs)
        return func(**kwargs)

    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    # Typer also reads the annotations (get_type_hints): keep them in step with the signature.
    command.__annotations__ = {p.name: p.annotation for p in params}
    if signature.return_annotation is not inspect.Signature.empty:
        command.__annotations__["return"] = signature.return_annotation
    return command  # type: ignore[return-value]


def group_of(annotation: Any, spec: Group | None = None) -> tuple[type | None, Group | None]:
    """(the dataclass, how it reads here or None) of `Group` or `Annotated[Group, settings.Group(...)]`;
    (None, None) for an annotation that is no group."""
    if typing.get_origin(annotation) is Annotated and isinstance(annotation.__metadata__[0], Group):
        annotation, spec = annotation.__origin__, annotation.__metadata__[0]
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation, spec
    return None, None


def _is_typer_option(annotation: Any) -> bool:
    return typing.get_origin(annotation) is Annotated and any(
        isinstance(m, typer.models.ParameterInfo) for m in annotation.__metadata__)


def members(group: type, spec: Group | None = None,
            words: Mapping[str, str] = {}) -> list[tuple[str, Any, Group | None, Any]]:
    """(field name, its option's annotation or None, how a nested group reads, its group or None) of
    the group's options, in field order; fields that are no option are left out."""
    hints = typing.get_type_hints(group, include_extras=True)
    words = {**words, **(spec.words if spec is not None else {})}
    found = []
    for field in dataclasses.fields(group):
        name, hint = field.name, hints[field.name]
        if spec is not None and name in spec.exclude:
            continue
        meta = declared(field)
        inner, inner_spec = group_of(hint, meta if isinstance(meta, Group) else None)
        if inner is not None:
            merged = Group(words={**words, **(inner_spec.words if inner_spec else {})},
                           changes=inner_spec.changes if inner_spec else {},
                           exclude=inner_spec.exclude if inner_spec else ())
            found.append((name, None, merged, inner))
        elif _is_typer_option(hint):
            found.append((name, hint, None, None))
        elif isinstance(meta, Setting):
            setting = spec.setting(name, meta) if spec is not None else meta
            found.append((name, typer_option(setting, hint, words, origin=field), None, None))
    return found


def _parameters(group: type, spec: Group | None, given: Any) -> list[inspect.Parameter]:
    """The command-line parameters of a group's options; nested groups expanded in their place."""
    defaults = {f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
                for f in dataclasses.fields(group)}
    params = []
    for name, annotation, inner_spec, inner in members(group, spec):
        default = getattr(given, name) if given is not None else defaults[name]
        if inner is not None:
            params.extend(_parameters(inner, inner_spec, None if default is dataclasses.MISSING else default))
            continue
        # Keyword-only: a required field (--model) may then follow options with defaults.
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                        default=inspect.Parameter.empty if default is dataclasses.MISSING else default))
    return params


def _build(group: type, spec: Group | None, values: dict[str, Any]) -> Any:
    """The group built from the command's values (taken out of `values`); a field that is no option
    keeps its default."""
    return group(**{name: _build(inner, inner_spec, values) if inner is not None else values.pop(name)
                    for name, _, inner_spec, inner in members(group, spec)})
