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
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def option_groups(func: F) -> F:
    """Expand every dataclass-typed parameter of `func` into its fields for Typer."""
    signature = inspect.signature(func, eval_str=True)
    groups: dict[str, tuple[type, list[str]]] = {}  # parameter -> (dataclass, its field names)
    params: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        group = param.annotation
        if not (isinstance(group, type) and dataclasses.is_dataclass(group)):
            params.append(param)
            continue
        hints = typing.get_type_hints(group, include_extras=True)
        # A default instance (`run_opts: Group = Group(batch_size=8)`) sets this command's defaults.
        given = param.default if isinstance(param.default, group) else None
        names = []
        for field in dataclasses.fields(group):
            if given is not None:
                default = getattr(given, field.name)
            else:
                default = inspect.Parameter.empty if field.default is dataclasses.MISSING else field.default
            # Keyword-only: a required field (--model) may then follow options with defaults.
            params.append(inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY,
                                            default=default, annotation=hints[field.name]))
            names.append(field.name)
        groups[param.name] = (group, names)
    flat = [p.name for p in params]
    clashes = {n for n in flat if flat.count(n) > 1}
    if clashes:
        raise TypeError(f"{func.__name__}: option group fields clash with parameters: {sorted(clashes)}")

    @functools.wraps(func)
    def command(**kwargs: Any) -> Any:
        from prm_annotate.cli.app import handled

        with handled():  # a group that refuses its options (a UsageError) is exit 2, as the command's own checks
            for name, (group, names) in groups.items():
                kwargs[name] = group(**{n: kwargs.pop(n) for n in names})
        return func(**kwargs)

    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    # Typer also reads the annotations (get_type_hints): keep them in step with the signature.
    command.__annotations__ = {p.name: p.annotation for p in params}
    if signature.return_annotation is not inspect.Signature.empty:
        command.__annotations__["return"] = signature.return_annotation
    return command  # type: ignore[return-value]
