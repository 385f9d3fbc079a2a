"""Final-answer extraction and normalisation (pure text, no sympy, nothing evaluated).

`extract_final_answer` finds what a response gives as its final answer, in this order:
  1. the last `\\boxed{...}` / `\\fbox{...}` (as `prm_annotate.boxed` reads boxes), with the boxes right before it
     that are items of the same answer ("$x=\\boxed{-1}$ and $x=\\boxed{-9}$" -> "-1, -9");
  2. the last "the answer is X" / "the final answer is X";
  3. the last GSM8K `#### X`;
  4. the last "Answer: X" (or "A: X" at the start of a line, as in the GPT-3 GSM8K solutions);
  5. the last bold `**X**` that is not a heading;
  6. otherwise the end of the response: the final paragraph itself when it is a bare answer
     ("18", "$\\frac12$"); else, in the last sentence (of the last three paragraphs) that holds a
     number or a math expression, the math environment that ends the sentence when the sentence
     states it ("... when 6 people pick hats is \\(\\frac{11}{30}\\).", "... for a total of 24
     colorings.": `_closing_math`), else the last one that is the result of an equation somewhere
     in the response ("= 34 hours] So, 34 hours in 4 weeks" -> 34), else the last one, with the
     values listed right before it ("The solutions are $x=-1$ and $x=-9$") and with the words
     around it that take it back ("must be at least 7"); sentences that only remark on the answer
     ("Note that ...") are passed over, and an answer restated in another notation is its last
     form (`_restated`).
  A bound given as "the answer is ..." before the end gives way to an unqualified closing
  statement (`_superseded`); "$X$, which is our answer" is read like "the answer is X".
It returns the text it found, unchanged, or None. Every rule reads a bounded window, so a long
degenerate generation costs linear time (the parent process runs these without a timeout).

`hedged` says whether an answer qualifies its value (negated, hedged, bounded, conditional, a
question, code): such an answer is wrong whatever number it holds (rule at `_QUALIFIER_WORDS`).

`normalize_answer` turns an extracted answer or a gold answer into a canonical string for
comparison: math delimiters, markdown and punctuation at the edges, dollar signs, `\\text{}`
units, degrees, thousands separators, a trailing contrast ("18, not 20") and the prose around a
single unqualified number are removed; a percent sign becomes a trailing "%", "and"/"or" between
items a comma, a declared integer parameter ("k \\in \\mathbb{Z}") is dropped and renamed k,
Unicode signs become LaTeX ("√3" -> "\\sqrt{3}"), a set written out in braces becomes the list of
its elements, an item with a "±" the two items it stands for, a count in words its number. Both
sides of a comparison go through the same function, so the rules are symmetric and hold for any
item. `comparison_forms` gives the pairs that decide a comparison (the percent, decimal-comma,
interval and argument-name rules); each rule is written down where it is applied.
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from prm_annotate.boxed import box_at, find_boxes

_ANSWER_IS_RE = re.compile(r"(?i)\banswer\s+is\b\s*:?\s*")
_HASHES_RE = re.compile(r"####\s*([^\n]*)")
_ANSWER_COLON_RE = re.compile(r"(?im)(?:\banswer|^[ \t]*(?-i:A))\s*(?:\*\*)?\s*:\s*(?:\*\*)?[ \t]*([^\n]*)")
_BOLD_RE = re.compile(r"\*\*([^*\n]+?)\*\*")
_HEADING_RE = re.compile(r"(?i)^(?:step\b|solution\b|conclusion\b|final answer\b|answer\b)|:\s*$")
_MATH_START = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
_SENTENCE_END_RE = re.compile(r"\.(?=\s|$)|\n")
# A number in prose: a fraction a/b, a decimal, a \\frac of digits, or a surd or multiple of π
# written with the Unicode signs ("√3", "2√3", "√(12)", "3π", "π/2"; see `_UNICODE_MATH`).
_NUMBER_RE = re.compile(r"-?(?:\d+(?:\.\d+)?\s*)?√\s*(?:\(\s*\d+(?:\.\d+)?\s*\)|\d+(?:\.\d+)?)"
                        r"|-?(?:\d+\s*)?π(?:\s*/\s*\d+)?(?![\w])"
                        r"|-?\d+/\d+(?![\d.,]*\d)|-?\$?\d[\d,]*(?:\.\d+)?%?|-?\\[dt]?frac\{-?\d+\}\{-?\d+\}")
_MATH_CHARS_RE = re.compile(r"[\\^_{}=+*/()<>\d]")
_HOPE_RE = re.compile(r"(?i)I hope it is correct\.?\s*$")
# Model output can be long and degenerate ("\boxed{\boxed{..." thousands of times): every rule
# looks at a bounded window so extraction stays linear in the length of the text.
WINDOW = 1000       # characters read after "the answer is" / "Answer:"
MAX_TRIES = 20      # candidates of one rule tried, latest first
TAIL = 3000         # characters of the final paragraph looked at by the last rule
MAX_PROSE = 500     # answers longer than this skip the prose rules of normalisation
DECL_TAIL = 200     # characters at the end of an answer searched for a percent sign or "k \\in \\mathbb{Z}"


# --- what an answer says besides its value ------------------------------------------------------
#
# Rule: an answer is its value only when nothing around the value takes it back. Words that negate
# it ("not 18", "18 is wrong"), hedge it ("maybe 18", "18?"), bound it ("at least 5", "x > 5", "5 or
# more"), make it conditional ("18 if n is even") or wrap it in code ("(lambda: 18)()", "print(18)")
# state something other than the value, so such an answer is graded wrong, never reduced to its
# number ("add it up to get 18" states it: "up to" bounds a value, not a verb).
# Only what the gold itself does not say counts: gold "\text{no}" still accepts "no", a gold
# inequality still lets math-verify compare an answer inequality. The modal verbs of word problems
# ("she would save $24", "he could buy 18") are not qualifiers. A "±" is no qualifier either: it
# states two values ("\\pm 18" is 18 and -18, see `_expand_pm`), so it is wrong against a gold of
# one of them and right against a gold of both. Rounding words ("approximately",
# "about") are not qualifiers: a rounded value is the value (math-verify accepts `x \approx 11`), and
# they are left to the numeric comparison.
_HEDGES = ("maybe", "perhaps", "possibly", "probably", "likely", "unlikely", "guess", "guessing", "think",
           "believe", "suspect", "might", "seem", "seems", "unsure", "uncertain", "unclear", "unknown",
           "undetermined", "either", "ish")
_QUALIFIER_WORDS = (
    # negation
    "not|no|never|none|nor|neither|nothing|cannot|wrong|incorrect|false|impossible|invalid|except|"
    "excluding|anything|"
    # hedges
    + "|".join(_HEDGES) + "|"
    # bounds
    "least|most|less|more|greater|fewer|smaller|larger|bigger|higher|lower|than|over|under|above|"
    "below|exceeds?|exceeding|between|within|"
    # conditions
    "if|unless|when|whenever|assuming|assume|provided|suppose|supposing|otherwise|depends|depending|"
    # code
    "lambda|def|return|print|eval|exec|import|int|str|float|len"
)
_QUALIFIER_RE = re.compile(
    r"(?i)(?<![\\A-Za-z])(?:(" + _QUALIFIER_WORDS + r")|([A-Za-z]{1,12}n't)|(up\s+to(?!\s+(?:get|obtain|find|see)\b))"
    r"|(or\s+so))(?![A-Za-z])"
    # relations other than "=" and "\approx" bound a value instead of stating it ("5!=120" is a
    # factorial and "=": no "!=" after a digit or a bracket)
    r"|(<|>|≤|≥|≠|(?<![\d)}])!=|\\(?:le|leq|ge|geq|ne|neq|lt|gt|leqslant|geqslant)(?![A-Za-z]))"
    r"|(\?)"                                                 # a question
    r"|(==|=>|\(\s*\)|\]\s*\[|(?<![A-Za-z'])['\"`](?=\s*[\w({\[])|\d['\"`])"  # code: calls, indexing, quotes
    r"|(\d\s*\+\s*$)")                                       # "5+": five or more
# Remarks after a stated value that do not change it, dropped from the end of an answer (on both
# sides of a comparison, and before looking for qualifiers):
#   a contrast   "18, not 20", "18 (not 20)", "18 rather than 20"  (but "not 18" is left alone);
#   a reason     "10 (since x must be at least 3)", "10, because ...";
#   a domain     "f(n) = n \text{ for all } n \ge 1", "f(x) = x for every real x"  (where the answer
#                holds; a conditional "18 when n is odd" is not a domain and is kept).
_REMARK_RES = (
    re.compile(r"(?i)(?:\s*[,;(]\s*(?:but\s+)?not|\s*[,;(]?\s*(?:rather\s+than|instead\s+of))\b[^()]*\)?\s*\.?\s*$"),
    re.compile(r"(?i)\s*(?:\(\s*(?:since|because|due\s+to)\b[^()]*\)|[,;]\s*(?:since|because)\b.*)\s*\.?\s*$"),
    re.compile(r"(?i)(?:\s|,|\\q?quad|\\[,;: ])*(?:\\text\s*\{\s*for\s+(?:all|every|any|each)\b|\\forall(?![A-Za-z])"
               r"|(?<![A-Za-z\\])for\s+(?:all|every|any|each)\b).*$"),
)


def _qualifiers(text: str) -> set[str]:
    found = set()
    for m in _QUALIFIER_RE.finditer(text):
        kind = m.lastindex
        word = m.group(kind).lower()
        found.add(word if kind <= 4 else ("relation", "question", "code", "plus")[kind - 5])
    return found


def _drop_remarks(s: str) -> str:
    """The answer without the remarks after its value (see above); a remark is dropped only after
    something with a digit or math that does not qualify itself ("not 18" keeps its "not")."""
    if len(s) > MAX_PROSE:
        return s
    contrast, reason, _ = _REMARK_RES
    for remark in _REMARK_RES:
        m = remark.search(s)
        if not m or not _MATH_CHARS_RE.search(s[:m.start()]) or _qualifiers(s[:m.start()]):
            continue
        said = m.group(0)
        # A contrast names another value ("not 20"; "18, not sure" is a hedge); a reason is no
        # hedge itself ("18 (because I guess so)" is one).
        if remark is contrast and not re.search(r"[\d\\]", said):
            continue
        if remark is reason and _qualifiers(said) & {*_HEDGES, "question"}:
            continue
        s = s[:m.start()]
    return s


def hedged(answer: str, gold: str = "") -> bool:
    """Whether the answer qualifies its value (see the rule above) beyond what the gold says."""
    if len(answer) > MAX_PROSE:
        return False  # long answers are expressions, not sentences; math-verify compares them
    answer = _CALCULATOR_RE.sub(" ", answer)  # GSM8K's "<<4/12=0.33>>" is arithmetic, not a relation
    said = _qualifiers(_drop_remarks(answer)) - _qualifiers(gold)
    if said == {"relation"} and _sets_of_reals(normalize_answer(gold), normalize_answer(answer)):
        return False  # "x > 2" against the gold "(2, \\infty)": a set of reals, not a bound (see `_interval_of`)
    return bool(said)


# What may stand between the items of one answer written as several boxes or math environments:
# "$x=\boxed{-1}$ and $x=\boxed{-9}$", "\(\boxed{2}\), \(\boxed{5}\)", "5, 15 and 25".
_LIST_GAP_RE = re.compile(
    r"(?:\s|[,;$*]|\\[()\[\]]|\\q?quad|\\text\s*\{\s*(?:and|or|,)?\s*\}|(?<![A-Za-z])(?:and|or)(?![A-Za-z])"
    r"|(?<![A-Za-z\\])[A-Za-z](?:_\{?\w+\}?)?\s*=)*")
MAX_GAP = 60
MAX_ITEMS = 12


def _join_items(items: list[str]) -> str:
    """One answer from several stated items: itself when they all say the same (also as a set of
    reals in two notations: "$-2 \\le x \\le 7$ and $x \\in [-2, 7]$"), else the list."""
    forms = {normalize_answer(i) for i in items}
    if len(forms) == 2:
        one, other = sorted(forms)
        reals = _sets_of_reals(one, other)
        if reals is not None and len({"".join(r.split()) for r in reals}) == 1:
            return items[-1]
    if len(forms) == 1:
        return items[-1]
    return ", ".join(items)


# A box offered as an alternative to the box before it ("\\boxed{3}, or maybe \\boxed{4}", "\\boxed{3}
# ... or perhaps \\boxed{4}") is a hedge, not a correction: the answer is both, with the hedge.
_BOX_HEDGE_RE = re.compile(r"(?i)(?<![A-Za-z])(?:or\s+)?(?:maybe|perhaps|possibly|probably|alternatively)"
                           r"[\s,:$(\[\\]*(?:\\boxed\s*)?$")


def _last_boxed(text: str) -> str | None:
    """The last box, together with the boxes right before it that are items of the same answer.

    Rule: an answer with several parts (all solutions of an equation, several values or tuples) is
    often written as one box per part. Boxes separated only by list punctuation, "and"/"or",
    math delimiters or "x =" are one answer, compared as a list with the gold; boxes separated by
    any other words are successive attempts, and the last one is the answer."""
    # (start, end, content) of each readable box of the last MAX_TRIES, in order
    boxes = [(b.start, b.end, b.content.strip() if b.braced else b.content)
             for b in find_boxes(text, last=MAX_TRIES) if b.closed]
    if not boxes:
        return None
    start, _, last = boxes[-1]
    hedge = _BOX_HEDGE_RE.search(text[max(0, start - 40):start])
    items = [last]
    for b_start, b_end, content in reversed(boxes[:-1]):
        if b_end > start:  # a box nested in the one after it
            continue
        gap = text[b_end:start]
        if len(items) >= MAX_ITEMS or len(gap) > MAX_GAP or not _LIST_GAP_RE.fullmatch(gap):
            if hedge and len(items) == 1 and len(gap) <= MAX_GAP:
                return f"{content} {hedge.group(0).strip(' $([')} {last}"  # "3 or maybe 4": see hedged
            break
        items.insert(0, content)
        start = b_start
    return _join_items([i for i in items if i])


def _math_or_sentence(rest: str) -> str:
    """The answer at the start of `rest`: a whole math environment, else text up to the sentence end."""
    for opener, closer in _MATH_START:
        if rest.startswith(opener):
            end = rest.find(closer, len(opener))
            if end > 0:
                if rest[:end].rstrip().endswith("."):  # "$$x = 5 .$$ It is easy to ...": it ended inside
                    return rest[:end + len(closer)].strip()
                tail = _SENTENCE_END_RE.search(rest, end + len(closer))
                return rest[: tail.start() if tail else len(rest)].strip()
    end = _SENTENCE_END_RE.search(rest)
    return rest[: end.start() if end else len(rest)].strip()


def _strip_hope(s: str) -> str:
    return _HOPE_RE.sub("", s).strip()


def _is_prose(s: str) -> bool:
    """Words without any digit or math, e.g. "arrived at through careful consideration" (a count in
    words, "exactly five", is a value)."""
    return not _MATH_CHARS_RE.search(s) and len(s.split()) > 1 and not _NUMBER_WORD_RE.fullmatch(s)


_VERDICT_WORD_RE = re.compile(r"(?i)(?:indeed\s+)?(?:correct|right|verified|confirmed|consistent|valid|reasonable)\W*")


# "The answer is therefore $\frac{217}{900}$", "the answer is equal to $$...$$": words between the
# phrase and the answer that only lead to it.
_LEAD_TO_RE = re.compile(r"(?i)(?:(?:therefore|thus|hence|then|simply|just|clearly|indeed|finally|now|exactly"
                         r"|equal\s+to|given\s+by)(?![A-Za-z])[\s,:]*)+")


# The phrase the other way round: "$E = \frac{7}{3}$, which is our answer", "So $18$ is the answer."
_IS_THE_ANSWER_RE = re.compile(r"(\$[^$]{1,300}\$|\\\(.{1,300}?\\\))\s*(?:,\s*which\s+|\s+)is\s+(?:our|the)\s+"
                               r"(?:final\s+)?answer(?![A-Za-z])")


def _last_answer_is(text: str) -> str | None:
    found, at = None, -1
    for m in reversed(list(_ANSWER_IS_RE.finditer(text))[-MAX_TRIES:]):
        rest = text[m.end():m.end() + WINDOW]
        lead = _LEAD_TO_RE.match(rest)
        cand = _strip_hope(_math_or_sentence(rest[lead.end():] if lead else rest))
        # "so our answer is correct": a check of the answer, not one
        if cand and not _is_prose(cand) and not _VERDICT_WORD_RE.fullmatch(cand):
            found, at = cand, m.start()
            break
    after = list(_IS_THE_ANSWER_RE.finditer(text, max(0, len(text) - TAIL)))
    if after and after[-1].start() > at:
        m = after[-1]
        # the words before it still qualify it: "maybe $18$ is the answer"
        before = text[max(0, m.start() - 40):m.start()].split()[-3:]
        if _qualifiers(" ".join(before)) - _CONDITION_WORDS:
            return " ".join(before + [m.group(1)])
        cands = _sentence_candidates(m.group(1))  # read as in a sentence: "$E(1, N)=\frac{7}{3}$" states 7/3
        return cands[-1][2] if len(cands) == 1 else m.group(1)
    return found


def _last_hashes(text: str) -> str | None:
    # A markdown heading is no GSM8K answer: "#### For \\(T = 3\\):", "#### Case 1", "#### Final Answer"
    # open with a word or end with a colon; "#### 18" and "#### x = 5" do neither.
    found = [m.group(1).strip() for m in _HASHES_RE.finditer(text)]
    return next((f for f in reversed(found)
                 if f and not re.match(r"[A-Za-z]{2,}", f) and not _HEADING_RE.search(f)), None)


# "We may check our answer: ..." introduces a check, not the answer.
_CHECK_BEFORE_RE = re.compile(r"(?i)(?:check|verify|confirm|double-check)(?:ing)?\s+(?:our|the|this|my)?\s*$")


def _last_answer_colon(text: str) -> str | None:
    for m in reversed(list(_ANSWER_COLON_RE.finditer(text))[-MAX_TRIES:]):
        if _CHECK_BEFORE_RE.search(text[max(0, m.start() - 30):m.start()]):
            continue
        cand = _strip_hope(_math_or_sentence(m.group(1)[:WINDOW].strip()))
        if cand:
            return cand
    return None


def _last_bold(text: str) -> str | None:
    for m in reversed(list(_BOLD_RE.finditer(text))[-MAX_TRIES:]):
        cand = m.group(1).strip()
        # "3. **Counting the positions for \(P\)**:" heads what follows, as a colon inside the bold does
        if cand and not _HEADING_RE.search(cand) and not re.match(r"[ \t]*:", text[m.end():m.end() + 3]):
            return cand
    return None


def _looks_bare(par: str) -> bool:
    """A short paragraph that is an answer by itself ("18", "$\\frac{1}{2}$"), not a sentence: one
    that opens with a word before its math ("Hence $S = \\{1, 2\\}$.") is a sentence."""
    return len(par) <= 80 and "\n" not in par and not re.search(r"[A-Za-z]{2,}\s+[A-Za-z]{2,}", par) \
        and not re.match(r"[A-Za-z]{2,},?\s+[$\\]", par) \
        and bool(re.search(r"\d|\\", par) or re.fullmatch(r"\$[^$]+\$", par))


_MATH_ENV_RE = re.compile(r"\\\[(.+?)\\\]|\\\((.+?)\\\)|\$\$(.+?)\$\$|(?<![\\\d])\$(?!\s)([^$\n]+?)(?<![\\\s])\$(?!\d)", re.DOTALL)
_DISPLAY_RE = re.compile(r"\\\[[^\[\]]{0,2000}?\\\]|\$\$[^$]{0,2000}?\$\$")
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|(?<=\\\])\s*|\n")


def _sentences(par: str) -> list[str]:
    """The sentences of a paragraph, split where `_SENTENCE_SPLIT_RE` says but never inside a math
    environment: "$5! \\times 5! = 14,\\!400$" is one value (a factorial, a thin space), not
    three sentences."""
    inside = [(m.start(), m.end()) for m in _MATH_ENV_RE.finditer(par)]
    out, start = [], 0
    for m in _SENTENCE_SPLIT_RE.finditer(par):
        if any(a < m.start() < b for a, b in inside):
            continue
        out.append(par[start:m.start()])
        start = m.end()
    return [t for t in out + [par[start:]] if t and t.strip()]
_RESULT_RE = re.compile(r"=\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?)(?![\d.,]*\d)")


def _sentence_candidates(sentence: str) -> list[tuple[int, int, str, bool]]:
    """(start, end, answer, is an equation result) for each math environment holding a digit or
    a word in `\\text{}` (not a unit after a number), and each plain number of a sentence, in order
    of position."""
    found: list[tuple[int, int, str, bool]] = []
    text_only = sentence
    for m in reversed(list(_MATH_ENV_RE.finditer(sentence))):
        body = next(g for g in m.groups() if g is not None)
        if _WORD_ANSWER_RE.fullmatch(body):
            # "the day of the week is $\text{Monday}$"; "24 $\text{ cm}$" is a unit
            if not re.search(r"[\d})$]\s*$", sentence[:m.start()]):
                found.append((m.start(), m.end(), body.strip(), False))
        elif re.search(r"\d", body):
            body = _one_chain(body)
            # "$17^{-1} \equiv 44 \pmod{83}$" states the residue 44 as "=" states a value
            congruence = _PMOD_END_RE.search(body)
            if congruence and _EQUIV_RE.search(body):
                body = _EQUIV_RE.sub("=", body[:congruence.start()])
            rhs = [body] if _RELATION_RE.search(body) else body.rsplit("=", 1)
            value = rhs[-1].strip()
            # "$a=2, h=-1$": values of several things, an answer in parts (as "$a=2$, $h=-1$" is)
            parts = _top_level_items(body) if len(rhs) > 1 and "," in body else []
            if len(parts) > 1 and all(_ASSIGNMENT_RE.fullmatch(part) for part in parts):
                value = ", ".join(part.split("=", 1)[1].strip() for part in parts)
            # "\\[ 3 = A_{4} \\]": the value is the number on the left of the name it is given
            if len(rhs) > 1 and _NAME_RE.fullmatch(value):
                left = rhs[0].rsplit("=", 1)[-1].strip()
                value = left if _VALUE_ONLY_RE.fullmatch(left) and re.search(r"\d", left) else value
            elif len(rhs) > 1 and _in_variables(_left_side(body)):
                value = f"{_left_side(body)} = {value}"  # the rule at `_in_variables`
            # a rounded value ("$... \\approx \\$16,\\!386.16$") is a result as an equation's is
            found.append((m.start(), m.end(), value, len(rhs) > 1 or bool(_APPROX_RE.search(body))))
        text_only = text_only[:m.start()] + " " * (m.end() - m.start()) + text_only[m.end():]  # keep offsets
    for m in _NUMBER_RE.finditer(text_only):
        number = m.group(0).rstrip(",")  # "2400, 1350, and 864": the comma is the list's
        found.append((m.start(), m.start() + len(number), number, False))
    return sorted(found)


# Rule: a derivation aligned over several rows ("$$\begin{aligned} (ab+bc+ca)^{2} & =\frac{16}{3} \cdot
# \ldots \\\\ & =\frac{-11-4 i}{3} \end{aligned}$$") is one chain of equalities, read as if written on
# one line: its last right side is the value, its first left side what it is the value of.
_ALIGNED_RE = re.compile(r"\\(?:begin|end)\s*\{\s*(?:aligned|align|gathered|split|eqnarray)\*?\s*\}")


def _one_chain(body: str) -> str:
    if not _ALIGNED_RE.search(body):
        return body
    body = _ALIGNED_RE.sub(" ", body).replace("&", " ")
    return " ".join(re.sub(r"\\\\(?:\[[^\]]*\])?", " ", body).split()).rstrip(" .,")


_ASSIGNMENT_RE = re.compile(r"\s*[A-Za-z](?:_\{?\w+\}?)?\s*=\s*[^=<>]+")  # "h=-1", "a_1 = 2"

# An answer in words written as mathematics: "$\\text{Monday}$", "$\\textbf{Devon}$".
_WORD_ANSWER_RE = re.compile(r"\s*\\(?:text|textbf|mathrm|textrm)\s*\{\s*[A-Za-z][A-Za-z' -]{1,40}\}\s*")
_PMOD_END_RE = re.compile(r"\s*(?:\\pmod\s*(?:\{[^{}]*\}|\w+)|\(\s*\\(?:bmod|mod)\s*\w+\s*\))\s*[.,]?\s*$")
_EQUIV_RE = re.compile(r"\\equiv(?![A-Za-z])|≡")


def _left_side(equation: str) -> str:
    return equation.split("=", 1)[0].strip()


# Rule: an equation whose left side is an expression in variables, not a name ("the equation of the
# circle is \[ x^2 + y^2 = 13 \]", "$a + b + c = 3 - 4 + 24 = 23$", "$xy = \sqrt{6}$"), is read whole
# (its left side and its last right side): math-verify compares a gold number with the right side
# of an equation, and a gold equation with all of it; 13 alone would not be the circle. A name
# ("$x = 5$", "$f(x) = 1 - x$", "$\text{Area} = 24$") still gives the value on its right.
_LOWER_LETTER_RE = re.compile(r"(?<![\\A-Za-z])[a-z](?![A-Za-z])")


def _in_variables(side: str) -> bool:
    if not side or len(side) > 100 or "\\text" in side or _NAME_RE.fullmatch(side):
        return False
    bare = re.sub(r"\\[A-Za-z]+", " ", side)  # "\\sin x": the command is no variable
    return bool(_LOWER_LETTER_RE.search(bare)) and bool(re.search(r"[-+^]|[a-z]\s*[a-z]", bare))


_RELATION_RE = re.compile(r"[<>≤≥≠]|(?<![\d)}])!=|\\(?:le|leq|ge|geq|ne|neq|lt|gt)(?![A-Za-z])")
# A value with no variable in it: digits, operators and the commands of numbers ("\\frac{1}{2}", "3\\sqrt{2}").
# A name for a value: a letter, subscripted or applied ("A_{4}", "f(50)").
_NAME_RE = re.compile(r"[A-Za-z](?:_\{?\w+\}?|\(\s*[\w,\s]*\))?")
_VALUE_ONLY_RE = re.compile(r"(?:[-+*/^_{}()\d.,\s]|\\(?:[dt]?frac|sqrt|pi|cdot|times)(?![A-Za-z]))+")
_CALCULATOR_RE = re.compile(r"<<[^<>]*>>")  # GSM8K calculator annotations: "= $<<9*2=18>>18"
# After a value, what takes it back: "18?", "18 is wrong", "5 or more". (Words after a value are
# otherwise its unit or the rest of the sentence: "4 guests did not get a second hotdog".)
_AFTER_VALUE_RE = re.compile(
    r"(?i)^\s*(?:\?|\+|(?:is|was|seems|looks)\s+(?:wrong|incorrect|false|not\b)|or\s+(?:so|more|less|fewer|"
    r"greater|higher|lower|above|below|over|under)\b)")


_CONNECTIVE_RE = re.compile(r"(?i)(?:so|thus|therefore|hence|then|and\s+so),?")
_CONDITION_WORDS = {"if", "unless", "when", "whenever", "assuming", "assume", "provided", "suppose",
                    "supposing"}
# Rule: the words before a verb that states the value right before it ("The probability that
# Blaise wins more games than Pierre is \(\frac{11}{32}\)", "... the number of cubes with no
# paint is $\frac{69}{125}$", "... the sum of the n with $n^2 < 50$ is 28") describe the subject,
# not the value: a bound, a relation or a negation there does not qualify it. A hedge ("I think it
# is 18"), a modal verb ("cannot be 18", "might be 18") and a qualifier after the verb ("is at least
# 7", "is not 18") still do.
_SUBJECT_VERB_RE = re.compile(r"(?i)(?:is|are|was|were|equals?|gives|yields)[,:]?")
_SUBJECT_WORDS = {"least", "most", "less", "more", "greater", "fewer", "smaller", "larger", "bigger",
                  "higher", "lower", "than", "over", "under", "above", "below", "between", "within",
                  "exceed", "exceeds", "exceeding", "not", "no", "none", "nothing", "never", "nor",
                  "neither", "except", "excluding", "relation"}


def _names(sentence: str, cand: tuple[int, int, str, bool]) -> str | None:
    """The left side of the equation a candidate is (without spaces), or None."""
    m = _MATH_ENV_RE.fullmatch(sentence, cand[0], cand[1])
    body = next((g for g in m.groups() if g is not None), "") if m else ""
    if "=" not in body or _RELATION_RE.search(body):
        return None
    return "".join(_left_side(body).split())


# Rule: in a list of equations for different things, an equation of the things named before it is
# the value they were found for: "So $a = 3$, $b = -4$, $c = 24$, and $a + b + c = 23$" states 23,
# "$x^2y^2 = 6$ and $xy = \sqrt{6}$" states \sqrt{6}, "$b + 1 = 2016$ or $b = 2015$" states 2015.
# Equations for the same thing ("$x = -1$ and $x = -9$") or for new things ("$x = 1$ and $y = 2$")
# stay a list, an answer in several parts.
def _derived_from(sentence: str, cands: list[tuple[int, int, str, bool]], first: int, i: int) -> int:
    """The first item of the list cands[first..i] under the rule above."""
    last = _names(sentence, cands[i])
    if first == i or not last:
        return first
    earlier = [_names(sentence, c) for c in cands[first:i]]
    letters = set(re.findall(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", last)))
    known = set(re.findall(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", "".join(n or "" for n in earlier))))
    if all(earlier) and any(n != last for n in earlier) and letters and letters <= known:
        return i
    return first


def _stated(sentence: str, cands: list[tuple[int, int, str, bool]], i: int) -> str:
    """The answer a closing sentence states at its candidate i: the value itself, with the values
    listed right before it ("The solutions are $x=-1$ and $x=-9$" -> "-1, -9"); or, when the words
    just around it qualify it ("must be at least 7 degrees"), the phrase with those words, which
    the grader then reads as not a value (see `hedged`)."""
    first = i
    while first > 0 and i - first < MAX_ITEMS - 1:
        gap = sentence[cands[first - 1][1]:cands[first][0]]
        if len(gap) > MAX_GAP or not _LIST_GAP_RE.fullmatch(gap) or not gap.strip(" $"):
            break
        first -= 1
    first = _derived_from(sentence, cands, first, i)
    start, end = cands[first][0], cands[i][1]
    before = _CALCULATOR_RE.sub(" ", sentence[:start]).split()[-3:]
    after = _AFTER_VALUE_RE.match(sentence[end:])
    # Conditions in a closing sentence restate the problem ("would each have $100 if they share
    # equally"). A value that opens its sentence followed by a short remark is a bare answer with a
    # comment on it ("18, I'm not sure", "18 if n is even"): the remark counts whole.
    rest = sentence[end:]
    if not before and len(rest.split()) <= 5 and _qualifiers(rest):
        return sentence.strip()
    said = _qualifiers(" ".join(before)) - _CONDITION_WORDS
    # A clause before "so", "thus", ... is another statement: "the quadratic has no zeroes, therefore
    # $x = \frac{9}{11}$" does not negate 9/11. A hedge there still counts ("maybe, so 18").
    clause = max((k for k, w in enumerate(before) if _CONNECTIVE_RE.fullmatch(w)), default=None)
    if clause is not None:
        said = (said & {*_HEDGES, "question"}) | (_qualifiers(" ".join(before[clause + 1:])) - _CONDITION_WORDS)
    if before and _SUBJECT_VERB_RE.fullmatch(before[-1].strip("*")):
        said -= _SUBJECT_WORDS  # the rule above
    if said or after:
        return " ".join(before + [sentence[start:end] + (after.group(0) if after else "")])
    return _join_items([c[2] for c in cands[first:i + 1]])


# Rule: a closing sentence that ends on a math environment and states it ("Thus, the probability
# that exactly one of the 6 people gets their hat back is \(\frac{11}{30}\).", "... the value of
# \(r\) is \(4.4\%\).") gives that environment as its answer, whatever numbers its words name
# before it (6 is no answer there, even when an equation elsewhere computed a 6). The environment
# must end the sentence (nothing but punctuation or markdown after it, or a gloss ", where ...")
# and come right after a word or sign that states a value: "is", "are", "equals", "to", "by", "we
# get", ":", "=", maybe with an adverb ("is thus", "is approximately"); not "when", "for", "and":
# "... is 5 when \(n = 3\)." and "... are \(1\) and \(2\)." are read as before.
_STATES_RE = re.compile(
    r"(?i)(?:(?<![A-Za-z])(?:is|are|was|were|be|equals?|becomes?|gives?|yields?|to|as|by|gets?|obtains?|finds?"
    r"|have|has|makes?|in|(?:answer|total|value|result)(?:\s+of)?)(?:\s+(?:approximately|about|exactly|precisely"
    r"|simply|just|then|thus|therefore|hence|also|indeed|clearly|now|finally|only))*|[:=])\s*$")
_SENTENCE_TAIL_RE = re.compile(r"[\s.,;:!*_)\]]*")
# What may follow the environment and leave it the end of what the sentence states: a gloss on its
# symbols ("... is \\(\\phi + 1\\), where \\(\\phi\\) is the golden ratio.").
_GLOSS_RE = re.compile(r"\s*,\s*where(?![A-Za-z])")


# Rule: so does a plain number that ends the sentence, or is followed only by the noun it counts
# ("... so the solution is 96.", "making the answer 62.", "for a total of 24 colorings.", "there
# are 335 sets in total."): the number the sentence states, not an equation's result before it.
# Only verbs and nouns state a plain number: "in 21 days", "divided by 13", "equal to 0" name another.
_STATES_NUMBER_RE = re.compile(
    r"(?i)(?<![A-Za-z])(?:is|are|was|were|be|equals|becomes|gives|yields|gets?|obtains?|answer"
    r"|(?:total\s+)?(?:answer|total|value|result|sum)\s+of)(?:\s+(?:approximately|about|exactly|precisely|simply"
    r"|just|then|thus|therefore|hence|also|indeed|clearly|now|finally|only))*[:,]?\s*$")
_COUNTED_RE = re.compile(r"(?i)(\s+(?:[A-Za-z][A-Za-z-]*\s+){0,2}[A-Za-z][A-Za-z-]*(?:\s+in\s+(?:total|all))?)?"
                         r"[\s.,;:!*_)\]]*")


def _closing_math(sentence: str, cands: list[tuple[int, int, str, bool]]) -> int | None:
    """The index of the last candidate when it is a math environment that ends the sentence and is
    stated by it, or a plain number that ends it or is followed by what it counts (the rules
    above), else None."""
    start, end, _, _ = cands[-1]
    if sentence[start] in "$\\":
        if not (_SENTENCE_TAIL_RE.fullmatch(sentence, end) or _GLOSS_RE.match(sentence, end)):
            return None
    else:
        counted = _COUNTED_RE.fullmatch(sentence, end)
        if not counted or _qualifiers(counted.group(1) or ""):
            return None
        said = sentence[cands[-2][1] if len(cands) > 1 else 0:start]
        return len(cands) - 1 if _STATES_NUMBER_RE.search(said.replace("**", "")) else None
    said = sentence[cands[-2][1] if len(cands) > 1 else 0:start]
    return len(cands) - 1 if _STATES_RE.search(said.replace("**", "")) else None


# Rule: a sentence after the answer that only remarks on it ("Note that this formula also holds when
# $x = 0$.", "We may check our answer: $17 \\cdot 44 = 748$ ...", "(Special thanks to ... for this
# solution.)", "(Checking, ...)") is not where the answer is: the last sentence with a value that
# is no remark gives it (a response whose every such sentence is a remark still has its last one).
_REMARK_SENTENCE_RE = re.compile(
    r"(?i)\s*(?:\*\*)?(?:(?:note|remark|recall)(?![A-Za-z])|\((?-i:\s*[A-Z][a-z])"
    r"|(?:we|you|one)\s+(?:can|may|could)\s+(?:also\s+)?(?:check|verify|confirm|double-check)(?![A-Za-z])"
    r"|checking(?![A-Za-z])|this\s+(?:also\s+)?(?:follows|agrees|matches|is\s+consistent)(?![A-Za-z]))")


def _from_final_paragraph(text: str) -> str | None:
    pars = [p.strip()[-TAIL:] for p in text.split("\n\n")[-3:] if p.strip()]
    if not pars:
        return None
    if _looks_bare(pars[-1]):
        return pars[-1]
    # Results of equations anywhere in the response: "... = 34 hours] So, a total of 34 hours in
    # 4 weeks" states 34, the computed value, not 4.
    results = {normalize_answer(r) for r in _RESULT_RE.findall(text)}
    # A display written over several lines ("\\[\\n x^2 = \\frac{1}{2}\\n\\]") is one sentence.
    sentences = [s for par in pars
                 for s in _sentences(_DISPLAY_RE.sub(lambda m: " ".join(m.group(0).split()), par))]
    sentences = [(s, _sentence_candidates(s)) for s in reversed(sentences)]
    with_values = [(s, cands) for s, cands in sentences if cands]
    # The rule at `_REMARK_SENTENCE_RE`: the last sentence with a value that is no remark, else the last one.
    for sentence, cands in [next(((s, c) for s, c in with_values if not _REMARK_SENTENCE_RE.match(s)),
                                 with_values[0] if with_values else (None, None))]:
        if sentence is None:
            return None
        closing = _closing_math(sentence, cands)
        if closing is not None:
            return _stated(sentence, cands, closing)
        computed = [k for k, (_, _, a, is_result) in enumerate(cands)
                    if is_result or normalize_answer(a) in results]
        return _stated(sentence, cands, computed[-1] if computed else len(cands) - 1)
    return None


# Rule: an answer stated and then restated in another notation ("$6 < y < 7$, which is written in
# interval notation as $(6, 7)$", "$x < 2$ or $x > 3$, or $x \\in (-\\infty, 2) \\cup (3, \\infty)$ in
# interval notation", "$\\frac{3}{4}$, i.e. $75\\%$") is its last form: the words say the two are one
# answer, not two. Only a math environment after the marker is taken ("18, i.e. maybe 19" is not).
_RESTATED_RE = re.compile(
    r"(?i)(?:,\s*|\s+)(?:i\.\s?e\.,?|that\s+is,?|in\s+other\s+words,?|or\s+equivalently,?"
    r"|which\s+is(?:\s+(?:written|expressed))?(?:\s+in\s+[\w-]+(?:\s+[\w-]+)?\s+(?:notation|form))?\s+as"
    r"|or(?:,?\s+in\s+[\w-]+\s+(?:notation|form),?)?)\s*"
    r"(\$[^$]{1,300}\$|\\\(.{1,300}?\\\))(?:\s+in\s+[\w-]+\s+(?:notation|form))?[\s.]*$")


def _restated(found: str) -> str:
    m = _RESTATED_RE.search(found, max(0, len(found) - 400))
    if not m or not _MATH_ENV_RE.search(found[:m.start()]):
        return found
    said = m.group(0)
    # "or" alone offers an alternative ("$x = 1$, or $x = 2$"); it restates only with "notation"/"form"
    if re.match(r"(?i)[,\s]*or\s*[$\\]", said) and not re.search(r"(?i)notation|form", said):
        return found
    return m.group(1)


def _superseded(text: str, found: str) -> str | None:
    """The rule below: the closing statement that replaces a bound "the answer is ..." before it,
    or None."""
    if not hedged(found):
        return None
    closing = _from_final_paragraph(text)
    if not closing or hedged(closing) or text.rfind(closing) < text.rfind(found) + len(found):
        return None
    return closing


# Where a sentence ends: a stop, "!" or "?" before white space, or a line break.
_CLOSED_SENTENCE_RE = re.compile(r"[.!?](?=\s)|\n")


def _before_the_last_sentence(text: str) -> str:
    """`text` up to the end of its last sentence that more text follows: what a text cut at its
    budget had closed before the cut ("The answer is 1" may have been cut before its "8")."""
    ends = [m.end() for m in _CLOSED_SENTENCE_RE.finditer(text)]
    return text[:next((e for e in reversed(ends) if text[e:].strip()), 0)]


def _closed_answer(text: str) -> str | None:
    """Rule: a text cut at its budget has a final answer only where it closed one before the cut:
    a whole `\\boxed{...}`, or an answer phrase ("the answer is", "####", "Answer:", bold) whose
    sentence more text follows. Its final paragraph, read by the last rule of a finished text, may
    be a sentence the cut left half written or one that only restates the problem's data ("Tom has
    3 apples and"): it is no answer."""
    found = _last_boxed(text)
    if found:
        return _restated(found)
    closed = _before_the_last_sentence(text)
    for rule in (_last_answer_is, _last_hashes, _last_answer_colon, _last_bold):
        found = rule(closed)
        if found:
            return _restated(found)
    return None


