"""A registry: the kinds of one thing a user chooses by name (`rollout --strategy`, `--segment`,
`export --format`, `reward-server --aggregate`, ...). Every named kind the project owns is one
`Registry`, and every entry has the same three things: its `name`, a one-line `summary`, and its
settings (`settings_of`: what a user may set on it, with the defaults). What an option's help lists,
what an unknown name is told and the docs' tables of names (`table`) are said here once, for every
registry built on it; tests/test_registries.py holds each registry and each table to this.

Adding a kind is its module plus one entry in its registry (the registry's module lists them in
the order the help shows them); nothing else names it.
"""
from __future__ import annotations

import dataclasses
import re
import sys
from typing import Any, Callable, Iterable, Mapping, TypeVar

from prm_annotate.errors import UsageError

Kind = TypeVar("Kind")

NAME = re.compile(r"[a-z][a-z0-9]*(?:[-_.][a-z0-9]+)*")  # what a name may look like: `soft-drop`, `qwen25-math-cot`


@dataclasses.dataclass(frozen=True)
class Named:
    """An entry for a kind that is a value rather than a class of its own (an aggregate's function,
    a prompt file, an executor's maker): the value with its name and summary.

    Attributes:
        value: the thing chosen (called by `__call__` when it is a function).
    """

    name: str
    summary: str
    value: Any

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.value(*args, **kwargs)


class Registry(dict[str, Kind]):
    """name -> kind, in the order given (the order the help lists them).

    Attributes:
        flag: the option that names a kind (`--strategy`), as an unknown name's error says it.
        purpose: what choosing a kind decides, the help's opening words.
        doc: where the kinds are described at length.
        listing: "summaries" (the help gives each name with its summary) or "names" (`a | b | c`,
            for long lists whose entries the doc describes).
        extra: names the option takes beside the kinds (`auto`), listed first.
        sort: the help lists the names in alphabetical order (the registry's order means something
            else, as input formats' detection order).
        renamed: old name -> its name now, still taken with a note on stderr (scripts keep working).
    """

    def __init__(self, flag: str, purpose: str, doc: str, kinds: Iterable[Kind] = (), *, listing: str = "summaries",
                 extra: tuple[str, ...] = (), sort: bool = False, renamed: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.flag, self.purpose, self.doc, self.listing, self.extra = flag, purpose, doc, listing, extra
        self.sort, self._noted = sort, set()
        self.renamed = dict(renamed or {})
        for kind in kinds:
            self.register(kind)

    def register(self, kind: Kind) -> Kind:
        """Add `kind` (after the others); a name is registered once."""
        name = getattr(kind, "name", None)
        if not isinstance(name, str) or not isinstance(getattr(kind, "summary", None), str):
            raise TypeError(f"{self.flag}: {kind!r} has no `name` and `summary`")
        if name in self:
            raise ValueError(f"{self.flag} {name!r} is registered already")
        self[name] = kind
        return kind

    def choices(self) -> list[str]:
        """Every name the option takes, as the help lists them."""
        return [*self.extra, *(sorted(self) if self.sort else self)]

    def help(self) -> str:
        """The option's help: each kind with its summary (or the names, for a "names" listing)."""
        if self.listing == "names":
            return f"{self.purpose}: {' | '.join(self.choices())} ({self.doc})."
        listed = ", ".join(f"{name} ({self.summary_of(name)})" for name in self)
        return f"{self.purpose}: {listed}. See {self.doc}."

    def where(self, test: Callable[[Kind], bool], sep: str = ", ") -> str:
        """The names of the kinds for which `test` holds, for messages and help."""
        return sep.join(name for name, kind in self.items() if test(kind))

    def canonical(self, name: Any) -> Any:
        """`name`, or the name now of a renamed one (said once on stderr)."""
        if name not in self.renamed:
            return name
        if name not in self._noted:
            self._noted.add(name)
            print(f"note: {self.flag} {name} is now called {self.renamed[name]} ({name} is still taken)", file=sys.stderr)
        return self.renamed[name]

    def named(self, name: Any) -> Kind:
        """The kind called `name`; an unknown name is a usage error listing the known ones."""
        name = self.canonical(name)
        if name not in self:
            raise UsageError(f"{self.flag} {name}: unknown (choose from {', '.join(self)})")
        return self[name]

    def summary_of(self, name: str) -> str:
        return str(getattr(self[name], "summary"))

    def settings_of(self, name: str) -> dict[str, Any]:
        """What a user may set on the kind, with its defaults: a kind that is a dataclass (a
        segmenter, a zero rule) its fields, another its `settings` mapping when it has one."""
        kind = self[name]
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            return {f.name: (f.default if f.default is not dataclasses.MISSING else None)
                    for f in dataclasses.fields(kind) if f.init}
        declared = getattr(kind, "settings", None)
        return dict(declared) if isinstance(declared, Mapping) else {}

    def table(self) -> str:
        """The kinds as a Markdown table (name, summary, settings), as the docs show them."""
        rows = ["| name | what it is | settings |", "|---|---|---|"]
        for name in self:
            settings = ", ".join(f"`{key}={value!r}`" for key, value in self.settings_of(name).items()) or "-"
            rows.append(f"| `{name}` | {self.summary_of(name)} | {settings} |")
        return "\n".join(rows)
