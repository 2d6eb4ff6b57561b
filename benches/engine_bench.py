"""Decode throughput of the engine's own generation path (scheduler + CUDA-graph decoder), on
random-weight models with the Qwen2.5-0.5B and Qwen3-4B architectures.

    PYTHONPATH=python python benches/engine_bench.py [--archs qwen2.5-0.5b,qwen3-4b] [--out results.json]
        [--decode-attention sdpa,triton]

For each batch size: b requests of a 512-token prompt, 256 sampled tokens each (temperature 1,
EOS ignored), all submitted at once. Reported: end-to-end generated tok/s (prefill included),
decode-only tok/s (after the last first token), mean time to first token, peak GPU memory, and
the GPU time of one decode step alone (the captured graph replayed back to back, the rows halfway
through their generated tokens), which leaves out the scheduler's host work between windows.
A warm-up pass first captures the CUDA graphs and compiles the kernels. `--decode-attention`
measures each listed implementation of the decoder's `decode_attention` in turn, on the same model
(default: the decoder's own choice); `--overlap on,off` the scheduler with and without decode
windows launched ahead (generation.Generator's `overlap`; default: its own choice, on).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from train_agent.engine.decoder import Decoder  # noqa: E402
from train_agent.engine.slots import pick_bucket  # noqa: E402
from train_agent.engine.requests import SamplingParams  # noqa: E402
from train_agent.engine.scheduler import Generator  # noqa: E402


def build(arch: str):
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    if arch == "qwen2.5-0.5b":
        cfg = Qwen2Config(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                          num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
                          max_position_embeddings=32768)
        cls = Qwen2ForCausalLM
    elif arch == "qwen3-4b":
        cfg = Qwen3Config(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
                          num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True,
                          max_position_embeddings=40960)
        cls = Qwen3ForCausalLM
    else:
        raise SystemExit(f"unknown arch {arch}")
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = cls(cfg).to(torch.bfloat16)
    return model.eval()


def random_lora(dec: Decoder, rank: int) -> dict:
    """Adapter weights for every projection of every layer, like a PEFT adapter with all targets."""
    g = torch.Generator().manual_seed(1)
    weights = {}
    for i, layer in enumerate(dec.layers):
        d_in = layer.qkv.weight.shape[1]
        sizes = {"q_proj": layer.qkv.parts[0], "k_proj": layer.qkv.parts[1], "v_proj": layer.qkv.parts[2],
                 "o_proj": layer.o.parts[0], "gate_proj": layer.gate_up.parts[0], "up_proj": layer.gate_up.parts[1],
                 "down_proj": layer.down.parts[0]}
        ins = {"o_proj": layer.o.weight.shape[1], "down_proj": layer.down.weight.shape[1]}
        for name, out in sizes.items():
            weights[(i, name)] = (torch.randn(rank, ins.get(name, d_in), generator=g) * 0.01,
                                  torch.randn(out, rank, generator=g) * 0.01)
    return weights


def serve_random_lora(gen: Generator, weights: dict) -> str:
    """Installs `weights` (random_lora's) in bank slot 0 on the scheduler thread, as a loaded
    adapter named "bench", without a PEFT directory to read. Returns the name."""
    gen._command(lambda: gen.dec.install_adapter(0, weights, 2.0)).result()
    gen.adapters["bench"] = (0, "<random>")
    return "bench"


def run_batch(gen: Generator, b: int, prompt_len: int, new_tokens: int, adapter: str | None) -> dict:
    g = torch.Generator().manual_seed(b)
    prompts = [torch.randint(0, 150000, (prompt_len,), generator=g).tolist() for _ in range(b)]
    params = SamplingParams(max_tokens=new_tokens, temperature=1.0, ignore_eos=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    futs = [gen.submit(p, 1, SamplingParams(**{**params.__dict__, "seed": i}), adapter) for i, p in enumerate(prompts)]
    results = [f.result() for f in futs]
    t1 = time.perf_counter()
    assert all(len(r.completions[0].token_ids) == new_tokens for r in results)
    first = max(r.t_first_token for r in results)
    return {
        "batch": b,
        "tok_s": round(b * new_tokens / (t1 - t0), 1),
        "decode_tok_s": round(b * (new_tokens - 1) / (t1 - first), 1),
        "ttft_ms": round(1000 * sum(r.t_first_token - r.t_submit for r in results) / b, 1),
        "wall_s": round(t1 - t0, 3),
    }


def step_ms(gen: Generator, b: int, pos: int, steps: int = 50) -> float:
    """Mean GPU time of one decode step of rows [0, b) starting at position `pos`, the graph replayed
    back to back on the scheduler thread while it is idle. The steps write KV into those rows, so
    the prefix cache forgets what it held there."""
    dec = gen.dec
    steps = min(steps, dec.max_len - pos)

    def timed() -> float:
        L = pick_bucket(dec.len_buckets, pos + steps + 1)
        dec.pos[:b] = pos
        dec.step(b, L, False)  # captures the graph if no run used this bucket
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            dec.step(b, L, False)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        dec.pos[:b] = dec.idle_pos
        for slot in range(b):
            gen.cache.keep(slot, 0)
        return 1000 * dt / steps

    return gen._command(timed).result()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--archs", default="qwen2.5-0.5b,qwen3-4b")
    ap.add_argument("--batches", default="1,16,64")
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--lora", default="qwen2.5-0.5b", help="archs also measured with a rank-16 LoRA on all projections")
    ap.add_argument("--decode-attention", default="",
                    help="decode attention implementations to compare, e.g. sdpa,triton (default: the decoder's)")
    ap.add_argument("--overlap", default="", help="scheduler modes to compare: on,off (default: the scheduler's)")
    ap.add_argument("--out")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    impls = args.decode_attention.split(",") if args.decode_attention else [None]
    overlaps = [{"on": True, "off": False}[o] for o in args.overlap.split(",")] if args.overlap else [None]
    rows = []
    for arch in args.archs.split(","):
        model = build(arch)
        for lora, impl, overlap in [(lora, impl, overlap)
                                    for lora in ([False, True] if arch in args.lora.split(",") else [False])
                                    for impl in impls for overlap in overlaps]:
            torch.cuda.reset_peak_memory_stats()
            t = time.perf_counter()
            dec = Decoder(model, num_slots=max(batches), max_len=args.prompt_len + args.new_tokens + 16,
                          enable_lora=lora, max_loras=1, max_lora_rank=16)
            dec.decode_attention = impl or dec.decode_attention
            gen = Generator(dec, eos_ids=set(), overlap=overlap)
            adapter = serve_random_lora(gen, random_lora(dec, 16)) if lora else None
            for b in batches:  # warm-up: compile kernels, capture graphs for this bucket
                run_batch(gen, b, args.prompt_len, 16, adapter)
            warm = time.perf_counter() - t
            measured = [{"arch": arch, "lora": lora, "attention": dec.decode_attention, "overlap": gen.overlap,
                         **run_batch(gen, b, args.prompt_len, args.new_tokens, adapter),
                         "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
                         "warmup_s": round(warm, 1)} for b in batches]
            for row in measured:  # after the runs: these steps overwrite cached rows
                row["step_ms"] = round(step_ms(gen, row["batch"], args.prompt_len + args.new_tokens // 2), 3)
                print(json.dumps(row), flush=True)
            rows += measured
            gen.close()
            del gen, dec
        del model
        torch.cuda.empty_cache()
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| arch | LoRA | attention | overlap | batch | tok/s (e2e) | decode tok/s | step ms | TTFT ms | peak GiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['arch']} | {'r16' if r['lora'] else '-'} | {r['attention']} | {'on' if r['overlap'] else 'off'} "
              f"| {r['batch']} | {r['tok_s']} "
              f"| {r['decode_tok_s']} | {r['step_ms']} | {r['ttft_ms']} | {r['peak_mem_gib']} |")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
