"""Hard2Verify as published (Salesforce/Hard2Verify, split `test`): `unique_id`, `question`,
`model_response_by_step` (the steps), `human_labels` (1 right, 0 wrong, per step),
`human_labels_first_error_idx` (0-based, -1 for none) and `canary`.

The release encrypts the four label and text fields against contamination: each is base64 of the
UTF-8 JSON text XOR-ed with SHA-256(canary) repeated to its length; the authors' `decrypt_sample`
(utils.py of SalesforceAIResearch/Hard2Verify, which the dataset card points to) undoes it, and
`decrypt_row` here does the same (a field that is not such a string is kept as it is, as theirs
keeps it). A row becomes a response with id `unique_id`, the question as the problem, the steps as
they are, and `label` = the first error (ProcessBench's shape); every field is kept, decrypted.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from prm_annotate.io.inputs.base import FieldMap, InputFormat

ENCRYPTED_FIELDS = ("question", "model_response_by_step", "human_labels", "human_labels_first_error_idx")


def keystream(canary: str, length: int) -> bytes:
    digest = hashlib.sha256(canary.encode("utf-8")).digest()
    return (digest * -(-length // len(digest)))[:length]


def decrypt_field(value: str, canary: str) -> Any:
    """One field as the release stores it -> its value (JSON when it parses as JSON, else the text)."""
    if value == "":
        return ""
    data = base64.b64decode(value, validate=True)
    text = bytes(a ^ b for a, b in zip(data, keystream(canary, len(data)))).decode("utf-8")
    try:
        return json.loads(text)
    except ValueError:
        return text


def encrypt_field(value: Any, canary: str) -> str:
    """The inverse of `decrypt_field` (for building files in the release's shape)."""
    text = value if isinstance(value, str) else json.dumps(value)
    data = text.encode("utf-8")
    return base64.b64encode(bytes(a ^ b for a, b in zip(data, keystream(canary, len(data))))).decode("ascii")


def decrypt_row(obj: dict[str, Any]) -> dict[str, Any]:
    canary = obj.get("canary")
    if not isinstance(canary, str):
        return dict(obj)
    out = dict(obj)
    for name in ENCRYPTED_FIELDS:
        value = obj.get(name)
        if isinstance(value, str):
            try:
                out[name] = decrypt_field(value, canary)
            except (binascii.Error, ValueError):  # not encrypted after all (or not by this canary)
                pass
    return out


def detect(obj: dict[str, Any]) -> bool:
    return "model_response_by_step" in obj and "human_labels_first_error_idx" in obj


def normalise(obj: dict[str, Any], stem: str, index: int, fields: FieldMap) -> dict[str, Any]:
    out = decrypt_row(obj)
    out["id"] = out.get("unique_id", f"hard2verify-{stem}-{index}")
    out["problem"] = out.get("question")
    out["steps"] = out.get("model_response_by_step")
    out["label"] = out.get("human_labels_first_error_idx")
    return out


FORMAT = InputFormat("hard2verify", normalise, detect, summary="Hard2Verify's responses with step labels")
