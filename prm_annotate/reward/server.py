"""`reward-server`: a PRM as a reward model over HTTP, for RL trainers (OpenRLHF's `--remote_rm_url`,
verl through `reward.verl.compute_score`).

    POST /get_reward   OpenRLHF's remote reward-model request (reward/protocols.py)
    POST /score        this server's own form
    GET  /health       {"status": "ok", "model": ..., "aggregate": ...}

A network service, so: it binds 127.0.0.1 unless told otherwise; when the environment variable it
is given (`key_env`) holds a key, every request must carry `Authorization: Bearer <key>` (401
otherwise; compared in constant time, never logged); a body is at most `max_request_mb` MiB (413)
and a request at most `max_batch` responses (400); a request that is not of the shape is answered
400 with the reason, never a crash or a traceback; at most `max_clients` requests are handled at
once (503 with Retry-After past that), and a client that stalls is cut off after
`request_timeout` seconds.

Requests that arrive together are scored together: one worker thread takes every batch waiting (up
to `max_batch` responses) into one engine call, so 50 clients with 8 responses each cost a few engine
calls, and one rollout batch of 256 is one request and one engine call.
"""
from __future__ import annotations

import hmac
import os
import queue
import sys
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import orjson

from prm_annotate.reward.protocols import BadRequest, TextRules, answer, openrlhf_items, score_items
from prm_annotate.errors import UsageError
from prm_annotate.reports.aggregates import DEFAULT_AGGREGATE, reward_aggregate, reward_names
from prm_annotate.reward.scoring import Item, Reward, RewardScorer
from prm_annotate.settings import group, setting

PANEL = "Server"  # the --help panel of the server's options

ROUTES: dict[str, Callable[..., tuple[list[Item | str], str | None]]] = {
    "/get_reward": openrlhf_items,
    "/score": score_items,
}


@dataclass(frozen=True)
class ServerConfig:
    """How the reward server listens and what it takes.

    Attributes:
        port: the port (0: any free one).
        aggregate: the reward of a response from its step rewards, unless a request names one.
        max_request_mb: read in bytes as `max_request_bytes`.
        fallback_reward: the reward of a response the PRM cannot read.
        rules: how a response's text becomes steps.
    """
    host: str = setting("127.0.0.1", flags="--host", panel=PANEL, help="Address to bind (127.0.0.1: this machine only).")
    port: int = setting(8008, flags="--port", min=0, max=65535, panel=PANEL, help="Port (0: a free one, printed at start).")
    aggregate: str = setting(DEFAULT_AGGREGATE, flags="--aggregate", panel=PANEL, help=lambda: (
        f"A response's reward from its step rewards: {reward_names()} (a request may name another; docs/rl-reward.md)."))
    key_env: str | None = setting("PRM_REWARD_KEY", flags="--key-env", panel=PANEL, help=(
        "Environment variable whose value, when set, every request must bear as `Authorization: Bearer` "
        "(OpenRLHF sends none)."))
    max_batch: int = setting(1024, flags="--max-batch", min=1, panel=PANEL,
                             help="Most responses in one request (and in one engine call).")
    max_request_mb: float = setting(16.0, flags="--max-request-mb", min=0.001, panel=PANEL,
                                    help="Largest request body, in MiB.")
    max_clients: int = setting(64, flags="--max-clients", min=1, panel=PANEL,
                               help="Requests handled at once; more are answered 503 with Retry-After.")
    request_timeout: float = setting(60.0, flags="--client-timeout", min=0.1, panel=PANEL,
                                     help="Seconds a client may take to send its request.")
    fallback_reward: float = setting(0.0, flags="--fallback-reward", panel=PANEL, help=(
        "Reward of a response the PRM cannot read (no steps, too long, the step tag in it); the answer's "
        "`errors` says why."))
    rules: TextRules = group(TextRules())

    def __post_init__(self) -> None:
        kind = reward_aggregate(self.aggregate)
        if kind is None:
            raise UsageError(f"--aggregate {self.aggregate}: choose from {reward_names()}")
        object.__setattr__(self, "aggregate", kind.name)  # an old name, said as today's

    @property
    def max_request_bytes(self) -> int:
        return int(self.max_request_mb * 2**20)


