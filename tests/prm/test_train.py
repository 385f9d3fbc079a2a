"""`train`: a PRM from a trl export, with the world's tiny policy as the backbone (CPU, seconds).
Checked: the checkpoint is a Qwen2ForProcessRewardModel (the names and shapes vLLM's qwen2_rm.py
loads), the loss falls on a small set it can fit (measured against its own first steps), the
trained head tells the set's right steps from its wrong ones where the untrained head does not,
and the CLI's bad-input errors. That vLLM loads it and agrees with transformers: test_score.py."""
from __future__ import annotations

import json

import pytest
from safetensors import safe_open
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.world import POLICY_DIR
from testing.jsonl_files import write_jsonl
from testing.prm_fixtures import trl_rows, world_responses

runner = CliRunner()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("train")
    rows = trl_rows(world_responses(6, seed=1))
    data = write_jsonl(tmp / "train.jsonl", rows)
    out = tmp / "prm"
    result = runner.invoke(app, ["train", str(data), "--base", str(POLICY_DIR), "-o", str(out), "--steps", "40",
                                 "--batch-size", "12", "--lr", "3e-3", "--log-every", "10", "--json"])
    assert result.exit_code == 0, result.output
    return rows, out, json.loads(result.stdout)


@pytest.mark.slow
def test_checkpoint_is_a_qwen2_process_reward_model(trained):
    _, out, _ = trained
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForProcessRewardModel"] and config["num_labels"] == 2
    policy = json.loads((POLICY_DIR / "config.json").read_text())
    assert config["vocab_size"] == policy["vocab_size"] + 1  # the step tag became a token
    assert config["prm_annotate"]["step_tag"] == "<extra_0>"
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    h = policy["hidden_size"]
    assert shapes["score.0.weight"] == (h, h) and shapes["score.0.bias"] == (h,)
    assert shapes["score.2.weight"] == (2, h) and shapes["score.2.bias"] == (2,)
    assert shapes["model.embed_tokens.weight"] == (policy["vocab_size"] + 1, h)
    assert not any(k.startswith("lm_head") for k in shapes)


@pytest.mark.slow
def test_it_learns_the_set(trained):
    from prm_annotate.prm.checkpoint import (
        build_model,
        load_model,
        transformers_step_scores,
    )

    rows, out, result = trained
    assert result["examples"] == len(rows) and result["labels"] == sum(len(r["labels"]) for r in rows)
    assert result["last_loss"] < 0.5 * result["first_loss"]
    model, tokenizer, fmt = load_model(out)
    untrained = build_model(model.model.config)
    untrained.model.load_state_dict(model.model.state_dict())
    untrained.eval()

    def gap(m) -> float:
        right, wrong = [], []
        for r in rows:
            for s, label in zip(transformers_step_scores(m, tokenizer, fmt, r["prompt"], r["completions"]), r["labels"]):
                (right if label else wrong).append(s)
        return sum(right) / len(right) - sum(wrong) / len(wrong)

    assert gap(model) > 0.3
    assert abs(gap(untrained)) < 0.1  # a random head, same backbone: no separation


def test_bad_rows_exit_2(tmp_path):
    data = write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "p", "completions": ["a", "b"], "labels": [True]}])
    result = runner.invoke(app, ["train", str(data), "--base", str(POLICY_DIR), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and f"{data}:1:" in result.stderr and "2 true/false" in result.stderr
    soft = write_jsonl(tmp_path / "soft.jsonl", [{"prompt": "p", "completions": ["a"], "labels": [True]}])
    result = runner.invoke(app, ["train", str(soft), "--soft", "--base", str(POLICY_DIR), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "--keep-scores" in result.stderr
    assert not (tmp_path / "o").exists()


def test_refuses_a_non_empty_output(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", trl_rows(world_responses(1, seed=0)))
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "keep.txt").write_text("mine")
    result = runner.invoke(app, ["train", str(data), "--base", str(POLICY_DIR), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "not empty" in result.stderr
    assert (tmp_path / "o" / "keep.txt").read_text() == "mine"


def test_soft_targets_are_the_scores(tmp_path):
    from prm_annotate.prm.train import read_trl

    row = {"id": "a", "prompt": "p", "completions": ["s1", "s2"], "labels": [True, False], "scores": [0.75, 0]}
    data = write_jsonl(tmp_path / "d.jsonl", [row])
    assert read_trl(str(data), soft=True)[0].targets == [0.75, 0.0]
    assert read_trl(str(data), soft=False)[0].targets == [1.0, 0.0]
