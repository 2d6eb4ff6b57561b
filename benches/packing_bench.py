"""One trainer step's forward and backward under each packing (rows, prefix-tree), side by side on
the same step file: the real samples of a run (a GRPO or SFT step from `{run}/trainer/inbox/`), the
run's model, its LoRA settings and precision, as the trainer would run them.

    PYTHONPATH=python python benches/packing_bench.py runs/demo/grpo/trainer/inbox/step-000001.json \\
        --model smollm2-135m-instruct --micro-batch-tokens 4096 --repeats 2 --out packing.json

Prints, per packing: micro-batches, tokens through the model (padded rows, or the trees' distinct
tokens), seconds for the step's forwards and backwards (median of --repeats, after a warm-up with
--warmup),
and the process's peak RSS (CPU) or peak allocated memory (CUDA).

`--attention` runs the step under another attention than the trainer's (`sdpa`, its default;
`sdpa-math`, SDPA's unfused reference kernel; `eager`, transformers' matmul-and-softmax), and
`--profile` prints where the last repeat's time went (torch.profiler's operators by self time):

    PYTHONPATH=python python benches/packing_bench.py runs/demo/sft/trainer/inbox/step-000003.json \
        --model smollm2-135m-instruct --packings prefix-tree --repeats 2 --profile
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from train_agent.trainer.batches import PACKINGS, plan_step, read_step_file  # noqa: E402
from train_agent.trainer.loss import grpo_loss  # noqa: E402
from train_agent.trainer.config import Config, base_dtype, resolved_precision  # noqa: E402
from train_agent.trainer.model import build_model, micro_batch_to  # noqa: E402
from train_agent.trainer.model import trained_logprobs  # noqa: E402
from train_agent.trainer.module import peak_memory  # noqa: E402


def config(model: str, out: str) -> Config:
    contract = Path(__file__).resolve().parents[1] / "python/tests/contract/trainer_config.grpo.json"
    data = json.loads(contract.read_text())
    data.update(model=model, output_dir=out)
    return Config.from_dict(data)


def step_time(model, mbs, device) -> float:
    t0 = time.perf_counter()
    for mb in mbs:
        print(f"  micro-batch of {len(mb['input_ids'])} rows", file=sys.stderr, flush=True)
        mb = micro_batch_to(mb, device)
        m = mb["loss_mask"]
        logp, _ = trained_logprobs(model, mb)
        loss, _ = grpo_loss(logp, mb["old_logprobs"][m], mb["advantages"][m], mb["weights"][m], 0.2, 0.28)
        loss.backward()
    if device.type == "cuda":
        torch.cuda.synchronize()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


ATTENTIONS = ("sdpa", "sdpa-math", "eager")


def kernel(attention: str):
    """The context that makes `attention` SDPA's math kernel (the other choices need none)."""
    if attention == "sdpa-math":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel(SDPBackend.MATH)
    return contextlib.nullcontext()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step_file")
    ap.add_argument("--model", required=True)
    ap.add_argument("--micro-batch-tokens", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--warmup", action="store_true", help="one unmeasured run of each packing first")
    ap.add_argument("--packings", default=",".join(PACKINGS), help="in this order, comma-separated")
    ap.add_argument("--precision", default="auto", help="the trainer's: auto, 32-true, bf16-mixed")
    ap.add_argument("--attention", choices=ATTENTIONS, default="sdpa", help="the decoder's attention (default: the trainer's)")
    ap.add_argument("--profile", action="store_true", help="print the last repeat's operators by self time")
    ap.add_argument("--out")
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cfg = config(args.model, "/tmp/packing-bench")
    cfg.precision = args.precision
    precision = resolved_precision(cfg)
    model = build_model(cfg, base_dtype(precision)).to(device)
    model.train()
    if args.attention == "eager":
        model.get_base_model().set_attn_implementation("eager")
    _, samples, _ = read_step_file(Path(args.step_file))
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16-mixed")
    rows = []
    for packing in args.packings.split(","):
        mbs = plan_step(samples, 0, 1, args.micro_batch_tokens, "token-mean", packing=packing)
        tokens = sum(
            sum(len(n) for n in mb["tree"].nodes) if "tree" in mb else mb["input_ids"].numel() for mb in mbs
        )
        with autocast, kernel(args.attention):
            times = [step_time(model, mbs, device) for _ in range(args.repeats + args.warmup - args.profile)][args.warmup :]
            if args.profile:
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                    times.append(step_time(model, mbs, device))
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12), file=sys.stderr)
        row = dict(
            packing=packing,
            samples=len(samples),
            sample_tokens=sum(len(s.input_ids) for s in samples),
            micro_batches=len(mbs),
            model_tokens=tokens,
            forward_backward_s=statistics.median(times),
            runs_s=times,
            precision=precision,
            attention=args.attention,
            **peak_memory(device),
        )
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
