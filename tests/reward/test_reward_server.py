"""The reward server's protocol and its conduct as a network service, on a pure-logic scorer (the
same RewardScorer and score stage, a stand-in PRM): OpenRLHF's request and answer (through
OpenRLHF's own client when it is installed, testing/rl_clients.py), verl's loader of
`compute_score`, the aggregates, malformed requests, the bearer key, the size bounds, 50 clients at
once, a stalled client, a failing PRM. The real PRM end to end: test_reward_world.py."""
from __future__ import annotations

import math
import os
import re
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

import prm_annotate.reward.verl as verl_module
from prm_annotate.prm.checkpoint import PRMFormat, prm_token_ids
from prm_annotate.reward import RewardScorer, RewardServer, ServerConfig, TextRules
from prm_annotate.reward.protocols import BadRequest, openrlhf_items, problem_of_prompt
from testing import rl_clients


class StandInPRM:
    """A Scorer: a whitespace tokenizer, P(right) of a step from its words' lengths (seen in the text
    the score stage builds, so a reward follows the response); counts engine calls."""

    kind = "stand-in"
    model = "stand-in"
    max_model_len = 400
    format = PRMFormat(step_tag="<extra_0>", system_prompt=None)
    tokenizer = SimpleNamespace(chat_template=None,
                                encode=lambda text, add_special_tokens=False: re.findall(r"<extra_0>|[^\s<]+", text))

    def __init__(self, fail: bool = False):
        self.calls, self.fail = 0, fail

    def token_ids(self, problem, steps):
        return prm_token_ids(self.tokenizer, self.format, problem, steps)

    def step_probabilities(self, prompts):
        self.calls += 1
        if self.fail:
            raise RuntimeError("the engine died")
        out = []
        for ids in prompts:
            scores, words = [], 0
            for tok in ids:
                if tok == "<extra_0>":
                    scores.append(1 / (1 + math.exp(-(words % 7 - 3))))
                    words = 0
                else:
                    words += len(tok)
            out.append(scores)
        return out

    def settings(self):
        return {}

    def record(self):
        return {"scorer": self.kind}

    def close(self):
        pass


def responses(n: int) -> list[tuple[str, list[str]]]:
    return [(f"Problem {i}: add {i} and {i + 1}.", [f"{i} + {i + 1} = {2 * i + 1}." * (1 + i % 3), "So it is odd.",
                                                      f"The answer is \\boxed{{{2 * i + 1}}}."][: 1 + i % 3])
            for i in range(n)]


def reference(prm: StandInPRM, items: list[tuple[str, list[str]]]) -> list[list[float]]:
    from prm_annotate.records import Response
    from prm_annotate.stages.score import ScoreStage

    outs = ScoreStage(prm).process([Response(id=str(i), problem=p, steps=s) for i, (p, s) in enumerate(items)])
    return [o.records[0].dump()["prm"]["scores"] for o in outs]


@pytest.fixture
def serve():
    started = []

    def start(prm=None, **config):
        prm = prm or StandInPRM()
        server = RewardServer(RewardScorer(prm), ServerConfig(port=0, **config))
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        started.append(server)
        return server, prm

    yield start
    for s in started:
        s.shutdown()
        s.server_close()


def openrlhf_payload(items):
    prompts = [p for p, _ in items]
    return {"query": [p + "\n\n".join(s) + "<|im_end|>" for p, s in items], "prompts": prompts,
            "labels": ["x"] * len(items)}


def test_a_batch_of_256_is_one_request_and_one_engine_call(serve):
    server, prm = serve()
    items = responses(256)
    expected = reference(StandInPRM(), items)
    reply = httpx.post(server.url + "/get_reward", json=openrlhf_payload(items), timeout=60)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert prm.calls == 1
    assert body["step_rewards"] == expected
    assert body["rewards"] == body["scores"] == [min(s) for s in expected]
    assert body["extra_logs"]["prm_steps"] == [float(len(s)) for s in expected]
    assert body["errors"] == [None] * 256 and body["aggregate"] == "min"
    for name, fn in (("product", math.prod), ("last", lambda s: s[-1])):
        got = httpx.post(server.url + "/get_reward", json={**openrlhf_payload(items), "aggregate": name}).json()
        assert got["rewards"] == [fn(s) for s in expected]
    assert len({round(r, 6) for r in body["rewards"]}) > 3  # the rewards follow the responses


