"""What `train` and `score` share about a Process Reward Model checkpoint.

The architecture is Qwen2.5-Math-PRM's `Qwen2ForProcessRewardModel`, which vLLM serves: a Qwen2
backbone (`model.*` weights) and a head `score.0` Linear(h, h), ReLU, `score.2` Linear(h, 2),
read at the token that ends each step. Label 1 is "right": a step's score is softmax(logits)[1].

The text a PRM reads is Qwen's convention, the one `export --format qwen` writes too: a chat of the
system prompt, the problem as the user turn, and the steps as the assistant turn, each step
stripped of surrounding whitespace and followed by the step tag (`<extra_0>`) with nothing between
(Qwen2.5-Math-PRM's card: `"<extra_0>".join(steps) + "<extra_0>"`, steps split on "\n\n", i.e.
without the separator), put through the tokenizer's chat template. Stripping also keeps a tag from
being folded into the whitespace before it by a SentencePiece tokenizer. Training and scoring build
it with the same function (`prm_token_ids`), so the tag tokens a trainer labels are the tokens a
scorer reads.

A checkpoint is named by a path or by a Hugging Face hub id (`Qwen/Qwen2.5-Math-PRM-7B`); a hub id
is found in the local Hugging Face cache (`HF_HUB_CACHE`, else `HF_HOME/hub`) by huggingface_hub's
own lookup, and never downloaded: the machines that score are often offline, and a 7B download
is not something a scoring command should start by surprise.

`train` records its choices in the checkpoint's config.json under `prm_annotate` (step tag and its
token id, system prompt, the step threshold tuned on its eval set); a checkpoint without that block
(Qwen2.5-Math-PRM itself) gets Qwen's defaults and the threshold 0.5. torch and transformers are
imported inside the functions that need them (the model class is in prm/model.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prm_annotate.errors import UsageError
from prm_annotate.export import QWEN_SYSTEM, QWEN_TAG as STEP_TAG

ARCHITECTURE = "Qwen2ForProcessRewardModel"
LIKELIHOOD_ARCHITECTURE = "StepLikelihoodPRM"  # train --head likelihood (prm/likelihood.py)
DEFAULT_THRESHOLD = 0.5  # a step scoring below it is an error, when no eval set tuned one


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint as the user named it, the local folder it is, and its config.json."""
    name: str
    path: Path
    config: dict[str, Any]
    revision: str | None = None  # the commit of a hub snapshot

    @property
    def architectures(self) -> list[str]:
        return list(self.config.get("architectures") or [])

    def describe(self) -> dict[str, Any]:
        """What a manifest records about it."""
        out: dict[str, Any] = {"model": self.name, "checkpoint": str(self.path)}
        if self.revision:
            out["revision"] = self.revision
        return out


def locate(model: str) -> Checkpoint:
    """The checkpoint `model` names: a local folder, or a hub id in the local Hugging Face cache."""
    from prm_annotate.engines.vllm_engine import resolve_model

    path, local = resolve_model(model)
    folder, revision = (Path(path), None) if local else _cached_snapshot(model)
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{model}: not a model checkpoint (cannot read config.json: {exc})") from None
    return Checkpoint(name=model, path=folder, config=config, revision=revision)


def _cached_snapshot(repo_id: str) -> tuple[Path, str]:
    """The snapshot folder of the hub id's default revision in the local cache, and its commit."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        folder = Path(snapshot_download(repo_id, local_files_only=True))
    except HFValidationError:
        raise UsageError(f"{repo_id}: neither a local checkpoint folder nor a hub id") from None
    except LocalEntryNotFoundError as exc:
        raise UsageError(
            f"{repo_id}: no such folder, nor a hub id in the local Hugging Face cache ({constants.HF_HUB_CACHE}); "
            f"nothing is downloaded: fetch it where there is a network (`hf download {repo_id}`) and copy the cache, "
            f"set HF_HUB_CACHE to where it is, or give the checkpoint's folder ({type(exc).__name__})") from None
    return folder, folder.name


@dataclass(frozen=True)
class PRMFormat:
    """How a checkpoint reads a response (tag, system turn), and the threshold it was tuned with.

    Attributes:
        step_tag: the token after each step, where the step is scored.
        system_prompt: the system turn, or None.
        threshold: a step scoring below it is an error.
        separator: written between a step and its tag, except after the last step (a response
            ends there): "" is Qwen's convention; a likelihood PRM (prm/likelihood.py) keeps the
            steps' own separator, so its LM reads the response exactly as written.
    """
    step_tag: str = STEP_TAG
    system_prompt: str | None = QWEN_SYSTEM
    threshold: float = DEFAULT_THRESHOLD
    separator: str = ""

    @classmethod
    def of_checkpoint(cls, path: str | Path) -> "PRMFormat":
        try:
            config = json.loads((Path(path) / "config.json").read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path}: not a PRM checkpoint (cannot read config.json: {exc})") from None
        return cls.of_config(config)

    @classmethod
    def of_config(cls, config: dict[str, Any]) -> "PRMFormat":
        ours = config.get("prm_annotate") or {}
        threshold = ours.get("threshold")
        return cls(step_tag=ours.get("step_tag", STEP_TAG), system_prompt=ours.get("system_prompt", QWEN_SYSTEM),
                   threshold=DEFAULT_THRESHOLD if threshold is None else float(threshold),
                   separator=ours.get("step_separator", ""))


def step_tag_id(tokenizer: Any, tag: str) -> int:
    """The tag's token id; the tag must be one token, or step ends cannot be found."""
    ids = tokenizer.encode(tag, add_special_tokens=False)
    if len(ids) != 1:
        raise UsageError(f"the step tag {tag!r} is {len(ids)} tokens for this tokenizer; it must be one")
    return ids[0]


