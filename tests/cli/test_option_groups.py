"""option_groups: a dataclass of Typer options shown as loose options, handed over as one object."""
from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from prm_annotate.cli.option_groups import option_groups
from prm_annotate.settings import group, setting


@dataclass(frozen=True)
class Inner:
    a: int = setting(1, flags="--a", help="A, per {thing}.")
    b: int = setting(2, flags="--b", min=0, help="B.")


@dataclass(frozen=True)
class Plain:
    first: int = setting(0, flags="--first", help="First.")
    inner: Inner = group(Inner(), words={"thing": "widget"}, changes={"b": {"min": 5}})
    hidden: str = "kept"


@dataclass(frozen=True)
class Group:
    name: Annotated[str, typer.Option("--name", rich_help_panel="G", help="A required name.")]
    size: Annotated[int, typer.Option("--size", min=1, help="A size.")] = 4


def _app(seen: list) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    @option_groups
    def cmd(path: Annotated[str, typer.Argument()], flag: Annotated[bool, typer.Option("--flag")] = False, *,
            group: Group = Group(name="unused", size=8)) -> None:
        seen.append((path, flag, group))

    @app.command()
    @option_groups
    def other(*, group: Group) -> None:
        seen.append(group)

    return app


def test_fields_become_options_and_arrive_as_one_object():
    seen: list = []
    result = CliRunner().invoke(_app(seen), ["cmd", "p", "--name", "x", "--flag"])
    assert result.exit_code == 0, result.output
    assert seen == [("p", True, Group(name="x", size=8))]  # size: the command's default instance
    assert CliRunner().invoke(_app(seen), ["other", "--name", "y"]).exit_code == 0
    assert seen[-1] == Group(name="y", size=4)  # no default instance: the dataclass defaults


def test_option_checks_and_help_come_from_the_fields():
    app = _app([])
    assert CliRunner().invoke(app, ["cmd", "p", "--name", "x", "--size", "0"]).exit_code == 2
    assert CliRunner().invoke(app, ["other"]).exit_code == 2  # --name is required there
    help_text = CliRunner().invoke(app, ["cmd", "--help"], env={"COLUMNS": "200"}).output
    assert "--size" in help_text and "A required name." in help_text and "[default: 8]" in help_text
    assert "--group" not in help_text


def test_a_field_named_like_a_parameter_is_refused():
    with pytest.raises(TypeError, match="size"):
        @option_groups
        def clash(size: int = 1, *, group: Group) -> None:
            pass


def test_model_stage_options_keep_each_groups_fields_and_order():
    """The model stages' one group is the three it is made of, in their --help order, each handing on
    only its own fields: the run options, the EngineConfig (its seed the stage's), the executor."""
    from prm_annotate.cli.app import CommonRunOptions
    from prm_annotate.cli.executor_options import ExecutorOptions
    from prm_annotate.cli.model_stage import ModelStageOptions
    from prm_annotate.cli.rollout import RolloutStageOptions
    from prm_annotate.engines import EngineConfig
    from prm_annotate.pipeline.executors import LocalExecutor

    names = [f.name for f in dataclasses.fields(ModelStageOptions)]
    assert names == ["run", "engine", "executor"] == [f.name for f in dataclasses.fields(RolloutStageOptions)]
    opts = ModelStageOptions(run=CommonRunOptions(limit=3, batch_size=256, shard="1/4"),
                             engine=EngineConfig(model="m", dtype="float32"), executor=ExecutorOptions("local"))
    run = opts.prepare("in.jsonl", "out.jsonl", seed=7, format="generic", id_field="uid")
    assert run.engine == EngineConfig(model="m", dtype="float32", seed=7)
    assert run.opts == CommonRunOptions(limit=3, batch_size=256, shard="1/4").run_options(
        "in.jsonl", "out.jsonl", format="generic", id_field="uid")
    assert run.executor == LocalExecutor()
    engine = EngineConfig(model="m")
    assert (ModelStageOptions(engine=engine).run.batch_size, RolloutStageOptions(engine=engine).run.batch_size) == (
        256, 1024)


def test_a_plain_group_takes_its_settings_and_expands_a_nested_one_as_its_group_says():
    """A dataclass of the library (a stage config, EngineConfig) gives its options from its fields'
    settings, in field order, a nested dataclass expanded in place; a field without one keeps its
    default; the nested group's words fill its helps and its changes apply here only."""
    @option_groups
    def command(*, plain: Plain) -> Plain:
        return plain

    assert list(inspect.signature(command).parameters) == ["first", "a", "b"]
    assert command(b=5, a=4, first=3) == Plain(3, Inner(4, 5), "kept")
    app = typer.Typer()
    app.command()(command)
    assert CliRunner().invoke(app, ["--b", "4"]).exit_code == 2  # min 5 here
    assert "A, per widget." in CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output

    @option_groups
    def bare(*, inner: Inner) -> Inner:  # the same group elsewhere: its own declaration
        return inner

    app = typer.Typer()
    app.command()(bare)
    assert CliRunner().invoke(app, ["--b", "4"]).exit_code == 0
    assert "A, per {thing}." in CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output


@pytest.mark.parametrize(("command", "batch_size"), [("sample", 256), ("rollout", 1024), ("judge", 256)])
def test_model_stage_commands_show_their_own_batch_size_and_the_engine_panel(command, batch_size):
    from prm_annotate.cli import app

    help_text = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "250"}).output
    lines = help_text.splitlines()
    at = next(i for i, line in enumerate(lines) if "--batch-size" in line)
    assert f"[default: {batch_size}]" in " ".join(lines[at:at + 3])
    for option in ("--model", "--base-url", "--executor", "--ray-actors", "--limit", "--shard"):
        assert option in help_text
    assert "--stage-opts" not in help_text and "Engine" in help_text and "Executor" in help_text