def test_openrlhf_reading_of_queries():
    rules = TextRules()
    chat = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    assert problem_of_prompt(chat) == "What is 2+2?" and problem_of_prompt("  What is 2+2? ") == "What is 2+2?"
    items, aggregate = openrlhf_items({"query": [chat + "2+2=4.\n\nSo 4.<|im_end|><|endoftext|>", "other text"],
                                       "prompts": [chat, "a prompt"], "labels": [None, None]}, rules, 10)
    assert items[0].problem == "What is 2+2?" and items[0].steps == ["2+2=4.", "So 4."]
    assert items[1].startswith("the query does not start with its prompt") and aggregate is None
    cut, _ = openrlhf_items({"query": [chat + "2+2=4."], "prompts": ["<|im_start|>system\nBe  brief."]}, rules, 10)
    assert cut[0].problem == "What is 2+2?" and cut[0].steps == ["2+2=4."]  # a prompt the trainer re-decoded
    for body, reason in (([], "JSON object"), ({"query": "x", "prompts": []}, "`query` must be a list"),
                         ({"query": ["a"], "prompts": ["a", "b"]}, "2 entries for 1"),
                         ({"query": [], "prompts": []}, "no responses"),
                         ({"query": ["a"] * 11, "prompts": ["a"] * 11}, "at most 10"),
                         ({"query": ["a"], "prompts": ["a"], "labels": [1, 2]}, "`labels`"),
                         ({"query": ["a"], "prompts": ["a"], "aggregate": "mean"}, "`aggregate`")):
        with pytest.raises(BadRequest, match=reason):
            openrlhf_items(body, rules, 10)


def test_unreadable_responses_get_the_fallback_with_a_reason(serve):
    server, _ = serve(fallback_reward=-1.0)
    body = httpx.post(server.url + "/score", json={"responses": [
        {"problem": "p", "response": "a\n\nb"}, {"problem": "p", "response": "   "},
        {"problem": "p", "steps": ["has <extra_0> inside"]}, {"problem": "p", "steps": ["word " * 500]}]}).json()
    assert body["rewards"][0] != -1.0 and body["rewards"][1:] == [-1.0, -1.0, -1.0]
    assert body["errors"][0] is None and "steps" in body["errors"][1]
    assert "step tag" in body["errors"][2] and "max_model_len" in body["errors"][3]


def raw(server, data: bytes, read: bool = True) -> bytes:
    host, port = server.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(data)
        if not read:
            return b""
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_malformed_requests_are_400_with_a_reason_and_the_server_keeps_serving(serve):
    server, _ = serve(max_batch=8, max_request_mb=4096 / 2**20)
    url = server.url
    cases = [
        (httpx.post(url + "/get_reward", content=b"{not json"), 400, "not JSON"),
        (httpx.post(url + "/get_reward", json={"query": [1], "prompts": ["a"]}), 400, "list of strings"),
        (httpx.post(url + "/get_reward", json={"query": ["a"] * 9, "prompts": ["a"] * 9}), 400, "at most 8"),
        (httpx.post(url + "/score", json={"responses": [{"problem": 3}]}), 400, "string `problem`"),
        (httpx.post(url + "/get_reward", content=b"x" * 5000), 413, "at most 4096"),
        (httpx.post(url + "/nowhere", json={}), 404, "no such path"),
        (httpx.get(url + "/nowhere"), 404, "no such path"),
    ]
    for reply, status, reason in cases:
        assert reply.status_code == status, (reply.status_code, reply.text)
        assert reason in reply.json()["error"] and "Traceback" not in reply.text
    assert b" 411 " in raw(server, b"POST /get_reward HTTP/1.1\r\nHost: x\r\n\r\n").split(b"\r\n")[0] + b" "
    raw(server, b"\x00\xff garbage \r\n\r\n")
    assert httpx.get(url + "/health").json()["status"] == "ok"


