"""Engines against real vLLM: the in-process engine and a real `vllm serve`, on a tiny random
model made in a fixture; the retry path against a local fault-injecting HTTP server; SmolLM2
(slow) through both engines."""
from __future__ import annotations

import asyncio
import gc
import json
import logging
import re
import threading
import time
import uuid
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from prm_annotate.engines import EngineConfig, GenerationRequest, make_engine, on_cpu
from prm_annotate.engines.openai_engine import OpenAIEngine
from prm_annotate.engines.vllm_engine import render_prompt
from prm_annotate.errors import UsageError

from conftest import TINY_MAX_MODEL_LEN, start_server, start_vllm_engine

QUESTION = "Tom has 3 apples. Then gets 5 more. Then loses 2. How many apples now?"


def chat(key: str, content: str = QUESTION, **kw) -> GenerationRequest:
    return GenerationRequest(key=key, messages=({"role": "user", "content": content},), **kw)


def cont(key: str, partial: str, content: str = QUESTION, **kw) -> GenerationRequest:
    return GenerationRequest(
        key=key,
        messages=({"role": "user", "content": content}, {"role": "assistant", "content": partial}),
        continue_final=True,
        **kw,
    )


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def n_tokens(tok, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False))


class EngineChecks:
    """The same checks for both engines; subclasses provide the `engine` fixture."""

    kind = ""

    def test_chat(self, engine, tiny_tokenizer):
        r = chat("c", max_tokens=12, seed=1, temperature=1.0)
        res = engine.generate([r])
        assert set(res) == {"c"}
        g = res["c"]
        assert g.ok, g.error
        assert len(g.texts) == 1 and len(g.finish_reasons) == 1
        assert g.finish_reasons[0] in ("length", "stop")
        assert g.prompt_tokens == n_tokens(tiny_tokenizer, render_prompt(tiny_tokenizer, r))
        assert 0 < g.generated_tokens <= 12
        if g.finish_reasons[0] == "length":
            assert g.generated_tokens == 12

    def test_results_are_keyed_not_ordered(self, engine):
        reqs = [chat(f"k{i}", content=f"{QUESTION} {'x' * i}", max_tokens=4, seed=i) for i in range(5)]
        res = engine.generate(list(reversed(reqs)))
        assert set(res) == {r.key for r in reqs}
        assert all(res[r.key].key == r.key and res[r.key].ok for r in reqs)

    def test_duplicate_keys_rejected(self, engine):
        with pytest.raises(ValueError, match="duplicate"):
            engine.generate([chat("d", max_tokens=2), chat("d", max_tokens=2)])

    def test_continuation_extends_the_partial_answer(self, engine, tiny_tokenizer):
        tok = tiny_tokenizer
        base = chat("base", max_tokens=8)
        partial = "Step 1: 3 + 5 = 8.\n\n"
        req = cont("cont", partial, temperature=0.0, max_tokens=8)
        # The prompt is the new-turn prompt plus the partial text: no end of turn, no new header.
        prompt = render_prompt(tok, req)
        assert prompt == render_prompt(tok, base) + partial
        assert prompt.count("<|im_start|>assistant") == 1 and not prompt.rstrip().endswith("<|im_end|>")

        res = engine.generate([req])["cont"]
        assert res.ok, res.error
        assert res.prompt_tokens == n_tokens(tok, prompt)
        # An independent path to the same open-turn prompt must give the same greedy text.
        text, prompt_tokens = self.reference_continuation(engine, req, prompt)
        assert prompt_tokens == res.prompt_tokens
        assert res.texts == [text]

    def reference_continuation(self, engine, req, prompt):
        raise NotImplementedError

    def test_n_samples(self, engine):
        g = engine.generate([chat("n", n=4, temperature=1.0, max_tokens=16, seed=7)])["n"]
        assert g.ok, g.error
        assert len(g.texts) == 4 and len(g.finish_reasons) == 4
        assert len(set(g.texts)) > 1
        assert 4 <= g.generated_tokens <= 4 * 16

    def test_seed_reproducible_across_batch_compositions(self, engine):
        target = chat("t", seed=1234, temperature=1.0, max_tokens=24, n=2)
        alone = engine.generate([target])["t"].texts
        others = [chat(f"o{i}", content=QUESTION + " and" * i, seed=i, temperature=1.0, max_tokens=8 + 4 * i)
                  for i in range(6)]
        mixed = engine.generate(others[:3] + [target] + others[3:])
        assert mixed["t"].texts == alone
        assert all(mixed[o.key].ok for o in others)
        again = engine.generate([target, *others])["t"].texts
        assert again == alone
        # ...and the seed matters (so the checks above can fail).
        assert engine.generate([replace(target, seed=4321)])["t"].texts != alone

    def test_stop_strings(self, engine):
        g = engine.generate([chat("s", stop=("a", "e"), n=4, seed=3, temperature=1.0, max_tokens=32)])["s"]
        assert g.ok, g.error
        assert not any("a" in t or "e" in t for t in g.texts)
        assert "stop" in g.finish_reasons

    def test_prefix_cache_hits_on_shared_prefixes(self, engine, tiny_tokenizer):
        # A prefix no earlier test has sent, long enough to fill several 32-token blocks.
        question = f"{uuid.uuid4().hex} {QUESTION}"
        prefix = " ".join(f"Step {i}: {i} + {i} = {2 * i}." for i in range(1, 25))
        first = engine.generate([cont("r0", prefix, content=question, max_tokens=4, seed=0)])["r0"]
        assert first.ok, first.error
        assert first.cached_prompt_tokens == 0
        # Rollout-shaped: the same problem, prefixes growing step by step.
        steps = [f"\n\nStep {j}: more." for j in range(4)]
        reqs = [cont(f"r{j + 1}", prefix + "".join(steps[: j + 1]), content=question, max_tokens=4, seed=j)
                for j in range(4)]
        res = engine.generate(reqs)
        shared = n_tokens(tiny_tokenizer, render_prompt(tiny_tokenizer, cont("x", prefix, content=question)))
        for r in reqs:
            g = res[r.key]
            assert g.ok, g.error
            assert g.cached_prompt_tokens is not None
            # Every full 32-token block of the shared prefix is served from the cache.
            assert (shared // 32 - 1) * 32 <= g.cached_prompt_tokens < g.prompt_tokens
        share = sum(res[r.key].cached_prompt_tokens for r in reqs) / sum(res[r.key].prompt_tokens for r in reqs)
        assert share > 0.7

    def test_guided_regex(self, engine):
        pattern = r"[0-9]{3}-[a-z]{2}"
        g = engine.generate([chat("g", guided_regex=pattern, n=3, seed=5, temperature=1.0, max_tokens=16)])["g"]
        assert g.ok, g.error
        assert all(re.fullmatch(pattern, t) for t in g.texts), g.texts

    def test_too_long_prompt_fails_alone(self, engine):
        long = chat("long", content="1" * (TINY_MAX_MODEL_LEN + 100), max_tokens=4)
        res = engine.generate([long, chat("fine", max_tokens=4, seed=1)])
        assert res["long"].error and res["long"].texts == []
        assert res["fine"].ok and len(res["fine"].texts) == 1


@pytest.mark.engine
class TestVLLMEngine(EngineChecks):
    kind = "vllm"

    @pytest.fixture
    def engine(self, vllm_engine):
        return vllm_engine

    def reference_continuation(self, engine, req, prompt):
        """vLLM's own chat path with `continue_final_message` (our engine renders by itself)."""
        from vllm import SamplingParams

        out = engine._llm.chat([list(req.messages)], SamplingParams(temperature=0.0, max_tokens=req.max_tokens),
                               continue_final_message=True, add_generation_prompt=False, use_tqdm=False)[0]
        return out.outputs[0].text, len(out.prompt_token_ids)

    def test_device_defaults(self, vllm_engine):
        """What the engine hands vLLM when the caller leaves the settings alone: the CPU settings
        on a CPU, vLLM's own on a GPU (where none of the CPU ones may leak in)."""
        from prm_annotate.engines.defaults import CPU_BLOCK_SIZE, CPU_KV_CACHE_GB

        args = vllm_engine.engine_args
        assert args["enable_prefix_caching"] is True
        assert args["model"].startswith("/")
        cpu_settings = {"enforce_eager": True, "enable_chunked_prefill": False, "block_size": CPU_BLOCK_SIZE,
                        "kv_cache_memory_bytes": int(CPU_KV_CACHE_GB * (1 << 30))}
        if on_cpu():
            assert {k: args.get(k) for k in cpu_settings} == cpu_settings
        else:
            assert not set(cpu_settings) & set(args) and args["gpu_memory_utilization"] == 0.9


@pytest.mark.engine
def test_same_text_in_both_engines(vllm_engine, request):
    """A per-request seed gives the same texts in process and over HTTP. Both engines run here, one
    after the other (the slot closes the in-process engine before the server starts), so the
    check does not depend on which other tests ran."""
    target = chat("t", seed=1234, temperature=1.0, max_tokens=24, n=2)
    reference = vllm_engine.generate([target])["t"].texts
    openai_engine = request.getfixturevalue("openai_engine")
    assert openai_engine.generate([target])["t"].texts == reference


@pytest.mark.engine
class TestOpenAIEngineOnVLLMServer(EngineChecks):
    kind = "openai"

    @pytest.fixture
    def engine(self, openai_engine):
        return openai_engine

    @pytest.fixture(autouse=True)
    def _server(self, vllm_server):
        self.server = vllm_server

    def reference_continuation(self, engine, req, prompt):
        """The locally rendered open-turn prompt through the plain completions endpoint."""
        import httpx

        r = httpx.post(self.server.base_url + "/completions", timeout=60, json={
            "model": engine.model, "prompt": prompt, "max_tokens": req.max_tokens, "temperature": 0.0,
            "add_special_tokens": False})
        r.raise_for_status()
        data = r.json()
        return data["choices"][0]["text"], data["usage"]["prompt_tokens"]

    def test_make_engine_picks_openai(self, vllm_server):
        engine = make_engine(EngineConfig(model="tiny", base_url=vllm_server.base_url))
        assert isinstance(engine, OpenAIEngine)
        assert engine.generate([chat("m", max_tokens=3, seed=0)])["m"].ok


CLEAN_EXIT_SCRIPT = """
import sys
from prm_annotate.engines import GenerationRequest, exit_process
from prm_annotate.engines.vllm_engine import VLLMEngine

if __name__ == "__main__":
    engine = VLLMEngine(sys.argv[1], start_timeout=300)
    res = engine.generate([GenerationRequest(key="a", messages=({"role": "user", "content": "hi"},),
                                             max_tokens=4, seed=1)])
    engine.close()
    print("RESULT", res["a"].ok, len(res["a"].texts))
    exit_process(7)
"""


@pytest.mark.engine
def test_engine_process_keeps_stdout_clean_and_leaves_nothing_behind(heavy, tiny_model_dir, tmp_path):
    """What a CLI command does: run, close, exit_process. stdout must hold only our output (stages
    write JSONL there), the exit status must be ours, and no vLLM process may outlive it."""
    import os
    import subprocess
    import sys

    import psutil

    heavy.release()  # one engine at a time
    script = tmp_path / "run_engine.py"
    script.write_text(CLEAN_EXIT_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), str(tiny_model_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    assert proc.returncode == 7, err[-3000:]
    assert out == "RESULT True 1\n"

    def left_behind():
        found = []
        for p in psutil.process_iter(["status"]):
            try:
                if os.getsid(p.pid) == proc.pid and p.info["status"] != psutil.STATUS_ZOMBIE:
                    found.append(p)
            except (ProcessLookupError, psutil.Error):
                pass
        return found

    deadline = time.monotonic() + 15
    while left_behind() and time.monotonic() < deadline:
        time.sleep(0.5)
    leftovers = left_behind()
    for p in leftovers:
        p.kill()
    assert not leftovers, [p.info for p in leftovers]


KILLED_SCRIPT = """
import sys, time
from testing.vllm_server import VLLMServer
from prm_annotate.engines.vllm_engine import VLLMEngine

if __name__ == "__main__":
    if sys.argv[2] == "engine":
        engine = VLLMEngine(sys.argv[1], start_timeout=300)
    else:
        server = VLLMServer(sys.argv[1], max_model_len=2048).start(timeout=300)
    print("READY", flush=True)
    time.sleep(600)
"""


@pytest.mark.engine
@pytest.mark.parametrize("kind", ["engine", "server"])
def test_vllm_processes_die_with_a_sigkilled_owner(heavy, tiny_model_dir, tmp_path, kind):
    """`kill -9` of the process holding an in-process engine or a `vllm serve` (and only it: a cron
    job's kill, the OOM killer, a Ray actor) must not leave vLLM's processes running."""
    import os
    import signal
    import subprocess
    import sys

    import psutil

    heavy.release()
    script = tmp_path / "hold_engine.py"
    script.write_text(KILLED_SCRIPT)
    # The script imports the test equipment (testing/) from the repository root.
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, str(script), str(tiny_model_dir), kind], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True, env=env)
    try:
        assert proc.stdout.readline() == "READY\n"
        children = psutil.Process(proc.pid).children(recursive=True)
        engine_procs = [p for p in children if "reaper.py" not in " ".join(p.cmdline())]
        assert any(" ".join(p.cmdline()).startswith("VLLM::EngineCore") for p in engine_procs)
        proc.send_signal(signal.SIGKILL)  # the owner only, not its process group
        proc.wait()
        gone, alive = psutil.wait_procs(engine_procs, timeout=15)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left in its group
        except ProcessLookupError:
            pass
    for p in alive:
        p.kill()
    assert not alive, [" ".join(p.cmdline()) for p in alive]


