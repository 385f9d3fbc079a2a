"""Every command's options as data: the snapshot `tests/cli/test_cli_snapshot.py` holds the CLI to.

Each option (and argument) of every command and subcommand of the Typer app, keyed
"command path :: its first long flag" ("argument N NAME" for an argument), with what a user's script relies on: its flags and their secondary
spellings (`--no-json`), default, environment variable, type (choices, range), required, flag or not,
multiple. Help texts are left out (they may be reworded); what they promise is in the other fields.

    python -m testing.cli_snapshot > tests/data/cli_options.json    # write today's snapshot
"""
from __future__ import annotations

import enum
import json
import sys
import typing
from typing import Any


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return repr(value)


# Typer 0.29 carries its own click (typer._click), whose parameters keep the annotation they came
# from (type_descriptor) and their range (min, max): they are read by what they have.
def _type(param: Any) -> dict[str, Any]:
    annotation = param.type_descriptor.annotation
    described: dict[str, Any] = {"name": _type_name(annotation), "min": param.min, "max": param.max}
    choices = _choices(annotation)
    if choices is not None:
        described["choices"] = choices
    return described


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _choices(annotation: Any) -> list | None:
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [m.value for m in annotation]
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    for arg in typing.get_args(annotation):  # Optional[Literal[...]]
        found = _choices(arg)
        if found is not None:
            return found
    return None


def describe(param: Any) -> dict[str, Any]:
    """What a script relies on in one parameter."""
    entry: dict[str, Any] = {
        "kind": param.param_type_name,
        "flags": sorted(param.opts),
        "secondary": sorted(param.secondary_opts),
        "default": _jsonable(param.default),
        "envvar": _jsonable(param.envvar),
        "type": _type(param),
        "required": param.required,
        "multiple": param.multiple,
        "nargs": param.nargs,
    }
    if param.param_type_name == "option":
        entry["is_flag"] = param.is_flag
        entry["count"] = param.count
    return entry


def key(param: Any, position: int) -> str:
    """An option by its first long flag (what a script writes; the Python name may change), an
    argument by its place and name."""
    if param.param_type_name == "argument":
        return f"argument {position} {param.name.upper()}"
    long = [flag for flag in param.opts if flag.startswith("--")]
    return (long or param.opts)[0]


def walk(command: Any, path: str = "") -> dict[str, dict[str, Any]]:
    """{"command path :: parameter": its description} of `command` and every subcommand."""
    found: dict[str, dict[str, Any]] = {}
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    for param in command.params:
        if param.name == "help":
            continue
        position = arguments.index(param) if param in arguments else 0
        found[f"{path} :: {key(param, position)}"] = describe(param)
    if hasattr(command, "commands"):
        for name, sub in sorted(command.commands.items()):
            found.update(walk(sub, f"{path} {name}".strip()))
    return found


def snapshot() -> dict[str, dict[str, Any]]:
    """Today's options of prm-annotate's Typer app."""
    import typer.main

    import prm_annotate.cli  # noqa: F401  (registers every command)
    from prm_annotate.cli.app import app

    return walk(typer.main.get_command(app))


if __name__ == "__main__":
    json.dump(snapshot(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
