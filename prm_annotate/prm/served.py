"""A `Qwen2ForProcessRewardModel` behind `vllm serve <prm> --runner pooling`, over HTTP (`/pooling`).

The client renders and tokenizes each response itself, with the checkpoint's tokenizer and format
(`--model`: a folder, or a hub id in the local cache; config.json and the tokenizer files are
enough, the weights are not read), by the function the trainer and the in-process scorer use
(`prm_token_ids`), and sends token ids. Not the server's rendering: the server knows nothing of the
format (step tag, system prompt and tuned threshold live in the checkpoint's config.json, which it
does not expose), its chat-style requests take one conversation each, and ids are exactly what
the PRM was trained on. The server's `/tokenize` is asked once, for the tag, to check that both
sides have the same tokenizer.

Which rows `/pooling` returns is a server setting (`--pooler-config`), not a request field, and a
server does not tell it (its `/server_info` exists only in dev mode). So a probe of five tokens,
two of them the tag, finds out at the start:
- 2 rows of two probabilities: step pooling on our tag (`--pooler-config '{"step_tag_id": N}'`),
  one row per step;
- 5 rows: one row per token (`"pooling_type": "ALL"`); the rows at the tag positions are read here;
- anything else stops the run with one line naming the server flag. No rows at all is the common
  case: vLLM fills in `step_tag_id` 151651 (Qwen2.5's `<extra_0>`) for this architecture, so a
  PRM whose tag has another id, served without `--pooler-config`, answers every request with
  nothing. One column is `returned_token_ids` set to one label; rows not summing to 1 are logits
  (`use_activation` off).
Every answer is checked again (one row per tag, probabilities), so a server restarted with other
settings mid-run fails its responses rather than give them wrong scores.

The requests go through the HTTP engine (engines/openai_engine.py: one event loop, `concurrency`
requests in flight, retries with backoff and `Retry-After`, the API key), one response per
request: vLLM fails a whole request for one bad item, so a response fails and is retried alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import urlsplit, urlunsplit

from prm_annotate.engines.openai_engine import OpenAIEngine, RetryableError
from prm_annotate.errors import UsageError
from prm_annotate.prm.checkpoint import ARCHITECTURE, Checkpoint, PRMFormat, prm_token_ids, step_tag_id

VLLM_DEFAULT_STEP_TAG_ID = 151651  # vLLM's Qwen2ForProcessRewardModelConfig: Qwen2.5's <extra_0>


@dataclass(frozen=True)
class Call:
    """One HTTP request to the server."""
    key: str
    method: str
    path: str  # from the server's root (`/pooling` is not under /v1)
    body: dict[str, Any] | None = None


@dataclass
class Answer:
    key: str
    data: Any = None
    error: str | None = None


class PoolingClient(OpenAIEngine):
    """The HTTP engine's machinery for any route of a vLLM server: `Call`s in, `Answer`s out."""

    def __init__(self, base_url: str, **options: Any) -> None:
        super().__init__(base_url, model="", **options)  # its `root`: the address without /v1

    def body(self, r: Call) -> dict[str, Any] | None:  # type: ignore[override]
        return r.body

    def route(self, r: Call) -> tuple[str, str]:
        return r.method, self.root + r.path

    def failed(self, r: Call, message: str) -> Answer:
        return Answer(r.key, error=message)

    def _parse(self, r: Call, data: dict[str, Any]) -> Answer:  # type: ignore[override]
        if r.path == "/pooling":
            items = data.get("data")
            n = len(r.body["input"]) if r.body else 0
            if not isinstance(items, list) or len(items) != n or not all(isinstance(i, dict) for i in items):
                raise RetryableError(f"malformed /pooling answer: expected {n} item(s) in data")
        return Answer(r.key, data)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One request, waited for; UsageError (exit 2) when it fails."""
        (answer,) = self.generate([Call("call", method, path, body)]).values()
        if answer.error is not None:
            raise UsageError(f"the server at {self.root}: {method} {path} {answer.error}")
        return answer.data


def rows_of(item: dict[str, Any]) -> list[Any]:
    rows = item.get("data")
    return rows if isinstance(rows, list) else []


def are_probabilities(rows: list[Any]) -> bool:
    return all(isinstance(r, list) and len(r) == 2 and all(isinstance(p, (int, float)) for p in r)
               and math.isclose(sum(r), 1.0, abs_tol=1e-3) for r in rows)


def rows_kind(rows: list[Any], probe: list[int], tag: str, tag_id: int, root: str) -> str:
    """"step" or "token" from the probe's rows, else UsageError: the one line naming the flag."""
    flag = f"--pooler-config '{{\"step_tag_id\": {tag_id}}}'"
    if rows and are_probabilities(rows) and len(rows) in (probe.count(tag_id), len(probe)):
        return "step" if len(rows) == probe.count(tag_id) else "token"
    where = f"the PRM server at {root}"
    if not rows:
        raise UsageError(f"{where} gives no score at the step tag {tag!r} (token {tag_id}): its pooler reads another "
                         f"token (vLLM's default for {ARCHITECTURE} is {VLLM_DEFAULT_STEP_TAG_ID}); start it with "
                         f"{flag}")
    if all(isinstance(r, list) and len(r) == 1 for r in rows):
        raise UsageError(f"{where} returns one value per row, not [P(wrong), P(right)]: leave returned_token_ids "
                         "out of its --pooler-config (or set it to [0, 1])")
    if all(isinstance(r, list) and len(r) == 2 for r in rows) and not are_probabilities(rows):
        raise UsageError(f"{where} returns logits, not probabilities: leave use_activation out of its "
                         "--pooler-config")
    raise UsageError(f"{where} returns {len(rows)} rows for a probe of {len(probe)} tokens with "
                     f"{probe.count(tag_id)} step tags: start it with {flag}")


