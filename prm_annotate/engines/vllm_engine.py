"""In-process vLLM engine (`vllm.LLM`).

Requests go straight into vLLM's engine loop (`LLMEngine.add_request`/`step`, the loop
`LLM.generate` runs inside), so requests can join while others are generating: vLLM's scheduler
batches whatever is in flight and its prefix cache shares the common prompt prefixes of rollouts. Prompts are rendered here
with the model's own chat template, one request at a time, because a batch mixes plain chat
requests (a new assistant turn) with continuations of a partial assistant turn, and `LLM.chat`
takes one `continue_final_message` flag for the whole batch. The rendered text is tokenized
without special tokens (the template already wrote them), exactly as vLLM's own chat path does.

vLLM is imported only when an engine is built: importing it costs seconds.
"""
from __future__ import annotations

import itertools
import logging
import os
from pathlib import Path
from typing import Any, Sequence

from prm_annotate.errors import ENGINE_INSTALL, UsageError, require
from prm_annotate.engines.base import GenerationRequest, GenerationResult, Streaming, check_keys
from prm_annotate.engines.context import ENGINE, Context
from prm_annotate.engines.defaults import VLLMSettings
from prm_annotate.engines.sampling import TokenLogprob, align_tokens
from prm_annotate.thinking.split import TokenSplitter, template_thinks
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
    if request.continue_final and request.append_raw:
        head = tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
        return head + messages[-1]["content"]
    return tokenizer.apply_chat_template(
        messages,
        tokenize=False,
        add_generation_prompt=not request.continue_final,
        continue_final_message=request.continue_final,
    )


def generation_prompt(tokenizer: Any, messages: Sequence[dict]) -> str:
    """The prompt text of a new assistant turn after `messages` (where a template opens or closes a thought)."""
    return tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False, add_generation_prompt=True)