def test_bearer_key_from_the_environment(serve, monkeypatch):
    monkeypatch.setenv("TEST_REWARD_KEY", "s3cret")
    server, _ = serve(key_env="TEST_REWARD_KEY")
    body = {"responses": [{"problem": "p", "steps": ["a"]}]}
    assert httpx.post(server.url + "/score", json=body).status_code == 401
    assert httpx.post(server.url + "/score", json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(server.url + "/health").status_code == 401
    ok = httpx.post(server.url + "/score", json=body, headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200 and "s3cret" not in ok.text
    monkeypatch.delenv("TEST_REWARD_KEY")
    server2, _ = serve(key_env="TEST_REWARD_KEY")  # unset: no key asked
    assert httpx.post(server2.url + "/score", json=body).status_code == 200


def test_binds_loopback_by_default():
    assert ServerConfig().host == "127.0.0.1"


def test_fifty_clients_at_once(serve):
    """50 threads, 4 requests of 8 responses each (bounded): every answer right, fewer engine calls
    than requests (requests waiting together are scored together)."""
    server, prm = serve()
    items = responses(8)
    expected = [min(s) for s in reference(StandInPRM(), items)]
    errors, done = [], []

    def client():
        with httpx.Client(timeout=60) as c:
            for _ in range(4):
                r = c.post(server.url + "/get_reward", json=openrlhf_payload(items))
                if r.status_code != 200 or r.json()["rewards"] != expected:
                    errors.append((r.status_code, r.text[:200]))
                done.append(1)

    threads = [threading.Thread(target=client) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and len(done) == 200
    assert prm.calls < 200
    assert httpx.get(server.url + "/health").status_code == 200


def test_more_clients_than_slots_are_told_to_retry(serve):
    gate = threading.Event()

    class Slow(StandInPRM):
        def step_probabilities(self, prompts):
            gate.wait(30)
            return super().step_probabilities(prompts)

    server, _ = serve(prm=Slow(), max_clients=2)
    body = {"responses": [{"problem": "p", "steps": ["a"]}]}
    results = []
    threads = [threading.Thread(target=lambda: results.append(httpx.post(server.url + "/score", json=body,
                                                                         timeout=60).status_code)) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    busy = httpx.post(server.url + "/score", json=body, timeout=10)
    gate.set()
    for t in threads:
        t.join(timeout=60)
    assert busy.status_code == 503 and busy.headers["Retry-After"] == "1"
    assert sorted(results) == [200, 200]


def test_a_stalled_client_is_cut_off(serve):
    server, _ = serve(request_timeout=0.5)
    host, port = server.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        time.sleep(1.5)
        assert s.recv(100) == b""  # closed by the server
    assert httpx.get(server.url + "/health").status_code == 200


def test_a_failing_prm_is_500_without_a_traceback(serve):
    server, _ = serve(prm=StandInPRM(fail=True))
    reply = httpx.post(server.url + "/score", json={"responses": [{"problem": "p", "steps": ["a"]}]})
    assert reply.status_code == 500 and reply.json() == {"error": "scoring failed: EngineFailure"}
    assert httpx.get(server.url + "/health").status_code == 200


def test_openrlhf_own_client(serve):
    found = rl_clients.openrlhf_client()
    if found is None:
        pytest.skip(f"OpenRLHF's client is not installed ({rl_clients.INSTALL})")
    assert found[1] == rl_clients.OPENRLHF_VERSION
    server, prm = serve()
    items = responses(32)
    payload = openrlhf_payload(items)
    answers = rl_clients.openrlhf_rewards(server.url + "/get_reward", payload["query"], payload["prompts"],
                                          payload["labels"])
    assert len(answers) == 1 and answers[0]["rewards"] == [min(s) for s in reference(StandInPRM(), items)]


def test_verl_loads_and_calls_compute_score(serve):
    server, _ = serve()
    (problem, steps), = responses(1)
    found = rl_clients.verl_loader()
    if found is None:
        fn = verl_module.compute_score  # verl not installed: its documented call, on the module itself
    else:
        assert found[1] == rl_clients.VERL_VERSION
        fn = found[0](module_path=str(Path(verl_module.__file__)), object_name="compute_score")
    # verl's reward manager: compute_score(data_source=, solution_str=, ground_truth=, extra_info=, **reward_kwargs)
    got = fn(data_source="world", solution_str="\n\n".join(steps), ground_truth="1",
             extra_info={"question": problem, "index": 0}, url=server.url, aggregate="product")
    expected = reference(StandInPRM(), [(problem, steps)])[0]
    assert got["score"] == math.prod(expected) and got["step_rewards"] == expected and got["error"] == ""
    with pytest.raises(ValueError, match="extra_info"):
        fn(data_source="world", solution_str="a", ground_truth="1", extra_info={}, url=server.url)


class SlipPRM(StandInPRM):
    """A stand-in PRM that reads a step as a wrong one (P(right) 0.1) when it holds "17" or "20", else 0.9:
    a slip "8 x 2 = 17", the steps carrying it, and a wrong answer; its correction reads right."""

    def step_probabilities(self, prompts):
        out = []
        for ids in prompts:
            scores, wrong = [], False
            for tok in ids:
                if tok == "<extra_0>":
                    scores.append(0.1 if wrong else 0.9)
                    wrong = False
                else:
                    wrong = wrong or "17" in tok or "20" in tok
            out.append(scores)
        return out


PROBLEM = "Tom has 8 apples and doubles them, then gets 3 more. How many?"
CORRECTED = ["Step 1: 8 x 2 = 17.", "Wait, 8 x 2 is 16, not that. Step 1: 8 x 2 = 16.", "Step 2: 16 + 3 = 19.",
             "The answer is \\boxed{19}."]
UNCORRECTED = ["Step 1: 8 x 2 = 17.", "Step 2: 17 + 3 = 20.", "The answer is \\boxed{20}."]


def test_the_recovered_aggregate_credits_the_correction_through_openrlhfs_and_verls_clients(serve):
    from prm_annotate.reward.scoring import recovered_min

    server, _ = serve(SlipPRM(), aggregate="recovered")
    items = [(PROBLEM, CORRECTED), (PROBLEM, UNCORRECTED)]
    steps = reference(SlipPRM(), items)
    assert steps == [[0.1, 0.9, 0.9, 0.9], [0.1, 0.1, 0.1]]
    # The baseline: under min (the default) the correction earns nothing.
    assert min(steps[0]) == min(steps[1])
    payload = openrlhf_payload(items)
    if rl_clients.openrlhf_client() is not None:
        answers = rl_clients.openrlhf_rewards(server.url + "/get_reward", payload["query"], payload["prompts"],
                                              payload["labels"])
        rewards = answers[0]["rewards"]
    else:  # OpenRLHF not installed: its documented payload
        rewards = httpx.post(server.url + "/get_reward", json=payload).json()["rewards"]
    assert rewards == [0.9, 0.1] == [recovered_min(s) for s in steps]
    found = rl_clients.verl_loader()
    fn = verl_module.compute_score if found is None else found[0](
        module_path=str(Path(verl_module.__file__)), object_name="compute_score")
    got = [fn(data_source="world", solution_str="\n\n".join(s), ground_truth="19",
              extra_info={"question": PROBLEM, "index": 0}, url=server.url, aggregate=name)["score"]
           for name in ("recovered", "min") for s in (CORRECTED, UNCORRECTED)]
    assert got[0] > got[1] and got[2] == got[3]


def test_recovered_spares_only_what_a_later_step_corrects():
    from prm_annotate.reward.scoring import recovered_min

    assert recovered_min([0.9, 0.2, 0.3, 0.95, 0.8]) == 0.8  # slip 1 corrected at 3: 1..2 spared
    assert recovered_min([0.9, 0.2, 0.3, 0.4]) == 0.2  # never corrected: min
    assert recovered_min([0.3, 0.9, 0.85]) == 0.85  # step 0 below 0.5, corrected at 1
    assert recovered_min([0.9, 0.8, 0.7]) == min([0.9, 0.8, 0.7])  # no slip: min
