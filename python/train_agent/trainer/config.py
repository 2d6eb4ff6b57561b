"""The trainer's config (JSON, written by the Rust side: every key required, no other allowed; see
the package docstring), the dispatch tables on its enum keys, and what it resolves to (precision,
base dtype, the lr schedule)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path

import torch

from train_agent.models import cpu_has_fast_bf16
from train_agent.trainer.batches import PACKINGS
from train_agent.trainer.loss import (
    AGGREGATIONS,
)


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
    importance_cap: float  # truncated importance weight of samples an older policy drew


@dataclass
class LoggerSettings:
    csv: bool
    tensorboard: bool
    wandb_project: str | None


@dataclass
class Config:
    """No field has a default: see the package docstring (train_agent/trainer/__init__.py)."""

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
