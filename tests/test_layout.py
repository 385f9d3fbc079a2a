"""The package's layout rules, read from its source (no import of it, so this is quick):

- imports point down: every module of prm_annotate belongs to a room (a subpackage, or a module at
  the package root), the rooms stand in the layers of `LAYERS`, and a module imports only from its
  own room or from rooms of lower layers — counting imports inside functions too (a lazy import
  hides a dependency at start-up, but the two rooms still need each other); a room's low part
  (modules LAYERS names one by one, below the rest of their room) imports nothing from the rest;
- no import cycle between prm_annotate's modules (nor lab's, nor testing's);
- the product imports nothing from beside it (lab/, testing/, tests/, benchmarks/);
- no module below the command line (cli/) imports typer: the configs are plain dataclasses.

docs/architecture.md draws the same layers.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "prm_annotate"

# Rooms of prm_annotate, lowest layer first. "" is the package's own __init__ (its version). A room
# may have a low part: modules named "room.module" stand in a lower layer than the rest of their room
# (rooms below need them), and the room's __init__ stands with its lowest part, since importing any
# of its modules runs it.
LAYERS: list[set[str]] = [
    {"", "errors", "settings", "recovery.labels"},
    {"records", "steps", "boxed", "registry", "thinking.tags", "thinking.split"},
    {"io", "engines"},
    {"grading", "judging", "strategies", "segmenting"},
    {"evaluation", "pipeline"},
    {"thinking", "recovery"},
    {"reports", "export"},
    {"prm"},
    {"stages"},
    {"world", "reward"},
    {"cli"},
    {"__main__"},
]


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: set[str], package_dir: Path = PACKAGE) -> tuple[set[str], set[str]]:
    """(package modules `path` imports, top-level names of everything it imports). `from a import b`
    counts as importing `a.b` when that is a module, else `a`."""
    here = module_name(path, package_dir)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    inside, tops = set(), set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for name in names:
            tops.add(name.split(".")[0])
            # `import a.b.c` also runs a and a.b: the nearest package module is what this one needs.
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != here:
                inside.add(name)
    return inside, tops


def import_graph(package_dir: Path = PACKAGE) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """module -> package modules it imports, and module -> top-level names it imports."""
    paths = {module_name(p, package_dir): p for p in package_dir.rglob("*.py")}
    graph, tops = {}, {}
    for name, path in paths.items():
        graph[name], tops[name] = imported_modules(path, set(paths), package_dir)
    return graph, tops


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


@pytest.mark.parametrize("folder, some_module", [("prm_annotate", "prm_annotate.cli.model_stage"),
                                                 ("lab", "lab.world.measure"), ("testing", "testing.vllm_server")])
def test_no_import_cycle(folder, some_module):
    """The product, and the lab tools and test equipment beside it."""
    graph, _ = import_graph(PACKAGE.parent / folder)
    assert some_module in graph  # the walk found the folder's modules
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_lazy_import_cycle(tmp_path):
    """The finder itself, on a two-module package whose cycle is made by a function-level import."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import g\n")
    (pkg / "b.py").write_text("def g():\n    from pkg import a\n")
    graph, _ = import_graph(pkg)
    assert find_cycle(graph) in (["pkg.a", "pkg.b", "pkg.a"], ["pkg.b", "pkg.a", "pkg.b"])
    del graph["pkg.b"]
    assert find_cycle(graph) is None


def test_the_product_imports_nothing_from_beside_it():
    _, tops = import_graph()
    beside = {"lab", "testing", "tests", "benchmarks", "conftest"}
    offenders = {name: sorted(t & beside) for name, t in tops.items() if t & beside}
    assert not offenders


# The command line's library: only the rooms of the command line may import it.
CLI_ONLY = {"typer": {"cli", "__main__"}}


def cli_imports_below_the_cli(tops: dict[str, set[str]], package: str = "prm_annotate") -> list[str]:
    """Every module outside the command line's rooms that imports a command-line library."""
    return sorted(f"{module} imports {library}" for module, names in tops.items() for library, rooms in CLI_ONLY.items()
                  if library in names and room_of(module, package) not in rooms)


def test_no_module_below_the_command_line_imports_typer():
    """Stage configs, engines and the rest are plain Python; their options are the CLI's (cli/)."""
    graph, tops = import_graph()
    assert {"prm_annotate.cli.app", "prm_annotate.stages.config"} <= set(graph)
    assert "typer" in tops["prm_annotate.cli.app"]  # the check sees typer where it is
    assert cli_imports_below_the_cli(tops) == []


