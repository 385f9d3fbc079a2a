"""Engine configuration and defaults, and SmolLM2 (slow) through both engines."""

from __future__ import annotations

import dataclasses

import pytest

from prm_annotate.engines import EngineConfig, on_cpu
from prm_annotate.engines.openai_engine import OpenAIEngine
from prm_annotate.errors import UsageError
from testing.engine_checks import chat, cont
from testing.heavy import start_server, start_vllm_engine


def test_engine_config_and_cli_options():
    cfg = EngineConfig(model="m", kv_cache_gb=2.0, timeout=30.0)
    assert cfg.kind == "vllm" and cfg.kv_cache_gb == 2.0 and cfg.concurrency == 16 and cfg.timeout == 30.0
    assert EngineConfig(model="m", base_url="http://h/v1").kind == "openai"
    # The dtype each run records: float32 on CPU unless asked; a server's own dtype is not ours to say.
    assert cfg.describe()["dtype"] == ("float32" if on_cpu() else "auto")
    assert EngineConfig(model="m", dtype="bfloat16").describe()["dtype"] == "bfloat16"
    assert "dtype" not in EngineConfig(model="m", base_url="http://h/v1").describe()
    for bad in ({"concurrency": 0}, {"timeout": 0}, {"gpu_memory_utilization": 1.5}, {"kv_cache_gb": 0},
                {"max_model_len": 0}):
        with pytest.raises(UsageError, match=f"bad engine option: {next(iter(bad))}"):
            EngineConfig(model="m", **bad)
    # The command line's engine options are EngineConfig's fields declared as settings, each flag the
    # field's name but for --request-timeout (the HTTP timeout); the PRM commands leave two out.
    from prm_annotate.prm.scorers import PRM_ENGINE
    from prm_annotate.settings import Setting, declared

    flags = {f.name: declared(f).flags[0] for f in dataclasses.fields(EngineConfig) if isinstance(declared(f), Setting)}
    assert len(flags) == 14 and "model_params" in flags and not {"seed", "block_size", "load_progress"} & set(flags)
    assert {name for name, flag in flags.items() if flag.split("/")[0] != "--" + name.replace("_", "-")} == {"timeout"}
    assert set(PRM_ENGINE.exclude) < set(flags) and set(PRM_ENGINE.changes) < set(flags)


def test_engine_defaults_come_from_one_place():
    """`engines/defaults.py` is the one source: the CLI's options, `EngineConfig` and `VLLMEngine`
    default to its values, and the CPU settings go in on a CPU only, whatever machine runs this."""
    import inspect

    from prm_annotate.engines import defaults
    from prm_annotate.engines.vllm_engine import VLLMEngine

    engine_defaults = {f.name: f.default for f in dataclasses.fields(defaults.VLLMSettings)}
    engine_defaults["start_timeout"] = inspect.signature(VLLMEngine).parameters["start_timeout"].default
    config_defaults = {f.name: f.default for f in dataclasses.fields(EngineConfig) if f.name in engine_defaults}
    assert len(config_defaults) >= 8 and engine_defaults == {**engine_defaults, **config_defaults}
    assert (EngineConfig(model="m").concurrency, EngineConfig(model="m").max_attempts) == (
        defaults.CONCURRENCY, defaults.MAX_ATTEMPTS)
    # What make_engine hands the engine: every setting the config holds, none it does not.
    settings = EngineConfig(model="m", kv_cache_gb=2.0, seed=3).vllm_settings()
    assert set(settings) == set(config_defaults) - {"start_timeout"}
    assert defaults.VLLMSettings(**settings) == defaults.VLLMSettings(kv_cache_gb=2.0, seed=3)
    with pytest.raises(TypeError, match="blocksize"):
        VLLMEngine("/m", blocksize=16)  # a misspelt setting, before any engine starts

    cpu_only = {"enforce_eager": True, "kv_cache_memory_bytes": int(defaults.CPU_KV_CACHE_GB * (1 << 30)),
                "enable_chunked_prefill": False, "block_size": defaults.CPU_BLOCK_SIZE}
    on_a_cpu = defaults.vllm_args("/m", cpu=True)
    assert on_a_cpu["dtype"] == "float32" and {k: on_a_cpu[k] for k in cpu_only} == cpu_only
    on_a_gpu = defaults.vllm_args("/m", cpu=False)
    assert on_a_gpu["dtype"] == "auto" and not set(cpu_only) & set(on_a_gpu)
    assert on_a_gpu["gpu_memory_utilization"] == defaults.GPU_MEMORY_UTILIZATION
    # What the user says wins on either device.
    for cpu in (True, False):
        mine = defaults.vllm_args("/m", cpu=cpu, dtype="bfloat16", kv_cache_gb=2, block_size=16,
                                  enforce_eager=False, enable_chunked_prefill=True)
        assert (mine["dtype"], mine["kv_cache_memory_bytes"], mine["block_size"], mine["enforce_eager"],
                mine["enable_chunked_prefill"]) == ("bfloat16", 2 << 30, 16, False, True)


