"""`train` on one process: a PRM from world exports with the world's tiny policy as the backbone
(CPU, seconds). Checked: the checkpoint is a Qwen2ForProcessRewardModel (the names and shapes vLLM's
qwen2_rm.py loads); the saved model is the best eval checkpoint (its weights are that checkpoint's,
its F1 the best logged) and the threshold in its config maximises F1 on the eval set when the saved
model is re-scored with plain transformers and `score`'s rule; it tells right steps from wrong
ones where the untrained head does not; a base whose tokenizer already has the tag and whose
embeddings are padded trains and loads (config and weights agree); the readers, the one text
convention shared with export, and the CLI's bad-input errors. Two processes, SIGKILL and resume,
and vLLM loading: test_train_distributed.py."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.prm.checkpoint import PRMFormat, prm_token_ids
from prm_annotate.world import POLICY_DIR
from testing.jsonl_files import write_jsonl
from testing.prm_fixtures import eval_truth, padded_tag_base, trl_rows, world_responses

runner = CliRunner()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("train")
    rows = trl_rows(world_responses(12, seed=1))
    eval_rows = trl_rows(world_responses(8, seed=3, split="test"))
    data = write_jsonl(tmp / "train.jsonl", rows)
    held = write_jsonl(tmp / "eval.jsonl", eval_rows)
    out = tmp / "prm"
    result = runner.invoke(app, ["train", str(data), "--base", str(POLICY_DIR), "-o", str(out), "--steps", "20",
                                 "--batch-size", "8", "--lr", "3e-3", "--lr-scheduler", "constant", "--warmup", "0", "--eval", str(held),
                                 "--save-every", "5", "--save-total-limit", "2", "--log-every", "5", "--quiet",
                                 "--json"])
    assert result.exit_code == 0, result.output
    return rows, eval_rows, out, json.loads(result.stdout)


def test_checkpoint_is_a_qwen2_process_reward_model(trained):
    _, _, out, _ = trained
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForProcessRewardModel"] and config["model_type"] == "qwen2"
    assert config["id2label"] == {"0": "wrong", "1": "right"}
    policy = json.loads((POLICY_DIR / "config.json").read_text())
    assert config["vocab_size"] == policy["vocab_size"] + 1  # the step tag became a token
    assert config["prm_annotate"]["step_tag"] == "<extra_0>" and config["prm_annotate"]["step_tag_id"] == 609
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    h = policy["hidden_size"]
    assert shapes["score.0.weight"] == (h, h) and shapes["score.0.bias"] == (h,)
    assert shapes["score.2.weight"] == (2, h) and shapes["score.2.bias"] == (2,)
    assert shapes["model.embed_tokens.weight"] == (policy["vocab_size"] + 1, h)
    assert not any(k.startswith("lm_head") for k in shapes)
    assert not (out.parent / ".prm.partial").exists() and not (out / "training_args.bin").exists()


def test_saved_model_is_the_best_eval_checkpoint(trained):
    _, _, out, result = trained
    state = json.loads(sorted((out.parent / "prm.checkpoints").glob("checkpoint-*/trainer_state.json"),
                              key=lambda p: int(p.parent.name.split("-")[1]))[-1].read_text())
    evals = {e["step"]: e for e in state["log_history"] if "eval_f1" in e}
    assert sorted(evals) == [5, 10, 15, 20]
    best_f1 = max(e["eval_f1"] for e in evals.values())
    assert result["best_step"] in evals and evals[result["best_step"]]["eval_f1"] == best_f1
    assert abs(result["eval"]["f1"] - best_f1) < 1e-9
    assert abs(result["eval"]["step_loss"] - evals[result["best_step"]]["eval_step_loss"]) < 1e-6
    # The weights are that checkpoint's (kept besides the latest because it is the best).
    best = load_file(str(out.parent / "prm.checkpoints" / f"checkpoint-{result['best_step']}" / "model.safetensors"))
    saved = load_file(str(out / "model.safetensors"))
    assert best.keys() == saved.keys() and all(torch.equal(best[k], saved[k]) for k in saved)


def test_threshold_in_config_is_the_eval_tuned_one(trained):
    from prm_annotate.prm.checkpoint import load_model, transformers_step_scores
    from prm_annotate.evaluation.metrics import harmonic_mean
    from prm_annotate.stages.score import first_below

    _, eval_rows, out, result = trained
    model, tokenizer, fmt = load_model(out)
    assert fmt.threshold == result["threshold"] == json.loads((out / "config.json").read_text())["prm_annotate"]["threshold"]
    scores = [transformers_step_scores(model, tokenizer, fmt, r["prompt"], r["completions"]) for r in eval_rows]
    truth = eval_truth(eval_rows)

    def f1(t: float) -> float:
        hits = [first_below(s, t) == k for s, k in zip(scores, truth)]
        err = [h for h, k in zip(hits, truth) if k != -1]
        cor = [h for h, k in zip(hits, truth) if k == -1]
        return harmonic_mean(100 * sum(err) / len(err), 100 * sum(cor) / len(cor)) or 0.0

    grid = max(f1(i / 1000) for i in range(1001))
    assert abs(f1(fmt.threshold) - grid) < 1e-9 or f1(fmt.threshold) > grid
    assert abs(f1(fmt.threshold) - result["eval"]["f1"]) < 1e-6


def test_it_learns_the_set(trained):
    from prm_annotate.prm.checkpoint import load_model, transformers_step_scores
    from prm_annotate.prm.train import load_base

    rows, _, out, result = trained
    assert result["examples"] == len(rows) and result["labels"] == sum(len(r["labels"]) for r in rows)
    assert result["last_loss"] < result["first_loss"]
    # The last checkpoint, not the saved (best-eval) one: how well it fits what it was trained on.
    model, tokenizer, fmt = load_model(out.parent / "prm.checkpoints" / "checkpoint-20")
    untrained, _ = load_base(str(POLICY_DIR), fmt)  # what train starts from: the policy, a new head
    untrained.eval()

    def gap(m) -> float:
        right, wrong = [], []
        for r in rows:
            for s, label in zip(transformers_step_scores(m, tokenizer, fmt, r["prompt"], r["completions"]), r["labels"]):
                (right if label else wrong).append(s)
        return sum(right) / len(right) - sum(wrong) / len(wrong)

    trained_gap, untrained_gap = gap(model), gap(untrained)
    assert trained_gap > 0.1 and abs(untrained_gap) < 0.05, (trained_gap, untrained_gap)


def test_a_base_with_the_tag_and_padded_embeddings(tmp_path):
    """The tag is already one token and the embedding matrix is larger than the tokenizer: nothing
    is resized, and config.vocab_size is the matrix's rows (len(tokenizer) would not load)."""
    from prm_annotate.prm.checkpoint import load_model
    from prm_annotate.prm.train import TrainConfig, train

    base = padded_tag_base(POLICY_DIR, tmp_path / "base")
    data = write_jsonl(tmp_path / "d.jsonl", trl_rows(world_responses(4, seed=5)))
    train(TrainConfig(data=str(data), base=str(base), output=str(tmp_path / "prm"), steps=3, batch_size=4,
                      lr=1e-3, quiet=True))
    config = json.loads((tmp_path / "prm" / "config.json").read_text())
    assert config["vocab_size"] == 640 and config["prm_annotate"]["step_tag_id"] == 609
    model, tokenizer, _ = load_model(tmp_path / "prm")
    assert len(tokenizer) == 610 and model.get_input_embeddings().weight.shape[0] == 640


