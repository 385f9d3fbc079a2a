"""Shared fixtures.

Engines. vLLM on CPU pins its worker to a core, and two engines on one core starve each other.
`make test` runs the engine tests on two pytest-xdist workers, each binding its engines to a core
of its own (VLLM_CPU_OMP_THREADS_BIND, inherited by the stages and servers it starts), and the
few that need the machine to themselves (marked `whole_machine`: two engines of their own, or a
scan of every process; also marked `slow`) alone, in `make test-slow`. Within a worker every in-process engine and every
server comes from one `HeavySlot`, which holds at most one of them: asking for another closes the
current one first. Fixtures re-ask the slot on every use, so the order of tests never leaves
anyone with a closed engine, and engine tests are sorted to the end of the run, grouped by what
they use, so each engine starts once: the world policy -> the world judge -> the world thinker ->
in-process vLLM (tiny) -> vLLM server (tiny) -> SmolLM2 (slow). The groups go to the workers as two lanes (the
world's engines; the tiny model's) and SmolLM2's, and the tests of the world PRM or of one slot
entry stay on one worker (xdist groups). A test marked `switches_engine` (it goes on to the next
group's engine) comes last in its group, and tests marked `slot(name)` (they start that entry
themselves) run together. The slot is emptied at session end, and the run's summary counts its
starts on every worker.

    tiny_model_dir      session: a random 1M-parameter Qwen2 + local BPE tokenizer (seconds)
    world_policy        the in-process `VLLMEngine` on the world's shipped policy
    world_judge         the same on the world's shipped judge
    world_thinker       the same on the thinking world's shipped thinker
    world_prm           session: a PRM trained by `train` on the world policy (seconds)
    world_prm_scored    session: `score` in process over 256 held-out world responses with it (once)
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

import os
import sys
from collections import Counter
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
_GROUP_OF_FIXTURE = {"world_policy": 1, "world_judge": 2, "world_thinker": 2.5, "vllm_engine": 3, "vllm_server": 4, "openai_engine": 4,
                     "smollm2_dir": 5}
# The worker (xdist group) each engine group runs on, so a worker starts each of its engines once.
_LANE_OF_GROUP = {1: "engines-world", 2: "engines-world", 2.5: "engines-world", 3: "engines-tiny", 4: "engines-tiny", 5: "engines-smollm2"}


def _bind_engines_to_this_workers_core() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:
        cores = sorted(os.sched_getaffinity(0))
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = str(cores[int(worker[2:]) % len(cores)])


_bind_engines_to_this_workers_core()


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks added here
def pytest_collection_modifyitems(config, items):
    def fixtures(item) -> set[str]:  # an EngineChecks class names its engine's fixture as an attribute
        return {*getattr(item, "fixturenames", ()), getattr(item.cls, "engine_fixture", None)} - {None}

    def group(item) -> int:
        names = fixtures(item)
        return min((g for f, g in _GROUP_OF_FIXTURE.items() if f in names), default=0)

    def slot(item) -> str:
        marker = item.get_closest_marker("slot")
        return marker.args[0] if marker else ""

    # `make test` runs the tests not marked `engine` on both cores at once, the others one engine
    # per worker, each worker on its own core: a test that takes an engine's fixture unmarked would
    # start an engine beside another, and a `whole_machine` test unmarked would also run beside others.
    unmarked = [item.nodeid for item in items
                if (fixtures(item) & {*_GROUP_OF_FIXTURE, "heavy"} or item.get_closest_marker("whole_machine"))
                and item.get_closest_marker("engine") is None]
    if unmarked:
        raise pytest.UsageError(f"tests using an engine fixture or marked whole_machine must be marked engine: "
                                f"{unmarked}")
    # `make test` runs no whole_machine test (none may run beside another): `make test-slow` runs them alone.
    alone = [item.nodeid for item in items if item.get_closest_marker("whole_machine")
             and item.get_closest_marker("slow") is None]
    if alone:
        raise pytest.UsageError(f"tests marked whole_machine must be marked slow (make test-slow runs them alone): {alone}")
    # Stable: the order within a group is kept. A test that goes on to the next group's engine comes
    # last in its own, so the engine it leaves is the one the next tests want; tests that start the
    # same slot entry themselves (marked slot(name)) run next to each other.
    items.sort(key=lambda item: (group(item), item.get_closest_marker("switches_engine") is not None, slot(item)))
    for item in items:
        lane = (_LANE_OF_GROUP.get(group(item)) or ("world-prm" if "world_prm" in fixtures(item) else None)
                or (slot(item) and f"slot-{slot(item)}"))
        if lane and item.get_closest_marker("engine") is not None:
            item.add_marker(pytest.mark.xdist_group(lane))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    # xdist groups a test by a suffix it adds to the node id; pytest 9.2 ignores it (pytest-xdist#1386),
    # and the run would silently start every engine on both workers.
    if getattr(session.config.option, "loadgroup", False):
        grouped = [item for item in session.items if item.get_closest_marker("xdist_group")]
        if grouped and "@" not in grouped[0].nodeid:
            raise pytest.UsageError("pytest-xdist's --dist loadgroup does not group tests under this pytest "
                                    "(pytest-xdist#1386): install the pytest pinned in pyproject.toml")


def pytest_sessionfinish(session, exitstatus):
    _SLOT.release()
    _EXIT_STATUS.append(int(exitstatus))
    if hasattr(session.config, "workeroutput"):  # an xdist worker: its starts go to the controller
        session.config.workeroutput["slot_starts"] = _SLOT.starts


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    _SLOT.starts.extend(tuple(start) for start in getattr(node, "workeroutput", {}).get("slot_starts", ()))


def pytest_terminal_summary(terminalreporter):
    if _SLOT.starts:  # what engine sharing is worth: every start of the shared slot, by name
        counts = ", ".join(f"{n} x{c}" for n, c in sorted(Counter(n for n, _ in _SLOT.starts).items()))
        total = sum(s for _, s in _SLOT.starts)
        terminalreporter.write_line(f"engine slot: {len(_SLOT.starts)} starts, {total:.0f} s ({counts})")


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


def _world_engine(kind: str):
    from prm_annotate.world import MODELS_DIR

    return _SLOT.get(f"vllm:{kind}", lambda: start_vllm_engine(MODELS_DIR / kind, max_model_len=TINY_MAX_MODEL_LEN),
                     lambda e: e.close())


@pytest.fixture
def world_policy():
    """The world's shipped policy in an in-process engine (real right and wrong completions)."""
    return _world_engine("policy")


@pytest.fixture
def world_judge():
    """The world's shipped judge in an in-process engine."""
    return _world_engine("judge")


@pytest.fixture
def world_thinker():
    """The thinking world's shipped thinker in an in-process engine."""
    return _world_engine("thinker")


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
def world_prm(tmp_path_factory) -> Path:
    """A Qwen2 PRM trained by `train` on the world policy in seconds (testing/prm_fixtures.py), once
    per run: every test reads it, none writes it."""
    from testing.prm_fixtures import train_world_prm

    return train_world_prm(tmp_path_factory.mktemp("world-prm"))


@pytest.fixture(scope="session")
def world_prm_scored(world_prm, tmp_path_factory, heavy):
    """`score` in process (a child process) over 256 held-out world responses with `world_prm`, once
    per run (testing/prm_fixtures.py `ScoredWorld`): the in-process scores the served-score,
    reward and transformers checks compare with. Read it, never write beside it."""
    from testing.prm_fixtures import score_world_once

    heavy.release()  # one engine at a time on this machine: this one runs in a child process
    return score_world_once(world_prm, tmp_path_factory.mktemp("world-prm-scored"))


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