def extract_final_answer(text: str, cut: bool = False) -> str | None:
    """The final answer a response states, exactly as written, or None when it gives none; `cut`:
    the text was cut at its token budget (`_closed_answer`)."""
    if cut:
        return _closed_answer(text)
    for rule in (_last_boxed, _last_answer_is, _last_hashes, _last_answer_colon, _last_bold,
                 _from_final_paragraph):
        found = rule(text)
        if found:
            # Rule: "the answer is at most 1009" in the middle of an argument is a step of it, not
            # the answer, when the response goes on past it and closes by stating a value ("Thus,
            # the maximum possible number is 1009."): the closing statement is the answer. A
            # closing statement that is itself qualified, or is the same phrase, changes nothing.
            if rule is _last_answer_is:
                found = _superseded(text, found) or found
            return _restated(found)
    return None


# --- normalisation -------------------------------------------------------------------------

_TEXT_CMD_RE = re.compile(r"\\(?:text|textbf|textit|mathrm|mbox|textrm|operatorname)\s*\{([^{}]*)\}")
_SPACES_RE = re.compile(r"(?<!\\)\\[,;: ]|~|\\quad|\\qquad")
_DEGREE_RE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree|\\circ")
_UNIT_POWER_RE = re.compile(r"^\s*\^\s*\{?[23]\}?")
# A unit in upright type after a number ("600 \mathrm{~L}", "3 \mathrm{~m}^2", "\frac{600}{7} \mathrm{~km} /
# \mathrm{h}"), as one in `\text{}` is (`_drop_text`); not the upright constants i, e and d ("2 + 3\mathrm{i}").
_UPRIGHT_UNIT = r"\\mathrm\s*\{\s*[A-Za-z]{1,4}\s*\}(?:\s*\^\s*\{?-?[123]\}?)?"
_UNIT_LETTER_RE = re.compile(r"(?<=[\d}])\s*(?!\\mathrm\s*\{\s*[ied]\s*\})" + _UPRIGHT_UNIT
                             + r"(?:\s*(?:/|\\cdot)\s*" + _UPRIGHT_UNIT + ")*")
