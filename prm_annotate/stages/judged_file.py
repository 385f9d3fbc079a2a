"""The judged file, read as an index: what `consensus` joins its rollouts with and what a `rollout
--strategy verify` run checks (`--judged`). Validated whole before any work (a bad line or a
duplicate id is exit 2 naming file and line), and held compactly: per id the byte offset of its
line, the judge's first error, whether it holds `judge.recovery`, and a digest of its steps — never
the records; a join that needs a record whole reads it again from its offset, and need not
validate it again while the file is the one the index validated (its stamp: `raw`).

Every verify record carries the judge's first error it was checked against and the file's sha256
(`mc.judge_first_error`, `mc.judged_sha256`), so a resumed run can tell that its output was
verified against another judged file, even after a SIGKILL left no manifest entry: it is refused.
"""
from __future__ import annotations

import hashlib
from array import array
from pathlib import Path
from typing import Any, BinaryIO

import orjson
from pydantic import ValidationError

from prm_annotate.errors import InputError, UsageError
from prm_annotate.io.inputs import RecordAt, is_json_array, read_records_at
from prm_annotate.io.jsonl import STDIO, Stamp, check_input, file_stamp, is_stream
from prm_annotate.pipeline.runner import RunOptions, read_validated
from prm_annotate.records import Judged, Record, Response, describe_validation_error
from prm_annotate.strategies import JudgeClaim

_NO_VERDICT = -2  # a null first error (below every valid one, -1..n-1)
_RECOVERY, _MATCHED = 1, 2  # flags: the verdict holds judge.recovery; a rollout of its id was read


def steps_digest(steps: list[str]) -> bytes:
    """Two responses hold the same steps exactly when these agree (128 bits)."""
    return hashlib.blake2b(orjson.dumps(steps), digest_size=16).digest()


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class RecordIndex:
    """A file of records (of `model`) by id, about 40 bytes an id besides the id itself (`read`): per
    id the byte offset of its line and a digest of its steps. A stream or a JSON array has no offsets
    to read again: its records are held (`held`), as they are for a caller that built them in memory."""

    def __init__(self, path: str, model: type[Record]):
        self.path, self.model = path, model
        self.slots: dict[str, int] = {}  # id -> its slot in the arrays (file order)
        self.offsets = array("q")
        self.stamp: Stamp | None = None  # the file's when it was validated (io.jsonl.file_stamp)
        self.digests = bytearray()
        self._again: RecordAt | None = None
        self._held: list[Record] | None = None
        self._fh: BinaryIO | None = None

    @classmethod
    def read(cls, path: str, model: type[Record]) -> "RecordIndex":
        """The file validated whole (a bad line or a repeated id: exit 2 naming file and line)."""
        if is_stream(path) or is_json_array(path):
            records = read_validated(path, model, RunOptions(path), None)
            return cls.held(path, model, {r.id: r for r in records})
        index = cls(path, model)
        stamp = file_stamp(path)
        rows, index._again = read_records_at(path)
        for where, offset, obj in rows:
            try:
                record = model.model_validate(obj)
            except ValidationError as exc:
                raise InputError(path, where, describe_validation_error(exc)) from None
            if record.id in index.slots:
                first = _line_of(path, index.offsets[index.slots[record.id]])
                raise InputError(path, where, f"duplicate id {record.id!r} (first seen at line {first})")
            index._add(record, offset)
        if file_stamp(path) != stamp:
            raise InputError(path, "line 0", "written while it was read: run again once it is complete")
        index.stamp = stamp
        return index

    @classmethod
    def held(cls, path: str, model: type[Record], records: dict[str, Record]) -> "RecordIndex":
        index = cls(path, model)
        index._held = list(records.values())
        for record in index._held:
            index._add(record, -1)
        return index

    def _add(self, record: Record, offset: int) -> None:
        self.slots[record.id] = len(self.offsets)
        self.offsets.append(offset)
        self.digests += steps_digest(record.steps)

    def __len__(self) -> int:
        return len(self.slots)

    def slot(self, rid: str) -> int | None:
        return self.slots.get(rid)

    def same_steps(self, slot: int, steps: list[str]) -> bool:
        return self.digests[16 * slot: 16 * slot + 16] == steps_digest(steps)

    def record(self, slot: int) -> Any:
        """The record, read again from its offset."""
        if self._held is not None:
            return self._held[slot]
        try:
            return self.model.model_validate(self.raw(slot))
        except ValidationError as exc:  # not reached while the file is the one `read` validated
            raise InputError(self.path, f"byte {self.offsets[slot]}", describe_validation_error(exc)) from None

    def raw(self, slot: int) -> dict[str, Any]:
        """The record's object as `read` validated it, without validating it again: read from its
        offset in the file `read` validated (one written since is exit 2: its stamp); a held record's
        plain dump (its declared fields filled in, the same values)."""
        if self._held is not None:
            return self._held[slot].plain()
        assert self._again is not None
        if self._fh is None:
            self._fh = open(self.path, "rb")
        return self._again.read(self._fh, self.offsets[slot], slot, self.stamp)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __getstate__(self) -> dict[str, Any]:
        # Sent to Ray actors inside a stage factory: the open file is reopened where it is read.
        return {**self.__dict__, "_fh": None}


