"""Option groups: dataclasses whose fields are a command's options, declared once and shared by commands.

A command takes the group as one keyword-only parameter; `@option_groups` shows Typer the group's
fields in its place (so the command line is as if each command listed them) and hands the command
one instance built from them:

    @app.command()
    @option_groups
    def judge(input: InputArg, ..., *, config: Annotated[JudgeConfig, JUDGE_OPTIONS],
              stage_opts: ModelStageOptions) -> None:
        run = stage_opts.prepare(input, output, seed=config.run_seed)

A group's options are either its fields' own annotations (a group of cli/, e.g. `CommonRunOptions`,
whose fields are `Annotated[int, typer.Option(...)]`), or, for a plain dataclass of the library (a
stage config, `EngineConfig`), a dict beside it, `Annotated[Group, {field: typer.Option(...)}]`: the
fields it names are the options, in its order; the others keep their defaults. A field holding a
dataclass is a group of its own, expanded in its place: its options are the dict's entry for it (a
dict), or those of its annotation.

A default instance of the group, e.g. `run: CommonRunOptions = CommonRunOptions(batch_size=8)`,
gives the command its own defaults. The group parameter's own name never reaches the command line;
its fields' names must not clash with the command's other parameters.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from typing import Annotated, Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def option_groups(func: F) -> F:
    """Expand every dataclass-typed parameter of `func` into its fields for Typer."""
    signature = inspect.signature(func, eval_str=True)
    groups: dict[str, tuple[type, dict | None]] = {}  # parameter -> (dataclass, its options dict or None)
    params: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        group, options = group_of(param.annotation)
        if group is None:
            params.append(param)
            continue
        # A default instance (`run: Group = Group(batch_size=8)`) sets this command's defaults.
        given = param.default if isinstance(param.default, group) else None
        params.extend(_parameters(group, options, given))
        groups[param.name] = (group, options)
    flat = [p.name for p in params]
    clashes = {n for n in flat if flat.count(n) > 1}
    if clashes:
        raise TypeError(f"{func.__name__}: option group fields clash with parameters: {sorted(clashes)}")

    @functools.wraps(func)
    def command(**kwargs: Any) -> Any:
        from prm_annotate.cli.app import handled

        with handled():  # a group that refuses its options (a UsageError) is exit 2, as the command's own checks
            for name, (group, options) in groups.items():
                kwargs[name] = _build(group, options, kwargs)
        return func(**kwargs)

    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    # Typer also reads the annotations (get_type_hints): keep them in step with the signature.
    command.__annotations__ = {p.name: p.annotation for p in params}
    if signature.return_annotation is not inspect.Signature.empty:
        command.__annotations__["return"] = signature.return_annotation
    return command  # type: ignore[return-value]


def group_of(annotation: Any, options: dict | None = None) -> tuple[type | None, dict | None]:
    """(the dataclass, its options dict or None) of `Group` or `Annotated[Group, options]`;
    (None, None) for an annotation that is no group."""
    if typing.get_origin(annotation) is Annotated and isinstance(annotation.__metadata__[0], dict):
        annotation, options = annotation.__origin__, annotation.__metadata__[0]
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation, options
    return None, None


def _members(group: type, options: dict | None) -> list[tuple[str, Any, dict | None, Any]]:
    """(field name, its annotation or None, its own options if it is a group, its group or None)
    of the group's options, in their order."""
    hints = typing.get_type_hints(group, include_extras=True)
    names = list(options) if options is not None else [f.name for f in dataclasses.fields(group)]
    members = []
    for name in names:
        entry = options.get(name) if options is not None else None
        inner, inner_options = group_of(hints[name], entry if isinstance(entry, dict) else None)
        if inner is not None:
            members.append((name, None, inner_options, inner))
        else:
            members.append((name, hints[name] if entry is None else Annotated[hints[name], entry], None, None))
    return members


def _parameters(group: type, options: dict | None, given: Any) -> list[inspect.Parameter]:
    """The command-line parameters of a group's options; nested groups expanded in their place."""
    defaults = {f.name: f.default for f in dataclasses.fields(group)}
    params = []
    for name, annotation, inner_options, inner in _members(group, options):
        default = getattr(given, name) if given is not None else defaults[name]
        if inner is not None:
            params.extend(_parameters(inner, inner_options, None if default is dataclasses.MISSING else default))
            continue
        # Keyword-only: a required field (--model) may then follow options with defaults.
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                        default=inspect.Parameter.empty if default is dataclasses.MISSING else default))
    return params


def _build(group: type, options: dict | None, values: dict[str, Any]) -> Any:
    """The group built from the command's values (taken out of `values`); a field that is no option
    keeps its default."""
    return group(**{name: _build(inner, inner_options, values) if inner is not None else values.pop(name)
                    for name, _, inner_options, inner in _members(group, options)})
