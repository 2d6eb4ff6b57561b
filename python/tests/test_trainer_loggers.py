"""Rollout and validation metrics reach TensorBoard and W&B (offline): a live trainer subprocess fed
as train-agent feeds it (a validation before training, a step, the final validation, then stop),
and the loggers' own files read back.

tensorboard and wandb are not in the pinned environment (users install them when they ask for
them), so the test installs them on first use into an overlay under the cache, which only the
trainer and the reader subprocesses put on their path. It skips only when PyPI cannot be reached,
and not even then under TRAIN_AGENT_REQUIRE_THIRD_PARTY (set by CI), as the Rust tests' third-party
servers do (crates/testkit)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rust_config import CONTRACT
from test_trainer import make_config, synthetic_samples, write_step
from test_trainer_mailbox import PYTHON_DIR, wait_for

from train_agent.models import cache_dir

LOGGER_PACKAGES = ("tensorboard==2.21.0", "wandb==0.31.0")
# How pip and uv say that the registry cannot be reached (the only reason to skip).
UNREACHABLE = ("NewConnectionError", "Temporary failure in name resolution", "Network is unreachable", "dns error")


@pytest.fixture(scope="session")
def logger_overlay() -> Path:
    """A directory holding tensorboard and wandb, installed once per machine."""
    digest = hashlib.sha256(" ".join(LOGGER_PACKAGES).encode()).hexdigest()[:12]
    overlay = cache_dir() / "test" / f"loggers-{digest}"
    if (overlay / "wandb").is_dir() and (overlay / "tensorboard").is_dir():
        return overlay
    tmp = overlay.with_name(overlay.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    # uv's venvs have no pip; uv itself is the faster installer when it is there.
    uv = shutil.which("uv")
    installer = [uv, "pip", "install", "--python", sys.executable] if uv else [sys.executable, "-m", "pip", "install"]
    done = subprocess.run(
        [*installer, "--quiet", "--target", str(tmp), *LOGGER_PACKAGES], capture_output=True, text=True
    )
    if done.returncode != 0:
        log = done.stdout + done.stderr
        if any(mark in log for mark in UNREACHABLE) and not os.environ.get("TRAIN_AGENT_REQUIRE_THIRD_PARTY"):
            pytest.skip(f"{' and '.join(LOGGER_PACKAGES)} could not be installed: PyPI cannot be reached\n{log}")
        raise AssertionError(f"installing {' and '.join(LOGGER_PACKAGES)} failed:\n{log}")
    tmp.rename(overlay)
    return overlay


def python_with(overlay: Path, code: str, *args: str, **kw) -> list[str]:
    """A command running `code` with the overlay after the pinned packages on sys.path, so it adds
    packages without replacing any."""
    prelude = f"import sys; sys.path.append({str(overlay)!r}); sys.argv[1:] = {list(args)!r}\n"
    return [sys.executable, "-c", prelude + code]


def write_validation(inbox: Path, step: int, metrics: dict[str, float]) -> None:
    """A validation file shaped like the one Rust writes (contract/validation_file.json)."""
    data = json.loads((CONTRACT / "validation_file.json").read_text())
    data.update(step=step, metrics=metrics)
    inbox.mkdir(parents=True, exist_ok=True)
    tmp = inbox / f".validation-{step:06d}.tmp"
    tmp.write_text(json.dumps(data))
    tmp.rename(inbox / f"validation-{step:06d}.json")


READ_LOGS = r"""
import glob, json, struct
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from wandb.proto import wandb_internal_pb2 as pb

trainer_dir = sys.argv[1]
acc = EventAccumulator(glob.glob(f"{trainer_dir}/tensorboard/version_0")[0])
acc.Reload()
tb = {tag: [[e.step, e.value] for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}

# The offline run's records: wandb's LevelDB-style log (7-byte header, 32 KiB blocks of
# [crc u32, length u16, type u8] chunks; type 1 a whole record, 2-3-4 first, middle, last).
data = open(glob.glob(f"{trainer_dir}/wandb/offline-run-*/run-*.wandb")[0], "rb").read()
pos, block, chunk, wb = 7, 32768, b"", {}
while pos + 7 <= len(data):
    if block - pos % block < 7:
        pos += block - pos % block
        continue
    _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
    if kind == 0:
        break
    chunk, pos = chunk + data[pos + 7:pos + 7 + length], pos + 7 + length
    if kind in (1, 4):
        record = pb.Record()
        record.ParseFromString(chunk)
        chunk = b""
        if record.WhichOneof("record_type") == "history":
            row = {"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in record.history.item}
            for k, v in row.items():
                if not k.startswith(("_", "trainer/")):
                    wb.setdefault(k, []).append([row["trainer/global_step"], v])
print(json.dumps({"tensorboard": tb, "wandb": wb}))
"""


def test_rollout_and_validation_metrics_reach_tensorboard_and_wandb(tiny_model_dir, tmp_path, logger_overlay):
    out = tmp_path / "run"
    cfg = make_config(tiny_model_dir, out, loggers=dict(csv=False, tensorboard=True, wandb_project="train-agent-test"))
    trainer_dir = out / "trainer"
    inbox = trainer_dir / "inbox"
    # As train-agent runs it: step 0's validation before training, then one step at a time.
    write_validation(inbox, 0, {"val_success": 0.25, "val_ground_truth": 0.5})
    write_step(out, 1, synthetic_samples(1))
    config = trainer_dir / "config.json"
    config.write_text(json.dumps(cfg))
    env = {
        **os.environ,
        "PYTHONPATH": str(PYTHON_DIR),
        "OMP_NUM_THREADS": "1",
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        **{f"WANDB_{d}_DIR": str(tmp_path / "wandb-home") for d in ("CONFIG", "CACHE", "DATA")},
    }
    log = tmp_path / "trainer.log"
    trainer = "import runpy; runpy.run_module('train_agent.trainer', run_name='__main__')"
    cmd = python_with(logger_overlay, trainer, "--config", str(config))
    proc = subprocess.Popen(cmd, cwd=PYTHON_DIR, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        wait_for(trainer_dir / "outbox" / "step-000001.json", proc, log)
        # The final validation comes after the last step, just before stop.
        write_validation(inbox, 1, {"val_success": 0.75, "val_ground_truth": 1.0})
        (inbox / "stop").touch()
        assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        proc.kill()
    read = subprocess.run(
        python_with(logger_overlay, READ_LOGS, str(trainer_dir)), env=env, capture_output=True, text=True
    )
    assert read.returncode == 0, read.stderr[-3000:]
    logs = json.loads(read.stdout)
    for name, logged in logs.items():
        assert logged["validation/val_success"] == [[0, 0.25], [1, 0.75]], name
        assert logged["validation/val_ground_truth"] == [[0, 0.5], [1, 1.0]], name
        assert logged["rollout/reward"] == [[1, pytest.approx(0.1)]], name
        assert [step for step, _ in logged["loss"]] == [1], name


def test_a_validation_file_has_exactly_its_keys(tmp_path):
    from train_agent.trainer.batches import read_validation_file

    write_validation(tmp_path, 3, {"val_success": 1})
    assert read_validation_file(tmp_path / "validation-000003.json") == (3, {"val_success": 1.0})
    bad = tmp_path / "validation-000004.json"
    bad.write_text(json.dumps({"step": 4, "metrics": {}, "extra": 1}))
    with pytest.raises(ValueError, match="exactly the keys step and metrics"):
        read_validation_file(bad)
