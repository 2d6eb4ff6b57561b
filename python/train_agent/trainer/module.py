"""The trainer: a LoRA adapter updated by GRPO or SFT steps that the Rust side drops in a mailbox.

    python -m train_agent.trainer --config CONFIG.json
    python -m train_agent.trainer merge --model SPEC --adapter DIR --out DIR [--dtype bfloat16]

The process stays alive across steps: one `pytorch_lightning.Trainer.fit` over an endless dataset
that waits for the next step file. One step file in = exactly one optimizer step out. The same
files work for one process, DDP and multi-node (a shared filesystem): every rank reads the whole
step and takes its share (see batches.py).

Config (JSON): every key below is required and no other is allowed. The values, defaults included,
are decided on the Rust side, which owns this contract (crates/trainer: `TrainerConfig`); a
missing or unknown key is an error that names it, so the two sides cannot drift apart. The allowed
values of enum keys are Rust's enums; the tables that dispatch on them here name the same ones
(tests/test_contract.py checks it against contract/allowed_values.json).

    model                   spec for models.ModelSource.parse: hub id, directory, .gguf, packaged name
    output_dir              the run directory
    lora                    {r, alpha, dropout, target_modules: "all-linear" | [names], use_rslora,
                             init_adapter: null | PEFT dir to start from}
    optim                   {lr, weight_decay, betas: [b1, b2], eps, warmup_steps,
                             schedule (SCHEDULES), total_steps, min_lr_ratio,
                             max_grad_norm (0 or null: no clipping)}
    loss                    {kind (POLICY_GRADIENT), epsilon_low, epsilon_high,
                             beta (KL coefficient, reference = the base model: adapter off),
                             aggregation (loss.AGGREGATIONS),
                             max_len_norm: null | Dr. GRPO's constant (needed by seq-mean-token-sum-norm),
                             temperature (logprobs are of softmax(logits / temperature): 1 for the
                             engine's raw logprobs, the sampling temperature for processed_logprobs)}
    micro_batch_tokens      tokens per forward/backward: padded (rows * longest row) or distinct
                            (prefix-tree)
    gradient_checkpointing  true | false
    packing                 batches.PACKINGS: "rows" | "prefix-tree" (not with gradient checkpointing)
    precision               "auto" (bf16-mixed on GPU and on CPUs with AMX, else 32-true) | "bf16-mixed" | "bf16-true" | "32-true"
    strategy                "auto" | "ddp" ("fsdp" is refused for now, with a hint)
    accelerator, devices, num_nodes      as in Lightning
    loggers                 {csv, tensorboard, wandb_project: null | name}
    seed                    LoRA dropout is reseeded from it at every step
    resume_from             null | a checkpoint dir (…/checkpoints/step-000042) to continue from
    poll_interval_s         how often an idle trainer looks at the inbox

Mailbox, under {output_dir}/trainer/:

    inbox/step-000042.json   written by Rust (atomically: write a temp name that does not end in
                             .json, then rename): {step, samples, rollout (optional: the step's
                             rollout metrics, logged as rollout/<name> beside the trainer's)}.
                             The trainer takes the lowest step number above the
                             last one it trained (or resumed from), so numbering may start at 0 or 1.
    inbox/validation-000042.json   written by Rust (atomically) after it validated at that step
                             (0: before training): {step, metrics}. Rank 0 logs the metrics as
                             validation/<name> at that step, after each step it trains and when it
                             stops, each file once per process (Rust writes the final one before stop).
    inbox/stop               ends the process with exit code 0 once every step file present when it
                             appeared is trained. Rust removes a stale one before starting a trainer.
    outbox/step-000042.json  written by rank 0 (atomically) after the optimizer step and the
                             checkpoint: the metrics below. Rust waits for it.
    error.json               {error, traceback, rank} written by a failing rank before it exits 1.
    logs/version_K/metrics.csv   Lightning CSVLogger (TensorBoard / W&B when installed and asked for).

Step files may also ask for no checkpoint (`checkpoint: false`) and for the token-mean loss of
held-out `eval_samples` before and/or after the update (`eval_before`, `eval_after`: SFT's eval loss;
see batches.py).

Outbox metrics: step, loss, policy_loss, kl (token mean of k3; null when beta is 0), entropy
(token mean), clip_fraction_low, clip_fraction_high (share of trained tokens whose clipped term
wins), ratio_mean (null for SFT), grad_norm (before clipping; null when not finite, and then
skipped_nonfinite_grad is true and the update was skipped), lr (used by this step), samples,
tokens (real input tokens), trained_tokens, micro_batches (per rank), tokens_per_s, wait_s (idle,
waiting for the file), data_s, forward_backward_s, optimizer_s, save_s, step_s (all but wait),
peak_memory_gb, peak_memory_kind ("cuda" allocated or "cpu_rss"), checkpoint (the dir, or null when the step
file said checkpoint: false), eval_loss, eval_loss_before, eval_tokens (null unless asked for).

Checkpoints: {output_dir}/checkpoints/step-000042/adapter/ (PEFT format: PeftModel.from_pretrained,
vLLM's load_lora_adapter) and trainer_state.pt (step, optimizer, scheduler, config). Randomness
(LoRA dropout) is reseeded at every step from (seed, step, rank), so a resumed run draws exactly
what an uninterrupted one would without storing generator states.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import resource
import shutil
import sys
import time
import traceback
import warnings
from contextlib import nullcontext
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.strategies import DDPStrategy

from train_agent.models import ModelSource, cpu_has_fast_bf16, load_model, load_tokenizer, parse_dtype
from train_agent.trainer.batches import PACKINGS, Tree, plan_step, read_step_file, read_validation_file
from train_agent.trainer.loss import (
    AGGREGATIONS,
    grpo_loss,
    linear_token_logprobs,
    sft_loss,
    softcap_logits,
    token_logprobs,
)

# ---------------------------------------------------------------------------------------- config


@dataclass
class LoraSettings:
    r: int
    alpha: float
    dropout: float
    target_modules: str | list[str]
    use_rslora: bool
    init_adapter: str | None


@dataclass
class OptimSettings:
    lr: float
    weight_decay: float
    betas: list[float]
    eps: float
    warmup_steps: int
    schedule: str
    total_steps: int
    min_lr_ratio: float
    max_grad_norm: float | None


@dataclass
class LossSettings:
    kind: str
    epsilon_low: float
    epsilon_high: float
    beta: float
    aggregation: str
    max_len_norm: float | None
    temperature: float


@dataclass
class LoggerSettings:
    csv: bool
    tensorboard: bool
    wandb_project: str | None


@dataclass
class Config:
    """No field has a default: see the module docstring."""

    model: str
    output_dir: str
    lora: LoraSettings
    optim: OptimSettings
    loss: LossSettings
    micro_batch_tokens: int
    gradient_checkpointing: bool
    packing: str
    precision: str
    strategy: str
    accelerator: str
    devices: int | str
    num_nodes: int
    loggers: LoggerSettings
    seed: int
    resume_from: str | None
    poll_interval_s: float

    @staticmethod
    def from_dict(data: dict) -> Config:
        sections = {"lora": LoraSettings, "optim": OptimSettings, "loss": LossSettings, "loggers": LoggerSettings}
        _check_keys(Config, data, "config")
        data = dict(data)
        for key, cls in sections.items():
            _check_keys(cls, data[key], f"config.{key}")
            data[key] = cls(**data[key])
        cfg = Config(**data)
        cfg.check()
        return cfg

    def check(self):
        def bad(what, value, allowed):
            raise ValueError(f"config: {what} = {value!r} is not one of {', '.join(map(repr, allowed))}")

        if self.loss.kind not in POLICY_GRADIENT:
            bad("loss.kind", self.loss.kind, POLICY_GRADIENT)
        if self.loss.aggregation not in AGGREGATIONS:
            bad("loss.aggregation", self.loss.aggregation, AGGREGATIONS)
        if self.loss.aggregation == "seq-mean-token-sum-norm" and not self.loss.max_len_norm:
            raise ValueError(
                "config: loss.aggregation seq-mean-token-sum-norm needs loss.max_len_norm\n"
                "hint: set it to the generation budget (max_tokens), as in Dr. GRPO"
            )
        if not self.loss.temperature > 0:
            raise ValueError(
                f"config: loss.temperature = {self.loss.temperature!r} must be > 0\nhint: set it to the "
                f"rollouts' sampling temperature (greedy rollouts carry no policy gradient)"
            )
        if self.packing not in PACKINGS:
            bad("packing", self.packing, PACKINGS)
        if self.packing == "prefix-tree" and self.gradient_checkpointing:
            raise ValueError(
                "config: packing 'prefix-tree' cannot run with gradient_checkpointing (checkpointed "
                "layers drop the KV cache the tree's branches continue)\nhint: use packing 'rows' "
                "with gradient checkpointing"
            )
        if self.optim.schedule not in SCHEDULES:
            bad("optim.schedule", self.optim.schedule, SCHEDULES)
        if self.precision not in ("auto", "bf16-mixed", "bf16-true", "32-true", "32"):
            bad("precision", self.precision, ("auto", "bf16-mixed", "bf16-true", "32-true"))
        if self.strategy == "fsdp":
            raise ValueError(
                "config: strategy 'fsdp' is not supported yet (several backward passes inside one "
                "Lightning training_step break FSDP's state machine)\nhint: use 'ddp': the LoRA "
                "gradients are small and the frozen base is replicated on each GPU"
            )
        if self.strategy not in ("auto", "ddp"):
            bad("strategy", self.strategy, ("auto", "ddp"))

    @property
    def trainer_dir(self) -> Path:
        return Path(self.output_dir) / "trainer"


def _check_keys(cls, data, where: str) -> None:
    """Every field of `cls` and nothing else: the Rust side sends every key (see the docstring)."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected an object, got {data!r}")
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}\nhint: known keys are {', '.join(known)}")
    missing = [k for k in known if k not in data]
    if missing:
        raise ValueError(
            f"{where}: missing key(s) {', '.join(missing)}\nhint: train-agent writes every key "
            f"(crates/trainer, TrainerConfig); a config written by hand must too"
        )


