"""`--protocol processbench-official`: a critic evaluated as QwenLM/ProcessBench's `code/run_eval.py`
does it, so that `judge` + `evaluate` give numbers that sit beside the published ones.

- Template: the benchmark's critique template (prompts/judge_processbench.txt is its text), the
  problem inserted as given, the paragraphs tagged from 0, one user message, no system message.
- Sampling: greedy with one vote; with `--votes N`, N samples of one request (temperature 0.7,
  top-p 0.8, top-k 20 when the model's name contains "Qwen2.5-Math"; temperature 1, top-p 0.9
  otherwise); 32,768 tokens when the name contains "QwQ", else 8,192; seed 42. The script tests
  its `--model_path` the same way; here the name is `--model` as given (the served name with
  `--base-url`).
- Extraction: the last `\\boxed{...}` by the script's regex (no `}` inside), stripped, `int()`;
  no box or no integer is a miss.
- Reasoning: the script reads the whole generated text, a reasoning model's thought included: so
  does this protocol (never split; over HTTP, a server's split thought and answer joined again).
- Voting: critiques without a box are dropped, the extracted strings are counted (not their
  integers: "3" and "03" are two answers), `Counter.most_common` wins (the first seen on a tie),
  then `int()`.

The script's prediction may be any integer. A first error of this project lies in -1..n-1, so a
prediction outside it is recorded as `judge.first_error: null` (a miss either way: no label
equals it) with the prediction kept in `judge.prediction` and each vote's extraction in
`judge.extracted`. This reading guesses where the strict one refuses (two different boxes: the
last wins): it is for measuring critics, never for making labels.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any

from prm_annotate.engines.sampling import Sampling
from prm_annotate.judging.protocols import JudgeProtocol, Reading
from prm_annotate.judging.styles import JudgeStyle

# run_eval.py's `extract_answer`, to the letter.
BOXED = re.compile(r"\\boxed\{([^}]*)\}")
SEED = 42


def extract_answer(text: str) -> str | None:
    matches = BOXED.findall(text)
    return matches[-1].strip() if matches else None


def as_int(answer: str | None) -> int | None:
    try:
        return int(answer)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def official_prediction(extracted: list[str | None]) -> int | None:
    """The script's prediction from each critique's extraction (one critique: its own)."""
    found = [e for e in extracted if e is not None]
    if not found:
        return None
    return as_int(Counter(found).most_common(1)[0][0])


def read_official(texts: list[str], n_steps: int, style: JudgeStyle, cut: Any = ()) -> Reading:
    """The script reads every critique whole, cut or not (`cut` is not looked at)."""
    def a_step(value: int | None) -> int | None:
        return value if value is not None and -1 <= value < n_steps else None

    extracted = [extract_answer(t) for t in texts]
    votes: list[int | None] = []
    errors: list[str] = []
    for answer in extracted:
        value = as_int(answer)
        if answer is None:
            errors.append("no \\boxed{} answer")
        elif value is None:
            errors.append(f"the answer {answer!r} is not an integer")
        elif a_step(value) is None:
            errors.append(f"index {value} is outside -1..{n_steps - 1}")
        votes.append(a_step(value))
    prediction = official_prediction(extracted)
    first_error = a_step(prediction)
    return Reading(first_error, votes, errors, {"prediction": prediction, "extracted": extracted})


def official_sampling(options: Any, model: str) -> Sampling:
    # run_eval.py's own values, fixed by the protocol (not defaults: --max-tokens is refused here).
    max_tokens = 32768 if "QwQ" in model else 8192
    if options.votes == 1:
        return Sampling(temperature=0.0, top_p=1.0, top_k=0, max_tokens=max_tokens, seed=SEED)
    if "Qwen2.5-Math" in model:
        return Sampling(temperature=0.7, top_p=0.8, top_k=20, max_tokens=max_tokens, seed=SEED)
    return Sampling(temperature=1.0, top_p=0.9, top_k=0, max_tokens=max_tokens, seed=SEED)


PROTOCOL = JudgeProtocol(
    "processbench-official", "evaluating critics: QwenLM/ProcessBench run_eval.py's template, sampling, last-box "
    "extraction and voting", "processbench", official_sampling, read_official,
    fixed=("prompt", "style", "sampling", "constrained", "reasoning"), problem_as_given=True, one_request=True)