class Batcher:
    """One worker thread scoring what waits, merged into calls of at most `max_batch` items."""

    def __init__(self, scorer: RewardScorer, max_batch: int):
        self.scorer, self.max_batch = scorer, max_batch
        self._queue: queue.Queue[tuple[list[Item], Future] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="reward-batcher", daemon=True)
        self._thread.start()

    def submit(self, items: list[Item]) -> list[Reward]:
        future: Future = Future()
        self._queue.put((items, future))
        return future.result()

    def _run(self) -> None:
        pending: list[tuple[list[Item], Future]] = []
        while True:
            job = self._queue.get() if not pending else None
            if job is None and not pending:
                return  # closed
            if job is not None:
                pending.append(job)
            while True:  # take what else waits, within the batch bound
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)
                    break
                pending.append(nxt)
            batch, size = [], 0
            while pending and (not batch or size + len(pending[0][0]) <= self.max_batch):
                items, future = pending.pop(0)
                batch.append((items, future))
                size += len(items)
            try:
                rewards = self.scorer.rewards([i for items, _ in batch for i in items])
            except Exception as exc:  # the engine's own failure: every waiting request hears it
                for _, future in batch:
                    future.set_exception(exc)
                continue
            at = 0
            for items, future in batch:
                future.set_result(rewards[at: at + len(items)])
                at += len(items)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)


class RewardServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, scorer: RewardScorer, config: ServerConfig = ServerConfig()):
        self.scorer, self.config = scorer, config
        self.batcher = Batcher(scorer, config.max_batch)
        self.slots = threading.BoundedSemaphore(config.max_clients)
        self.key = (os.environ.get(config.key_env) or None) if config.key_env else None
        # socketserver's listen backlog is 5: a burst of clients past it is reset by the kernel
        # before any handler runs, where it should be answered (503 past max_clients).
        self.request_queue_size = max(128, 2 * config.max_clients)
        super().__init__((config.host, config.port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def reward(self, path: str, body: Any) -> dict[str, Any]:
        items, aggregate = ROUTES[path](body, self.config.rules, self.config.max_batch)
        readable = [i for i in items if isinstance(i, Item)]
        scored = iter(self.batcher.submit(readable) if readable else [])
        rewards = [next(scored) if isinstance(i, Item) else Reward(None, i) for i in items]
        return answer(rewards, aggregate or self.config.aggregate, self.config.fallback_reward)

    def server_close(self) -> None:
        super().server_close()
        self.batcher.close()


class _Handler(BaseHTTPRequestHandler):
    server: RewardServer
    protocol_version = "HTTP/1.1"
    error_content_type = "application/json"
    error_message_format = '{"error": "%(message)s"}'

    def setup(self) -> None:
        self.timeout = self.server.config.request_timeout  # a stalled client does not hold a thread
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # no per-request lines (and never a header)

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = orjson.dumps(payload)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        key = self.server.key
        if key is None:
            return True
        given = self.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {key}".encode())

    def do_GET(self) -> None:
        if not self._authorised():
            return self._send(401, {"error": "missing or wrong bearer key"}, {"WWW-Authenticate": "Bearer"})
        if self.path != "/health":
            return self._send(404, {"error": f"no such path {self.path!r} (GET /health; POST {', '.join(ROUTES)})"})
        self._send(200, {"status": "ok", "model": self.server.scorer.model, "aggregate": self.server.config.aggregate})

    def do_POST(self) -> None:
        if not self.server.slots.acquire(blocking=False):
            self.close_connection = True
            return self._send(503, {"error": "too many requests at once; retry"}, {"Retry-After": "1"})
        try:
            self._post()
        finally:
            self.server.slots.release()

    def _post(self) -> None:
        if not self._authorised():
            self.close_connection = True
            return self._send(401, {"error": "missing or wrong bearer key"}, {"WWW-Authenticate": "Bearer"})
        if self.path not in ROUTES:
            self.close_connection = True
            return self._send(404, {"error": f"no such path {self.path!r} (POST {', '.join(ROUTES)})"})
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            return self._send(411, {"error": "a Content-Length header is needed"})
        if int(length) > self.server.config.max_request_bytes:
            self.close_connection = True  # the body is not read
            return self._send(413, {"error": f"the body is {length} bytes; this server takes at most "
                                             f"{self.server.config.max_request_bytes}"})
        try:
            raw = self.rfile.read(int(length))
        except OSError:  # the client stalled past the timeout, or went away
            self.close_connection = True
            return
        if len(raw) < int(length):
            self.close_connection = True
            return self._send(400, {"error": "the body ended before its Content-Length"})
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return self._send(400, {"error": f"the body is not JSON: {exc}"})
        try:
            payload = self.server.reward(self.path, body)
        except BadRequest as exc:
            return self._send(400, {"error": str(exc)})
        except Exception as exc:  # the PRM failed: say so in one line, keep serving
            print(f"prm-annotate reward-server: scoring failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return self._send(500, {"error": f"scoring failed: {type(exc).__name__}"})
        self._send(200, payload)
