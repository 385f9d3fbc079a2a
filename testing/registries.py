"""Every registry of named kinds in prm_annotate (`prm_annotate.registry.Registry`), found in the
source, and the docs' tables of their names.

A doc's table of a registry's names is marked by an HTML comment on the line before it:

    <!-- names: prm_annotate.segmenting.SEGMENTERS -->     a table (or a list) written by hand:
    | name | ... |                                          its first column's `names` are the
                                                            registry's
    <!-- table: prm_annotate.strategies.zero_rules.ZERO_RULES -->   a table made from the
    | name | what it is | settings |                               registry (`Registry.table()`),
    <!-- /table -->                                                rewritten by this tool

    python -m testing.registries          # rewrite every generated table from its registry
    python -m testing.registries --check  # exit 1 if a table is stale (tests/test_registries.py does this)
"""
from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path
from typing import Any, Iterator

from testing.paths import REPO

PACKAGE = REPO / "prm_annotate"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NAMES = re.compile(r"^<!-- names: ([\w.]+) -->\n((?:(?:\||- |  ).*\n)+)", re.M)
TABLE = re.compile(r"^<!-- table: ([\w.]+) -->\n(.*?)^<!-- /table -->\n", re.M | re.S)


def registry_names(package: Path = PACKAGE) -> list[str]:
    """"module.NAME" of every module-level `NAME = Registry(...)` in the package's source."""
    found = []
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.parse(path.read_text(), str(path)).body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "Registry":
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found += [f"{module}.{t.id}" for t in targets if isinstance(t, ast.Name)]
    return found


def load(dotted: str) -> Any:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def first_column_names(table: str) -> list[str]:
    """The first backticked name of each row of a Markdown table (header and rule left out), or of
    each item of a list (`- `name` ...`)."""
    if table.startswith("- "):
        return [m.group(1) for row in table.splitlines() if (m := re.match(r"- `([^`]+)`", row))]
    rows = table.strip().splitlines()[2:]
    return [m.group(1) for row in rows if (m := re.match(r"\|\s*`([^`]+)`", row))]


def doc_tables(docs: list[Path] = DOCS) -> Iterator[tuple[Path, str, str, str]]:
    """(doc, "names" or "table", the registry's dotted name, the table's text) of every marked table."""
    for doc in docs:
        text = doc.read_text()
        for kind, pattern in (("names", NAMES), ("table", TABLE)):
            for m in pattern.finditer(text):
                yield doc, kind, m.group(1), m.group(2)


def stale(docs: list[Path] = DOCS) -> list[str]:
    """What the marked tables say against their registries: each difference, in words."""
    found = []
    for doc, kind, dotted, table in doc_tables(docs):
        where = f"{doc.name}: {dotted}"
        registry = load(dotted)
        if kind == "table":
            if table.strip() != registry.table():
                found.append(f"{where}: the generated table is stale (python -m testing.registries)")
            continue
        named = first_column_names(table)
        if sorted(named) != sorted(registry):
            found.append(f"{where}: the table names {sorted(named)}, the registry {sorted(registry)}")
    return found


def rewrite(docs: list[Path] = DOCS) -> list[Path]:
    """Every generated table made again from its registry; the docs changed."""
    changed = []
    for doc in docs:
        text = doc.read_text()
        made = TABLE.sub(lambda m: f"<!-- table: {m.group(1)} -->\n{load(m.group(1)).table()}\n<!-- /table -->\n", text)
        if made != text:
            doc.write_text(made)
            changed.append(doc)
    return changed


def main(argv: list[str]) -> int:
    if "--check" in argv:
        problems = stale()
        print("\n".join(problems) or "every table of names is its registry's")
        return 1 if problems else 0
    for doc in rewrite():
        print(f"rewrote {doc.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
