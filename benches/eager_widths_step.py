"""One eager decode step (CPU, float32) at its own widths against the CUDA-graph buckets the
engine used eagerly before: `rows` rows at position `pos`, attending over pos + 2 positions (what
the scheduler asks for a step) or over the bucket above it, and the same with the rows rounded up
to their batch bucket. The model is the CPU demo's.

    PYTHONPATH=python python benches/eager_widths_step.py --model smollm2-135m-instruct.gguf
"""

from __future__ import annotations

import argparse
import time

import torch
from train_agent.engine.decoder import Decoder
from train_agent.engine.slots import pick_bucket
from train_agent.models import ModelSource, load_model


def step_ms(dec: Decoder, b: int, L: int, pos: int, repeat: int) -> float:
    """Mean milliseconds of a decode step of rows [0, b) at position `pos` over [0, L)."""

    def step():
        dec.pos[:b] = pos
        dec.step(b, L, False)

    step()
    t0 = time.perf_counter()
    for _ in range(repeat):
        step()
    return 1000 * (time.perf_counter() - t0) / repeat


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--rows", type=int, nargs="+", default=[12, 6])
    p.add_argument("--pos", type=int, nargs="+", default=[600, 1100, 1900])
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    dec = Decoder(
        load_model(ModelSource.parse(args.model), "cpu", torch.float32).eval(),
        num_slots=16,
        max_len=4096,
        enable_lora=True,
    )
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(
        "| rows | position | exact (rows, positions) | ms | buckets (rows, positions) | ms | saved |"
    )
    print("|---:|---:|---|---:|---|---:|---:|")
    with torch.inference_mode():
        for rows in args.rows:
            for pos in args.pos:
                widths = {
                    "exact": (rows, pos + 2),
                    "buckets": (
                        pick_bucket(dec.batch_buckets, rows),
                        pick_bucket(dec.len_buckets, pos + 2),
                    ),
                }
                ms = {
                    name: step_ms(dec, b, L, pos, args.repeat)
                    for name, (b, L) in widths.items()
                }
                (eb, eL), (bb, bL) = widths["exact"], widths["buckets"]
                print(
                    f"| {rows} | {pos} | {eb}, {eL} | {ms['exact']:.0f} | {bb}, {bL} | {ms['buckets']:.0f} | {1 - ms['exact'] / ms['buckets']:.0%} |"
                )


if __name__ == "__main__":
    main()
