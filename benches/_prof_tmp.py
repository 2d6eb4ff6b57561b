import sys, torch
sys.path.insert(0, "benches"); sys.path.insert(0, "python")
from engine_bench import build
from train_agent.decoder import Decoder
for arch in ("qwen2.5-0.5b", "qwen3-4b"):
    model = build(arch)
    dec = Decoder(model, num_slots=64, max_len=800)
    for attn in ("sdpa", "math"):
        dec.decode_attention = attn; dec.graphs.clear()
        for b in (1, 64):
            with torch.inference_mode():
                dec.pos[:b] = 600
                dec.step(b, 792, False); torch.cuda.synchronize()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                for _ in range(50): dec.step(b, 792, False)
                e.record(); torch.cuda.synchronize()
                print(f"{arch} attn={attn} b={b} graph step ms {s.elapsed_time(e) / 50:.3f}", flush=True)
    del dec, model; torch.cuda.empty_cache()
