"""`export --tokenizer`: every label lands on the token that ends its step, read the way each consumer
reads it (TRL's tokenize_row, OpenRLHF's ProcessRewardDataset + PRMLoss as restated in consumers.py,
Qwen's <extra_0>, Math-Shepherd's tag), with a SentencePiece and a byte-level BPE tokenizer; the cases
that break a consumer (a two-token placeholder, a placeholder split in context, a step ending in
whitespace) are refused with exit 2 or fixed. `--format tokens` trains a token classifier; `--format hf`
is a DatasetDict with a card from the manifests, split by problem."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from testing.consumers import (
    build_sentencepiece_tokenizer,
    openrlhf_item,
    openrlhf_prm_loss,
    qwen_prm_positions,
    shepherd_token_labels,
)
from testing.labelled_fixtures import (
    build,
    judge_of,
    mc_of,
    mixed_records,
    processbench,
    write_jsonl,
)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
runner = CliRunner()
# ProcessBench records whose steps end in a space (9 of the 300 vendored): the tag would follow it.
# The vendored ProcessBench responses with a step that ends in whitespace (found, not listed by hand).
WHITESPACE_IDS = {r["id"] for split in ("gsm8k", "math") for r in processbench(split)
                  if any(s != s.rstrip() for s in r["steps"])}
assert len(WHITESPACE_IDS) >= 3  # the fixtures must hold the case this file tests


@pytest.fixture(scope="module")
def records() -> list[dict]:
    """Consensus records of mixed ProcessBench responses plus the ones with trailing whitespace."""
    rows = mixed_records(16)
    rows += [r for split in ("gsm8k", "math") for r in processbench(split) if r["id"] in WHITESPACE_IDS]
    consensus = build(rows)["consensus"]
    for r in rows:  # the whitespace records always, with their gold labels
        if r["id"] in WHITESPACE_IDS and all(c["id"] != r["id"] for c in consensus):
            kept = len(r["steps"]) if r["label"] == -1 else r["label"] + 1
            consensus.append({"id": r["id"], "problem": r["problem"], "steps": r["steps"][:kept],
                              "labels": [True] * (kept - (r["label"] != -1)) + [False] * (r["label"] != -1),
                              "first_error": r["label"], "mc": mc_of(r["label"], len(r["steps"])),
                              "judge": judge_of(r["label"])})
    return consensus


@pytest.fixture(scope="module")
def consensus_file(records, tmp_path_factory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("c") / "consensus.jsonl", records)


@pytest.fixture(scope="module")
def sp_dir(tmp_path_factory) -> Path:
    return build_sentencepiece_tokenizer(tmp_path_factory.mktemp("sp"))


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory) -> Path:
    """The tiny model's byte-level BPE (ChatML template), with Qwen2.5-Math-PRM's <extra_0> added."""
    from testing.tiny_model import build_tokenizer

    tok = build_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<extra_0>"]})
    path = tmp_path_factory.mktemp("bpe")
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def plain_bpe_dir(tmp_path_factory) -> Path:
    from testing.tiny_model import build_tokenizer

    path = tmp_path_factory.mktemp("plain")
    build_tokenizer().save_pretrained(path)
    return path


def tokenizer(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def export(*args: str, code: int = 0):
    result = runner.invoke(app, ["export", *args])
    assert result.exit_code == code, result.output
    return result


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def step_of_token(tok, ids: list[int], pos: int, tag: str) -> int:
    """Which step a labelled token ends: the number of tags in the text up to and including it,
    when that text ends with the tag (else -1)."""
    text = tok.decode(ids[: pos + 1])
    return text.count(tag) - 1 if text.rstrip().endswith(tag) else -1


def test_openrlhf_labels_land_on_each_step_end(records, consensus_file, sp_dir, tmp_path):
    """SentencePiece (Llama-style): every label on its step's placeholder, PRMLoss finite; without the
    whitespace normalisation the same tokenizer swallows tags and shifts labels (the baseline)."""
    import torch

    tok = tokenizer(sp_dir)
    out = tmp_path / "o.jsonl"
    export(str(consensus_file), "-o", str(out), "--format", "openrlhf", "--tokenizer", str(sp_dir))
    rows = rows_of(out)
    assert {r["id"] for r in rows} == {r["id"] for r in records}
    plus, minus = tok.encode("+", add_special_tokens=False)[0], tok.encode("-", add_special_tokens=False)[0]
    tag_id = tok.encode("ки", add_special_tokens=False)[0]
    for row, rec in zip(rows, records):
        input_ids, labels = openrlhf_item(row, tok, "ки", ["+", "-"])
        ids = input_ids[0].tolist()
        at = [i for i, v in enumerate(labels[0].tolist()) if v != -100]
        assert [labels[0, i].item() for i in at] == [plus if v else minus for v in rec["labels"]]
        assert [step_of_token(tok, ids, i, "ки") for i in at] == list(range(len(rec["steps"])))
        loss = openrlhf_prm_loss(input_ids, torch.randn(1, len(ids), len(tok)), labels, tag_id, [plus, minus])
        assert torch.isfinite(loss)

    shifted = 0  # the baseline: the same rows with the steps as they were
    for rec in records:
        raw = {"input": rec["problem"] + " " + "\n".join(f"{s} ки" for s in rec["steps"]),
               "label": ["+" if v else "-" for v in rec["labels"]]}
        _, labels = openrlhf_item(raw, tok, "ки", ["+", "-"])
        shifted += (labels != -100).sum().item() != len(rec["steps"])
    assert shifted == sum(any(s != s.rstrip() for s in r["steps"]) for r in records) > 0


def test_openrlhf_soft_labels_are_refused_because_openrlhf_cannot_read_them(records, consensus_file, sp_dir, tmp_path):
    tok = tokenizer(sp_dir)
    rec = records[0]
    soft = {"input": rec["problem"] + " " + "\n".join(f"{s.strip()} ки" for s in rec["steps"]),
            "label": [0.5] * len(rec["steps"])}
    with pytest.raises(RuntimeError, match="(?i)dtype"):  # what OpenRLHF 0.5.6 to 0.9.5 does with float labels
        openrlhf_item(soft, tok, "ки", ["+", "-"])
    result = export(str(consensus_file), "-o", str(tmp_path / "s.jsonl"), "--format", "openrlhf", "--soft", code=2)
    assert "cannot read float labels" in result.stderr and not (tmp_path / "s.jsonl").exists()


def test_two_token_and_split_placeholders_are_refused(consensus_file, plain_bpe_dir, bpe_dir, tmp_path):
    """Byte-level BPE: "ки" is four tokens (OpenRLHF would assert); "assistant" is one token alone but
    " assistant" in text is another token, so no position would carry a label (NaN loss in OpenRLHF).
    Both exit 2 naming the problem; an added special token as --placeholder works."""
    out = tmp_path / "o.jsonl"
    two = export(str(consensus_file), "-o", str(out), "--format", "openrlhf", "--tokenizer", str(plain_bpe_dir), code=2)
    assert "the step tag 'ки' is 4 tokens for this tokenizer" in two.stderr
    tok = tokenizer(plain_bpe_dir)
    assert len(tok.encode("assistant", add_special_tokens=False)) == 1
    split = export(str(consensus_file), "-o", str(out), "--format", "openrlhf", "--placeholder", "assistant",
                   "--tokenizer", str(plain_bpe_dir), code=2)
    first = rows_of(consensus_file)[0]
    assert f"{consensus_file}:1: {first['id']}: 0 marker tokens for {len(first['steps'])} steps" in split.stderr
    assert "OpenRLHF" in split.stderr and not out.exists()
    # what OpenRLHF would have made of that row (exported without --tokenizer): no label, NaN loss
    import torch

    unchecked = tmp_path / "unchecked.jsonl"
    export(str(consensus_file), "-o", str(unchecked), "--format", "openrlhf", "--placeholder", "assistant")
    row = next(r for r in rows_of(unchecked) if r["id"] == first["id"])
    plus, minus = tok.encode("+", add_special_tokens=False)[0], tok.encode("-", add_special_tokens=False)[0]
    input_ids, labels = openrlhf_item(row, tok, "assistant", ["+", "-"])
    assert (labels != -100).sum().item() == 0
    loss = openrlhf_prm_loss(input_ids, torch.randn(1, input_ids.shape[1], len(tok)), labels,
                             tok.encode("assistant", add_special_tokens=False)[0], [plus, minus])
    assert torch.isnan(loss)

    export(str(consensus_file), "-o", str(out), "--format", "openrlhf", "--placeholder", "<extra_0>",
           "--tokenizer", str(bpe_dir))
    tok = tokenizer(bpe_dir)
    for row in rows_of(out):
        _, labels = openrlhf_item(row, tok, "<extra_0>", ["+", "-"])
        assert (labels != -100).sum().item() == len(row["label"])


def test_qwen_needs_extra_0_to_be_one_token(records, consensus_file, plain_bpe_dir, bpe_dir, tmp_path):
    out = tmp_path / "q.jsonl"
    refused = export(str(consensus_file), "-o", str(out), "--format", "qwen", "--tokenizer", str(plain_bpe_dir), code=2)
    assert "'<extra_0>' is" in refused.stderr and "special token" in refused.stderr
    export(str(consensus_file), "-o", str(out), "--format", "qwen", "--tokenizer", str(bpe_dir))
    tok = tokenizer(bpe_dir)
    for row, rec in zip(rows_of(out), records):
        ids = tok(tok.apply_chat_template(row["messages"], tokenize=False), add_special_tokens=False)["input_ids"]
        positions = qwen_prm_positions(row, tok)
        assert [step_of_token(tok, ids, p, "<extra_0>") for p in positions] == list(range(len(rec["steps"])))


def test_math_shepherd_tags_and_labels_line_up(records, consensus_file, sp_dir, plain_bpe_dir, tmp_path):
    out = tmp_path / "m.jsonl"
    export(str(consensus_file), "-o", str(out), "--format", "math-shepherd", "--tokenizer", str(sp_dir))
    tok = tokenizer(sp_dir)
    for row, rec in zip(rows_of(out), records):
        assert shepherd_token_labels(row, tok) == rec["labels"]
    export(str(consensus_file), "-o", str(out), "--format", "math-shepherd", "--tokenizer", str(plain_bpe_dir), code=2)


@pytest.mark.parametrize("which", ["sp", "bpe"])
def test_trl_labels_land_on_each_step_end(which, records, consensus_file, sp_dir, bpe_dir, tmp_path):
    from trl.experimental.prm import PRMTrainer

    path = sp_dir if which == "sp" else bpe_dir
    tok = tokenizer(path)
    out = tmp_path / "t.jsonl"
    export(str(consensus_file), "-o", str(out), "--format", "trl", "--tokenizer", str(path))
    for row, rec in zip(rows_of(out), records):
        enc = PRMTrainer.tokenize_row(row, tok, "\n", None, None, False, False)
        at = [i for i, v in enumerate(enc["labels"]) if v != -100]
        assert [enc["labels"][i] for i in at] == [int(v) for v in rec["labels"]]
        # each labelled token is the separator ending step k (SentencePiece encodes "\n" alone as "▁\n")
        sep_last = tok.encode("\n", add_special_tokens=False)[-1]
        for k, i in enumerate(at):
            assert enc["input_ids"][i] == sep_last
            assert tok.decode(enc["input_ids"][: i + 1], skip_special_tokens=True).rstrip().endswith(rec["steps"][k].strip())


@pytest.mark.parametrize("which", ["sp", "bpe"])
def test_tokens_format_labels_only_step_ends(which, records, consensus_file, sp_dir, bpe_dir, tmp_path):
    path = sp_dir if which == "sp" else bpe_dir
    tok = tokenizer(path)
    out = tmp_path / "k.jsonl"
    result = export(str(consensus_file), "-o", str(out), "--format", "tokens", "--tokenizer", str(path))
    rows = rows_of(out)
    assert len(rows) == len(records), result.stderr
    # the default: the first candidate that is one token in context (GPT-2's pre-tokenizer splits "\n\n" before a letter)
    marker = " ки" if which == "sp" else "<extra_0>"
    assert f"step end {marker!r}" in result.stderr
    for row, rec in zip(rows, records):
        assert len(row["input_ids"]) == len(row["attention_mask"]) == len(row["labels"])
        at = [i for i, v in enumerate(row["labels"]) if v != -100]
        assert [row["labels"][i] for i in at] == [int(v) for v in rec["labels"]]
        assert all(row["input_ids"][i] == tok.encode(marker, add_special_tokens=False)[0] for i in at)
        for k, i in enumerate(at):
            text = tok.decode(row["input_ids"][: i + 1])
            assert text.endswith(rec["steps"][k].strip() + marker)
        # the whole row is the tokenizer's own encoding of the conversation in its chat template
        response = "".join(s.strip() + marker + ("\n" if marker.strip() else "") for s in rec["steps"])
        messages = [{"role": "user", "content": rec["problem"]}, {"role": "assistant", "content": response}]
        assert row["input_ids"] == tok(tok.apply_chat_template(messages, tokenize=False), add_special_tokens=False)["input_ids"]


def test_tokens_format_trains_a_token_classifier(consensus_file, bpe_dir, tmp_path):
    """The README recipe: AutoModelForTokenClassification(num_labels=2) + Trainer +
    DataCollatorForTokenClassification on the exported rows; a tiny random Qwen2 learns (loss falls)."""
    import torch
    from datasets import load_dataset
    from transformers import (
        AutoModelForTokenClassification,
        DataCollatorForTokenClassification,
        Qwen2Config,
        Trainer,
        TrainingArguments,
    )

    out = tmp_path / "k.parquet"
    export(str(consensus_file), "-o", str(out), "--format", "tokens", "--tokenizer", str(bpe_dir))
    ds = load_dataset("parquet", data_files=str(out), split="train").remove_columns(["id"])
    tok = tokenizer(bpe_dir)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         num_labels=2, pad_token_id=tok.pad_token_id)
    model = AutoModelForTokenClassification.from_config(config)
    args = TrainingArguments(output_dir=str(tmp_path / "run"), per_device_train_batch_size=4, num_train_epochs=5,
                             learning_rate=1e-3, logging_steps=1, report_to=[], save_strategy="no", use_cpu=True,
                             seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=ds, data_collator=DataCollatorForTokenClassification(tok))
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) >= 10 and all(map(lambda x: x == x and x < float("inf"), losses))
    # It learns within the first few steps (the label base rate first), so the bar is the untrained
    # model's first loss, and chance for two labels (ln 2), not an average over early steps.
    last = sum(losses[-8:]) / 8
    assert last < 0.8 * losses[0] and last < math.log(2), losses


def test_hf_format_is_a_dataset_dict_split_by_problem_with_a_card(tmp_path):
    """Real consensus run (its manifest), upstream manifests as the stages write them; the card names
    every run; load_from_disk reads it; no problem is on both sides."""
    from datasets import load_from_disk

    from prm_annotate.io.manifest import append_manifest

    base = mixed_records(24)
    rows = base + [{**r, "id": r["id"] + "-b"} for r in base]  # two responses per problem
    made = build(rows)
    rollouts = write_jsonl(tmp_path / "rollouts.jsonl", made["rollouts"])
    judged = write_jsonl(tmp_path / "judged.jsonl", made["judged"])
    append_manifest(str(rollouts), {"stage": "rollout", "version": "t", "argv": ["prm-annotate", "rollout", "s.jsonl",
                    "-o", "rollouts.jsonl", "--k", "8"], "input": "s.jsonl",
                    "settings": {"model": "policy-m", "k": 8, "label": "hard", "strategy": "exhaustive"},
                    "counts": {"read": len(rows), "written": len(rows)}})
    append_manifest(str(judged), {"stage": "judge", "version": "t", "argv": ["prm-annotate", "judge", "s.jsonl",
                    "-o", "judged.jsonl"], "input": "s.jsonl",
                    "settings": {"model": "judge-m", "prompt": "paper", "prompt_sha256": "abc123", "votes": 1},
                    "counts": {"read": len(rows), "written": len(rows)}})
    consensus = tmp_path / "consensus.jsonl"
    made_consensus = runner.invoke(app, ["consensus", str(rollouts), str(judged), "-o", str(consensus)])
    assert made_consensus.exit_code == 0, made_consensus.output
    out = tmp_path / "ds"
    export(str(consensus), "-o", str(out), "--format", "hf", "--test-split", "0.2", "--keep-scores")
    ds = load_from_disk(str(out))
    assert set(ds) == {"train", "test"}
    kept = rows_of(consensus)
    assert len(ds["train"]) + len(ds["test"]) == len(kept) and len(ds["test"]) > 0
    assert not {r["prompt"] for r in ds["train"]} & {r["prompt"] for r in ds["test"]}
    assert len({r["prompt"] for r in ds["test"]}) == -(-len({r["problem"] for r in kept}) * 2 // 10)
    by_id = {r["id"]: r for r in kept}
    for row in list(ds["train"]) + list(ds["test"]):
        assert row["completions"] == by_id[row["id"]]["steps"] and row["labels"] == by_id[row["id"]]["labels"]
    card = (out / "README.md").read_text()
    for needle in ("**consensus**", "**rollout**", "**judge**", "model=policy-m", "k=8", "strategy=exhaustive",
                   "prompt=paper", "prompt_sha256=abc123", "prm-annotate rollout s.jsonl", "prm-annotate judge s.jsonl",
                   "where MC and the judge agree", "push_to_hub", "`s.jsonl`: no manifest"):
        assert needle in card, needle
    for split in ds:  # the label balance of each split, as the card's table row gives it
        wrong = sum(not v for row in ds[split] for v in row["labels"])
        right = sum(v for row in ds[split] for v in row["labels"])
        line = next(x for x in card.splitlines() if x.startswith(f"| {split} |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert (int(cells[1]), int(cells[5].split()[0]), int(cells[6])) == (len(ds[split]), right, wrong)

    again = export(str(consensus), "-o", str(out), "--format", "hf")  # an earlier export is replaced
    assert set(load_from_disk(str(out))) == {"train"}, again.stderr
    (tmp_path / "file").write_text("x")
    export(str(consensus), "-o", str(tmp_path / "file"), "--format", "hf", code=2)
    assert (tmp_path / "file").read_text() == "x"


@pytest.mark.slow
@pytest.mark.engine  # not an engine, but `smollm2_dir` prepares the checkpoint: run under the heavy lock
def test_smollm2_byte_level_bpe(smollm2_dir, consensus_file, records, tmp_path):
    """SmolLM2's tokenizer: "ки" is two tokens, and "step" is one token alone but " step" in text is
    another (both exit 2);
    one of its own special tokens as the placeholder, and the default step-end for tokens, place every label."""
    tok = tokenizer(smollm2_dir)
    out = tmp_path / "o.jsonl"
    two = export(str(consensus_file), "-o", str(out), "--format", "openrlhf", "--tokenizer", str(smollm2_dir), code=2)
    assert "'ки' is 2 tokens" in two.stderr
    assert len(tok.encode("step", add_special_tokens=False)) == 1
    split = export(str(consensus_file), "-o", str(out), "--format", "openrlhf", "--placeholder", "step",
                   "--tokenizer", str(smollm2_dir), code=2)
    assert "0 marker tokens" in split.stderr
    export(str(consensus_file), "-o", str(out), "--format", "openrlhf", "--placeholder", "<jupyter_output>",
           "--tokenizer", str(smollm2_dir))
    for row, rec in zip(rows_of(out), records):
        input_ids, labels = openrlhf_item(row, tok, "<jupyter_output>", ["+", "-"])
        at = [i for i, v in enumerate(labels[0].tolist()) if v != -100]
        assert [step_of_token(tok, input_ids[0].tolist(), i, "<jupyter_output>") for i in at] == \
            list(range(len(rec["steps"])))
    result = export(str(consensus_file), "-o", str(out), "--format", "tokens", "--tokenizer", str(smollm2_dir))
    marker = "\n"  # like GPT-2's, SmolLM2's pre-tokenizer splits "\n\n" before a letter
    assert f"step end {marker!r}" in result.stderr
    for row, rec in zip(rows_of(out), records):
        at = [i for i, v in enumerate(row["labels"]) if v != -100]
        assert [row["labels"][i] for i in at] == [int(v) for v in rec["labels"]]
        for k, i in enumerate(at):
            assert tok.decode(row["input_ids"][: i + 1]).endswith(rec["steps"][k].strip() + marker)


def test_tokens_step_end_choice_and_bad_usage(consensus_file, plain_bpe_dir, sp_dir, tmp_path):
    out = tmp_path / "k.jsonl"
    two = export(str(consensus_file), "-o", str(out), "--format", "tokens", "--step-end", "ки",
                 "--tokenizer", str(plain_bpe_dir), code=2)
    assert "--step-end 'ки' is 4 tokens" in two.stderr
    # SentencePiece encodes "ки" alone as "▁ки" (its dummy prefix), but "...5.ки" in text has no "▁ки"
    split = export(str(consensus_file), "-o", str(out), "--format", "tokens", "--step-end", "ки",
                   "--tokenizer", str(sp_dir), code=2)
    first = rows_of(consensus_file)[0]
    assert f"{consensus_file}:1: {first['id']}: step 1's end marker is not one token in context" in split.stderr
    assert not out.exists()
    # Qwen2's pre-tokenizer (the tiny model's) joins punctuation with the newlines after it (".\n\n"),
    # so no text marker ends a step as one token: refused, an added special token is the way
    none = export(str(consensus_file), "-o", str(out), "--format", "tokens", "--tokenizer", str(plain_bpe_dir), code=2)
    assert "is a single token in context" in none.stderr and not out.exists()
    for args, message in [(["--format", "tokens"], "--format tokens needs --tokenizer"),
                          (["--format", "trl", "--test-split", "0.1"], "--test-split goes with --format hf"),
                          (["--format", "tokens", "--placeholder", "x", "--tokenizer", str(plain_bpe_dir)],
                           "its step-end marker is --step-end"),
                          (["--format", "qwen", "--step-end", "x"], "--step-end goes with --format tokens"),
                          (["--format", "trl", "--max-length", "10"], "--max-length needs --tokenizer")]:
        result = export(str(consensus_file), "-o", str(out), *args, code=2)
        assert message in result.stderr and not out.exists()


def test_tokens_soft_labels_are_the_mc_scores(bpe_dir, tmp_path):
    made = build(mixed_records(8))
    rollouts = write_jsonl(tmp_path / "rollouts.jsonl", made["rollouts"])
    out = tmp_path / "soft.jsonl"
    export(str(rollouts), "-o", str(out), "--format", "tokens", "--soft", "--tokenizer", str(bpe_dir))
    rows = rows_of(out)
    assert len(rows) == len(made["rollouts"])
    for row, rec in zip(rows, made["rollouts"]):
        fe = rec["mc"]["first_error"]
        kept = len(rec["steps"]) if fe == -1 else fe + 1
        marked = [v for v in row["labels"] if v != -100]
        assert marked == pytest.approx(rec["mc"]["scores"][:kept]) and all(isinstance(v, float) for v in row["labels"])


def test_hf_labels_are_checked_as_trl_reads_them(plain_bpe_dir, tmp_path):
    """hf rows are TRL's: a label TRL would put on the next step stops hf as it stops trl, naming TRL."""
    record = {"id": "e", "problem": "Add 2 and 3.", "steps": ["", "2 + 3 = 5."], "label": -1}
    gold = write_jsonl(tmp_path / "gold.jsonl", [record])
    for fmt, out in (("trl", tmp_path / "t.jsonl"), ("hf", tmp_path / "ds")):
        result = export(str(gold), "-o", str(out), "--format", fmt, "--tokenizer", str(plain_bpe_dir),
                        "--step-sep", "", code=2)
        assert (f"{gold}:1: e: step 1 is empty and the step separator is no token: its label would land on the "
                "next step (TRL's PRMTrainer.tokenize_row)") in result.stderr and not out.exists()
