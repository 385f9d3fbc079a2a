"""The last line of a stage run: a sentence whose figures add up and are the manifest's.

- the sentence itself, on figures chosen here (plural, zero terms left out, reasons by count,
  tokens and times a person reads);
- `sample` as real processes against an OpenAI-shaped server that fails on demand: a run cut short
  by --limit, resumed with failing requests and an invalid line set aside, then run again on one
  shard; each run's last line read back and held to its manifest run's counters.
(The engine tests of tests/cli/test_pipeline_cli.py hold a real vLLM run's sentence to its manifest.)
"""
from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from prm_annotate.io.sharding import shard_of
from prm_annotate.pipeline.summary import Account, Nouns, duration, sentence
from testing.fault_server import FaultServer
from testing.jsonl_files import write_jsonl
from testing.summary_lines import check_sentence, parse_sentence

SAMPLE = Nouns("problem", "sampled", output="response", details=(("correct", "correct"), ("truncated", "cut")))


def test_the_sentence_says_each_figure_once_and_they_add_up():
    whole = Account("sample", read=12, made=5, set_aside={"failed at the engine": 2, "invalid": 3, "blank": 0},
                    already_done=1, other_shards=1, written=10,
                    stats={"correct": 4, "truncated": 0, "prompt_tokens": 2_500_000, "cached_prompt_tokens": 1200,
                           "generated_tokens": 78_892}, seconds=133.4)
    line = sentence(whole, SAMPLE)
    assert line == ("sample: 12 problems read: 5 sampled into 10 responses (4 correct), 5 set aside (3 invalid, "
                    "2 failed at the engine), 1 already done, 1 in other shards; 2.5M prompt (1,200 cached) and "
                    "78,892 generated tokens, 2 min 13 s.")
    assert whole.adds_up and parse_sentence(line)["set_aside"] == {"invalid": 3, "failed at the engine": 2}
    # One figure off and the account says so (the baseline above says it does not always).
    assert not Account("sample", read=14, made=5, set_aside={"invalid": 3}, already_done=5).adds_up
    # Nothing to say is not said: no set aside, no tokens; one record is singular.
    assert sentence(Account("consensus", read=1, made=1, written=1, seconds=0.04),
                    Nouns("rollout", "kept")) == "consensus: 1 rollout read: 1 kept; 0.0 s."
    assert sentence(Account("judge", read=0, made=0), Nouns("response", "judged")) == "judge: 0 responses read; 0.0 s."
    assert [duration(s) for s in (12.25, 59.9, 61, 3725)] == ["12.2 s", "59.9 s", "1 min 1 s", "1 h 2 min"]


def run_sample(problems, out, server, *extra):
    return subprocess.run([sys.executable, "-m", "prm_annotate", "sample", str(problems), "-o", str(out), "-n", "2",
                           "--model", "m", "--base-url", server.base_url, "--max-attempts", "1", "--quiet",
                           "--system-prompt", "none", *extra], capture_output=True, text=True, timeout=300)


@pytest.fixture
def fault_server():
    with FaultServer() as server:
        yield server


def test_sample_resumed_with_failures_and_rejects_says_what_its_manifest_says(fault_server, tmp_path):
    # The server answers the user message "ok" and fails "500" (retried, here once only) and "400".
    texts = {f"p{i}": {2: "500", 5: "400"}.get(i, "ok") for i in range(8)}
    rows = [{"id": pid, "problem": text, "answer": "0"} for pid, text in texts.items()]
    problems = write_jsonl(tmp_path / "problems.jsonl", rows[:4] + [{"id": "bad"}] + rows[4:])  # line 5: no problem
    out = tmp_path / "responses.jsonl"

    def last_run() -> dict:
        return orjson.loads(out.with_name("responses.manifest.json").read_bytes())["runs"][-1]

    # A run cut short: the first two problems only.
    first = run_sample(problems, out, fault_server, "--limit", "2", "--skip-invalid")
    assert first.returncode == 0, first.stderr[-2000:]
    said = check_sentence(first.stderr.splitlines()[-1], last_run())
    assert (said["read"], said["made"], said["written"], said["set_aside"]) == (2, 2, 4, {})

    # Resumed: two problems already done, two requests fail, the line without a problem set aside.
    second = run_sample(problems, out, fault_server, "--skip-invalid")
    assert second.returncode == 1, second.stderr[-2000:]
    lines = second.stderr.splitlines()
    said = check_sentence(lines[-1], last_run())
    assert (said["read"], said["made"], said["written"], said["already_done"]) == (9, 4, 8, 2)
    assert said["set_aside"] == {"failed at the engine": 2, "invalid": 1}
    assert said["details"].get("correct", 0) == last_run()["stats"]["correct"]
    # The failed ones are named above the sentence, with what the server said.
    assert any(line.startswith("  failed p2: sample 0: failed after 1 attempt(s)") for line in lines[:-1])
    assert sum(1 for _ in out.open()) == 12

    # One shard of two: the other shard's problems are left alone, this one's finished ones skipped.
    third = run_sample(problems, out, fault_server, "--skip-invalid", "--shard", "1/2")
    said = check_sentence(third.stderr.splitlines()[-1], last_run())
    mine = [pid for pid in texts if shard_of(pid, 2) == 1]
    failing = [pid for pid in mine if texts[pid] != "ok"]
    assert third.returncode == (1 if failing else 0)
    assert (said["read"], said["made"], said["other_shards"]) == (9, 0, 8 - len(mine))
    assert said["already_done"] == len(mine) - len(failing)
    assert said["set_aside"] == {"invalid": 1, **({"failed at the engine": len(failing)} if failing else {})}
