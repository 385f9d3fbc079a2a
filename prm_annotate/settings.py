"""A setting declared once, where the library keeps it: a config dataclass's field carries its
default, its bounds, its command-line flags and its one-sentence help as field metadata.

    @dataclass(frozen=True)
    class RolloutConfig:
        k: int = setting(8, flags=("-k", "--k"), min=1, help="Completions per step.")

`cli/option_groups.py` makes the command-line options from these fields (nothing here imports
typer); a field without a `setting` is no option and keeps its default. A field holding a dataclass
is a group of options of its own; `group(...)` says how it reads in this place: the words its helps
take (`{output}`: "Tokens per {output}."), a few fields' changed keywords, the fields left out.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Union

KEY = "prm_annotate.setting"  # the field metadata's key for a Setting or a Group

Help = Union[str, Callable[[], str]]


@dataclass(frozen=True)
class Setting:
    """How a field reads on the command line. `help` is one sentence, or a function giving it (a
    registry's names, read when the command line is built); `flags` as Typer takes them
    (`"--share-prefixes/--no-share-prefixes"`); `parse` turns the text given into the value (e.g.
    backslash escapes decoded); `show_default` a text shown for the default, or False."""

    help: Help
    flags: tuple[str, ...]
    min: Optional[float] = None
    max: Optional[float] = None
    envvar: Optional[str] = None
    show_default: Union[bool, str, None] = None
    metavar: Optional[str] = None
    panel: Optional[str] = None
    parse: Optional[Callable[[Any], Any]] = None
    argument: bool = False  # a positional argument (no flags) instead of an option
    # The declaration this one was made from (`declare`), so a check can walk an option back to it.
    origin: Any = dataclasses.field(default=None, compare=False, repr=False)

    def text(self, words: Mapping[str, str] = {}) -> str:
        """The help, with the words of the place it is used in (`{output}` -> "response")."""
        text = self.help() if callable(self.help) else self.help
        for word, value in words.items():
            text = text.replace("{" + word + "}", value)
        return text


@dataclass(frozen=True)
class Group:
    """How a nested dataclass's settings read in one place: `words` fill its helps, `changes` replace
    a field's Setting keywords (`{"top_p": {"show_default": "1.0"}}`), `exclude` leaves fields out
    (they keep their defaults)."""

    words: Mapping[str, str] = dataclasses.field(default_factory=dict)
    changes: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    exclude: tuple[str, ...] = ()

    def setting(self, name: str, declared: Setting) -> Setting:
        """The field's Setting as it reads here."""
        return dataclasses.replace(declared, **self.changes[name]) if name in self.changes else declared


def setting(default: Any = dataclasses.MISSING, *, help: Help, flags: tuple[str, ...] | str,
            default_factory: Any = dataclasses.MISSING, **how: Any) -> Any:
    """A dataclass field that is a setting (see `Setting` for `how`: min, max, envvar, show_default,
    metavar, panel, parse)."""
    flags = (flags,) if isinstance(flags, str) else tuple(flags)
    return dataclasses.field(default=default, default_factory=default_factory,
                             metadata={KEY: Setting(help=help, flags=flags, **how)})


def declare(declared: Setting, default: Any = dataclasses.MISSING, **changes: Any) -> Any:
    """A dataclass field that is a setting declared elsewhere once (`steps.STEP_SEP`), with this
    field's default; `changes` replace its keywords here."""
    made = dataclasses.replace(declared, **{"origin": declared.origin or declared, **changes})
    return dataclasses.field(default=default, metadata={KEY: made})


def setting_of(cls: type, name: str) -> Setting:
    """The Setting of `cls`'s field `name`, for `declare` elsewhere (its origin: that field)."""
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    made = declared(field)
    if not isinstance(made, Setting):
        raise TypeError(f"{cls.__name__}.{name} is no setting")
    return dataclasses.replace(made, origin=made.origin or field)


def borrow(cls: type, name: str, **changes: Any) -> Any:
    """A field that passes on `cls`'s setting `name` (its flags, help and default) from a group of
    another room (cli/'s `CommonRunOptions` from `RunOptions`): declared once, where `cls` keeps it."""
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    return declare(setting_of(cls, name), field.default, **changes)


def group(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING, **how: Any) -> Any:
    """A dataclass field holding a group of settings (see `Group` for `how`: words, changes, exclude)."""
    return dataclasses.field(default=default, default_factory=default_factory, metadata={KEY: Group(**how)})


def declared(field: dataclasses.Field) -> Setting | Group | None:
    """The field's Setting or Group; None: it is no setting."""
    return field.metadata.get(KEY)
