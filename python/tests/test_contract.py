"""The Python half of the trainer contract: the config Rust writes loads, a key missing from it is
named, and the step report the trainer writes has exactly the keys Rust reads. (The Rust half,
crates/trainer/tests/contract.rs, writes contract/ and checks that it matches TrainerConfig and
StepReport.)"""

from __future__ import annotations

import json

import pytest
from rust_config import CONTRACT, rust_config
from test_trainer import make_config, run, synthetic_samples

from train_agent.trainer.batches import PACKINGS
from train_agent.trainer.config import POLICY_GRADIENT, SCHEDULES, OptimSettings, load_config, lr_multiplier
from train_agent.trainer.loss import AGGREGATIONS, token_weights


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


@pytest.mark.parametrize("kind", ["grpo", "sft"])
def test_the_step_report_has_the_keys_rust_reads(kind, tiny_model_dir, tmp_path):
    cfg = make_config(tiny_model_dir, tmp_path, loss=dict(kind=kind))
    report = run(cfg, {1: synthetic_samples(1)})[1]
    rust_reads = json.loads((CONTRACT / "step_report.json").read_text())
    assert list(report) == list(rust_reads), "the report's keys differ from ta_trainer::StepReport's"


def test_the_dispatch_covers_exactly_the_values_rust_allows(tmp_path):
    """Rust's enums own the allowed values (contract/allowed_values.json lists them); the trainer's
    dispatch tables must name the same ones, and each of them must work."""
    allowed = json.loads((CONTRACT / "allowed_values.json").read_text())
    tables = {
        "loss.aggregation": AGGREGATIONS,
        "loss.kind": POLICY_GRADIENT,
        "optim.schedule": SCHEDULES,
        "packing": PACKINGS,
    }
    assert {key: sorted(table) for key, table in tables.items()} == {key: sorted(v) for key, v in allowed.items()}
    for aggregation in allowed["loss.aggregation"]:
        assert len(token_weights([3, 1], aggregation, max_len_norm=8)) == 2
    optim = rust_config("grpo")["optim"]
    for schedule in allowed["optim.schedule"]:
        o = OptimSettings(**{**optim, "schedule": schedule, "warmup_steps": 0, "total_steps": 4})
        assert 0 <= lr_multiplier(2, o) <= 1
    for kind in allowed["loss.kind"]:
        path = tmp_path / f"{kind}.json"
        path.write_text(json.dumps(rust_config(kind)))
        assert load_config(path).loss.kind == kind
    for packing in allowed["packing"]:
        path = tmp_path / f"{packing}.json"
        path.write_text(json.dumps(dict(rust_config("grpo"), packing=packing)))
        assert load_config(path).packing == packing
