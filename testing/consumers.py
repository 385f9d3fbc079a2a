"""The trainers that read `export`'s formats, as far as they place labels, and the tokenizers to try them with.

OpenRLHF is a whole training stack (DeepSpeed, Ray, vLLM of its own), not installed beside this
project, and its PRM trainer was dropped after 0.9.5. `openrlhf_item` and `openrlhf_prm_loss` restate, line by
line, what openrlhf/datasets/process_reward_dataset.py (ProcessRewardDataset.__getitem__) and
openrlhf/models/loss.py (PRMLoss.forward) do in 0.9.5, with openrlhf.utils.convert_token_to_id:
  - the placeholder and each reward token are encoded alone; each must be one token (assert);
  - the input is tokenized without special tokens, truncated at max_length;
  - label values are "+"/"-" (mapped to their token ids, a long tensor) or floats (a float tensor);
  - labels = full_like(input_ids, -100); labels[input_ids == placeholder_id] = values[:count];
  - the loss takes logits and labels where input_ids == placeholder_id, keeps the reward tokens'
    logits and maps the labels to their index, then cross-entropy (mean: NaN over no token).
"""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from testing.labelled_fixtures import processbench

LLAMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '[' + message['role'] + '] ' + message['content'] + eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '[assistant] ' }}{% endif %}"
)


def build_sentencepiece_tokenizer(path: Path) -> Path:
    """A Llama-style SentencePiece BPE (byte fallback, "▁" word starts, whitespace pieces) trained in
    seconds on the vendored ProcessBench text with Math-Shepherd tags, saved as a transformers
    LlamaTokenizer. Indented lines make "▁▁" an early merge, as in Mistral's and Llama's vocabularies."""
    import sentencepiece as spm
    from transformers import AutoTokenizer

    lines = []
    for split in ("gsm8k", "math"):
        for r in processbench(split):
            lines.append(r["problem"])
            lines += [s.strip() + " ки" for s in r["steps"]]
            lines += [s.strip() + " +" for s in r["steps"][:2]] + [s.strip() + " -" for s in r["steps"][2:3]]
            lines += ["  " + s.strip() for s in r["steps"][:3]] + ["    " + s for s in r["steps"][3:5]]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, vocab_size=2000, model_type="bpe", byte_fallback=True,
        character_coverage=1.0, split_digits=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        normalization_rule_name="identity", remove_extra_whitespaces=False, allow_whitespace_only_pieces=True,
        minloglevel=2)
    raw = path / "sentencepiece"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "tokenizer.model").write_bytes(model.getvalue())
    (raw / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
         "add_bos_token": True, "legacy": False}))
    tok = AutoTokenizer.from_pretrained(raw)  # converted to a fast tokenizer from the .model file
    tok.chat_template = LLAMA_CHAT_TEMPLATE
    tok.save_pretrained(path)
    return path


def convert_token_to_id(token: str, tokenizer: Any) -> int:
    ids = tokenizer.encode(token, add_special_tokens=False)
    assert len(ids) == 1, f"OpenRLHF would assert: {token!r} is {len(ids)} tokens"
    return ids[0]


def openrlhf_item(row: dict[str, Any], tokenizer: Any, placeholder: str, reward_tokens: list[str] | None,
                  max_length: int = 1 << 20) -> tuple[Any, Any]:
    """ProcessRewardDataset.__getitem__ (input_key=input, label_key=label): input_ids and labels."""
    import torch

    placeholder_id = convert_token_to_id(placeholder, tokenizer)
    input_ids = tokenizer(row["input"], max_length=max_length, padding=False, truncation=True, return_tensors="pt",
                          add_special_tokens=False)["input_ids"]
    values = row["label"]
    if isinstance(values[0], str):
        assert reward_tokens is None or all(v in reward_tokens for v in values)
        label_tensor = torch.tensor([convert_token_to_id(v, tokenizer) for v in values], dtype=input_ids.dtype)
    else:
        label_tensor = torch.tensor(values, dtype=torch.float)
    mask = input_ids == placeholder_id
    labels = torch.full_like(input_ids, -100)
    labels[mask] = label_tensor[..., : mask.sum(dim=-1).max()]
    return input_ids, labels


def openrlhf_prm_loss(input_ids: Any, logits: Any, labels: Any, placeholder_id: int, reward_token_ids: list[int]) -> Any:
    """PRMLoss.forward for hard labels with --reward_tokens set."""
    import torch

    mask = input_ids == placeholder_id
    logits = logits[mask].squeeze(1)[..., reward_token_ids]
    labels = labels[mask]
    for i, token in enumerate(reward_token_ids):
        labels = torch.where(labels == token, i, labels)
    return torch.nn.functional.cross_entropy(logits, labels, ignore_index=-100)


def qwen_prm_positions(row: dict[str, Any], tokenizer: Any) -> list[int]:
    """Qwen2.5-Math-PRM's reading: the chat template's text, then the positions of `<extra_0>`'s id."""
    step_sep_id = tokenizer.encode("<extra_0>")[0]
    ids = tokenizer(tokenizer.apply_chat_template(row["messages"], tokenize=False), add_special_tokens=False)["input_ids"]
    return [i for i, t in enumerate(ids) if t == step_sep_id]


def shepherd_token_labels(row: dict[str, Any], tokenizer: Any, tag: str = "ки") -> list[bool]:
    """Math-Shepherd's reward-model reading: the tag's id in the tokenized input, and at the same
    positions of the tokenized label text, the "+" or "-" token."""
    tag_id = tokenizer.encode(f" {tag}", add_special_tokens=False)[-1]
    plus, minus = (tokenizer.encode(f" {m}", add_special_tokens=False)[-1] for m in "+-")
    ids = tokenizer(row["input"], add_special_tokens=False)["input_ids"]
    label_ids = tokenizer(row["label"], add_special_tokens=False)["input_ids"]
    assert len(ids) == len(label_ids)
    out = []
    for i, t in enumerate(ids):
        if t == tag_id:
            assert label_ids[i] in (plus, minus)
            out.append(label_ids[i] == plus)
    return out