# Bold type is emphasis, not mathematics: "\mathbf{108}", "\boldsymbol{e f}".
_BOLD_MATH_RE = re.compile(r"\\(?:mathbf|boldsymbol|bm)\s*\{([^{}]*)\}")
_THOUSANDS_RE = re.compile(r"^-?\d{1,3}(?:(?:,|\{,\})\d{3})+(?:\.\d+)?$")
_SPACED_THOUSANDS_RE = re.compile(r"^-?\d{1,3}(?: \d{3})+(?:\.\d+)?$")
_LIST_WORD_RE = re.compile(r"(?<=[\d})\]])\s*,?\s*(?<![A-Za-z\\])(?:and|or)\s+(?=[-\d\\(\[{]|[A-Za-z]\s*=)")
_PLAIN_NUMBER_TOKEN_RE = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
_CHOICE_RE = re.compile(r"^\(?([A-Ea-e])\)?$")
_TRAILING_WORDS_RE = re.compile(r"^(.*?[\d}\)\]])\s+(?:[A-Za-z]{2,}\.?\s*)+$")


def _strip_edge_markup(s: str) -> str:
    # A loop, not an end-anchored regular expression: those are quadratic on long whitespace runs.
    while True:
        t = s.strip()
        t = t[2:] if t.startswith(("**", "__")) else t
        t = t[:-2] if t.endswith(("**", "__")) and not t.endswith("\\__") else t
        t = t[:-1] if t.endswith((".", ",", ";", ":", "!")) and not t.endswith(("\\.", "\\,", "\\;", "\\:", "\\!", "..")) else t
        if t == s:
            return s
        s = t


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
        box = box_at(s)
        if box and box.braced and box.end == len(s):
            s, changed = s[box.first:-1], True
        # Markdown and sentence punctuation around an answer are not part of it: "\(1\)**." from
        # "**The answer is \(1\)**." (the bold opened before the phrase the answer was cut from).
        edge = _strip_edge_markup(s)
        if edge != s:
            s, changed = edge, True
    return s


