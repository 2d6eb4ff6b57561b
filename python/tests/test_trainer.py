"""The trainer in this process on the tiny model: logprobs, learning, SFT, resume, merge, errors.

Runs fill the inbox with every step file and `stop` before starting, so `train` trains them all and
returns; test_trainer_mailbox.py drives a live subprocess the way train-agent does."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from rust_config import merge as merge_config
from rust_config import rust_config
from safetensors.torch import load_file

from train_agent.models import ModelSource, load_model
from train_agent.trainer.batches import Sample, collate
from train_agent.trainer.cli import main, train

# ------------------------------------------------------------------------- helpers (shared by files)
from train_agent.trainer.config import Config, OptimSettings, lr_multiplier
from train_agent.trainer.loss import grpo_loss

# ------------------------------------------------------------------------- helpers (shared by files)
from train_agent.trainer.model import REFERENCE, build_model, reference_policy, trained_logprobs

# ------------------------------------------------------------------------- helpers (shared by files)


def make_config(model_dir, out, **over) -> dict:
    """GRPO's config as Rust writes it, sized for the tiny model on a CPU."""
    cfg = rust_config(
        "grpo",
        model=str(model_dir),
        output_dir=str(out),
        micro_batch_tokens=48,
        accelerator="cpu",
        precision="32-true",
        lora=dict(r=4, alpha=8),
        optim=dict(lr=1e-3, total_steps=1000),
        loss=dict(max_len_norm=None),
        seed=0,
        poll_interval_s=0.01,
    )
    return merge_config(cfg, **over)


def synthetic_samples(seed: int, n: int = 5) -> list[dict]:
    """Random prompts and completions; old logprobs near the tiny model's (about -ln V)."""
    rng = random.Random(seed)
    samples = []
    for i in range(n):
        length, prompt = rng.randint(8, 20), rng.randint(3, 6)
        samples.append(
            dict(
                input_ids=[rng.randrange(1, 1000) for _ in range(length)],
                loss_mask=[0] * prompt + [1] * (length - prompt),
                logprobs=[0.0] * prompt + [-10.8 + rng.uniform(-0.1, 0.1) for _ in range(length - prompt)],
                advantage=rng.uniform(-1, 1),
                group_id=i // 2,
            )
        )
    return samples


def write_step(out, step: int, samples: list[dict], **options) -> None:
    inbox = Path(out) / "trainer" / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    tmp = inbox / f"step-{step:06d}.json.tmp"
    # rollout metrics as the Rust side sends them (numbers, null, nested objects are dropped)
    rollout = {"reward": step / 10, "completion_rate": 0.5, "ground_truth": None, "time": {"x": 1}}
    tmp.write_text(json.dumps({"step": step, "samples": samples, "rollout": rollout, **options}))
    tmp.rename(inbox / f"step-{step:06d}.json")


def run(cfg: dict, steps: dict[int, list[dict]]) -> dict[int, dict]:
    """Trains the given steps in this process; returns the outbox metrics by step."""
    for step, samples in steps.items():
        write_step(cfg["output_dir"], step, samples)
    (Path(cfg["output_dir"]) / "trainer" / "inbox" / "stop").touch()
    train(Config.from_dict(cfg))
    return outbox(cfg["output_dir"])


def outbox(out) -> dict[int, dict]:
    files = sorted((Path(out) / "trainer" / "outbox").glob("step-*.json"))
    return {int(f.stem[5:]): json.loads(f.read_text()) for f in files}


def adapter(out, step: int) -> dict[str, torch.Tensor]:
    return load_file(Path(out) / "checkpoints" / f"step-{step:06d}" / "adapter" / "adapter_model.safetensors")


def assert_same_adapter(a, b, atol=1e-6):
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=atol, rtol=1e-4, msg=k)


