"""Final-answer extraction and normalisation (pure text, no sympy, nothing evaluated).

`extract_final_answer` finds what a response gives as its final answer, in this order:
  1. the last `\\boxed{...}` / `\\fbox{...}` (balanced braces);
  2. the last "the answer is X" / "the final answer is X";
  3. the last GSM8K `#### X`;
  4. the last "Answer: X" (or "A: X" at the start of a line, as in the GPT-3 GSM8K solutions);
  5. the last bold `**X**` that is not a heading;
  6. otherwise the end of the response: the final paragraph itself when it is a bare answer
     ("18", "$\\frac12$"); else, in the last sentence (of the last three paragraphs) that holds a
     number or a math expression, the last one that is the result of an equation somewhere in
     the response ("= 34 hours] So, 34 hours in 4 weeks" -> 34), else the last one.
It returns the text it found, unchanged, or None. Every rule reads a bounded window, so a long
degenerate generation costs linear time (the parent process runs these without a timeout).

`normalize_answer` turns an extracted answer or a gold answer into a canonical string for
comparison: math delimiters, dollar signs, `\\text{}` units, degrees, percent signs, thousands
separators, trailing punctuation and surrounding prose are removed. Both sides of a comparison
go through the same function, so the rules are symmetric and hold for any item.
"""
from __future__ import annotations

import re
from functools import lru_cache

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*(\{)?")
_ANSWER_IS_RE = re.compile(r"(?i)\banswer\s+is\b\s*:?\s*")
_HASHES_RE = re.compile(r"####\s*([^\n]*)")
_ANSWER_COLON_RE = re.compile(r"(?im)(?:\banswer|^[ \t]*(?-i:A))\s*(?:\*\*)?\s*:\s*(?:\*\*)?[ \t]*([^\n]*)")
_BOLD_RE = re.compile(r"\*\*([^*\n]+?)\*\*")
_HEADING_RE = re.compile(r"(?i)^(?:step\b|solution\b|conclusion\b|final answer\b|answer\b)|:\s*$")
_MATH_START = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
_SENTENCE_END_RE = re.compile(r"\.(?=\s|$)|\n")
_NUMBER_RE = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?%?|-?\\[dt]?frac\{-?\d+\}\{-?\d+\}")
_MATH_CHARS_RE = re.compile(r"[\\^_{}=+*/()<>\d]")
# A backslash and the character it escapes (an escaped brace such as \{ does not count), or a brace.
_BRACE_SCAN_RE = re.compile(r"\\.|[{}]", re.DOTALL)
_HOPE_RE = re.compile(r"(?i)I hope it is correct\.?\s*$")
# Model output can be long and degenerate ("\boxed{\boxed{..." thousands of times): every rule
# looks at a bounded window so extraction stays linear in the length of the text.
WINDOW = 1000       # characters read after "the answer is" / "Answer:"
MAX_TRIES = 20      # candidates of one rule tried, latest first
TAIL = 3000         # characters of the final paragraph looked at by the last rule
MAX_PROSE = 500     # answers longer than this skip the prose rules of normalisation


def _closing_braces(text: str, start: int = 0) -> dict[int, int]:
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


def _last_boxed(text: str) -> str | None:
    matches = list(_BOX_RE.finditer(text))[-MAX_TRIES:]
    if not matches:
        return None
    # Pair braces from the first candidate's brace on, not from the start of the text: a rollout
    # text is a long shared prefix plus a completion, and this loop runs in Python.
    braces = [m.start(1) for m in matches if m.group(1)]
    closing = _closing_braces(text, braces[0]) if braces else {}
    for m in reversed(matches):
        if m.group(1):
            end = closing.get(m.start(1))
            if end is not None:
                return text[m.start(1) + 1:end].strip()
        else:  # "\boxed 5": the argument is the next token
            tok = re.match(r"\s*([^\s$.,{}]+)", text[m.end():m.end() + WINDOW])
            if tok:
                return tok.group(1)
    return None


def _math_or_sentence(rest: str) -> str:
    """The answer at the start of `rest`: a whole math environment, else text up to the sentence end."""
    for opener, closer in _MATH_START:
        if rest.startswith(opener):
            end = rest.find(closer, len(opener))
            if end > 0:
                tail = _SENTENCE_END_RE.search(rest, end + len(closer))
                return rest[: tail.start() if tail else len(rest)].strip()
    end = _SENTENCE_END_RE.search(rest)
    return rest[: end.start() if end else len(rest)].strip()


def _strip_hope(s: str) -> str:
    return _HOPE_RE.sub("", s).strip()


def _is_prose(s: str) -> bool:
    """Words without any digit or math, e.g. "arrived at through careful consideration"."""
    return not _MATH_CHARS_RE.search(s) and len(s.split()) > 1


def _last_answer_is(text: str) -> str | None:
    for m in reversed(list(_ANSWER_IS_RE.finditer(text))[-MAX_TRIES:]):
        cand = _strip_hope(_math_or_sentence(text[m.end():m.end() + WINDOW]))
        if cand and not _is_prose(cand):
            return cand
    return None


def _last_hashes(text: str) -> str | None:
    found = [m.group(1).strip() for m in _HASHES_RE.finditer(text)]
    return next((f for f in reversed(found) if f), None)


def _last_answer_colon(text: str) -> str | None:
    for m in reversed(list(_ANSWER_COLON_RE.finditer(text))[-MAX_TRIES:]):
        cand = _strip_hope(_math_or_sentence(m.group(1)[:WINDOW].strip()))
        if cand:
            return cand
    return None


def _last_bold(text: str) -> str | None:
    for m in reversed(list(_BOLD_RE.finditer(text))[-MAX_TRIES:]):
        cand = m.group(1).strip()
        if cand and not _HEADING_RE.search(cand):
            return cand
    return None


def _looks_bare(par: str) -> bool:
    """A short paragraph that is an answer by itself ("18", "$\\frac{1}{2}$"), not a sentence."""
    return len(par) <= 80 and "\n" not in par and not re.search(r"[A-Za-z]{2,}\s+[A-Za-z]{2,}", par) \
        and bool(re.search(r"\d|\\", par))


_MATH_ENV_RE = re.compile(r"\\\[(.+?)\\\]|\\\((.+?)\\\)|\$\$(.+?)\$\$|(?<![\\\d])\$(?!\s)([^$\n]+?)(?<![\\\s])\$(?!\d)", re.DOTALL)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|(?<=\\\])\s*|\n")
_RESULT_RE = re.compile(r"=\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?)(?![\d.,]*\d)")


