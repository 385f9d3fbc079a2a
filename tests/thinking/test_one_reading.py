"""The thinking room is the one reading of `<think>` tags: outside prm_annotate/thinking/ no code
spells a tag to find it (a string that is a tag or a pattern for one; a message naming a tag is
not a reading), except where it must not share that reading: the arithmetic world writes its traces
as a model would and checks them against its own truth (world/), and a judge's verdict refuses a
tag in any case or spelling (judging/styles.py)."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.test_layout import PACKAGE

ALLOWED = ("thinking/", "world/", "judging/styles.py")


def tag_spellings(package: Path = PACKAGE) -> list[str]:
    """Each string in code (docstrings aside) that is a tag or a pattern holding one (no white space
    in it), as "path:line", outside ALLOWED."""
    found = []
    for path in sorted(package.rglob("*.py")):
        inside = path.relative_to(package).as_posix()
        if inside.startswith(ALLOWED):
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        found += [f"{inside}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                  and "think>" in node.value.lower() and not any(c.isspace() for c in node.value.strip())]
    return found


def test_no_code_outside_the_thinking_room_spells_a_tag():
    assert tag_spellings() == []


def test_the_check_finds_a_tag_spelled_in_a_stage_but_not_in_a_docstring(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "stages").mkdir(parents=True)
    (pkg / "thinking").mkdir()
    (pkg / "thinking" / "tags.py").write_text('START = "<think>"\n')
    (pkg / "stages" / "a.py").write_text('"""Reads `</think>`."""\n\ndef f(t):\n    """<think>"""\n    return t.startswith("<THINK>") or "no </think> here"\n')
    assert tag_spellings(pkg) == ["stages/a.py:5"]
