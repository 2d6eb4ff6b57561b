"""The engine's CPU prefill and decode steps on the CPU demo's model, for the `train_agent` on
PYTHONPATH: run it on an anchor checkout's `python/` and on this one, one after the other.

- prefill: one batch as the scheduler admits them in a multi-turn validation, rows with cached
  prefixes of 900-1,900 tokens and new suffixes of 40-900 tokens (a first turn beside tool results);
- decode: one step of ragged rows (contexts of 900-2,000 positions) with an idle slot among them.

    PYTHONPATH=python python benches/cpu_engine_steps.py --model smollm2-135m-instruct
"""

from __future__ import annotations

import argparse
import time

import torch
from train_agent.engine.decoder import Decoder
from train_agent.models import ModelSource, default_dtype, load_model


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    g = torch.Generator().manual_seed(0)

    def toks(n: int) -> list[int]:
        return torch.randint(100, 40000, (n,), generator=g).tolist()

    model = load_model(
        ModelSource.parse(args.model),
        "cpu",
        default_dtype("cpu"),
    )
    dec = Decoder(
        model.eval(),
        num_slots=16,
        max_len=4096,
        enable_lora=True,
        max_loras=2,
        max_lora_rank=16,
    )
    heads = [toks(900 + 100 * i) for i in range(11)]
    suffixes = [toks(n) for n in (40, 60, 300, 900, 80, 120)]
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {dec.dtype}, decode attention {dec.decode_attention}"
    )
    with torch.inference_mode():
        for slot, head in enumerate(heads):
            dec.prefill([head], [slot], [0])
        rows = list(range(len(suffixes)))
        prompts = [heads[r] + suffixes[r] for r in rows]
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            dec.prefill(prompts, rows, [0] * len(rows), [len(heads[r]) for r in rows])
            times.append(time.perf_counter() - t0)
        real = sum(map(len, suffixes))
        print(
            f"prefill of {len(rows)} rows, {real} new tokens (padded {len(rows) * max(map(len, suffixes))}): "
            f"{', '.join(f'{t:.2f}' for t in times)} s"
        )
        # ragged rows with slot 5 idle (at the idle position, as the scheduler leaves a free slot)
        b = len(heads)
        dec.pos[:b] = torch.tensor([len(h) + 7 * r for r, h in enumerate(heads)])
        dec.pos[5] = dec.idle_pos
        L = int(dec.pos[:b][dec.pos[:b] < dec.idle_pos].max()) + 2
        dec.step(b, L, False)
        ms = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            for _ in range(5):
                dec.pos[:b] = torch.tensor([len(h) + 7 * r for r, h in enumerate(heads)])
                dec.pos[5] = dec.idle_pos
                dec.step(b, L, False)
            ms.append(1000 * (time.perf_counter() - t0) / 5)
        print(f"decode step of {b} rows (one idle), contexts up to {L}: {', '.join(f'{m:.0f}' for m in ms)} ms")


if __name__ == "__main__":
    main()
