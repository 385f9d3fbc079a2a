"""From the published files to the numbers with a real PRM: `score` reads the PRMBench and
Hard2Verify fixtures as the benchmarks publish them (formats detected; Hard2Verify's rows decrypted),
a world PRM that `train` wrote scores them in vLLM's pooling runner (the shared `vllm serve --runner
pooling` of the world PRM's tests), and `evaluate --benchmark`
equals each benchmark's restated script on those scores."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from testing import hard2verify_script as h2v_script
from testing import prmbench_script
from testing.benchmark_files import HARD2VERIFY_FILE, PRMBENCH_FILE
from testing.jsonl_files import read_jsonl
from testing.prm_fixtures import prm_server

CLI = [sys.executable, "-m", "prm_annotate"]


def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.engine
@pytest.mark.slot("server:prm-step")
def test_published_files_to_benchmark_numbers(world_prm, tmp_path, tmp_path_factory, heavy):
    from transformers import AutoTokenizer

    prm = world_prm
    # The world PRM's shared `vllm serve --runner pooling` (tests/prm/test_served_prm.py holds its
    # scores equal to the in-process engine's): one server for both files, no engine start of its own.
    tag_id = AutoTokenizer.from_pretrained(prm).convert_tokens_to_ids("<extra_0>")
    server = prm_server(heavy, prm, tmp_path_factory.getbasetemp(), "step", {"step_tag_id": tag_id})
    scored = {}
    for name, path in (("prmbench", PRMBENCH_FILE), ("hard2verify", HARD2VERIFY_FILE)):
        out = tmp_path / f"{name}-scored.jsonl"
        done = run("score", str(path), "-o", str(out), "--model", str(prm), "--base-url", server.base_url,
                   "--batch-size", "64", "--quiet")
        assert done.returncode == 0, done.stderr[-3000:]
        scored[name] = {r["id"]: r["prm"]["scores"] for r in read_jsonl(out)}

    published = [json.loads(x) for x in PRMBENCH_FILE.read_text().splitlines()]
    meta = [m for m in prmbench_script.load_data(published) if m["classification"] != "correct"]
    assert set(scored["prmbench"]) == {m["idx"] for m in meta}
    res = prmbench_script.evaluate([prmbench_script.prm_result(i, s) for i, s in scored["prmbench"].items()], meta)
    got = json.loads(run("evaluate", str(tmp_path / "prmbench-scored.jsonl"), "--gold", str(PRMBENCH_FILE),
                         "--benchmark", "prmbench", "--json").stdout)
    for category, numbers in got["categories"].items():
        assert prmbench_script.printed(numbers["prmscore"]) == prmbench_script.printed(
            prmbench_script.prmscore(res, category)), category
    assert prmbench_script.printed(got["prmscore"]) == prmbench_script.printed(prmbench_script.prmscore(res))

    plain = [h2v_script.decrypt_sample(json.loads(x)) for x in HARD2VERIFY_FILE.read_text().splitlines()]
    threshold = sorted(s for v in scored["hard2verify"].values() for s in v)[len(plain)]  # some steps below it
    got = json.loads(run("evaluate", str(tmp_path / "hard2verify-scored.jsonl"), "--gold", str(HARD2VERIFY_FILE),
                         "--benchmark", "hard2verify", "--threshold", repr(threshold), "--json").stdout)
    expected = h2v_script.calculate_error_id_metrics(
        [h2v_script.prm_first_error(scored["hard2verify"][r["unique_id"]], threshold) for r in plain],
        [r["human_labels_first_error_idx"] for r in plain])
    assert got["reported"]["error_id"] == expected
