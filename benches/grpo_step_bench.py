"""One GRPO step end to end through the engine and trainer processes that `train-agent train` runs,
timed part by part: sample a group per prompt over HTTP (vLLM's API, token ids and logprobs
returned), build token-level samples from exactly those tokens, hand them to the trainer through
its mailbox, wait for the optimizer step and checkpoint, hot-load the new adapter into the engine.

    PYTHONPATH=python python benches/grpo_step_bench.py --model DIR [--prompts 8 --samples 8 \
        --new-tokens 256 --prompt-tokens 256 --steps 6 --lora-rank 16] [--out results.json]
    PYTHONPATH=python python benches/grpo_step_bench.py --random qwen2.5-0.5b --tokenizer DIR ...

The workload matches the TRL comparison in issue #7: 8 prompts x 8 samples x 256 sampled tokens
(EOS ignored, so every completion has exactly 256 tokens), LoRA r16 on all linear layers. Rewards
are seeded random numbers, mean-centred per group: the step's cost does not depend on their values.
What the bench leaves out of `train-agent train` is the MCP tool calls and the reward functions
(both measured elsewhere: benches/mcp_overhead.rs, the `reward_s` column of metrics.jsonl).

`--engine-gpu` / `--trainer-gpus` put the two processes on separate GPUs (default: both on GPU 0,
as on a one-GPU machine); `--trainer-gpus 0,1` with `--engine-gpu 0` runs the trainer DDP on two.
Step time is the median over the steps after the first (the first pays CUDA-graph capture and
kernel compilation). Peak memory: the trainer's own peak allocation, and the sum of the GPU memory
nvidia-smi reports for both processes at the end (what a user sees; the engine's KV cache is a
fixed reservation sized by --engine-memory).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python" / "tests"))
from rust_config import rust_config  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict, timeout: float = 600) -> dict | str:
    """JSON replies parsed; the adapter endpoints answer plain text, as vLLM's do."""
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        text = r.read().decode()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def build_random(arch: str, tokenizer: str, out: Path) -> Path:
    """A random-weight model of a real architecture, saved with a real tokenizer and template."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    if arch == "qwen2.5-0.5b":
        cfg, cls = Qwen2Config(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                               num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
                               max_position_embeddings=32768, torch_dtype="bfloat16"), Qwen2ForCausalLM
    elif arch == "qwen3-4b":
        cfg, cls = Qwen3Config(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
                               num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True,
                               max_position_embeddings=40960, torch_dtype="bfloat16"), Qwen3ForCausalLM
    else:
        raise SystemExit(f"unknown arch {arch}")
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = cls(cfg).to(torch.bfloat16)
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tokenizer).save_pretrained(out)
    del model
    torch.cuda.empty_cache()
    return out


def gpu_memory_gib(pids: list[int]) -> float:
    """GPU memory nvidia-smi attributes to these processes (and their children), in GiB."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return float("nan")
    used = {int(p): float(m) for p, m in (line.split(",") for line in out.strip().splitlines() if line)}
    return round(sum(m for p, m in used.items() if p in pids or any(_is_child(p, q) for q in pids)) / 1024, 2)


def _is_child(pid: int, parent: int) -> bool:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().split()[3]) == parent
    except OSError:
        return False


def wait_health(url: str, proc: subprocess.Popen, log: Path, timeout: float = 900) -> None:
    t = time.time()
    while time.time() - t < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"engine exited:\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("engine did not become healthy")


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def wait_outbox(run: Path, step: int, trainer: subprocess.Popen, log: Path) -> dict:
    """The trainer's report of `step`, once its optimizer step and checkpoint are done."""
    outbox = run / "trainer" / "outbox" / f"step-{step:06d}.json"
    while not outbox.exists():
        if trainer.poll() is not None:
            raise SystemExit(f"trainer exited:\n{log.read_text()[-3000:]}")
        time.sleep(0.01)
    return json.loads(outbox.read_text())


