"""`export` streams (issue 59): its peak memory does not grow with the rows it writes, its bytes are
the ones a whole-list writer makes, and a bad line last in a large file changes nothing.

Real processes on today's world records (benchmarks/data/world) copied with new ids; peak memory is
read from the operating system (testing/peak_memory.py)."""
from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from prm_annotate.cli import app
from testing.peak_memory import run_measured
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
WORLD = ROOT / "benchmarks" / "data" / "world" / "consensus.jsonl.gz"
SMALL, LARGE = 2_000, 20_000
PER_RECORD = 300  # bytes of peak memory a record may add (issue 59's bound)
runner = CliRunner()

# sha256 of the JSONL each format wrote from the world's 109 consensus records before export
# streamed (the list-based writer): the rows and their order must not change.
WORLD_JSONL = {
    "trl": "2573ac5ca1291c311f40eefda4e2fc3b346b7b14cccc9ebae1a1b35d11054fcb",
    "openrlhf": "32b83a42dc51daba259b4172345fdd3f039fc037858b66ec4ab6db4b86776edb",
    "qwen": "4ffcb0b365deec9426a77ea54af9990add1ed2dc3abb54a64859a249223440a8",
    "math-shepherd": "4869787b743003b9d352282670f380c30e83b70b74cfb21de1fcdfd4e0b90fe5",
}


