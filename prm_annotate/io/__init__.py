"""Records in and out: JSON Lines (or a JSON array) read with file:line positions, input formats
turned into the generic shape, crash-safe resumable output, run manifests, shards and their merge.

    for where, record in read_records("gsm8k/test.jsonl"):      # ("line 3", {"id", "problem", ...})
        ...
    writer = ResumableWriter("out.jsonl")                        # skips ids already written; locked
"""
from prm_annotate.io.inputs import INPUT_FORMATS, FieldMap, InputFormat, read_records
from prm_annotate.io.jsonl import STDIO, check_input, dumps, is_stream, iter_json_array, iter_jsonl
from prm_annotate.io.manifest import append_manifest
from prm_annotate.io.output import RejectsWriter, ResumableWriter, check_output, sidecar
from prm_annotate.io.sharding import parse_shard, shard_of

__all__ = ["INPUT_FORMATS", "STDIO", "FieldMap", "InputFormat", "RejectsWriter", "ResumableWriter", "append_manifest",
           "check_input", "check_output", "dumps", "is_stream", "iter_json_array", "iter_jsonl", "parse_shard",
           "read_records", "shard_of", "sidecar"]
