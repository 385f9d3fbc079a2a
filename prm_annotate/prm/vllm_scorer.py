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
from prm_annotate.prm.checkpoint import PRMFormat, step_tag_id


class VLLMPRMScorer(VLLMEngine):
    def __init__(self, model: str, **options: Any) -> None:
        from transformers import AutoTokenizer
        from vllm.config import PoolerConfig

        from prm_annotate.engines.vllm_engine import resolve_model

        path, _ = resolve_model(model)
        self.format = PRMFormat.of_checkpoint(path)
        self.step_tag_id = step_tag_id(AutoTokenizer.from_pretrained(path), self.format.step_tag)
        extra = dict(options.pop("extra_engine_args", None) or {})
        # Prefix caching serves nothing here (no shared prefixes across responses to speak of)
        # and is not what the pooling runner is tested with.
        extra.update(runner="pooling", pooler_config=PoolerConfig(step_tag_id=self.step_tag_id),
                     enable_prefix_caching=False)
        super().__init__(model, extra_engine_args=extra, **options)

    def step_probabilities(self, prompts: Sequence[list[int]]) -> list[list[float]]:
        """P(right) at each step tag of each prompt (token ids), in order."""
        outputs = self._llm.encode([{"prompt_token_ids": ids} for ids in prompts],
                                   pooling_task="token_classify", use_tqdm=False)
        return [out.outputs.data[:, 1].float().tolist() for out in outputs]
