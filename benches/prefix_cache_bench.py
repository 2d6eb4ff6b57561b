"""The rollout phase of a demo-like GRPO step, replayed on the engine's generation path with prefix
caching off and on, side by side in one run (issue 18).

    # GPU (H100): random weights of the Qwen2.5-0.5B architecture, 8 groups x 8 rollouts, sampled
    # under a random rank-16 LoRA adapter as the demo's rollouts are
    PYTHONPATH=python python benches/prefix_cache_bench.py --random qwen2.5-0.5b --lora --out prefix.json
    # CPU: the real SmolLM2-135M (fp32 without AMX), a smaller step
    PYTHONPATH=python python benches/prefix_cache_bench.py --model smollm2-135m-instruct \\
        --groups 2 --rollouts 4 --turns 4 --turn-tokens 32

The workload is token ids, shaped like the demo's episodes: every conversation starts with one
shared `--system-len`-token system prompt (tools and instructions) and its group's
`--task-len`-token task; a turn samples `--turn-tokens` tokens (temperature 1, EOS ignored), then
the conversation grows by them and a `--tool-len`-token tool result, and is re-sent whole. Episode
i of a group ends after 2 + (i mod (turns - 1)) turns, so the rollouts of a group fall out of
step, as real ones do. All episodes run at once, each sending its next turn as soon as its last
one returns. Reported per mode: the rollout phase's wall time, the prompt tokens sent, the share
of them the cache served, and where the scheduler thread's time went (generation.SchedulerStats).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_bench import build, random_lora, serve_random_lora  # noqa: E402
from train_agent.engine.decoder import Decoder  # noqa: E402
from train_agent.engine.requests import SamplingParams  # noqa: E402
from train_agent.engine.scheduler import Generator  # noqa: E402


def load(args):
    if args.random:
        return build(args.random)
    from train_agent.models import ModelSource, default_device, load_model, parse_dtype

    device = default_device()
    return load_model(ModelSource.parse(args.model), device, parse_dtype(args.dtype, device))


def rollouts(gen: Generator, args, vocab: int, seed: int, adapter: str | None) -> dict:
    g = torch.Generator().manual_seed(seed)
    rand = lambda n: torch.randint(0, vocab, (n,), generator=g).tolist()  # noqa: E731
    system = rand(args.system_len)
    tasks = [rand(args.task_len) for _ in range(args.groups)]
    tools = {(e, t): rand(args.tool_len) for e in range(args.groups * args.rollouts) for t in range(args.turns)}
    sent = [0]

    def episode(e: int) -> int:
        conv = system + tasks[e // args.rollouts]
        turns = 2 + (e % args.rollouts) % (args.turns - 1)
        for t in range(turns):
            sent[0] += len(conv)
            params = SamplingParams(max_tokens=args.turn_tokens, temperature=1.0, ignore_eos=True,
                                    seed=seed * 100_000 + e * 100 + t)
            out = gen.submit(conv, 1, params, adapter).result().completions[0].token_ids
            conv = conv + out + tools[(e, t)]
        return turns

    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.groups * args.rollouts) as pool:
        turns = sum(pool.map(episode, range(args.groups * args.rollouts)))
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    c = gen.cache
    stats = {k: round(v, 3) if isinstance(v, float) else v for k, v in dataclasses.asdict(gen.stats).items()}
    return {"wall_s": round(wall, 2), "requests": turns, "prompt_tokens": sent[0],
            "reused_tokens": c.hits if c else 0, "hit_rate": round(c.hits / max(c.queries, 1), 3) if c else 0.0,
            "scheduler": stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--random", help="random weights of an engine_bench architecture (CUDA), e.g. qwen2.5-0.5b")
    src.add_argument("--model", help="a model the engine loads (hub id, directory, .gguf, packaged name)")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--rollouts", type=int, default=8)
    ap.add_argument("--turns", type=int, default=6, help="the most turns an episode takes")
    ap.add_argument("--system-len", type=int, default=900)
    ap.add_argument("--task-len", type=int, default=60)
    ap.add_argument("--turn-tokens", type=int, default=64)
    ap.add_argument("--tool-len", type=int, default=40)
    ap.add_argument("--lora", action="store_true", help="sample under a random rank-16 LoRA on every projection "
                    "(the demo's rollouts run its SFT adapter)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the first (unmeasured) off/on pair")
    ap.add_argument("--out")
    args = ap.parse_args()
    model = load(args)
    episodes = args.groups * args.rollouts
    max_len = args.system_len + args.task_len + args.turns * (args.turn_tokens + args.tool_len) + 16
    dec = Decoder(model, num_slots=episodes, max_len=max_len, enable_lora=args.lora, max_loras=1, max_lora_rank=16)
    vocab = min(dec.vocab, 32000)
    weights = random_lora(dec, 16) if args.lora else None
    rows = []
    # a warm-up pair (CUDA graph capture, kernel compilation), then the measured pair; each pair
    # replays the same token ids
    for caching in (False, True) if args.no_warmup else (False, True, False, True):
        gen = Generator(dec, eos_ids=set(), prefix_caching=caching)
        adapter = serve_random_lora(gen, weights) if args.lora else None
        try:
            row = {"prefix_caching": caching, **rollouts(gen, args, vocab, 1 + len(rows) // 2, adapter)}
        finally:
            gen.close()
        print(json.dumps(row), flush=True)
        rows.append(row)
    off, on = rows[-2], rows[-1]
    where = torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU, {torch.get_num_threads()} threads"
    print(f"\n{where}, torch {torch.__version__}, {dec.dtype}; {args.groups} groups x {args.rollouts} rollouts, "
          f"up to {args.turns} turns, {args.system_len}-token system prompt")
    print("| prefix caching | rollout phase s | requests | prompt tokens | served from cache |")
    print("|---|---:|---:|---:|---:|")
    for r in (off, on):
        print(f"| {'on' if r['prefix_caching'] else 'off'} | {r['wall_s']} | {r['requests']} | {r['prompt_tokens']} "
              f"| {100 * r['hit_rate']:.1f}% |")
    print(f"\nspeed-up: {off['wall_s'] / on['wall_s']:.2f}x")
    print("\nscheduler thread (s): | caching | idle | admit (prefill) | decode windows | prefills | tokens computed "
          "(padded) | decode steps | mean width |")
    for r in (off, on):
        st = r["scheduler"]
        print(f"| {'on' if r['prefix_caching'] else 'off'} | {st['idle_s']} | {st['admit_s']} ({st['prefill_s']}) "
              f"| {st['window_s']} | {st['prefills']} | {st['prefill_tokens']} ({st['prefill_padded']}) "
              f"| {st['decode_steps']} | {st['decode_rows'] / max(st['decode_steps'], 1):.1f} |")
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