def _drop_text(s: str) -> str:
    """`\\text{...}`: units when a number stands beside it (dropped), else the answer (kept)."""
    outside = _TEXT_CMD_RE.sub(" ", s)
    if re.search(r"\d", outside):
        s = re.sub(r"\s*,?\s*\\text\s*\{\s*,?\s*(?:and|or)\s*\}\s*", ", ", s)  # "2 \text{ and } 3" lists two answers
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


# Rule: a computation of numbers written out to its value ("4 \times 5 \times 7! = 100800",
# "1+\binom{9}{5} \cdot 4!=3025") states that value, its last side: no variable is defined and none
# is left to compare. ("5!=120" is a factorial and "=", as in `_QUALIFIER_RE`.)
_COMPUTATION_RE = re.compile(r"(?:[-+*/^_{}()\[\]\d.\s!]|\\(?:[dt]?frac|binom|sqrt|cdot|times|div|pi)(?![A-Za-z]))+")


def _computed_value(s: str) -> str:
    if len(s) > MAX_PROSE or "=" not in s or _RELATION_RE.search(s.replace("!=", "! =")) or "," in s:
        return s
    sides = [side.strip() for side in re.sub(r"(?<=[\d)}])!=", "! =", s).split("=")]
    if all(sides) and all(_COMPUTATION_RE.fullmatch(side) and re.search(r"\d", side) for side in sides[:-1]):
        return sides[-1]
    return s


