"""The OpenAI-compatible engine: the engine checks against a real `vllm serve`, and the retry,
streaming and cancel paths against a local fault-injecting server."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time

import pytest

from prm_annotate.engines import EngineConfig, GenerationRequest, make_engine
from prm_annotate.engines.openai_engine import OpenAIEngine
from prm_annotate.errors import UsageError
from testing.engine_checks import EngineChecks, chat, cont
from testing.fault_server import FaultServer


@pytest.mark.engine
class TestOpenAIEngineOnVLLMServer(EngineChecks):
    kind = "openai"
    engine_fixture = "openai_engine"

    @pytest.fixture(autouse=True)
    def _server(self, vllm_server):
        self.server = vllm_server

    def reference_continuation(self, engine, req, prompt):
        """The locally rendered open-turn prompt through the plain completions endpoint."""
        import httpx

        r = httpx.post(self.server.base_url + "/completions", timeout=60, json={
            "model": engine.model, "prompt": prompt, "max_tokens": req.sampling.max_tokens, "temperature": 0.0,
            "add_special_tokens": False})
        r.raise_for_status()
        data = r.json()
        return data["choices"][0]["text"], data["usage"]["prompt_tokens"]

    def test_make_engine_picks_openai(self, vllm_server):
        engine = make_engine(EngineConfig(model="tiny", base_url=vllm_server.base_url))
        assert isinstance(engine, OpenAIEngine)
        assert engine.generate([chat("m", max_tokens=3, seed=0)])["m"].ok



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
    # A refused connection after every attempt is the server gone, not one request failing: the
    # engine fails (UsageError, exit 2), naming the address and what to check.
    with pytest.raises(UsageError, match=r"stopped answering \(connection error .*2 attempt\(s\)\): is the server up"):
        engine.generate([chat("u")])
    with pytest.raises(UsageError, match="cannot reach the server at .*: is the server up at this address"):
        engine.check()


def test_continuation_body_uses_vllm_chat_extension():
    engine = OpenAIEngine("http://127.0.0.1:9/v1", "m")
    body = engine.body(cont("c", "Step 1: 3 + 5 = 8.\n\n", seed=4, stop=("\n\n",), guided_regex="[0-9]+"))
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert body["messages"][-1] == {"role": "assistant", "content": "Step 1: 3 + 5 = 8.\n\n"}
    assert body["seed"] == 4 and body["stop"] == ["\n\n"]
    assert body["structured_outputs"] == {"regex": "[0-9]+"}
    assert "continue_final_message" not in engine.body(chat("p"))
    # top_k is vLLM's, not OpenAI's: sent only when asked for
    assert "top_k" not in engine.body(chat("p")) and engine.body(chat("p", top_k=20))["top_k"] == 20
    with pytest.raises(ValueError):
        engine.body(GenerationRequest(key="x", messages=({"role": "user", "content": "hi"},), continue_final=True))




def test_logprobs_are_asked_only_when_wanted_and_read_into_offsets():
    from dataclasses import replace

    from prm_annotate.engines.openai_engine import RetryableError

    engine = OpenAIEngine("http://127.0.0.1:9/v1", "m")
    assert "logprobs" not in engine.body(chat("p"))
    wanted = replace(chat("p"), logprobs=True)
    assert engine.body(wanted)["logprobs"] is True
    choice = {"index": 0, "finish_reason": "stop", "message": {"content": "Hi é𝑥!"},
              "logprobs": {"content": [{"token": "Hi", "logprob": -0.5}, {"token": " é", "logprob": -1.0},
                                       {"token": "\ufffd", "logprob": -2.0}, {"token": "\ufffd", "logprob": -2.5},
                                       {"token": "!", "logprob": -0.1}]}}
    usage = {"prompt_tokens": 3, "completion_tokens": 5}
    result = engine._parse(wanted, {"choices": [choice], "usage": usage})
    assert result.token_logprobs == [[(0, -0.5), (2, -1.0), (None, -2.0), (None, -2.5), (5, -0.1)]]
    assert engine._parse(chat("p"), {"choices": [choice], "usage": usage}).token_logprobs == []
    with pytest.raises(RetryableError, match="logprobs"):  # asked for and missing: malformed, retried
        engine._parse(wanted, {"choices": [{**choice, "logprobs": None}], "usage": usage})


def test_a_request_key_is_read_as_its_record_id_once():
    """The scheduler's job number and the stage's NUL-joined parts were glued to the id in the log
    ("request 0arith-test-0/0 0 failed"): the id once, the request's place after it."""
    from prm_annotate.engines.openai_engine import readable_key

    assert readable_key("12\x1farith-test-0/0\x000\x001") == "arith-test-0/0 (0 1)"
    assert readable_key("r/1\x00votes") == "r/1 (votes)" and readable_key("plain") == "plain"


def test_the_check_names_the_served_names_and_how_to_serve_under_another(fault_server):
    OpenAIEngine(fault_server.base_url, "m").check()  # served: nothing said
    with pytest.raises(UsageError) as wrong:
        OpenAIEngine(fault_server.base_url, "judge").check()
    said = str(wrong.value)
    assert said.startswith(f"the server at {fault_server.base_url} serves 'm', not 'judge': give --model m")
    assert "--served-model-name judge" in said and "--reasoning" not in said
    with pytest.raises(UsageError, match=r"gives no list of models at .*/v1/models \(HTTP 404"):
        OpenAIEngine(fault_server.base_url.removesuffix("/v1") + "/api/v1", "m").check()
