"""A registry: the kinds of one thing a user chooses by name (`rollout --strategy`, `--segment`),
each a class with a `name` and a one-line `summary`. What the option's help lists and what an
unknown name is told are said here once, for every registry built on it."""
from __future__ import annotations

from typing import Any, Iterable, TypeVar

from prm_annotate.errors import UsageError

Kind = TypeVar("Kind", bound=type)


class Registry(dict[str, Kind]):
    """name -> kind, in the order given (the order the help lists them).

    Attributes:
        flag: the option that names a kind (`--strategy`), as an unknown name's error says it.
        purpose: what choosing a kind decides, the help's opening words.
        doc: where the kinds are described at length.
    """

    def __init__(self, flag: str, purpose: str, doc: str, kinds: Iterable[Kind]) -> None:
        super().__init__((kind.name, kind) for kind in kinds)  # type: ignore[attr-defined]
        self.flag, self.purpose, self.doc = flag, purpose, doc

    def help(self) -> str:
        """The option's help: each kind with its summary."""
        listed = ", ".join(f"{name} ({kind.summary})" for name, kind in self.items())  # type: ignore[attr-defined]
        return f"{self.purpose}: {listed}. See {self.doc}."

    def named(self, name: Any) -> Kind:
        """The kind called `name`; an unknown name is a usage error listing the known ones."""
        if name not in self:
            raise UsageError(f"{self.flag} {name}: unknown (choose from {', '.join(self)})")
        return self[name]
