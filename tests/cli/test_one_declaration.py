"""No setting is written in two places: every option of every command walks back to one declaration
(a config dataclass's field, a shared Setting such as `steps.STEP_SEP`, or one `Annotated` option of
cli/ that every command taking it shares), and a flag spelled by two declarations is a copy unless
it means different things on different commands (listed below, with what each means).

(No `from __future__ import annotations` here: the test's own commands keep their annotations as objects.)"""

import dataclasses
import importlib
import inspect
import typing
from collections import defaultdict
from typing import Annotated, Any

import typer
import typer.main

from prm_annotate.cli.declared import origin_of

# Flags that mean different things on different commands: how many declarations each has, and why.
MEANINGS: dict[str, tuple[int, str]] = {
    "--output": (4, "a stage's output file; train's checkpoint directory; export's rows (a file or an hf directory); "
                    "report's HTML page"),
    "--format": (3, "the input format of the stages; export's output format; train's data format"),
    "--seed": (5, "the run seed of sampling; train's initialisation and shuffle; evaluate's tuning sample; "
                  "the world report's problems and stages; report's browsing sample"),
    "--threshold": (3, "rollout's hard-label threshold; score's first-error threshold; evaluate's"),
    "--gold": (2, "evaluate's many gold files; bon's and compare's one"),
    "--step-sep": (2, "the records' separator; export's text between tagged steps (its format's own by default)"),
    "--system-prompt": (3, "sample's prompt; the prompt rollout continues under (default: each response's own); "
                           "the PRM's system turn in train"),
    "--judged": (2, "rollout's verify input; export's critic source"),
    "--votes": (2, "judge's verdicts per response; export's critiques to keep"),
    "--soft": (2, "train on MC scores; export MC scores as labels"),
    "--max-length": (2, "train's tokens per response; export's trainer length check"),
    "--batch-size": (2, "records at a time through a stage; responses per optimiser step in train"),
    "--resume": (2, "train from its last checkpoint; the world report from its files"),
}

def declarations(app: typer.Typer, path: str = "") -> dict[str, dict[Any, list[str]]]:
    """flag -> {declaration: the commands whose option it is} over `app`'s commands and subcommands.

    The declaration is read from the command function's signature, where an `Annotated` option of
    cli/ is still the one object every command shares (Typer copies it for each click option)."""
    found: dict[str, dict[Any, list[str]]] = defaultdict(lambda: defaultdict(list))
    for info in app.registered_commands:
        name = info.name or info.callback.__name__.replace("_", "-")
        where = f"{path} {name}".strip()
        click_command = typer.main.get_command_from_info(info, pretty_exceptions_short=False,
                                                         rich_markup_mode=None)
        flags = {p.name: p.opts for p in click_command.params if p.param_type_name == "option"}
        for param in inspect.signature(info.callback, eval_str=True).parameters.values():
            annotation = param.annotation
            if typing.get_origin(annotation) is not Annotated or param.name not in flags:
                continue
            [option] = [m for m in annotation.__metadata__ if isinstance(m, typer.models.ParameterInfo)]
            for flag in flags[param.name]:
                if flag.startswith("--"):
                    found[flag][_key(origin_of(option))].append(where)
    for group in app.registered_groups:
        for flag, origins in declarations(group.typer_instance, f"{path} {group.name}".strip()).items():
            for origin, paths in origins.items():
                found[flag][origin].extend(paths)
    return found


def _key(origin: Any) -> Any:
    return origin if isinstance(origin, dataclasses.Field) else id(origin)


def copies(app: typer.Typer, meanings: dict[str, tuple[int, str]]) -> list[str]:
    """Flags declared more often than their number of meanings (1 unless listed)."""
    return [f"{flag}: {len(origins)} declarations ({sorted(sorted(p) for p in origins.values())})"
            for flag, origins in sorted(declarations(app).items())
            if len(origins) > meanings.get(flag, (1, ""))[0]]


def test_every_option_walks_back_to_one_declaration():
    import prm_annotate.cli  # noqa: F401
    from prm_annotate.cli.app import app

    assert copies(app, MEANINGS) == []
    found = declarations(app)
    # The shared ones are one declaration on every command that takes them.
    for flag, least in (("--json", 5), ("--quiet", 6), ("--label-field", 3), ("--model", 5), ("--temperature", 3),
                        ("--max-model-len", 5), ("--executor", 3)):
        assert len(found[flag]) == 1 or flag == "--executor", flag
        assert sum(len(paths) for paths in found[flag].values()) >= least, flag
    # Each listed meaning is still there (a meaning merged away must leave the list).
    assert {flag: len(found[flag]) for flag in MEANINGS} == {flag: n for flag, (n, _) in MEANINGS.items()}


# The options still written in their command (each used by that command alone, so declared once):
# what a command reads of its own files, no setting of the library's.
LOCAL = {"compare field", "merge input", "merge expect_per_input",
         "models prepare cache_dir", "models prepare force"}


def shared_cli_options() -> set[int]:
    """The `Annotated` options cli/ declares once for every command that takes them (ids)."""
    found = set()
    for module in ("prm_annotate.cli.app", "prm_annotate.cli.executor_options"):
        for value in vars(importlib.import_module(module)).values():
            if typing.get_origin(value) is Annotated:
                found.update(id(m) for m in value.__metadata__ if isinstance(m, typer.models.ParameterInfo))
    return found


def test_every_option_is_a_config_field_a_shared_declaration_or_its_commands_own():
    """Every option of every command (arguments aside) comes from a dataclass field's setting, a
    shared Setting, or one shared cli/ option; the few left in their command are listed."""
    import prm_annotate.cli  # noqa: F401
    from prm_annotate.cli.app import app
    from prm_annotate.settings import Setting

    shared, local = shared_cli_options(), set()

    def walk(typer_app: typer.Typer, path: str = "") -> None:
        for info in typer_app.registered_commands:
            where = f"{path} {info.name or info.callback.__name__.replace('_', '-')}".strip()
            for param in inspect.signature(info.callback, eval_str=True).parameters.values():
                if typing.get_origin(param.annotation) is not Annotated:
                    continue
                [option] = [m for m in param.annotation.__metadata__ if isinstance(m, typer.models.ParameterInfo)]
                origin = origin_of(option)
                if isinstance(origin, (dataclasses.Field, Setting)) or id(origin) in shared:
                    continue
                if isinstance(option, typer.models.OptionInfo):
                    local.add(f"{where} {param.name}")
        for group in typer_app.registered_groups:
            walk(group.typer_instance, f"{path} {group.name}".strip())

    walk(app)
    assert local == LOCAL


def test_the_check_finds_a_hand_added_copy():
    """Baseline: two commands sharing cli/app.py's --json and --label-field pass; a third command with
    its own hand-written --json (the same flag, the same meaning) is a copy; a listed meaning is not."""
    from prm_annotate.cli.app import JsonOpt, LabelFieldOpt

    app = typer.Typer()

    @app.command()
    def one(as_json: JsonOpt = False, label_field: LabelFieldOpt = "label") -> None:
        pass

    @app.command()
    def two(as_json: JsonOpt = False) -> None:
        pass

    assert copies(app, {}) == []

    @app.command()
    def three(as_json: Annotated[bool, typer.Option("--json/--no-json", help="Print JSON.")] = False) -> None:
        pass

    found = copies(app, {})
    assert len(found) == 1 and found[0].startswith("--json: 2 declarations") and "three" in found[0]
    assert copies(app, {"--json": (2, "two meanings")}) == []
