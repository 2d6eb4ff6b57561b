"""What one engine prefill costs by shape, on a random-weight Qwen2.5-0.5B (CUDA).

Validation and rollouts admit a few turns at a time: the first turn of an episode (no cached
prefix), and later turns whose conversation so far is cached (prefix caching) with a suffix of a
tool result and the template. `Decoder.prefill` runs them on three paths: eager with causal SDPA
(no cache), eager with a mask over the cached rows (cache, long suffixes), and the extend step in
CUDA graphs (cache, suffixes of at most EXTEND_TOKENS in all). This times each shape (median of
repeats, after a warm-up that captures its graph) and profiles the slowest with torch.profiler.

    python3 benches/prefill_bench.py [--lora] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from engine_bench import build, random_lora  # noqa: E402
from train_agent.engine.decoder import Decoder  # noqa: E402

# (requests, suffix tokens each, cached tokens each): first turns, later turns with short and
# long suffixes over short and long conversations
SHAPES = [
    (1, 1500, 0),
    (4, 1500, 0),
    (1, 200, 3000),
    (4, 200, 3000),
    (1, 1200, 3000),
    (4, 1200, 3000),
    (4, 1200, 8000),
    (8, 600, 6000),
]


def time_prefill(dec: Decoder, b: int, t: int, cached: int, lora: int, repeats: int) -> float:
    prompts = [[(i * 7 + j) % 1000 + 10 for j in range(cached + t)] for i in range(b)]
    slots = list(range(b))
    if cached:
        dec.prefill([p[:cached] for p in prompts], slots, [lora] * b)  # the conversation so far
    times = []
    for _ in range(repeats + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        dec.prefill(prompts, slots, [lora] * b, [cached] * b if cached else None)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:]) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lora", action="store_true", help="with a rank-32 adapter in bank slot 0")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-len", type=int, default=16384)
    ap.add_argument("--extend-tokens", type=int, help="the decoder's EXTEND_TOKENS for this run")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.extend_tokens:
        import train_agent.engine.decoder as decoder

        decoder.EXTEND_TOKENS = args.extend_tokens
    model = build("qwen2.5-0.5b")
    dec = Decoder(model, num_slots=16, max_len=args.max_len, enable_lora=True, max_loras=2, max_lora_rank=32)
    lora = -1
    if args.lora:
        dec.install_adapter(0, random_lora(dec, 32), 2.0)
        lora = 0
    rows = []
    with torch.inference_mode():
        for b, t, cached in SHAPES:
            ms = time_prefill(dec, b, t, cached, lora, args.repeats)
            row = {"requests": b, "suffix": t, "cached": cached, "padded_tokens": b * t, "ms": round(ms, 2),
                   "tok_s": round(b * t / ms * 1000)}
            print(json.dumps(row), flush=True)
            rows.append(row)
        if not args.no_profile:
            worst = max(rows, key=lambda r: r["ms"] / r["padded_tokens"])
            b, t, cached = worst["requests"], worst["suffix"], worst["cached"]
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                time_prefill(dec, b, t, cached, lora, 2)
            print(f"\nprofile of {worst}:")
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=18, max_name_column_width=60))
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| requests | suffix | cached | ms | tokens/s |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['requests']} | {r['suffix']} | {r['cached']} | {r['ms']} | {r['tok_s']} |")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
