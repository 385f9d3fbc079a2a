"""option_groups: a dataclass of Typer options shown as loose options, handed over as one object."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from prm_annotate.cli.option_groups import option_groups


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
