"""The in-process vLLM engine on a tiny random model: the engine checks, the same texts as over
HTTP, and no vLLM process left behind a clean exit or a SIGKILL."""

from __future__ import annotations

import time

import pytest

from prm_annotate.engines import on_cpu
from testing.engine_checks import EngineChecks, chat
from testing.paths import REPO


@pytest.mark.engine
class TestVLLMEngine(EngineChecks):
    kind = "vllm"
    engine_fixture = "vllm_engine"

    def reference_continuation(self, engine, req, prompt):
        """vLLM's own chat path with `continue_final_message` (our engine renders by itself)."""
        from vllm import SamplingParams

        out = engine._llm.chat([list(req.messages)], SamplingParams(temperature=0.0, max_tokens=req.sampling.max_tokens),
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
@pytest.mark.switches_engine
def test_same_text_in_both_engines(vllm_engine, request):
    """A per-request seed gives the same texts in process and over HTTP. Both engines run here, one
    after the other (the slot closes the in-process engine before the server starts), so the
    check does not depend on which other tests ran."""
    target = chat("t", seed=1234, temperature=1.0, max_tokens=24, n=2)
    reference = vllm_engine.generate([target])["t"].texts
    openai_engine = request.getfixturevalue("openai_engine")
    assert openai_engine.generate([target])["t"].texts == reference



CLEAN_EXIT_SCRIPT = """
import sys
from prm_annotate.engines import GenerationRequest, Sampling, exit_process
from prm_annotate.engines.vllm_engine import VLLMEngine

if __name__ == "__main__":
    engine = VLLMEngine(sys.argv[1], start_timeout=300)
    res = engine.generate([GenerationRequest(key="a", messages=({"role": "user", "content": "hi"},),
                                             sampling=Sampling(max_tokens=4, seed=1))])
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

    deadline = time.monotonic() + 60  # a deadline, not a wait: a loaded 2-core machine may need it
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
    root = str(REPO)
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
        gone, alive = psutil.wait_procs(engine_procs, timeout=60)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left in its group
        except ProcessLookupError:
            pass
    for p in alive:
        p.kill()
    assert not alive, [" ".join(p.cmdline()) for p in alive]