def load_config(path: str | Path) -> Config:
    return Config.from_dict(json.loads(Path(path).read_text()))


def on_gpu(cfg: Config) -> bool:
    return torch.cuda.is_available() and cfg.accelerator in ("auto", "gpu", "cuda")


def resolved_precision(cfg: Config) -> str:
    if cfg.precision == "auto":
        return "bf16-mixed" if on_gpu(cfg) or cpu_has_fast_bf16() else "32-true"
    return "32-true" if cfg.precision == "32" else cfg.precision


def base_dtype(precision: str) -> torch.dtype:
    """Frozen base weights in bf16 whenever compute is bf16 (LoRA weights stay float32 under
    bf16-mixed: PEFT keeps adapters in float32)."""
    return torch.bfloat16 if precision.startswith("bf16") else torch.float32


# --------------------------------------------------------------------------------------- mailbox


def finite_or_null(obj):
    """NaN and infinities become null: they are not JSON, and a reader must not choke on them."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_null(v) for v in obj]
    return obj


def write_json_atomic(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(finite_or_null(obj), indent=1, allow_nan=False))
    os.replace(tmp, path)


def step_name(step: int) -> str:
    return f"step-{step:06d}"


class Inbox(torch.utils.data.IterableDataset):
    """Yields one planned step at a time, blocking until its file appears; ends at `stop`."""

    def __init__(self, cfg: Config, after_step: int, rank: int, world_size: int):
        self.cfg, self.after_step, self.rank, self.world_size = cfg, after_step, rank, world_size
        self.dir = cfg.trainer_dir / "inbox"

    def next_file(self, after: int) -> Path | None:
        while True:
            stopping = (self.dir / "stop").exists()  # looked at first: steps written before stop count
            steps = []
            for p in self.dir.glob("step-*.json"):
                try:
                    steps.append((int(p.stem[5:]), p))
                except ValueError:
                    pass
            pending = sorted(s for s in steps if s[0] > after)
            if pending:
                return pending[0][1]
            if stopping:
                return None
            time.sleep(self.cfg.poll_interval_s)

    def __iter__(self):
        last = self.after_step
        while True:
            t0 = time.perf_counter()
            path = self.next_file(last)
            if path is None:
                return
            t1 = time.perf_counter()
            step, samples, opts = read_step_file(path)
            lc = self.cfg.loss
            budget = self.cfg.micro_batch_tokens
            mbs = plan_step(
                samples, self.rank, self.world_size, budget, lc.aggregation, lc.max_len_norm, self.cfg.packing
            )
            ev = opts["eval_samples"]
            eval_mbs = (
                plan_step(ev, self.rank, self.world_size, budget, "token-mean", packing=self.cfg.packing) if ev else []
            )
            yield dict(
                step=step,
                micro_batches=mbs,
                samples=len(samples),
                tokens=sum(len(s.input_ids) for s in samples),
                checkpoint=opts["checkpoint"],
                eval_micro_batches=eval_mbs,
                eval_before=opts["eval_before"] and bool(ev),
                eval_after=opts["eval_after"] and bool(ev),
                wait_s=t1 - t0,
                data_s=time.perf_counter() - t1,
                rollout=opts["rollout"],
            )
            last = step


def _identity(x):
    return x


# ----------------------------------------------------------------------------------------- model


def build_model(cfg: Config, dtype: torch.dtype):
    """The base model with a trainable LoRA adapter: resumed, started from `init_adapter`, or new."""
    from peft import LoraConfig, PeftModel, get_peft_model

    base = load_model(ModelSource.parse(cfg.model), "cpu", dtype)
    base.config.use_cache = False
    if on_gpu(cfg):
        if os.environ.get("TRAIN_AGENT_LIGER", "1") != "0":
            use_liger_kernels(base)
        # SDPA's flash kernels rather than cuDNN's, which PyTorch 2.11 picked on an H200: a GRPO
        # step's micro-batches have a new padded length every step, and the real multi-turn step's
        # train phase took 3.50 s with flash against 5.02 s with cuDNN (benches/RESULTS.md)
        torch.backends.cuda.enable_cudnn_sdp(False)
    if cfg.gradient_checkpointing:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    start = Path(cfg.resume_from) / "adapter" if cfg.resume_from else cfg.lora.init_adapter
    if start:
        model = PeftModel.from_pretrained(base, str(start), is_trainable=True)
    else:
        lc = cfg.lora
        model = get_peft_model(
            base,
            LoraConfig(
                r=lc.r,
                lora_alpha=lc.alpha,
                lora_dropout=lc.dropout,
                target_modules=lc.target_modules,
                use_rslora=lc.use_rslora,
                task_type="CAUSAL_LM",
            ),
        )
    if resolved_precision(cfg) == "bf16-mixed":
        keep_lora_inputs_bf16(model)
    return model


def use_liger_kernels(model) -> None:
    """Liger's Triton kernels for the decoder's RMSNorms and SwiGLU MLPs, where Liger knows
    the architecture (Llama, Mistral, Qwen2/3, Gemma, Phi-3 among others; elsewhere nothing
    changes). Each replaces several elementwise kernels with one and keeps fewer tensors for the
    backward pass (the SwiGLU recomputes its activation, the RMSNorm keeps its bf16 input and not a
    float32 copy). On an H200 the GRPO step bench's trainer peaked at 11.1 GiB with them against
    13.5 without, at 8,192-token micro-batches, and its step was no slower (benches/RESULTS.md).
    Liger's fused cross-entropy is not used: the head is `loss.linear_token_logprobs`. Needs CUDA
    (Triton); TRAIN_AGENT_LIGER=0 turns it off."""
    try:
        from liger_kernel.transformers import _apply_liger_kernel_to_instance
    except ImportError as e:  # not installed (the pinned environment has it on Linux)
        warnings.warn(f"Liger kernels unavailable ({e}); training with transformers' own layers", stacklevel=2)
        return
    # Liger also swaps the architecture's classes in its transformers module, for models built
    # later in this process; they are put back so that only this instance changes (its layers are
    # patched in place). RoPE stays transformers': Liger's replaces the module's function for every
    # model of the architecture.
    module = sys.modules[type(model).__module__]
    before = dict(vars(module))
    # the per-architecture dispatch TRL's trainers use too; it leaves unknown architectures alone
    _apply_liger_kernel_to_instance(model, rope=False, swiglu=True, rms_norm=True, fused_linear_cross_entropy=False)
    for name, value in before.items():
        if vars(module)[name] is not value:
            setattr(module, name, value)


def keep_lora_inputs_bf16(model) -> None:
    """Under bf16 autocast, stops PEFT from casting each adapted layer's bf16 input to the adapter's
    float32 before its LoRA matmuls. Autocast casts it straight back to bf16 for those matmuls (an
    exact round trip, so values and gradients are unchanged), and that second bf16 copy is what the
    backward pass keeps: one more input-sized tensor per adapted layer, where without the cast the
    LoRA matmul keeps the very tensor its base layer keeps. On the GRPO step bench (Qwen2.5-0.5B,
    LoRA on every linear layer, 8,192-token micro-batches) the trainer's peak fell by 1.3 GiB
    (benches/RESULTS.md); test_trainer.py checks values and memory."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    for module in model.modules():
        if isinstance(module, BaseTunerLayer):
            module.cast_input_dtype_enabled = False


