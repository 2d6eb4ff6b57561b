"""The Lightning module: one inbox step in, one optimizer step, checkpoint and outbox file out."""

from __future__ import annotations

import math
import os
import resource
import shutil
import time
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.strategies import DDPStrategy

from train_agent.trainer.batches import read_validation_file
from train_agent.trainer.config import POLICY_GRADIENT, Config, base_dtype, lr_multiplier, resolved_precision
from train_agent.trainer.loss import (
    grpo_loss,
    off_policy_grpo_loss,
    sft_loss,
)
from train_agent.trainer.mailbox import Inbox, step_name, write_json_atomic
from train_agent.trainer.model import build_model, micro_batch_to, reference_policy, trained_logprobs


def _identity(x):
    return x


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

    def micro_batch_loss(self, mb, policy_lag: int = 0):
        """The loss of one micro-batch; samples an older policy drew (`policy_lag` > 0) take the
        off-policy loss, on-policy ones today's clipped loss against the sampler's logprobs."""
        lc = self.cfg.loss
        mask = mb["loss_mask"]
        weights = mb["weights"][mask]
        ref = None
        grpo = POLICY_GRADIENT[lc.kind]
        temperature = lc.temperature if grpo else 1.0
        if grpo and lc.beta > 0:
            with torch.no_grad(), reference_policy(self.model):
                ref, _ = trained_logprobs(self.model, mb, temperature)
        logp, entropy = trained_logprobs(self.model, mb, temperature)
        if not grpo:
            loss, stats = sft_loss(logp, weights)
        else:
            drawn = (mb["old_logprobs"][mask], mb["advantages"][mask], weights, lc.epsilon_low, lc.epsilon_high)
            if policy_lag > 0:
                loss, stats = off_policy_grpo_loss(logp, *drawn, lc.importance_cap, ref, lc.beta)
            else:
                loss, stats = grpo_loss(logp, *drawn, ref, lc.beta)
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

    STATS = [
        "loss",
        "policy_loss",
        "kl_sum",
        "entropy_sum",
        "clip_low",
        "clip_high",
        "ratio_sum",
        "trained_tokens",
        "is_weight_sum",
        "is_truncated",
    ]

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
                loss, stats = self.micro_batch_loss(mb, batch["policy_lag"])
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
        off_policy = grpo and batch["policy_lag"] > 0
        metrics = dict(
            step=step,
            loss=s["loss"],
            policy_loss=s["policy_loss"],
            kl=s["kl_sum"] / n if grpo and lc.beta > 0 else None,
            entropy=s["entropy_sum"] / n,
            clip_fraction_low=s["clip_low"] / n,
            clip_fraction_high=s["clip_high"] / n,
            ratio_mean=s["ratio_sum"] / n if grpo else None,
            importance_weight_mean=s["is_weight_sum"] / n if off_policy else None,
            importance_truncated=s["is_truncated"] / n if off_policy else None,
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
            # the trained adapter only: a frozen KL reference (`model.REFERENCE`) is not the run's
            self.model.save_pretrained(tmp / "adapter", selected_adapters=["default"])
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
