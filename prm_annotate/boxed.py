"""The one reader of `\\boxed{...}`: where the boxes of a text are and what each holds.

A box is `\\boxed` or `\\fbox`, optional whitespace, then a braced argument (braces balanced; an
escaped brace `\\{` or `\\}` is a character of the content, not a brace) or, without a brace, a
bare argument: the next token (`\\boxed 5`). Contents are returned as written, not stripped.

Every caller reads boxes through `find_boxes` and says which boxes it accepts:
- the grader (`answers.extract_final_answer`): every kind, the last one (with the boxes listed
  right before it) is the final answer;
- the judge's verdict (`judging.processbench.parse_processbench`): every kind, every one, all
  naming one index, an unclosed one refused;
- a MATH solution's gold answer (`formats`, `last_boxed`) and the arithmetic world's truth
  (`world.truth`): exactly `\\boxed{` (no space, no `\\fbox`), as those texts write it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_BOX_RE = re.compile(r"\\(boxed|fbox)\s*(\{)?")
# A backslash and the character it escapes (an escaped brace such as \{ does not count), or a brace.
_BRACE_SCAN_RE = re.compile(r"\\.|[{}]", re.DOTALL)
# A bare argument ("\boxed 5") is the next token, looked for this far.
_BARE_RE = re.compile(r"\s*([^\s$.,{}]+)")
BARE_WINDOW = 1000


def closing_braces(text: str, start: int = 0) -> dict[int, int]:
    """Index of each opening brace at or after `start` -> index of the brace closing it (unclosed
    ones are absent). `start` must not be the character right after an escaping backslash (e.g.
    it is an opening brace that follows `\\boxed`): then the pairs found are exactly those a scan
    from 0 finds, as braces before `start` never pair with one after it."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for m in _BRACE_SCAN_RE.finditer(text, start):
        c = m.group()
        if c == "{":
            stack.append(m.start())
        elif c == "}" and stack:
            pairs[stack.pop()] = m.start()
    return pairs


@dataclass(frozen=True)
class Box:
    start: int  # the backslash of \boxed or \fbox
    head: str  # as written up to the argument: "\\boxed{", "\\boxed {", "\\fbox{"; "\\boxed " before a bare one
    first: int  # where the content starts
    last: int | None  # where it ends (the closing brace, or the end of a bare token); None: no content (unclosed)
    text: str = field(repr=False, compare=False)

    @property
    def braced(self) -> bool:
        return self.head.endswith("{")

    @property
    def command(self) -> str:
        return "fbox" if self.head.startswith("\\fbox") else "boxed"

    @property
    def closed(self) -> bool:
        return self.last is not None

    @property
    def content(self) -> str | None:
        """What the box holds, as written; None when it has none (an unclosed brace, no bare token)."""
        return None if self.last is None else self.text[self.first:self.last]

    @property
    def end(self) -> int | None:
        """Index after the box (after its closing brace or its bare token); None when unclosed."""
        if self.last is None:
            return None
        return self.last + 1 if self.braced else self.last


def _box(text: str, m: re.Match, closing: dict[int, int]) -> Box:
    if m.group(2):
        return Box(m.start(), m.group(0), m.end(), closing.get(m.start(2)), text)
    tok = _BARE_RE.match(text[m.end():m.end() + BARE_WINDOW])
    first, last = (m.end() + tok.start(1), m.end() + tok.end()) if tok else (m.end(), None)
    return Box(m.start(), m.group(0), first, last, text)


def find_boxes(text: str, *, last: int | None = None) -> list[Box]:
    """The boxes of `text` in order of position, nested ones included; only the `last` ones when
    given (long degenerate output such as "\\boxed{\\boxed{..." then costs linear time)."""
    matches = list(_BOX_RE.finditer(text))
    if last is not None:
        matches = matches[-last:] if last else []
    # Pair braces once, from the first candidate's brace on, not from the start of the text: a
    # rollout text is a long shared prefix plus a completion, and this loop runs in Python.
    braces = [m.start(2) for m in matches if m.group(2)]
    closing = closing_braces(text, braces[0]) if braces else {}
    return [_box(text, m, closing) for m in matches]


def box_at(text: str, pos: int = 0) -> Box | None:
    """The box that starts exactly at `pos`, if one does."""
    m = _BOX_RE.match(text, pos)
    if m is None:
        return None
    return _box(text, m, closing_braces(text, m.start(2)) if m.group(2) else {})


def last_boxed(text: str) -> str | None:
    """Contents of the last `\\boxed{...}` (written exactly so), as written; None if there is
    none or it is never closed. How a MATH solution gives its answer."""
    plain = [b for b in find_boxes(text) if b.head == "\\boxed{"]
    return plain[-1].content if plain else None