# The dispatch on `loss.kind`: GRPO's clipped policy gradient (at the sampling temperature, with an
# optional KL term) or SFT's token NLL. Its names are Rust's (ta_trainer's LossKind), checked by
# tests/test_contract.py like the two tables below.
POLICY_GRADIENT = {"grpo": True, "sft": False}

# The dispatch on `optim.schedule`: the lr multiplier after warmup, from the progress through the
# remaining steps (0 to 1) and min_lr_ratio. Its names are Rust's (ta_trainer::Schedule, which owns
# the allowed values); tests/test_contract.py checks that these keys are exactly those.
SCHEDULES = {
    "constant": lambda progress, min_ratio: 1.0,
    "cosine": lambda progress, min_ratio: min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)),
}


def lr_multiplier(step: int, o: OptimSettings) -> float:
    """Linear warmup over `warmup_steps` optimizer steps (step 0 already gets 1/warmup of the lr),
    then constant or cosine decay to min_lr_ratio at total_steps."""
    if step < o.warmup_steps:
        return (step + 1) / o.warmup_steps
    progress = min(1.0, (step - o.warmup_steps) / max(1, o.total_steps - o.warmup_steps))
    return SCHEDULES[o.schedule](progress, o.min_lr_ratio)


def _fork(cache):
    """A KV cache that continues `cache` and leaves it as it is: a layer's update rebinds its
    tensors (`torch.cat`) rather than writing into them, so shallow copies of the layers suffice."""
    fork = copy.copy(cache)
    fork.layers = [copy.copy(layer) for layer in cache.layers]
    return fork


