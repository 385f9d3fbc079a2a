"""Help reads as written paragraphs: no line of any command's help (the command list, each
command's text and options) breaks where the terminal had room for the next word, at 80 columns
and at 200. A docstring's line breaks are joined (cli/app.py `as_paragraphs`); Typer's panels
group the commands (label; train and score; evaluate; inspect; tools), as README's list does."""
from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.cli.app import PANELS, as_paragraphs
from testing.paths import REPO


def command_paths(typer_app: typer.Typer = app, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group of the app, as the words that reach it (the app itself first)."""
    found = [path]
    for info in typer_app.registered_commands:
        found.append((*path, info.name or info.callback.__name__.replace("_", "-")))
    for group in typer_app.registered_groups:
        found += command_paths(group.typer_instance, (*path, group.name))
    return found


# What Typer puts on a line of its own after a help text, and list items.
OWN_LINE = ("[default:", "[env var:", "[required]", "- ", "* ")


def unforced_breaks(text: str, columns: int) -> list[str]:
    """Lines that end although the next line's first word would have fitted after them: a line
    break the help text itself made. A continuation is a line whose text starts in the column where
    the line above has its last cell (a new row of a table starts at the box's edge)."""
    found = []
    lines = [line.rstrip() for line in text.splitlines()]
    for above, below in zip(lines, lines[1:]):
        boxed = below.startswith("│") and below.endswith("│") and above.startswith("│") and above.endswith("│")
        if boxed:
            above, below, width = above[1:-1].rstrip(), below[1:-1], len(below) - 2 - 1  # 1 space of padding
        elif above.startswith(("│", "╭", "╰")) or below.startswith(("│", "╭", "╰")):
            continue
        else:
            width = columns - 1
        lead = len(below) - len(below.lstrip())
        words = below.split()
        new_row = boxed and (lead <= 1 or lead <= 6 and words and words[0].startswith("-"))  # a table's next row
        if not words or new_row or below.lstrip().startswith(OWN_LINE):
            continue
        cell = above[lead:]
        if not cell.strip() or above[lead - 1:lead] not in (" ", "") or "  " in cell.strip():
            continue  # the line above has no text in this column, or more cells after it
        if len(above) + 1 + len(words[0]) <= width:
            found.append(f"{above.strip()!r} / {words[0]!r}")
    return found


@pytest.mark.parametrize("columns", [80, 200])
def test_no_help_text_breaks_mid_sentence(columns):
    runner = CliRunner()
    found = {}
    for path in command_paths():
        text = runner.invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)}, terminal_width=columns).output
        assert "Usage" in text, path
        breaks = unforced_breaks(text, columns)
        if breaks:
            found[" ".join(path) or "prm-annotate"] = breaks
    assert found == {}


def test_the_check_sees_a_hard_break():
    @app_with_command
    def cmd() -> None:
        """First words, then a hard
        break in the middle of a sentence."""

    text = CliRunner().invoke(cmd, ["--help"], env={"COLUMNS": "200"}, terminal_width=200).output
    assert unforced_breaks(text, 200) == []  # joined by as_paragraphs
    raw = typer.Typer()
    raw.command()(lambda: None)
    raw.registered_commands[0].help = "First words, then a hard\nbreak in the middle of a sentence.\n\nMore\nwords."
    text = CliRunner().invoke(raw, ["--help"], env={"COLUMNS": "200"}, terminal_width=200).output
    assert unforced_breaks(text, 200) != []


def app_with_command(function):
    from prm_annotate.cli.app import App

    made = App()
    made.command()(function)
    return made


def test_as_paragraphs_keeps_lists_and_paragraphs():
    assert as_paragraphs("a\nb\n\nc\n- d\n- e\n    code") == "a b\n\nc\n- d\n- e\n    code"


def test_help_shows_the_panels_in_order_and_readme_lists_the_commands_so():
    text = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "120"}, terminal_width=120).output
    shown = re.findall(r"^╭─ (.+?) ─", text, re.M)
    assert shown == ["Options", *PANELS]
    listed: dict[str, list[str]] = {}
    panel = None
    for line in text.splitlines():
        if (m := re.match(r"^╭─ (.+?) ─", line)):
            panel = m.group(1)
        elif (m := re.match(r"^│ ([a-z][a-z-]+) {2,}", line)) and panel in PANELS:
            listed.setdefault(panel, []).append(m.group(1))
    readme = (REPO / "README.md").read_text()
    for name, commands in listed.items():
        section = re.search(rf"^- \*\*{re.escape(name)}\*\*: (.*)$", readme, re.M)
        assert section, name
        assert re.findall(r"`([a-z-]+)`", section.group(1).split(" (")[0]) == commands, name