def test_test_server_gets_the_engine_settings(tiny_model_dir):
    """The `vllm serve` the tests start: vLLM's own server parser reads its command line back to
    the in-process engine's settings (built, not started)."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from prm_annotate.engines.defaults import vllm_args
    from testing.vllm_server import VLLMServer

    server = VLLMServer(tiny_model_dir, max_model_len=2048, kv_cache_gb=0.25)
    parsed = make_arg_parser(FlexibleArgumentParser()).parse_args(server.args[3:])
    expected = vllm_args(str(tiny_model_dir), cpu=on_cpu(), max_model_len=2048, kv_cache_gb=0.25)
    assert {k: getattr(parsed, k) for k in expected} == expected
    assert parsed.enable_prompt_tokens_details and parsed.port == server.port


def test_missing_local_model_path_is_usage_error(tmp_path):
    from prm_annotate.engines.vllm_engine import VLLMEngine

    with pytest.raises(UsageError, match="does not exist"):
        VLLMEngine(str(tmp_path / "nope"))


# -- SmolLM2, the real small model --------------------------------------------------------------

def _check_smollm2(engine):
    res = engine.generate([
        chat("q", content="What is the capital of France?", temperature=0.0, max_tokens=24),
        cont("c", "The capital of France is", content="What is the capital of France?",
             temperature=0.0, max_tokens=8),
    ])
    assert res["q"].ok and res["c"].ok, (res["q"].error, res["c"].error)
    assert "Paris" in res["q"].texts[0], res["q"].texts
    # The continuation goes on with the sentence (it does not restart the answer).
    assert "Paris" in res["c"].texts[0] and not res["c"].texts[0].lstrip().startswith("The capital")


@pytest.mark.slow
@pytest.mark.engine
def test_smollm2_in_process(heavy, smollm2_dir):
    """The default dtype: on CPUs with AVX-512-BF16/AMX, bfloat16 answered this with nonsense."""
    engine = heavy.get("vllm:smollm2", lambda: start_vllm_engine(smollm2_dir, max_model_len=2048),
                       lambda e: e.close())
    assert engine.engine_args["dtype"] == ("float32" if on_cpu() else "auto")
    _check_smollm2(engine)


@pytest.mark.slow
@pytest.mark.engine
def test_smollm2_server(heavy, smollm2_dir, tmp_path_factory):
    server = heavy.get("server:smollm2",
                       lambda: start_server(smollm2_dir, "smollm2", tmp_path_factory.getbasetemp(),
                                            max_model_len=2048),
                       lambda s: s.stop())
    assert server.args[server.args.index("--dtype") + 1] == ("float32" if on_cpu() else "auto")
    _check_smollm2(OpenAIEngine(server.base_url, "smollm2", timeout=120, max_attempts=2))


def test_prepare_smollm2_is_idempotent_and_crash_safe(tmp_path, monkeypatch):
    """The cache logic, with the (slow) conversion replaced by a stub; the real conversion is
    exercised by `smollm2_dir`."""
    from prm_annotate.engines import local_models as models

    calls = []

    def fake_convert(gguf, out):
        calls.append(out)
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(models, "convert_gguf", fake_convert)
    target = tmp_path / "smol"
    target.mkdir()
    (target / "partial.bin").write_text("left by a crash")  # no marker: must be rebuilt
    assert models.prepare_smollm2(target) == target.resolve()
    assert (target / models.MARKER).is_file() and not (target / "partial.bin").exists()
    assert models.prepare_smollm2(target) == target.resolve()
    assert len(calls) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".smol.")]  # no temp leftovers
