"""An in-process vLLM pooling engine for Process Reward Models (`Qwen2ForProcessRewardModel`).

The generation engine's start-up, CPU settings, reaper and shutdown are reused as they are
(`VLLMEngine` with `runner="pooling"`); what differs is the call: `encode(...,
pooling_task="token_classify")`, whose STEP pooler returns one row of label probabilities per
step-tag token — only once the pooler config names that token (`step_tag_id`), else nothing.
Prompts go in as token ids, built by `prm.prm_token_ids`, so vLLM reads exactly the tokens the
PRM was trained on.
"""
from __future__ import annotations

from typing import Any, Sequence

from prm_annotate.engines.vllm_engine import VLLMEngine
from prm_annotate.prm.checkpoint import Checkpoint, PRMFormat, prm_token_ids, step_tag_id


class VLLMPRMScorer(VLLMEngine):
    kind = "qwen-prm"

    def __init__(self, checkpoint: Checkpoint, **options: Any) -> None:
        from transformers import AutoTokenizer
        from vllm.config import PoolerConfig

        self.checkpoint = checkpoint
        self.format = PRMFormat.of_config(checkpoint.config)
        self.step_tag_id = step_tag_id(AutoTokenizer.from_pretrained(checkpoint.path), self.format.step_tag)
        extra = dict(options.pop("extra_engine_args", None) or {})
        # Prefix caching serves nothing here (no shared prefixes across responses to speak of)
        # and is not what the pooling runner is tested with.
        extra.update(runner="pooling", pooler_config=PoolerConfig(step_tag_id=self.step_tag_id),
                     enable_prefix_caching=False)
        super().__init__(str(checkpoint.path), extra_engine_args=extra, **options)
        self.model = checkpoint.name

    def token_ids(self, problem: str, steps: list[str]) -> list[int]:
        return prm_token_ids(self.tokenizer, self.format, problem, steps)

    def step_probabilities(self, prompts: Sequence[list[int]]) -> list[list[float] | str]:
        """P(right) at each step tag of each prompt (token ids), in order."""
        outputs = self._llm.encode([{"prompt_token_ids": ids} for ids in prompts],
                                   pooling_task="token_classify", use_tqdm=False)
        return [out.outputs.data[:, 1].float().tolist() for out in outputs]

    def settings(self) -> dict[str, Any]:
        return {**self.checkpoint.describe(), "step_tag": self.format.step_tag, "step_tag_id": self.step_tag_id,
                "system_prompt": self.format.system_prompt,
                "engine_args": {k: str(v) for k, v in self.engine_args.items()}}

    def record(self) -> dict[str, Any]:
        return {"scorer": self.kind}
