"""Peak memory and time of one trainer micro-batch (forward, token logprobs, GRPO-shaped loss,
backward through a LoRA adapter) with the output head's logprobs computed the old way (float32
logits of every trained token at once, then log-softmax) and chunked (loss.linear_token_logprobs,
what `trainer.trained_logprobs` runs). Each mode runs in a fresh process, so its peak RSS is its own.

    # CPU: SmolLM2-135M's architecture (49k vocabulary), random weights, 4 x 1024 tokens
    PYTHONPATH=python python benches/logprob_memory_bench.py
    # GPU: the Qwen2.5-0.5B architecture (152k vocabulary), 8192 tokens, bf16
    PYTHONPATH=python python benches/logprob_memory_bench.py --arch qwen2.5-0.5b --device cuda --rows 8 --seq 1024
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from train_agent.trainer.loss import linear_token_logprobs, token_logprobs  # noqa: E402

ARCHS = {
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True),
    "qwen2.5-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
}


def one(args) -> dict:
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    model = LlamaForCausalLM(LlamaConfig(**ARCHS[args.arch])).to(args.device, dtype)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))
    model.train()
    ids = torch.randint(0, ARCHS[args.arch]["vocab_size"], (args.rows, args.seq), device=args.device)
    lm = model.get_base_model()
    head = lm.get_output_embeddings()
    times = []
    for _ in range(args.repeats):
        if args.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        h = lm.get_decoder()(input_ids=ids).last_hidden_state[:, :-1].reshape(-1, head.weight.shape[1])
        targets = ids[:, 1:].reshape(-1)
        if args.mode == "full":
            logp, _ = token_logprobs(F.linear(h.float(), head.weight.float()), targets)
        else:
            logp, _ = linear_token_logprobs(h, head.weight, None, targets)
        (logp * torch.randn_like(logp)).mean().backward()
        if args.device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    out = {"mode": args.mode, "tokens": args.rows * (args.seq - 1), "step_s": round(min(times), 3),
           "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}
    if args.device == "cuda":
        out["peak_cuda_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="smollm2-135m", choices=sorted(ARCHS))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--mode", choices=["full", "chunked"], help="run one mode here (the parent runs both)")
    args = ap.parse_args()
    if args.mode:
        print(json.dumps(one(args)), flush=True)
        return
    rows = []
    for mode in ("full", "chunked"):
        cmd = [sys.executable, __file__, *sys.argv[1:], "--mode", mode]
        line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        rows.append(json.loads(line))
        print(line, flush=True)
    print(f"\n{args.arch}, {args.device}, {rows[0]['tokens']} trained tokens, LoRA r16 on all linear layers")
    print("| output head | step s | peak RSS GiB |" + (" peak CUDA GiB |" if args.device == "cuda" else ""))
    print("|---|---:|---:|" + ("---:|" if args.device == "cuda" else ""))
    for r in rows:
        print(f"| {r['mode']} | {r['step_s']} | {r['peak_rss_gib']} |"
              + (f" {r['peak_cuda_gib']} |" if args.device == "cuda" else ""))


if __name__ == "__main__":
    main()
