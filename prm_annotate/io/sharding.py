"""`--shard I/N`: which records a run takes, by a hash of their id."""
from __future__ import annotations

import hashlib

from prm_annotate.errors import UsageError


def shard_of(record_id: str, count: int) -> int:
    """Stable across machines, Python versions and input order (unlike hash())."""
    digest = hashlib.blake2b(record_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """`--shard I/N`, I counted from 0."""
    if text is None:
        return None
    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard takes I/N, such as 0/4; got {text!r}") from None
    if count < 1 or not 0 <= index < count:
        raise UsageError(f"--shard {text}: need 0 <= I < N")
    return index, count
