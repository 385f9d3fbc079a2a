"""The arithmetic world: problem generator, truth checker, training script (lab/world), shipped models."""
from __future__ import annotations

import functools
import json
import random
import subprocess
import sys

import pytest

from prm_annotate.world.problems import (
    World,
    make_problem,
    make_problems,
    solution_steps,
)
from prm_annotate.world.truth import check_steps, true_first_error
from testing.paths import REPO

# A fixed hand-written problem: 3 + 5 = 8, 8 - 2 = 6, 6 * 2 = 12.
PROBLEM = {
    "id": "arith-hand-0",
    "problem": "Tom has 3 apples. Then gets 5 more. Then loses 2. Then the apples double. How many apples now?",
    "answer": "12",
    "world": {"name": "Tom", "items": "apples", "start": 3, "ops": [["add", 5], ["sub", 2], ["mul", 2]]},
}
RIGHT = ["Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 6.", "Step 3: 6 * 2 = 12.", "The answer is \\boxed{12}."]


# ---------------------------------------------------------------- generator

def test_generator_is_seeded_and_deterministic():
    assert make_problems(50, seed=0) == make_problems(50, seed=0)
    assert make_problems(50, seed=0) != make_problems(50, seed=1)
    # A problem does not depend on how many others are generated with it.
    assert make_problems(30, seed=3)[7] == make_problem("test", 7, 3)
    ids = [p["id"] for p in make_problems(50, seed=0, split="train")]
    assert ids[:2] == ["arith-train-0", "arith-train-1"] and len(set(ids)) == 50


def test_generated_answers_are_right_and_values_small():
    for rec in make_problems(500, seed=0):
        world = World.from_json(rec["world"])
        assert 1 <= len(world.ops) <= 4
        values = world.values()
        assert all(0 <= v <= 99 for v in values)
        assert rec["answer"] == str(values[-1])
        # The problem text states the start and every operand.
        assert rec["problem"].startswith(f"{world.name} has {world.start} {world.items}.")
        # The reference solution is right by the truth checker.
        assert true_first_error(rec, solution_steps(world)) == -1


def test_problems_cli_writes_jsonl(tmp_path):
    out = tmp_path / "p.jsonl"
    subprocess.run([sys.executable, "-m", "prm_annotate.world.problems", "--n", "7", "--seed", "2",
                    "-o", str(out)], check=True)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines == make_problems(7, seed=2)
    assert set(lines[0]) == {"id", "problem", "answer", "world"}


# ---------------------------------------------------------------- truth checker

def test_reference_solution_is_right():
    assert true_first_error(PROBLEM, RIGHT) == -1
    # Step labels and the "answer is" wording are not required; swapped operands of + are fine.
    assert true_first_error(PROBLEM, ["5 + 3 = 8", "8 - 2 = 6", "2 * 6 = 12", "\\boxed{12}"]) == -1
    # The answer may close the last step instead of being its own paragraph.
    assert true_first_error(PROBLEM, RIGHT[:2] + ["Step 3: 6 * 2 = 12. \\boxed{12}"]) == -1


