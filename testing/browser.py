"""A page in real headless Chromium (Debian's `chromium`, driven by playwright over CDP), for the
HTML report's test and benchmark. Playwright's own browser download is never used: the system's
chromium is (`.ci/run` installs it where missing); without it the caller is skipped, except in CI."""
from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from typing import Any, Iterator

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# No network, no background services: the page must draw from the file alone.
CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync")


def missing() -> str | None:
    """Why no browser can start here, or None."""
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    if not (os.path.isfile(CHROMIUM) or shutil.which(CHROMIUM)):
        return f"no chromium at {CHROMIUM} (apt-get install -y chromium)"
    return None


def skip_without_browser() -> None:
    import pytest

    why = missing()
    if why is not None:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(why)
        pytest.skip(why)


@contextmanager
def chromium_page(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """One browser session and one page; closed on the way out."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()
