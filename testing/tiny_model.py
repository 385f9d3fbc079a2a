"""A tiny random Qwen2 checkpoint with a locally built tokenizer, made in seconds.

Tests and benchmarks need a real model that vLLM loads, without any download: a 4-layer Qwen2
(hidden size 128, about 1M parameters) with random weights, and a byte-level BPE tokenizer
(lab/tokenizer.py, the world's builder) trained on a few generated sentences (digits one per
token) that carries the ChatML chat template.
The text it writes is noise, but everything around it — chat templates, continuation of a partial
assistant turn, seeds, prefix caching, token counts — is exercised for real.
"""
from __future__ import annotations

import random
from pathlib import Path


def _corpus(seed: int) -> list[str]:
    """Generated sentences to train the BPE merges on (words, arithmetic, step layout)."""
    rng = random.Random(seed)
    names = ["Tom", "Ann", "Sam", "Mia", "Leo", "Eva"]
    things = ["apples", "pens", "books", "coins", "cards", "eggs"]
    lines = [
        "system", "user", "assistant", "You are a helpful assistant.",
        "Solve the problem step by step. Put the final answer in \\boxed{}.",
        "The answer is correct. The paragraph is wrong. Let's verify each step.",
    ]
    for _ in range(400):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        name, thing = rng.choice(names), rng.choice(things)
        lines.append(f"{name} has {a} {thing}. Then gets {b} more. How many {thing} now?")
        lines.append(f"Step 1: {a} + {b} = {a + b}.\n\nSo the answer is \\boxed{{{a + b}}}.")
    return lines


THINK_TOKENS = ("<think>", "</think>")


def build_tokenizer(vocab_size: int = 512, seed: int = 0, extra_tokens: tuple[str, ...] = ()):
    """A byte-level BPE `PreTrainedTokenizerFast` with ChatML special tokens and chat template: the
    world's builder (digits one per token) on a small generated corpus."""
    from lab.tokenizer import build_bpe_tokenizer

    return build_bpe_tokenizer(_corpus(seed), vocab_size=vocab_size, extra_tokens=extra_tokens)


def _keep_in_text(path: Path, tokens: tuple[str, ...]) -> None:
    """Mark `tokens` not special in the saved tokenizer, so decoding keeps them in the text (as
    DeepSeek-R1's and Qwen3's `<think>` tokens are)."""
    import json

    for name, entries in (("tokenizer.json", lambda d: d["added_tokens"]),
                          ("tokenizer_config.json", lambda d: d.get("added_tokens_decoder", {}).values())):
        data = json.loads((path / name).read_text())
        for entry in entries(data):
            if entry["content"] in tokens:
                entry["special"] = False
        (path / name).write_text(json.dumps(data, indent=2, ensure_ascii=False))


def build_tiny_model(
    path: str | Path,
    *,
    hidden_size: int = 128,
    num_layers: int = 4,
    vocab_size: int = 512,
    dtype: str = "bfloat16",
    seed: int = 0,
    reasoning: bool = False,
) -> Path:
    """Write a random tiny Qwen2 checkpoint (config, safetensors, tokenizer, template) to `path`.

    `reasoning`: a stand-in for a reasoning judge under structured outputs. Its tokenizer holds
    `<think>` and `</think>` as tokens of their own (ids 3 and 4, kept in decoded text) and every
    logit is 0 (the final norm's weight is zero), so greedy decoding takes the lowest id the forced
    text allows: the think tags as their own tokens, as a reasoning model writes them (vLLM's
    reasoning parsers count the thought's tokens between them).

    The same arguments give the same weights and tokenizer. Returns the absolute path.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    path = Path(path).resolve()
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(vocab_size=vocab_size, seed=seed, extra_tokens=THINK_TOKENS if reasoning else ())
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(
        # Round the embedding table up to a multiple of 64, as real checkpoints do.
        vocab_size=-(-len(tokenizer) // 64) * 64,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 3,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        # Large random weights give peaked, prompt-dependent next-token distributions, so
        # different prompts (or seeds) really give different texts; the usual 0.02 gives
        # near-uniform logits, where the sampled text depends on the seed alone.
        initializer_range=0.2,
        bos_token_id=pad_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    if reasoning:
        with torch.no_grad():
            model.model.norm.weight.zero_()
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    if reasoning:
        _keep_in_text(path, THINK_TOKENS)
    return path


if __name__ == "__main__":
    import sys

    print(build_tiny_model(sys.argv[1] if len(sys.argv) > 1 else "tiny-model"))
