"""Train the arithmetic world's tiny policy and judge (1M-parameter Qwen2 each) on this CPU.

    python -m lab.world.train all                                   # writes runs/world-models/
    python -m lab.world.train all --out prm_annotate/world/models   # replaces the shipped models
    python -m lab.world.train prm-base --out lab/world/models --policy prm_annotate/world/models/policy
                                                                    # replaces the PRM experiment's base
    python -m lab.world.train thinker --out prm_annotate/world/models --threads 1 --thinker-steps 300
                                                                    # replaces the thinking world's policy
    python -m lab.world.train critic --out lab/world/models --threads 1 --warmup 10
                                                                    # replaces the recovery critic

Everything is fixed: the tokenizer corpus, the data stream (problem i of step s is always the
same), the initial weights and the number of steps, so a rebuild gives the same models on the same
torch build. The shipped models are only overwritten when `--out` names their folder. The learning rate is constant after warm-up, so the model after N steps of a longer
run is the model of a run with `--steps N` (useful when calibrating).

Examples are rendered exactly as the pipeline renders them: the policy sees the world's system
prompt and the problem as a ChatML conversation; the judge sees the `processbench` judge prompt
(loaded as the judge stage loads it, rendered by `prm_annotate.judging.render_judge_prompt`) as the
user message; the thinker sees the policy's conversation under a chat template that opens the
thought (`THINKER_CHAT_TEMPLATE`) and learns a generated trace (prm_annotate/world/thinking.py);
the critic sees the recovery protocol's `slips` prompt (paragraphs from 1, as `judge --protocol
recovery` renders it) and learns the truth's slips and corrections of a generated trace.
The loss is on the assistant tokens only.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import json
import random
import sys
import time
from pathlib import Path
from typing import Callable

from prm_annotate.evaluation.evaluate import SplitMetrics
from prm_annotate.judging import load_judge_prompt, read_verdict, render_judge_prompt, tag_paragraphs
from prm_annotate.io.prompt_files import SYSTEM_PROMPTS, load_prompt
from prm_annotate.judging.slips import PROTOCOL as RECOVERY_PROTOCOL
from prm_annotate.recovery.labels import Recovery
from lab.world.corrupt import corrupt_solution
from prm_annotate.world import WORLD_JUDGE_PROMPT, WORLD_SYSTEM_PROMPT, model_setting
from prm_annotate.world.problems import OP_SYMBOL, World, make_problem, solution_steps
from prm_annotate.world.thinking import TraceMix, trace_for
from prm_annotate.world.trace_truth import read_trace
from prm_annotate.world.truth import EQUATION, boxed_values, check_steps, true_first_error

# A scratch folder: the shipped models (prm_annotate/world/models) change only when named.
DEFAULT_OUT = Path("runs") / "world-models"
# The prompts as the pipeline's stages load them (package resources, so a wheel has them too).
JUDGE_TEMPLATE = load_judge_prompt(WORLD_JUDGE_PROMPT).file.text

# Share of policy examples trained without any system prompt, so the policy also answers a bare
# user turn (e.g. when a pipeline run gives no system prompt).
NO_SYSTEM_SHARE = 0.15
# Share of judge examples whose response is the reference solution (true label -1).
JUDGE_RIGHT_SHARE = 0.35


def default_system_prompt() -> str:
    """The world's system prompt (the built-in step prompt), as the pipeline sends it."""
    return load_prompt(WORLD_SYSTEM_PROMPT, SYSTEM_PROMPTS).text.strip()


# ---------------------------------------------------------------- examples

def policy_messages(problem: dict, system_prompt: str | None) -> list[dict]:
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return messages + [{"role": "user", "content": problem["problem"]}]


# The thinker's chat template: the world's ChatML, with the thought opened in the generation
# prompt (`<|im_start|>assistant\n<think>\n`) as DeepSeek-R1 distills open it, so every sample
# thinks and the completion starts inside the thought. A final assistant message that is continued
# (`continue_final_message`: a rollout's prefix) is opened the same way unless it already starts
# with `<think>`, so a prefix taken from a completion continues the same thought, never a second.
THINKER_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- set open = loop.last and message['role'] == 'assistant' and not add_generation_prompt -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if open and message['content'][:7] != '<think>' -%}{{- '<think>\\n' -}}{%- endif -%}"
    "{{- message['content'] -}}"
    "{%- if not open -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n<think>\\n' -}}{%- endif -%}"
)


def thinker_example(index: int, seed: int, system_prompt: str, mix: TraceMix) -> tuple[list[dict], str]:
    """A problem and a generated trace, as the thinker writes it after the opened thought."""
    problem, trace = trace_for("thinktrain", index, seed, mix)
    rng = random.Random(f"thinker-example/{seed}/{index}")
    system = None if rng.random() < NO_SYSTEM_SHARE else system_prompt
    return policy_messages(problem, system), trace.completion


