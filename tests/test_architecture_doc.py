"""docs/architecture.md, where it can be, is checked against the source: its table of rooms is
tests/test_layout.py's LAYERS (the same rooms in the same layers), every file it names in the
package exists, and each routine change tests/test_extension_points.py makes has its row."""
from __future__ import annotations

import re

from testing.paths import REPO
from tests.test_layout import LAYERS, PACKAGE

DOC = REPO / "docs" / "architecture.md"


# A row of the table of rooms: its layer, its room (`name/`, root, or a room's low part as the
# modules it holds, `thinking/tags.py`, `thinking/split.py`), and what it holds.
ROW = re.compile(r"\| (\d+) \| (`(\w+)/`|root|`\w+/\w+\.py`(?:, `\w+/\w+\.py`)*) \| (.*) \|$")


def table_rows(text: str) -> list[tuple[int, str, set[str], str]]:
    """(layer, room, what the row puts in the layer, what it holds) per row of the table of rooms:
    `name` for a subpackage, `room.module` for each module of a low part, the `name.py` modules of
    a "root" row (its room "")."""
    rows = []
    for line in text.splitlines():
        found = ROW.match(line)
        if not found:
            continue
        cell, holds = found.group(2), found.group(4)
        if found.group(3):
            room, names = found.group(3), {found.group(3)}
        elif cell == "root":
            room, names = "", {m for m in re.findall(r"`(\w+)\.py`", holds) if m != "__init__"}
        else:
            parts = re.findall(r"`(\w+)/(\w+)\.py`", cell)
            room, names = parts[0][0], {f"{r}.{m}" for r, m in parts}
        rows.append((int(found.group(1)), room, names, holds))
    return rows


def layer_table(text: str) -> dict[int, set[str]]:
    """layer -> the rooms (and rooms' low parts) the doc's table puts there."""
    table: dict[int, set[str]] = {}
    for layer, _, names, _ in table_rows(text):
        table.setdefault(layer, set()).update(names)
    return table


def test_the_layer_table_is_the_layout_tests_order():
    doc = layer_table(DOC.read_text())
    # LAYERS counts from 0 at the bottom; "" (the package's __init__) and __main__ are not rooms.
    expected = {layer: {room for room in rooms if room and room != "__main__"} for layer, rooms in enumerate(LAYERS)}
    expected = {layer: rooms for layer, rooms in expected.items() if rooms}
    assert doc == expected


def test_the_table_sees_a_room_in_the_wrong_layer():
    text = DOC.read_text()
    for row, elsewhere in (("| 8 | `stages/` |", "| 7 | `stages/` |"),
                       ("| 1 | `thinking/tags.py`, `thinking/split.py` |", "| 2 | `thinking/tags.py`, `thinking/split.py` |")):
        moved = text.replace(row, elsewhere)
        assert moved != text and layer_table(moved) != layer_table(text)


def test_every_package_file_the_doc_names_exists():
    named = set(re.findall(r"`((?:\w+/)+\w+\.py)`", DOC.read_text()))
    missing = sorted(n for n in named if not (PACKAGE / n).is_file()
                     and not (REPO / n).is_file() and not any(PACKAGE.glob(f"*/{n}")))
    assert missing == []


def test_each_routine_change_the_extension_test_makes_has_its_row():
    rows = {m.group(1) for m in re.finditer(r"^\| ([^|]+?) \| ", DOC.read_text(), re.M)}
    source = (REPO / "tests" / "test_extension_points.py").read_text()
    made = set(re.findall(r'routine_files\("([^"]+)"\)', source))
    assert {"a sampling parameter", "an engine option (a vLLM setting)", "a training option", "a stage"} <= made
    assert made <= rows


def room_rows(text: str) -> dict[str, str]:
    """room -> the text of its rows in the doc's table ("" for the root's modules)."""
    rows: dict[str, str] = {}
    for _, room, _, holds in table_rows(text):
        rows[room] = rows.get(room, "") + " " + holds
    return rows


def unnamed_modules(text: str, package=PACKAGE) -> list[str]:
    """Every module of the package its room's row does not name (as `name.py`, `name`, or its path
    inside the room, `inputs/gsm8k.py`); `__main__.py` may be named anywhere."""
    rows = room_rows(text)
    missing = []
    for path in sorted(package.rglob("*.py")):
        inside = path.relative_to(package)
        if path.name == "__init__.py" or "models" in inside.parts[:-1]:
            continue
        room = inside.parts[0] if len(inside.parts) > 1 else ""
        names = set(re.findall(r"`([^`]+)`", text if path.name == "__main__.py" else rows.get(room, "")))
        if not names & {path.name, path.stem, "/".join(inside.parts[1:])}:
            missing.append(str(inside))
    return missing


def test_the_doc_names_every_module_in_its_room():
    assert unnamed_modules(DOC.read_text()) == []


def test_the_module_check_sees_a_module_left_out():
    text = DOC.read_text()
    assert "`truncation.py`" in text
    assert unnamed_modules(text.replace("`truncation.py`", "truncation")) == ["export/truncation.py"]
