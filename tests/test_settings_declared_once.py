"""A setting is declared once: its help lives in its `setting(...)` (an `Attributes:` entry of its
class says only what the help does not), and each stage role's max_tokens default lives in
engines/sampling.py (`POLICY_BUDGET`, `JUDGE_BUDGET`)."""
from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib
import inspect
import pkgutil
import re

import prm_annotate
from prm_annotate.settings import Setting, declared
from testing.registries import PACKAGE


def _words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9 ]", "", text.lower()).split()


def restates(entry: str, help_text: str) -> bool:
    """The entry says what the help says: mostly the same words in the same order, or all of them
    inside the help."""
    a, b = _words(entry), _words(help_text)
    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.6 or " ".join(a) in " ".join(b)


def attributes(doc: str | None) -> dict[str, str]:
    """The `name: text` entries of a docstring's `Attributes:` block."""
    block = re.search(r"Attributes:\n(.*?)(?:\n\s*\n|\Z)", doc or "", re.S)
    found: dict[str, str] = {}
    name = None
    for line in (block.group(1) if block else "").splitlines():
        entry = re.match(r"(\s+)(\w+): (.*)", line)
        if entry and len(entry.group(1)) <= 8:
            name = entry.group(2)
            found[name] = entry.group(3)
        elif name:
            found[name] += " " + line.strip()
    return found


def setting_classes():
    seen = set()
    for info in pkgutil.walk_packages(prm_annotate.__path__, "prm_annotate."):
        if info.name.endswith("__main__") or ".world.models" in info.name:
            continue
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if inspect.isclass(cls) and dataclasses.is_dataclass(cls) and cls.__module__ == module.__name__ \
                    and cls not in seen:
                seen.add(cls)
                yield cls


def test_no_attributes_entry_restates_its_fields_help():
    found, checked = [], 0
    for cls in setting_classes():
        entries = attributes(cls.__doc__)
        for field in dataclasses.fields(cls):
            made = declared(field)
            if isinstance(made, Setting) and field.name in entries:
                checked += 1
                if restates(entries[field.name], made.text()):
                    found.append(f"{cls.__module__}.{cls.__name__}.{field.name}")
    assert checked > 20 and found == []


def test_the_restating_check_sees_a_copy_and_passes_an_addition():
    assert restates("softmax temperature; 0 is greedy.", "Softmax temperature; 0 is greedy.")
    assert restates("requests in flight at once over HTTP.", "Requests in flight at once (--base-url).")
    assert not restates("None: vLLM's own wait.", "Seconds to wait for the vLLM engine to start.")


def test_max_tokens_defaults_live_in_one_module():
    """No `Sampling(max_tokens=<number>)` nor `"max_tokens": <number>` outside engines/sampling.py
    (the official ProcessBench protocol's are its script's, fixed, not defaults)."""
    allowed = {"engines/sampling.py", "judging/processbench_official.py"}
    found = []
    for path in PACKAGE.rglob("*.py"):
        where = str(path.relative_to(PACKAGE))
        if where in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            numbers = []
            if isinstance(node, ast.keyword) and node.arg == "max_tokens":
                numbers.append(node.value)
            if isinstance(node, ast.Dict):
                numbers += [v for k, v in zip(node.keys, node.values)
                            if isinstance(k, ast.Constant) and k.value == "max_tokens"]
            found += [f"{where}:{n.lineno}" for n in numbers if isinstance(n, ast.Constant) and isinstance(n.value, int)]
    assert found == []
