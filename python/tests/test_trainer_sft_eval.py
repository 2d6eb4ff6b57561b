"""The step-file options SFT uses: held-out loss before and after the update, and steps without a
checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_trainer import make_config, outbox, synthetic_samples

from train_agent.trainer import module as policy_module
from train_agent.trainer.cli import train
from train_agent.trainer.config import Config


def test_eval_loss_before_and_after_and_steps_without_checkpoint(tiny_model_dir, tmp_path, monkeypatch):
    grad_enabled = []  # per trained_logprobs call: evaluations build no autograd graph

    def recording(*args, **kwargs):
        grad_enabled.append(torch.is_grad_enabled())
        return plain(*args, **kwargs)

    plain = policy_module.trained_logprobs
    monkeypatch.setattr(policy_module, "trained_logprobs", recording)
    cfg = make_config(tiny_model_dir, tmp_path, loss=dict(kind="sft"), optim=dict(lr=1e-2))
    samples = [{k: v for k, v in s.items() if k != "logprobs"} for s in synthetic_samples(3, 4)]
    inbox = Path(tmp_path) / "trainer" / "inbox"
    inbox.mkdir(parents=True)
    steps = {
        1: dict(samples=samples, eval_samples=samples, eval_before=True, eval_after=True, checkpoint=False),
        2: dict(samples=samples),
    }
    for step, body in steps.items():
        (inbox / f"step-{step:06d}.json").write_text(json.dumps({"step": step, **body}))
    (inbox / "stop").touch()
    train(Config.from_dict(cfg))
    m = outbox(tmp_path)
    # before the update the held-out loss is the step's own training loss (same samples, token mean)
    assert m[1]["eval_loss_before"] == pytest.approx(m[1]["loss"], rel=1e-4)
    assert m[1]["eval_loss"] < m[1]["eval_loss_before"], "the update lowered the NLL of what it trained on"
    assert m[1]["eval_tokens"] == sum(sum(s["loss_mask"][1:]) for s in samples)
    assert m[1]["checkpoint"] is None and not (tmp_path / "checkpoints" / "step-000001").exists()
    assert m[2]["checkpoint"] and (tmp_path / "checkpoints" / "step-000002" / "adapter").exists()
    assert m[2]["eval_loss"] is None and m[2]["eval_loss_before"] is None
    # micro-batches of 48 tokens: two evaluations and two training passes over the same samples
    assert grad_enabled.count(False) == grad_enabled.count(True) > 0
