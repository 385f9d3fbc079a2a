"""The likelihood PRM (prm/likelihood.py) on the world policy, untrained head: what the LM reads is
the response as written (its log-probabilities and entropies through the tag-masked text equal those
of the plain text), the statistics are those of each step's own tokens, a batch scores as one
response at a time, the checkpoint round-trips (a first-version "step-stats" one too), and `train
--head likelihood` refuses what it cannot read."""
from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from typer.testing import CliRunner

from prm_annotate.cli import app
from prm_annotate.prm.checkpoint import PRMFormat, prm_token_ids, response_start
from prm_annotate.prm.likelihood import (LikelihoodScorer, build, load, reduce_steps, step_probabilities,
                                         untrained_step_probabilities)
from prm_annotate.world import POLICY_DIR
from testing.jsonl_files import write_jsonl
from testing.prm_fixtures import trl_rows, world_responses

FMT = PRMFormat(step_tag="<extra_0>", system_prompt=None, separator="\n\n")


@pytest.fixture(scope="module", params=["step-stats", "token-score"])
def prm(request):
    tokenizer = AutoTokenizer.from_pretrained(POLICY_DIR)
    tokenizer.add_tokens(["<extra_0>"], special_tokens=True)
    torch.manual_seed(0)
    model = build(str(POLICY_DIR), tokenizer, FMT, head_type=request.param).eval()
    # A new head's last layer is zero (every step 0.5): given weights, so the scores depend on the reading.
    assert not model.score.final.weight.any()
    torch.nn.init.normal_(model.score.final.weight)
    return model, tokenizer


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
            stats = model.token_stats(torch.tensor([ids]), None, torch.tensor([start]))
            highest_entropy = stats.at_tags(reduce_steps(stats, stats.entropy[..., None], "amax", 0.0))[0, is_tag[0], 0]
        plain = [t for t in ids if t != model.config.step_tag_id]
        with torch.no_grad():
            logp = torch.log_softmax(lm(torch.tensor([plain])).logits[0].float(), -1)
        own = [0.0] + [logp[i - 1, plain[i]].item() for i in range(1, len(plain))]
        entropy = [0.0] + [-(logp[i - 1].exp() * logp[i - 1]).sum().item() for i in range(1, len(plain))]
        # the tokens of each step in the plain text: after the response start, between tags, less
        # the step's last token (the one holding the separator)
        expected, expected_entropy, current, k = [], [], [], 0
        for pos, t in enumerate(ids):
            if t == model.config.step_tag_id:
                expected.append(min((o for o, _ in current[:-1]), default=0.0))
                expected_entropy.append(max((e for _, e in current[:-1]), default=0.0))
                current = []
            else:
                if pos >= start:
                    current.append((own[k], entropy[k]))
                k += 1
        got = feats[0][is_tag[0], 0].tolist()
        assert got == pytest.approx(expected, abs=1e-4)
        assert highest_entropy.tolist() == pytest.approx(expected_entropy, abs=1e-4)
        assert max(expected_entropy) > 0.1  # the world policy is not sure of every token
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


def test_a_first_version_checkpoint_still_loads_and_scores(prm, tmp_path):
    """A "step-stats" checkpoint saved before configs named their head (no `head_type`) loads as
    one and scores as it did."""
    _, tokenizer = prm
    torch.manual_seed(1)
    first = build(str(POLICY_DIR), tokenizer, FMT, head_type="step-stats").eval()
    first.save_pretrained(tmp_path / "first")
    config = json.loads((tmp_path / "first" / "config.json").read_text())
    for key in ("head_type", "token_inputs", "token_hidden", "token_channels", "pools"):
        config.pop(key)
    (tmp_path / "first" / "config.json").write_text(json.dumps(config))
    again = load(tmp_path / "first")
    assert again.config.head_type == "step-stats"
    ids, starts = _inputs(tokenizer, world_responses(2, seed=9))
    want = step_probabilities(first, ids, starts, 0)
    assert step_probabilities(again, ids, starts, 0) == want
    # and it is not what another head of the same base gives
    assert step_probabilities(prm[0], ids, starts, 0) != want


def test_untrained_statistics_are_per_step_lowest_values(prm):
    """"lowest": exp of each step's lowest token log p (the step-stats statistic); "beyond-entropy":
    never below it (the entropy is never negative) and at most 1."""
    model, tokenizer = prm
    responses = world_responses(3, seed=10)
    lowest = untrained_step_probabilities(POLICY_DIR, [(r["problem"], r["steps"]) for r in responses], "lowest",
                                          system_prompt=None)
    beyond = untrained_step_probabilities(POLICY_DIR, [(r["problem"], r["steps"]) for r in responses],
                                          "beyond-entropy", system_prompt=None)
    ids, starts = _inputs(tokenizer, responses)
    for r, i, s, low, b in zip(responses, ids, starts, lowest, beyond):
        with torch.no_grad():
            feats, is_tag = model.step_inputs(torch.tensor([i]), None, torch.tensor([s]), raw=True)
        assert low == pytest.approx(torch.exp(feats[0][is_tag[0], 0]).tolist(), abs=1e-6)
        assert len(b) == len(r["steps"]) and all(x - 1e-6 <= y <= 1.0 for x, y in zip(low, b))
    assert beyond != lowest


