"""In-process vLLM engine (`vllm.LLM`).

The whole batch goes to vLLM in one `generate` call so its scheduler sees every request at once
and the prefix cache can share the common prompt prefixes of rollouts. Prompts are rendered here
with the model's own chat template, one request at a time, because a batch mixes plain chat
requests (a new assistant turn) with continuations of a partial assistant turn, and `LLM.chat`
takes one `continue_final_message` flag for the whole batch. The rendered text is tokenized
without special tokens (the template already wrote them), exactly as vLLM's own chat path does.

vLLM is imported only when an engine is built: importing it costs seconds.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Sequence

from prm_annotate.errors import ENGINE_INSTALL, UsageError, require
from prm_annotate.engines.base import GenerationRequest, GenerationResult, check_keys
from prm_annotate.engines.defaults import VLLMSettings
from prm_annotate.engines.reaper import start_reaper, stop_reaper

log = logging.getLogger(__name__)


class EngineStartError(RuntimeError):
    """The engine did not come up (bad model path, start-up timeout, out of memory...)."""


def resolve_model(model: str) -> tuple[str, bool]:
    """Return (model, is_local). Local paths become absolute: a relative path makes transformers
    ask the hub and wait ~45 s before failing. A path-looking name that does not exist is an error
    here rather than a slow hub lookup."""
    p = Path(model).expanduser()
    if p.exists():
        return str(p.resolve()), True
    if model.startswith(("/", "./", "../", "~")) or model.endswith((".gguf", os.sep)):
        raise UsageError(f"model path does not exist: {model}")
    return model, False


def render_prompt(tokenizer: Any, request: GenerationRequest) -> str:
    """The prompt text for one request, through the tokenizer's chat template.

    A continuation leaves the final assistant turn open (`continue_final_message`), so the model
    extends the partial answer in place instead of starting a new turn."""
    messages = [dict(m) for m in request.messages]
    if request.continue_final and (not messages or messages[-1].get("role") != "assistant"):
        raise ValueError(f"request {request.key!r}: continue_final needs a final assistant message")
    return tokenizer.apply_chat_template(
        messages,
        tokenize=False,
        add_generation_prompt=not request.continue_final,
        continue_final_message=request.continue_final,
    )


class VLLMEngine:
    """`Engine` backed by an in-process `vllm.LLM`.

    `settings` are the fields of `engines.defaults.VLLMSettings` (dtype, max_model_len, seed,
    kv_cache_gb, ...). Those left at None take vLLM's defaults, except on CPU (no CUDA), where the
    settings known to work here are used (float32, eager mode, an explicit KV-cache budget, no
    chunked prefill, 32-token blocks).
    """

    def __init__(
        self,
        model: str,
        *,
        start_timeout: float | None = None,
        extra_engine_args: dict[str, Any] | None = None,
        **settings: Any,
    ) -> None:
        vllm_settings = VLLMSettings(**settings)  # an unknown setting is a TypeError before anything starts
        model_path, is_local = resolve_model(model)
        if is_local:
            # Never ask the hub about a local checkpoint (a missing file would back off for ~45 s).
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        if start_timeout is not None:
            # vLLM waits this long for its EngineCore to load the model and report ready.
            os.environ["VLLM_ENGINE_READY_TIMEOUT_S"] = str(max(1, int(start_timeout)))
        self.model = model
        # vLLM logs to stdout by default, in this process and in its workers (which inherit the
        # environment): stages write JSONL to stdout, so send vLLM's logs to stderr, and only
        # its warnings unless the user asked for more.
        os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

        require("vllm", "the in-process engine (--model without --base-url)", ENGINE_INSTALL)
        from vllm import LLM
        from vllm.platforms import current_platform

        args = vllm_settings.args(model_path, cpu=current_platform.is_cpu())
        self.dtype = args["dtype"]
        args.update(extra_engine_args or {})
        self.engine_args = args

        children_before = _child_pids()
        # Started before vLLM's own processes, so it sees them from their first moment.
        self._reaper = start_reaper()
        try:
            self._llm = LLM(**args)
        except BaseException as exc:
            # A failed start can leave EngineCore processes behind, pinning a core: end them.
            stop_reaper(self._reaper)
            _kill_new_children(children_before)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            raise EngineStartError(f"vLLM engine for {model} did not start: {exc}") from exc
        self._tokenizer = self._llm.get_tokenizer()
        self.max_model_len: int = self._llm.llm_engine.model_config.max_model_len
        self._closed = False

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def render(self, request: GenerationRequest) -> str:
        """The exact prompt text this engine sends for `request` (useful to inspect templates)."""
        return render_prompt(self._tokenizer, request)

    def generate(self, requests: Sequence[GenerationRequest]) -> dict[str, GenerationResult]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        check_keys(requests)
        results: dict[str, GenerationResult] = {}
        prompts, params, keys = [], [], []
        for r in requests:
            ids = self._tokenizer.encode(self.render(r), add_special_tokens=False)
            room = self.max_model_len - len(ids)
            if room < 1:
                results[r.key] = GenerationResult(
                    key=r.key,
                    prompt_tokens=len(ids),
                    error=f"prompt has {len(ids)} tokens, max_model_len is {self.max_model_len}",
                )
                continue
            prompts.append(TokensPrompt(prompt_token_ids=ids))
            params.append(
                SamplingParams(
                    n=r.n,
                    temperature=r.temperature,
                    top_p=r.top_p,
                    max_tokens=min(r.max_tokens, room),
                    stop=list(r.stop) or None,
                    seed=r.seed,
                    structured_outputs=_structured(r.guided_regex),
                )
            )
            keys.append(r.key)
        if prompts:
            outputs = self._llm.generate(prompts, params, use_tqdm=False)
            for key, out in zip(keys, outputs):
                completions = sorted(out.outputs, key=lambda c: c.index)
                results[key] = GenerationResult(
                    key=key,
                    texts=[c.text for c in completions],
                    finish_reasons=[str(c.finish_reason) for c in completions],
                    prompt_tokens=len(out.prompt_token_ids or []),
                    cached_prompt_tokens=getattr(out, "num_cached_tokens", None),
                    generated_tokens=sum(len(c.token_ids) for c in completions),
                )
        return results

    def close(self) -> None:
        """Stop vLLM's EngineCore and worker processes (they outlive `os._exit` otherwise)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._llm.llm_engine.engine_core.shutdown()
        except Exception as exc:  # closing must not mask the caller's own error
            log.warning("vLLM shutdown failed: %s", exc)
        stop_reaper(self._reaper)

    def __enter__(self) -> "VLLMEngine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _structured(regex: str | None):
    if regex is None:
        return None
    from vllm.sampling_params import StructuredOutputsParams

    return StructuredOutputsParams(regex=regex)


def _child_pids() -> set[int]:
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True)}


def _kill_new_children(before: set[int]) -> None:
    import psutil

    new = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    for p in new:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(new, timeout=10)