def test_the_typer_check_finds_a_lazy_typer_import_below_the_cli(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cli" / "__init__.py").write_text("import typer\n")
    (pkg / "config.py").write_text("def options():\n    from typer import Option\n")
    _, tops = import_graph(pkg)
    assert cli_imports_below_the_cli(tops, "pkg") == ["pkg.config imports typer"]


def room_of(module: str, package: str = "prm_annotate") -> str:
    """`prm_annotate.io.jsonl` -> "io", `prm_annotate.errors` -> "errors", `prm_annotate` -> ""."""
    return module.removeprefix(package).lstrip(".").split(".")[0]


def part_of(module: str, layers: list[set[str]], package: str = "prm_annotate") -> str:
    """The entry of `layers` a module stands under: its room, or the room's low part that names it
    (`prm_annotate.thinking.tags` -> "thinking.tags" where LAYERS lists it)."""
    inside = module.removeprefix(package).lstrip(".")
    parts = {name for rooms in layers for name in rooms if "." in name}
    if inside and any(name.startswith(inside + ".") for name in parts):
        return inside + ".__init__"  # a room with a low part: its __init__, which stands with that part
    return next((name for name in sorted(parts, key=len, reverse=True)
                 if inside == name or inside.startswith(name + ".")), room_of(module, package))


def layer_of(module: str, layers: list[set[str]], package: str = "prm_annotate") -> int | None:
    """The layer a module stands in (None: in no layer); a room's __init__ with its lowest part."""
    layer = {name: i for i, names in enumerate(layers) for name in names}
    part = part_of(module, layers, package)
    if part.endswith(".__init__"):
        room = part.removesuffix(".__init__")
        return min(i for name, i in layer.items() if name == room or name.startswith(room + "."))
    return layer.get(part)


def layering_violations(graph: dict[str, set[str]], layers: list[set[str]], package: str = "prm_annotate") -> list[str]:
    """Every import of a room from a room of its own layer or a higher one, of a room's part from a
    part of a higher layer, and every room that stands in no layer."""
    found = []
    for module, imports in sorted(graph.items()):
        here, at = room_of(module, package), layer_of(module, layers, package)
        if at is None:
            found.append(f"{module}: the room {here!r} is in no layer")
            continue
        for other in sorted(imports):
            there, other_at = room_of(other, package), layer_of(other, layers, package)
            if other_at is None:
                continue
            if other_at > at or (there != here and other_at == at):
                found.append(f"{module} imports {other} ({part_of(other, layers, package)!r} is not below "
                             f"{part_of(module, layers, package)!r})")
    return found


def test_imports_point_down_the_declared_layers():
    graph, _ = import_graph()
    assert {part_of(m, LAYERS).removesuffix(".__init__") for m in graph} == set().union(*LAYERS), \
        "LAYERS must name every room, and only rooms"
    assert layering_violations(graph, LAYERS) == []


def test_the_layering_check_finds_an_import_that_points_up_and_a_room_left_out(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("def f():\n    from pkg.high import g\n")
    (pkg / "high.py").write_text("from pkg.low.a import f\n")
    (pkg / "side.py").write_text("")
    graph, _ = import_graph(pkg)
    layers = [{"", "low"}, {"high"}]
    assert layering_violations(graph, layers, "pkg") == [
        "pkg.low.a imports pkg.high ('high' is not below 'low')", "pkg.side: the room 'side' is in no layer"]
    (pkg / "low" / "a.py").write_text("")
    (pkg / "side.py").unlink()
    assert layering_violations(*import_graph(pkg)[:1], layers, "pkg") == []


def test_the_layering_check_holds_a_rooms_low_part_below_the_rest_of_it(tmp_path):
    """A room whose low part stands below another room: the low part may not import the room's
    upper part, the room below may import the low part only, and the room's __init__ (run by any
    import of the low part) stands with the low part."""
    pkg = tmp_path / "pkg"
    (pkg / "r").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "r" / "__init__.py").write_text("")
    (pkg / "r" / "low.py").write_text("")
    (pkg / "r" / "high.py").write_text("from pkg.mid import g\nfrom pkg.r.low import f\n")
    (pkg / "mid.py").write_text("from pkg.r.low import f\n")
    layers = [{"", "r.low"}, {"mid"}, {"r"}]
    assert layering_violations(import_graph(pkg)[0], layers, "pkg") == []
    (pkg / "r" / "low.py").write_text("def f():\n    from pkg.r import high\n")
    (pkg / "mid.py").write_text("from pkg.r.high import h\n")
    (pkg / "r" / "__init__.py").write_text("from pkg.r.high import h\n")
    assert layering_violations(import_graph(pkg)[0], layers, "pkg") == [
        "pkg.mid imports pkg.r.high ('r' is not below 'mid')",
        "pkg.r imports pkg.r.high ('r' is not below 'r.__init__')",
        "pkg.r.low imports pkg.r.high ('r' is not below 'r.low')"]


LONGEST = 80  # lines of a product function, decorators and docstring included
WHY_ONE = "one function because"  # what a longer function's comment must say


def long_functions(package_dir: Path = PACKAGE) -> list[str]:
    """Functions over LONGEST lines whose body does not say (a comment or docstring with WHY_ONE) why
    they must be one."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if node.end_lineno - start + 1 > LONGEST and \
                        WHY_ONE not in "\n".join(lines[start - 1:node.end_lineno]).lower():
                    found.append(f"{path.relative_to(package_dir.parent)}:{node.lineno} {node.name}")
    return found


def test_no_product_function_is_longer_than_80_lines_without_saying_why():
    assert long_functions() == []


def test_the_length_check_finds_a_long_function_and_accepts_one_that_says_why(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(LONGEST))
    (pkg / "a.py").write_text(f"def long():\n{body}\n\ndef short():\n    pass\n")
    assert long_functions(pkg) == ["pkg/a.py:1 long"]
    (pkg / "a.py").write_text(f"def long():\n    # One function because the steps share every local.\n{body}")
    assert long_functions(pkg) == []