def _sentence_candidates(sentence: str) -> list[tuple[str, bool]]:
    """(answer, is an equation result) for each math environment holding a digit and each plain
    number of a sentence, in order of position."""
    found: list[tuple[int, str, bool]] = []
    outside = []
    pos = 0
    for m in _MATH_ENV_RE.finditer(sentence):
        body = next(g for g in m.groups() if g is not None)
        outside.append(sentence[pos:m.start()])
        pos = m.end()
        if re.search(r"\d", body):
            rhs = body.rsplit("=", 1)
            found.append((m.start(), rhs[-1].strip(), len(rhs) > 1))
    outside.append(sentence[pos:])
    text_only = sentence
    for m in reversed(list(_MATH_ENV_RE.finditer(sentence))):  # blank out math, keep offsets
        text_only = text_only[:m.start()] + " " * (m.end() - m.start()) + text_only[m.end():]
    for m in _NUMBER_RE.finditer(text_only):
        found.append((m.start(), m.group(0), False))
    return [(a, r) for _, a, r in sorted(found)]


def _from_final_paragraph(text: str) -> str | None:
    pars = [p.strip()[-TAIL:] for p in text.split("\n\n")[-3:] if p.strip()]
    if not pars:
        return None
    if _looks_bare(pars[-1]):
        return pars[-1]
    # Results of equations anywhere in the response: "... = 34 hours] So, a total of 34 hours in
    # 4 weeks" states 34, the computed value, not 4.
    results = {normalize_answer(r) for r in _RESULT_RE.findall(text)}
    for par in reversed(pars):
        for sentence in reversed([s for s in _SENTENCE_SPLIT_RE.split(par) if s and s.strip()]):
            cands = _sentence_candidates(sentence)
            if cands:
                computed = [a for a, is_result in cands if is_result or normalize_answer(a) in results]
                return computed[-1] if computed else cands[-1][0]
    return None


def extract_final_answer(text: str) -> str | None:
    """The final answer a response states, exactly as written, or None when it gives none."""
    for rule in (_last_boxed, _last_answer_is, _last_hashes, _last_answer_colon, _last_bold,
                 _from_final_paragraph):
        found = rule(text)
        if found:
            return found
    return None


