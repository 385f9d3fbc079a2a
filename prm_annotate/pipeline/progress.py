"""The progress a stage run shows on stderr."""
from __future__ import annotations

import sys
import time


class Progress:
    """A rich bar on a terminal; plain lines every few seconds otherwise; nothing with --quiet."""

    def __init__(self, name: str, total: int | None, quiet: bool):
        self.name, self.total, self.done, self.failed = name, total, 0, 0
        self._bar = None
        self._plain = not quiet and not sys.stderr.isatty()
        self._last = time.monotonic()
        if not quiet and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(console=Console(stderr=True), transient=False)
            self._bar.start()
            self._task = self._bar.add_task(name, total=total)

    def advance(self, done: int, failed: int) -> None:
        self.done += done
        self.failed += failed
        if self._bar is not None:
            self._bar.update(self._task, advance=done + failed)
        elif self._plain and time.monotonic() - self._last >= 10:
            self._last = time.monotonic()
            total = f"/{self.total}" if self.total is not None else ""
            print(f"{self.name}: {self.done}{total} records done, {self.failed} failed", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