# -- retry path: a local fault-injecting server ------------------------------------------------

class FaultServer:
    """OpenAI-shaped server on 127.0.0.1 whose behaviour is chosen by the user message:
    "ok", "500", "429", "hang", "drop", "badjson", "nochoices", "badusage", "400", "flaky:N" (N
    failures, then success), "slow" (0.1 s, for the concurrency bound), "hold:NAME" (answers once
    the test calls `release(NAME)`: the test decides the order in which requests finish). Counts
    attempts per message and the requests it is answering at once (`inflight`, `max_inflight`)."""

    def __init__(self) -> None:
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


@pytest.fixture
def fault_server():
    with FaultServer() as server:
        yield server


SECRET = "sk-test-5ecret-value"


@pytest.fixture
def fault_engine(fault_server, monkeypatch):
    monkeypatch.setenv("PRM_TEST_KEY", SECRET)
    engine = OpenAIEngine(fault_server.base_url, "m", api_key_env="PRM_TEST_KEY", concurrency=4,
                          timeout=0.5, max_attempts=3, backoff_initial=0.01, backoff_max=0.05)
    yield engine
    engine.close()


@pytest.mark.parametrize("fault", ["500", "429", "hang", "drop", "badjson", "nochoices", "badusage"])
def test_faults_are_retried_then_reported_failed(fault_engine, fault_server, fault, caplog):
    caplog.set_level(logging.DEBUG)
    res = fault_engine.generate([chat("f", content=fault, max_tokens=4), chat("ok", content="ok", n=2)])
    failed = res["f"]
    assert not failed.ok and failed.texts == [] and failed.finish_reasons == []
    assert "after 3 attempt(s)" in failed.error
    assert fault_server.attempts[fault] == 3
    # The healthy request in the same batch is unaffected.
    assert res["ok"].texts == ["answer 0", "answer 1"]
    assert fault_server.attempts["ok"] == 1
    assert SECRET not in failed.error and SECRET not in caplog.text


