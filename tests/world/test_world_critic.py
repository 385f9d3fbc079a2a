"""The thinking world's recovery critic (lab/world/train.py `critic`, lab/world/models/critic): its
training targets, its prompt and its training loop's shared prompt prefix."""
from __future__ import annotations

import json

from prm_annotate.judging.slips import parse_slips
from prm_annotate.recovery.labels import Recovery, Slip
from prm_annotate.world.thinking import TraceMix, trace_for
from prm_annotate.world.trace_truth import read_trace
from testing.paths import REPO

# Mixes the critic was not trained on (its training traces use TraceMix's defaults): every slip
# caught later, many wrong corrections, slips everywhere; and the defaults on other splits.
MIXES = [TraceMix(), TraceMix(slip=0.8, catch_now=0.1, catch_later=0.9), TraceMix(wrong_fix=0.6, wrong_fix_caught=0.7),
         TraceMix(slip=0.6, catch_now=0.3, catch_later=0.3, recheck=0.5, verify=0.9)]


def _traces(count: int):
    """Generated traces of splits the code was not written from, with their truths' recoveries."""
    for i in range(count):
        problem, trace = trace_for(f"critictest{i % 3}", i, 7, MIXES[i % len(MIXES)])
        yield problem, trace.steps, read_trace(problem, trace.text).recovery()


def test_critic_targets_read_back_by_the_strict_reader_as_the_truths_recovery():
    """What the trainer writes is what `judge --protocol recovery` reads: exactly the truth's slips
    and corrections, never a refusal; the baseline, a target written from the truth with each
    correction moved to the next step, is read as that other recovery (the check can fail)."""
    from lab.world.train import critic_target

    kinds = {"corrected": 0, "uncaught": 0, "none": 0}
    moved_read_other = 0
    for problem, steps, truth in _traces(600):
        text, spans = critic_target(steps, truth)
        assert parse_slips(text, len(steps)) == truth, (problem["id"], text)
        assert [text[a:b].split(",")[0] for a, b in spans[:-1]] == [
            " slip" if role == "slip" else " no slip" for role in _slipped(truth, len(steps))]
        kinds["corrected"] += bool(truth.corrected)
        kinds["uncaught"] += bool(truth.uncaught)
        kinds["none"] += not truth.slips
        if truth.corrected and all(s.corrected_at + 1 < len(steps) for s in truth.corrected):
            moved = Recovery(tuple(Slip(s.step, None if s.corrected_at is None else s.corrected_at + 1)
                                   for s in truth.slips))
            other = parse_slips(critic_target(steps, moved)[0], len(steps))
            assert other == moved != truth
            moved_read_other += 1
    assert all(kinds.values()) and moved_read_other > 50, (kinds, moved_read_other)
    # The generator never corrects two slips in one paragraph; the format can, and so can the target.
    several = Recovery((Slip(0, 3), Slip(1, 3), Slip(4, None)))
    text, _ = critic_target(["Step 1: 1 + 1 = 3."] * 6, several)
    assert "Verdict: no slip, corrects paragraph 1 and paragraph 2\n" in text
    assert parse_slips(text, 6) == several


def _slipped(recovery: Recovery, n: int) -> list[str]:
    steps = {s.step for s in recovery.slips}
    return ["slip" if i in steps else "other" for i in range(n)]


def test_critic_examples_render_as_the_recovery_protocol_renders_and_fit_the_context():
    """The prompt is the recovery protocol's own, rendered as the judge stage renders it (paragraphs
    from 1), the training split is not the measurement's, and prompt + target fit the world models'
    context on the measurement's longest traces."""
    from transformers import AutoTokenizer

    from lab.world.recovery import responses
    from lab.world.train import CRITIC_TEMPLATE, critic_example, critic_target, encode
    from prm_annotate.judging import load_judge_prompt, render_judge_prompt
    from prm_annotate.judging.slips import PROTOCOL
    from prm_annotate.world import JUDGE_DIR

    prompt = load_judge_prompt(PROTOCOL.prompt)
    assert CRITIC_TEMPLATE == prompt.file.text and prompt.style.name == "slips"
    messages, target, _ = critic_example(3, 0)
    problem, trace = trace_for("critictrain", 3, 0)
    assert messages == [{"role": "user", "content": render_judge_prompt(
        prompt.file.text, problem["problem"], trace.steps, start=prompt.style.first_paragraph)}]
    assert "<paragraph_1>\n" in messages[0]["content"] and "<paragraph_0>" not in messages[0]["content"]
    # The shipped critic's 100 x 16 training traces and the measurement's 240: other seeds (split
    # names), no trace in common; a short problem may recur by chance in a world this small.
    measured = [trace_for("recovery", i, 0) for i in range(240)]
    trained = [trace_for("critictrain", i, 0) for i in range(1600)]
    assert not {(p["problem"], t.text) for p, t in measured} & {(p["problem"], t.text) for p, t in trained}
    assert len({p["problem"] for p, _ in measured} & {p["problem"] for p, _ in trained}) <= 3

    tok = AutoTokenizer.from_pretrained(JUDGE_DIR)
    context = json.loads((JUDGE_DIR / "config.json").read_text())["max_position_embeddings"]
    records, truths = responses(240, 0)
    longest = max(records, key=lambda r: len(r["steps"]))
    ids, _, _ = encode(tok, [{"role": "user", "content": render_judge_prompt(
        prompt.file.text, longest["problem"], longest["steps"], start=1)}],
        *critic_target(longest["steps"], truths[longest["id"]].recovery()))
    assert len(ids) < context - 1024  # room for the measurement's --max-tokens 1024