def stop(run: Path, *procs: subprocess.Popen) -> None:
    """Asks the trainer to stop after its last step, then ends the processes."""
    (run / "trainer" / "inbox" / "stop").touch()
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", help="model spec for the engine and trainer")
    ap.add_argument("--random", help="build a random-weight model of this arch (qwen2.5-0.5b, qwen3-4b)")
    ap.add_argument("--tokenizer", help="tokenizer dir for --random")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--prompt-tokens", type=int, default=256)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--micro-batch-tokens", type=int, default=16384)
    ap.add_argument("--gradient-checkpointing", action="store_true")
    ap.add_argument("--engine-gpu", default="0")
    ap.add_argument("--trainer-gpus", default="0")
    ap.add_argument("--engine-memory", default="6G", help="KV cache reservation of the engine")
    ap.add_argument("--work", default="/tmp/grpo-bench")
    ap.add_argument("--out")
    args = ap.parse_args()

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    model = args.model or str(build_random(args.random, args.tokenizer, work / "model"))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python"), "PYTHONUNBUFFERED": "1"}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    engine_log = work / "engine.log"
    engine = subprocess.Popen(
        [sys.executable, "-m", "train_agent.engine", "--model", model, "--served-model-name", "base", "--port", str(port),
         "--enable-lora", "--max-lora-rank", str(args.lora_rank), "--max-loras", "2",
         "--max-num-seqs", str(args.prompts * args.samples), "--kv-cache-memory", args.engine_memory,
         "--max-model-len", str(args.prompt_tokens + args.new_tokens + 256)],
        env={**env, "CUDA_VISIBLE_DEVICES": args.engine_gpu}, stdout=engine_log.open("w"), stderr=subprocess.STDOUT)
    trainer_gpus = args.trainer_gpus.split(",")
    run = work / "run"
    # The trainer takes every key: start from what train-agent writes (python/tests/contract/).
    cfg = rust_config(
        "grpo", model=model, output_dir=str(run),
        lora={"r": args.lora_rank, "alpha": 2 * args.lora_rank, "target_modules": "all-linear"},
        optim={"lr": 1e-6, "total_steps": args.steps},
        loss={"kind": "grpo", "aggregation": "token-mean"},
        micro_batch_tokens=args.micro_batch_tokens, gradient_checkpointing=args.gradient_checkpointing,
        precision="bf16-mixed", devices=len(trainer_gpus), strategy="ddp" if len(trainer_gpus) > 1 else "auto",
        loggers={"csv": False},
    )
    for box in ("inbox", "outbox"):
        (run / "trainer" / box).mkdir(parents=True)
    (run / "trainer" / "config.json").write_text(json.dumps(cfg))
    trainer_log = work / "trainer.log"
    trainer = subprocess.Popen([sys.executable, "-m", "train_agent.trainer", "--config", str(run / "trainer" / "config.json")],
                               env={**env, "CUDA_VISIBLE_DEVICES": args.trainer_gpus}, stdout=trainer_log.open("w"),
                               stderr=subprocess.STDOUT)
    t_start = time.time()
    try:
        wait_health(url, engine, engine_log)
        print(f"engine ready in {time.time() - t_start:.1f}s", flush=True)
        rng = random.Random(0)
        words = "table employee salary department project budget query city manager count".split()
        prompts = [" ".join(rng.choice(words) for _ in range(args.prompt_tokens)) for _ in range(args.prompts)]
        model_name, rows = "base", []
        pool = ThreadPoolExecutor(args.prompts)
        for step in range(1, args.steps + 1):
            t0 = time.perf_counter()
            bodies = [{"model": model_name, "messages": [{"role": "user", "content": p}], "n": args.samples,
                       "max_tokens": args.new_tokens, "temperature": 1.0, "ignore_eos": True, "logprobs": True,
                       "return_token_ids": True, "seed": step * 1000 + i} for i, p in enumerate(prompts)]
            responses = list(pool.map(lambda b: post(url + "/v1/chat/completions", b), bodies))
            t1 = time.perf_counter()
            samples = []
            for gid, r in enumerate(responses):
                rewards = [rng.random() for _ in r["choices"]]
                mean = sum(rewards) / len(rewards)
                for c, rew in zip(r["choices"], rewards):
                    p, ids = r["prompt_token_ids"], c["token_ids"]
                    lps = [x["logprob"] for x in c["logprobs"]["content"]]
                    assert len(ids) == len(lps) == args.new_tokens, (len(ids), len(lps))
                    samples.append({"input_ids": p + ids, "loss_mask": [0] * len(p) + [1] * len(ids),
                                    "logprobs": [0.0] * len(p) + lps, "advantage": rew - mean, "group_id": gid})
            write_atomic(run / "trainer" / "inbox" / f"step-{step:06d}.json", json.dumps({"step": step, "samples": samples}).encode())
            t2 = time.perf_counter()
            metrics = wait_outbox(run, step, trainer, trainer_log)
            t3 = time.perf_counter()
            name = f"step-{step:06d}"
            post(url + "/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(run / "checkpoints" / name / "adapter")})
            if model_name != "base":
                post(url + "/v1/unload_lora_adapter", {"lora_name": model_name})
            model_name = name
            t4 = time.perf_counter()
            row = {"step": step, "generate_s": round(t1 - t0, 3), "build_s": round(t2 - t1, 3), "train_s": round(t3 - t2, 3),
                   "reload_s": round(t4 - t3, 3), "step_s": round(t4 - t0, 3),
                   "sampled_tokens": sum(len(c["token_ids"]) for r in responses for c in r["choices"]),
                   "trainer_tokens_per_s": round(metrics.get("tokens_per_s") or 0, 1),
                   "trainer_fwd_bwd_s": round(metrics.get("forward_backward_s") or 0, 3),
                   "trainer_save_s": round(metrics.get("save_s") or 0, 3),
                   "trainer_peak_gib": round(metrics.get("peak_memory_gb") or 0, 2)}
            print(json.dumps(row), flush=True)
            rows.append(row)
        mem = gpu_memory_gib([engine.pid, trainer.pid])
        steady = rows[1:] or rows
        med = {k: round(statistics.median(r[k] for r in steady), 3) for k in ("generate_s", "build_s", "train_s", "reload_s", "step_s")}
        summary = {"model": args.random or model, "prompts": args.prompts, "samples": args.samples, "new_tokens": args.new_tokens,
                   "prompt_tokens": args.prompts and len(responses[0]["prompt_token_ids"]), "engine_gpu": args.engine_gpu,
                   "trainer_gpus": args.trainer_gpus, "median": med, "trainer_peak_gib": max(r["trainer_peak_gib"] for r in rows),
                   "gpu_memory_gib_both_processes": mem, "steps": rows}
        print(json.dumps({k: v for k, v in summary.items() if k != "steps"}), flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(summary, indent=1))
    finally:
        stop(run, engine, trainer)


if __name__ == "__main__":
    main()