def test_fault_then_success(fault_engine, fault_server):
    g = fault_engine.generate([chat("f", content="flaky:2", n=2)])["f"]
    assert g.ok, g.error
    assert g.texts == ["answer 0", "answer 1"] and g.finish_reasons == ["stop", "stop"]
    assert (g.prompt_tokens, g.cached_prompt_tokens, g.generated_tokens) == (11, 8, 4)
    assert fault_server.attempts["flaky:2"] == 3


def test_client_errors_are_not_retried(fault_engine, fault_server):
    g = fault_engine.generate([chat("f", content="400")])["f"]
    assert not g.ok and "HTTP 400" in g.error and "after 1 attempt(s)" in g.error
    assert fault_server.attempts["400"] == 1


def test_control_characters_of_a_server_error_are_escaped(fault_engine, caplog):
    g = fault_engine.generate([chat("f", content="nul")])["f"]
    assert not g.ok and "bad\\x00request\\x1b[31m" in g.error
    assert "\x00" not in g.error + caplog.text and "\x1b" not in g.error + caplog.text


def test_api_key_sent_and_never_shown(fault_engine, fault_server):
    res = fault_engine.generate([chat("a", content="500")])["a"]
    assert fault_server.auth and all(a == f"Bearer {SECRET}" for a in fault_server.auth)
    assert "***" in res.error and SECRET not in res.error