@pytest.mark.parametrize("steps, expected, reason", [
    # wrong arithmetic at step 1, then consistent with its own wrong value
    (["Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 5.", "Step 3: 5 * 2 = 10.", "The answer is \\boxed{10}."],
     1, "wrong arithmetic"),
    # wrong carried value: step 2 starts from 9 although step 1 gave 8
    (["Step 1: 3 + 5 = 8.", "Step 2: 9 - 2 = 7.", "Step 3: 7 * 2 = 14.", "The answer is \\boxed{14}."],
     1, "wrong carried value"),
    # wrong operand and wrong operator
    (["Step 1: 3 + 4 = 7.", "Step 2: 7 - 2 = 5.", "Step 3: 5 * 2 = 10.", "\\boxed{10}"], 0, "wrong operand"),
    (["Step 1: 3 + 5 = 8.", "Step 2: 8 + 2 = 10.", "Step 3: 10 * 2 = 20.", "\\boxed{20}"], 1, "wrong operator"),
    # missing (skipped) step: "loses 2" never happens
    (["Step 1: 3 + 5 = 8.", "Step 2: 8 * 2 = 16.", "The answer is \\boxed{16}."], 1, "wrong operator"),
    (["Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 6.", "The answer is \\boxed{6}."], 2, "skipped operation"),
    # extra step after all operations
    (RIGHT[:3] + ["Step 4: 12 - 2 = 10.", "The answer is \\boxed{10}."], 3, "extra operation"),
    (RIGHT + ["Step 5: 12 + 1 = 13."], 4, "step after the final answer"),
    # no answer: all steps right, the response just stops
    (RIGHT[:3], 2, "no final answer"),
    # wrong final answer after right steps
    (RIGHT[:3] + ["The answer is \\boxed{13}."], 3, "wrong final answer"),
    # unparseable step
    (["Step 1: 3 + 5 = 8.", "Then we think about it.", "Step 3: 6 * 2 = 12.", "\\boxed{12}"], 1, "no equation"),
])
def test_truth_on_hand_made_wrong_responses(steps, expected, reason):
    assert true_first_error(PROBLEM, steps) == expected
    verdicts = check_steps(PROBLEM, steps)
    assert verdicts[-1].index == expected and not verdicts[-1].ok
    assert reason in verdicts[-1].reason
    assert all(v.ok for v in verdicts[:-1])


def test_empty_response_and_missing_world():
    assert true_first_error(PROBLEM, []) == 0
    with pytest.raises(ValueError, match="world"):
        true_first_error({"id": "x", "problem": "p", "answer": "1"}, RIGHT)


# ---------------------------------------------------------------- training

REPO_ROOT = REPO
WORLD_MODELS = REPO_ROOT / "prm_annotate" / "world" / "models"


