"""The package's layout rules, read from its source (no import of it, so this is quick):

- no import cycle between prm_annotate's modules (nor lab's, nor testing's), counting imports inside
  functions too (a lazy import hides a cycle at start-up but it is still two modules that need each
  other);
- the product imports nothing from beside it (lab/, testing/, tests/, benchmarks/).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "prm_annotate"


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