def test_missing_api_key_env_is_usage_error(monkeypatch):
    monkeypatch.delenv("PRM_TEST_ABSENT_KEY", raising=False)
    with pytest.raises(UsageError, match="PRM_TEST_ABSENT_KEY"):
        OpenAIEngine("http://127.0.0.1:9/v1", "m", api_key_env="PRM_TEST_ABSENT_KEY")


def test_concurrency_is_bounded(fault_server):
    engine = OpenAIEngine(fault_server.base_url, "m", concurrency=3, timeout=5, max_attempts=1)
    res = engine.generate([chat(f"s{i}", content="slow") for i in range(12)])
    assert all(g.ok for g in res.values())
    assert 2 <= fault_server.max_inflight <= 3


# -- streaming over HTTP: submit / poll / in_flight ---------------------------------------------

@pytest.fixture
def stream_engine(fault_server):
    engine = OpenAIEngine(fault_server.base_url, "m", concurrency=3, timeout=30, max_attempts=1)
    yield engine
    engine.close()


def engine_threads(before: frozenset = frozenset()) -> list[threading.Thread]:
    """The engines' loop threads alive now, but for those in `before`."""
    return [t for t in threading.enumerate() if t.name == "openai-engine" and t not in before]


def test_streaming_keeps_concurrency_outstanding_without_waves(stream_engine, fault_server):
    """3 x concurrency requests, finished one at a time by the test: every finished request's slot
    goes to the next waiting one while the rest of its wave is still held at the server, so
    exactly `concurrency` requests are outstanding until fewer than that remain."""
    c, total = stream_engine.concurrency, 3 * stream_engine.concurrency
    stream_engine.submit([chat(f"k{i}", content=f"hold:{i}") for i in range(total)])
    assert stream_engine.in_flight() == total
    for i in range(total):
        arrived = min(i + c, total)
        fault_server.wait_until(lambda: len(fault_server.started) == arrived
                                and fault_server.inflight == arrived - i, f"{arrived} requests",
                                settle=0.1)
        # First come, first served: the server has the oldest `concurrency` of the unfinished
        # (the order of arrival within them is the network's).
        assert sorted(fault_server.started) == sorted(f"hold:{j}" for j in range(arrived))
        fault_server.release(str(i))
        assert [g.key for g in stream_engine.poll()] == [f"k{i}"]
        assert stream_engine.in_flight() == total - i - 1
    assert fault_server.max_inflight == c
    assert stream_engine.poll() == []