def world() -> list[dict]:
    with gzip.open(WORLD, "rb") as fh:
        return [orjson.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> dict[int, Path]:
    """The world's consensus records copied with new ids, at two sizes 10x apart (and beside each,
    judged-<n>.jsonl: the judged records of those ids, for critic)."""
    seed, folder, out = world(), tmp_path_factory.mktemp("copies"), {}
    judged = {obj["id"]: obj for obj in (orjson.loads(line) for line in
                                         gzip.open(WORLD.with_name("judged.jsonl.gz")).read().splitlines())}
    for n in (SMALL, LARGE):
        path = folder / f"consensus-{n}.jsonl"
        with open(path, "wb") as fh, open(folder / f"judged-{n}.jsonl", "wb") as jh:
            for i in range(n):
                obj = seed[i % len(seed)]
                rid = f"{obj['id']}.c{i // len(seed)}"
                fh.write(orjson.dumps({**obj, "id": rid}) + b"\n")
                jh.write(orjson.dumps({**judged[obj["id"]], "id": rid}) + b"\n")
        out[n] = path
    return out


def export(*args: str, code: int = 0):
    result = runner.invoke(app, ["export", *args])
    assert result.exit_code == code, result.output
    return result


@pytest.mark.parametrize("fmt, output", [("trl", "rows.jsonl"), ("hf", "ds"), ("critic", "rows.jsonl")])
def test_peak_memory_does_not_grow_with_the_rows(copies, tmp_path, fmt, output):
    """10x the records adds at most 300 bytes a record of peak memory. Holding the rows, as export
    did, added 871 bytes a trl row, 1,755 an hf row and 19,760 a critic record at these sizes: this
    failed on that code."""
    peaks = {}
    for n, path in copies.items():
        judged = ["--judged", str(path.with_name(f"judged-{n}.jsonl"))] if fmt == "critic" else []
        status, err, peak, _ = run_measured([sys.executable, "-m", "prm_annotate", "export", str(path), "--format", fmt,
                                             *judged, "-o", str(tmp_path / f"{n}-{output}")])
        assert status == 0, err
        assert f"{fmt} rows from {n} records" in err
        peaks[n] = peak
    growth = (peaks[LARGE] - peaks[SMALL]) / (LARGE - SMALL)
    assert growth <= PER_RECORD, f"{growth:.0f} bytes a record ({peaks[SMALL] >> 20} -> {peaks[LARGE] >> 20} MB)"


@pytest.mark.parametrize("fmt", sorted(WORLD_JSONL))
def test_jsonl_bytes_are_the_list_writers(tmp_path, fmt):
    source = tmp_path / "consensus.jsonl"
    source.write_bytes(gzip.open(WORLD).read())
    export(str(source), "--format", fmt, "-o", str(tmp_path / "out.jsonl"))
    assert hashlib.sha256((tmp_path / "out.jsonl").read_bytes()).hexdigest() == WORLD_JSONL[fmt]
    # standard output: the same bytes
    assert hashlib.sha256(export(str(source), "--format", fmt, "-o", "-").stdout_bytes).hexdigest() == WORLD_JSONL[fmt]


def test_parquet_and_datasets_bytes_are_the_list_writers(tmp_path):
    """Parquet and the datasets directory, written a batch at a time, are the files pyarrow's
    `write_table` and `DatasetDict.save_to_disk` make from the whole list (one row group at this
    size), but for state.json's fingerprint (datasets hashes the in-memory table)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets import Dataset, DatasetDict

    source = tmp_path / "consensus.jsonl"
    source.write_bytes(gzip.open(WORLD).read())
    export(str(source), "--format", "trl", "--keep-scores", "-o", str(tmp_path / "rows.jsonl"))
    rows = [orjson.loads(line) for line in (tmp_path / "rows.jsonl").read_bytes().splitlines()]
    export(str(source), "--format", "trl", "--keep-scores", "-o", str(tmp_path / "rows.parquet"))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "whole.parquet")
    assert (tmp_path / "rows.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()

    export(str(source), "--format", "hf", "--keep-scores", "--test-split", "0.3", "-o", str(tmp_path / "ds"))
    from datasets import load_from_disk

    written = load_from_disk(str(tmp_path / "ds"))
    test = set(written["test"]["prompt"])
    assert test and not test & set(written["train"]["prompt"])
    DatasetDict({"train": Dataset.from_list([r for r in rows if r["prompt"] not in test]),
                 "test": Dataset.from_list([r for r in rows if r["prompt"] in test])}).save_to_disk(str(tmp_path / "whole"))
    files = sorted(p.relative_to(tmp_path / "whole") for p in (tmp_path / "whole").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "ds") for p in (tmp_path / "ds").rglob("*")
                           if p.is_file() and p.name != "README.md")
    for name in files:
        ours, theirs = (tmp_path / "ds" / name).read_bytes(), (tmp_path / "whole" / name).read_bytes()
        if name.name == "state.json":
            ours, theirs = json.loads(ours), json.loads(theirs)
            del ours["_fingerprint"], theirs["_fingerprint"]
        assert ours == theirs, name


@pytest.mark.parametrize("fmt, output", [("trl", "rows.jsonl"), ("trl", "rows.parquet"), ("hf", "ds")])
def test_a_bad_line_last_in_a_large_file_changes_nothing(copies, tmp_path, fmt, output):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(copies[LARGE].read_bytes() + b'{"id": "last", "steps": \n')
    target = tmp_path / output
    export(str(copies[SMALL]), "--format", fmt, "-o", str(target))
    before = {p: p.read_bytes() for p in ([target] if target.is_file() else target.rglob("*")) if p.is_file()}
    result = export(str(bad), "--format", fmt, "-o", str(target), code=2)
    assert f"bad.jsonl:{LARGE + 1}:" in result.output
    after = {p: p.read_bytes() for p in ([target] if target.is_file() else target.rglob("*")) if p.is_file()}
    assert after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["bad.jsonl", output]), "a temporary file was left"


@pytest.mark.parametrize("which", ["consensus", "judged"])
def test_critic_names_a_duplicate_by_its_first_line(tmp_path, which):
    """critic's passes hold ids and offsets, not lines: a duplicate id is named by reading the file again."""
    files = {}
    for name in ("consensus", "judged"):
        files[name] = tmp_path / f"{name}.jsonl"
        files[name].write_bytes(gzip.open(WORLD.with_name(f"{name}.jsonl.gz")).read())
    first = files["consensus"].read_bytes().splitlines()[0]
    rid = orjson.loads(first)["id"]
    lines = files[which].read_bytes().splitlines()
    at = next(i for i, line in enumerate(lines, start=1) if orjson.loads(line)["id"] == rid)
    files[which].write_bytes(b"\n".join([*lines, lines[at - 1]]) + b"\n")
    result = export(str(files["consensus"]), "--format", "critic", "--judged", str(files["judged"]),
                    "-o", str(tmp_path / "out.jsonl"), code=2)
    assert f"{which}.jsonl:{len(lines) + 1}: duplicate id {rid!r} (first seen at line {at})" in result.output
    assert not (tmp_path / "out.jsonl").exists()


def test_a_duplicate_id_is_named_by_its_first_line(tmp_path):
    """The rows' pass holds ids only: the first line of a duplicate is found by reading the file
    again, past a record with the same id that gave no row (an unparsed judgement)."""
    lines = gzip.open(WORLD.with_name("judged.jsonl.gz")).read().splitlines()
    obj = orjson.loads(lines[5])
    skipped = orjson.dumps({**obj, "judge": {**obj["judge"], "first_error": None}})
    source = tmp_path / "judged.jsonl"
    source.write_bytes(b"\n".join([skipped, *lines, lines[5]]) + b"\n")
    result = export(str(source), "--format", "trl", "-o", str(tmp_path / "out.jsonl"), code=2)
    assert f"judged.jsonl:{len(lines) + 2}: duplicate id {obj['id']!r} (first seen at line 7)" in result.output


def test_critic_reads_a_stream_twice_through_a_temporary_copy(tmp_path):
    """critic reads its input twice (ids, then rows): standard input is kept in a temporary file
    for it, and gives the bytes the file gives."""
    consensus, judged = tmp_path / "consensus.jsonl", tmp_path / "judged.jsonl"
    consensus.write_bytes(gzip.open(WORLD).read())
    judged.write_bytes(gzip.open(WORLD.with_name("judged.jsonl.gz")).read())
    export(str(consensus), "--format", "critic", "--judged", str(judged), "-o", str(tmp_path / "file.jsonl"))
    result = runner.invoke(app, ["export", "-", "--format", "critic", "--judged", str(judged), "-o",
                                 str(tmp_path / "stdin.jsonl")], input=consensus.read_bytes())
    assert result.exit_code == 0, result.output
    assert (tmp_path / "stdin.jsonl").read_bytes() == (tmp_path / "file.jsonl").read_bytes()
    # a duplicate in a stream is named by the line the stream's pass kept
    lines = consensus.read_bytes().splitlines()
    # (a real process: the JSONL reader peeks at standard input, which the test runner's cannot do)
    done = subprocess.run([sys.executable, "-m", "prm_annotate", "export", "-", "--format", "trl", "-o",
                           str(tmp_path / "dup.jsonl")], input=b"\n".join([*lines, lines[2]]) + b"\n", capture_output=True)
    assert done.returncode == 2, done.stderr
    assert f"duplicate id {orjson.loads(lines[2])['id']!r} (first seen at line 3)" in done.stderr.decode()
