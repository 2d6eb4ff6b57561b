"""CPU speed of what the demo's CPU profile runs, fp32 against bf16: a matmul, the engine's prefill
and decode (its own decoder), and a LoRA training step of SmolLM2-135M with and without a padding
mask (SDPA's math path against its fused kernel).

    PYTHONPATH=python python benches/cpu_bf16_bench.py [--model smollm2-135m-instruct]
"""

from __future__ import annotations

import argparse
import time

import torch

from train_agent.engine.decoder import Decoder
from train_agent.models import ModelSource, cpu_has_fast_bf16, load_model


def timed(fn, repeat: int) -> float:
    fn()  # warm-up: oneDNN builds its kernels on first use
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t) / repeat


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="smollm2-135m-instruct")
    args = p.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, native bf16: {cpu_has_fast_bf16()}")
    for dt in (torch.float32, torch.bfloat16):
        a, b = torch.randn(4096, 576, dtype=dt), torch.randn(576, 1536, dtype=dt)
        s = timed(lambda: a @ b, 20)
        print(f"{dt}: matmul 4096x576 @ 576x1536  {2 * 4096 * 576 * 1536 / s / 1e9:.0f} GFLOPS")

    src = ModelSource.parse(args.model)
    for dt in (torch.float32, torch.bfloat16):
        dec = Decoder(load_model(src, "cpu", dt).eval(), num_slots=16, max_len=4096, enable_lora=True)
        with torch.inference_mode():
            prompt = [[int(x) for x in torch.randint(100, 40000, (1000,))]]
            s = timed(lambda: dec.prefill(prompt, [0], [-1]), 2)
            print(f"{dt}: engine prefill, 1000-token prompt  {1000 / s:.0f} tok/s")
            s = timed(lambda: dec.step(16, 1024, False), 5)
            print(f"{dt}: engine decode, batch 16, context 1024  {16 / s:.0f} tok/s")

    from peft import LoraConfig, get_peft_model

    base = load_model(src, "cpu", torch.bfloat16)
    base.config.use_cache = False
    model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"))
    B, T = 4, 1800
    ids = torch.randint(100, 40000, (B, T))
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 1500:] = 0  # one right-padded row

    def step(attention_mask):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = model.base_model.model.model(input_ids=ids, attention_mask=attention_mask).last_hidden_state
            logits = torch.nn.functional.linear(h[:, ::10].float(), model.base_model.model.lm_head.weight.float())
        logits.logsumexp(-1).mean().backward()

    for name, m in (("with a padding mask", mask), ("without a mask", None)):
        s = timed(lambda: step(m), 1)
        print(f"bf16-mixed: LoRA r16 step, {B}x{T} tokens, {name}  {B * T / s:.0f} tok/s")


if __name__ == "__main__":
    main()
