"""The trainer on CUDA: bf16-mixed steps, and DDP over two GPUs matching one (skipped without
CUDA; the DDP test needs two GPUs)."""

from __future__ import annotations

import pytest
import torch
from test_trainer import adapter, assert_same_adapter, make_config, outbox, run, synthetic_samples, write_step
from test_trainer_mailbox import start

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")


def test_bf16_mixed_steps_on_one_gpu(tiny_model_dir, tmp_path):
    cfg = make_config(tiny_model_dir, tmp_path, accelerator="gpu", loss=dict(beta=0.05), gradient_checkpointing=True)
    metrics = run(cfg, {s: synthetic_samples(s) for s in (1, 2, 3)})
    assert [m["peak_memory_kind"] for m in metrics.values()] == ["cuda"] * 3
    assert all(0 < m["grad_norm"] < float("inf") and m["kl"] >= 0 for m in metrics.values())
    assert metrics[1]["ratio_mean"] == pytest.approx(1.0, abs=0.02)  # old logprobs ~ -ln V
    ad = adapter(tmp_path, 3)
    assert all(v.dtype == torch.float32 for v in ad.values())  # LoRA weights stay float32 under bf16-mixed


def multi_gpu_matches_one(tiny_model_dir, tmp_path, strategy):
    steps = {s: synthetic_samples(20 + s, n=6) for s in (1, 2)}
    one = make_config(tiny_model_dir, tmp_path / "one", accelerator="gpu", precision="32-true", micro_batch_tokens=40)
    run(one, steps)
    two = {**one, "output_dir": str(tmp_path / strategy), "strategy": strategy, "devices": 2}
    for step, samples in steps.items():
        write_step(two["output_dir"], step, samples)
    (tmp_path / strategy / "trainer" / "inbox" / "stop").touch()
    log = tmp_path / f"{strategy}.log"
    proc = start(two, log)
    try:
        assert proc.wait(timeout=400) == 0, log.read_text()[-3000:]
    finally:
        proc.kill()
    for step in (1, 2):
        assert_same_adapter(adapter(two["output_dir"], step), adapter(one["output_dir"], step), atol=1e-5)
        a, b = outbox(two["output_dir"])[step], outbox(one["output_dir"])[step]
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-3)


@two_gpus
def test_ddp_on_two_gpus_matches_one(tiny_model_dir, tmp_path):
    multi_gpu_matches_one(tiny_model_dir, tmp_path, "ddp")


def test_liger_kernels_keep_logprobs_and_gradients(tiny_model_dir, tmp_path, monkeypatch):
    """On CUDA the trainer runs Liger's RMSNorm and SwiGLU kernels (trainer.use_liger_kernels): the
    same logprobs and gradients as transformers' own layers, up to bf16 rounding, and models built
    afterwards in the same process keep transformers' layers. SDPA's cuDNN kernels are off."""
    from transformers.models.llama import modeling_llama

    from train_agent.trainer.batches import Sample, collate
    from train_agent.trainer.config import Config
    from train_agent.trainer.model import build_model, trained_logprobs

    cfg = Config.from_dict(make_config(tiny_model_dir, tmp_path, accelerator="gpu", precision="bf16-mixed"))
    samples = [
        Sample(list(range(10 + i, 60 + 3 * i)), [0] * 20 + [1] * (30 + 2 * i), [0.0] * (50 + 2 * i), 1.0, 1.0)
        for i in range(3)
    ]
    mb = {k: v.cuda() for k, v in collate(samples).items()}

    def run(liger: str):
        monkeypatch.setenv("TRAIN_AGENT_LIGER", liger)
        torch.manual_seed(0)
        model = build_model(cfg, torch.bfloat16).cuda()
        for name, p in model.named_parameters():
            if "lora_B" in name:
                torch.nn.init.normal_(p, std=0.02)
        names = {m._get_name() for m in model.modules()}
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logp, _ = trained_logprobs(model, mb)
        (logp * torch.linspace(-1, 1, len(logp), device="cuda")).sum().backward()
        grads = {n: p.grad.float() for n, p in model.named_parameters() if p.requires_grad}
        return names, logp.detach().float(), grads

    plain_mlp = modeling_llama.LlamaMLP
    plain_names, plain, plain_grads = run("0")
    names, logp, grads = run("1")
    assert "LigerSwiGLUMLP" in names and "LigerSwiGLUMLP" not in plain_names
    assert not torch.backends.cuda.cudnn_sdp_enabled(), "the trainer takes SDPA's flash kernels on CUDA"
    assert modeling_llama.LlamaMLP is plain_mlp
    assert torch.allclose(logp, plain, atol=0.05), (logp - plain).abs().max()
    worst = max(((grads[n] - plain_grads[n]).norm() / plain_grads[n].norm().clamp(min=1e-12)).item() for n in grads)
    assert worst < 0.05, f"largest relative gradient difference {worst}"
