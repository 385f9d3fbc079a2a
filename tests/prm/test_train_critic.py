"""`train --head critic`: a causal LM fine-tuned on `export --format critic` rows, and that model as
a judge. The rows in tests/data/critic/ are a real export of the world pipeline (world report ->
consensus -> `export --format critic`, tests/data/SOURCES.md). The engine test trains the tiny
random model until it has learnt four critiques by heart and reads them back through `judge` (in
process, then over `vllm serve`): the verdicts the parser reads must be the ones it learnt, which a
critic written, saved or served wrong does not give."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.judging import load_judge_prompt, render_judge_prompt
from prm_annotate.prm.critic import DISAGREEING, IGNORE, encode_rows, read_critic
from prm_annotate.world import POLICY_DIR
from testing.jsonl_files import read_jsonl, write_jsonl
from testing.paths import REPO
from testing.prm_fixtures import world_responses

runner = CliRunner()
ROWS = REPO / "tests" / "data" / "critic" / "world_critic_rows.jsonl"
KEY = r" wrong|\\boxed\{-?\d+\}"  # the world judge's deciding tokens: where it stops copying, and its verdict


def _tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(POLICY_DIR)


def _cfg(**kw) -> SimpleNamespace:
    return SimpleNamespace(**{"key_weight": 1.0, "key_pattern": KEY, "max_length": 2048, **kw})


def test_the_loss_is_on_the_critique_and_its_end_of_turn_only():
    tok = _tokenizer()
    rows = read_critic(str(ROWS), {})["train"]
    for row, feature in zip(rows, encode_rows(rows, tok, _cfg(), {})):
        ids, labels = feature["input_ids"], feature["labels"]
        start = next(i for i, x in enumerate(labels) if x != IGNORE)
        assert all(x != IGNORE for x in labels[start:])  # one span, to the end
        # What is learnt is the critique and the end of turn (the world template leaves the last turn
        # open, so the eos token vLLM stops at); what is not, the generation prompt.
        assert tok.decode(ids[start:]) == row.messages[-1]["content"] + "<|im_end|>"
        assert tok.decode(ids[:start]) == tok.apply_chat_template(row.messages[:1], tokenize=False,
                                                                  add_generation_prompt=True)
        assert set(feature["loss_weights"][start:]) == {1.0} and set(feature["loss_weights"][:start]) == {0.0}


def test_key_weight_falls_on_the_pattern_s_tokens():
    tok = _tokenizer()
    rows = read_critic(str(ROWS), {})["train"]
    wrong = 0
    for row, feature in zip(rows, encode_rows(rows, tok, _cfg(key_weight=4.0), {})):
        weighed = [t for t, w in zip(feature["input_ids"], feature["loss_weights"]) if w == 4.0]
        # The weighed tokens spell the matches, in order (a world critique's matches are whole tokens).
        assert tok.decode(weighed) == "".join(re.findall(KEY, row.messages[-1]["content"]))
        wrong += " wrong" in tok.decode(weighed)
    assert wrong == sum(r["verdict"] != -1 for r in read_jsonl(ROWS)) > 0


def test_disagreeing_critiques_are_counted_not_trained_on(tmp_path):
    rows = read_jsonl(ROWS)
    rows[1] = {**rows[1], "agrees": False, "verdict": 0}
    skipped: dict[str, int] = {}
    kept = read_critic(str(write_jsonl(tmp_path / "all.jsonl", rows)), skipped)["train"]
    assert len(kept) == len(rows) - 1 and skipped == {DISAGREEING: 1}
    assert rows[1]["id"] not in [r.id for r in kept][:1]


@pytest.mark.parametrize("change, message", [
    (lambda r: {**r, "messages": "text"}, "not a critic export row"),
    (lambda r: {**r, "messages": r["messages"][:1]}, "not a critic export row"),
    (lambda r: {**r, "messages": [r["messages"][1], r["messages"][0]]}, "the last message must be the assistant"),
    (lambda r: {**r, "agrees": "yes"}, "`agrees` must be true or false"),
])
def test_a_bad_row_is_exit_2_naming_file_and_line(tmp_path, change, message):
    rows = read_jsonl(ROWS)[:4]
    rows[2] = change(rows[2])
    data = write_jsonl(tmp_path / "rows.jsonl", rows)
    result = runner.invoke(app, ["train", str(data), "--head", "critic", "--base", str(POLICY_DIR),
                                 "-o", str(tmp_path / "critic"), "--steps", "1", "--quiet"])
    assert result.exit_code == 2, result.output
    assert f"{data}:3" in result.output and message in result.output
    assert not (tmp_path / "critic").exists()


@pytest.mark.parametrize("args, message", [
    (["--head", "critic", "--soft"], "--soft: --head critic"),
    (["--head", "critic", "--step-tag", "<x>"], "--step-tag: --head critic"),
    (["--head", "critic", "--key-pattern", "(("], "not a regular expression"),
    (["--key-weight", "3"], "need --head critic"),
])
def test_options_that_do_not_apply_are_refused(tmp_path, args, message):
    result = runner.invoke(app, ["train", str(ROWS), "--base", str(POLICY_DIR), "-o", str(tmp_path / "c"), *args])
    assert result.exit_code == 2 and message in result.output, result.output


def test_a_critic_learns_the_world_judge_s_critiques(tmp_path):
    """On the world policy, 20 steps: the weighted eval loss falls, the best checkpoint is the lowest
    eval loss, and the saved model is a causal LM with the base's chat template and its record."""
    result = runner.invoke(app, [
        "train", str(ROWS), "--head", "critic", "--base", str(POLICY_DIR), "-o", str(tmp_path / "critic"),
        "--steps", "20", "--batch-size", "8", "--lr", "3e-3", "--eval-split", "0.25", "--save-every", "10",
        "--key-weight", "3", "--key-pattern", KEY, "--quiet", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    history = json.loads(next((tmp_path / "critic.checkpoints").glob("checkpoint-20/trainer_state.json"))
                         .read_text())["log_history"]
    evals = {e["step"]: e["eval_token_loss"] for e in history if "eval_token_loss" in e}
    assert sorted(evals) == [10, 20] and evals[20] < evals[10]
    assert out["best_step"] == min(evals, key=evals.get)
    assert out["eval"]["token_loss"] == pytest.approx(min(evals.values()))
    assert 0 <= out["eval"]["key_accuracy"] <= 1
    config = json.loads((tmp_path / "critic" / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForCausalLM"]
    assert config["prm_annotate"]["critic"]["judge_prompts"] == ["processbench"]
    assert config["prm_annotate"]["critic"]["train"]["key_weight"] == 3.0
    assert (tmp_path / "critic" / "chat_template.jinja").read_bytes() == (POLICY_DIR / "chat_template.jinja").read_bytes()
    assert out["examples"] + out["eval_examples"] == len(read_jsonl(ROWS))


# ---------------------------------------------------------------- the critic as a judge (real vLLM)

# A short judge prompt in the processbench answer style: the tiny model learns four critiques in it
# in seconds (the built-in prompt's instructions are ~600 of its tokens).
SHORT_PROMPT = "---\nstyle: processbench\n---\n{problem}\n\n{paragraphs}\n\nThe first wrong paragraph, in \\boxed{}:"


@pytest.fixture(scope="module")
def learnt_critic(tmp_path_factory, tiny_model_dir) -> dict:
    """The tiny random model trained until it writes, for each of four world responses in a short
    judge prompt, the critique it was given: a line, then `\\boxed{verdict}`."""
    from prm_annotate.prm.train import TrainConfig, train

    tmp = tmp_path_factory.mktemp("learnt-critic")
    (tmp / "prompt.txt").write_text(SHORT_PROMPT)
    prompt = load_judge_prompt(str(tmp / "prompt.txt"))
    responses = [r for r in world_responses(4, seed=11, split="test") if r["id"].endswith("/0")]
    # A verdict per response, each a paragraph it has (the parser refuses an index past the last).
    learnt = [-1, 0, 1, len(responses[3]["steps"]) - 1]
    assert all(v < len(r["steps"]) for r, v in zip(responses, learnt))
    rows = [{"id": r["id"], "vote": 0, "agrees": True, "judge_prompt": str(tmp / "prompt.txt"), "messages": [
        {"role": "user", "content": render_judge_prompt(prompt.file.text, r["problem"], r["steps"])},
        {"role": "assistant", "content": f"Checked.\n\n\\boxed{{{verdict}}}"}]}
        for r, verdict in zip(responses, learnt)]
    train(TrainConfig(data=str(write_jsonl(tmp / "rows.jsonl", rows)), base=str(tiny_model_dir),
                      output=str(tmp / "critic"), head="critic", steps=80, batch_size=4, lr=1e-2, warmup=5,
                      save_every=80, quiet=True))
    write_jsonl(tmp / "responses.jsonl", [{k: v for k, v in r.items() if k != "label"} for r in responses])
    return {"dir": tmp / "critic", "responses": tmp / "responses.jsonl", "prompt": tmp / "prompt.txt",
            "learnt": {r["id"]: [v] for r, v in zip(responses, learnt)}}


def _judge(critic: dict, out: Path, *engine: str) -> dict[str, list]:
    cmd = [sys.executable, "-m", "prm_annotate", "judge", str(critic["responses"]), "-o", str(out), "--prompt",
           str(critic["prompt"]), "--protocol", "strict", "--max-tokens", "32", "--quiet", *engine]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return {r["id"]: r["judge"]["votes"] for r in read_jsonl(out)}


@pytest.mark.engine
def test_judge_reads_the_critic_s_verdicts_in_process_and_served(learnt_critic, heavy, tmp_path):
    from testing.heavy import start_server

    heavy.release()  # the in-process judge is a child process with its own engine
    expected = learnt_critic["learnt"]
    assert _judge(learnt_critic, tmp_path / "in-process.jsonl", "--model", str(learnt_critic["dir"]),
                  "--dtype", "float32") == expected
    server = heavy.get("server:critic", lambda: start_server(learnt_critic["dir"], "critic", tmp_path,
                                                             max_model_len=2048, dtype="float32"),
                       lambda s: s.stop())
    assert _judge(learnt_critic, tmp_path / "served.jsonl", "--base-url", server.base_url, "--model",
                  "critic") == expected
