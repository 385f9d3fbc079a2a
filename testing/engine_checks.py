"""The checks every engine must pass (`EngineChecks`), and the requests they send; a test class
derives from it and provides the `engine` fixture."""
from __future__ import annotations

import re
import uuid
from dataclasses import replace

import pytest

from prm_annotate.engines import GenerationRequest, Sampling
from prm_annotate.engines.sampling import sampling_fields
from prm_annotate.engines.vllm_engine import render_prompt
from testing.heavy import TINY_MAX_MODEL_LEN

QUESTION = "Tom has 3 apples. Then gets 5 more. Then loses 2. How many apples now?"


def request(key: str, messages: tuple[dict, ...], **kw) -> GenerationRequest:
    """A request; `kw` are its fields and its sampling's (`max_tokens=8, seed=1`)."""
    sampling = {k: kw.pop(k) for k in sampling_fields() if k in kw}
    return GenerationRequest(key=key, messages=messages, sampling=Sampling(**sampling), **kw)


def chat(key: str, content: str = QUESTION, **kw) -> GenerationRequest:
    return request(key, ({"role": "user", "content": content},), **kw)


def cont(key: str, partial: str, content: str = QUESTION, **kw) -> GenerationRequest:
    return request(key, ({"role": "user", "content": content}, {"role": "assistant", "content": partial}),
                   continue_final=True, **kw)


def n_tokens(tok, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False))