class VLLMEngine(Streaming):
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
        # What `LLM.generate` does with a prompt before `add_request`, where this vLLM has it (0.11+:
        # raw prompts there are deprecated); older versions take the prompt as it is.
        self._engine_input = getattr(self._llm, "_preprocess_cmpl_one", lambda prompt: prompt)
        self._counter = itertools.count()
        self._running: dict[str, str] = {}  # vLLM request id -> our key
        self._splits: dict[str, str] = {}  # vLLM request id -> how its output is split (request.reasoning)
        self._splitters: dict[str, TokenSplitter] = {}
        self._ready: list[GenerationResult] = []  # finished, not yet returned by poll
        self._keys: set[str] = set()  # keys submitted and not yet returned
        self._closed = False

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def chat_template_thinks(self) -> bool:
        """Whether the model's chat template is a reasoning model's (`<think>` in it)."""
        return template_thinks(getattr(self._tokenizer, "chat_template", None))

    def splitter(self, name: str) -> TokenSplitter:
        """The splitter of `request.reasoning` NAME (built once; an unknown vLLM parser: KeyError)."""
        if name not in self._splitters:
            self._splitters[name] = TokenSplitter(name, self._tokenizer)
        return self._splitters[name]

    def generation_prompt(self, messages: Sequence[dict]) -> str:
        return generation_prompt(self._tokenizer, messages)

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    def render(self, request: GenerationRequest) -> str:
        """The exact prompt text this engine sends for `request` (useful to inspect templates)."""
        return render_prompt(self._tokenizer, request)

    def context(self) -> Context:
        """The engine's context, counted by its own tokenizer (engines/context.py)."""
        return Context(self.max_model_len, source=ENGINE, counter=ENGINE)

    def prompt_tokens(self, request: GenerationRequest) -> int:
        """The prompt tokens of `request` exactly as `submit` sends them."""
        return len(self._encode(request))

    def _encode(self, request: GenerationRequest) -> list[int]:
        return self._tokenizer.encode(self.render(request), add_special_tokens=False)

    def submit(self, requests: Sequence[GenerationRequest]) -> None:
        """Hand `requests` to vLLM's engine loop now; it schedules them with whatever is running."""
        from vllm.inputs import TokensPrompt

        check_keys(requests)
        for name in {r.reasoning for r in requests} - {None}:
            try:
                self.splitter(name)
            except KeyError as exc:  # before any of the batch starts
                raise ValueError(f"reasoning {name!r}: {exc}") from None
        # The K completions of a rollout step share one prompt: render and tokenize it once.
        prompts: dict[tuple, list[int]] = {}
        for r in requests:
            if r.key in self._keys:
                raise ValueError(f"duplicate request key {r.key!r}: a request with this key is in flight")
            conversation = (r.continue_final, r.append_raw, tuple(tuple(sorted(m.items())) for m in r.messages))
            ids = prompts.get(conversation)
            if ids is None:
                ids = prompts[conversation] = self._encode(r)
            room = self.max_model_len - len(ids)
            if room < 1:
                self._keys.add(r.key)
                self._ready.append(GenerationResult(
                    key=r.key, prompt_tokens=len(ids),
                    error=f"prompt has {len(ids)} tokens, max_model_len is {self.max_model_len}"))
                continue
            params = sampling_params(r, room)
            request_id = str(next(self._counter))
            self._keys.add(r.key)
            try:
                self._llm.llm_engine.add_request(request_id, self._engine_input(TokensPrompt(prompt_token_ids=list(ids))),
                                                 params)
            except ValueError as exc:  # vLLM refused this request's parameters; the others go on
                self._ready.append(GenerationResult(key=r.key, prompt_tokens=len(ids), error=f"refused: {exc}"))
                continue
            self._running[request_id] = r.key
            if r.reasoning is not None:
                self._splits[request_id] = r.reasoning

    def poll(self) -> list[GenerationResult]:
        # Each step returns what one engine iteration finished; the EngineCore process keeps
        # generating between calls, so time the caller spends between polls is not engine idle time.
        while not self._ready and self._running:
            for out in self._llm.llm_engine.step():
                if not out.finished:
                    continue
                key = self._running.pop(out.request_id)
                completions = sorted(out.outputs, key=lambda c: c.index)
                result = GenerationResult(
                    key=key,
                    texts=[c.text for c in completions],
                    finish_reasons=[str(c.finish_reason) for c in completions],
                    prompt_tokens=len(out.prompt_token_ids or []),
                    cached_prompt_tokens=getattr(out, "num_cached_tokens", None),
                    generated_tokens=sum(len(c.token_ids) for c in completions),
                )
                if any(c.logprobs is not None for c in completions):
                    result.token_logprobs = [_token_logprobs(c) for c in completions]
                split = self._splits.pop(out.request_id, None)
                if split is not None:  # as `vllm serve --reasoning-parser` splits a chat answer
                    parts = [self.splitter(split).split(c.text, c.token_ids) for c in completions]
                    result.texts = [p.answer or "" for p in parts]
                    result.reasonings = [p.reasoning for p in parts]
                    result.reasoning_tokens = sum(p.reasoning_tokens or 0 for p in parts)
                self._ready.append(result)
        ready, self._ready = self._ready, []
        self._keys.difference_update(r.key for r in ready)
        return ready

    def in_flight(self) -> int:
        return len(self._keys)

    def cancel(self, keys: Sequence[str]) -> int:
        dropped = set(keys)
        ids = [rid for rid, key in self._running.items() if key in dropped]
        spent = self._generated_so_far(ids)
        if ids:
            self._llm.llm_engine.abort_request(ids)
        for rid in ids:
            del self._running[rid]
            self._splits.pop(rid, None)
        self._ready = [r for r in self._ready if r.key not in dropped]
        self._keys.difference_update(dropped)
        return spent

    def _generated_so_far(self, request_ids: list[str]) -> int:
        """Tokens these running requests have generated, as far as this process has seen (a few
        engine steps may still be on their way). vLLM's output processor is internal: a version
        without these fields counts 0."""
        try:
            outputs = self._llm.llm_engine.output_processor
            return sum(outputs.request_states[internal].detokenizer.num_output_tokens()
                       for rid in request_ids for internal in outputs.external_req_ids.get(rid, ())
                       if internal in outputs.request_states)
        except (AttributeError, TypeError):
            return 0

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


def sampling_params(r: GenerationRequest, room: int) -> Any:
    """vLLM's `SamplingParams` for a request whose prompt leaves `room` tokens of the context."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    s = r.sampling
    return SamplingParams(
        n=r.n, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, max_tokens=min(s.max_tokens, room),
        seed=s.seed, stop=list(r.stop) or None, structured_outputs=_structured(r.guided_regex),
        # 0: the sampled token's own log-probability only (no alternatives), as `logprobs: true` over HTTP.
        logprobs=0 if r.logprobs else None,
        # Only the finished request is wanted, as `LLM.generate` asks for it.
        output_kind=RequestOutputKind.FINAL_ONLY,
    )


def _token_logprobs(c: Any) -> list[TokenLogprob]:
    """A completion's sampled tokens placed in its text, each with its log-probability."""
    pieces = [(step[tid].decoded_token or "", step[tid].logprob) for tid, step in zip(c.token_ids, c.logprobs or [])]
    return align_tokens(c.text, pieces)


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
