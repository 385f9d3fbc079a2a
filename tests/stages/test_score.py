"""`score`: a PRM that `train` wrote loads in vLLM's pooling runner through the CLI, and its step
scores equal the same checkpoint's scores computed with transformers directly (float32, 1e-3);
the output feeds `evaluate` and `bon`; a rerun resumes. The stage's own logic (thresholds, reads
it refuses) is checked without an engine."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from types import SimpleNamespace

import orjson
import pytest

from prm_annotate.io.output import sidecar
from prm_annotate.prm.checkpoint import PRMFormat, prm_token_ids
from prm_annotate.records import Response
from prm_annotate.stages.score import ScoreStage, first_below
from testing.jsonl_files import read_jsonl, write_jsonl
from testing.prm_fixtures import vllm_vs_transformers

CLI = [sys.executable, "-m", "prm_annotate"]
TIMEOUT = 600


def test_first_below():
    assert first_below([0.9, 0.6, 0.4, 0.2], 0.5) == 2
    assert first_below([0.9, 0.5], 0.5) == -1  # at the threshold is not below it
    assert first_below([0.1], 0.05) == -1


class StubScorer:
    """Pure-logic stand-in: fixed probabilities, a whitespace tokenizer with the tag as a word."""

    kind = "stub"
    model = "stub"
    max_model_len = 40
    format = PRMFormat(step_tag="<extra_0>", system_prompt=None)
    tokenizer = SimpleNamespace(chat_template=None,
                                encode=lambda text, add_special_tokens=False: re.findall(r"<extra_0>|[^\s<]+", text))

    def token_ids(self, problem, steps):
        return prm_token_ids(self.tokenizer, self.format, problem, steps)

    def step_probabilities(self, prompts):
        return [[0.9, 0.3][:ids.count("<extra_0>")] if "refused" not in ids else "the server refused it"
                for ids in prompts]

    def settings(self):
        return {"model": self.model}

    def record(self):
        return {"scorer": self.kind}


# one forward pass: its prompt tokens, nothing generated (score's bill, engines/bill.py)
BILL = {"requests": 1, "prompt_tokens": 5, "generated_tokens": 0, "thought_tokens": 0}


def test_stage_outcomes_without_an_engine():
    records = [Response(id="ok", problem="p", steps=["a", "b"]),
               Response(id="tagged", problem="p", steps=["a<extra_0>", "b"]),
               Response(id="long", problem="p", steps=["word " * 50]),
               Response(id="three", problem="p", steps=["a", "b", "c"]),
               Response(id="refused", problem="refused", steps=["a"])]
    stage = ScoreStage(StubScorer(), threshold=0.5, engine_info={"model_params": 7_000_000})
    out = {o.id: o for o in stage.process(records)}
    assert stage.bill().record()["compute"] == 5 * 7e6 / 1e9  # only the scored record's tokens, at the given size
    assert out["ok"].records[0].dump()["prm"] == {"scores": [0.9, 0.3], "first_error": 1, "threshold": 0.5,
                                                  "model": "stub", "scorer": "stub", "bill": BILL}
    assert "step tag" in out["tagged"].error
    assert "max_model_len is 40" in out["long"].error
    assert out["three"].error == "the PRM returned 2 scores for 3 steps"  # never padded or invented
    assert out["refused"].error == "the server refused it" and not out["refused"].records


def test_threshold_defaults_to_the_checkpoints_tuned_one():
    class Tuned(StubScorer):
        format = PRMFormat(step_tag="<extra_0>", system_prompt=None, threshold=0.95)

    record = Response(id="ok", problem="p", steps=["a", "b"])
    tuned = ScoreStage(Tuned())
    (out,) = tuned.process([record])
    assert out.records[0].dump()["prm"]["first_error"] == 0 and tuned.settings()["threshold"] == 0.95  # 0.9 < 0.95
    assert tuned.settings()["threshold_source"] == "checkpoint"
    (given,) = ScoreStage(Tuned(), threshold=0.5).process([record])
    assert given.records[0].dump()["prm"] == {"scores": [0.9, 0.3], "first_error": 1, "threshold": 0.5,
                                              "model": "stub", "scorer": "stub", "bill": BILL}
    assert tuned.settings() == {"scorer": "stub", "model": "stub", "threshold": 0.95, "threshold_source": "checkpoint"}


@pytest.mark.engine
def test_vllm_scores_equal_transformers(world_prm, world_prm_scored, tmp_path, heavy):
    # `score` ran once for the world PRM's tests (conftest `world_prm_scored`: 256 held-out responses,
    # --threshold 0.8); transformers restates the first 20 one response at a time.
    done = world_prm_scored
    held_out = done.responses
    gold = write_jsonl(tmp_path / "gold.jsonl", [{"id": r["id"], "label": r["label"]} for r in held_out])
    out = done.out

    scored = read_jsonl(out)
    assert [r["id"] for r in scored] == [r["id"] for r in held_out]
    worst, refs = vllm_vs_transformers(world_prm, scored[:20])
    for rec, ref in zip(scored, refs):
        assert rec["prm"]["first_error"] == first_below(ref, 0.8)
        assert rec["prm"]["model"] == str(world_prm) and rec["prm"]["threshold"] == 0.8
    assert worst < 1e-3, worst
    # Not all equal: the test would pass vacuously on a constant head.
    assert len({round(s, 4) for rec in scored[:20] for s in rec["prm"]["scores"]}) > 5

    manifest = orjson.loads(sidecar(str(out), "manifest.json").read_bytes())["runs"][-1]
    assert manifest["stage"] == "score" and manifest["settings"]["threshold"] == 0.8
    assert manifest["settings"]["step_tag"] == "<extra_0>" and manifest["counts"]["done"] == len(held_out)

    # Its output is a label source like any other, and BoN input.
    ev = subprocess.run([*CLI, "evaluate", str(out), "--gold", str(gold), "--pred-field", "prm.first_error", "--json"],
                        capture_output=True, text=True, timeout=120)
    assert ev.returncode == 0, ev.stderr
    assert orjson.loads(ev.stdout)["overall"]["n"] == len(held_out)
    bon = subprocess.run([*CLI, "bon", str(out), "--gold", str(gold), "--json"], capture_output=True, text=True, timeout=120)
    assert bon.returncode == 0, bon.stderr
    assert orjson.loads(bon.stdout)["n"] == [1, 2]

    # A rerun resumes: on a copy (the shared file and its manifest stay as the other tests read them).
    mine = tmp_path / "scored.jsonl"
    shutil.copyfile(out, mine)
    shutil.copyfile(sidecar(str(out), "manifest.json"), sidecar(str(mine), "manifest.json"))
    before = mine.read_bytes()
    heavy.release()  # the rerun is a child process that may start an engine
    rerun = subprocess.run([str(mine) if part == str(out) else part for part in done.cmd], capture_output=True,
                           text=True, timeout=TIMEOUT)
    assert rerun.returncode == 0 and f"{len(held_out)} already done" in rerun.stderr, rerun.stderr[-3000:]
    assert mine.read_bytes() == before