def test_one_text_convention_with_export():
    """`train`/`score` strip each step as `export --format qwen` does, and a tokens export with
    `--step-end <extra_0> --step-sep ''` is token for token what `score` builds."""
    from transformers import AutoTokenizer

    from prm_annotate.export import Example, ExportOptions
    from prm_annotate.export.rows import to_row

    tokenizer = AutoTokenizer.from_pretrained(POLICY_DIR)
    tokenizer.add_tokens(["<extra_0>"], special_tokens=True)
    steps = ["  Add 2 and 3: 5. ", "\nSo the answer is 5.\n\n"]
    example = Example("p/0", "What is 2 + 3?", steps, [True, True], None)
    qwen = to_row(example, ExportOptions(format="qwen"))
    text = tokenizer.apply_chat_template(qwen["messages"], tokenize=False)
    fmt = PRMFormat()
    assert tokenizer.encode(text, add_special_tokens=False) == prm_token_ids(tokenizer, fmt, example.problem, steps)
    opts = ExportOptions(format="tokens", step_end="<extra_0>", step_sep="")
    tokens = to_row(example, opts, opts.export_format.token_check(opts, tokenizer))
    assert tokens["input_ids"] == prm_token_ids(tokenizer, PRMFormat(system_prompt=None), example.problem, steps)


