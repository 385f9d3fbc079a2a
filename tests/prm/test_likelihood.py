"""The likelihood PRM (prm/likelihood.py) on the world policy, untrained head: what the LM reads is
the response as written (its log-probabilities through the tag-masked text equal those of the plain
text), the statistics are those of each step's own tokens, a batch scores as one response at a
time, the checkpoint round-trips, and `train --head likelihood` refuses what it cannot read."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.prm.checkpoint import PRMFormat, prm_token_ids, response_start
from prm_annotate.prm.likelihood import LikelihoodScorer, build, load, step_probabilities
from prm_annotate.world import POLICY_DIR
from testing.jsonl_files import write_jsonl
from testing.prm_fixtures import world_responses

FMT = PRMFormat(step_tag="<extra_0>", system_prompt=None, separator="\n\n")


@pytest.fixture(scope="module")
def prm():
    tokenizer = AutoTokenizer.from_pretrained(POLICY_DIR)
    tokenizer.add_tokens(["<extra_0>"], special_tokens=True)
    torch.manual_seed(0)
    return build(str(POLICY_DIR), tokenizer, FMT).eval(), tokenizer


def _inputs(tokenizer, responses):
    ids = [prm_token_ids(tokenizer, FMT, r["problem"], r["steps"]) for r in responses]
    return ids, [response_start(tokenizer, FMT, r["problem"], i) for r, i in zip(responses, ids)]


def test_the_lm_reads_the_response_as_written(prm):
    """Per step, the lowest log-probability the PRM computes equals the one the plain LM gives the
    same tokens in the text without tags (the steps joined by their separator, as a policy writes)."""
    model, tokenizer = prm
    lm = AutoModelForCausalLM.from_pretrained(POLICY_DIR, dtype=torch.float32).eval()
    for r in world_responses(3, seed=5):
        (ids,), (start,) = _inputs(tokenizer, [r])
        with torch.no_grad():
            feats, is_tag = model.step_inputs(torch.tensor([ids]), None, torch.tensor([start]), raw=True)
        plain = [t for t in ids if t != model.config.step_tag_id]
        with torch.no_grad():
            logp = torch.log_softmax(lm(torch.tensor([plain])).logits[0].float(), -1)
        own = [0.0] + [logp[i - 1, plain[i]].item() for i in range(1, len(plain))]
        # the tokens of each step in the plain text: after the response start, between tags, less
        # the step's last token (the one holding the separator)
        expected, current, k = [], [], 0
        for pos, t in enumerate(ids):
            if t == model.config.step_tag_id:
                expected.append(min(current[:-1], default=0.0))
                current = []
            else:
                if pos >= start:
                    current.append(own[k])
                k += 1
        got = feats[0][is_tag[0], 0].tolist()
        assert got == pytest.approx(expected, abs=1e-4)
        assert tokenizer.decode(ids[start:start + 3]) == "Step 1"  # the prompt is left out


def test_a_batch_scores_as_one_response_at_a_time(prm):
    model, tokenizer = prm
    responses = world_responses(4, seed=6)
    ids, starts = _inputs(tokenizer, responses)
    together = step_probabilities(model, ids, starts, tokenizer.pad_token_id)
    for i, s, one in zip(ids, starts, together):
        (alone,) = step_probabilities(model, [i], [s], tokenizer.pad_token_id)
        assert len(alone) == len(one) and alone == pytest.approx(one, abs=1e-6)
    assert [len(s) for s in together] == [len(r["steps"]) for r in responses]


def test_a_step_reads_the_same_whatever_follows_it(prm):
    """A training text ends at its first error; the score of a step must not depend on whether the
    response goes on (causal LM, and the step's last token, which holds the separator or not, left out)."""
    model, tokenizer = prm
    r = world_responses(1, seed=7)[1]
    full, cut = _inputs(tokenizer, [r, {**r, "steps": r["steps"][:2]}])
    scores = step_probabilities(model, full[0:1] + full[1:2], cut, tokenizer.pad_token_id)
    assert scores[1] == pytest.approx(scores[0][:2], abs=1e-6)


def test_checkpoint_round_trip_and_scorer(prm, tmp_path):
    model, tokenizer = prm
    model.config.prm_annotate = {"step_tag": "<extra_0>", "system_prompt": None, "step_separator": "\n\n",
                                 "threshold": 0.4}
    model.save_pretrained(tmp_path / "p")
    tokenizer.save_pretrained(tmp_path / "p")
    again = load(tmp_path / "p")
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    from prm_annotate.prm.checkpoint import locate

    scorer = LikelihoodScorer(locate(str(tmp_path / "p")), progress=False)
    assert scorer.format == PRMFormat(step_tag="<extra_0>", system_prompt=None, threshold=0.4, separator="\n\n")
    responses = world_responses(2, seed=8)
    ids, starts = _inputs(tokenizer, responses)
    assert [scorer.token_ids(r["problem"], r["steps"]) for r in responses] == ids
    for got, want in zip(scorer.step_probabilities(ids), step_probabilities(model, ids, starts, 0)):
        assert got == pytest.approx(want, abs=1e-6)


def test_train_refuses_a_tokens_export_and_a_base_that_is_not_causal(tmp_path):
    runner = CliRunner()
    tokens = write_jsonl(tmp_path / "t.jsonl", [{"input_ids": [5, 6, 7], "labels": [-100, -100, 1]}])
    result = runner.invoke(app, ["train", str(tokens), "--head", "likelihood", "--base", str(POLICY_DIR),
                                 "-o", str(tmp_path / "o"), "--quiet"])
    assert result.exit_code == 2 and "tokens" in result.output
    result = runner.invoke(app, ["train", str(tokens), "--head", "nope", "--base", str(POLICY_DIR),
                                 "-o", str(tmp_path / "o"), "--quiet"])
    assert result.exit_code == 2 and "--head nope" in result.output
