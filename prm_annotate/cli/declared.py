"""A declared setting (`prm_annotate.settings.Setting`) as a Typer option, remembering where it was
declared: option_groups makes a group's options with it, and a command's own parameter can take a
shared declaration with it (`StepSepOpt = typer_option(STEP_SEP, str)`).
"""
from __future__ import annotations

from typing import Annotated, Any, Mapping

import typer

from prm_annotate.settings import Setting


def typer_option(declared: Setting, annotation: Any, words: Mapping[str, str] = {}, origin: Any = None) -> Any:
    """`Annotated[annotation, typer.Option(...)]` of a declared setting; the option remembers where it
    was declared (`origin_of`): `origin`, else the declaration `declared` was made from, else itself."""
    flags = declared.flags
    keywords: dict[str, Any] = {"help": declared.text(words)}
    for name, value in (("min", declared.min), ("max", declared.max), ("envvar", declared.envvar),
                        ("show_default", declared.show_default), ("rich_help_panel", declared.panel),
                        ("callback", declared.parse)):
        if value is not None:
            keywords[name] = value
    if declared.argument:
        info = typer.Argument(**keywords)
    else:
        # A flag pair (--x/--no-x) shows no metavar, as Typer's own booleans.
        metavar = declared.metavar if declared.metavar is not None else ("" if any("/" in f for f in flags) else None)
        if metavar is not None:
            keywords["metavar"] = metavar
        info = typer.Option(*flags, **keywords)
    info.declared_at = declared.origin or origin or declared
    return Annotated[annotation, info]


def origin_of(info: Any) -> Any:
    """Where an option (typer's ParameterInfo) was declared: the dataclass field or the shared
    Setting it was made from, else the ParameterInfo itself (an `Annotated[..., typer.Option()]`
    written in cli/, one object however many commands take it)."""
    return getattr(info, "declared_at", info)