def test_shipped_tokenizer_is_rebuilt_bit_for_bit(tmp_path):
    """The one BPE builder (lab/tokenizer.py) on the world's frozen corpus gives the shipped
    tokenizers, file for file (the policy's, and the judge's copy of it): a change to the builder
    or the corpus would change every model."""
    from transformers import AutoTokenizer

    from lab.world.train import JUDGE_TEMPLATE, tokenizer_corpus, world_tokenizer

    system_prompt = json.loads((WORLD_MODELS / "policy" / "world.json").read_text())["system_prompt"]
    tok = world_tokenizer(system_prompt, JUDGE_TEMPLATE)
    # The policy's files as train.py saves them, after its quick evaluation padded batches on the
    # left (tokenizer.json records that; padding is not part of the vocabulary).
    tok.padding_side = "left"
    tok(["1", "1 + 1"], padding=True)
    tok.save_pretrained(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        assert (tmp_path / name).read_bytes() == (WORLD_MODELS / "policy" / name).read_bytes(), name
    # The judge starts from the policy: train.py loads the policy's tokenizer, its quick evaluation
    # pads on the left, and it is saved beside the judge's weights. The same of the rebuilt files
    # gives the judge's, bit for bit (tokenizer_config.json but for `local_files_only`, which
    # records whether the hub was offline when it was saved: these tests run with HF_HUB_OFFLINE=1).
    # (The policy's config.json names the model type, qwen2: that makes AutoTokenizer a Qwen2
    # tokenizer, which adds the NFC normalizer the judge's tokenizer.json records.)
    (tmp_path / "config.json").write_bytes((WORLD_MODELS / "policy" / "config.json").read_bytes())
    judge = AutoTokenizer.from_pretrained(tmp_path)
    judge.padding_side = "left"
    judge.save_pretrained(tmp_path / "judge")
    for name in ("tokenizer.json", "chat_template.jinja"):
        assert (tmp_path / "judge" / name).read_bytes() == (WORLD_MODELS / "judge" / name).read_bytes(), name
    shipped, rebuilt = (json.loads((folder / "tokenizer_config.json").read_text())
                        for folder in (WORLD_MODELS / "judge", tmp_path / "judge"))
    assert shipped.pop("local_files_only") is False
    rebuilt.pop("local_files_only")
    assert shipped == rebuilt
    corpus = tokenizer_corpus(system_prompt, JUDGE_TEMPLATE)[::7]
    assert judge(corpus)["input_ids"] == tok(corpus)["input_ids"]


def test_training_writes_to_a_scratch_folder_unless_told():
    from lab.world.train import DEFAULT_OUT

    assert not DEFAULT_OUT.is_absolute() and "prm_annotate" not in DEFAULT_OUT.parts


def test_judge_diff_target_copies_up_to_the_first_wrong_token():
    from transformers import AutoTokenizer

    from lab.world.train import judge_target_diff
    from prm_annotate.judging import tag_paragraphs

    tok = AutoTokenizer.from_pretrained(WORLD_MODELS / "judge")
    first = "<paragraph_0>\nStep 1: 3 + 5 = 8.\n</paragraph_0>\n\n<paragraph_1>\n"
    three = tag_paragraphs(RIGHT[:3]) + "\n\n"
    cases = [
        (["Step 1: 3 + 5 = 8.", "Step 2: 8 - 2 = 5."], first + "Step 2: 8 - 2 =  wrong\n\\boxed{1}"),
        (RIGHT[:2] + ["Step 3: 6 * 2 = 13."],
         tag_paragraphs(RIGHT[:2]) + "\n\n<paragraph_2>\nStep 3: 6 * 2 = 1 wrong\n\\boxed{2}"),
        (RIGHT[:1] + ["Step 2: 7 - 2 = 5."], first + "Step 2:  wrong\n\\boxed{1}"),  # carried value
        (RIGHT[:1] + ["Step 2: 8 + 2 = 10."], first + "Step 2: 8 wrong\n\\boxed{1}"),  # operator
        (RIGHT[:1] + ["Step 2: 8 - 3 = 5."], first + "Step 2: 8 -  wrong\n\\boxed{1}"),  # operand
        (RIGHT[:1] + ["The answer is \\boxed{8}."], first + " wrong\n\\boxed{1}"),  # skipped operation
        (RIGHT[:3] + ["Step 4: 12 + 1 = 13."], three + "<paragraph_3>\n wrong\n\\boxed{3}"),  # extra step
        (RIGHT[:3] + ["The answer is \\boxed{13}."], three + "<paragraph_3>\nThe answer is boxed{1 wrong\n\\boxed{3}"),
        (RIGHT[:3], three + " wrong\n\\boxed{2}"),  # no final answer: the last paragraph
        (RIGHT + ["Step 5: 1 + 1 = 2."],
         tag_paragraphs(RIGHT).replace("\\boxed", "boxed") + "\n\n<paragraph_4>\n wrong\n\\boxed{4}"),
        (RIGHT, tag_paragraphs(RIGHT).replace("\\boxed", "boxed") + "\n\n\\boxed{-1}"),
    ]
    for steps, want in cases:
        text, spans = judge_target_diff(PROBLEM, steps, tok)
        assert text == want, steps
        verdict = [" wrong", str(true_first_error(PROBLEM, steps))] if "wrong" in want else ["-1"]
        assert [text[a:b] for a, b in spans] == verdict


def test_judge_diff_targets_parse_to_the_truth():
    """On generated responses with every kind of mistake, the judge stage's parser reads the truth
    from the target, and the copied part is the prompt's own tokens (the copy is exact)."""
    from transformers import AutoTokenizer

    from lab.world.train import judge_response, judge_target_diff
    from prm_annotate.judging.processbench import parse_processbench
    from prm_annotate.judging import tag_paragraphs

    tok = AutoTokenizer.from_pretrained(WORLD_MODELS / "judge")
    for i in range(300):
        problem = make_problem("difftest", i, 0)
        steps = judge_response(problem, random.Random(i), slip=0.3 * (i % 2))
        text, _ = judge_target_diff(problem, steps, tok)
        assert parse_processbench(text, len(steps)) == true_first_error(problem, steps)
        copied = text[:text.rindex("\\boxed{")].removesuffix(" wrong\n")
        assert (tag_paragraphs(steps).replace("\\boxed", "boxed") + "\n\n").startswith(copied)


def test_training_examples_render_like_the_pipeline():
    """The judge is trained on the exact text render_judge_prompt makes from the prompt file."""
    from lab.world.train import (
        JUDGE_TEMPLATE,
        judge_example,
        judge_target_copy,
        policy_example,
    )
    from prm_annotate.judging import render_judge_prompt

    template = JUDGE_TEMPLATE
    messages, target, key_spans = judge_example(5, 0, template, judge_target_copy)
    assert target[key_spans[-1][0]:key_spans[-1][1]] == target.rsplit("{", 1)[1].rstrip("}")  # the index
    assert len(messages) == 1 and messages[0]["role"] == "user"
    assert "<paragraph_0>\n" in messages[0]["content"] and target.rstrip().endswith("}")
    problem_text = messages[0]["content"].split("[Math Problem]\n\n")[1].split("\n\n[Solution]")[0]
    paragraphs = messages[0]["content"].split("[Solution]\n\n")[1].split("\n\nYour task")[0]
    steps = [p.split("\n")[1] for p in paragraphs.split("\n\n")]
    assert render_judge_prompt(template, problem_text, steps) == messages[0]["content"]
    messages, target = policy_example(0, 0, "SYSTEM")
    assert messages[-1] == {"role": "user", "content": make_problem("train", 0, 0)["problem"]}
    assert target.endswith("}.") and "\n\nThe answer is \\boxed{" in target


def test_thinker_examples_open_the_thought_in_the_prompt_and_continue_it_once():
    """The thinker learns the completion after `<think>\n`; a rollout's prefix (with or without
    its opening tag) continues the same thought, never a second one."""
    from transformers import AutoTokenizer

    from lab.world.train import THINKER_CHAT_TEMPLATE, TraceMix, encode, thinker_example
    from prm_annotate.world.thinking import trace_for

    tok = AutoTokenizer.from_pretrained(WORLD_MODELS / "policy")
    tok.chat_template = THINKER_CHAT_TEMPLATE
    messages, target = thinker_example(3, 0, "SYSTEM", TraceMix())
    assert target == trace_for("thinktrain", 3, 0)[1].completion and "\n</think>\n\n" in target
    ids, labels, _ = encode(tok, messages, target)
    learnt = tok.decode([i for i, label in zip(ids, labels) if label != -100])
    assert learnt == target + "<|im_end|>"
    assert tok.decode(ids).endswith("<|im_start|>assistant\n<think>\n" + target + "<|im_end|>")
    user = [{"role": "user", "content": "q"}]
    for prefix in ("Step 1: 1 + 1 = 2.\n\n", "<think>\nStep 1: 1 + 1 = 2.\n\n"):
        text = tok.apply_chat_template(user + [{"role": "assistant", "content": prefix}], tokenize=False,
                                       continue_final_message=True, add_generation_prompt=False)
        assert text.endswith("<|im_start|>assistant\n<think>\nStep 1: 1 + 1 = 2.\n\n") and text.count("<think>") == 1


def test_thinker_mix_overrides_named_fields_and_refuses_unknown_ones():
    from lab.world.train import TraceMix, thinker_mix
    from prm_annotate.world.thinking import trace_for

    assert thinker_mix([]) == TraceMix()
    mix = thinker_mix(["catch_now=0.8", "catch_later=0.1"])
    assert (mix.catch_now, mix.catch_later, mix.slip) == (0.8, 0.1, TraceMix().slip)
    with pytest.raises(SystemExit, match="catch_soon"):
        thinker_mix(["catch_soon=0.5"])
    # The mix reaches the traces: more slips corrected at once than under the defaults.
    def corrected(m):
        return sum(trace_for("thinktrain", i, 0, m)[1].corrected_slip for i in range(300))
    assert corrected(mix) > corrected(TraceMix())


def test_key_tokens_weigh_more_and_unit_weights_give_the_usual_loss():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lab.world.train import (
        JUDGE_TEMPLATE,
        collate,
        encode,
        judge_example,
        judge_target_diff,
        weighted_loss,
    )

    tok = AutoTokenizer.from_pretrained(WORLD_MODELS / "judge")
    target_of = functools.partial(judge_target_diff, tok=tok)
    messages, target, spans = judge_example(3, 0, JUDGE_TEMPLATE, target_of)
    ids, labels, weights = encode(tok, messages, target, spans, key_weight=5.0)
    heavy_tokens = tok.decode([i for i, w in zip(ids, weights) if w == 5.0])
    # A word token carries its leading space: the weighted tokens are the spans, give or take spaces.
    assert heavy_tokens.replace(" ", "") == "".join(target[a:b] for a, b in spans).replace(" ", "")
    assert all(label != -100 for label, w in zip(labels, weights) if w == 5.0)  # all in the answer

    model = AutoModelForCausalLM.from_pretrained(WORLD_MODELS / "judge", dtype=torch.float32)
    other = judge_example(4, 0, JUDGE_TEMPLATE, target_of)
    input_ids, mask, labels_t, _ = collate(tok, [encode(tok, messages, target), encode(tok, *other)])
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=mask, labels=labels_t)
        ones = torch.ones_like(labels_t, dtype=torch.float32)
        assert torch.allclose(weighted_loss(out.logits, labels_t, ones), out.loss, atol=1e-5)


