"""Errors that end a command: exit status 2 for bad usage or bad input, 3 for a failing environment."""
from __future__ import annotations


def printable(text: str) -> str:
    """Control characters (a NUL from a server's error body, an escape sequence in an id) escaped,
    so one failure is one clean line on a terminal or in a log."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


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


class EnvironmentFailure(Exception):
    """The machine, not the input, failed: an output that cannot be written (permission denied,
    read-only file system, disk full). The command exits with status 3; finished records are kept
    and a rerun resumes once the cause is fixed."""
