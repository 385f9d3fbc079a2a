"""The report's one HTML file: the data as JSON in a `<script type="application/json">` block, the
page's script and style inlined (report.js, report.css beside this module), nothing fetched.

Model text is data, never markup: the JSON has `<`, `>` and `&` written as `\\u003c`, `\\u003e`,
`\\u0026`, so no text can close the block or open a tag, and the script puts text on the page only
through `textContent`. The Content-Security-Policy allows the page's own script (by its sha256)
and nothing else: no other script, no event-handler attribute, no network request.
"""
from __future__ import annotations

import base64
import hashlib
import html
from importlib import resources
from typing import Any

import orjson

TITLE = "prm-annotate report"


def embed_json(data: Any) -> str:
    """JSON safe inside a `<script>` element: no `<`, `>` or `&` left to end it or open a tag."""
    raw = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    return raw.replace(b"&", b"\\u0026").replace(b"<", b"\\u003c").replace(b">", b"\\u003e").decode()


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def render_page(data: dict[str, Any]) -> str:
    script, style = _asset("report.js"), _asset("report.css")
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(TITLE)}</title>",
        f"<style>{style}</style>",
        "</head><body>",
        '<noscript>This report draws itself with JavaScript; the data is in the page as JSON.</noscript>',
        '<main id="app"></main>',
        f'<script type="application/json" id="report-data">{embed_json(data)}</script>',
        f"<script>{script}</script>",
        "</body></html>",
        "",
    ])
