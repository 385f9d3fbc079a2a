"""The judged file a `rollout --strategy verify` run checks (`--judged`): read whole and validated
before any work (a bad line is exit 2 naming file and line), identified by its sha256.

Every verify record carries the judge's first error it was checked against and the file's sha256
(`mc.judge_first_error`, `mc.judged_sha256`), so a resumed run can tell that its output was
verified against another judged file, even after a SIGKILL left no manifest entry: it is refused.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import orjson

from prm_annotate.errors import UsageError
from prm_annotate.io.jsonl import STDIO, check_input
from prm_annotate.pipeline.runner import RunOptions, read_validated
from prm_annotate.records import Judged, Response
from prm_annotate.strategies import JudgeClaim


class JudgedFile:
    def __init__(self, path: str, sha256: str, records: dict[str, Judged]):
        self.path, self.sha256, self.records = path, sha256, records

    @classmethod
    def load(cls, path: str) -> "JudgedFile":
        if path == STDIO:
            raise UsageError("--judged must be a file (its sha256 goes into every record and the manifest)")
        check_input(path)
        sha256 = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        records = {r.id: r for r in read_validated(path, Judged, RunOptions(path), None)}
        return cls(path, sha256, records)

    def claim(self, rid: str) -> JudgeClaim:
        judged = self.records.get(rid)
        return JudgeClaim(None, missing=True) if judged is None else JudgeClaim(judged.judge.first_error)

    def check(self, record: Response) -> None:
        """ValueError when the judged record of this id is another response (other steps)."""
        judged = self.records.get(record.id)
        if judged is not None and judged.steps != record.steps:
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