def public_url(url: str) -> str:
    """The URL without a user and password in it, as records and manifests keep it."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


class ServedPRMScorer:
    kind = "qwen-prm-served"

    def __init__(self, checkpoint: Checkpoint, base_url: str, **options: Any) -> None:
        from transformers import AutoTokenizer

        self.checkpoint, self.model = checkpoint, checkpoint.name
        self.format = PRMFormat.of_config(checkpoint.config)
        self.tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
        self.step_tag_id = step_tag_id(self.tokenizer, self.format.step_tag)
        self.options = options
        self.client = PoolingClient(base_url, **options)
        try:
            self.server = self._check_server()
        except BaseException:
            self.client.close()
            raise
        self.max_model_len = self.server["max_model_len"]

    def _check_server(self) -> dict[str, Any]:
        """What the server is and pools, checked once before scoring: its model, its tokenizer's
        reading of the tag, and the rows a probe gets back."""
        root, tag, tag_id = self.client.root, self.format.step_tag, self.step_tag_id
        served = self._served_model(self.client.served())
        version = self.client.call("GET", "/version").get("version")
        said = self.client.call("POST", "/tokenize", {"model": served["id"], "prompt": tag,
                                                      "add_special_tokens": False}).get("tokens")
        if said != [tag_id]:
            raise UsageError(f"the PRM server at {root} tokenizes the step tag {tag!r} as {said}, {self.model} as "
                             f"[{tag_id}]: it serves another tokenizer than {self.model}'s")
        filler = 1 if tag_id == 0 else 0
        probe = [filler, tag_id, filler, tag_id, filler]
        answer = self.client.call("POST", "/pooling", {"model": served["id"], "input": [probe]})
        rows = rows_kind(rows_of(answer["data"][0]), probe, tag, tag_id, root)
        if not isinstance(served.get("max_model_len"), int):
            raise UsageError(f"the PRM server at {root} does not say its max_model_len (/v1/models)")
        return {"base_url": public_url(self.client.base_url), "model": served["id"], "root": served.get("root"),
                "max_model_len": served["max_model_len"], "vllm_version": version, "tag_tokens": said,
                "rows": rows, "step_tag_id": tag_id}

    def _served_model(self, models: list[dict[str, Any]]) -> dict[str, Any]:
        """The served model that is this checkpoint: by name, by path on the server, or the only one."""
        for match in (lambda m: m["id"] == self.model, lambda m: m.get("root") == str(self.checkpoint.path)):
            found = [m for m in models if match(m)]
            if len(found) == 1:
                return found[0]
        if len(models) == 1:
            return models[0]
        raise UsageError(f"the PRM server at {self.client.root} serves {[m['id'] for m in models]}: none is "
                         f"{self.model} (by name or path), so which to ask is unclear: serve it alone, or under "
                         f"the name {self.model} (--served-model-name {self.model})")

    def token_ids(self, problem: str, steps: list[str]) -> list[int]:
        return prm_token_ids(self.tokenizer, self.format, problem, steps)

    def step_probabilities(self, prompts: Sequence[list[int]]) -> list[list[float] | str]:
        calls = [Call(str(i), "POST", "/pooling", {"model": self.server["model"], "input": [ids]})
                 for i, ids in enumerate(prompts)]
        answers = self.client.generate(calls)
        return [self._read(answers[c.key], ids) for c, ids in zip(calls, prompts)]

    def _read(self, answer: Answer, ids: list[int]) -> list[float] | str:
        if answer.error is not None:
            return answer.error
        rows = rows_of(answer.data["data"][0])
        if self.server["rows"] == "token":
            if len(rows) != len(ids):
                return f"the PRM server returned {len(rows)} rows for {len(ids)} tokens"
            rows = [row for row, token in zip(rows, ids) if token == self.step_tag_id]
        if not are_probabilities(rows):
            return "the PRM server returned rows that are not two probabilities each"
        return [float(row[1]) for row in rows]

    def settings(self) -> dict[str, Any]:
        return {**self.checkpoint.describe(), "step_tag": self.format.step_tag, "step_tag_id": self.step_tag_id,
                "system_prompt": self.format.system_prompt, "server": self.server,
                "requests": self.options}

    def record(self) -> dict[str, Any]:
        keep = ("base_url", "model", "rows", "step_tag_id")
        return {"scorer": self.kind, "server": {k: self.server[k] for k in keep}}

    def close(self) -> None:
        self.client.close()
