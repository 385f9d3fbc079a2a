"""Tiny random PRMs built with the conventions of the PRMs users compare against, and a Hugging
Face cache holding them under a hub id, laid out as huggingface_hub lays one out.

- `build_qwen_card_prm`: Qwen2.5-Math-PRM's conventions. A `Qwen2ForProcessRewardModel`
  (config.json names the architecture and has no `prm_annotate` block, as the hub's checkpoint),
  `<extra_0>` one special token, no BOS, and a ChatML template that, like Qwen2.5's for system, user
  and assistant turns, closes every turn with `<|im_end|>\\n`.
- `build_shepherd_lm`: math-shepherd-mistral-7b-prm's. A `MistralForCausalLM` and a
  SentencePiece-like BPE tokenizer (a "▁" for each space and one before the text, digits and
  bytes by fallback, a BOS added to every encoding), in which " ки", " +" and " -" are one token
  each, as in Mistral's.
Large random weights (initializer_range 0.2) so the scores at the tags differ from one another; a
head size of 32 (vLLM's CPU attention has no kernel for 16).
"""
from __future__ import annotations

import hashlib
import os
import random
import shutil
from pathlib import Path

# Renders as Qwen2.5's template does for a system, user and assistant turn (written here, not copied).
QWEN_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def build_qwen_card_prm(path: str | Path, *, hidden_size: int = 128, num_layers: int = 2, seed: int = 0) -> Path:
    import torch
    from transformers import Qwen2Config

    from prm_annotate.prm.checkpoint import build_model
    from testing.tiny_model import build_tokenizer

    path = Path(path).resolve()
    tokenizer = build_tokenizer(vocab_size=512, seed=seed)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<extra_0>"]})
    tokenizer.chat_template = QWEN_TEMPLATE
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(vocab_size=-(-len(tokenizer) // 64) * 64, hidden_size=hidden_size,
                         intermediate_size=hidden_size * 3, num_hidden_layers=num_layers, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=4096, initializer_range=0.2,
                         tie_word_embeddings=False, eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
                         pad_token_id=pad_id, bos_token_id=None)
    torch.manual_seed(seed)
    build_model(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _shepherd_corpus(seed: int) -> list[str]:
    rng = random.Random(seed)
    names, things = ["Janet", "Tom", "Ann", "Sam"], ["eggs", "ducks", "apples", "coins"]
    lines = ["+ - ки", "The answer is: ки"]
    for _ in range(300):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        name, thing = rng.choice(names), rng.choice(things)
        lines.append(f"{name} has {a} {thing} and gets {b} more. How many {thing} now? "
                     f"Step 1: {name} has {a} + {b} = {a + b} {thing}. ки\nStep 2: The answer is: {a + b} ки")
    return lines


def build_shepherd_tokenizer(seed: int = 0):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    # Newlines are pieces of their own (SentencePiece's <0x0A>), so no merge joins a tag to the next line.
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split("\n", behavior="isolated"),
                                                 pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")])
    tok.decoder = decoders.Sequence([decoders.ByteFallback(),
                                     decoders.Metaspace(replacement="▁", prepend_scheme="first")])
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tok.train_from_iterator(_shepherd_corpus(seed), trainer=trainers.BpeTrainer(
        vocab_size=600, special_tokens=specials, show_progress=False))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   clean_up_tokenization_spaces=False)


def build_shepherd_lm(path: str | Path, *, hidden_size: int = 64, num_layers: int = 2, seed: int = 0) -> Path:
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    path = Path(path).resolve()
    tokenizer = build_shepherd_tokenizer(seed)
    config = MistralConfig(vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
                           num_hidden_layers=num_layers, num_attention_heads=4, num_key_value_heads=2,
                           max_position_embeddings=2048, initializer_range=0.2, tie_word_embeddings=False,
                           bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(seed)
    MistralForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def hub_cache(cache: str | Path, repo_id: str, folder: str | Path, revision: str | None = None) -> Path:
    """Put `folder`'s files into the Hugging Face cache `cache` (HF_HUB_CACHE) as the snapshot of
    `repo_id` that refs/main points at: models--Org--Name/{blobs/<hash>, snapshots/<rev>/<file>
    -> ../../blobs/<hash>, refs/main}. Returns the snapshot folder."""
    repo = Path(cache) / ("models--" + repo_id.replace("/", "--"))
    revision = revision or hashlib.sha1(repo_id.encode()).hexdigest()
    snapshot = repo / "snapshots" / revision
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    for file in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        blob = repo / "blobs" / hashlib.sha256(file.read_bytes()).hexdigest()
        if not blob.exists():
            shutil.copyfile(file, blob)
        link = snapshot / file.relative_to(folder)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


def score_by_hub_id(hub: Path, repo_id: str, rows: list[dict], tmp: Path, *args: str,
                    timeout: float = 600) -> tuple[list[dict], dict]:
    """`prm-annotate score --model repo_id` (a child process, offline, `hub` its Hugging Face cache)
    over `rows`: its records and its manifest's settings."""
    import subprocess
    import sys

    import orjson

    from prm_annotate.io.output import sidecar
    from testing.jsonl_files import read_jsonl, write_jsonl

    src = write_jsonl(tmp / "responses.jsonl", rows)
    out = tmp / "scored.jsonl"
    env = {**os.environ, "HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-m", "prm_annotate", "score", str(src), "-o", str(out), "--model", repo_id,
                          "--quiet", *args], capture_output=True, text=True, timeout=timeout, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    manifest = orjson.loads(sidecar(str(out), "manifest.json").read_bytes())
    return read_jsonl(out), manifest["runs"][-1]["settings"]


def assert_step_scores(scored: list[dict], rows: list[dict], reference: list[list[float]], tolerance: float,
                       model: str, scorer: str) -> None:
    """Every record of `rows`, in order, with one score per step, each within `tolerance` of the
    reference's; and the scores not all alike (a constant head would pass vacuously)."""
    import pytest

    assert [r["id"] for r in scored] == [r["id"] for r in rows]
    for rec, ref in zip(scored, reference):
        assert len(rec["prm"]["scores"]) == len(rec["steps"]) == len(ref)
        assert rec["prm"]["scores"] == pytest.approx(ref, abs=tolerance)
        assert rec["prm"]["model"] == model and rec["prm"]["scorer"] == scorer
    assert len({round(s, 3) for rec in scored for s in rec["prm"]["scores"]}) > 10
