"""The Python half of the trainer config contract: what Rust writes loads, and a key missing from it
is named. (The Rust half, crates/trainer/tests/contract.rs, writes contract/ and checks that it
matches TrainerConfig.)"""

from __future__ import annotations

import json

import pytest
from rust_config import rust_config

from train_agent.trainer import load_config


@pytest.mark.parametrize("kind", ["grpo", "sft"])
def test_what_rust_writes_loads(kind, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(rust_config(kind, output_dir=str(tmp_path))))
    cfg = load_config(path)
    assert cfg.loss.kind == kind


@pytest.mark.parametrize("section, key", [(None, "micro_batch_tokens"), ("optim", "lr"), ("loss", "temperature")])
def test_a_missing_key_is_named(section, key, tmp_path):
    cfg = rust_config("grpo")
    del (cfg[section] if section else cfg)[key]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    where = f"config.{section}" if section else "config"
    with pytest.raises(ValueError, match=rf"{where}: missing key\(s\) {key}\nhint: "):
        load_config(path)
