"""Shared fixtures.

Engines. This machine has 2 cores and vLLM pins a core per engine: two engines at once starve each
other. So every in-process engine and every server comes from one `HeavySlot`, which holds at most
one of them: asking for another closes the current one first. Fixtures re-ask the slot on every
use, so the order of tests never leaves anyone with a closed engine, and engine tests are sorted
to the end of the run, grouped by what they use, so each engine starts once:
in-process vLLM (tiny) -> vLLM server (tiny) -> SmolLM2 (slow). The slot is emptied at session end.

    tiny_model_dir      session: a random 1M-parameter Qwen2 + local BPE tokenizer (seconds)
    vllm_engine         the in-process `VLLMEngine` on the tiny model
    vllm_server         a `VLLMServer` (`vllm serve` on 127.0.0.1) on the tiny model
    openai_engine       an `OpenAIEngine` talking to `vllm_server`
    smollm2_dir         SmolLM2-135M-Instruct prepared by `prm-annotate models prepare smollm2`
    heavy               the slot itself: heavy.get(name, start, stop) for other engines

After an in-process vLLM engine has run, the test process leaves with `os._exit` (see
`pytest_unconfigure`): a normal interpreter exit sometimes aborts with status 134 while vLLM's
threads free memory, and CI must not depend on luck.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from testing.heavy import SLOT as _SLOT
from testing.heavy import (
    TINY_MAX_MODEL_LEN,
    TINY_SERVED_NAME,
    HeavySlot,
    start_server,
    start_vllm_engine,
)

_EXIT_STATUS: list[int] = []

# Engine tests run last, grouped by the engine they use, so each engine starts once.
_GROUP_OF_FIXTURE = {"vllm_engine": 1, "vllm_server": 2, "openai_engine": 2, "smollm2_dir": 3}


def pytest_collection_modifyitems(config, items):
    def group(item) -> int:
        names = getattr(item, "fixturenames", ())
        return min((g for f, g in _GROUP_OF_FIXTURE.items() if f in names), default=0)

    # `make test` runs the tests not marked `engine` on both cores at once, the others one at a
    # time: a test that takes an engine's fixture unmarked would start an engine beside another.
    unmarked = [item.nodeid for item in items
                if set(getattr(item, "fixturenames", ())) & {*_GROUP_OF_FIXTURE, "heavy"}
                and item.get_closest_marker("engine") is None]
    if unmarked:
        raise pytest.UsageError(f"tests using an engine fixture must be marked engine: {unmarked}")
    items.sort(key=group)  # stable: the order within a group is kept


def pytest_sessionfinish(session, exitstatus):
    _SLOT.release()
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    if _SLOT.started_in_process_vllm and _EXIT_STATUS:
        from prm_annotate.engines import exit_process

        exit_process(_EXIT_STATUS[-1])


@pytest.fixture(scope="session")
def heavy() -> HeavySlot:
    return _SLOT


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    from testing.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture
def vllm_engine(tiny_model_dir):
    return _SLOT.get("vllm:tiny",
                     lambda: start_vllm_engine(tiny_model_dir, max_model_len=TINY_MAX_MODEL_LEN,
                                               dtype="float32"),
                     lambda e: e.close())


@pytest.fixture
def vllm_server(tiny_model_dir, tmp_path_factory):
    logs = tmp_path_factory.getbasetemp()
    return _SLOT.get("server:tiny",
                     lambda: start_server(tiny_model_dir, TINY_SERVED_NAME, logs,
                                          max_model_len=TINY_MAX_MODEL_LEN, dtype="float32"),
                     lambda s: s.stop())


@pytest.fixture
def openai_engine(vllm_server):
    from prm_annotate.engines.openai_engine import OpenAIEngine

    engine = OpenAIEngine(vllm_server.base_url, TINY_SERVED_NAME, concurrency=8, timeout=120, max_attempts=2)
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """SmolLM2 prepared by the project's own command (once; cached under PRM_ANNOTATE_CACHE or
    ~/.cache/prm-annotate)."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "prm_annotate", "models", "prepare", "smollm2"],
        capture_output=True, text=True, timeout=900,
    )
    assert out.returncode == 0, out.stderr
    path = Path(out.stdout.strip().splitlines()[-1])
    assert (path / "config.json").is_file()
    return path