def tree_hidden(decoder, tree: Tree) -> torch.Tensor:
    """The decoder's last hidden states of the tree's rows, right-padded `[rows, longest, hidden]`:
    each node runs once, continuing its parent's KV cache (a parent's cache is dropped once its
    last child has run), and a row's states are its nodes' in path order. A shared prefix is thus
    computed once, and its gradient is the sum over the branches that attend to it: the same
    values and gradients as one padded row per sample."""
    children = [0] * len(tree.nodes)
    for p in tree.parents:
        if p >= 0:
            children[p] += 1
    caches, hidden = {}, []
    for i, (ids, parent) in enumerate(zip(tree.nodes, tree.parents)):
        past = _fork(caches[parent]) if parent >= 0 else None
        out = decoder(input_ids=ids[None], past_key_values=past, use_cache=True)
        hidden.append(out.last_hidden_state[0])
        if children[i]:
            caches[i] = out.past_key_values
        if parent >= 0:
            children[parent] -= 1
            if not children[parent]:
                del caches[parent]
    rows = [torch.cat([hidden[n] for n in path]) for path in tree.paths]
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)


def micro_batch_to(mb: dict, device: torch.device) -> dict:
    """The micro-batch's tensors, the tree's nodes included, on `device`."""
    out = {k: v.to(device) for k, v in mb.items() if k != "tree"}
    if "tree" in mb:
        t = mb["tree"]
        out["tree"] = Tree([n.to(device) for n in t.nodes], t.parents, t.paths)
    return out