def prm_token_ids(tokenizer: Any, fmt: PRMFormat, problem: str, steps: list[str]) -> list[int]:
    """Token ids of the PRM's input for one response: one step tag after each step."""
    last = len(steps) - 1
    response = "".join(f"{step.strip()}{fmt.separator if i < last else ''}{fmt.step_tag}" for i, step in enumerate(steps))
    messages = [{"role": "user", "content": problem}, {"role": "assistant", "content": response}]
    if fmt.system_prompt:
        messages.insert(0, {"role": "system", "content": fmt.system_prompt})
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, tokenize=False)
    else:
        text = "\n\n".join(m["content"] for m in messages)
    return tokenizer.encode(text, add_special_tokens=False)


def response_start(tokenizer: Any, fmt: PRMFormat, problem: str, ids: list[int]) -> int:
    """Where the response begins in `ids` (prm_token_ids'): the length of the prompt alone with the
    assistant turn opened, or of its common prefix with `ids` where the two tokenize differently."""
    if not getattr(tokenizer, "chat_template", None):  # prm_token_ids' plain join
        prefix = tokenizer.encode("\n\n".join(([fmt.system_prompt] if fmt.system_prompt else []) + [problem]) + "\n\n",
                                  add_special_tokens=False)
    else:
        messages = [{"role": "user", "content": problem}]
        if fmt.system_prompt:
            messages.insert(0, {"role": "system", "content": fmt.system_prompt})
        prefix = tokenizer.encode(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
                                  add_special_tokens=False)
    n = 0
    while n < min(len(prefix), len(ids)) and prefix[n] == ids[n]:
        n += 1
    return n


def tag_in_text(fmt: PRMFormat, problem: str, steps: list[str]) -> bool:
    """A tag inside the text would add a step end the labels do not know about."""
    return fmt.step_tag in problem or any(fmt.step_tag in s for s in steps)


def build_model(config: Any) -> Any:
    """A `Qwen2ForProcessRewardModel` (prm/model.py) with random weights, for a Qwen2 config."""
    from prm_annotate.prm.model import Qwen2ForProcessRewardModel

    return Qwen2ForProcessRewardModel(config)


def load_model(path: str | Path) -> tuple[Any, Any, PRMFormat]:
    """(model in float32 eval mode, tokenizer, format) of a checkpoint `train` wrote, read with plain
    transformers: the reference `score`'s vLLM results are checked against. Every weight must match
    the architecture by name and shape, as vLLM requires; transformers alone would only warn."""
    import torch
    from transformers import AutoTokenizer

    from prm_annotate.prm.model import Qwen2ForProcessRewardModel

    path = Path(path)
    model, info = Qwen2ForProcessRewardModel.from_pretrained(path, dtype=torch.float32, output_loading_info=True)
    wrong = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if wrong:
        raise UsageError(f"{path}: the weights do not match {ARCHITECTURE}: {wrong}")
    model.eval()
    return model, AutoTokenizer.from_pretrained(path), PRMFormat.of_checkpoint(path)


def transformers_step_scores(model: Any, tokenizer: Any, fmt: PRMFormat, problem: str,
                             steps: list[str]) -> list[float]:
    """P(right) at each step tag, computed directly with transformers (one response, no padding)."""
    import torch

    ids = prm_token_ids(tokenizer, fmt, problem, steps)
    tag = step_tag_id(tokenizer, fmt.step_tag)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    positions = [i for i, t in enumerate(ids) if t == tag]
    return torch.softmax(logits[positions].float(), dim=-1)[:, 1].tolist()


def causal_lm_dir(base: str, needs: str) -> Path:
    """The `--base` checkpoint directory, refused unless it holds a causal LM (`needs`: what the
    head does with one, said in the error)."""
    path = Path(base).expanduser()
    if not (path / "config.json").is_file():
        raise UsageError(f"--base {base}: no such checkpoint directory")
    architectures = json.loads((path / "config.json").read_text()).get("architectures") or []
    if not any(a.endswith("ForCausalLM") for a in architectures):
        raise UsageError(f"--base {base}: {needs}; this is {'/'.join(architectures) or 'a model without architectures'}")
    return path
