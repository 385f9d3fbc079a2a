"""An OpenAI-shaped HTTP server on 127.0.0.1 that fails on demand, for the HTTP engine's retry paths."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FaultServer:
    """OpenAI-shaped server on 127.0.0.1 whose behaviour is chosen by the user message:
    "ok", "500", "429", "hang", "drop", "badjson", "nochoices", "badusage", "400", "flaky:N" (N
    failures, then success), "slow" (0.1 s, for the concurrency bound), "hold:NAME" (answers once
    the test calls `release(NAME)`: the test decides the order in which requests finish). Counts
    attempts per message and the requests it is answering at once (`inflight`, `max_inflight`).
    GET /v1/models lists `models`."""

    def __init__(self, models: tuple[str, ...] = ("m",)) -> None:
        self.models = models  # what GET /v1/models lists (the engine's check before any request)
        self.attempts: dict[str, int] = {}
        self.auth: list[str | None] = []
        self.inflight = 0
        self.max_inflight = 0
        self.started: list[str] = []  # messages in the order their requests arrived
        self.lock = threading.Condition()
        self.gates: dict[str, threading.Event] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                self.answering = False  # not a request `inflight` counts
                if self.path != "/v1/models":
                    return self.send(404, '{"error": "not found"}')
                return self.send(200, json.dumps({"object": "list", "data": [{"id": m} for m in outer.models]}))

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                what = body["messages"][-1]["content"]
                with outer.lock:
                    outer.attempts[what] = outer.attempts.get(what, 0) + 1
                    attempt = outer.attempts[what]
                    outer.auth.append(self.headers.get("Authorization"))
                    outer.inflight += 1
                    outer.max_inflight = max(outer.max_inflight, outer.inflight)
                    outer.started.append(what)
                    outer.lock.notify_all()
                self.answering = True
                try:
                    self.answer(what, attempt, body)
                finally:
                    self.done()

            def done(self):
                # Counted before the answer is written: the client may start its next request as
                # soon as it has read this one, and the server must not count both at once.
                if self.answering:
                    self.answering = False
                    with outer.lock:
                        outer.inflight -= 1
                        outer.lock.notify_all()

            def answer(self, what, attempt, body):
                if what.startswith("flaky:"):
                    what = "500" if attempt <= int(what.split(":")[1]) else "ok"
                if what == "500":
                    # Echo the auth header, as a careless server might: the client must redact it.
                    return self.send(500, f"internal error; got {self.headers.get('Authorization')}")
                if what == "429":
                    return self.send(429, "slow down", headers={"Retry-After": "0"})
                if what == "400":
                    return self.send(400, '{"error": "prompt too long"}')
                if what == "hang":
                    time.sleep(1.5)
                    return self.send(200, "{}")
                if what == "drop":
                    self.close_connection = True
                    return  # no answer at all: the client sees the connection close
                if what == "nul":  # a broken server's error body with control characters
                    return self.send(400, "bad\x00request\x1b[31m")
                if what == "badjson":
                    return self.send(200, '{"choices": [')
                if what == "nochoices":
                    return self.send(200, '{"choices": []}')
                if what.startswith("hold:"):
                    outer.gate(what[5:]).wait()
                if what == "slow":
                    time.sleep(0.1)
                n = body.get("n", 1)
                usage = {"prompt_tokens": 11, "completion_tokens": 2 * n, "prompt_tokens_details": {"cached_tokens": 8}}
                if what == "badusage":
                    usage["prompt_tokens"] = "many"
                return self.send(200, json.dumps({
                    "choices": [{"index": i, "message": {"role": "assistant", "content": f"answer {i}"},
                                 "finish_reason": "stop"} for i in range(n)],
                    "usage": usage,
                }))

            def send(self, status, text, headers=None):
                self.done()
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def gate(self, name: str) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(name, threading.Event())

    def release(self, name: str) -> None:
        self.gate(name).set()

    def wait_until(self, condition, what: str, *, settle: float = 0.0) -> None:
        """Wait for `condition()` (checked under the lock); the timeout only keeps a broken engine
        from hanging the test run. With `settle`, the condition must still hold that much later:
        a request the client should not have sent has had time to arrive (this can miss a broken
        engine on a slow day, never fail a correct one)."""
        with self.lock:
            if not self.lock.wait_for(condition, timeout=30):
                raise AssertionError(f"the server never saw {what}")
        if settle:
            time.sleep(settle)
            with self.lock:
                assert condition(), f"the server saw {what}, then more"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        with self.lock:
            for gate in self.gates.values():
                gate.set()
        self.httpd.shutdown()
        self.httpd.server_close()
