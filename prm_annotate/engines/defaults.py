"""Engine defaults, in one place. `EngineConfig`, the CLI's engine options (its fields' settings), `VLLMEngine`, the
pooling engine and the `vllm serve` the tests and benchmarks start (testing/vllm_server.py, its
flags made from the same `vllm_args`) all read them here, so a default changed here changes
everywhere.

On CPU (no CUDA) vLLM runs with the settings measured to work on this project's machines
(docs/vllm-cpu.md): float32, eager mode, an explicit KV-cache budget, no chunked prefill (it
crashes with per-request seeds) and 32-token blocks. On GPU the settings left unset are vLLM's own.

Nothing here imports vLLM.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from prm_annotate.errors import UsageError
from prm_annotate.settings import setting

PANEL = "Engine"  # the --help panel of the engine's options

# The OpenAI-compatible engine (--base-url).
CONCURRENCY = 16
# rollout --speculate with the in-process engine: guesses fill the engine up to vLLM's batch on
# CPU (max_num_seqs 256), and only once no new record can start. Over HTTP none (0): a
# cancelled request still runs to its end on the server, and is billed.
SPECULATE_IN_PROCESS = 256
REQUEST_TIMEOUT = 600.0  # seconds for one HTTP answer
MAX_ATTEMPTS = 5

# The in-process engine, on any device.
TENSOR_PARALLEL_SIZE = 1
GPU_MEMORY_UTILIZATION = 0.9
SEED = 0
# The bound the world report and the tests put on an engine's start; the CLI's stages leave it
# to vLLM unless --start-timeout is given.
START_TIMEOUT = 300.0

# CPU only.
CPU_DTYPE = "float32"  # bfloat16 gave wrong outputs on some CPUs
CPU_KV_CACHE_GB = 1.0
CPU_BLOCK_SIZE = 32  # the CPU default of 128 leaves short prompts out of the prefix cache


def on_cpu() -> bool:
    """No CUDA device (or no torch at all): vLLM runs its CPU build."""
    try:
        import torch

        return not torch.cuda.is_available()
    except ImportError:
        return True


def resolve_dtype(dtype: str | None, cpu: bool | None = None) -> str:
    """The dtype an in-process engine or `vllm serve` gets: the user's, else float32 on CPU and
    vLLM's "auto" on GPU. bfloat16 on CPUs with AVX-512-BF16/AMX made SmolLM2 answer nonsense and
    changed the world demo's counts from one CPU model to another (docs/vllm-cpu.md). `cpu`: the
    caller's own answer to "on a CPU?" (the engine asks vLLM's platform), else `on_cpu()`."""
    if dtype:
        return dtype
    return CPU_DTYPE if (on_cpu() if cpu is None else cpu) else "auto"


def at_least(name: str, value: float | None, least: float) -> None:
    """UsageError (exit 2) for a setting below `least`; None passes (the default)."""
    if value is not None and value < least:
        raise UsageError(f"bad engine option: {name}: {value} is below {least}")


def above(name: str, value: float | None, bound: float) -> None:
    """UsageError (exit 2) for a setting not above `bound`; None passes (the default)."""
    if value is not None and value <= bound:
        raise UsageError(f"bad engine option: {name}: {value} is not above {bound}")


def kv_cache_bytes(gb: float) -> int:
    return int(gb * (1 << 30))


@dataclass(frozen=True)
class VLLMSettings:
    """The in-process engine's settings (the keyword arguments of `VLLMEngine`; `EngineConfig` holds
    them too); None: the device's default (the CPU settings above on a CPU, vLLM's own on a GPU).

    Attributes:
        dtype: vLLM's dtype; None: float32 on CPU, the checkpoint's ("auto") on GPU.
        max_model_len: the context length; None: the model's. With a server (`EngineConfig.base_url`)
            the server's context, which the stages check prompts against (engines/context.py);
            None: what the server reports.
        tensor_parallel_size: GPUs one engine spans.
        gpu_memory_utilization: the share of GPU memory vLLM may take.
        kv_cache_gb: the KV-cache size in GiB; None: CPU_KV_CACHE_GB on CPU, vLLM's choice on GPU.
        seed: the engine's seed (each request carries its own).
        block_size: the KV-cache block size; None: CPU_BLOCK_SIZE on CPU.
        enable_chunked_prefill: None: off on CPU (it crashes with per-request seeds).
        load_progress: show vLLM's weight-loading progress bar.
    """

    dtype: Optional[str] = setting(None, flags="--dtype", panel=PANEL, help=(
        "vLLM dtype: auto, bfloat16, float16, float32 (default: float32 on CPU, where bfloat16 gives wrong "
        "outputs on some CPUs; the checkpoint's on GPU)."))
    max_model_len: Optional[int] = setting(
        None, flags="--max-model-len", min=1, panel=PANEL,
        help="Context length in tokens, prompt and completion: vLLM's in process (default: the model's); with "
             "--base-url the server's, that prompts are checked against (default: what the server's /v1/models "
             "reports).")
    tensor_parallel_size: int = setting(TENSOR_PARALLEL_SIZE, flags="--tensor-parallel-size", min=1, panel=PANEL,
                                        help="vLLM tensor-parallel GPUs.")
    gpu_memory_utilization: float = setting(GPU_MEMORY_UTILIZATION, flags="--gpu-memory-utilization", min=0.01,
                                            max=1.0, panel=PANEL, help="vLLM GPU memory share.")
    enforce_eager: Optional[bool] = setting(None, flags="--enforce-eager/--no-enforce-eager", panel=PANEL,
                                            help="vLLM eager mode (default: on for CPU, vLLM's choice on GPU).")
    kv_cache_gb: Optional[float] = setting(None, flags="--kv-cache-gb", min=0.01, panel=PANEL,
                                           help=f"vLLM KV-cache size in GiB (default {CPU_KV_CACHE_GB:g} on CPU).")
    seed: int = SEED
    block_size: Optional[int] = None
    enable_chunked_prefill: Optional[bool] = None
    load_progress: bool = True

    def __post_init__(self) -> None:
        at_least("max_model_len", self.max_model_len, 1)
        at_least("tensor_parallel_size", self.tensor_parallel_size, 1)
        above("gpu_memory_utilization", self.gpu_memory_utilization, 0)
        if self.gpu_memory_utilization > 1:
            raise UsageError(f"bad engine option: gpu_memory_utilization: {self.gpu_memory_utilization} is above 1")
        above("kv_cache_gb", self.kv_cache_gb, 0)

    def args(self, model: str, cpu: bool) -> dict[str, Any]:
        """vLLM's engine arguments: what is set, plus the CPU settings on a CPU. Settings left at
        None on GPU are left out. The key order is part of `score`'s manifest."""
        args: dict[str, Any] = dict(
            model=model,
            dtype=resolve_dtype(self.dtype, cpu),
            tensor_parallel_size=self.tensor_parallel_size,
            seed=self.seed,
            enable_prefix_caching=True,
        )
        if self.max_model_len is not None:
            args["max_model_len"] = self.max_model_len
        if not self.load_progress:
            args["use_tqdm_on_load"] = False
        if cpu:
            args["enforce_eager"] = True if self.enforce_eager is None else self.enforce_eager
            args["kv_cache_memory_bytes"] = kv_cache_bytes(self.kv_cache_gb or CPU_KV_CACHE_GB)
            args["enable_chunked_prefill"] = bool(self.enable_chunked_prefill)
            args["block_size"] = self.block_size or CPU_BLOCK_SIZE
        else:
            args["gpu_memory_utilization"] = self.gpu_memory_utilization
            kv_cache = None if self.kv_cache_gb is None else kv_cache_bytes(self.kv_cache_gb)
            for name, value in (("enforce_eager", self.enforce_eager), ("kv_cache_memory_bytes", kv_cache),
                                ("enable_chunked_prefill", self.enable_chunked_prefill),
                                ("block_size", self.block_size)):
                if value is not None:
                    args[name] = value
        return args


def vllm_args(model: str, *, cpu: bool, **settings: Any) -> dict[str, Any]:
    """vLLM's engine arguments for `model` with `settings` (fields of `VLLMSettings`)."""
    return VLLMSettings(**settings).args(model, cpu)
