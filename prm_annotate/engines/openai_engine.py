"""Engine for any OpenAI-compatible server (first of all `vllm serve`), over HTTP.

Continuation of a partial assistant turn goes through `/v1/chat/completions` with vLLM's chat
extension (`continue_final_message: true, add_generation_prompt: false`), not through
`/v1/completions` with the chat template applied here. Why:
- no local tokenizer or template is needed: `--model` may name a checkpoint that exists only on
  the server, and the client never has to download or guess its chat template;
- the server renders plain chat requests and continuations with the same template, so a rollout
  prefix is byte-for-byte the prompt a sampled response was generated from (good for the prefix
  cache, and no drift between a local and a remote copy of the template);
- token counts in `usage` then describe exactly the prompt the server ran.
The cost: the server must implement the extension (vLLM and SGLang do). A server that ignores it
would open a new assistant turn; use `vllm serve` for rollouts.
Likewise `guided_regex` is sent as vLLM's `structured_outputs: {"regex": ...}`. A server run with
`--reasoning-parser` returns a reasoning model's thought apart from its answer: the answer is read
from `content`, the thought kept from `reasoning` (or `reasoning_content`), and its token count
from `usage.completion_tokens_details.reasoning_tokens`; a request whose `reasoning` is `think`
splits `<think>…</think>` here when the server did not (thinking/split.py), each thought's tokens
counted by the server's `/tokenize` as the in-process engine counts them.

Requests stream (the protocol in base.py): the engine owns one asyncio event loop in a daemon
thread, started by the first `submit` and stopped by `close`, and one `httpx.AsyncClient` on it, so
connections are reused across calls. `submit` makes each request a task on that loop; a semaphore
of `concurrency` keeps exactly that many HTTP requests outstanding while more are waiting, and a
freed slot goes at once to the longest-waiting request: no waves, one slow answer holds up nobody
but itself. A finished request puts its result on a thread-safe queue that `poll` drains. The
caller's thread never runs the loop, so the engine works the same when called from inside a
running event loop (an async program, a notebook). `generate` is `Streaming.generate`.

Connection errors, timeouts, 429, 5xx and malformed answers are retried with exponential backoff
and full jitter (tenacity), at most `max_attempts` times, the request giving its slot up while it
waits; then its result carries `error` and no texts — a completion is never invented or left
empty. Other 4xx answers (a prompt too long, a bad parameter) are not retried. A failure of the
engine itself (not of one request) is raised by `poll`, and by every call after it until
`close`. A connection refused after the last attempt is the server gone, not one request failing:
the engine fails with a UsageError naming the address (the run stops with exit status 2, its
finished records kept). Before any request `check` (called by `engines.make_engine`) asks the
server's `/v1/models` once: a server that does not answer, or does not serve `model`, is a
UsageError naming the cause and the fix; the context is read from the same answer. The API key is read from the environment variable named by `api_key_env` and never
appears in logs or error messages.
"""
from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Coroutine, Sequence

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from prm_annotate.errors import UsageError, printable
from prm_annotate.engines.base import GenerationRequest, GenerationResult, Streaming, check_keys
from prm_annotate.engines.context import ESTIMATE, SERVER, Context, estimate_tokens
from prm_annotate.thinking.split import THINK
from prm_annotate.engines.sampling import Sampling, TokenLogprob, align_tokens

log = logging.getLogger(__name__)


