"""Option groups: a dataclass whose fields are Typer options, declared once and shared by commands.

A command takes the group as one keyword-only parameter; `@option_groups` shows Typer the group's
fields in its place (so the command line is as if each command listed them) and hands the command
one instance built from them:

    @app.command()
    @option_groups
    def judge(input: InputArg, ..., *, config: JudgeConfig, stage_opts: ModelStageOptions) -> None:
        run = stage_opts.prepare(input, output, seed=config.run_seed)

A default instance of the group, e.g. `run_opts: CommonRunOptions = CommonRunOptions(batch_size=8)`,
gives the command its own defaults. The group parameter's own name never reaches the command line;
its fields' names must not clash with the command's other parameters.

A group whose fields are plain (a stage config) gets its options from the parameter's annotation,
`config: Annotated[SampleConfig, {"n": typer.Option(...), "sampling": {...}}]`: a field's option, or
for a field holding a dataclass (`sampling`) a dict of that dataclass's options, expanded in its place.
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
    groups: dict[str, tuple[type, dict]] = {}  # parameter -> (dataclass, its options)
    params: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        group, options = _group(param.annotation)
        if group is None:
            params.append(param)
            continue
        # A default instance (`run_opts: Group = Group(batch_size=8)`) sets this command's defaults.
        given = param.default if isinstance(param.default, group) else None
        params.extend(_fields(group, given, options))
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


def _group(annotation: Any) -> tuple[type | None, dict]:
    """(the dataclass, its options) of a group parameter's annotation, `Group` or
    `Annotated[Group, options]`; (None, {}) for any other parameter."""
    options: dict = {}
    if typing.get_origin(annotation) is typing.Annotated:
        annotation, options = annotation.__origin__, annotation.__metadata__[0]
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation, options
    return None, {}


def _fields(group: type, given: Any, options: dict) -> list[inspect.Parameter]:
    """The command-line parameters of a group's fields: a field's option from `options`, else its
    own annotation; a field holding a dataclass with its options in `options` (a dict) is expanded
    in its place."""
    hints = typing.get_type_hints(group, include_extras=True)
    params = []
    for field in dataclasses.fields(group):
        if given is not None:
            default = getattr(given, field.name)
        else:
            default = inspect.Parameter.empty if field.default is dataclasses.MISSING else field.default
        option = options.get(field.name)
        if isinstance(option, dict):
            params.extend(_fields(hints[field.name], None if default is inspect.Parameter.empty else default, option))
            continue
        annotation = hints[field.name] if option is None else Annotated[hints[field.name], option]
        # Keyword-only: a required field (--model) may then follow options with defaults.
        params.append(inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=annotation))
    return params


def _build(group: type, options: dict, values: dict[str, Any]) -> Any:
    """The group built from the command's values (taken out of `values`)."""
    hints = typing.get_type_hints(group)
    return group(**{field.name: _build(hints[field.name], options[field.name], values)
                    if isinstance(options.get(field.name), dict) else values.pop(field.name)
                    for field in dataclasses.fields(group)})
