"""Engines: how stages talk to models.

    config = EngineConfig(model="/models/qwen", base_url=None)   # in-process vLLM
    engine = make_engine(config)
    try:
        results = engine.generate(requests)      # dict keyed by request.key
    finally:
        engine.close()
    exit_process(code)                           # CLI commands: leave without vLLM's exit abort

Nothing here imports vLLM; the vLLM engine imports it when it starts.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import Literal

from pydantic import BaseModel, Field

from prm_annotate.engines import defaults
from prm_annotate.engines.base import Engine, GenerationRequest, GenerationResult, check_keys
from prm_annotate.engines.defaults import on_cpu, resolve_dtype
from prm_annotate.engines.sampling import Sampling, SamplingOverrides, sampling_record

__all__ = [
    "Engine",
    "EngineConfig",
    "GenerationRequest",
    "GenerationResult",
    "Sampling",
    "SamplingOverrides",
    "check_keys",
    "exit_process",
    "make_engine",
    "on_cpu",
    "resolve_dtype",
    "sampling_record",
]


class EngineConfig(BaseModel):
    """Everything needed to start an engine; the CLI builds one from its options. The defaults
    are `engines/defaults.py`'s."""

    model: str
    # OpenAI-compatible server: set `base_url` (then the vLLM options below are unused).
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = Field(defaults.CONCURRENCY, ge=1)
    timeout: float = Field(defaults.REQUEST_TIMEOUT, gt=0)
    max_attempts: int = Field(defaults.MAX_ATTEMPTS, ge=1)
    # In-process vLLM. dtype None: float32 on CPU, vLLM's "auto" (the checkpoint's) on GPU.
    dtype: str | None = None
    max_model_len: int | None = Field(None, ge=1)
    tensor_parallel_size: int = Field(defaults.TENSOR_PARALLEL_SIZE, ge=1)
    gpu_memory_utilization: float = Field(defaults.GPU_MEMORY_UTILIZATION, gt=0, le=1)
    enforce_eager: bool | None = None
    kv_cache_gb: float | None = Field(None, gt=0)
    seed: int = defaults.SEED
    start_timeout: float | None = Field(None, gt=0)
    load_progress: bool = True

    @property
    def kind(self) -> Literal["openai", "vllm"]:
        return "openai" if self.base_url else "vllm"

    def vllm_settings(self) -> dict:
        """The in-process engine's settings (keywords of `VLLMEngine`, fields of `VLLMSettings`)."""
        return self.model_dump(include={f.name for f in dataclasses.fields(defaults.VLLMSettings)})

    def describe(self) -> dict:
        """What to record about the engine in output records and manifests (never the key)."""
        d = {"engine": self.kind, "model": self.model}
        if self.base_url:
            d["base_url"] = self.base_url
        else:
            d["dtype"] = resolve_dtype(self.dtype)
        return d


def make_engine(config: EngineConfig) -> Engine:
    """The OpenAI-compatible engine when `base_url` is set, else in-process vLLM."""
    if config.base_url:
        from prm_annotate.engines.openai_engine import OpenAIEngine

        return OpenAIEngine(
            config.base_url,
            config.model,
            api_key_env=config.api_key_env,
            concurrency=config.concurrency,
            timeout=config.timeout,
            max_attempts=config.max_attempts,
        )
    from prm_annotate.engines.vllm_engine import VLLMEngine

    return VLLMEngine(config.model, start_timeout=config.start_timeout, **config.vllm_settings())


def exit_process(code: int) -> None:
    """Flush stdout/stderr and leave at once with `code`.

    After an in-process vLLM engine has run, a normal interpreter exit sometimes aborts
    (exit 134) while vLLM's threads free memory. Close the engine first (that stops its worker
    processes, which `os._exit` would leave behind), then call this.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed pipe must not change the exit status
            pass
    os._exit(code)
