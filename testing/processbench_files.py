"""ProcessBench's four splits as users download them (tests/data/processbench/hf: the Hugging Face
dataset repo's per-split JSON arrays, cut; tests/data/SOURCES.md), the Parquet layouts the Hub
serves them in, built here from that JSON, and step scores with a known shape for PRM tests."""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from testing.paths import TEST_DATA

HF_PROCESSBENCH = TEST_DATA / "processbench" / "hf"
SPLITS = ("gsm8k", "math", "olympiadbench", "omnimath")

# Where the Hub puts a split's Parquet: its converted files (refs/convert/parquet) and push_to_hub's.
PARQUET_LAYOUTS = {
    "converted": "default/{split}/{shard:04d}.parquet",
    "push_to_hub": "data/{split}-{shard:05d}-of-{shards:05d}.parquet",
}


def hf_split(split: str) -> list[dict[str, Any]]:
    return json.loads((HF_PROCESSBENCH / f"{split}.json").read_text(encoding="utf-8"))


def hf_form(rows: list[dict[str, Any]]) -> bytes:
    """A split file's bytes as the Hugging Face release writes them (indent 2, UTF-8 kept, no final newline)."""
    return json.dumps(rows, indent=2, ensure_ascii=False).encode("utf-8")


def write_parquet_layout(root: Path, layout: str, rows_by_split: dict[str, list[dict]], shards: int = 1) -> list[Path]:
    """Each split's rows as Parquet in one of the Hub's layouts (split in `shards` files, in order)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    written = []
    for split, rows in rows_by_split.items():
        size = -(-len(rows) // shards)
        for shard in range(shards):
            path = root / PARQUET_LAYOUTS[layout].format(split=split, shard=shard, shards=shards)
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(rows[shard * size:(shard + 1) * size]), path)
            written.append(path)
    return written


# A PRM that is less sure on harder splits: its scores drop by this much there.
SPLIT_SHIFT = {"gsm8k": 0.0, "math": -0.05, "olympiadbench": -0.12, "omnimath": -0.18}


def step_scores(row: dict[str, Any]) -> list[float]:
    """Noisy step scores for a ProcessBench row: high before its first error, low from it on,
    lower overall on the harder splits; the same for a row on every run (seeded by its id)."""
    rng = random.Random(row["id"])
    shift = SPLIT_SHIFT[row["id"].split("-")[0]]
    out = []
    for i in range(len(row["steps"])):
        base = 0.8 if row["label"] == -1 or i < row["label"] else 0.3
        out.append(round(min(1.0, max(0.0, base + shift + rng.gauss(0.0, 0.2))), 3))
    return out