def _single_number_in_prose(s: str) -> str:
    """"Verna received 7.00 in change" -> "7.00": prose that states one number and qualifies it in no
    way (see `hedged`: "not 18", "at least 5", "18?" keep their words and are no value); left alone
    when there is math or several numbers."""
    if "\\" in s or re.search(r"[=+*/^<>()\[\]{}]|[A-Za-z]\d", s) or not re.search(r"[A-Za-z]{2,}", s) \
            or _qualifiers(s):  # "AZYUK2A": a digit inside a word is no number of the prose
        return s
    numbers = _PLAIN_NUMBER_TOKEN_RE.findall(s)
    if not numbers:
        # A count in words: "five integers", "exactly seven" (a number word and at most two words
        # more, nothing else: "one of them is 3" has a digit and stays prose)
        word = _NUMBER_WORD_RE.fullmatch(s.strip())
        return str(_NUMBER_WORDS.index(word.group(1).lower())) if word else s
    return numbers[0].rstrip(",") if len(numbers) == 1 else s


_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                 "fifteen sixteen seventeen eighteen nineteen twenty").split()
_NUMBER_WORD_RE = re.compile(r"(?i)(?:exactly\s+)?(" + "|".join(_NUMBER_WORDS) + r")(?:\s+[A-Za-z]+){0,2}")