def test_streaming_returns_results_as_they_finish(stream_engine, fault_server):
    """A request submitted after a slow one, while it is in flight, comes back first."""
    stream_engine.submit([chat("slow", content="hold:slow")])
    fault_server.wait_until(lambda: fault_server.started == ["hold:slow"], "the slow request")
    stream_engine.submit([chat("fast", content="ok", n=2)])
    (fast,) = stream_engine.poll()
    assert fast.key == "fast" and fast.texts == ["answer 0", "answer 1"]
    assert stream_engine.in_flight() == 1
    # A key still in flight is refused, and nothing is sent for it.
    with pytest.raises(ValueError, match="duplicate request key 'slow'"):
        stream_engine.submit([chat("slow", content="hold:slow")])
    with pytest.raises(ValueError, match="duplicate request key 'x'"):
        stream_engine.submit([chat("x"), chat("x")])
    assert stream_engine.in_flight() == 1
    with pytest.raises(RuntimeError, match="idle engine"):
        stream_engine.generate([chat("other")])
    fault_server.release("slow")
    (slow,) = stream_engine.poll()
    assert slow.key == "slow" and slow.ok
    assert stream_engine.in_flight() == 0 and stream_engine.poll() == []
    assert fault_server.attempts["hold:slow"] == 1
    # Once polled, a key may be used again.
    assert stream_engine.generate([chat("slow", content="ok")])["slow"].ok


