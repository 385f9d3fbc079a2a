"""A reasoning model's output split into its reasoning and its answer, before anything reads it.

Reasoning judges (QwQ, DeepSeek-R1 distills, Qwen3 thinking) write `<think>…</think>` before the
answer; `vllm serve --reasoning-parser NAME` returns the two apart (`reasoning`, or
`reasoning_content` on older servers and hosted APIs). A request's `reasoning` names how its
output is split, the same way in process and over HTTP:

- a vLLM reasoning parser (`deepseek_r1`, `qwen3`, ... as the installed vLLM registers them in
  `vllm.reasoning`): in process the engine runs that parser on the finished output, as `vllm
  serve` does (its split and its reasoning-token count); over HTTP the server's own parser has
  split it, and the engine reads the fields;
- `think`: the plain split below, with DeepSeek-R1's rule (what vLLM's `deepseek_r1` parser
  does, without needing a tokenizer whose vocabulary holds the tags).

Where they differ, an answer that thinks again after a thought the template opened
(`…</think>A<think>…</think>B`), the plain split is taken in process: vLLM's parsers begin the
reasoning at the later `<think>` and drop the first answer. Over HTTP a server's parser has split
it already, and the first answer is lost before the engine sees it: serve such a model without
`--reasoning-parser` and read it with `--reasoning think` (split here) to have it refused.

`split_think` is thinking/tags.py's one reading of the tags under a prompt that may have opened the
thought (`read_trace(text, OPEN)`): anything before a first `<think>` is no part of the reasoning,
the reasoning runs to the first `</think>`, the answer is what follows. An output with no
`</think>` is reasoning with no answer (a template may open the thought in the prompt, so a missing
`<think>` says nothing): it is never read as an answer, since a draft in an unfinished thought would
then pass for the verdict.

Nothing here imports vLLM at module level.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from prm_annotate.thinking.tags import END, OPEN, START, read_trace, thinks_again

THINK = "think"


@dataclass(frozen=True)
class Split:
    reasoning: str | None  # None: the output had no reasoning
    answer: str | None  # None: no answer after the reasoning (an unfinished thought)
    reasoning_tokens: int | None = None  # None: not known


def split_think(text: str) -> Split:
    """The plain `<think>…</think>` split (DeepSeek-R1's rule, as vLLM's parser applies it)."""
    trace = read_trace(text, OPEN)
    return Split(trace.thought, (trace.answer or None) if trace.finished else None)


def template_thinks(chat_template: str | None) -> bool:
    """Whether a chat template is a reasoning model's: it writes or strips `<think>` blocks
    (Qwen3, QwQ, DeepSeek-R1 distills do)."""
    return bool(chat_template) and (START in chat_template or END in chat_template)


class TokenSplitter:
    """Splits finished outputs in process with the tokenizer: vLLM's parser of that name, or
    `think` (the plain split; its reasoning tokens counted from the token ids up to `</think>`)."""

    def __init__(self, name: str, tokenizer: Any) -> None:
        self.name, self.tokenizer = name, tokenizer
        self._parser = None
        if name != THINK:
            from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
            from vllm.reasoning import ReasoningParserManager

            parser_cls = ReasoningParserManager.get_reasoning_parser(name)  # KeyError names the registered ones
            self._parser = parser_cls(tokenizer)
            # The parsers take the request for its options (none of which the judge sets).
            self._request = ChatCompletionRequest(messages=[{"role": "user", "content": ""}], model="")

    def split(self, text: str, token_ids: Sequence[int]) -> Split:
        split = split_think(text)
        if self._parser is not None and not (split.answer is not None and thinks_again(split.answer)):
            reasoning, answer = self._parser.extract_reasoning(text, self._request)
            return Split(reasoning, answer, int(self._parser.count_reasoning_tokens(list(token_ids))))
        # An answer that thinks again under a thought the template opened ("…</think>A<think>…</think>B"):
        # vLLM's parsers start the reasoning at the second `<think>` and drop the first answer, so the
        # plain split is kept instead: both answers, for the reader to refuse when they differ.
        return Split(split.reasoning, split.answer, self._thought_tokens(text, list(token_ids), split))

    def _thought_tokens(self, text: str, ids: list[int], split: Split) -> int:
        """Tokens up to the end of `</think>` (all of them for an unfinished thought)."""
        if split.reasoning is None:
            return 0
        if split.answer is None and END not in text:
            return len(ids)
        end = text.index(END) + len(END)
        lo, hi = 0, len(ids)  # the fewest tokens whose text reaches past `</think>`
        while lo < hi:
            mid = (lo + hi) // 2
            if len(self.tokenizer.decode(ids[:mid], skip_special_tokens=False)) >= end:
                hi = mid
            else:
                lo = mid + 1
        return lo


def reasoning_parsers() -> list[str]:
    """The reasoning parsers the installed vLLM registers ([] without vLLM)."""
    try:
        from vllm.reasoning import ReasoningParserManager
    except ImportError:
        return []
    return sorted(ReasoningParserManager.list_registered())
