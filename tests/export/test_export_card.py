"""The dataset card of `export --format hf` as the Hub reads it (huggingface_hub.DatasetCard): the
licence given with --license (the card says so when it is missing), the task category, the size, the
method's paper and BibTeX, the tool, and TRL's stepwise trainer beside load_dataset."""
from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from testing.labelled_fixtures import mixed_records, write_all

pytest.importorskip("datasets")


def export(*args: str, code: int = 0):
    result = CliRunner().invoke(app, ["export", *args])
    assert result.exit_code == code, result.output
    return result


@pytest.fixture(scope="module")
def consensus(tmp_path_factory):
    return write_all(tmp_path_factory.mktemp("card"), mixed_records(8))["consensus"]


def test_the_card_carries_the_licence_task_paper_and_trl_use(consensus, tmp_path):
    from datasets import load_from_disk
    from huggingface_hub import DatasetCard

    out = tmp_path / "ds"
    export(str(consensus), "-o", str(out), "--format", "hf", "--license", "apache-2.0", "--step-sep", r"\n\n")
    card = DatasetCard.load(out / "README.md")
    rows = sum(len(split) for split in load_from_disk(str(out)).values())
    assert card.data.license == "apache-2.0"
    assert card.data.task_categories == ["token-classification"]
    assert card.data.size_categories == ["n<1K"] and 0 < rows < 1000
    assert {"process-reward-model", "trl"} <= set(card.data.tags)
    assert card.data.configs[0]["data_files"][0]["split"] == "train"  # the configs load_dataset reads still there
    text = card.text
    assert "https://arxiv.org/abs/2501.07301" in text and "prm-annotate" in text
    bibtex = re.search(r"```bibtex\n(@article\{.*?\n\})\n```", text, re.S)
    assert bibtex and "journal = {arXiv preprint arXiv:2501.07301}" in bibtex.group(1)
    use = text[text.index("## Use"):]
    assert "load_dataset(" in use and "from trl.experimental.prm import PRMConfig, PRMTrainer" in use
    assert 'step_separator="\\n\\n"' in use  # the separator the export was checked with
    assert "`apache-2.0`, as given to `export --license`" in text


def test_the_trl_snippet_names_what_trl_has():
    pytest.importorskip("trl")
    import inspect

    from trl.experimental.prm import PRMConfig, PRMTrainer

    assert {"model", "args", "processing_class", "train_dataset"} <= set(inspect.signature(PRMTrainer).parameters)
    assert "step_separator" in {f for f in PRMConfig.__dataclass_fields__}


def test_a_card_without_a_licence_says_it_is_missing(consensus, tmp_path):
    from huggingface_hub import DatasetCard

    out = tmp_path / "ds"
    export(str(consensus), "-o", str(out), "--format", "hf")
    card = DatasetCard.load(out / "README.md")
    assert card.data.license is None
    assert "## Licence\n\nMissing: the export was not given one (`prm-annotate export --license ID`" in card.text


def test_the_licence_is_refused_where_no_card_is_written_or_malformed(consensus, tmp_path):
    refused = export(str(consensus), "-o", str(tmp_path / "t.jsonl"), "--format", "trl", "--license", "mit", code=2)
    assert "--license goes with --format hf or critic-hf" in refused.output
    bad = export(str(consensus), "-o", str(tmp_path / "ds"), "--format", "hf", "--license", "Apache 2.0", code=2)
    assert "a licence id as the Hub names it" in bad.output and not (tmp_path / "ds").exists()