def trained_logprobs(model, mb: dict[str, torch.Tensor], temperature: float = 1.0):
    """Logprobs and entropies of the trained tokens (flat, row-major over the loss mask) under
    softmax(cap(logits) / temperature): the decoder runs in the run's precision, the output head only
    on trained positions and in float32 (the engine's head does the same, decoder.Decoder.logits),
    soft-capped where the model caps its logits (Gemma 2's `final_logit_softcapping`; the decoder's
    attention soft-cap is kept by loading such models with eager attention, models.load_model)."""
    lm = model.get_base_model()
    if "tree" in mb:  # packing "prefix-tree"
        hidden = tree_hidden(lm.get_decoder(), mb["tree"])
    else:
        # No attention mask: rows are right-padded, so under causal attention no real token sees a
        # pad, and without a mask SDPA takes its fused kernels (on a 2-core CPU, 542 against 389
        # tok/s for a LoRA step of SmolLM2-135M, benches/cpu_bf16_bench.py; on CUDA the flash
        # path). Pads' outputs are never read.
        hidden = lm.get_decoder()(input_ids=mb["input_ids"]).last_hidden_state
    sel = mb["loss_mask"][:, 1:]
    h = hidden[:, :-1][sel]  # the position before each trained token predicts it
    head = lm.get_output_embeddings()
    targets = mb["input_ids"][:, 1:][sel]
    softcap = getattr(lm.config, "final_logit_softcapping", None)
    if isinstance(head, torch.nn.Linear):
        # chunked: the [tokens, vocab] float32 logits never exist whole (loss.linear_token_logprobs)
        return linear_token_logprobs(h, head.weight, head.bias, targets, temperature, softcap=softcap)
    with torch.autocast(h.device.type, enabled=False):  # an adapted head (lm_head in target_modules)
        logits = softcap_logits(head(h).float(), softcap)
        if temperature != 1.0:
            logits = logits / temperature
    return token_logprobs(logits, targets)