@pytest.mark.slow  # the lab's training script three times: `make test-slow` (docs/test-durations.md)
def test_short_training_run_saves_loadable_models(tmp_path):
    """A few steps of a tiny config through the real script: tokenizer, training, saving."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    subprocess.run([sys.executable, "-m", "lab.world.train", "all", "--out", str(tmp_path),
                    "--policy-steps", "3", "--judge-steps", "2", "--judge-copy-steps", "1",
                    "--policy-batch", "4", "--judge-batch", "2",
                    "--hidden", "32", "--layers", "1", "--heads", "1", "--no-eval"],
                   check=True, timeout=300, cwd=REPO_ROOT)
    subprocess.run([sys.executable, "-m", "lab.world.train", "prm-base", "--out", str(tmp_path),
                    "--prm-base-steps", "2", "--policy-batch", "4", "--no-eval"], check=True, timeout=300, cwd=REPO_ROOT)
    subprocess.run([sys.executable, "-m", "lab.world.train", "thinker", "--out", str(tmp_path),
                    "--thinker-steps", "2", "--thinker-batch", "2", "--threads", "1", "--no-eval"],
                   check=True, timeout=300, cwd=REPO_ROOT)
    thinker = AutoTokenizer.from_pretrained(tmp_path / "thinker")
    assert thinker.apply_chat_template([{"role": "user", "content": "q"}], tokenize=False,
                                       add_generation_prompt=True).endswith("<|im_start|>assistant\n<think>\n")
    assert json.loads((tmp_path / "thinker" / "world.json").read_text())["mix"]["slip"] > 0
    steps = {"policy": 3, "judge": 2, "prm-base": 2}
    for kind in ("policy", "judge", "prm-base"):
        tok = AutoTokenizer.from_pretrained(tmp_path / kind)
        model = AutoModelForCausalLM.from_pretrained(tmp_path / kind)
        assert model.dtype == torch.bfloat16
        # Digits are one token each.
        assert tok.tokenize("123") == ["1", "2", "3"]
        meta = json.loads((tmp_path / kind / "world.json").read_text())
        assert meta["kind"] == kind and meta["steps"] == steps[kind]
        # The chat template leaves a final assistant message open (continue_final_message).
        text = tok.apply_chat_template(
            [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Step 1: 1 + 1 = 2.\n\n"}],
            tokenize=False, continue_final_message=True, add_generation_prompt=False)
        assert text.endswith("<|im_start|>assistant\nStep 1: 1 + 1 = 2.\n\n")
    # the PRMs' base is the policy trained on: its shape, other weights
    policy, base = (AutoModelForCausalLM.from_pretrained(tmp_path / k) for k in ("policy", "prm-base"))
    assert policy.config.hidden_size == base.config.hidden_size == 32
    assert not torch.equal(policy.model.layers[0].mlp.up_proj.weight, base.model.layers[0].mlp.up_proj.weight)


# ---------------------------------------------------------------- shipped models in vLLM



@pytest.mark.engine
def test_shipped_policy_answers_in_vllm(world_policy):
    from prm_annotate.engines.base import GenerationRequest, Sampling

    engine = world_policy
    system = json.loads((WORLD_MODELS / "policy" / "world.json").read_text())["system_prompt"]
    problems = make_problems(24, seed=0)
    requests = [GenerationRequest(key=p["id"], n=4, sampling=Sampling(temperature=0.7, max_tokens=128, seed=i),
                                  messages=({"role": "system", "content": system},
                                            {"role": "user", "content": p["problem"]}))
                for i, p in enumerate(problems)]
    results = engine.generate(requests)
    verdicts = []
    for p in problems:
        for text in results[p["id"]].texts:
            steps = [s for s in text.split("\n\n") if s.strip()]
            assert steps[0].startswith("Step 1:"), text
            verdicts.append(true_first_error(p, steps) == -1)
    # Able but imperfect: the regime that makes rollouts informative.
    assert 0.2 <= sum(verdicts) / len(verdicts) <= 0.95

    # A rollout-style continuation of a partial answer goes on with the next step.
    world = World.from_json(problems[0]["world"])
    prefix = solution_steps(world)[0] + "\n\n"
    cont = engine.generate([GenerationRequest(
        key="c", sampling=Sampling(temperature=0.0, max_tokens=64, seed=0), continue_final=True,
        messages=({"role": "system", "content": system}, {"role": "user", "content": problems[0]["problem"]},
                  {"role": "assistant", "content": prefix}))])["c"].texts[0]
    assert cont.startswith("Step 2:" if len(world.ops) > 1 else "The answer is"), cont


@pytest.mark.engine
def test_shipped_judge_answers_in_vllm(world_judge):
    from lab.world.train import (
        JUDGE_TEMPLATE,
        judge_messages,
        judge_response,
        judge_stats,
    )
    from prm_annotate.engines.base import GenerationRequest, Sampling
    from prm_annotate.judging.processbench import parse_processbench

    engine = world_judge
    template = JUDGE_TEMPLATE
    problems = make_problems(64, seed=1)
    responses = [judge_response(p, random.Random(i)) for i, p in enumerate(problems)]
    results = engine.generate([
        GenerationRequest(key=p["id"], messages=tuple(judge_messages(template, p, steps)),
                          sampling=Sampling(temperature=0.0, max_tokens=256, seed=0))
        for p, steps in zip(problems, responses)])
    truths, verdicts = [], []
    for p, steps in zip(problems, responses):
        text = results[p["id"]].texts[0]
        assert text.startswith("<paragraph_0>\n"), text  # it copies the paragraphs first
        verdicts.append(parse_processbench(text, len(steps)))  # the judge stage's parser: raises if unparseable
        truths.append(true_first_error(p, steps))
    # Useful, not perfect (models/README.md has the measured figures): it finds a share of the true
    # first errors and passes a share of the right responses. A judge that always answers -1, or
    # always names a paragraph, fails one of the two.
    stats = judge_stats(truths, verdicts)
    assert stats["error_acc"] >= 0.2 and stats["correct_acc"] >= 0.3, stats


def test_quick_judge_eval_reads_verdicts_with_the_judge_stages_strict_parser(monkeypatch):
    """Training's quick evaluation scores what the judge stage would parse: a verdict that ends on
    the right box after a different one is a parse failure, not a hit (a last-box regex took it)."""
    from lab.world import train
    from prm_annotate.judging.processbench import parse_processbench

    n = 12
    probs = [make_problem("judgetest", i, 0) for i in range(n)]
    responses = [train.judge_response(p, random.Random(f"judgetest/{i}")) for i, p in enumerate(probs)]
    truths = [true_first_error(p, s) for p, s in zip(probs, responses)]

    def scripted(texts_for):
        def generate(model, tok, conversations, temperature, max_tokens, seed):
            assert len(conversations) == n
            return texts_for
        return generate

    clean = [f"Paragraph 0: fine.\n\\boxed{{{t}}}" for t in truths]
    monkeypatch.setattr(train, "generate", scripted(clean))
    assert train.quick_judge_eval(None, None, train.JUDGE_TEMPLATE, n=n)["accuracy"] == 1.0
    # Each verdict first boxes a different index, then the true one: the stage's parser refuses them.
    torn = [f"\\boxed{{{t + 1 if t + 1 < len(s) else -1}}} no, \\boxed{{{t}}}" for t, s in zip(truths, responses)]
    for text, steps in zip(torn, responses):
        with pytest.raises(ValueError, match="conflicting"):
            parse_processbench(text, len(steps))
    monkeypatch.setattr(train, "generate", scripted(torn))
    assert train.quick_judge_eval(None, None, train.JUDGE_TEMPLATE, n=n)["accuracy"] == 0.0