def test_a_cancelled_request_is_never_returned(stream_engine, fault_server):
    """Over HTTP a cancelled request runs to its end on the server; its answer is dropped."""
    stream_engine.submit([chat("spare", content="hold:spare"), chat("kept", content="ok")])
    fault_server.wait_until(lambda: "hold:spare" in fault_server.started, "the held request")
    stream_engine.cancel(["spare", "unknown"])
    assert stream_engine.in_flight() == 1
    (kept,) = stream_engine.poll()
    assert kept.key == "kept" and kept.ok
    with pytest.raises(ValueError, match="duplicate request key 'spare'"):  # taken until its answer came
        stream_engine.submit([chat("spare", content="ok")])
    fault_server.release("spare")
    assert stream_engine.in_flight() == 0 and stream_engine.poll() == []
    # Its answer is dropped when it comes; then its key is free again.
    for _ in range(600):  # only bounds a broken engine
        try:
            result = stream_engine.generate([chat("spare", content="ok")])["spare"]
            break
        except ValueError:
            time.sleep(0.05)
    assert result.ok and result.texts == ["answer 0"]


def test_close_leaves_no_thread(fault_server):
    before = frozenset(engine_threads())
    engine = OpenAIEngine(fault_server.base_url, "m", concurrency=2, timeout=30, max_attempts=1)
    assert engine_threads(before) == []  # started by the first submit, not before
    engine.submit([chat("h", content="hold:h"), chat("o", content="ok")])
    fault_server.wait_until(lambda: "hold:h" in fault_server.started, "the held request")
    assert len(engine_threads(before)) == 1
    engine.close()  # with a request still in flight: it is cancelled
    assert engine_threads(before) == [] and engine.in_flight() == 0 and engine.poll() == []
    engine.close()  # idempotent
    # A closed engine starts afresh on the next submit, and closes again.
    assert engine.generate([chat("a", content="ok")])["a"].ok
    assert len(engine_threads(before)) == 1
    engine.close()
    assert engine_threads(before) == []
    # An engine dropped without close() stops its thread too.
    engine = OpenAIEngine(fault_server.base_url, "m")
    assert engine.generate([chat("b", content="ok")])["b"].ok
    (thread,) = engine_threads(before)
    del engine
    gc.collect()
    assert not thread.is_alive()


def test_generate_inside_a_running_event_loop(stream_engine):
    async def caller():
        return stream_engine.generate([chat("a", content="ok"), chat("b", content="ok", n=2)])

    res = asyncio.run(caller())
    assert res["a"].texts == ["answer 0"] and res["b"].texts == ["answer 0", "answer 1"]


def test_engine_failure_is_raised_by_poll(stream_engine, fault_server):
    """A request the engine cannot even send (its body is not JSON) is a fault of the caller or the
    engine, not a failed request: poll raises it, and every call after it, until close()."""
    unsendable = GenerationRequest(key="bad", messages=({"role": "user", "content": {1, 2}},))
    stream_engine.submit([unsendable])
    with pytest.raises(TypeError, match="JSON serializable"):
        stream_engine.poll()
    with pytest.raises(RuntimeError, match="failed earlier"):
        stream_engine.submit([chat("a", content="ok")])
    with pytest.raises(RuntimeError, match="failed earlier"):
        stream_engine.poll()
    stream_engine.close()
    assert stream_engine.generate([chat("a", content="ok")])["a"].ok