def test_train_refuses_a_tokens_export_and_a_base_that_is_not_causal(tmp_path):
    runner = CliRunner()
    tokens = write_jsonl(tmp_path / "t.jsonl", [{"input_ids": [5, 6, 7], "labels": [-100, -100, 1]}])
    result = runner.invoke(app, ["train", str(tokens), "--head", "likelihood", "--base", str(POLICY_DIR),
                                 "-o", str(tmp_path / "o"), "--quiet"])
    assert result.exit_code == 2 and "tokens" in result.output
    result = runner.invoke(app, ["train", str(tokens), "--head", "nope", "--base", str(POLICY_DIR),
                                 "-o", str(tmp_path / "o"), "--quiet"])
    assert result.exit_code == 2 and "--head nope" in result.output


@pytest.mark.parametrize("head,head_type", [("likelihood", "step-stats"), ("likelihood-tokens", "token-score")])
def test_each_likelihood_head_trains_and_its_checkpoint_names_it(tmp_path, head, head_type):
    rows = trl_rows(world_responses(8, seed=3))
    data = write_jsonl(tmp_path / "train.jsonl", rows)
    out = tmp_path / "prm"
    result = CliRunner().invoke(app, ["train", str(data), "--head", head, "--base", str(POLICY_DIR), "-o", str(out),
                                      "--system-prompt", "", "--steps", "2", "--batch-size", "4", "--max-length", "256",
                                      "--quiet"])
    assert result.exit_code == 0, result.output
    assert load(out).config.head_type == head_type
    from prm_annotate.prm.checkpoint import locate

    scorer = LikelihoodScorer(locate(str(out)), progress=False)
    r = world_responses(1, seed=4)[0]
    (scores,) = scorer.step_probabilities([scorer.token_ids(r["problem"], r["steps"])])
    assert len(scores) == len(r["steps"]) and all(0.0 <= p <= 1.0 for p in scores)


def test_the_lm_read_once_gives_the_logits_of_the_lm_run_again(prm):
    """`train` reads each text once with the frozen LM (cache_token_logprobs) and the collator pads
    what it read: a batch of mixed lengths gives the logits of the PRM that runs its LM on it."""
    from prm_annotate.prm.data import StepCollator
    from prm_annotate.prm.likelihood import cache_token_logprobs

    model, tokenizer = prm
    responses = world_responses(5, seed=8)
    ids, starts = _inputs(tokenizer, responses)
    features = [{"input_ids": i, "positions": [0], "targets": [1.0], "hard": [1], "response_start": s}
                for i, s in zip(ids, starts)]
    cache_token_logprobs(model, features)
    batch = StepCollator(tokenizer.pad_token_id)(features)
    assert len({len(i) for i in ids}) > 1 and batch["token_logprobs"].shape == (*batch["input_ids"].shape, 3)
    with torch.no_grad():
        cached = model(**batch).logits
        live = model(**{k: v for k, v in batch.items() if k != "token_logprobs"}).logits
    assert cached.abs().sum() > 0
    torch.testing.assert_close(cached, live, atol=1e-5, rtol=1e-5)


def test_training_on_the_lm_read_once_trains_the_head_it_would_train_reading_again(tmp_path, monkeypatch):
    """The same `train` run with the reading cached and with the LM run at every step (the cache
    switched off) ends with the same head."""
    from prm_annotate.prm import train as train_module

    data = write_jsonl(tmp_path / "train.jsonl", trl_rows(world_responses(8, seed=9)))
    heads = {}
    for name in ("cached", "live"):
        if name == "live":
            monkeypatch.setattr(train_module, "read_once", lambda *a: 0.0)
        out = tmp_path / name
        result = CliRunner().invoke(app, ["train", str(data), "--head", "likelihood", "--base", str(POLICY_DIR),
                                          "-o", str(out), "--system-prompt", "", "--steps", "4", "--batch-size", "4",
                                          "--lr", "3e-3", "--max-length", "256", "--quiet"])
        assert result.exit_code == 0, result.output
        heads[name] = load(out).score.state_dict()
    assert heads["cached"].keys() == heads["live"].keys()
    for key in heads["cached"]:
        torch.testing.assert_close(heads["cached"][key], heads["live"][key], atol=1e-5, rtol=1e-4)


def test_readings_are_kept_and_bound_to_one_lm(prm):
    """A sequence read once is not read again; readings of one LM are refused to another."""
    from prm_annotate.prm.likelihood import LMReadings
    from prm_annotate.world import JUDGE_DIR

    model, tokenizer = prm
    ids, _ = _inputs(tokenizer, world_responses(2, seed=10))
    readings = LMReadings()
    first = readings.of(model, ids)
    calls = []
    model.read_tokens, real = (lambda *a: calls.append(a) or real(*a)), model.read_tokens
    try:
        again = readings.of(model, ids[::-1])
    finally:
        del model.read_tokens
    assert calls == [] and len(ids) > 1 and all(a is b for a, b in zip(first, again[::-1]))
    other = build(str(JUDGE_DIR), tokenizer, FMT)
    with pytest.raises(ValueError, match="another LM"):
        readings.of(other, ids)
