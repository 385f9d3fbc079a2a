"""The one builder of small byte-level BPE tokenizers: the arithmetic world's shipped tokenizer
(lab/world/train.py, reproduced bit for bit: tests/test_world.py) and the tiny test model's
(testing/tiny_model.py) are this function on different corpora.

Digits are always one token each (as in Qwen2's tokenizer), so the tiny models learn arithmetic
digit by digit instead of memorising number tokens. The chat template is ChatML; a final assistant
message is left open when `add_generation_prompt` is false, so `continue_final_message` (how
rollouts extend a partial answer) works: nothing follows the partial text.
"""
from __future__ import annotations

from typing import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# Qwen2's pre-tokenizer pattern: `\p{N}` alone makes every digit its own piece.
PRETOKENIZE_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] -}}"
    "{%- if not (loop.last and message['role'] == 'assistant' and not add_generation_prompt) -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def build_bpe_tokenizer(texts: Iterable[str], vocab_size: int = 1024, extra_tokens: tuple[str, ...] = ()):
    """Train the BPE on `texts` and wrap it as a transformers `PreTrainedTokenizerFast`.
    `extra_tokens` take the ids right after the ChatML ones, as tokens of their own."""
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS + list(extra_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )
