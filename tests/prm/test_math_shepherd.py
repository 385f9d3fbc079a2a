"""`score` reads a Math-Shepherd-style PRM (a causal LM, P(+) against P(-) at each ` ки` tag) named by
its hub id from a local Hugging Face cache, and gives the scores math-shepherd-mistral-7b-prm's
model card computes (restated below, on the same tiny checkpoint, through transformers' own cache
lookup); `evaluate` then reads them as ProcessBench predictions. A hub id missing from the cache
is exit 2 naming it and the cache. No vLLM: transformers runs the LM."""
from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from testing.jsonl_files import write_jsonl
from testing.prm_fixtures import world_responses
from testing.processbench_files import HF_PROCESSBENCH, hf_split
from testing.tiny_prms import assert_step_scores, build_shepherd_lm, hub_cache, score_by_hub_id

CLI = [sys.executable, "-m", "prm_annotate"]
REPO_ID = "prm-annotate-tests/tiny-math-shepherd"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    from huggingface_hub import scan_cache_dir

    tmp = tmp_path_factory.mktemp("shepherd")
    hub = tmp / "hub"
    snapshot = hub_cache(hub, REPO_ID, build_shepherd_lm(tmp / "lm"))
    # The layout is the one huggingface_hub itself reads: its scanner finds the repo, whole.
    (repo,) = scan_cache_dir(hub).repos
    assert repo.repo_id == REPO_ID and [r.commit_hash for r in repo.revisions] == [snapshot.name]
    return hub, snapshot


def card_step_scores(hub, responses):
    """math-shepherd-mistral-7b-prm's card, as written there (the model and tokenizer from the hub id, offline),
    on these responses: `question + " " + output`, `output` the steps as "Step k: ... ки" joined by "\\n"."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    good_token, bad_token, step_tag = "+", "-", "ки"
    tokenizer = AutoTokenizer.from_pretrained(REPO_ID, cache_dir=hub, local_files_only=True)
    candidate_tokens = tokenizer.encode(f"{good_token} {bad_token}")[1:]
    step_tag_id = tokenizer.encode(f"{step_tag}")[-1]
    model = AutoModelForCausalLM.from_pretrained(REPO_ID, cache_dir=hub, local_files_only=True).eval()
    out = []
    for r in responses:
        output = "\n".join(f"Step {k}: {step} {step_tag}" for k, step in enumerate(r["steps"], 1))
        input_for_prm = f"{r['problem']} {output}"
        input_id = torch.tensor([tokenizer.encode(input_for_prm)])
        with torch.no_grad():
            logits = model(input_id).logits[:, :, candidate_tokens]
            scores = logits.softmax(dim=-1)[:, :, 0]
            step_scores = scores[input_id == step_tag_id]
        out.append(step_scores.tolist())
    return out


def test_math_shepherd_scores_equal_the_cards_reading(cache, tmp_path):
    hub, snapshot = cache
    # ProcessBench's own rows (their steps carry no "Step k:"), and world responses of other lengths.
    bench = [{k: r[k] for k in ("id", "problem", "steps")} for r in hf_split("gsm8k")]
    responses = bench + [{k: r[k] for k in ("id", "problem", "steps")} for r in world_responses(3, seed=5)]
    # A batch size that splits the input, so padded batches of several lengths are read.
    scored, settings = score_by_hub_id(hub, REPO_ID, responses, tmp_path, "--batch-size", "4")
    assert_step_scores(scored, responses, card_step_scores(hub, responses), 1e-5, REPO_ID, "math-shepherd")
    assert settings["scorer"] == "math-shepherd" and settings["revision"] == snapshot.name
    assert settings["checkpoint"] == str(snapshot)

    # score + evaluate: ProcessBench's split file is the gold.
    ev = subprocess.run([*CLI, "evaluate", str(tmp_path / "scored.jsonl"), "--gold",
                         str(HF_PROCESSBENCH / "gsm8k.json"), "--pred-field", "prm.first_error", "--json"],
                        capture_output=True, text=True, timeout=120)
    assert ev.returncode == 0, ev.stderr
    assert orjson.loads(ev.stdout)["splits"]["gsm8k"]["n"] == len(bench)


def test_a_hub_id_missing_from_the_cache_is_exit_2(cache, tmp_path):
    hub, _ = cache
    src = write_jsonl(tmp_path / "responses.jsonl", [{"id": "a", "problem": "p", "steps": ["s"]}])
    out = tmp_path / "scored.jsonl"
    env = {**os.environ, "HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([*CLI, "score", str(src), "-o", str(out), "--model", "prm-annotate-tests/absent"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 2
    assert "prm-annotate-tests/absent" in run.stderr and str(hub) in run.stderr
    assert not out.exists()


def test_the_scorer_follows_from_the_checkpoints_architecture(cache):
    from prm_annotate.errors import UsageError
    from prm_annotate.prm.checkpoint import locate
    from prm_annotate.prm.scorers import scorer_for

    checkpoint = locate(str(cache[1]))
    assert checkpoint.architectures == ["MistralForCausalLM"]
    assert scorer_for(checkpoint, served=False).name == "math-shepherd"
    # vLLM's /pooling does not read an LM's vocabulary logits at a token: no served Math-Shepherd.
    with pytest.raises(UsageError, match="no scorer reads a MistralForCausalLM over --base-url"):
        scorer_for(checkpoint, served=True)
