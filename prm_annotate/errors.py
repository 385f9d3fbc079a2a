"""Errors that end a command with exit status 2 (bad usage or bad input)."""
from __future__ import annotations


class UsageError(Exception):
    """Bad usage: the message says what is wrong; the command exits with status 2."""


class InputError(UsageError):
    """A bad input record. `where` is "line N" for JSONL, "record N" for a JSON array."""

    def __init__(self, path: str, where: str, message: str):
        self.path, self.where, self.message = path, where, message
        super().__init__(f"{path}:{where.removeprefix('line ')}: {message}" if where.startswith("line ")
                         else f"{path} ({where}): {message}")


# How to get what an optional part needs, for the one-line error `require` prints.
ENGINE_INSTALL = "pip install -e '.[cpu]' in the repository ('.[gpu]' with a GPU; see README, Install)"


def require(module: str, needed_for: str, install: str) -> None:
    """Raise UsageError (exit 2, one line) when the package `module` is not installed, naming it
    and how to install it; an optional part then never ends in a ModuleNotFoundError traceback."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise UsageError(f"{needed_for} needs the Python package {module!r}, which is not installed: {install}")
