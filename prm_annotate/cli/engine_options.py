"""The command-line options of `EngineConfig` (engines/__init__.py), the engine every model-using
command starts: `ENGINE_OPTIONS`, one entry per field, in the --help order. The generating stages
take them as part of `model_stage.ModelStageOptions`; `score` as `SCORE_ENGINE_OPTIONS` (its own
--model and --base-url, no GPU placement). Fields left out (seed, load_progress, the CPU block
settings) are not options: the command sets them.

Defaults live in `engines/defaults.py` (read by `EngineConfig`'s fields).
"""
from __future__ import annotations

from typing import Any

import typer

from prm_annotate.engines import defaults

_P = "Engine"  # help panel

ENGINE_OPTIONS: dict[str, Any] = {
    "model": typer.Option(
        "--model", "-m", rich_help_panel=_P,
        help="Local checkpoint path or model name (in-process vLLM), or the served model name with --base-url."),
    "base_url": typer.Option(
        "--base-url", rich_help_panel=_P, envvar="PRM_ANNOTATE_BASE_URL",
        help="OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1); without it vLLM runs in process."),
    "api_key_env": typer.Option(
        "--api-key-env", rich_help_panel=_P,
        help="Name of the environment variable holding the server's API key (the key is never logged)."),
    "concurrency": typer.Option("--concurrency", min=1, rich_help_panel=_P,
                                help="Requests in flight at once (--base-url)."),
    "timeout": typer.Option("--request-timeout", min=1, rich_help_panel=_P,
                            help="Seconds to wait for one HTTP answer (--base-url)."),
    "max_attempts": typer.Option("--max-attempts", min=1, rich_help_panel=_P,
                                 help="Attempts per request before it is reported failed (--base-url)."),
    "dtype": typer.Option(
        "--dtype", rich_help_panel=_P,
        help="vLLM dtype: auto, bfloat16, float16, float32 (default: float32 on CPU, where bfloat16 "
             "gives wrong outputs on some CPUs; the checkpoint's on GPU)."),
    "max_model_len": typer.Option("--max-model-len", min=1, rich_help_panel=_P,
                                  help="vLLM context length (default: the model's)."),
    "enforce_eager": typer.Option("--enforce-eager/--no-enforce-eager", metavar="", rich_help_panel=_P,
                                  help="vLLM eager mode (default: on for CPU, vLLM's choice on GPU)."),
    "kv_cache_gb": typer.Option("--kv-cache-gb", min=0.01, rich_help_panel=_P,
                                help=f"vLLM KV-cache size in GiB (default {defaults.CPU_KV_CACHE_GB:g} on CPU)."),
    "tensor_parallel_size": typer.Option("--tensor-parallel-size", min=1, rich_help_panel=_P,
                                         help="vLLM tensor-parallel GPUs."),
    "gpu_memory_utilization": typer.Option("--gpu-memory-utilization", min=0.01, max=1.0, rich_help_panel=_P,
                                           help="vLLM GPU memory share."),
    "start_timeout": typer.Option("--start-timeout", min=1, rich_help_panel=_P,
                                  help="Seconds to wait for the vLLM engine to start."),
}

# `score`: the PRM is --model; its server is seldom the policy's, so --base-url reads no environment variable.
SCORE_ENGINE_OPTIONS: dict[str, Any] = {
    **{name: option for name, option in ENGINE_OPTIONS.items()
       if name not in ("tensor_parallel_size", "gpu_memory_utilization")},
    "model": typer.Option(
        "--model", "-m", rich_help_panel=_P,
        help="The PRM: a checkpoint folder, or a hub id found in the local Hugging Face cache (never downloaded)."),
    "base_url": typer.Option(
        "--base-url", rich_help_panel=_P,
        help="A `vllm serve <prm> --runner pooling --pooler-config '{\"step_tag_id\": N}'` server "
             "(e.g. http://127.0.0.1:8000/v1); without it the PRM runs in process."),
}
