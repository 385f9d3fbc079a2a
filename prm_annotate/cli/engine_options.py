"""Typer options every model-using command shares, grouped in `EngineOptions`, and `build_config`
to turn them into an `EngineConfig`. The generating stages take the group as part of
`model_stage.ModelStageOptions` (see option_groups); `score` takes its own PRM options and these aliases.

Defaults live in `engines/defaults.py` (read by `EngineConfig` and the fields below); pass None
to keep them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Optional

import typer
from pydantic import ValidationError

from prm_annotate.cli.app import group_values
from prm_annotate.engines import EngineConfig, defaults
from prm_annotate.errors import UsageError

_P = "Engine"  # help panel

ModelOpt = Annotated[str, typer.Option(
    "--model", "-m", rich_help_panel=_P,
    help="Local checkpoint path or model name (in-process vLLM), or the served model name with --base-url.")]
BaseUrlOpt = Annotated[Optional[str], typer.Option(
    "--base-url", rich_help_panel=_P, envvar="PRM_ANNOTATE_BASE_URL",
    help="OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1); without it vLLM runs in process.")]
ApiKeyEnvOpt = Annotated[Optional[str], typer.Option(
    "--api-key-env", rich_help_panel=_P,
    help="Name of the environment variable holding the server's API key (the key is never logged).")]
ConcurrencyOpt = Annotated[int, typer.Option(
    "--concurrency", min=1, rich_help_panel=_P, help="Requests in flight at once (--base-url).")]
RequestTimeoutOpt = Annotated[float, typer.Option(
    "--request-timeout", min=1, rich_help_panel=_P, help="Seconds to wait for one HTTP answer (--base-url).")]
MaxAttemptsOpt = Annotated[int, typer.Option(
    "--max-attempts", min=1, rich_help_panel=_P,
    help="Attempts per request before it is reported failed (--base-url).")]
DtypeOpt = Annotated[Optional[str], typer.Option(
    "--dtype", rich_help_panel=_P,
    help="vLLM dtype: auto, bfloat16, float16, float32 (default: float32 on CPU, where bfloat16 "
         "gives wrong outputs on some CPUs; the checkpoint's on GPU).")]
MaxModelLenOpt = Annotated[Optional[int], typer.Option(
    "--max-model-len", min=1, rich_help_panel=_P, help="vLLM context length (default: the model's).")]
TensorParallelOpt = Annotated[int, typer.Option(
    "--tensor-parallel-size", min=1, rich_help_panel=_P, help="vLLM tensor-parallel GPUs.")]
GpuMemOpt = Annotated[float, typer.Option(
    "--gpu-memory-utilization", min=0.01, max=1.0, rich_help_panel=_P, help="vLLM GPU memory share.")]
EnforceEagerOpt = Annotated[Optional[bool], typer.Option(
    "--enforce-eager/--no-enforce-eager", metavar="", rich_help_panel=_P,
    help="vLLM eager mode (default: on for CPU, vLLM's choice on GPU).")]
KvCacheOpt = Annotated[Optional[float], typer.Option(
    "--kv-cache-gb", min=0.01, rich_help_panel=_P, help=f"vLLM KV-cache size in GiB (default {defaults.CPU_KV_CACHE_GB:g} on CPU).")]
StartTimeoutOpt = Annotated[Optional[float], typer.Option(
    "--start-timeout", min=1, rich_help_panel=_P, help="Seconds to wait for the vLLM engine to start.")]


def build_config(*, model: str, request_timeout: float | None = None, **options: Any) -> EngineConfig:
    """An `EngineConfig` from command options; None values keep the config's defaults.

    Raises UsageError (exit status 2) on an invalid combination."""
    values = {k: v for k, v in options.items() if v is not None}
    if request_timeout is not None:
        values["timeout"] = request_timeout
    try:
        return EngineConfig(model=model, **values)
    except ValidationError as exc:
        raise UsageError(f"bad engine option: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}") from None


@dataclass(frozen=True, kw_only=True)
class EngineOptions:
    """The engine options as one command parameter; the field order is the --help order. Keyword-only,
    so that a group built on it (model_stage.ModelStageOptions) may put options with defaults first."""

    model: ModelOpt
    base_url: BaseUrlOpt = None
    api_key_env: ApiKeyEnvOpt = None
    concurrency: ConcurrencyOpt = defaults.CONCURRENCY
    request_timeout: RequestTimeoutOpt = defaults.REQUEST_TIMEOUT
    max_attempts: MaxAttemptsOpt = defaults.MAX_ATTEMPTS
    dtype: DtypeOpt = None
    max_model_len: MaxModelLenOpt = None
    enforce_eager: EnforceEagerOpt = None
    kv_cache_gb: KvCacheOpt = None
    tensor_parallel_size: TensorParallelOpt = defaults.TENSOR_PARALLEL_SIZE
    gpu_memory_utilization: GpuMemOpt = defaults.GPU_MEMORY_UTILIZATION
    start_timeout: StartTimeoutOpt = None

    def config(self, **extra: Any) -> EngineConfig:
        """`build_config` from these options plus the command's own (e.g. seed); raises UsageError."""
        return build_config(**group_values(self, EngineOptions), **extra)
