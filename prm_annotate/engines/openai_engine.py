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
Likewise `guided_regex` is sent as vLLM's `structured_outputs: {"regex": ...}`.

Requests run concurrently (bounded by `concurrency`) on one asyncio loop; `generate` is the
synchronous wrapper. Connection errors, timeouts, 429, 5xx and malformed JSON are retried with
exponential backoff and full jitter (tenacity), at most `max_attempts` times; then the request's
result carries `error` and no texts — a completion is never invented or left empty. Other 4xx
answers (a prompt too long, a bad parameter) are not retried. The API key is read from the
environment variable named by `api_key_env` and never appears in logs or error messages.
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any, Sequence

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from prm_annotate.errors import UsageError, printable
from prm_annotate.engines.base import GenerationRequest, GenerationResult, check_keys

log = logging.getLogger(__name__)


class RetryableError(Exception):
    """A failure worth another attempt (connection, timeout, 429, 5xx, malformed answer)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(Exception):
    """A failure another attempt would repeat (4xx other than 429)."""


class OpenAIEngine:
    """`Engine` over an OpenAI-compatible `/v1/chat/completions` endpoint."""

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

    # -- the protocol -------------------------------------------------------------------------

    def generate(self, requests: Sequence[GenerationRequest]) -> dict[str, GenerationResult]:
        check_keys(requests)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.agenerate(requests))
        # Called from inside an event loop (a notebook, an async caller): run on a fresh loop in
        # a thread rather than fail.
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = asyncio.run(self.agenerate(requests))
            except BaseException as exc:  # re-raised in the caller's thread
                box["error"] = exc

        t = threading.Thread(target=run)
        t.start()
        t.join()
        if "error" in box:
            raise box["error"]
        return box["value"]

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> dict[str, GenerationResult]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        semaphore = asyncio.Semaphore(self.concurrency)
        async with httpx.AsyncClient(headers=headers, timeout=self.timeout, limits=limits) as client:
            results = await asyncio.gather(*(self._one(client, semaphore, r) for r in requests))
        return {r.key: r for r in results}

    def close(self) -> None:
        """Nothing to release: each `generate` call opens and closes its own connection pool."""

    # -- one request --------------------------------------------------------------------------

    def body(self, r: GenerationRequest) -> dict[str, Any]:
        """The JSON body sent for one request."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in r.messages],
            "n": r.n,
            "temperature": r.temperature,
            "top_p": r.top_p,
            "max_tokens": r.max_tokens,
        }
        if r.seed is not None:
            body["seed"] = r.seed
        if r.stop:
            body["stop"] = list(r.stop)
        if r.continue_final:
            if not r.messages or r.messages[-1].get("role") != "assistant":
                raise ValueError(f"request {r.key!r}: continue_final needs a final assistant message")
            body["continue_final_message"] = True
            body["add_generation_prompt"] = False
        if r.guided_regex is not None:
            body["structured_outputs"] = {"regex": r.guided_regex}
        return body

    async def _one(
        self, client: httpx.AsyncClient, semaphore: asyncio.Semaphore, r: GenerationRequest
    ) -> GenerationResult:
        body = self.body(r)
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
                        data = await self._post(client, body)
                    return self._parse(r, data)
        except (RetryableError, PermanentError) as exc:
            msg = printable(self._redact(str(exc)))
            log.warning("request %s failed after %d attempt(s): %s", r.key, attempts, msg)
            return GenerationResult(key=r.key, error=f"failed after {attempts} attempt(s): {msg}")
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait(self, state: RetryCallState) -> float:
        """Exponential backoff with full jitter; at least the server's Retry-After, if it sent one."""
        wait = wait_random_exponential(multiplier=self.backoff_initial, max=self.backoff_max)(state)
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RetryableError) and exc.retry_after is not None:
            wait = max(wait, min(exc.retry_after, self.backoff_max))
        return wait

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
        try:
            resp = await client.post(self.url, json=body)
        except httpx.TimeoutException as exc:
            raise RetryableError(f"timeout ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise RetryableError(f"connection error ({type(exc).__name__}: {exc})") from None
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
        texts, reasons = [], []
        for c in sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0):
            content = (c.get("message") or {}).get("content") if isinstance(c, dict) else None
            if not isinstance(content, str):
                raise RetryableError(f"malformed answer: choice without text content: {_snippet(repr(c))}")
            texts.append(content)
            reasons.append(str(c.get("finish_reason")))
        usage = data.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        return GenerationResult(
            key=r.key,
            texts=texts,
            finish_reasons=reasons,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            cached_prompt_tokens=int(cached) if cached is not None else None,
            generated_tokens=int(usage.get("completion_tokens") or 0),
        )

    def _redact(self, text: str) -> str:
        # Belt and braces: a server could echo the Authorization header in an error body.
        return text.replace(self._api_key, "***") if self._api_key else text


def _snippet(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _retry_after(resp: httpx.Response) -> float | None:
    value = resp.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
