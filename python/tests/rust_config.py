"""The trainer configs train-agent writes, committed under contract/ by the Rust contract test
(crates/trainer/tests/contract.rs). Tests start from them and override what they need, so they
keep no defaults of their own: the trainer has none either."""

from __future__ import annotations

import json
from pathlib import Path

CONTRACT = Path(__file__).parent / "contract"


def merge(cfg: dict, **over) -> dict:
    """`over` on top of `cfg`; a dict value updates a section's keys instead of replacing it."""
    for k, v in over.items():
        cfg[k] = {**cfg[k], **v} if isinstance(v, dict) and isinstance(cfg.get(k), dict) else v
    return cfg


def rust_config(kind: str = "grpo", **over) -> dict:
    """What Rust writes for a `kind` ("grpo" or "sft") run with default settings, plus `over`."""
    return merge(json.loads((CONTRACT / f"trainer_config.{kind}.json").read_text()), **over)
