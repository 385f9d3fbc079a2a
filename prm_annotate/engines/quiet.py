"""Library noise off: the warnings, log lines and progress bars vLLM, torch and their extensions
print while an engine starts (a deprecation warning, "Triton not available", NUMA binding, the
weight-loading bar) say nothing to the user of a demo. Errors still show.

It works through the environment, so vLLM's worker processes (spawned, not forked) inherit it;
call it before vLLM or torch is imported. A variable the user has set is left as it is.
"""
from __future__ import annotations

import os
import warnings

QUIET_ENV = {
    "VLLM_LOGGING_LEVEL": "ERROR",
    "TORCH_CPP_LOG_LEVEL": "ERROR",  # c10's warnings (NUMA binding)
    "TORCH_LOGS": "-torch",  # torch's Python loggers at ERROR
    "PYTHONWARNINGS": "ignore",
}


def quiet_libraries() -> None:
    for name, value in QUIET_ENV.items():
        os.environ.setdefault(name, value)
    warnings.simplefilter("ignore")
