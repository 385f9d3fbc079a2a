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
from dataclasses import dataclass
from typing import Literal, Optional

from prm_annotate.engines import defaults
from prm_annotate.engines.base import Engine, GenerationRequest, GenerationResult, check_keys
from prm_annotate.engines.defaults import PANEL, on_cpu, resolve_dtype
from prm_annotate.engines.sampling import Sampling, SamplingOverrides, sampling_record
from prm_annotate.settings import setting

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


@dataclass(frozen=True, kw_only=True)
class EngineConfig(defaults.VLLMSettings):
    """Everything needed to start an engine: the in-process engine's settings (`VLLMSettings`, whose
    fields it has) and these. The CLI's engine options are its fields' settings (a field without one,
    such as `seed`, is set by the command); the defaults are `engines/defaults.py`'s.

    Attributes:
        base_url: an OpenAI-compatible server; None: vLLM in process (then the settings apply).
        start_timeout: None: vLLM's own wait.
        model_params: the model's parameter count for the run's bill (engines/bill.py); None: counted
            from the model's config.json (a local checkpoint, or a name in the local cache).
    """

    model: str = setting(flags=("--model", "-m"), panel=PANEL, help=(
        "Local checkpoint path or model name (in-process vLLM), or the served model name with --base-url."))
    base_url: Optional[str] = setting(None, flags="--base-url", envvar="PRM_ANNOTATE_BASE_URL", panel=PANEL, help=(
        "OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1); without it vLLM runs in process."))
    api_key_env: Optional[str] = setting(None, flags="--api-key-env", panel=PANEL, help=(
        "Name of the environment variable holding the server's API key (the key is never logged)."))
    concurrency: int = setting(defaults.CONCURRENCY, flags="--concurrency", min=1, panel=PANEL,
                               help="Requests in flight at once (--base-url).")
    timeout: float = setting(defaults.REQUEST_TIMEOUT, flags="--request-timeout", min=1, panel=PANEL,
                             help="Seconds to wait for one HTTP answer (--base-url).")
    max_attempts: int = setting(defaults.MAX_ATTEMPTS, flags="--max-attempts", min=1, panel=PANEL,
                                help="Attempts per request before it is reported failed (--base-url).")
    start_timeout: Optional[float] = setting(None, flags="--start-timeout", min=1, panel=PANEL,
                                             help="Seconds to wait for the vLLM engine to start.")
    model_params: Optional[float] = setting(None, flags="--model-params", min=1, metavar="N", panel=PANEL, help=(
        "The model's parameter count for the run's bill (e.g. 7e9); default: counted from its config.json."))

    def __post_init__(self) -> None:
        super().__post_init__()
        defaults.at_least("concurrency", self.concurrency, 1)
        defaults.above("timeout", self.timeout, 0)
        defaults.at_least("max_attempts", self.max_attempts, 1)
        defaults.above("start_timeout", self.start_timeout, 0)

    @property
    def kind(self) -> Literal["openai", "vllm"]:
        return "openai" if self.base_url else "vllm"

    def vllm_settings(self) -> dict:
        """The in-process engine's settings (keywords of `VLLMEngine`, fields of `VLLMSettings`)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(defaults.VLLMSettings)}

    def describe(self) -> dict:
        """What to record about the engine in output records and manifests (never the key)."""
        d: dict = {"engine": self.kind, "model": self.model}
        if self.base_url:
            d["base_url"] = self.base_url
        else:
            d["dtype"] = resolve_dtype(self.dtype)
        if self.model_params is not None:
            d["model_params"] = round(self.model_params)
        return d


def make_engine(config: EngineConfig) -> Engine:
    """The OpenAI-compatible engine when `base_url` is set (the server checked: `OpenAIEngine.check`),
    else in-process vLLM."""
    if config.base_url:
        from prm_annotate.engines.openai_engine import OpenAIEngine

        engine = OpenAIEngine(
            config.base_url,
            config.model,
            api_key_env=config.api_key_env,
            concurrency=config.concurrency,
            timeout=config.timeout,
            max_attempts=config.max_attempts,
            max_model_len=config.max_model_len,
        )
        engine.check()  # before any request: the server answers, and serves --model (UsageError: exit 2)
        return engine
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