# --- mathematics written with Unicode signs ----------------------------------------------------
#
# Rule: "√3", "2√(3)", "3π", "x ≤ 2", "−5", "2×3" are the LaTeX they stand for ("\sqrt{3}",
# "2\sqrt{3}", "3\pi", "x \le 2", "-5", "2\times 3"), on both sides: math-verify reads only the
# LaTeX. A root sign applies to the number, letter or bracketed group right after it.
_UNICODE_MATH = {"π": "\\pi ", "−": "-", "–": "-", "×": "\\times ", "·": "\\cdot ", "⋅": "\\cdot ",
                 "≤": "\\le ", "≥": "\\ge ", "≠": "\\ne ", "∞": "\\infty ", "∪": "\\cup ", "∈": "\\in "}
_UNICODE_ROOT_RE = re.compile(r"√\s*(?:\(([^()]{1,100})\)|\{([^{}]{1,100})\}|(\d+(?:\.\d+)?|[A-Za-z]))")


def _latex_signs(s: str) -> str:
    if len(s) > MAX_PROSE or not re.search("[√π−–×·⋅≤≥≠∞∪∈]", s):
        return s
    s = _UNICODE_ROOT_RE.sub(lambda m: "\\sqrt{" + next(g for g in m.groups() if g is not None).strip() + "}", s)
    for sign, latex in _UNICODE_MATH.items():
        s = s.replace(sign, latex)
    return " ".join(s.split())


# --- families of solutions with a free integer parameter ---------------------------------------
#
# Rule: "\frac{\pi}{6} + k\pi \text{ for } k \in \mathbb{Z}" and "x = \frac{1}{6}\pi + \pi n, n \in
# \mathbb{Z}" are the same family: the declaration of the parameter is dropped and the parameter
# is renamed k on both sides, so math-verify compares the expressions (sympy makes k\pi and \pi k
# equal). A parameter is declared ("k \in \mathbb{Z}", "k \text{ is an integer}", "for any integer
# k"), or, undeclared, is the one letter n, m or k multiplying \pi. Two representatives of one family
# that differ by a period ("\frac{7\pi}{6} + k\pi") are not recognised as equal.
_INTEGERS = r"(?:\\mathbb\s*\{?\s*Z\s*\}?|\\mathbf\s*\{\s*Z\s*\}|\\Z(?![A-Za-z])|ℤ)"
_DECL_SEP = r"(?:\s|,|;|\\q?quad|\\[,;: ]|~)*"
_LEAD_IN = r"(?:for|where|with)(?:\s+(?:all|any|every|some|each|an?))?(?:\s+integers?)?"
_PARAM_DECL_RES = (
    # "..., k \in \mathbb{Z}", "\text{ for } k \in \mathbb{Z}", "(n \in \mathbb{Z})", "k \text{ is an integer}"
    re.compile(_DECL_SEP + r"(?:\\(?:text|mbox|textrm)\s*\{\s*" + _LEAD_IN + r"\s*\}|(?<![A-Za-z\\])"
               + _LEAD_IN + r")?\s*\(?\s*([A-Za-z])\s*(?:\\in\s*" + _INTEGERS + r"|∈\s*" + _INTEGERS
               + r"|\\(?:text|mbox)\s*\{\s*(?:is\s+)?(?:an?\s+)?(?:arbitrary\s+|any\s+)?integers?\s*\})\s*\)?\s*\.?\s*$"),
    # "\text{ for any integer } k", "where k is an integer" (plain text)
    re.compile(_DECL_SEP + r"(?:\\(?:text|mbox|textrm)\s*\{\s*" + _LEAD_IN + r"\s*\}|(?<![A-Za-z\\])"
               + _LEAD_IN + r")\s*([A-Za-z])(?:\s+is\s+an?\s+(?:arbitrary\s+)?integer)?\s*\.?\s*$"),
)
_PI_PARAMETER_RE = re.compile(r"(?<![\\A-Za-z])([nmk])(?=\s*\\pi(?![A-Za-z]))|\\pi\s*([nmk])(?![A-Za-z])")


