"""LoRA train-step throughput and MFU of the trainer process (`python -m train_agent.trainer`), fed
through its mailbox exactly as `train-agent train` feeds it, on a random-weight model of a real
architecture.

    PYTHONPATH=python python benches/lora_train_bench.py --random qwen3-4b --tokenizer DIR \
        [--seq-len 8192 --samples 4 --steps 4 --lora-rank 16] [--out results.json]

Each step holds `--samples` sequences of `--seq-len` tokens, every token but the first trained
(GRPO loss, token-mean). Gradient checkpointing is on (8K-token sequences of a 4B model need it).

FLOPs per trained token, counted for what a LoRA step really computes (N = parameters in the
matmuls, lm_head included; L layers, s the sequence length, d the attention width):
  forward               2N + 2·L·s·d            (causal attention: QKᵀ and AV, half the square)
  recompute (GC)        2N + 2·L·s·d
  backward, input grads 2N + 4·L·s·d            (frozen base weights: no weight gradients)
so "hardware" FLOPs/token = 6N + 8·L·s·d with checkpointing. The customary MFU counts 6N + 6·L·s·d
(forward + full backward, no recompute); both are printed, against 989 TFLOP/s (H100 SXM dense
bf16; pass --peak-tflops for another chip). The LoRA matrices themselves are < 1% of N and left out.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grpo_step_bench import ROOT, build_random, rust_config, stop, wait_outbox, write_atomic  # noqa: E402


def matmul_params(model_dir: Path) -> tuple[int, int, int]:
    c = json.loads((model_dir / "config.json").read_text())
    h, i, L, v = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    hd = c.get("head_dim") or h // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * i
    return L * per_layer + h * v, L, q


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--random", default="qwen3-4b")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--seq-len", type=int, default=8192)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--micro-batch-tokens", type=int, default=8192)
    ap.add_argument("--no-gradient-checkpointing", action="store_true")
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--work", default="/tmp/lora-bench")
    ap.add_argument("--out")
    args = ap.parse_args()

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    model = build_random(args.random, args.tokenizer, work / "model")
    n, layers, d_attn = matmul_params(model)
    gc = not args.no_gradient_checkpointing
    run = work / "run"
    for box in ("inbox", "outbox"):
        (run / "trainer" / box).mkdir(parents=True)
    cfg = rust_config("grpo", model=str(model), output_dir=str(run),
                      lora={"r": args.lora_rank, "alpha": 2 * args.lora_rank, "target_modules": "all-linear"},
                      optim={"lr": 1e-6, "total_steps": args.steps}, loss={"kind": "grpo", "aggregation": "token-mean"},
                      micro_batch_tokens=args.micro_batch_tokens, gradient_checkpointing=gc, precision="bf16-mixed",
                      loggers={"csv": False})
    (run / "trainer" / "config.json").write_text(json.dumps(cfg))
    log = work / "trainer.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python"), "PYTHONUNBUFFERED": "1"}
    trainer = subprocess.Popen([sys.executable, "-m", "train_agent.trainer", "--config", str(run / "trainer" / "config.json")],
                               env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    rng = random.Random(0)
    rows = []
    try:
        for step in range(1, args.steps + 1):
            samples = [{"input_ids": [rng.randrange(150000) for _ in range(args.seq_len)],
                        "loss_mask": [0] + [1] * (args.seq_len - 1),
                        "logprobs": [0.0] + [-rng.uniform(0.5, 3.0) for _ in range(args.seq_len - 1)],
                        "advantage": rng.uniform(-1, 1), "group_id": k} for k in range(args.samples)]
            write_atomic(run / "trainer" / "inbox" / f"step-{step:06d}.json", json.dumps({"step": step, "samples": samples}).encode())
            m = wait_outbox(run, step, trainer, log)
            tokens = args.samples * args.seq_len
            fb = m["forward_backward_s"] + m["optimizer_s"]
            s = args.seq_len
            hw = tokens * (6 * n + 8 * layers * s * d_attn) if gc else tokens * (4 * n + 6 * layers * s * d_attn)
            cust = tokens * (6 * n + 6 * layers * s * d_attn)
            row = {"step": step, "tokens": tokens, "compute_s": round(fb, 3), "step_s": round(m["step_s"], 3),
                   "tokens_per_s": round(tokens / fb, 1), "mfu_hw": round(hw / fb / (args.peak_tflops * 1e12), 4),
                   "mfu_6n": round(cust / fb / (args.peak_tflops * 1e12), 4), "peak_gib": round(m["peak_memory_gb"], 2)}
            print(json.dumps(row), flush=True)
            rows.append(row)
        steady = rows[1:] or rows
        summary = {"arch": args.random, "matmul_params": n, "seq_len": args.seq_len, "samples": args.samples,
                   "gradient_checkpointing": gc, "lora_rank": args.lora_rank,
                   **{k: statistics.median(r[k] for r in steady) for k in ("tokens_per_s", "mfu_hw", "mfu_6n", "compute_s")},
                   "peak_gib": max(r["peak_gib"] for r in rows)}
        print(json.dumps(summary), flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps({**summary, "steps": rows}, indent=1))
    finally:
        stop(run, trainer)


if __name__ == "__main__":
    main()
