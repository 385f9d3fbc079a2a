"""`export`: every format loads back with `datasets`, the TRL rows go through TRL's own PRM
tokenization, and labels a trainer would cut off at its maximum length are counted, not lost silently."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from testing.labelled_fixtures import DATA, build, mixed_records, write_all, write_jsonl

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
runner = CliRunner()
FORMATS = ["trl", "openrlhf", "qwen", "math-shepherd"]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    return write_all(tmp_path_factory.mktemp("labelled"), mixed_records(16))


@pytest.fixture(scope="module")
def consensus(files) -> list[dict]:
    return [json.loads(line) for line in files["consensus"].read_text().splitlines()]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    from testing.tiny_model import build_tokenizer

    path = tmp_path_factory.mktemp("tok")
    tok = build_tokenizer()
    # The tags as single tokens, as --tokenizer requires of them (test_export_tokens.py: the refusals)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<extra_0>", "ки"]})
    tok.save_pretrained(path)
    return path


def export(*args: str) -> "object":
    result = runner.invoke(app, ["export", *args])
    assert result.exit_code == 0, result.output
    return result


def load(path: Path):
    from datasets import load_dataset

    kind = "parquet" if path.suffix == ".parquet" else "json"
    return load_dataset(kind, data_files=str(path), split="train")


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_loads_back_with_one_label_per_step(fmt, suffix, files, consensus, tmp_path):
    out = tmp_path / f"{fmt}{suffix}"
    export(str(files["consensus"]), "-o", str(out), "--format", fmt)
    ds = load(out)
    assert len(ds) == len(consensus) > 0
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # nothing half-written left behind
    for row, rec in zip(ds, consensus):
        assert row["id"] == rec["id"]
        n = len(rec["steps"])
        if fmt == "trl":
            assert row["prompt"] == rec["problem"] and row["completions"] == rec["steps"]
            assert row["labels"] == rec["labels"]
        elif fmt == "openrlhf":
            assert row["input"].count("ки") == n == len(row["label"])
            assert row["label"] == ["+" if v else "-" for v in rec["labels"]]
        elif fmt == "qwen":
            assert row["response"].count("<extra_0>") == n == len(row["labels"])
            assert row["response"].endswith("<extra_0>")
            assert row["labels"] == [int(v) for v in rec["labels"]]
            assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
            assert row["messages"][2]["content"] == row["response"]
        else:
            assert shepherd_labels(row) == rec["labels"]


def shepherd_labels(row: dict) -> list[bool]:
    """Read a Math-Shepherd row the way its users do: the label text is the input with each " ки"
    tag replaced by " +" or " -"."""
    pieces = row["input"].split(" ки")
    labels, pos = [], 0
    for piece in pieces[:-1]:
        pos += len(piece)
        assert row["label"][pos: pos + 1] == " "
        labels.append(row["label"][pos + 1] == "+")
        pos += 2
    assert row["label"][pos:] == pieces[-1]
    return labels


def test_math_shepherd_reader_agrees_with_the_published_samples():
    """The reader above is right about the real Math-Shepherd records, so our rows share their format."""
    rows = [json.loads(line) for line in (DATA / "formats" / "samples_math-shepherd.jsonl").read_text().splitlines()]
    for row in rows:
        labels = shepherd_labels(row)
        assert len(labels) == row["input"].count("ки") > 0


def test_rollouts_give_hard_labels_from_mc_and_soft_scores(files, tmp_path):
    rollouts = [json.loads(line) for line in files["rollouts"].read_text().splitlines()]
    export(str(files["rollouts"]), "-o", str(tmp_path / "hard.jsonl"), "--format", "trl")
    hard = load(tmp_path / "hard.jsonl")
    assert len(hard) == len(rollouts)
    for row, rec in zip(hard, rollouts):
        fe = rec["mc"]["first_error"]
        expected = [True] * len(rec["steps"]) if fe == -1 else [True] * fe + [False]
        assert row["labels"] == expected and row["completions"] == rec["steps"][: len(expected)]

    export(str(files["rollouts"]), "-o", str(tmp_path / "soft.parquet"), "--format", "qwen", "--soft")
    soft = load(tmp_path / "soft.parquet")
    for row, rec in zip(soft, rollouts):
        kept = row["response"].count("<extra_0>")
        assert row["labels"] == pytest.approx(rec["mc"]["scores"][:kept])
        assert all(isinstance(v, float) for v in row["labels"])

    export(str(files["rollouts"]), "-o", str(tmp_path / "scores.jsonl"), "--format", "trl", "--keep-scores")
    for row, rec in zip(load(tmp_path / "scores.jsonl"), rollouts):
        assert row["scores"] == pytest.approx(rec["mc"]["scores"][: len(row["labels"])])


def test_placeholder_and_step_separator_options(files, consensus, tmp_path):
    out = tmp_path / "o.jsonl"
    export(str(files["consensus"]), "-o", str(out), "--format", "openrlhf", "--placeholder", "<step>",
           "--step-sep", r"\n\n")
    for row, rec in zip(load(out), consensus):
        assert row["input"].count("<step>") == len(rec["steps"])
        assert row["input"].count(" <step>\n\n") == len(rec["steps"]) - 1
        assert "ки" not in row["input"]


def test_trl_rows_pass_trl_prm_tokenization(files, consensus, tokenizer_dir, tmp_path):
    from transformers import AutoTokenizer
    from trl.experimental.prm import PRMTrainer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    out = tmp_path / "trl.jsonl"
    export(str(files["consensus"]), "-o", str(out), "--format", "trl")
    ds = load(out)
    for row, rec in zip(ds, consensus):
        enc = PRMTrainer.tokenize_row(row, tok, "\n", max_length=None, max_completion_length=None,
                                      train_on_last_step_only=False, is_eval=False)
        marked = [x for x in enc["labels"] if x != -100]
        assert len(marked) == len(rec["steps"])
        assert marked == [int(v) for v in rec["labels"]]
        assert len(enc["input_ids"]) == len(enc["labels"])


def test_truncation_is_counted_against_trl(files, consensus, tokenizer_dir, tmp_path):
    """At a small max length TRL drops labels; export warns with exactly the number TRL loses."""
    from transformers import AutoTokenizer
    from trl.experimental.prm import PRMTrainer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    full = tmp_path / "full.jsonl"
    export(str(files["consensus"]), "-o", str(full), "--format", "trl")
    rows = list(load(full))
    lengths = sorted(len(PRMTrainer.tokenize_row(r, tok, "\n", None, None, False, False)["input_ids"]) for r in rows)
    max_length = lengths[len(lengths) // 2]  # cuts about half the rows
    lost_by_trl = {}
    for r in rows:
        enc = PRMTrainer.tokenize_row(r, tok, "\n", max_length, None, False, False)
        lost = len(r["labels"]) - sum(x != -100 for x in enc["labels"])
        if lost:
            lost_by_trl[r["id"]] = lost
    assert lost_by_trl, "the chosen max length should cut some labels"

    out = tmp_path / "cut.jsonl"
    result = export(str(files["consensus"]), "-o", str(out), "--format", "trl",
                    "--tokenizer", str(tokenizer_dir), "--max-length", str(max_length))
    assert (f"warning: {len(lost_by_trl)} of {len(rows)} rows lose {sum(lost_by_trl.values())} of "
            f"{sum(len(r['labels']) for r in rows)} step labels at --max-length {max_length}") in result.stderr
    assert len(load(out)) == len(rows)  # kept, with the warning

    # TRL cuts the completion to max_completion_length first
    mcl = max_length // 2
    lost_mcl = 0
    for r in rows:
        enc = PRMTrainer.tokenize_row(r, tok, "\n", max_length, mcl, False, False)
        lost_mcl += len(r["labels"]) - sum(x != -100 for x in enc["labels"])
    assert lost_mcl > sum(lost_by_trl.values())
    result = export(str(files["consensus"]), "-o", str(tmp_path / "mcl.jsonl"), "--format", "trl",
                    "--tokenizer", str(tokenizer_dir), "--max-length", str(max_length),
                    "--max-completion-length", str(mcl))
    assert f"lose {lost_mcl} of" in result.stderr

    dropped = tmp_path / "dropped.jsonl"
    export(str(files["consensus"]), "-o", str(dropped), "--format", "trl", "--tokenizer", str(tokenizer_dir),
           "--max-length", str(max_length), "--drop-truncated")
    assert {r["id"] for r in load(dropped)} == {r["id"] for r in rows} - set(lost_by_trl)


@pytest.mark.parametrize("fmt,tag", [("openrlhf", "ки"), ("math-shepherd", "ки"), ("qwen", "<extra_0>")])
def test_truncation_is_counted_for_tagged_text(fmt, tag, files, tokenizer_dir, tmp_path_factory, tmp_path):
    """Tagged formats: a trainer truncates the token ids and keeps the labels of the tags still there
    (OpenRLHF's ProcessRewardDataset does exactly this); qwen rows are measured in their chat template.
    Math-Shepherd needs " ки" and " +" to tokenize alike: a SentencePiece tokenizer."""
    from transformers import AutoTokenizer

    if fmt == "math-shepherd":
        from testing.consumers import build_sentencepiece_tokenizer

        tokenizer_dir = build_sentencepiece_tokenizer(tmp_path_factory.mktemp("sp"))
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    full = tmp_path / "full.jsonl"
    export(str(files["consensus"]), "-o", str(full), "--format", fmt)
    rows = list(load(full))

    def text(r: dict) -> str:
        return tok.apply_chat_template(r["messages"], tokenize=False) if fmt == "qwen" else r["input"]

    max_length = sorted(len(tok(text(r), add_special_tokens=False)["input_ids"]) for r in rows)[len(rows) // 2]
    lost = 0
    for r in rows:
        ids = tok(text(r), add_special_tokens=False, truncation=True, max_length=max_length)["input_ids"]
        lost += text(r).count(tag) - tok.decode(ids).count(tag)
    assert lost > 0
    result = export(str(files["consensus"]), "-o", str(tmp_path / "cut.jsonl"), "--format", fmt,
                    "--tokenizer", str(tokenizer_dir), "--max-length", str(max_length))
    assert f"lose {lost} of" in result.stderr


def test_judged_and_processbench_inputs(files, tmp_path):
    judged = [json.loads(line) for line in files["judged"].read_text().splitlines()]
    result = export(str(files["judged"]), "-o", str(tmp_path / "j.jsonl"), "--format", "qwen")
    unjudged = sum(r["judge"]["first_error"] is None for r in judged)
    assert unjudged and len(load(tmp_path / "j.jsonl")) == len(judged) - unjudged
    assert f"{unjudged} no parsed judgement" in result.stderr
    export(str(files["gold"]), "-o", str(tmp_path / "g.jsonl"), "--format", "math-shepherd")
    gold = json.loads(files["gold"].read_text())
    for row, rec in zip(load(tmp_path / "g.jsonl"), gold):
        labels = shepherd_labels(row)
        assert labels.count(False) == (0 if rec["label"] == -1 else 1)
        assert len(labels) == (len(rec["steps"]) if rec["label"] == -1 else rec["label"] + 1)


def test_bad_usage_and_bad_input_exit_2(files, tmp_path):
    soft_trl = runner.invoke(app, ["export", str(files["consensus"]), "-o", str(tmp_path / "x.jsonl"),
                                   "--format", "trl", "--soft"])
    assert soft_trl.exit_code == 2 and "hard labels only" in soft_trl.stderr
    bad = write_jsonl(tmp_path / "bad.jsonl", build(mixed_records(4))["consensus"][:1] + [{"id": "z", "labels": [True]}])
    result = runner.invoke(app, ["export", str(bad), "-o", str(tmp_path / "y.jsonl"), "--format", "trl"])
    assert result.exit_code == 2 and f"{bad}:2:" in result.stderr
    assert not (tmp_path / "y.jsonl").exists()
    unknown = runner.invoke(app, ["export", str(files["consensus"]), "-o", str(tmp_path / "z.jsonl"), "--format", "csv"])
    assert unknown.exit_code == 2 and "unknown export format" in unknown.stderr
