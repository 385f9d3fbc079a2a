"""One heavy resource at a time per test process: vLLM pins its worker to a core, and two engines on
one core starve each other (each pytest-xdist worker binds its engines to a core of its own:
tests/conftest.py). Every in-process engine and every server of a test process comes from `SLOT`
(tests/conftest.py holds the fixtures); the start helpers bound each start with a timeout."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from prm_annotate.engines.defaults import START_TIMEOUT

ENGINE_START_TIMEOUT = float(os.environ.get("PRM_TEST_ENGINE_TIMEOUT", START_TIMEOUT))
TINY_MAX_MODEL_LEN = 2048
TINY_SERVED_NAME = "tiny"


class HeavySlot:
    """At most one heavy resource (engine or server) alive at a time."""

    def __init__(self) -> None:
        self.name: str | None = None
        self.value: Any = None
        self._stop: Callable[[Any], None] | None = None
        self.started_in_process_vllm = False
        self.starts: list[tuple[str, float]] = []  # (name, seconds) of every start, for the run's summary

    def get(self, name: str, start: Callable[[], Any], stop: Callable[[Any], None]) -> Any:
        if self.name == name:
            return self.value
        self.release()
        began = time.monotonic()
        self.value = start()
        self.starts.append((name, time.monotonic() - began))
        self.name, self._stop = name, stop
        return self.value

    def release(self) -> None:
        if self.name is not None:
            stop, value = self._stop, self.value
            self.name, self.value, self._stop = None, None, None
            stop(value)


SLOT = HeavySlot()


def start_vllm_engine(model_dir: Path, **kwargs):
    from prm_annotate.engines.vllm_engine import VLLMEngine

    SLOT.started_in_process_vllm = True
    return VLLMEngine(str(model_dir), start_timeout=ENGINE_START_TIMEOUT, **kwargs)


def start_server(model_dir: Path, served_name: str, log_dir: Path, **kwargs):
    from testing.vllm_server import VLLMServer

    server = VLLMServer(model_dir, served_name=served_name, log_path=log_dir / f"{served_name}-server.log",
                        **kwargs)
    return server.start(timeout=ENGINE_START_TIMEOUT)