def _integer_parameter(s: str) -> str:
    letter = None
    tail = max(0, len(s) - DECL_TAIL)  # a declaration is short; searching only the tail keeps this linear
    for decl in _PARAM_DECL_RES:
        m = decl.search(s, tail)
        if m and m.start() > 0 and re.search(r"(?<![\\A-Za-z])" + m.group(1) + r"(?![A-Za-z])", s[:m.start()]):
            s, letter = s[:m.start()], m.group(1)
            break
    if letter is None:
        found = {a or b for a, b in _PI_PARAMETER_RE.findall(s)}
        if len(found) != 1:
            return s
        letter = found.pop()
    standalone = r"(?<![\\A-Za-z])%s(?![A-Za-z])"
    if letter == "k" or re.search(standalone % "k", s):
        return s
    return re.sub(standalone % letter, "k", s)


# --- functions: the name of the argument ------------------------------------------------------
#
# Rule: "f(y) = 1" and "f(x) = 1", "f(m) = m" and "f(n) = n", "a_k = 2^k" and "a_n = 2^n" define the
# same function or sequence: the letter of the argument is a bound name. When the gold and the
# answer both define functions of one argument ("f(n) = n, g(n) = 1"), each side with one letter,
# the answer is also compared with its letter renamed to the gold's (`comparison_forms`; not when
# the answer uses the gold's letter for something else). A gold that is an expression ("n^2")
# keeps its variable: "f(m) = m^2" is compared as written.
_DEFINITION_RE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]\s*(?:\(\s*([A-Za-z])\s*\)|_\{?([A-Za-z])\}?)\s*(?:=|\\equiv)")
_STANDALONE = r"(?<![\\A-Za-z]){}(?![A-Za-z])"


def _argument(s: str) -> str | None:
    """The one letter every function `s` defines takes as its argument, else None."""
    letters = {a or b for a, b in _DEFINITION_RE.findall(s)} if len(s) <= MAX_PROSE else set()
    return letters.pop() if len(letters) == 1 else None


def _argument_renamed(gold: str, answer: str) -> str | None:
    """The answer with its argument renamed to the gold's (the rule above), or None."""
    g, a = _argument(gold), _argument(answer)
    if g is None or a is None or g == a or re.search(_STANDALONE.format(g), answer):
        return None
    return re.sub(_STANDALONE.format(a), g, answer)


# --- a set written out in braces ---------------------------------------------------------------
#
# Rule: a solution set written out element by element, "\{1, 2\}", "\lbrace (1, 2) \rbrace", is the
# list of its elements ("1, 2", "(1, 2)"), on both sides of a comparison: math-verify compares
# lists without order, as sets, and a set of one tuple is otherwise no tuple to it. A set given by
# a condition ("\{n \mid n > 2\}", "\{x : x^2 = 1\}") or several sets ("\{1\}, \{2\}") are left alone.
def _unbrace_set(s: str) -> str:
    s = re.sub(r"\\lbrace(?![A-Za-z])", r"\\{", re.sub(r"\\rbrace(?![A-Za-z])", r"\\}", s)).strip()
    if len(s) > MAX_PROSE or not (s.startswith("\\{") and s.endswith("\\}")) or len(s) < 5:
        return s
    inner = s[2:-2]
    depth = 0
    for m in re.finditer(r"\\\{|\\\}", inner):
        depth += 1 if m.group() == "\\{" else -1
        if depth < 0:  # "\{1\}, \{2\}": the first brace closes before the end
            return s
    if depth or re.search(r"\\mid(?![A-Za-z])|\||:", inner):
        return s
    return inner.strip()


# --- a sign that stands for two values --------------------------------------------------------
#
# Rule: "x = 1 \pm \sqrt{2}" states two solutions, 1 + \sqrt{2} and 1 - \sqrt{2}: an item of an
# answer with one "±" (or "∓") is written out as the two items it stands for, on both sides of a
# comparison, so "10 \pm 2\sqrt{17}" equals the list "10 + 2\sqrt{17}, 10 - 2\sqrt{17}" in any order,
# and "\pm 18" is not 18. An item with several signs ("(\pm 1, \pm 2)": correlated or not?) is left
# to math-verify.
_PM_RE = re.compile(r"\\pm(?![A-Za-z])|±|\\mp(?![A-Za-z])|∓")