def thinker_mix(fields: list[str]) -> TraceMix:
    """TraceMix's defaults with the `FIELD=P` overrides given on the command line."""
    known = {f.name for f in dataclasses.fields(TraceMix)}
    values = {}
    for item in fields:
        name, _, value = item.partition("=")
        if name not in known:
            raise SystemExit(f"--thinker-mix {item!r}: no TraceMix field {name!r} (fields: {', '.join(sorted(known))})")
        values[name] = float(value)
    return TraceMix(**values)


def judge_messages(template: str, problem: dict, steps: list[str], start: int = 0) -> list[dict]:
    return [{"role": "user", "content": render_judge_prompt(template, problem["problem"], steps, start=start)}]


# A judge training target: (problem, response steps) -> (answer text, spans the loss weighs up).
JudgeTarget = Callable[[dict, list[str]], tuple[str, list[tuple[int, int]]]]


def true_next_paragraph(problem: dict, steps: list[str], index: int) -> str | None:
    """What a right response writes as paragraph `index`, given that the paragraphs before it are
    right: the next operation, or the final answer once all are done; None after the answer."""
    world = World.from_json(problem["world"])
    before = steps[:index]
    if any(boxed_values(s) for s in before):
        return None
    done = sum(len(EQUATION.findall(s)) for s in before)
    if done < len(world.ops):
        op, n = world.ops[done]
        values = world.values()
        return f"Step {done + 1}: {values[done]} {OP_SYMBOL[op]} {n} = {values[done + 1]}."
    return f"The answer is \\boxed{{{world.answer}}}."


# What follows the paragraphs in the judge prompt; a response that ends is compared up to here.
_AFTER_PARAGRAPHS = "\n\nYour"


def _copy_then_verdict(copied: str, index: int, wrong: bool) -> tuple[str, list[tuple[int, int]]]:
    """The copied paragraph text, then (after a wrong token) " wrong", then `\\boxed{index}`; the
    spans the loss weighs up are " wrong" and the index. The copy drops the backslash of \\boxed,
    so the judge's only \\boxed is its verdict (the strict parser refuses several answers)."""
    text, spans = copied.replace("\\boxed", "boxed"), []
    if wrong:
        spans.append((len(text), len(text) + len(" wrong")))
        text += " wrong\n"
    text += "\\boxed{"
    spans.append((len(text), len(text) + len(str(index))))
    return text + f"{index}}}", spans