def test_prompt_prefix_shared_once_per_batch_gives_the_same_loss_and_gradients():
    """`train(share_prefix=True)`'s loss and gradients are the per-row ones (a small random model;
    rows of a 200-token shared prompt, their own prompt ends of other lengths and weighted
    targets, as the critic's rows are); the baseline, the rows without the prefix's keys and
    values, gives other gradients."""
    import random

    import torch

    from lab.world.train import (
        _prefix_shared_loss,
        collate,
        new_model,
        shared_prefix,
        weighted_loss,
    )
    from transformers import AutoTokenizer

    from prm_annotate.world import JUDGE_DIR

    tok = AutoTokenizer.from_pretrained(JUDGE_DIR)
    model = new_model(tok, 32, 2, 2, 0)
    rng = random.Random(0)
    prompt = [rng.randrange(len(tok)) for _ in range(200)]
    examples = []
    for own, target in ((5, 30), (12, 18), (1, 25)):
        ids = prompt + [rng.randrange(len(tok)) for _ in range(own + target)]
        examples.append((ids, [-100] * (200 + own) + ids[200 + own:], [1.0] * (200 + own) + [2.0] * target))
    shared = shared_prefix(examples)
    assert shared == 200 and all(labs[shared] == -100 for _, labs, _ in examples)
    losses, grads = [], []
    for run in ("shared", "rows"):
        model.zero_grad()
        if run == "shared":
            loss = _prefix_shared_loss(model, tok, examples, shared)
        else:
            ids, mask, labels, weights = collate(tok, examples)
            loss = weighted_loss(model(input_ids=ids, attention_mask=mask).logits, labels, weights)
        loss.backward()
        losses.append(loss.item())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    model.zero_grad()
    cut, _, labels, weights = collate(tok, [(i[shared:], l[shared:], w[shared:]) for i, l, w in examples])
    weighted_loss(model(input_ids=cut).logits, labels, weights).backward()
    grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))

    def apart(a, b) -> float:
        return ((a - b).norm() / b.norm()).item()

    assert abs(losses[0] - losses[1]) < 1e-5 and apart(grads[0], grads[1]) < 1e-4, apart(grads[0], grads[1])
    assert apart(grads[2], grads[1]) > 1e-2, apart(grads[2], grads[1])
    assert shared_prefix([examples[0], ([7] + examples[1][0][1:], *examples[1][1:])]) == 0


def test_shipped_critic_is_the_worlds_size_and_tokenizer_and_says_how_it_was_built():
    from prm_annotate.world import JUDGE_DIR

    critic = REPO / "lab" / "world" / "models" / "critic"
    meta = json.loads((critic / "world.json").read_text())
    assert meta["kind"] == "critic" and meta["prompt"] == "slips" and meta["init"] == "shipped:judge"
    model = [json.loads((d / "tokenizer.json").read_text())["model"] for d in (critic, JUDGE_DIR)]
    assert model[0] == model[1]  # the world tokenizer's vocabulary and merges (its padding state aside)
    config = json.loads((critic / "config.json").read_text())
    assert {k: config[k] for k in ("hidden_size", "num_hidden_layers", "vocab_size")} == {
        k: json.loads((JUDGE_DIR / "config.json").read_text())[k] for k in ("hidden_size", "num_hidden_layers", "vocab_size")}
    assert (critic / "model.safetensors").stat().st_size < 3_000_000
    assert "critictrain" in meta["data"]
