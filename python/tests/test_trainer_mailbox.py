"""`python -m train_agent.trainer` as train-agent runs it: a live subprocess fed one step at a time,
and DDP over two CPU processes (gloo) matching one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
from test_trainer import adapter, assert_same_adapter, make_config, outbox, run, synthetic_samples, write_step

from train_agent.models import ModelSource, load_model

PYTHON_DIR = Path(__file__).resolve().parents[1]


def start(cfg: dict, log: Path) -> subprocess.Popen:
    path = Path(cfg["output_dir"]) / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cfg))
    path_ = os.pathsep.join(filter(None, [str(PYTHON_DIR), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path_, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "train_agent.trainer", "--config", str(path)],
        cwd=PYTHON_DIR,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )


def wait_for(path: Path, proc: subprocess.Popen, log: Path, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"trainer exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {path.name} after {timeout}s:\n{log.read_text()[-3000:]}"
        time.sleep(0.05)
    return json.loads(path.read_text())


def test_mailbox_end_to_end(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    cfg = make_config(tiny_model_dir, out)
    log = tmp_path / "trainer.log"
    proc = start(cfg, log)
    try:
        metrics = []
        for step in (1, 2, 3):  # like train-agent: one step file, then wait for its metrics
            write_step(out, step, synthetic_samples(step))
            metrics.append(wait_for(out / "trainer" / "outbox" / f"step-{step:06d}.json", proc, log))
        assert proc.poll() is None  # still alive, waiting for step 4
        (out / "trainer" / "inbox" / "stop").touch()
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        proc.kill()
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert all(m["grad_norm"] > 0 and m["trained_tokens"] > 0 for m in metrics)
    assert not (out / "trainer" / "error.json").exists()

    from peft import PeftModel

    base = load_model(ModelSource.parse(str(tiny_model_dir)), "cpu", torch.float32)
    ids = torch.tensor([list(range(50, 70))])
    with torch.no_grad():
        before = base(input_ids=ids).logits
        tuned = PeftModel.from_pretrained(base, str(out / "checkpoints" / "step-000003" / "adapter")).eval()
        assert (tuned(input_ids=ids).logits - before).abs().max() > 1e-4  # the adapter changed the model
    assert any(not torch.equal(v, adapter(out, 3)[k]) for k, v in adapter(out, 1).items())


def test_ddp_on_two_cpu_processes_matches_one_process(tiny_model_dir, tmp_path):
    steps = {s: synthetic_samples(10 + s, n=5) for s in (1, 2)}
    # a budget that gives the two ranks different numbers of micro-batches (one gets an empty one)
    single = make_config(tiny_model_dir, tmp_path / "single", micro_batch_tokens=40, loss=dict(beta=0.05))
    run(single, steps)

    ddp = {**single, "output_dir": str(tmp_path / "ddp"), "strategy": "ddp", "devices": 2}
    for step, samples in steps.items():
        write_step(ddp["output_dir"], step, samples)
    (tmp_path / "ddp" / "trainer" / "inbox" / "stop").touch()
    log = tmp_path / "ddp.log"
    proc = start(ddp, log)
    try:
        assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
    finally:
        proc.kill()
    one, two = outbox(single["output_dir"]), outbox(ddp["output_dir"])
    for step in (1, 2):
        assert_same_adapter(adapter(ddp["output_dir"], step), adapter(single["output_dir"], step))
        for key in ("loss", "kl", "grad_norm", "entropy", "ratio_mean"):
            assert abs(two[step][key] - one[step][key]) <= 1e-5 * max(1, abs(one[step][key])), key
        assert two[step]["trained_tokens"] == one[step]["trained_tokens"]


def test_outbox_json_has_null_for_non_finite_numbers(tmp_path):
    from train_agent.trainer.mailbox import write_json_atomic

    p = tmp_path / "outbox" / "step-000003.json"
    write_json_atomic(p, {"grad_norm": float("nan"), "loss": float("inf"), "lr": 1e-5, "parts": [float("-inf"), 1.0]})
    assert json.loads(p.read_text()) == {"grad_norm": None, "loss": None, "lr": 1e-5, "parts": [None, 1.0]}