def judge_target_copy(problem: dict, steps: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """Curriculum for `judge_target_diff`: copy every paragraph, then the index."""
    return _copy_then_verdict(tag_paragraphs(steps) + "\n\n", true_first_error(problem, steps), wrong=False)


def judge_target_diff(problem: dict, steps: list[str], tok) -> tuple[str, list[tuple[int, int]]]:
    """The judge's answer as a diff: it copies the tagged paragraphs token by token as long as
    they agree with what a right response writes, and at the first token that does not, writes
    " wrong" and `\\boxed{index}` (after copying every paragraph of a right response: `\\boxed{-1}`).

    Every decision is local: at each position two predictions sit at the same place -- the next
    token of the prompt's paragraphs (the judge's text so far IS the prompt's text so far, so this
    is an exact lookup) and the next token of a right solution (the arithmetic and reading of the
    problem the policy was trained on) -- and the judge only says whether they differ. Copying the
    claimed result never pays off, unlike in the retired "check" target (recompute and quote each
    paragraph: models/README.md), where every tiny judge drifted to echoing the claim: where the
    claim is wrong the target is " wrong", not the claim.
    """
    verdicts = check_steps(problem, steps)
    first_error = next((v.index for v in verdicts if not v.ok), -1)
    if first_error == -1:
        return _copy_then_verdict(tag_paragraphs(steps) + "\n\n", -1, wrong=False)
    if verdicts[-1].reason == "no final answer":
        # Every paragraph is right, the answer is missing: the difference is where it should start.
        reference = tag_paragraphs(steps + [true_next_paragraph(problem, steps, len(steps)) or ""])
    else:
        following = true_next_paragraph(problem, steps, first_error)
        # After the final answer nothing may follow: a paragraph no response can start with.
        reference = tag_paragraphs(steps[:first_error] + [following if following is not None else "\x00"])
    tagged = tag_paragraphs(steps) + _AFTER_PARAGRAPHS
    got = tok(tagged, add_special_tokens=False, return_offsets_mapping=True)
    want = tok(reference, add_special_tokens=False)["input_ids"]
    same = 0
    while same < min(len(want), len(got["input_ids"])) and got["input_ids"][same] == want[same]:
        same += 1
    cut = got["offset_mapping"][same][0] if same < len(got["input_ids"]) else len(tagged)
    return _copy_then_verdict(tagged[:cut], first_error, wrong=True)


# ---------------------------------------------------------------- the recovery critic

# The recovery protocol's prompt and its paragraph numbering (from 1), as `judge --protocol recovery`
# renders them.
CRITIC_PROMPT = RECOVERY_PROTOCOL.prompt
CRITIC_TEMPLATE = load_judge_prompt(CRITIC_PROMPT).file.text
CRITIC_START = load_judge_prompt(CRITIC_PROMPT).style.first_paragraph


def critic_target(steps: list[str], recovery: Recovery) -> tuple[str, list[tuple[int, int]]]:
    """The slips answer for `recovery` over `steps`: each analysis copies its paragraph (so the
    verdict is decided next to the text it judges, as the diff judge decides next to its copy;
    the copy drops \\boxed's backslash as that judge's does), then its verdict line; the conclusion
    lists the slips. The spans the loss weighs up: every verdict line and the conclusion's lines."""
    corrects: dict[int, list[int]] = {}
    for s in recovery.slips:
        if s.corrected_at is not None:
            corrects.setdefault(s.corrected_at, []).append(s.step)
    slipped = {s.step for s in recovery.slips}
    text, spans = "", []
    for i, step in enumerate(steps):
        k = i + CRITIC_START
        text += f"<analysis_{k}>\n{step.replace(chr(92) + 'boxed', 'boxed')}\n"
        verdict = "Verdict: " + ("slip" if i in slipped else "no slip")
        if i in corrects:
            verdict += ", corrects " + " and ".join(f"paragraph {j + CRITIC_START}" for j in sorted(corrects[i]))
        spans.append((len(text) + len("Verdict:"), len(text) + len(verdict)))
        text += f"{verdict}\n</analysis_{k}>\n"
    lines = [f"Slips: {len(recovery.slips)}"] + [
        f"Paragraph {s.step + CRITIC_START}: " + ("not corrected" if s.corrected_at is None
                                                  else f"corrected in paragraph {s.corrected_at + CRITIC_START}")
        for s in recovery.slips]
    text += "<conclusion>\n"
    spans.append((len(text), len(text) + len("\n".join(lines))))
    return text + "\n".join(lines) + "\n</conclusion>", spans


def critic_example(index: int, seed: int, split: str = "critictrain") -> tuple[list[dict], str, list[tuple[int, int]]]:
    """A generated thinking trace (split `critictrain`: problems the measurement's `recovery` split
    never draws) in the slips prompt, and the truth's recovery as the target."""
    problem, trace = trace_for(split, index, seed)
    recovery = read_trace(problem, trace.text).recovery()
    return (judge_messages(CRITIC_TEMPLATE, problem, trace.steps, CRITIC_START),
            *critic_target(trace.steps, recovery))


def judge_response(problem: dict, rng: random.Random, slip: float = 0.0) -> list[str]:
    world = World.from_json(problem["world"])
    if rng.random() < JUDGE_RIGHT_SHARE:
        return solution_steps(world)
    return corrupt_solution(world, rng, slip=slip)


def policy_example(index: int, seed: int, system_prompt: str) -> tuple[list[dict], str]:
    problem = make_problem("train", index, seed)
    rng = random.Random(f"policy-example/{seed}/{index}")
    system = None if rng.random() < NO_SYSTEM_SHARE else system_prompt
    return policy_messages(problem, system), "\n\n".join(solution_steps(World.from_json(problem["world"])))


def judge_example(index: int, seed: int, template: str, target: JudgeTarget,
                  real: list[tuple[dict, list[str]]] = (), slip: float = 0.0,
                  ) -> tuple[list[dict], str, list[tuple[int, int]]]:
    """Every other example is a real policy response when `real` is given, else an injected error
    (plus arithmetic slips with probability `slip` per equation); `target` writes the answer."""
    if real and index % 2 == 1:
        problem, steps = real[(index // 2) % len(real)]
    else:
        problem = make_problem("judgetrain", index, seed)
        steps = judge_response(problem, random.Random(f"judge-example/{seed}/{index}"), slip)
    return (judge_messages(template, problem, steps), *target(problem, steps))


def sample_policy_responses(policy_dir: Path, count: int, seed: int, log) -> list[tuple[dict, list[str]]]:
    """`count` responses of the trained policy (4 per problem, T=0.7) to fresh problems: real errors."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(policy_dir)
    model = AutoModelForCausalLM.from_pretrained(policy_dir, dtype="float32").eval()
    system_prompt = json.loads((policy_dir / "world.json").read_text())["system_prompt"]
    problems = [make_problem("judgepolicy", i, seed) for i in range(count // 4)]
    convs = [(p, policy_messages(p, system_prompt)) for p in problems for _ in range(4)]
    out = []
    for b in range(0, len(convs), 256):
        chunk = convs[b:b + 256]
        texts = generate(model, tok, [c for _, c in chunk], 0.7, 96, seed=seed + b)
        out += [(p, [x for x in t.split("\n\n") if x.strip()]) for (p, _), t in zip(chunk, texts)]
    out = [(p, steps) for p, steps in out if steps]
    log(f"sampled {len(out)} policy responses for the judge")
    return out


def _frozen_check_lines(problem: dict, steps: list[str]) -> str:
    """Judge-style text for the tokenizer corpus, frozen in the form it had when the shipped
    tokenizer was built: changing this text changes the tokenizer, and so every model."""
    world = World.from_json(problem["world"])
    values = world.values()
    done = 0
    lines = []
    first_error = -1
    for verdict in check_steps(problem, steps):
        i, step = verdict.index, steps[verdict.index] if verdict.index < len(steps) else ""
        word = "correct" if verdict.ok else "wrong"
        if verdict.reason == "no final answer":
            lines.append(f"Paragraph {i}: no final answer.")
        elif EQUATION.search(step) and done < len(world.ops):
            op, n = world.ops[done]
            lines.append(f"Paragraph {i}: {values[done]} {OP_SYMBOL[op]} {n} = {values[done + 1]}, {word}.")
        elif boxed_values(step) and done == len(world.ops):
            lines.append(f"Paragraph {i}: the answer is {world.answer}, {word}.")
        else:
            lines.append(f"Paragraph {i}: {word}.")
        done += len(EQUATION.findall(step)) if verdict.ok else 0
        if not verdict.ok:
            first_error = i
    lines.append(f"\\boxed{{{first_error}}}")
    return "\n".join(lines)


def world_tokenizer(system_prompt: str, template: str):
    """The world's tokenizer: the shared BPE builder on the world's frozen corpus."""
    from lab.tokenizer import build_bpe_tokenizer

    return build_bpe_tokenizer(tokenizer_corpus(system_prompt, template))


def tokenizer_corpus(system_prompt: str, template: str) -> list[str]:
    texts = [system_prompt, template]
    for i in range(1500):
        problem = make_problem("tok", i, 0)
        steps = judge_response(problem, random.Random(f"tok/{i}"))
        texts += [problem["problem"], "\n\n".join(steps),
                  render_judge_prompt(template, problem["problem"], steps), _frozen_check_lines(problem, steps)]
    return texts


# ---------------------------------------------------------------- training

def encode(tok, messages: list[dict], target: str, key_spans: list[tuple[int, int]] = (),
           key_weight: float = 1.0) -> tuple[list[int], list[int], list[float]]:
    """Token ids of prompt + target + <|im_end|>, labels masking everything but the answer, and a
    loss weight per token (`key_weight` for tokens inside `key_spans` of the target, else 1)."""
    prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    full = tok(prompt + target + "<|im_end|>", add_special_tokens=False, return_offsets_mapping=True)
    full_ids = full["input_ids"]
    assert full_ids[: len(prompt_ids)] == prompt_ids, "prompt tokens change when the answer follows"
    shifted = [(start + len(prompt), end + len(prompt)) for start, end in key_spans]
    weights = [key_weight if any(s < b and a < e for s, e in shifted) else 1.0
               for a, b in full["offset_mapping"]]
    return full_ids, [-100] * len(prompt_ids) + full_ids[len(prompt_ids):], weights


def collate(tok, batch: list[tuple[list[int], list[int], list[float]]]):
    import torch

    width = max(len(ids) for ids, _, _ in batch)
    pad = tok.pad_token_id
    input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    weights = torch.zeros((len(batch), width), dtype=torch.float32)
    for row, (ids, labs, w) in enumerate(batch):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, : len(labs)] = torch.tensor(labs)
        mask[row, : len(ids)] = 1
        weights[row, : len(w)] = torch.tensor(w)
    return input_ids, mask, labels, weights


def weighted_loss(logits, labels, weights):
    """Next-token cross-entropy averaged with per-token weights (HF's loss when all weights are 1)."""
    import torch.nn.functional as F

    logits, labels, weights = logits[:, :-1], labels[:, 1:], weights[:, 1:]
    ce = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), labels.reshape(-1),
                         ignore_index=-100, reduction="none").view(labels.shape)
    weights = weights * (labels != -100)
    return (ce * weights).sum() / weights.sum()


def shared_prefix(examples: list[tuple[list[int], list[int], list[float]]], least: int = 64) -> int:
    """How many leading tokens every example shares, all of them prompt (label -100); 0 under `least`."""
    first = examples[0][0]
    n = min(min(len(ids) for ids, _, _ in examples) - 1,
            min(next(i for i, x in enumerate(labs) if x != -100) for _, labs, _ in examples))
    for ids, _, _ in examples[1:]:
        n = next((i for i in range(n) if ids[i] != first[i]), n)
    return n if n >= least else 0


def _prefix_shared_loss(model, tok, examples, shared: int):
    """`weighted_loss` over the batch with its common prompt prefix run once: its keys and values
    (gradients flow through them) are repeated for every row, whose rest continues from them. The
    slips prompt's instructions are ~1,350 of its ~1,550 tokens: they cost one row, not a batch."""
    import torch

    prefix = torch.tensor([examples[0][0][:shared]])
    cache = model(input_ids=prefix, use_cache=True).past_key_values
    cache.batch_repeat_interleave(len(examples))
    input_ids, mask, labels, weights = collate(tok, [(i[shared:], l[shared:], w[shared:]) for i, l, w in examples])
    attention = torch.cat([torch.ones((len(examples), shared), dtype=mask.dtype), mask], dim=1)
    logits = model(input_ids=input_ids, attention_mask=attention, past_key_values=cache).logits
    return weighted_loss(logits, labels, weights)


def new_model(tok, hidden: int, layers: int, heads: int, seed: int):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        # RoPE has no weights: a long context costs nothing and leaves room for any max_tokens.
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)


def train(model, tok, make_example, steps: int, batch: int, lr: float, warmup: int,
          on_eval=None, eval_every: int = 0, log=print, key_weight: float = 1.0, decay: bool = False,
          share_prefix: bool = False) -> None:
    """`make_example(i)` gives (messages, target) or (messages, target, key_spans). The learning rate
    is constant after warm-up, or with `decay` falls linearly to 0 at the last step. `share_prefix`:
    the prompt tokens every example of a batch starts with are run once per batch (the same loss)."""
    import torch

    model.train()
    optim = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        optim, lambda s: min(1.0, (s + 1) / max(1, warmup)) * ((1 - s / steps) if decay else 1.0))
    start = time.time()
    for step in range(steps):
        examples = [encode(tok, *make_example(step * batch + j), key_weight=key_weight) for j in range(batch)]
        shared = shared_prefix(examples) if share_prefix else 0
        if shared:
            loss = _prefix_shared_loss(model, tok, examples, shared)
        elif key_weight == 1.0:
            input_ids, mask, labels, weights = collate(tok, examples)
            loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        else:
            input_ids, mask, labels, weights = collate(tok, examples)
            loss = weighted_loss(model(input_ids=input_ids, attention_mask=mask).logits, labels, weights)
        optim.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        sched.step()
        if (step + 1) % 50 == 0 or step == steps - 1:
            log(f"step {step + 1}/{steps} loss {loss.item():.4f} ({time.time() - start:.0f} s)")
        if on_eval and eval_every and (step + 1) % eval_every == 0 and step + 1 < steps:
            model.eval()
            on_eval(step + 1)
            model.train()
    model.eval()


