"""Ids kept in a few bytes: what a command that must know every id of a large file holds instead of
the ids themselves (a dict of a million ids costs ~150 bytes an id). Two forms:

- `IdHashes`: 8 bytes an id (`id_hash`), to find ids seen twice: `clashes()` sorts them once and
  gives the hashes seen more than once; the caller reads its file again for the ids of those hashes
  (two different ids of one hash are no duplicate), as repeats are rare.
- `IdIndex`: 12 bytes an id (`id_key`), to find an id's position again.

An id's key is its 12-byte blake2b digest, cut into an 8-byte key (unsigned) that is sorted and bisected and a
4-byte check that tells apart two ids sharing a key. Two different ids agree on all 96 bits about once
in 2^96 / n² (10^-17 for a million ids): two positions of one digest are taken for one id.
"""
from __future__ import annotations

import hashlib
from array import array
from bisect import bisect_left


def id_hash(rid: str) -> int:
    """The id's blake2b, 8 bytes as a signed int (the shard hash's digest, read little-endian)."""
    return int.from_bytes(hashlib.blake2b(rid.encode("utf-8"), digest_size=8).digest(), "little", signed=True)


class IdHashes:
    """The ids of a file, 8 bytes each."""

    def __init__(self) -> None:
        self.hashes = array("q")

    def add(self, rid: str) -> None:
        self.hashes.append(id_hash(rid))

    def __len__(self) -> int:
        return len(self.hashes)

    def clashes(self) -> set[int]:
        """The hashes seen more than once."""
        import numpy as np

        ordered = np.sort(np.frombuffer(self.hashes, dtype=np.int64)) if self.hashes else np.empty(0, np.int64)
        same = ordered[1:] == ordered[:-1]
        return {int(h) for h in np.unique(ordered[1:][same])}

    def distinct(self, suspects: dict[int, int] | None = None) -> int:
        """How many different hashes were seen; `suspects` (a clash's hash -> the ids it stands for,
        found by reading again) counts a hash that two ids share as the ids it stands for."""
        import numpy as np

        n = len(np.unique(np.frombuffer(self.hashes, dtype=np.int64))) if self.hashes else 0
        return n + sum(k - 1 for k in (suspects or {}).values())


def id_key(rid: str) -> tuple[int, int]:
    """(key, check) of an id."""
    digest = int.from_bytes(hashlib.blake2b(rid.encode("utf-8"), digest_size=12).digest(), "little")
    return digest & _KEY, digest >> 64


_KEY = (1 << 64) - 1


class IdIndex:
    """Ids in the order they were added, each found again by its position (0, 1, ...): a key and a
    check an id (12 bytes), and once searched the keys sorted with their positions (12 more)."""

    def __init__(self) -> None:
        self.keys = array("Q")
        self.checks = array("I")
        self._sorted = array("Q")  # the keys, sorted, once searched
        self._order = array("I")  # the position of each sorted key

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, rid: str) -> int:
        """Add an id (a repeat too: see `duplicated`); its position."""
        key, check = id_key(rid)
        self.keys.append(key)
        self.checks.append(check)
        return len(self.keys) - 1

    def _sort(self) -> None:
        if len(self._order) != len(self.keys):
            # One int a key and its position (48 bytes each while sorting), not a list of positions
            # sorted by a list of keys (80).
            both = sorted((key << 32) | i for i, key in enumerate(self.keys))
            self._sorted = array("Q", (k >> 32 for k in both))
            self._order = array("I", (k & 0xFFFFFFFF for k in both))

    def find(self, rid: str) -> int:
        """The first position of `rid`, -1 when it was not added."""
        return self.find_key(*id_key(rid))

    def find_key(self, key: int, check: int) -> int:
        self._sort()
        i = bisect_left(self._sorted, key)
        found = -1
        while i < len(self._sorted) and self._sorted[i] == key:
            at = self._order[i]
            if self.checks[at] == check and (found == -1 or at < found):
                found = at
            i += 1
        return found

    def duplicated(self) -> bool:
        """Whether an id was added twice (a caller then names it by reading its files again)."""
        self._sort()
        keys, order, checks = self._sorted, self._order, self.checks
        for i in range(1, len(keys)):
            if keys[i] == keys[i - 1]:
                j = i - 1
                while j >= 0 and keys[j] == keys[i]:
                    if checks[order[j]] == checks[order[i]]:
                        return True
                    j -= 1
        return False
