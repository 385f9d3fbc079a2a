"""`score` holds to Qwen2.5-Math-PRM's model card: the card's reference scoring, restated below (system
prompt, steps joined and ended by `<extra_0>`, the chat template, P(label 1) at each tag), on a tiny
random checkpoint built with the card's conventions and named by a hub id from a local Hugging
Face cache. The text is checked without an engine; the scores through vLLM (in process, as
`score` runs it) against the card's transformers forward pass."""
from __future__ import annotations

import pytest

from prm_annotate.prm.checkpoint import PRMFormat, locate, prm_token_ids
from testing.processbench_files import hf_split
from testing.tiny_prms import assert_step_scores, build_qwen_card_prm, hub_cache, score_by_hub_id

REPO_ID = "prm-annotate-tests/tiny-Qwen2.5-Math-PRM"
SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."  # the card's data["system"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("qwen-card")
    hub = tmp / "hub"
    return hub, hub_cache(hub, REPO_ID, build_qwen_card_prm(tmp / "prm"))


def responses():
    return [{k: r[k] for k in ("id", "problem", "steps")} for r in hf_split("gsm8k")[:8]]


def card_input_ids(tokenizer, query, response):
    """The card's text, as written there."""
    data = {"system": SYSTEM, "query": query, "response": response}
    messages = [
        {"role": "system", "content": data['system']},
        {"role": "user", "content": data['query']},
        {"role": "assistant", "content": "<extra_0>".join(data['response']) + "<extra_0>"},
    ]
    conversation_str = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    return tokenizer.encode(conversation_str, return_tensors="pt")


def make_step_rewards(logits, token_masks):
    """The card's, as written there."""
    import torch.nn.functional as F

    probabilities = F.softmax(logits, dim=-1)
    probabilities = probabilities * token_masks.unsqueeze(-1)  # bs, seq_len, num_labels
    all_scores_res = []
    for i in range(probabilities.size(0)):
        sample = probabilities[i]  # seq_len, num_labels
        positive_probs = sample[sample != 0].view(-1, 2)[:, 1]  # valid_tokens, num_labels
        non_zero_elements_list = positive_probs.cpu().tolist()
        all_scores_res.append(non_zero_elements_list)
    return all_scores_res


def card_step_rewards(hub, rows):
    """The card's scoring (float32 here, for a comparison at float32's precision), model and
    tokenizer from the hub id, offline. The card loads the hub's remote code for the class its
    config names; this is that architecture in transformers (prm/model.py)."""
    import torch
    from transformers import AutoTokenizer

    from prm_annotate.prm.model import Qwen2ForProcessRewardModel

    tokenizer = AutoTokenizer.from_pretrained(REPO_ID, cache_dir=hub, local_files_only=True)
    model = Qwen2ForProcessRewardModel.from_pretrained(REPO_ID, cache_dir=hub, local_files_only=True,
                                                       dtype=torch.float32).eval()
    out = []
    for r in rows:
        input_ids = card_input_ids(tokenizer, r["problem"], r["steps"])
        with torch.no_grad():
            outputs = model(input_ids=input_ids)
        step_sep_id = tokenizer.encode("<extra_0>")[0]
        token_masks = (input_ids == step_sep_id)
        out.extend(make_step_rewards(outputs[0], token_masks))
    return out


def test_the_text_score_builds_is_the_cards(cache):
    from transformers import AutoTokenizer

    hub, snapshot = cache
    checkpoint = locate(str(snapshot))
    # No prm_annotate block in config.json, as on the hub: Qwen's own step tag and system prompt.
    assert "prm_annotate" not in checkpoint.config and PRMFormat.of_config(checkpoint.config) == PRMFormat()
    assert PRMFormat().system_prompt == SYSTEM
    tokenizer = AutoTokenizer.from_pretrained(snapshot)
    for r in responses():
        ids = prm_token_ids(tokenizer, PRMFormat(), r["problem"], r["steps"])
        assert ids == card_input_ids(tokenizer, r["problem"], r["steps"])[0].tolist()
        assert ids.count(tokenizer.convert_tokens_to_ids("<extra_0>")) == len(r["steps"])


@pytest.mark.engine
def test_score_equals_the_cards_step_rewards(cache, tmp_path, heavy):
    heavy.release()  # one engine at a time on this machine: this one runs in a child process
    hub, snapshot = cache
    rows = responses()
    scored, settings = score_by_hub_id(hub, REPO_ID, rows, tmp_path, "--dtype", "float32", "--batch-size", "4",
                                       "--start-timeout", "300")
    assert_step_scores(scored, rows, card_step_rewards(hub, rows), 1e-4, REPO_ID, "qwen-prm")
    assert settings["revision"] == snapshot.name and settings["checkpoint"] == str(snapshot)