# --- normalisation -------------------------------------------------------------------------

_TEXT_CMD_RE = re.compile(r"\\(?:text|textbf|textit|mathrm|mbox|textrm|operatorname)\s*\{([^{}]*)\}")
_SPACES_RE = re.compile(r"(?<!\\)\\[,;: ]|~|\\quad|\\qquad")
_DEGREE_RE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree|\\circ")
_UNIT_POWER_RE = re.compile(r"^\s*\^\s*\{?[23]\}?")
_THOUSANDS_RE = re.compile(r"^-?\d{1,3}(?:(?:,|\{,\})\d{3})+(?:\.\d+)?$")
_SPACED_THOUSANDS_RE = re.compile(r"^-?\d{1,3}(?: \d{3})+(?:\.\d+)?$")
_PLAIN_NUMBER_TOKEN_RE = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
_CHOICE_RE = re.compile(r"^\(?([A-Ea-e])\)?$")
_TRAILING_WORDS_RE = re.compile(r"^(.*?[\d}\)\]])\s+(?:[A-Za-z]{2,}\.?\s*)+$")


def _unwrap(s: str) -> str:
    changed = True
    for _ in range(8):  # layers of delimiters; more is not an answer anyone wrote
        if not changed:
            break
        changed = False
        s = s.strip()
        for opener, closer in (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"), ("**", "**")):
            if len(s) > len(opener) + len(closer) and s.startswith(opener) and s.endswith(closer):
                s, changed = s[len(opener):-len(closer)], True
        m = _BOX_RE.match(s)
        if m and m.group(1) and _closing_braces(s).get(m.start(1)) == len(s) - 1:
            s, changed = s[m.end():-1], True
    return s


def _drop_text(s: str) -> str:
    """`\\text{...}`: units when a number stands beside it (dropped), else the answer (kept)."""
    outside = _TEXT_CMD_RE.sub(" ", s)
    if re.search(r"\d", outside):
        s = re.sub(r"\\text\s*\{\s*(?:and|or)\s*\}", ", ", s)  # "2 \text{ and } 3" lists two answers
        parts = []
        pos = 0
        for m in _TEXT_CMD_RE.finditer(s):
            parts.append(s[pos:m.start()])
            pos = m.end()
            unit_power = _UNIT_POWER_RE.match(s[pos:])  # "\text{ cm}^2"
            if unit_power:
                pos += unit_power.end()
        parts.append(s[pos:])
        return " ".join("".join(parts).split())
    return _TEXT_CMD_RE.sub(lambda m: m.group(1), s)


def _single_number_in_prose(s: str) -> str:
    """"Verna received 7.00 in change" -> "7.00"; left alone when there is math or several numbers."""
    if "\\" in s or re.search(r"[=+*/^<>]", s) or not re.search(r"[A-Za-z]{2,}", s):
        return s
    numbers = _PLAIN_NUMBER_TOKEN_RE.findall(s)
    return numbers[0].rstrip(",") if len(numbers) == 1 else s


@lru_cache(maxsize=65536)
def normalize_answer(s: str) -> str:
    """Canonical form of an answer string for comparison (see the module docstring)."""
    s = _unwrap(_strip_hope(s))
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\!", "")
    s = s.replace("\\left", "").replace("\\right", "")
    s = _SPACES_RE.sub(" ", s)
    s = s.replace("\\$", "").replace("$", "")
    s = re.sub(r"\\(?=\d)", "", s)  # "\15": a dollar sign that lost its "$"
    s = _drop_text(s)
    s = _DEGREE_RE.sub("", s)
    s = s.replace("\\%", "").replace("%", "")
    s = " ".join(s.split())
    if len(s) <= MAX_PROSE:
        s = re.sub(r"(?i)\s*\b(?:percent|per cent)$", "", s)
        s = _single_number_in_prose(s)
        m = _TRAILING_WORDS_RE.match(s)
        if m and not re.search(r"(?<!\\)\b[A-Za-z]{2,}", m.group(1)):
            s = m.group(1)
    s = s.strip().rstrip(".,;:!").strip()
    s = _unwrap(s)
    if _THOUSANDS_RE.match(s):
        s = s.replace("{,}", "").replace(",", "")
    elif _SPACED_THOUSANDS_RE.match(s):
        s = s.replace(" ", "")
    choice = _CHOICE_RE.match(s)
    if choice:
        s = choice.group(1).upper()
    return s