def test_unreachable_server_fails_cleanly():
    from testing.vllm_server import free_port

    engine = OpenAIEngine(f"http://127.0.0.1:{free_port()}", "m", max_attempts=2, backoff_initial=0.01,
                          backoff_max=0.02, timeout=2)
    g = engine.generate([chat("u")])["u"]
    assert not g.ok and "connection error" in g.error and "after 2 attempt(s)" in g.error


def test_continuation_body_uses_vllm_chat_extension():
    engine = OpenAIEngine("http://127.0.0.1:9/v1", "m")
    body = engine.body(cont("c", "Step 1: 3 + 5 = 8.\n\n", seed=4, stop=("\n\n",), guided_regex="[0-9]+"))
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert body["messages"][-1] == {"role": "assistant", "content": "Step 1: 3 + 5 = 8.\n\n"}
    assert body["seed"] == 4 and body["stop"] == ["\n\n"]
    assert body["structured_outputs"] == {"regex": "[0-9]+"}
    assert "continue_final_message" not in engine.body(chat("p"))
    with pytest.raises(ValueError):
        engine.body(GenerationRequest(key="x", messages=({"role": "user", "content": "hi"},), continue_final=True))


def test_engine_config_and_cli_options():
    from prm_annotate.cli.engine_options import build_config

    cfg = build_config(model="m", base_url=None, concurrency=None, kv_cache_gb=2.0, request_timeout=30.0)
    assert cfg.kind == "vllm" and cfg.kv_cache_gb == 2.0 and cfg.concurrency == 16 and cfg.timeout == 30.0
    assert build_config(model="m", base_url="http://h/v1").kind == "openai"
    # The dtype each run records: float32 on CPU unless asked; a server's own dtype is not ours to say.
    assert cfg.describe()["dtype"] == ("float32" if on_cpu() else "auto")
    assert build_config(model="m", dtype="bfloat16").describe()["dtype"] == "bfloat16"
    assert "dtype" not in build_config(model="m", base_url="http://h/v1").describe()
    with pytest.raises(UsageError, match="concurrency"):
        build_config(model="m", concurrency=0)


def test_engine_defaults_come_from_one_place():
    """`engines/defaults.py` is the one source: the CLI's options, `EngineConfig` and `VLLMEngine`
    default to its values, and the CPU settings go in on a CPU only, whatever machine runs this."""
    import dataclasses
    import inspect

    from prm_annotate.cli.engine_options import EngineOptions
    from prm_annotate.engines import defaults
    from prm_annotate.engines.vllm_engine import VLLMEngine

    assert EngineOptions(model="m").config() == EngineConfig(model="m")
    engine_defaults = {f.name: f.default for f in dataclasses.fields(defaults.VLLMSettings)}
    engine_defaults["start_timeout"] = inspect.signature(VLLMEngine).parameters["start_timeout"].default
    config_defaults = {name: f.default for name, f in EngineConfig.model_fields.items() if name in engine_defaults}
    assert len(config_defaults) >= 8 and engine_defaults == {**engine_defaults, **config_defaults}
    # What make_engine hands the engine: every setting the config holds, none it does not.
    settings = EngineConfig(model="m", kv_cache_gb=2.0, seed=3).vllm_settings()
    assert set(settings) == set(config_defaults) - {"start_timeout"}
    assert defaults.VLLMSettings(**settings) == defaults.VLLMSettings(kv_cache_gb=2.0, seed=3)
    with pytest.raises(TypeError, match="blocksize"):
        VLLMEngine("/m", blocksize=16)  # a misspelt setting, before any engine starts

    cpu_only = {"enforce_eager": True, "kv_cache_memory_bytes": int(defaults.CPU_KV_CACHE_GB * (1 << 30)),
                "enable_chunked_prefill": False, "block_size": defaults.CPU_BLOCK_SIZE}
    on_a_cpu = defaults.vllm_args("/m", cpu=True)
    assert on_a_cpu["dtype"] == "float32" and {k: on_a_cpu[k] for k in cpu_only} == cpu_only
    on_a_gpu = defaults.vllm_args("/m", cpu=False)
    assert on_a_gpu["dtype"] == "auto" and not set(cpu_only) & set(on_a_gpu)
    assert on_a_gpu["gpu_memory_utilization"] == defaults.GPU_MEMORY_UTILIZATION
    # What the user says wins on either device.
    for cpu in (True, False):
        mine = defaults.vllm_args("/m", cpu=cpu, dtype="bfloat16", kv_cache_gb=2, block_size=16,
                                  enforce_eager=False, enable_chunked_prefill=True)
        assert (mine["dtype"], mine["kv_cache_memory_bytes"], mine["block_size"], mine["enforce_eager"],
                mine["enable_chunked_prefill"]) == ("bfloat16", 2 << 30, 16, False, True)