class EngineChecks:
    """The same checks for both engines; a subclass names its engine's kind and fixture."""

    kind = ""
    engine_fixture = ""

    @pytest.fixture
    def engine(self, request):
        return request.getfixturevalue(self.engine_fixture)

    def test_chat(self, engine, tiny_tokenizer):
        r = chat("c", max_tokens=12, seed=1, temperature=1.0)
        res = engine.generate([r])
        assert set(res) == {"c"}
        g = res["c"]
        assert g.ok, g.error
        assert len(g.texts) == 1 and len(g.finish_reasons) == 1
        assert g.finish_reasons[0] in ("length", "stop")
        assert g.prompt_tokens == n_tokens(tiny_tokenizer, render_prompt(tiny_tokenizer, r))
        assert 0 < g.generated_tokens <= 12
        if g.finish_reasons[0] == "length":
            assert g.generated_tokens == 12

    def test_results_are_keyed_not_ordered(self, engine):
        reqs = [chat(f"k{i}", content=f"{QUESTION} {'x' * i}", max_tokens=4, seed=i) for i in range(5)]
        res = engine.generate(list(reversed(reqs)))
        assert set(res) == {r.key for r in reqs}
        assert all(res[r.key].key == r.key and res[r.key].ok for r in reqs)

    def test_duplicate_keys_rejected(self, engine):
        with pytest.raises(ValueError, match="duplicate"):
            engine.generate([chat("d", max_tokens=2), chat("d", max_tokens=2)])

    def test_continuation_extends_the_partial_answer(self, engine, tiny_tokenizer):
        tok = tiny_tokenizer
        base = chat("base", max_tokens=8)
        partial = "Step 1: 3 + 5 = 8.\n\n"
        req = cont("cont", partial, temperature=0.0, max_tokens=8)
        # The prompt is the new-turn prompt plus the partial text: no end of turn, no new header.
        prompt = render_prompt(tok, req)
        assert prompt == render_prompt(tok, base) + partial
        assert prompt.count("<|im_start|>assistant") == 1 and not prompt.rstrip().endswith("<|im_end|>")

        res = engine.generate([req])["cont"]
        assert res.ok, res.error
        assert res.prompt_tokens == n_tokens(tok, prompt)
        # An independent path to the same open-turn prompt must give the same greedy text.
        text, prompt_tokens = self.reference_continuation(engine, req, prompt)
        assert prompt_tokens == res.prompt_tokens
        assert res.texts == [text]

    def reference_continuation(self, engine, req, prompt):
        raise NotImplementedError

    def test_n_samples(self, engine):
        g = engine.generate([chat("n", n=4, temperature=1.0, max_tokens=16, seed=7)])["n"]
        assert g.ok, g.error
        assert len(g.texts) == 4 and len(g.finish_reasons) == 4
        assert len(set(g.texts)) > 1
        assert 4 <= g.generated_tokens <= 4 * 16

    def test_seed_reproducible_across_batch_compositions(self, engine):
        target = chat("t", seed=1234, temperature=1.0, max_tokens=24, n=2)
        alone = engine.generate([target])["t"].texts
        others = [chat(f"o{i}", content=QUESTION + " and" * i, seed=i, temperature=1.0, max_tokens=8 + 4 * i)
                  for i in range(6)]
        mixed = engine.generate(others[:3] + [target] + others[3:])
        assert mixed["t"].texts == alone
        assert all(mixed[o.key].ok for o in others)
        again = engine.generate([target, *others])["t"].texts
        assert again == alone
        # ...and the seed matters (so the checks above can fail).
        assert engine.generate([replace(target, sampling=replace(target.sampling, seed=4321))])["t"].texts != alone

    def test_top_k(self, engine):
        """top_k reaches the sampler: top-1 sampling at temperature 1 is greedy decoding, and top-k
        off at temperature 1 is not (the random tiny model spreads its probability widely)."""
        greedy = engine.generate([chat("g", temperature=0.0, max_tokens=24)])["g"].texts
        top1 = engine.generate([chat("k", temperature=1.0, top_k=1, n=3, seed=11, max_tokens=24)])["k"].texts
        free = engine.generate([chat("f", temperature=1.0, n=3, seed=11, max_tokens=24)])["f"].texts
        assert top1 == greedy * 3 and free != greedy * 3

    def test_stop_strings(self, engine):
        g = engine.generate([chat("s", stop=("a", "e"), n=4, seed=3, temperature=1.0, max_tokens=32)])["s"]
        assert g.ok, g.error
        assert not any("a" in t or "e" in t for t in g.texts)
        assert "stop" in g.finish_reasons

    def test_prefix_cache_hits_on_shared_prefixes(self, engine, tiny_tokenizer):
        # A prefix no earlier test has sent, long enough to fill several 32-token blocks.
        question = f"{uuid.uuid4().hex} {QUESTION}"
        prefix = " ".join(f"Step {i}: {i} + {i} = {2 * i}." for i in range(1, 25))
        first = engine.generate([cont("r0", prefix, content=question, max_tokens=4, seed=0)])["r0"]
        assert first.ok, first.error
        assert first.cached_prompt_tokens == 0
        # Rollout-shaped: the same problem, prefixes growing step by step.
        steps = [f"\n\nStep {j}: more." for j in range(4)]
        reqs = [cont(f"r{j + 1}", prefix + "".join(steps[: j + 1]), content=question, max_tokens=4, seed=j)
                for j in range(4)]
        res = engine.generate(reqs)
        shared = n_tokens(tiny_tokenizer, render_prompt(tiny_tokenizer, cont("x", prefix, content=question)))
        for r in reqs:
            g = res[r.key]
            assert g.ok, g.error
            assert g.cached_prompt_tokens is not None
            # Every full 32-token block of the shared prefix is served from the cache.
            assert (shared // 32 - 1) * 32 <= g.cached_prompt_tokens < g.prompt_tokens
        share = sum(res[r.key].cached_prompt_tokens for r in reqs) / sum(res[r.key].prompt_tokens for r in reqs)
        assert share > 0.7

    def test_guided_regex(self, engine):
        pattern = r"[0-9]{3}-[a-z]{2}"
        g = engine.generate([chat("g", guided_regex=pattern, n=3, seed=5, temperature=1.0, max_tokens=16)])["g"]
        assert g.ok, g.error
        assert all(re.fullmatch(pattern, t) for t in g.texts), g.texts

    def test_too_long_prompt_fails_alone(self, engine):
        long = chat("long", content="1" * (TINY_MAX_MODEL_LEN + 100), max_tokens=4)
        res = engine.generate([long, chat("fine", max_tokens=4, seed=1)])
        assert res["long"].error and res["long"].texts == []
        assert res["fine"].ok and len(res["fine"].texts) == 1

