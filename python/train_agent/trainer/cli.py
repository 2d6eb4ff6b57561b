"""`python -m train_agent.trainer`: the trainer's command line (`--config`, and `merge`), the
Lightning Trainer around the module, and its loggers."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import traceback
import warnings
from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.strategies import DDPStrategy

from train_agent.models import ModelSource, load_model, load_tokenizer, parse_dtype
from train_agent.trainer.config import Config
from train_agent.trainer.mailbox import write_json_atomic
from train_agent.trainer.module import PolicyModule


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
