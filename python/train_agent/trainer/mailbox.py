"""The trainer's mailbox under {output_dir}/trainer/ (see the package docstring): the inbox of step
files, read one planned step at a time (`Inbox`), and atomic JSON writes for the outbox."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import torch

from train_agent.trainer.batches import plan_step, read_step_file
from train_agent.trainer.config import Config


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
                policy_lag=opts["policy_lag"],
            )
            last = step