class JudgedIndex(RecordIndex):
    """A judged file by id (`RecordIndex`), with per id the judge's first error and whether it holds
    `judge.recovery`: about 60 bytes an id besides the id itself."""

    def __init__(self, path: str, model: type[Record] = Judged):
        super().__init__(path, model)
        self.first_errors = array("i")
        self.flags = bytearray()

    @classmethod
    def read(cls, path: str, model: type[Record] = Judged) -> "JudgedIndex":
        return super().read(path, model)  # type: ignore[return-value]

    def _add(self, judged: Judged, offset: int) -> None:
        super()._add(judged, offset)
        first_error = judged.judge.first_error
        self.first_errors.append(_NO_VERDICT if first_error is None else first_error)
        self.flags.append(_RECOVERY if "recovery" in (judged.judge.model_extra or {}) else 0)

    def first_error(self, slot: int) -> int | None:
        value = self.first_errors[slot]
        return None if value == _NO_VERDICT else value

    def has_recovery(self, slot: int) -> bool:
        return bool(self.flags[slot] & _RECOVERY)

    def mark(self, slot: int) -> None:
        self.flags[slot] |= _MATCHED

    def marked(self, slot: int) -> bool:
        return bool(self.flags[slot] & _MATCHED)

    def unmarked(self) -> list[str]:
        """Ids, in file order, that no `mark` reached."""
        return [rid for rid, slot in self.slots.items() if not self.flags[slot] & _MATCHED]


def _line_of(path: str, offset: int) -> int:
    """The line number of the line starting at `offset` (a duplicate's message: rare, so counted then)."""
    with open(path, "rb") as fh:
        return fh.read(offset).count(b"\n") + 1


class JudgedFile:
    """`rollout --judged`: the judged file's index and its sha256, both taken streaming."""

    def __init__(self, path: str, sha256: str, records: "dict[str, Judged] | JudgedIndex"):
        self.path, self.sha256 = path, sha256
        self.index = records if isinstance(records, JudgedIndex) else JudgedIndex.held(path, Judged, records)

    @classmethod
    def load(cls, path: str) -> "JudgedFile":
        if path == STDIO:
            raise UsageError("--judged must be a file (its sha256 goes into every record and the manifest)")
        check_input(path)
        index = JudgedIndex.read(path)
        return cls(path, file_sha256(path), index)

    @property
    def records(self) -> dict[str, Judged]:
        """Every judged record, read again (for a caller that wants them whole: tests, small files)."""
        return {rid: self.index.record(slot) for rid, slot in self.index.slots.items()}

    def claim(self, rid: str) -> JudgeClaim:
        slot = self.index.slot(rid)
        return JudgeClaim(None, missing=True) if slot is None else JudgeClaim(self.index.first_error(slot))

    def check(self, record: Response) -> None:
        """ValueError when the judged record of this id is another response (other steps)."""
        slot = self.index.slot(record.id)
        if slot is not None and not self.index.same_steps(slot, record.steps):
            raise ValueError(f"{self.path} holds other steps for id {record.id!r}: the judge saw another response")

    def settings(self) -> dict[str, str]:
        return {"path": self.path, "sha256": self.sha256}

    def check_resume(self, output: str) -> None:
        """Refuse to continue an output whose records were verified against another judged file."""
        if output == STDIO or not Path(output).is_file():
            return
        with open(output, "rb") as fh:
            for number, line in enumerate(fh, 1):
                try:
                    mc = orjson.loads(line).get("mc")
                except (orjson.JSONDecodeError, AttributeError):
                    continue  # a torn last line: the writer cuts it
                sha = mc.get("judged_sha256") if isinstance(mc, dict) else None
                if sha != self.sha256:
                    said = f"judged file sha256 {sha[:12]}" if isinstance(sha, str) else "no judged file"
                    raise UsageError(
                        f"{output} line {number} was verified against {said}, but --judged {self.path} has sha256 "
                        f"{self.sha256[:12]}: a resumed verify run must use the judged file it started with "
                        "(or write a new output)")