def _top_level_items(s: str) -> list[str]:
    """`s` split at the commas outside every bracket ((), [], {})."""
    items, depth, start = [], 0, 0
    for i, c in enumerate(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(s[start:i])
            start = i + 1
    return items + [s[start:]]


def _expand_pm(s: str) -> str:
    if len(s) > MAX_PROSE or not _PM_RE.search(s):
        return s
    out = []
    for item in _top_level_items(s):
        signs = list(_PM_RE.finditer(item))
        if len(signs) != 1:
            out.append(item.strip())
            continue
        m = signs[0]
        pair = ("+", "-") if m.group() in ("\\pm", "±") else ("-", "+")
        before, after = item[:m.start()].strip(), item[m.end():].strip()
        for sign in pair:
            if not before or before.endswith(("=", "(", "[", "{", "\\{")):  # "\pm 18", "x = \pm 3": a sign of its value
                out.append(f"{before}{' ' if before.endswith('=') else ''}{'' if sign == '+' else sign}{after}")
            else:
                out.append(f"{before} {sign} {after}")
    return ", ".join(out)


# --- sets of real numbers: intervals and inequalities -----------------------------------------
#
# Rule: an inequality in one variable states the set of values that satisfy it, as an interval
# does: "x > 2" is "(2, \infty)", "0 < t \le 4" is "(0, 4]", "x < -1 or x > 2" (also written with a
# comma or "\cup") is "(-\infty, -1) \cup (2, \infty)". When the gold is such a set (intervals, or
# an inequality) and the answer one too, in either notation and with any letter for the variable,
# the inequalities are also compared in interval notation (`comparison_forms`), and the answer's
# relation signs are not a bound on a value (`hedged`): "x > 5" stays wrong against the gold 5.
# A chain must run one way ("1 < x < 2", "2 > x > 1"); "x > 1 and x < 3", "x \ne 2", or two
# variables are not read.
_REL_TOKEN_RE = re.compile(r"\\(?:leqslant|geqslant|leq|geq|le|ge|lt|gt)(?![A-Za-z])|<|>|≤|≥")
_LESS = {"<": True, "\\lt": True, "\\le": False, "\\leq": False, "\\leqslant": False, "≤": False}
_GREATER = {">": True, "\\gt": True, "\\ge": False, "\\geq": False, "\\geqslant": False, "≥": False}
_UNION_SPLIT_RE = re.compile(r"\\cup(?![A-Za-z])|(?<![A-Za-z\\])or(?![A-Za-z])")
_VARIABLE_RE = re.compile(r"[A-Za-z](?:_\{?\w+\}?)?")
_IN_RE = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?\s*(?:\\in(?![A-Za-z])|∈)\s*")


def _ray(variable: str, op: str, bound: str, bound_first: bool) -> tuple[str, str] | None:
    """(left, right) ends of the interval `variable op bound` (or `bound op variable`)."""
    less = op in _LESS  # variable < bound, or bound < variable
    strict = _LESS.get(op, _GREATER.get(op))
    if less != bound_first:  # x < b, b > x: up to b
        return "(-\\infty", bound + (")" if strict else "]")
    return ("(" if strict else "[") + bound, "\\infty)"


def _interval_of(s: str) -> str | None:
    """Interval notation for `s` (normalised) when it is an inequality in one variable, else None."""
    if len(s) > MAX_PROSE or not _REL_TOKEN_RE.search(s) or re.search(r"=|\\ne|\\neq|≠|\band\b", s):
        return None
    parts, variables = [], set()
    for item in _top_level_items(s):
        for part in _UNION_SPLIT_RE.split(item):
            ops = [m.group() for m in _REL_TOKEN_RE.finditer(part)]
            pieces = [x.strip() for x in _REL_TOKEN_RE.split(part)]
            if not 2 <= len(pieces) <= 3 or not all(pieces):
                return None
            if len(pieces) == 2:
                (a, b), op = pieces, ops[0]
                if _VARIABLE_RE.fullmatch(a) and not _VARIABLE_RE.fullmatch(b):
                    variable, ends = a, _ray(a, op, b, bound_first=False)
                elif _VARIABLE_RE.fullmatch(b) and not _VARIABLE_RE.fullmatch(a):
                    variable, ends = b, _ray(b, op, a, bound_first=True)
                else:
                    return None
            else:
                a, variable, b = pieces
                if not _VARIABLE_RE.fullmatch(variable) or (ops[0] in _LESS) != (ops[1] in _LESS):
                    return None
                if ops[0] in _LESS:
                    ends = (("(" if _LESS[ops[0]] else "[") + a, b + (")" if _LESS[ops[1]] else "]"))
                else:
                    ends = (("(" if _GREATER[ops[1]] else "[") + b, a + (")" if _GREATER[ops[0]] else "]"))
            variables.add(variable)
            parts.append(f"{ends[0]}, {ends[1]}")
    return " \\cup ".join(parts) if len(variables) == 1 else None


def _is_interval_set(s: str) -> bool:
    """Whether `s` (normalised) is written in interval notation: "(2, \\infty)", "[0, 4) \\cup (5, 6]",
    "x \\in [1, 2]"."""
    s = _IN_RE.sub("", s.strip())
    if len(s) > MAX_PROSE or not s:
        return False
    for part in re.split(r"\\cup(?![A-Za-z])", s):
        part = part.strip()
        if len(part) < 5 or part[0] not in "([" or part[-1] not in ")]" or len(_top_level_items(part[1:-1])) != 2:
            return False
    return True


def _sets_of_reals(gold: str, answer: str) -> tuple[str, str] | None:
    """(gold, answer) both in interval notation when both state a set of reals and one of them is
    written as an inequality (the rule above), else None."""
    g, a = _interval_of(gold), _interval_of(answer)
    if a is None and g is None:
        return None
    g = g or (_IN_RE.sub("", gold) if _is_interval_set(gold) else None)
    a = a or (_IN_RE.sub("", answer) if _is_interval_set(answer) else None)
    return (g, a) if g and a else None


# --- percentages ------------------------------------------------------------------------------
#
# Rule: a percent sign is kept as a trailing "%" on the canonical form of a value ("62.5\%",
# "62.5 percent" -> "62.5%") and compared by `comparison_forms`: when only one side carries it, the
# value with the sign equals the other side if its number does (golds and answers to "what
# percent..." drop the sign: gold 62.5 vs "62.5%", gold "28\%" vs 28) or if its number / 100 does
# (gold 0.625 vs "62.5%", gold "62.5\%" vs 0.625). With the sign on both sides the numbers are
# compared; with it on neither, 0.625 and 62.5 differ. These are math-verify's own semantics.
_PERCENT_END_RE = re.compile(r"(?i)\s*(?:\\?%|\b(?:percent|per\s+cent|percentage|pct)\b)\s*$")


# Rule: a value stated exactly and rounded ("t = \\frac{3}{7} \\approx 0.43", "\\frac{145}{488} \\cdot 360
# \\approx 107") states both: the gold may be either (a gold that is itself approximate, or one value
# of a list, is compared as written).
_APPROX_RE = re.compile(r"\\approx(?![A-Za-z])|≈")


def _approximations(gold: str, answer: str) -> list[tuple[str, str]] | None:
    if len(answer) > MAX_PROSE or not _APPROX_RE.search(answer) or _APPROX_RE.search(gold) \
            or len(_top_level_items(answer)) > 1 or _RELATION_RE.search(answer):
        return None
    parts = [part.rsplit("=", 1)[-1].strip() for part in _APPROX_RE.split(answer)]
    return [(gold, answer)] + [(gold, part) for part in parts if part]


def comparison_forms(gold: str, answer: str) -> list[tuple[str, str]]:
    """The (gold, answer) pairs, normalised, that decide a comparison: the answer is right when any
    of them is equal (the percent rule above); a single pair for everything else."""
    approx = _approximations(gold, answer)
    if approx:
        return approx
    reals = _sets_of_reals(gold, answer)
    if reals:
        return [(gold, answer), reals]
    renamed = _argument_renamed(gold, answer)
    if renamed:
        return [(gold, answer), (gold, renamed)]
    comma = _decimal_comma(gold, answer) or _decimal_comma(answer, gold)
    if comma:
        return [(gold, answer), comma if _decimal_comma(gold, answer) else comma[::-1]]
    g_pct, a_pct = gold.endswith("%"), answer.endswith("%")
    g, a = gold.rstrip("%"), answer.rstrip("%")
    if g_pct == a_pct:
        return [(g, a)]
    if a_pct:
        return [(g, a), (g, _hundredth(a))]
    return [(g, a), (_hundredth(g), a)]


# Rule: "1,22" against "1.22" is a decimal comma: one comma between digits, not followed by exactly
# three digits after a non-zero (then it separates thousands) nor by a space (then it separates list items), when
# the other side is a decimal number. "1,2" against "1, 2" stays a list.
_DECIMAL_COMMA_RE = re.compile(r"-?(?:0,\d+|\d+,(?:\d{1,2}|\d{4,}))")  # "0,111" has no thousands


def _decimal_comma(one: str, other: str) -> tuple[str, str] | None:
    """(one with a decimal point, other) when `one` is written with a decimal comma, else None."""
    if _DECIMAL_COMMA_RE.fullmatch(one) and re.fullmatch(r"-?\d*\.\d+", other):
        return one.replace(",", "."), other
    return None


def _hundredth(value: str) -> str:
    try:
        d = Decimal(value)
    except InvalidOperation:
        return "\\frac{" + value + "}{100}"
    return format((d / 100).normalize(), "f") if d.is_finite() else value


@lru_cache(maxsize=65536)
def normalize_answer(s: str) -> str:
    """Canonical form of an answer string for comparison (see the module docstring)."""
    s = _unwrap(_latex_signs(_strip_hope(s)))
    s = _drop_remarks(s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\!", "")
    s = s.replace("\\left", "").replace("\\right", "")
    s = _integer_parameter(" ".join(s.split()))  # single spaces: its patterns then cannot backtrack
    s = _SPACES_RE.sub(" ", s)
    s = s.replace("\\$", "").replace("$", "")
    s = re.sub(r"(?<!\\)\\(?=\d)", "", s)  # "\15": a dollar sign that lost its "$" (not a row break: "1 \\\\ 0")
    s = _UNIT_LETTER_RE.sub("", s)
    s = re.sub(r"\\(?:mathrm|mathit|rm)\s*\{\s*([A-Za-z])\s*\}", r"\1", s)
    s = _BOLD_MATH_RE.sub(lambda m: re.sub(r"(?<=\d)\s+(?=\d)", "", m.group(1)), s)  # "\mathbf{1 5}" is 15
    s = _drop_text(s)
    s = _DEGREE_RE.sub("", s)
    s = _expand_pm(_unbrace_set(s))
    # "5, 15, and 25", "x = -1 or x = -9": items of one list, written as math-verify lists them
    s = _LIST_WORD_RE.sub(", ", s)
    s = _computed_value(" ".join(s.split()))
    m = _PERCENT_END_RE.search(s, max(0, len(s) - DECL_TAIL))
    percent = m is not None
    s = (s[:m.start()] if m else s).replace("\\%", "").replace("%", "")
    if len(s) <= MAX_PROSE:
        s = _single_number_in_prose(s)
        m = _TRAILING_WORDS_RE.match(s)
        if m and not re.search(r"(?<!\\)\b[A-Za-z]{2,}", m.group(1)) and not _qualifiers(s):
            s = m.group(1)
    s = s.strip()
    # Trailing punctuation goes, an ellipsis stays: "1, 2, 3, ..." is a list that goes on.
    s = s if s.endswith("..") else s.rstrip(".,;:!").strip()
    s = _unwrap(s)
    if _THOUSANDS_RE.match(s):
        s = s.replace("{,}", "").replace(",", "")
    elif _SPACED_THOUSANDS_RE.match(s):
        s = s.replace(" ", "")
    choice = _CHOICE_RE.match(s)
    if choice:
        s = choice.group(1).upper()
    return s + "%" if percent and s else s