def test_test_server_gets_the_engine_settings(tiny_model_dir):
    """The `vllm serve` the tests start: vLLM's own server parser reads its command line back to
    the in-process engine's settings (built, not started)."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from prm_annotate.engines.defaults import vllm_args
    from testing.vllm_server import VLLMServer

    server = VLLMServer(tiny_model_dir, max_model_len=2048, kv_cache_gb=0.25)
    parsed = make_arg_parser(FlexibleArgumentParser()).parse_args(server.args[3:])
    expected = vllm_args(str(tiny_model_dir), cpu=on_cpu(), max_model_len=2048, kv_cache_gb=0.25)
    assert {k: getattr(parsed, k) for k in expected} == expected
    assert parsed.enable_prompt_tokens_details and parsed.port == server.port


def test_missing_local_model_path_is_usage_error(tmp_path):
    from prm_annotate.engines.vllm_engine import VLLMEngine

    with pytest.raises(UsageError, match="does not exist"):
        VLLMEngine(str(tmp_path / "nope"))


# -- SmolLM2, the real small model --------------------------------------------------------------

def _check_smollm2(engine):
    res = engine.generate([
        chat("q", content="What is the capital of France?", temperature=0.0, max_tokens=24),
        cont("c", "The capital of France is", content="What is the capital of France?",
             temperature=0.0, max_tokens=8),
    ])
    assert res["q"].ok and res["c"].ok, (res["q"].error, res["c"].error)
    assert "Paris" in res["q"].texts[0], res["q"].texts
    # The continuation goes on with the sentence (it does not restart the answer).
    assert "Paris" in res["c"].texts[0] and not res["c"].texts[0].lstrip().startswith("The capital")


@pytest.mark.slow
@pytest.mark.engine
def test_smollm2_in_process(heavy, smollm2_dir):
    """The default dtype: on CPUs with AVX-512-BF16/AMX, bfloat16 answered this with nonsense."""
    engine = heavy.get("vllm:smollm2", lambda: start_vllm_engine(smollm2_dir, max_model_len=2048),
                       lambda e: e.close())
    assert engine.engine_args["dtype"] == ("float32" if on_cpu() else "auto")
    _check_smollm2(engine)


@pytest.mark.slow
@pytest.mark.engine
def test_smollm2_server(heavy, smollm2_dir, tmp_path_factory):
    server = heavy.get("server:smollm2",
                       lambda: start_server(smollm2_dir, "smollm2", tmp_path_factory.getbasetemp(),
                                            max_model_len=2048),
                       lambda s: s.stop())
    assert server.args[server.args.index("--dtype") + 1] == ("float32" if on_cpu() else "auto")
    _check_smollm2(OpenAIEngine(server.base_url, "smollm2", timeout=120, max_attempts=2))


def test_prepare_smollm2_is_idempotent_and_crash_safe(tmp_path, monkeypatch):
    """The cache logic, with the (slow) conversion replaced by a stub; the real conversion is
    exercised by `smollm2_dir`."""
    from prm_annotate.engines import local_models as models

    calls = []

    def fake_convert(gguf, out):
        calls.append(out)
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(models, "convert_gguf", fake_convert)
    target = tmp_path / "smol"
    target.mkdir()
    (target / "partial.bin").write_text("left by a crash")  # no marker: must be rebuilt
    assert models.prepare_smollm2(target) == target.resolve()
    assert (target / models.MARKER).is_file() and not (target / "partial.bin").exists()
    assert models.prepare_smollm2(target) == target.resolve()
    assert len(calls) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".smol.")]  # no temp leftovers