def sequence_logprob(model, ids: list[int], start: int) -> float:
    """Sum of log p(ids[t] | ids[:t]) for t >= start, from a plain forward."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    logp = torch.log_softmax(logits.float(), -1)
    return sum(logp[t - 1, ids[t]].item() for t in range(start, len(ids)))


def plain_logprobs(model, s: Sample) -> list[float]:
    """log p(token t | tokens before t) at the trained positions, from an unpadded forward."""
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([s.input_ids])).logits[0].float(), -1)
    return [logp[t - 1, s.input_ids[t]].item() for t in range(1, len(s.input_ids)) if s.loss_mask[t]]


# ---------------------------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def grpo_run(tiny_model_dir, tmp_path_factory):
    """Three uninterrupted GRPO steps with warmup, cosine decay, LoRA dropout and a KL term."""
    out = tmp_path_factory.mktemp("grpo")
    cfg = make_config(
        tiny_model_dir,
        out,
        lora=dict(dropout=0.1),
        optim=dict(warmup_steps=2, schedule="cosine", total_steps=5),
        loss=dict(beta=0.05, aggregation="seq-mean-token-mean"),
    )
    steps = {s: synthetic_samples(s) for s in (1, 2, 3)}
    return cfg, steps, run(cfg, steps)


def test_recomputed_logprobs_match_a_plain_forward_and_the_base_model(tiny_model_dir, tmp_path):
    cfg = Config.from_dict(make_config(tiny_model_dir, tmp_path))
    model = build_model(cfg, torch.float32).eval()
    base = load_model(ModelSource.parse(str(tiny_model_dir)), "cpu", torch.float32).eval()
    a = Sample(list(range(10, 22)), [0] * 4 + [1] * 8, [0.0] * 12, 1.0, 1.0)
    b = Sample(list(range(40, 47)), [0] * 2 + [1] * 5, [0.0] * 7, 1.0, 1.0)
    mb = collate([a, b])  # b is right-padded
    with torch.no_grad():
        logp, _ = trained_logprobs(model, mb)
    expected = []
    for s in (a, b):
        with_adapter = plain_logprobs(model, s)
        assert plain_logprobs(base, s) == pytest.approx(with_adapter, abs=1e-5)  # fresh adapter: B = 0
        expected += with_adapter
    assert logp.tolist() == pytest.approx(expected, abs=1e-5)

    # first update with the sampler's own logprobs: the importance ratio is exactly 1, nothing clipped
    m = mb["loss_mask"]
    _, stats = grpo_loss(logp, logp.clone(), mb["advantages"][m], mb["weights"][m], 0.2, 0.28)
    assert stats["ratio_sum"].item() == pytest.approx(m.sum().item())
    assert stats["clip_low"].item() == stats["clip_high"].item() == 0


def test_bf16_mixed_keeps_lora_inputs_bf16_same_values_less_memory(tiny_model_dir, tmp_path):
    from peft.tuners.tuners_utils import BaseTunerLayer

    cfg = Config.from_dict(make_config(tiny_model_dir, tmp_path, precision="bf16-mixed"))
    model = build_model(cfg, torch.bfloat16)
    layers = [m for m in model.modules() if isinstance(m, BaseTunerLayer)]
    assert layers and not any(m.cast_input_dtype_enabled for m in layers)
    torch.manual_seed(0)
    for name, p in model.named_parameters():
        if "lora_B" in name:  # a trained adapter, so both LoRA matmuls carry gradient
            torch.nn.init.normal_(p, std=0.02)
    mb = collate([Sample(list(range(10, 42)), [0] * 12 + [1] * 20, [0.0] * 32, 1.0, 1.0)])
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def run(cast: bool):
        for m in layers:
            m.cast_input_dtype_enabled = cast
        model.zero_grad()
        kept = {}  # distinct activation storages the autograd graph keeps for the backward pass

        def pack(t):
            if t.untyped_storage().data_ptr() not in weights:
                kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        with torch.autocast("cpu", dtype=torch.bfloat16), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            logp, _ = trained_logprobs(model, mb)
        (logp * torch.linspace(-1, 1, len(logp))).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        return logp.detach(), grads, sum(kept.values())

    logp_cast, grads_cast, kept_cast = run(True)
    logp, grads, kept = run(False)
    assert torch.equal(logp, logp_cast)
    assert all(torch.equal(grads[n], grads_cast[n]) for n in grads)
    # one bf16 copy of each adapted layer's input fewer: 16% of this tiny model's activations
    assert kept < 0.9 * kept_cast, (kept, kept_cast)


def test_grpo_raises_the_rewarded_completion(tiny_model_dir, tmp_path):
    prompt, good, bad = [11, 12, 13, 14, 15], [101, 102, 103, 104, 105], [201, 202, 203, 204, 205]
    base = load_model(ModelSource.parse(str(tiny_model_dir)), "cpu", torch.float32).eval()

    def sample(completion, advantage):
        ids = prompt + completion
        logp = torch.log_softmax(base(input_ids=torch.tensor([ids])).logits[0].detach(), -1)
        old = [0.0] * len(prompt) + [logp[t - 1, ids[t]].item() for t in range(len(prompt), len(ids))]
        return dict(
            input_ids=ids,
            loss_mask=[0] * len(prompt) + [1] * len(completion),
            logprobs=old,
            advantage=advantage,
            group_id=0,
        )

    with torch.no_grad():
        steps = {s: [sample(good, 1.0), sample(bad, -1.0)] for s in (1, 2, 3)}
    cfg = make_config(tiny_model_dir, tmp_path, optim=dict(lr=5e-3))
    metrics = run(cfg, steps)
    assert metrics[1]["ratio_mean"] == pytest.approx(1.0, abs=1e-5)  # on-policy first step
    from peft import PeftModel

    tuned = PeftModel.from_pretrained(
        load_model(ModelSource.parse(str(tiny_model_dir)), "cpu", torch.float32),
        str(tmp_path / "checkpoints" / "step-000003" / "adapter"),
    ).eval()
    n = len(prompt)
    before = sequence_logprob(base, prompt + good, n) - sequence_logprob(base, prompt + bad, n)
    after = sequence_logprob(tuned, prompt + good, n) - sequence_logprob(tuned, prompt + bad, n)
    assert after > before + 1.0, (before, after)


def test_the_kl_reference_of_a_warm_start_is_its_start_adapter(tiny_model_dir, tmp_path):
    # A start adapter unlike the base model: one large step without a KL term (no LoRA dropout).
    start_cfg = make_config(tiny_model_dir, tmp_path / "start", optim=dict(lr=0.05, total_steps=10))
    run(start_cfg, {1: synthetic_samples(1)})
    start = tmp_path / "start" / "checkpoints" / "step-000001" / "adapter"
    cfg = make_config(tiny_model_dir, tmp_path / "kl", loss=dict(beta=0.05, aggregation="seq-mean-token-mean"))
    cfg["lora"]["init_adapter"] = str(start)

    # Under reference_policy the model plays its start adapter, which is far from the base model
    # (the reference before: the adapter off), and the trained adapter is the active one after.
    model = build_model(Config.from_dict(cfg), torch.float32)
    mb = collate([Sample(list(range(10, 22)), [0] * 4 + [1] * 8, [0.0] * 12, 1.0, 1.0)])
    with torch.no_grad():
        policy, _ = trained_logprobs(model.eval(), mb)
        with reference_policy(model):
            ref, _ = trained_logprobs(model, mb)
        with model.disable_adapter():
            base, _ = trained_logprobs(model, mb)
    assert ref.tolist() == pytest.approx(policy.tolist(), abs=1e-6)
    assert (base - policy).abs().max() > 1e-3, "the start adapter must differ from the base model"
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trained and all(".default." in n for n in trained), sorted(trained)[:4]

    # Training: the first step's policy is the start adapter, so its KL is zero; the second moved.
    metrics = run(cfg, {1: synthetic_samples(2), 2: synthetic_samples(3)})
    assert metrics[1]["kl"] == pytest.approx(0.0, abs=1e-7)
    assert metrics[2]["kl"] > 1e-7
    # Checkpoints hold the trained adapter alone, as before.
    saved = tmp_path / "kl" / "checkpoints" / "step-000002" / "adapter"
    assert not (saved / REFERENCE).exists()
    assert sorted(p.name for p in saved.iterdir()) == sorted(p.name for p in start.iterdir())


def test_sft_lowers_the_nll_of_its_sample(tiny_model_dir, tmp_path):
    sample = dict(input_ids=list(range(30, 50)), loss_mask=[0] * 5 + [1] * 15)  # no logprobs, no advantage
    cfg = make_config(tiny_model_dir, tmp_path, loss=dict(kind="sft"), optim=dict(lr=1e-2), gradient_checkpointing=True)
    metrics = run(cfg, {s: [sample] for s in (1, 2, 3, 4)})
    nll = [metrics[s]["loss"] for s in (1, 2, 3, 4)]  # each is measured before its step's update
    assert nll[0] == pytest.approx(metrics[1]["entropy"], rel=0.05)  # a random model: NLL ~ entropy ~ ln V
    assert nll[3] < nll[2] < nll[1] < nll[0]
    assert metrics[1]["kl"] is None and metrics[1]["ratio_mean"] is None


def test_every_step_writes_metrics_and_a_loadable_changing_adapter(grpo_run, tiny_model_dir):
    cfg, _, metrics = grpo_run
    assert sorted(metrics) == [1, 2, 3]
    m = metrics[2]
    for key in (
        "loss",
        "policy_loss",
        "kl",
        "entropy",
        "clip_fraction_low",
        "clip_fraction_high",
        "ratio_mean",
        "grad_norm",
        "lr",
        "tokens",
        "trained_tokens",
        "tokens_per_s",
        "data_s",
        "forward_backward_s",
        "optimizer_s",
        "save_s",
        "peak_memory_gb",
        "checkpoint",
    ):
        assert m[key] is not None, key
    assert m["kl"] > 0 and m["grad_norm"] > 0
    # lr: warmup 2 steps (0.5, 1.0 of 1e-3), then cosine over the 3 remaining of total_steps=5
    assert [metrics[s]["lr"] for s in (1, 2, 3)] == pytest.approx([5e-4, 1e-3, 1e-3])
    out = cfg["output_dir"]
    ad = [adapter(out, s) for s in (1, 2, 3)]
    for k in ad[0]:
        if "lora_B" in k:
            assert ad[0][k].abs().max() > 0 and not torch.equal(ad[0][k], ad[2][k])
    from peft import PeftModel

    PeftModel.from_pretrained(
        load_model(ModelSource.parse(str(tiny_model_dir)), "cpu", torch.float32),
        str(Path(out) / "checkpoints" / "step-000003" / "adapter"),
    )
    csv = (Path(out) / "trainer" / "logs" / "version_0" / "metrics.csv").read_text().splitlines()
    assert "grad_norm" in csv[0] and len(csv) == 4
    header = csv[0].split(",")
    assert "rollout/reward" in header and "rollout/completion_rate" in header and "rollout/ground_truth" not in header
    assert float(csv[2].split(",")[header.index("rollout/reward")]) == pytest.approx(0.2)


def test_resume_continues_exactly(grpo_run, tmp_path):
    cfg, steps, metrics = grpo_run
    first = {**cfg, "output_dir": str(tmp_path / "a")}
    run(first, {1: steps[1], 2: steps[2]})
    assert_same_adapter(adapter(first["output_dir"], 2), adapter(cfg["output_dir"], 2))
    resumed = {
        **cfg,
        "output_dir": str(tmp_path / "b"),
        "resume_from": str(tmp_path / "a" / "checkpoints" / "step-000002"),
    }
    # steps at or before the checkpoint are skipped even if still in the inbox
    after = run(resumed, {2: steps[2], 3: steps[3]})
    assert sorted(after) == [3]
    assert after[3]["lr"] == pytest.approx(metrics[3]["lr"])
    assert after[3]["loss"] == pytest.approx(metrics[3]["loss"], rel=1e-5)
    assert_same_adapter(adapter(resumed["output_dir"], 3), adapter(cfg["output_dir"], 3))


def test_merged_model_gives_the_adapters_logits(grpo_run, tiny_model_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    cfg, _, _ = grpo_run
    ad = str(Path(cfg["output_dir"]) / "checkpoints" / "step-000003" / "adapter")
    assert (
        main(
            [
                "merge",
                "--model",
                str(tiny_model_dir),
                "--adapter",
                ad,
                "--out",
                str(tmp_path / "m"),
                "--dtype",
                "float32",
            ]
        )
        == 0
    )
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "m").eval()
    peft = PeftModel.from_pretrained(
        load_model(ModelSource.parse(str(tiny_model_dir)), "cpu", torch.float32), ad
    ).eval()
    ids = torch.tensor([list(range(100, 120))])
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=ids).logits, peft(input_ids=ids).logits, atol=1e-4, rtol=1e-4)
    assert (tmp_path / "m" / "tokenizer.json").exists()


def test_lr_schedule_by_hand():
    optim = rust_config()["optim"]
    o = OptimSettings(**{**optim, "warmup_steps": 2, "schedule": "cosine", "total_steps": 6, "min_lr_ratio": 0.0})
    assert [lr_multiplier(s, o) for s in range(7)] == pytest.approx([0.5, 1.0, 1.0, 0.8535534, 0.5, 0.1464466, 0.0])
    assert lr_multiplier(10, OptimSettings(**{**optim, "warmup_steps": 0, "schedule": "constant"})) == 1.0


def test_config_errors_teach(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match=r"config.optim: unknown key\(s\) learning_rate\nhint: known keys are lr"):
        Config.from_dict(make_config(tiny_model_dir, tmp_path, optim=dict(learning_rate=1)))
    with pytest.raises(ValueError, match="needs loss.max_len_norm"):
        Config.from_dict(make_config(tiny_model_dir, tmp_path, loss=dict(aggregation="seq-mean-token-sum-norm")))
    with pytest.raises(ValueError, match="hint: use 'ddp'"):
        Config.from_dict(make_config(tiny_model_dir, tmp_path, strategy="fsdp"))
    incomplete = make_config(tiny_model_dir, tmp_path)
    del incomplete["optim"]["lr"]
    with pytest.raises(ValueError, match=r"config.optim: missing key\(s\) lr\nhint: "):
        Config.from_dict(incomplete)


def test_a_bad_step_file_writes_error_json(tiny_model_dir, tmp_path):
    cfg = make_config(tiny_model_dir, tmp_path)
    write_step(tmp_path, 1, [dict(input_ids=[1, 2, 3], loss_mask=[0, 1], logprobs=[0, 0, 0], advantage=1)])
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert main(["--config", str(tmp_path / "config.json")]) == 1
    err = json.loads((tmp_path / "trainer" / "error.json").read_text())
    assert "sample 0" in err["error"] and "Traceback" in err["traceback"]


def test_an_on_policy_step_trains_todays_loss_and_a_lagging_one_weighs_by_importance(tiny_model_dir, tmp_path):
    """Staleness 0 is the synchronous loop: its micro-batches take exactly the clipped loss
    against the sampler's logprobs (the same value and gradients), and its report has no
    importance weights; a step an older policy drew (policy_lag 1) takes the off-policy loss."""
    from train_agent.trainer.batches import parse_samples, plan_step
    from train_agent.trainer.module import PolicyModule

    cfg = Config.from_dict(make_config(tiny_model_dir, tmp_path))
    module = PolicyModule(cfg)
    mb = plan_step(parse_samples(synthetic_samples(3), "test"), 0, 1, 4096, "token-mean")[0]
    mask, lc = mb["loss_mask"], cfg.loss
    params = [p for p in module.model.parameters() if p.requires_grad]

    def loss_and_grads(loss):
        return loss.detach(), torch.autograd.grad(loss, params, allow_unused=True)

    got, got_grads = loss_and_grads(module.micro_batch_loss(mb, 0)[0])
    logp, _ = trained_logprobs(module.model, mb, lc.temperature)
    today = grpo_loss(
        logp, mb["old_logprobs"][mask], mb["advantages"][mask], mb["weights"][mask], lc.epsilon_low, lc.epsilon_high
    )[0]
    want, want_grads = loss_and_grads(today)
    assert torch.equal(got, want)
    for g, w in zip(got_grads, want_grads):
        assert (g is None and w is None) or torch.equal(g, w)
    lagging, stats = module.micro_batch_loss(mb, 1)
    assert not torch.equal(lagging.detach(), got), "the off-policy loss weighs by importance, not the ratio"
    assert stats["is_weight_sum"] > 0

    cfg_dict = make_config(tiny_model_dir, tmp_path / "run")
    write_step(cfg_dict["output_dir"], 1, synthetic_samples(1))
    write_step(cfg_dict["output_dir"], 2, synthetic_samples(2), policy_lag=1)
    report = run(cfg_dict, {})
    assert report[1]["importance_weight_mean"] is None and report[1]["importance_truncated"] is None
    assert 0 < report[2]["importance_weight_mean"] <= lc.importance_cap
    assert 0 <= report[2]["importance_truncated"] <= 1
