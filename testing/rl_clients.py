"""The RL frameworks' own client code, imported alone from a private install, for the reward-server
tests: OpenRLHF 0.11.2's HTTP reward client (`openrlhf/utils/agent.py`,
`SingleTurnAgentExecutor._fetch_rewards_via_http`) and verl 0.9.1's loader of a custom reward
function (`verl/utils/import_utils.py`, `load_extern_object`).

Neither package imports without its GPU stack (`openrlhf.utils` pulls in DeepSpeed, `verl` tensordict
and more), so the two files are loaded by path with their package folders registered empty: only
the client function and what it imports (OpenRLHF's `logging_utils`, aiohttp; verl's stdlib-only
module) run. Install them where the tests can find them (the folder in `RL_CLIENTS_DIR`, else an
ordinary install):

    pip install --no-deps --target DIR openrlhf==0.11.2 verl==0.9.1

Without them the tests that need them are skipped and say so; the documented request and response
are checked regardless (tests/reward/).
"""
from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import types
from pathlib import Path
from typing import Any

OPENRLHF_VERSION = "0.11.2"
VERL_VERSION = "0.9.1"
INSTALL = f"pip install --no-deps --target DIR openrlhf=={OPENRLHF_VERSION} verl=={VERL_VERSION}; RL_CLIENTS_DIR=DIR"


def _root(package: str) -> Path | None:
    base = os.environ.get("RL_CLIENTS_DIR")
    if base and (Path(base) / package).is_dir():
        return Path(base)
    spec = importlib.util.find_spec(package) if package not in sys.modules else None
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).parent
    return None


def _version(root: Path, package: str) -> str | None:
    found = sorted(root.glob(f"{package}-*.dist-info"))
    return found[-1].name[len(package) + 1: -len(".dist-info")] if found else None


def _load(root: Path, dotted: str) -> types.ModuleType:
    parts = dotted.split(".")
    for i in range(1, len(parts)):  # the packages, empty: their __init__ would import the GPU stack
        name = ".".join(parts[:i])
        if name not in sys.modules:
            pkg = types.ModuleType(name)
            pkg.__path__ = [str(root.joinpath(*parts[:i]))]
            sys.modules[name] = pkg
    if dotted in sys.modules:
        return sys.modules[dotted]
    spec = importlib.util.spec_from_file_location(dotted, root.joinpath(*parts[:-1], parts[-1] + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[dotted] = module
    spec.loader.exec_module(module)
    return module


def openrlhf_client() -> tuple[Any, str] | None:
    """(OpenRLHF's SingleTurnAgentExecutor class, its version), or None when not installed."""
    root = _root("openrlhf")
    if root is None or not (root / "openrlhf" / "utils" / "agent.py").exists():
        return None
    return _load(root, "openrlhf.utils.agent").SingleTurnAgentExecutor, _version(root, "openrlhf") or "?"


def openrlhf_rewards(url: str, queries: list[str], prompts: list[str], labels: list[Any]) -> list[dict]:
    """What OpenRLHF's trainer gets back from `--remote_rm_url url` for one batch: the answers of
    its servers (one here), through its own client."""
    found = openrlhf_client()
    assert found is not None, INSTALL
    executor = found[0](remote_rm_url=url)
    return asyncio.run(executor._fetch_rewards_via_http(queries, prompts, labels))


def verl_loader() -> tuple[Any, str] | None:
    """(verl's load_extern_object, its version), or None when not installed."""
    root = _root("verl")
    if root is None or not (root / "verl" / "utils" / "import_utils.py").exists():
        return None
    return _load(root, "verl.utils.import_utils").load_extern_object, _version(root, "verl") or "?"