class RetryableError(Exception):
    """A failure worth another attempt (connection, timeout, 429, 5xx, malformed answer)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(Exception):
    """A failure another attempt would repeat (4xx other than 429)."""


class Unreachable(RetryableError):
    """The server refused the connection: retried like any connection error; after the last attempt
    the server is taken for gone, and the engine fails (not the one request: every other would too)."""


class OpenAIEngine(Streaming):
    """`Engine` over an OpenAI-compatible `/v1/chat/completions` endpoint."""

    # The chat template is the server's: whether a thought comes split, or inside the content, is
    # found from the first answers (thinking/probe.py).
    template_on_server = True

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        concurrency: int = 16,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        max_attempts: int = 5,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        max_model_len: int | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.model = model
        self.base_url = base_url.rstrip("/")
        # Accept both ".../v1" and the bare server address.
        self.url = self.base_url + ("" if self.base_url.endswith("/v1") else "/v1") + "/chat/completions"
        self.concurrency = concurrency
        self.timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self.max_attempts = max_attempts
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._api_key: str | None = None
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise UsageError(f"environment variable {api_key_env} (the API key) is not set")
            self._api_key = key
        self._lock = threading.Lock()
        self._loop: _LoopThread | None = None
        self._finalizer: weakref.finalize | None = None
        self._pending: set[str] = set()  # keys submitted and not yet returned by poll
        self._cancelled: set[str] = set()  # keys whose answers are dropped when they come
        self._held: list[Any] = []  # answers taken off the queue early, returned by the next poll
        self._failure: Exception | None = None
        self.max_model_len = max_model_len  # the context as given (--max-model-len); None: the server's
        self._context: tuple[Context | None] | None = None  # asked once
        self._served: list[dict[str, Any]] | None = None  # /v1/models, asked once

    # -- the context (engines/context.py) -----------------------------------------------------

    @property
    def root(self) -> str:
        """The server's address without `/v1` (vLLM serves /tokenize there)."""
        return self.base_url.removesuffix("/v1")

    def served(self) -> list[dict[str, Any]]:
        """The models the server lists (/v1/models), asked once: the one place this engine asks, for
        `check` and the context. UsageError (exit 2) when the server cannot be reached or gives no
        such list: the URL, what went wrong, and what to check."""
        if self._served is None:
            with httpx.Client(**self._client_args()) as client:
                self._served = self._ask_served(client)
        return self._served

    def _ask_served(self, client: httpx.Client) -> list[dict[str, Any]]:
        url = self.root + "/v1/models"
        try:
            resp = client.get(url)
        except httpx.HTTPError as exc:
            raise UsageError(f"cannot reach the server at {self.base_url} ({_said(exc)}): is the server up at "
                             "this address?") from None
        if resp.status_code in (401, 403):
            raise UsageError(f"the server at {self.base_url} refused the request (HTTP {resp.status_code}): "
                             "give its API key with --api-key-env NAME, the environment variable holding it")
        try:
            models = resp.json().get("data") if resp.status_code == 200 else None
        except (ValueError, AttributeError):
            models = None
        if not isinstance(models, list):
            raise UsageError(f"the server at {self.base_url} gives no list of models at {url} (HTTP "
                             f"{resp.status_code}: {printable(self._redact(_snippet(resp.text, 120)))}): is "
                             "--base-url an OpenAI-compatible address (http://HOST:PORT/v1)?")
        return [m for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]

    def check(self) -> None:
        """Before the first request: the server answers and serves `model` under that name; else
        UsageError (exit 2) naming the names it serves and how to serve the model under another.
        Every stage over HTTP is checked here (`engines.make_engine`), before anything is sent."""
        names = [m["id"] for m in self.served()]
        if self.model in names:
            return
        served = ", ".join(repr(n) for n in names) or "no model"
        paths = {m.get("root") for m in self.served()} - {None}
        path = next(iter(paths)) if len(paths) == 1 else "MODEL"
        raise UsageError(
            f"the server at {self.base_url} serves {served}, not {self.model!r}: give --model "
            f"{names[0] if len(names) == 1 else 'NAME'} (a name it serves), or start the server with "
            f"--served-model-name {self.model} (python -m vllm.entrypoints.openai.api_server --model {path} "
            f"--served-model-name {self.model} ...)")

    def context(self) -> Context | None:
        """The served model's context: `max_model_len` as given, else what the server's /v1/models
        says of this model (vLLM reports it); None when neither tells (then nothing is checked).
        Prompts are counted by the server's /tokenize where it has one, else estimated. Asked once."""
        if self._context is None:
            self._context = (self._ask_context(),)
        return self._context[0]

    def _ask_context(self) -> Context | None:
        length, source = self.max_model_len, "option"
        if length is None:
            source = SERVER
            try:
                length = next((m.get("max_model_len") for m in self.served() if m["id"] == self.model), None)
            except UsageError as exc:  # an engine not `check`ed (a library's): no context known, as before
                log.warning("the server did not say its context: %s", exc)
                return None
            if not isinstance(length, int) or length < 1:
                return None
        probe = GenerationRequest(key="", messages=({"role": "user", "content": "1"},))
        with httpx.Client(**self._client_args()) as client:
            counter = SERVER if self._tokenize(client, probe) is not None else ESTIMATE
        return Context(length, source=source, counter=counter)

    def prompt_tokens(self, request: GenerationRequest) -> int | None:
        """The prompt tokens of `request` as the server renders it (/tokenize), else the estimate
        (engines/context.py); None when the server could not be asked this time (not checked)."""
        context = self.context()
        if context is None or context.counter == ESTIMATE:
            return estimate_tokens(request.messages)
        with httpx.Client(**self._client_args()) as client:
            return self._tokenize(client, request)

    def count_tokens(self, text: str) -> int | None:
        """The tokens of `text` by the served model's tokenizer (/tokenize, no special tokens added),
        as the in-process engine counts a thought it splits; None where the server cannot count."""
        with httpx.Client(**self._client_args()) as client:
            try:
                return _count(client.post(self.root + "/tokenize", json=self._count_body(text)))
            except httpx.HTTPError:
                return None

    def _count_body(self, text: str) -> dict[str, Any]:
        return {"model": self.model, "prompt": text, "add_special_tokens": False}

    async def _split_here(self, client: httpx.AsyncClient, result: GenerationResult) -> GenerationResult:
        """`<think>…</think>` split off here (the server did not split), each thought's tokens counted
        by the server's /tokenize as the in-process engine counts them; not told where it cannot count."""
        try:
            counts = [_count(await client.post(self.root + "/tokenize", json=self._count_body(t)))
                      for t in result.thought_spans()]
        except httpx.HTTPError:
            counts = []
        return result.split_here(counts)

    def _tokenize(self, client: httpx.Client, r: GenerationRequest) -> int | None:
        body = {"model": self.model, "messages": [dict(m) for m in r.messages],
                "add_generation_prompt": not r.continue_final, "continue_final_message": r.continue_final}
        try:
            return _count(client.post(self.root + "/tokenize", json=body))
        except httpx.HTTPError:
            return None

    # -- the protocol -------------------------------------------------------------------------

    def submit(self, requests: Sequence[GenerationRequest]) -> None:
        requests = list(requests)
        check_keys(requests)
        # Build every body first: a malformed request is refused before any of the batch starts.
        bodies = [self.body(r) for r in requests]
        with self._lock:
            self._raise_if_failed()
            self._drop_cancelled()
            for r in requests:
                if r.key in self._pending or r.key in self._cancelled:
                    raise ValueError(f"duplicate request key {r.key!r}: a request with it is in flight")
            if self._loop is None:
                self._loop = _LoopThread(self._client_args(), self.concurrency)
                # An engine dropped without close() still stops its thread.
                self._finalizer = weakref.finalize(self, self._loop.stop)
            self._pending.update(r.key for r in requests)
            self._loop.spawn([self._run(self._loop, r, body) for r, body in zip(requests, bodies)])

    def poll(self) -> list[GenerationResult]:
        with self._lock:
            self._raise_if_failed()
            if not self._pending:
                self._drop_cancelled()
                return []
            loop = self._loop
            assert loop is not None  # requests are pending
            held, self._held = self._held, []
        done = held or [self._next_done(loop)]
        while True:
            try:
                done.append(loop.done.get_nowait())
            except queue.Empty:
                break
        with self._lock:
            kept = [item for item in done if item.key not in self._cancelled]
            self._cancelled.difference_update(item.key for item in done)
            self._pending.difference_update(item.key for item in kept)
            failed = next((item for item in done if isinstance(item, _Failed)), None)
            if failed is not None:
                # Other results taken in this call are lost with it: the engine is broken now.
                self._failure = failed.error
                raise failed.error
        return kept  # type: ignore[return-value]

    def in_flight(self) -> int:
        return len(self._pending)

    def _drop_cancelled(self) -> None:
        """Take the answers of cancelled requests that have come; their keys are free again."""
        if self._loop is None:
            return
        while self._cancelled:
            try:
                item = self._loop.done.get_nowait()
            except queue.Empty:
                return
            if item.key in self._cancelled:
                self._cancelled.discard(item.key)
            else:
                self._held.append(item)

    def cancel(self, keys: Sequence[str]) -> int:
        """The requests run to their end on the server (an HTTP request already sent is not
        stopped); their answers are dropped, and their keys stay taken until then. What they
        generate is not known when this returns: 0."""
        with self._lock:
            for key in keys:
                if key in self._pending:
                    self._pending.discard(key)
                    self._cancelled.add(key)
        return 0

    def close(self) -> None:
        """Cancel what is in flight, close the connections and stop the loop's thread. Idempotent;
        a later `submit` starts afresh."""
        with self._lock:
            loop, self._loop = self._loop, None
            self._pending.clear()
            self._cancelled.clear()
            self._held.clear()
            self._failure = None
        if loop is not None:
            self._finalizer()  # loop.stop, once

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise RuntimeError(f"the HTTP engine failed earlier: {self._failure!r}") from self._failure

    def _next_done(self, loop: _LoopThread) -> GenerationResult | _Failed:
        """The next finished request; raises rather than waits forever once the loop has stopped
        (closed from another thread)."""
        while True:
            try:
                return loop.done.get(timeout=1.0)
            except queue.Empty:
                if not loop.thread.is_alive():
                    raise RuntimeError("the HTTP engine was closed with requests in flight") from None

    def _client_args(self) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        return {"headers": headers, "timeout": self.timeout, "limits": limits}

    async def _run(self, loop: _LoopThread, r: GenerationRequest, body: dict[str, Any]) -> None:
        """One request on the loop thread; its result, or the engine's own failure, goes to `poll`."""
        try:
            result: GenerationResult | _Failed = await self._one(loop.client, loop.semaphore, r, body)
        except Exception as exc:  # not a failed request (those are results): a fault of the engine
            result = _Failed(r.key, exc)
        loop.done.put(result)

    # -- one request --------------------------------------------------------------------------

    def body(self, r: GenerationRequest) -> dict[str, Any]:
        """The JSON body sent for one request."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in r.messages],
            "n": r.n,
            **sampling_body(r.sampling),
        }
        if r.stop:
            body["stop"] = list(r.stop)
        if r.continue_final:
            if not r.messages or r.messages[-1].get("role") != "assistant":
                raise ValueError(f"request {r.key!r}: continue_final needs a final assistant message")
            body["continue_final_message"] = True
            body["add_generation_prompt"] = False
        if r.guided_regex is not None:
            body["structured_outputs"] = {"regex": r.guided_regex}
        if r.logprobs:  # the sampled token's own log-probability, no alternatives
            body["logprobs"] = True
        return body

    async def _one(
        self, client: httpx.AsyncClient, semaphore: asyncio.Semaphore, r: GenerationRequest,
        body: dict[str, Any],
    ) -> GenerationResult:
        attempts = 0
        try:
            retrying = AsyncRetrying(
                stop=stop_after_attempt(self.max_attempts),
                wait=self._wait,
                retry=retry_if_exception_type(RetryableError),
                reraise=True,
            )
            async for attempt in retrying:
                with attempt:
                    attempts += 1
                    async with semaphore:
                        data = await self._post(client, body, *self.route(r))
                        result = self._parse(r, data)
                        if getattr(r, "reasoning", None) == THINK and not result.reasonings:
                            result = await self._split_here(client, result)  # the server did not split
                    return result
        except Unreachable as exc:
            raise UsageError(f"the server at {self.base_url} stopped answering ({exc}, {attempts} attempt(s)): is the "
                             "server up at this address? Finished records are kept: rerun the same command once it "
                             "is") from None
        except (RetryableError, PermanentError) as exc:
            msg = printable(self._redact(str(exc)))
            # The stage says which record failed, and why, once (its failure lines); here only for a debug log.
            log.debug("request %s failed after %d attempt(s): %s", readable_key(r.key), attempts, msg)
            return self.failed(r, f"failed after {attempts} attempt(s): {msg}")
        raise AssertionError("unreachable")  # pragma: no cover

    # A subclass reaching other routes of the same server (vLLM's /pooling: prm/served.py) keeps
    # the loop, the concurrency, the retries and the key handling, and changes these three.

    def route(self, r: Any) -> tuple[str, str]:
        """The HTTP method and URL of a request."""
        return "POST", self.url

    def failed(self, r: Any, message: str) -> Any:
        """The result of a request that failed for good."""
        return GenerationResult(key=r.key, error=message)

    def _wait(self, state: RetryCallState) -> float:
        """Exponential backoff with full jitter; at least the server's Retry-After, if it sent one."""
        wait = wait_random_exponential(multiplier=self.backoff_initial, max=self.backoff_max)(state)
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RetryableError) and exc.retry_after is not None:
            wait = max(wait, min(exc.retry_after, self.backoff_max))
        return wait

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any] | None, method: str,
                    url: str) -> dict[str, Any]:
        try:
            resp = await client.request(method, url, json=body)
        except httpx.TimeoutException as exc:
            raise RetryableError(f"timeout ({type(exc).__name__})") from None
        except httpx.ConnectError as exc:
            raise Unreachable(f"connection error ({_said(exc)})") from None
        except httpx.TransportError as exc:
            raise RetryableError(f"connection error ({_said(exc)})") from None
        if resp.status_code == 429 or resp.status_code >= 500:
            raise RetryableError(
                f"HTTP {resp.status_code}: {_snippet(resp.text)}", retry_after=_retry_after(resp)
            )
        if resp.status_code >= 400:
            raise PermanentError(f"HTTP {resp.status_code}: {_snippet(resp.text)}")
        try:
            data = resp.json()
        except ValueError:
            raise RetryableError(f"malformed JSON in the answer: {_snippet(resp.text)}") from None
        if not isinstance(data, dict):
            raise RetryableError(f"malformed answer (not an object): {_snippet(resp.text)}")
        return data

    def _parse(self, r: GenerationRequest, data: dict[str, Any]) -> GenerationResult:
        """Turn a chat-completion answer into a result; anything malformed is retried."""
        choices = data.get("choices")
        if not isinstance(choices, list) or len(choices) != r.n:
            raise RetryableError(
                f"malformed answer: expected {r.n} choice(s), got {_snippet(repr(choices))}"
            )
        texts, reasons, reasonings, tokens = [], [], [], []
        for c in sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0):
            message = (c.get("message") or {}) if isinstance(c, dict) else {}
            content = message.get("content") if isinstance(message, dict) else None
            reasoning = None
            if isinstance(message, dict):  # `reasoning` (vLLM 0.32), `reasoning_content` (older vLLM, hosted APIs)
                reasoning = message.get("reasoning")
                reasoning = message.get("reasoning_content") if reasoning is None else reasoning
            if content is None and isinstance(reasoning, str):
                content = ""  # a thought with no answer after it (cut, or never ended)
            if not isinstance(content, str):
                raise RetryableError(f"malformed answer: choice without text content: {_snippet(repr(c))}")
            texts.append(content)
            if r.logprobs:
                tokens.append(_token_logprobs(c, (reasoning or "") + content))
            reasonings.append(reasoning if isinstance(reasoning, str) else None)
            reasons.append(str(c.get("finish_reason")))
        usage = data.get("usage") or {}
        try:
            details = usage.get("prompt_tokens_details") or {}
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            completion = usage.get("completion_tokens_details") or {}
            thought = completion.get("reasoning_tokens") if isinstance(completion, dict) else None
            result = GenerationResult(
                key=r.key,
                texts=texts,
                finish_reasons=reasons,
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                cached_prompt_tokens=int(cached) if cached is not None else None,
                generated_tokens=int(usage.get("completion_tokens") or 0),
                reasoning_tokens=int(thought) if thought is not None else None,
            )
        except (AttributeError, TypeError, ValueError):
            raise RetryableError(f"malformed answer: usage {_snippet(repr(usage))}") from None
        result.token_logprobs = tokens
        if any(x is not None for x in reasonings):
            result.reasonings = reasonings
        return result

    def _redact(self, text: str) -> str:
        # Belt and braces: a server could echo the Authorization header in an error body.
        return text.replace(self._api_key, "***") if self._api_key else text