# ---------------------------------------------------------------- quick checks (torch only)

def generate(model, tok, conversations: list[list[dict]], temperature: float, max_new_tokens: int,
             seed: int) -> list[str]:
    import torch

    tok.padding_side = "left"
    prompts = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in conversations]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(
            **enc, max_new_tokens=max_new_tokens, do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None, top_k=0, top_p=1.0,
            pad_token_id=tok.pad_token_id, eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"))
    return tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)


def quick_policy_eval(model, tok, system_prompt: str, problems: int = 64, samples: int = 4) -> dict:
    probs = [make_problem("test", i, 0) for i in range(problems)]
    convs = [policy_messages(p, system_prompt) for p in probs for _ in range(samples)]
    texts = generate(model, tok, convs, 0.7, 96, seed=0)
    right = [check_steps(probs[k // samples], [s for s in t.split("\n\n") if s.strip()])[-1].ok
             for k, t in enumerate(texts)]
    per_problem = [right[i * samples:(i + 1) * samples] for i in range(problems)]
    return {"accuracy": sum(right) / len(right),
            "mixed": sum(0 < sum(r) < samples for r in per_problem) / problems}


def quick_thinker_eval(model, tok, system_prompt: str, problems: int = 64, samples: int = 4,
                       max_new_tokens: int = 384) -> dict:
    """Shares of the samples (64 test problems x 4, T=0.7), as the trace truth reads them."""
    probs = [make_problem("test", i, 0) for i in range(problems)]
    convs = [policy_messages(p, system_prompt) for p in probs for _ in range(samples)]
    texts = []
    for b in range(0, len(convs), 64):
        texts += generate(model, tok, convs[b:b + 64], 0.7, max_new_tokens, seed=b)
    truths = [read_trace(probs[k // samples], t) for k, t in enumerate(texts)]
    n = len(truths)
    return {"finished": sum(t.finished for t in truths) / n,
            "accuracy": sum(t.final_correct for t in truths) / n,
            "no_error": sum(t.first_error == -1 for t in truths) / n,
            "corrected_slip": sum(bool(t.corrected_slips) for t in truths) / n,
            "uncaught_slip": sum(bool(t.uncaught_slips) for t in truths) / n,
            "wrong_correction": sum(bool(t.wrong_corrections) for t in truths) / n,
            "paragraphs": sum(len(t.paragraphs) for t in truths) / n}


def judge_stats(truths: list[int], predictions: list[int | None]) -> dict:
    """ProcessBench's accuracies and F1 (`prm_annotate.evaluation.evaluate`, as fractions) of first-error
    predictions (None: unparsed) against the true first errors."""
    metrics = SplitMetrics()
    for truth, pred in zip(truths, predictions):
        metrics.add(truth, pred, None)

    def fraction(percent: float | None) -> float:
        return (percent or 0.0) / 100

    return {"n": metrics.n, "accuracy": (metrics.error_hits + metrics.correct_hits) / max(1, metrics.n),
            "error_acc": fraction(metrics.error_acc), "correct_acc": fraction(metrics.correct_acc),
            "f1": fraction(metrics.f1), "parse_failures": metrics.missing}


def quick_judge_eval(model, tok, template: str, n: int = 96) -> dict:
    probs = [make_problem("judgetest", i, 0) for i in range(n)]
    responses = [judge_response(p, random.Random(f"judgetest/{i}")) for i, p in enumerate(probs)]
    texts = generate(model, tok, [judge_messages(template, p, s) for p, s in zip(probs, responses)],
                     0.0, 256, seed=0)
    # Read as the judge stage reads a verdict (strictly: several different answers are none).
    predictions = [read_verdict(t, len(s)) for t, s in zip(texts, responses)]
    stats = judge_stats([true_first_error(p, s) for p, s in zip(probs, responses)], predictions)
    # Overall accuracy alone hides a judge that answers -1 to everything (a third of these are right).
    return {key: stats[key] for key in ("accuracy", "error_acc", "correct_acc")}


# ---------------------------------------------------------------- entry point

def save(model, tok, out: Path, meta: dict) -> None:
    import torch
    from transformers import GenerationConfig

    out.mkdir(parents=True, exist_ok=True)
    # Save a bfloat16 copy: rounding the weights in place would perturb any training that goes on.
    copy.deepcopy(model).to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    GenerationConfig(eos_token_id=model.config.eos_token_id, pad_token_id=tok.pad_token_id,
                     bos_token_id=None).save_pretrained(out)
    tok.save_pretrained(out)
    (out / "world.json").write_text(json.dumps(meta, indent=2) + "\n")


def snapshot(model, tok, out: Path, quick_eval: dict, log) -> None:
    """Calibration aid: with a constant learning rate, this is the model of a run with --steps N."""
    log(f"  {out.name}: {quick_eval}")
    save(model, tok, out, {"quick_eval": quick_eval})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("which", choices=["policy", "judge", "prm-base", "thinker", "critic", "all"],
                        help="all: the policy, then the judge (prm-base, thinker and critic are built on their own)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="writes OUT/policy and OUT/judge, or OUT/prm-base (default: %(default)s; the "
                             "shipped models are prm_annotate/world/models, the experiment's base lab/world/models)")
    parser.add_argument("--policy", type=Path, default=None,
                        help="prm-base: the policy it starts from (default: OUT/policy)")
    parser.add_argument("--policy-steps", type=int, default=500)
    parser.add_argument("--policy-batch", type=int, default=64)
    parser.add_argument("--judge-steps", type=int, default=3000)
    parser.add_argument("--prm-base-steps", type=int, default=600)
    parser.add_argument("--thinker-steps", type=int, default=600)
    parser.add_argument("--thinker-batch", type=int, default=32)
    parser.add_argument("--thinker-init", type=Path, default=None,
                        help="the model the thinker starts from (default: OUT/policy)")
    parser.add_argument("--thinker-mix", action="append", default=[], metavar="FIELD=P",
                        help="a TraceMix field of the thinker's training traces (repeatable), e.g. catch_now=0.75")
    parser.add_argument("--thinker-decay", action="store_true",
                        help="decay the thinker's learning rate linearly to 0 (so its last steps settle)")
    parser.add_argument("--critic-steps", type=int, default=100)
    parser.add_argument("--critic-batch", type=int, default=16)
    parser.add_argument("--critic-init", type=Path, default=None,
                        help="the model the recovery critic starts from (default: the shipped world judge)")
    parser.add_argument("--critic-key-weight", type=float, default=3.0,
                        help="loss weight of the critic's verdict and conclusion lines")
    parser.add_argument("--judge-batch", type=int, default=32)
    parser.add_argument("--judge-real-samples", type=int, default=2048,
                        help="policy responses (from OUT/policy) mixed into the judge's data; 0: none")
    parser.add_argument("--judge-init", choices=["policy", "random"], default="policy",
                        help="start the judge from OUT/policy (default) or from random weights")
    parser.add_argument("--judge-slip", type=float, default=0.0,
                        help="in the judge's injected-error responses, also slip each equation's arithmetic "
                             "with this probability (makes copying the claimed result a losing bet)")
    parser.add_argument("--judge-key-weight", type=float, default=2.0,
                        help="loss weight of the judge's deciding tokens (\" wrong\", the index)")
    parser.add_argument("--judge-copy-steps", type=int, default=200,
                        help="the first N steps copy the paragraphs whole (reading before judging)")
    parser.add_argument("--judge-copy-slip", type=float, default=0.5,
                        help="arithmetic slips in the copy steps' responses, so that re-solving does not copy")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--system-prompt", type=Path, default=None,
                        help="policy system prompt file (default: the built-in step prompt, the world's)")
    parser.add_argument("--eval-every", type=int, default=0,
                        help="calibration: quick torch-only evaluation and a snapshot in OUT/<kind>-step<N> every N steps")
    parser.add_argument("--no-eval", action="store_true", help="skip the final quick evaluation")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    system_source = str(args.system_prompt) if args.system_prompt else f"the built-in {WORLD_SYSTEM_PROMPT}"
    system_prompt = (load_prompt(str(args.system_prompt)).text.strip() if args.system_prompt
                     else default_system_prompt())
    template = JUDGE_TEMPLATE
    tok = world_tokenizer(system_prompt, template)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    log(f"tokenizer: {len(tok)} tokens; system prompt: {system_source}")
    common = {"command": "python -m lab.world.train " + " ".join(argv or sys.argv[1:]),
              "seed": args.seed, "lr": args.lr, "warmup": args.warmup, "hidden": args.hidden,
              "layers": args.layers, "heads": args.heads, "torch": torch.__version__}

    if args.which in ("policy", "all"):
        model = new_model(tok, args.hidden, args.layers, args.heads, args.seed)
        log(f"policy: {sum(p.numel() for p in model.parameters()):,} parameters")
        start = time.time()
        train(model, tok, lambda i: policy_example(i, args.seed, system_prompt), args.policy_steps,
              args.policy_batch, args.lr, args.warmup, log=log, eval_every=args.eval_every,
              on_eval=lambda s: snapshot(model, tok, args.out / f"policy-step{s}",
                                         quick_policy_eval(model, tok, system_prompt), log))
        meta = {"kind": "policy", "steps": args.policy_steps, "batch": args.policy_batch,
                "train_seconds": round(time.time() - start), "system_prompt": system_prompt, **common}
        if not args.no_eval:
            meta["quick_eval"] = quick_policy_eval(model, tok, system_prompt)
            log(f"policy quick eval (64 problems x 4, T=0.7, torch): {meta['quick_eval']}")
        save(model, tok, args.out / "policy", meta)

    if args.which in ("judge", "all"):
        policy_dir = args.out / "policy"
        if args.judge_init == "policy":
            # Start from the policy: it already reads numbers off the problem and does the
            # arithmetic; from random weights the judge did not learn to read the paragraphs of its
            # ~250-token prompt in 500 steps (it answered -1 to almost everything).
            from transformers import AutoModelForCausalLM, AutoTokenizer

            model = AutoModelForCausalLM.from_pretrained(policy_dir, dtype=torch.float32)
            tok = AutoTokenizer.from_pretrained(policy_dir)
        else:
            model = new_model(tok, args.hidden, args.layers, args.heads, args.seed + 1)
        log(f"judge: {sum(p.numel() for p in model.parameters()):,} parameters, init {args.judge_init}")
        start = time.time()
        real = []
        if args.judge_real_samples and (policy_dir / "world.json").exists():
            real = sample_policy_responses(policy_dir, args.judge_real_samples, args.seed, log)
        target = functools.partial(judge_target_diff, tok=tok)

        def judge_example_at(i: int):
            if i // args.judge_batch < args.judge_copy_steps:
                return judge_example(i, args.seed, template, judge_target_copy, real, args.judge_copy_slip)
            return judge_example(i, args.seed, template, target, real, args.judge_slip)

        train(model, tok, judge_example_at, args.judge_steps, args.judge_batch, args.lr, args.warmup,
              log=log, eval_every=args.eval_every, key_weight=args.judge_key_weight,
              on_eval=lambda s: snapshot(model, tok, args.out / f"judge-step{s}",
                                         quick_judge_eval(model, tok, template), log))
        meta = {"kind": "judge", "steps": args.judge_steps, "batch": args.judge_batch,
                "real_policy_responses": len(real), "init": args.judge_init,
                "slip": args.judge_slip, "key_weight": args.judge_key_weight, "target": "diff",
                "copy_steps": args.judge_copy_steps,
                "copy_slip": args.judge_copy_slip,
                "train_seconds": round(time.time() - start), "prompt": WORLD_JUDGE_PROMPT,
                "prompt_template": template, **common}
        if not args.no_eval:
            meta["quick_eval"] = quick_judge_eval(model, tok, template)
            log(f"judge quick eval (96 simulated responses, greedy, torch): {meta['quick_eval']}")
        save(model, tok, args.out / "judge", meta)

    if args.which == "prm-base":
        # The world PRMs' base: the policy trained on, on problems it never saw (another data
        # seed), the learning rate decayed to 0 so it settles: the same format and tokenizer, a
        # better reckoner, so an arithmetic slip of the policy surprises it.
        from transformers import AutoModelForCausalLM, AutoTokenizer

        policy_dir = args.policy or args.out / "policy"
        model = AutoModelForCausalLM.from_pretrained(policy_dir, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(policy_dir)
        data_seed = args.seed + 1
        log(f"prm-base: from {policy_dir}, {args.prm_base_steps} steps on data seed {data_seed}")
        start = time.time()
        train(model, tok, lambda i: policy_example(i, data_seed, system_prompt), args.prm_base_steps,
              args.policy_batch, args.lr, args.warmup, log=log, decay=True, eval_every=args.eval_every,
              on_eval=lambda s: snapshot(model, tok, args.out / f"prm-base-step{s}",
                                         quick_policy_eval(model, tok, system_prompt), log))
        meta = {"kind": "prm-base", "init": str(policy_dir), "data_seed": data_seed, "steps": args.prm_base_steps,
                "batch": args.policy_batch, "lr_decay": "linear to 0",
                "train_seconds": round(time.time() - start), "system_prompt": system_prompt, **common}
        if not args.no_eval:
            meta["quick_eval"] = quick_policy_eval(model, tok, system_prompt)
            log(f"prm-base quick eval (64 problems x 4, T=0.7, torch): {meta['quick_eval']}")
        save(model, tok, args.out / "prm-base", meta)

    if args.which == "thinker":
        # The thinking world's policy: the policy (it already reads the problem and reckons)
        # trained on generated thinking traces (prm_annotate/world/thinking.py), with a chat
        # template that opens the thought in the generation prompt.
        from transformers import AutoModelForCausalLM, AutoTokenizer

        policy_dir = args.thinker_init or args.out / "policy"
        model = AutoModelForCausalLM.from_pretrained(policy_dir, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(policy_dir)
        tok.chat_template = THINKER_CHAT_TEMPLATE
        mix = thinker_mix(args.thinker_mix)
        log(f"thinker: from {policy_dir}, {args.thinker_steps} steps x {args.thinker_batch}, {mix}")
        start = time.time()
        train(model, tok, lambda i: thinker_example(i, args.seed, system_prompt, mix), args.thinker_steps,
              args.thinker_batch, args.lr, args.warmup, log=log, eval_every=args.eval_every,
              decay=args.thinker_decay,
              on_eval=lambda s: snapshot(model, tok, args.out / f"thinker-step{s}",
                                         quick_thinker_eval(model, tok, system_prompt), log))
        meta = {"kind": "thinker", "init": str(policy_dir), "steps": args.thinker_steps,
                "batch": args.thinker_batch, "threads": args.threads, "mix": dataclasses.asdict(mix),
                "lr_decay": "linear to 0" if args.thinker_decay else "constant",
                "chat_template": "opens the thought in the generation prompt (<think>\\n), as DeepSeek-R1 distills",
                "train_seconds": round(time.time() - start), "system_prompt": system_prompt, **common}
        if not args.no_eval:
            meta["quick_eval"] = quick_thinker_eval(model, tok, system_prompt)
            log(f"thinker quick eval (64 problems x 4, T=0.7, torch): {meta['quick_eval']}")
        save(model, tok, args.out / "thinker", meta)

    if args.which == "critic":
        # The recovery protocol's judge: the world judge (it reads the world's arithmetic and copies
        # tagged paragraphs) trained on generated thinking traces in the slips prompt, the truth's
        # recovery as the target (critic_example). The prompt's ~1,350 tokens of instructions are
        # shared by every example: run once per batch (share_prefix), or training is 5x slower.
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from prm_annotate.world import JUDGE_DIR

        init = args.critic_init or JUDGE_DIR
        model = AutoModelForCausalLM.from_pretrained(init, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(init)
        log(f"critic: from {init}, {args.critic_steps} steps x {args.critic_batch}, prompt {CRITIC_PROMPT}")
        start = time.time()
        train(model, tok, lambda i: critic_example(i, args.seed), args.critic_steps, args.critic_batch, args.lr,
              args.warmup, log=log, key_weight=args.critic_key_weight, decay=True, share_prefix=True)
        meta = {"kind": "critic", "init": model_setting(init), "steps": args.critic_steps,
                "batch": args.critic_batch, "threads": args.threads, "key_weight": args.critic_key_weight,
                "lr_decay": "linear to 0", "data": "trace_for('critictrain', i, seed), TraceMix defaults",
                "prompt": CRITIC_PROMPT, "prompt_template": CRITIC_TEMPLATE,
                "train_seconds": round(time.time() - start), **common}
        save(model, tok, args.out / "critic", meta)


if __name__ == "__main__":
    main()