def test_readers(tmp_path):
    from prm_annotate.prm.data import read_examples, split_by_problem

    rows = trl_rows(world_responses(10, seed=0))
    trl = read_examples(str(write_jsonl(tmp_path / "t.jsonl", rows)), "auto", soft=False)["train"]
    assert [e.hard for e in trl] == [[int(x) for x in r["labels"]] for r in rows]
    train_set, eval_set = split_by_problem(trl, 0.3)
    assert len({e.group for e in eval_set}) == 3 and not {e.group for e in eval_set} & {e.group for e in train_set}
    assert split_by_problem(trl, 0.3)[1] == eval_set  # stable
    tokens = [{"id": "p/0", "input_ids": [5, 6, 7, 8], "attention_mask": [1] * 4, "labels": [-100, 0.5, -100, 0.0]}]
    soft = read_examples(str(write_jsonl(tmp_path / "k.jsonl", tokens)), "auto", soft=True)["train"][0]
    assert (soft.positions, soft.targets, soft.hard, soft.group) == ([1, 3], [0.5, 0.0], [1, 0], "p")


def test_tokens_export_trains_with_its_marker(tmp_path):
    from prm_annotate.prm.data import read_examples
    from prm_annotate.prm.train import TrainConfig, load_data

    base = padded_tag_base(POLICY_DIR, tmp_path / "base")
    from transformers import AutoTokenizer

    from prm_annotate.export import Example, ExportOptions
    from prm_annotate.export.rows import to_row

    tokenizer = AutoTokenizer.from_pretrained(base)
    opts = ExportOptions(format="tokens", step_end="<extra_0>", step_sep="")
    check = opts.export_format.token_check(opts, tokenizer)
    rows = [to_row(Example(r["id"], r["problem"], r["steps"][:1], [True], None), opts, check)
            for r in world_responses(2, seed=0)]
    path = write_jsonl(tmp_path / "tokens.jsonl", rows)
    assert read_examples(str(path), "auto", soft=False)["train"][0].input_ids == rows[0]["input_ids"]

    def no_model(base_dir, fmt):  # the data path only: the tag and format a tokens export implies
        class Embeddings:
            num_embeddings = 640
        return type("M", (), {"get_input_embeddings": lambda self: Embeddings()})(), tokenizer

    data, _, _ = load_data(TrainConfig(data=str(path), base=str(base), output=str(tmp_path / "o")), no_model)
    assert data.fmt == PRMFormat(step_tag="<extra_0>", system_prompt=None)
    assert [f["input_ids"] for f in data.train] == [r["input_ids"] for r in rows]


def test_bad_rows_exit_2(tmp_path):
    data = write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "p", "completions": ["a", "b"], "labels": [True]}])
    result = runner.invoke(app, ["train", str(data), "--base", str(POLICY_DIR), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and f"{data}:1:" in result.stderr and "2 true/false" in result.stderr
    soft = write_jsonl(tmp_path / "soft.jsonl", [{"prompt": "p", "completions": ["a"], "labels": [True]}])
    result = runner.invoke(app, ["train", str(soft), "--soft", "--base", str(POLICY_DIR), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "--keep-scores" in result.stderr
    assert not (tmp_path / "o").exists()
    both = runner.invoke(app, ["train", str(soft), "--steps", "3", "--epochs", "1", "--base", str(POLICY_DIR),
                               "-o", str(tmp_path / "o")])
    assert both.exit_code == 2 and "not both" in both.stderr


def test_refuses_a_non_empty_output_and_old_checkpoints(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", trl_rows(world_responses(1, seed=0)))
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "keep.txt").write_text("mine")
    result = runner.invoke(app, ["train", str(data), "--base", str(POLICY_DIR), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "not empty" in result.stderr
    assert (tmp_path / "o" / "keep.txt").read_text() == "mine"
    (tmp_path / "n.checkpoints" / "checkpoint-5").mkdir(parents=True)
    result = runner.invoke(app, ["train", str(data), "--base", str(POLICY_DIR), "-o", str(tmp_path / "n")])
    assert result.exit_code == 2 and "--resume" in result.stderr
    assert (tmp_path / "n.checkpoints" / "checkpoint-5").is_dir()


def test_soft_targets_are_the_scores(tmp_path):
    from prm_annotate.prm.data import read_trl

    row = {"id": "a", "prompt": "p", "completions": ["s1", "s2"], "labels": [True, False], "scores": [0.75, 0]}
    data = write_jsonl(tmp_path / "d.jsonl", [row])
    soft = read_trl(str(data), soft=True)["train"][0]
    assert soft.targets == [0.75, 0.0] and soft.hard == [1, 0]
    assert read_trl(str(data), soft=False)["train"][0].targets == [1.0, 0.0]
