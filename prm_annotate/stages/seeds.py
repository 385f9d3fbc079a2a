"""Stable per-request seeds.

Every sampled text gets its own seed derived from what it is (problem id and sample index;
response id, step and completion index; record id and vote), plus the run's `--seed`. So a rerun,
a resumed run, or a larger run (K=16 after K=8) reproduces the same texts for the same requests,
whatever else happens to be in the batch. Python's hash() is salted per process, hence blake2b.
"""
from __future__ import annotations

import hashlib

import orjson

# 31 bits: every engine and OpenAI-compatible server accepts it as a (signed 32-bit) seed.
SEED_BITS = 31


def derive_seed(*parts: str | int | None) -> int:
    """A positive 31-bit seed from the parts. JSON-encoding the parts keeps them unambiguous:
    ("a/1", 2) and ("a", "1/2") give different seeds."""
    data = orjson.dumps(list(parts))
    digest = hashlib.blake2b(data, digest_size=8).digest()
    return int.from_bytes(digest, "big") & ((1 << SEED_BITS) - 1)
