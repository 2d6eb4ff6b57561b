"""The one-kernel RoPE of a fused qkv row (fused_rope.py) against `ops.qkv_rope`, which it
replaces on CUDA for models without q/k norms or partial rotary dims: GQA and MHA head counts,
positions at both ends of the table and a pad at position -1 (the extend step's), float32 and
float16 (and bf16 on CUDA). Without CUDA the kernel runs in Triton's interpreter (conftest.py)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from train_agent.engine.kernels.fused_rope import fused_qkv_rope  # noqa: E402
from train_agent.engine.ops import qkv_rope  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else [])
TOLERANCE = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 1e-2}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("heads", [(14, 2, 64), (4, 4, 32), (6, 1, 16)], ids=["gqa7", "mha", "gqa6"])
def test_fused_rope_matches_qkv_rope(heads, dtype):
    H, K, D = heads
    g = torch.Generator().manual_seed(H * 100 + D)
    positions = 300
    cos = torch.randn(positions, D, generator=g).to(DEVICE, dtype)
    sin = torch.randn(positions, D, generator=g).to(DEVICE, dtype)
    pos = torch.tensor([0, 17, positions - 1, -1, 150], device=DEVICE)
    qkv = torch.randn(len(pos), (H + 2 * K) * D, generator=g).to(DEVICE, dtype)

    want = qkv_rope(qkv.float(), cos[pos].float(), sin[pos].float(), H, K, D, None, None, 1e-6)
    got = fused_qkv_rope(qkv, cos, sin, pos, H, K, D)

    for g_, w in zip(got, want):
        assert g_.shape == w.shape and g_.dtype == dtype
        assert (g_.float() - w).abs().max() <= TOLERANCE[dtype] * max(1.0, w.abs().max().item())
    assert got[2].data_ptr() == qkv[:, (H + K) * D :].data_ptr()  # v is a view of the row, not a copy