class PolicyModule(pl.LightningModule):
    """A causal LM with a LoRA adapter; `training_step` turns one inbox step into one update."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.automatic_optimization = False
        self.precision_name = resolved_precision(cfg)
        self.model = build_model(cfg, base_dtype(self.precision_name))
        self.model.train()  # from_pretrained leaves eval mode; LoRA dropout and checkpointing need train
        self.resume_state = None
        self.last_step = -1
        self.pending = None  # from training_step to on_train_batch_end
        self.validations_logged: set[str] = set()  # inbox/validation-*.json names, by this process
        if cfg.resume_from:
            self.resume_state = torch.load(
                Path(cfg.resume_from) / "trainer_state.pt", map_location="cpu", weights_only=False
            )
            self.last_step = self.resume_state["step"]

    def configure_optimizers(self):
        o = self.cfg.optim
        params = [p for p in self.model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=o.lr, betas=tuple(o.betas), eps=o.eps, weight_decay=o.weight_decay)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_multiplier(s, o))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def train_dataloader(self):
        inbox = Inbox(self.cfg, self.last_step, self.global_rank, self.trainer.world_size)
        return torch.utils.data.DataLoader(inbox, batch_size=None, collate_fn=_identity)

    def on_train_start(self):
        if self.resume_state is not None:
            self.optimizers().optimizer.load_state_dict(self.resume_state["optimizer"])
            sched = self.lr_schedulers()
            sched.load_state_dict(self.resume_state["scheduler"])
            for group, lr in zip(self.optimizers().param_groups, sched.get_last_lr()):
                group["lr"] = lr
            self.resume_state = None

    def micro_batch_loss(self, mb):
        lc = self.cfg.loss
        mask = mb["loss_mask"]
        weights = mb["weights"][mask]
        ref = None
        grpo = POLICY_GRADIENT[lc.kind]
        temperature = lc.temperature if grpo else 1.0
        if grpo and lc.beta > 0:
            with torch.no_grad(), self.model.disable_adapter():
                ref, _ = trained_logprobs(self.model, mb, temperature)
        logp, entropy = trained_logprobs(self.model, mb, temperature)
        if not grpo:
            loss, stats = sft_loss(logp, weights)
        else:
            loss, stats = grpo_loss(
                logp,
                mb["old_logprobs"][mask],
                mb["advantages"][mask],
                weights,
                lc.epsilon_low,
                lc.epsilon_high,
                ref,
                lc.beta,
            )
        stats.update(loss=loss.detach(), entropy_sum=entropy.sum(), trained_tokens=mask.sum())
        return loss, stats

    @torch.no_grad()
    def evaluate(self, mbs: list[dict]) -> tuple[float, int]:
        """Token-mean negative log-likelihood of held-out samples (weights from plan_step with
        token-mean are 1/N over all ranks, so the rank sums add up to the mean), adapter in eval mode."""
        sums = torch.zeros(2, dtype=torch.float64, device=self.device)
        self.model.eval()
        try:
            # no graph: with one, `sums` kept every micro-batch's activations alive to the end
            with torch.no_grad(), self.trainer.precision_plugin.val_step_context():
                for mb in mbs:
                    mb = micro_batch_to(mb, self.device)
                    mask = mb["loss_mask"]
                    logp, _ = trained_logprobs(self.model, mb)
                    real = mb["weights"][mask] > 0
                    sums += torch.stack([-(mb["weights"][mask] * logp).sum().double(), real.sum().double()])
        finally:
            self.model.train()
        if self.trainer.world_size > 1:
            sums = self.trainer.strategy.reduce(sums, reduce_op="sum")
        return float(sums[0]), int(sums[1])

    STATS = ["loss", "policy_loss", "kl_sum", "entropy_sum", "clip_low", "clip_high", "ratio_sum", "trained_tokens"]

    def training_step(self, dataloader_iter):
        """Gradients of one inbox step, accumulated over this rank's micro-batches; the optimizer
        step follows in on_train_batch_end, outside the strategy's wrapped forward."""
        batch, _, _ = next(dataloader_iter)  # waits for the next step file; StopIteration ends fit
        step = batch["step"]
        torch.manual_seed((self.cfg.seed * 1_000_003 + step) * 1024 + self.global_rank)
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        t0 = time.perf_counter()
        eval_before = self.evaluate(batch["eval_micro_batches"]) if batch["eval_before"] else None
        sums = torch.zeros(len(self.STATS), dtype=torch.float64, device=self.device)
        mbs = batch["micro_batches"]
        # DDP: all-reduce gradients only in the last backward
        no_sync = (
            self.trainer.strategy.block_backward_sync if isinstance(self.trainer.strategy, DDPStrategy) else nullcontext
        )
        for i, mb in enumerate(mbs):
            real = bool(mb["weights"].any())  # not a zero-weight filler
            mb = micro_batch_to(mb, self.device)
            with nullcontext() if i == len(mbs) - 1 else no_sync():
                loss, stats = self.micro_batch_loss(mb)
                # weights are global; DDP averages gradients over ranks, so undo that
                self.manual_backward(loss * self.trainer.world_size)
            if real:
                sums += torch.stack([stats[k].double() if k in stats else sums.new_zeros(()) for k in self.STATS])
        self.pending = dict(batch=batch, sums=sums, t0=t0, t1=time.perf_counter(), eval_before=eval_before)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        """Clip, optimizer and scheduler step, checkpoint, then the outbox file (rank 0)."""
        if self.pending is None:  # the inbox ended (stop) inside training_step
            return
        batch, sums, t0, t1 = (self.pending[k] for k in ("batch", "sums", "t0", "t1"))
        step, opt, sched = batch["step"], self.optimizers(), self.lr_schedulers()
        grad_norm = self.clip_and_norm()
        lr = opt.param_groups[0]["lr"]
        # A non-finite gradient (same on every rank: the norm is of the reduced gradients) would
        # write NaN into the adapter; the update is skipped and reported instead.
        finite = math.isfinite(grad_norm)
        if finite:
            opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        t2 = time.perf_counter()

        sums = self.trainer.strategy.reduce(sums, reduce_op="sum") if self.trainer.world_size > 1 else sums
        s = dict(zip(self.STATS, sums.tolist()))
        checkpoint = self.save_checkpoint(step) if batch["checkpoint"] else None
        t3 = time.perf_counter()
        before = self.pending["eval_before"]  # (loss, tokens) or None
        eval_loss, eval_tokens = (
            self.evaluate(batch["eval_micro_batches"]) if batch["eval_after"] else (None, before[1] if before else None)
        )

        n = max(s["trained_tokens"], 1)
        grpo, lc = POLICY_GRADIENT[self.cfg.loss.kind], self.cfg.loss
        metrics = dict(
            step=step,
            loss=s["loss"],
            policy_loss=s["policy_loss"],
            kl=s["kl_sum"] / n if grpo and lc.beta > 0 else None,
            entropy=s["entropy_sum"] / n,
            clip_fraction_low=s["clip_low"] / n,
            clip_fraction_high=s["clip_high"] / n,
            ratio_mean=s["ratio_sum"] / n if grpo else None,
            grad_norm=grad_norm if finite else None,
            skipped_nonfinite_grad=not finite,
            lr=lr,
            samples=batch["samples"],
            tokens=batch["tokens"],
            trained_tokens=int(s["trained_tokens"]),
            micro_batches=len(batch["micro_batches"]),
            tokens_per_s=batch["tokens"] / max(t2 - t0 + batch["data_s"], 1e-9),
            wait_s=batch["wait_s"],
            data_s=batch["data_s"],
            forward_backward_s=t1 - t0,
            optimizer_s=t2 - t1,
            save_s=t3 - t2,
            step_s=batch["data_s"] + t3 - t0,
            **peak_memory(self.device),
            checkpoint=checkpoint,
            eval_loss=eval_loss,
            eval_loss_before=before[0] if before else None,
            eval_tokens=eval_tokens,
        )
        if self.global_rank == 0:
            write_json_atomic(self.cfg.trainer_dir / "outbox" / f"{step_name(step)}.json", metrics)
            numbers = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and k != "step"}
            # the step's rollout metrics from the step file: one logger run holds both
            numbers.update({f"rollout/{k}": v for k, v in batch["rollout"].items() if k != "step"})
            for logger in self.trainer.loggers:
                logger.log_metrics(numbers, step=step)
                logger.save()
            self.log_validations()
        self.last_step, self.pending = step, None

    def on_train_end(self):
        """The validations written since the last step: the final one comes just before `stop`."""
        if self.global_rank == 0:
            self.log_validations()

    def log_validations(self):
        """Logs each validation file of the inbox not logged yet, as validation/<name> at its step."""
        for path in sorted((self.cfg.trainer_dir / "inbox").glob("validation-*.json")):
            if path.name in self.validations_logged:
                continue
            step, metrics = read_validation_file(path)
            for logger in self.trainer.loggers:
                logger.log_metrics({f"validation/{k}": v for k, v in metrics.items()}, step=step)
                logger.save()
            self.validations_logged.add(path.name)

    def clip_and_norm(self) -> float:
        max_norm = self.cfg.optim.max_grad_norm or float("inf")
        params = [p for p in self.model.parameters() if p.requires_grad]
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))

    def save_checkpoint(self, step: int) -> str:
        """Rank 0 writes checkpoints/step-N/{adapter/, trainer_state.pt} under a temp name, then
        renames it, so a checkpoint dir that exists is complete."""
        final = Path(self.cfg.output_dir) / "checkpoints" / step_name(step)
        if self.global_rank == 0:
            tmp = final.with_name(final.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            self.model.save_pretrained(tmp / "adapter")
            torch.save(
                {
                    "step": step,
                    "optimizer": self.optimizers().optimizer.state_dict(),
                    "scheduler": self.lr_schedulers().state_dict(),
                    "config": asdict(self.cfg),
                },
                tmp / "trainer_state.pt",
            )
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        return str(final)


def peak_memory(device: torch.device) -> dict:
    if device.type == "cuda":
        return dict(peak_memory_gb=torch.cuda.max_memory_allocated(device) / 2**30, peak_memory_kind="cuda")
    return dict(peak_memory_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, peak_memory_kind="cpu_rss")


def make_strategy(cfg: Config):
    return DDPStrategy(find_unused_parameters=False) if cfg.strategy == "ddp" else cfg.strategy


def make_loggers(cfg: Config) -> list:
    from pytorch_lightning.loggers import CSVLogger

    loggers = [CSVLogger(str(cfg.trainer_dir), name="logs", flush_logs_every_n_steps=1)] if cfg.loggers.csv else []
    if cfg.loggers.tensorboard:
        try:
            from pytorch_lightning.loggers import TensorBoardLogger

            loggers.append(TensorBoardLogger(str(cfg.trainer_dir), name="tensorboard"))
        except Exception as e:  # neither tensorboard nor tensorboardX installed
            print(f"warning: TensorBoard logging is off: {e}", file=sys.stderr)
    if cfg.loggers.wandb_project:
        try:
            import wandb  # noqa: F401
            from pytorch_lightning.loggers import WandbLogger

            loggers.append(WandbLogger(project=cfg.loggers.wandb_project, save_dir=str(cfg.trainer_dir)))
        except Exception as e:
            print(f"warning: W&B logging is off: {e}\nhint: pip install wandb", file=sys.stderr)
    return loggers


def train(cfg: Config) -> None:
    warnings.filterwarnings("ignore", ".*(dataloader_iter|does not have many workers|IterableDataset).*")
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    (cfg.trainer_dir / "inbox").mkdir(parents=True, exist_ok=True)
    (cfg.trainer_dir / "outbox").mkdir(parents=True, exist_ok=True)
    module = PolicyModule(cfg)
    trainer = pl.Trainer(
        accelerator=cfg.accelerator,
        devices=cfg.devices,
        num_nodes=cfg.num_nodes,
        strategy=make_strategy(cfg),
        precision=module.precision_name,
        logger=make_loggers(cfg) or False,
        max_epochs=1,
        max_steps=-1,
        num_sanity_val_steps=0,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
        default_root_dir=str(cfg.trainer_dir),
    )
    trainer.fit(module)


# ----------------------------------------------------------------------------------------- merge


def merge(model: str, adapter: str, out: str, dtype: str = "bfloat16") -> None:
    """Folds the adapter into the base weights (in float32, then cast) and saves model + tokenizer."""
    from peft import PeftModel

    src = ModelSource.parse(model)
    merged = PeftModel.from_pretrained(load_model(src, "cpu", torch.float32), adapter).merge_and_unload()
    merged = merged.to(parse_dtype(dtype, "cpu"))
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    merged.save_pretrained(tmp)
    load_tokenizer(src).save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


# ------------------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:
        p = argparse.ArgumentParser(prog="python -m train_agent.trainer merge")
        p.add_argument("--model", required=True)
        p.add_argument("--adapter", required=True)
        p.add_argument("--out", required=True)
        p.add_argument("--dtype", default="bfloat16")
        a = p.parse_args(argv[1:])
        merge(a.model, a.adapter, a.out, a.dtype)
        return 0
    p = argparse.ArgumentParser(prog="python -m train_agent.trainer")
    p.add_argument("--config", required=True, help="JSON config written by train-agent")
    a = p.parse_args(argv)
    # Micro-batches of every shape come and go: growable segments keep the memory CUDA holds near
    # what is allocated (before the first CUDA allocation; a user's own setting wins).
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    raw = json.loads(Path(a.config).read_text())
    try:
        train(Config.from_dict(raw))
        return 0
    except BaseException as e:
        if raw.get("output_dir"):
            write_json_atomic(
                Path(raw["output_dir"]) / "trainer" / "error.json",
                {
                    "error": f"{type(e).__name__}: {e}",
                    "traceback": traceback.format_exc(),
                    "node_rank": int(os.environ.get("NODE_RANK", 0)),
                    "local_rank": int(os.environ.get("LOCAL_RANK", 0)),
                },
            )
        traceback.print_exc()
        return 1