def sampling_body(s: Sampling) -> dict[str, Any]:
    """A request's sampling as fields of the chat-completion body."""
    body: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p, "max_tokens": s.max_tokens}
    if s.top_k:  # not an OpenAI parameter: sent only when asked for (vLLM's server takes it)
        body["top_k"] = s.top_k
    if s.seed is not None:
        body["seed"] = s.seed
    return body


def _token_logprobs(choice: dict[str, Any], text: str) -> list[TokenLogprob]:
    """A chat choice's `logprobs.content` placed in its text; asked for and missing is malformed."""
    content = (choice.get("logprobs") or {}).get("content")
    try:
        pieces = [(str(t["token"]), float(t["logprob"])) for t in content]
    except (KeyError, TypeError, ValueError):
        raise RetryableError(f"malformed answer: logprobs asked for, got {_snippet(repr(choice.get('logprobs')))}") from None
    return align_tokens(text, pieces)


@dataclass
class _Failed:
    """What `poll` gets instead of a result when the engine itself failed on a request."""

    key: str
    error: Exception


class _LoopThread:
    """An asyncio event loop running in a daemon thread, with the engine's one HTTP client, the
    semaphore that bounds its requests and the queue of finished ones (a closed engine's late
    results cannot reach a new loop). It holds no reference to the engine (only its tasks do)."""

    def __init__(self, client_args: dict[str, Any], concurrency: int) -> None:
        self.client = httpx.AsyncClient(**client_args)
        self.semaphore = asyncio.Semaphore(concurrency)
        self.done: queue.SimpleQueue[GenerationResult | _Failed] = queue.SimpleQueue()
        self.tasks: set[asyncio.Task] = set()  # the loop keeps only weak references to tasks
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="openai-engine", daemon=True)
        self.thread.start()

    def spawn(self, coros: list[Coroutine[Any, Any, None]]) -> None:
        """Start `coros` as tasks, in this order (the semaphore then serves them first come, first served)."""

        def start() -> None:
            for coro in coros:
                task = self.loop.create_task(coro)
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)

        self.loop.call_soon_threadsafe(start)

    def stop(self) -> None:
        """Cancel the tasks, close the client, stop the loop and join its thread."""

        async def shutdown() -> None:
            for task in list(self.tasks):
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            await self.client.aclose()

        if threading.current_thread() is self.thread:
            # The engine was dropped by one of its own tasks: the thread cannot join itself.
            self.loop.create_task(shutdown()).add_done_callback(lambda _: self.loop.stop())
            return
        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
            self.loop.close()


def _count(resp: httpx.Response) -> int | None:
    """The token count of a /tokenize answer; None when it gives none."""
    try:
        count = resp.json().get("count") if resp.status_code == 200 else None
    except (ValueError, AttributeError):
        return None
    return count if isinstance(count, int) else None


def _said(exc: Exception) -> str:
    return printable(f"{type(exc).__name__}: {exc}")


def readable_key(key: str) -> str:
    """A stage's request key as a person reads it: its record's id, then the request's place in
    the record (the NULs a stage joins them with shown as spaces), without the scheduler's job
    number before a \\x1f (pipeline/scheduler.py)."""
    head, _, rest = key.rpartition("\x1f")[2].partition("\x00")
    return printable(head) + (f" ({printable(rest.replace(chr(0), ' '))})" if rest else "")


def _snippet(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _retry_after(resp: httpx.Response) -> float | None:
    value = resp.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
