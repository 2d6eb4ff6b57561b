"""RoPE of a fused qkv row in one Triton kernel, for the decoder's CUDA path.

Why: torch.compile turns `decoder.qkv_rope` into two kernels (q and k have different head counts)
and the forward gathers the cos/sin rows of the step's positions with two more. At batch 64 the
two RoPE kernels took ~5 µs a layer of a ~59 µs layer of Qwen2.5-0.5B on an H200 (benches/RESULTS.md),
almost all of it launch latency. Here one program per token reads its q and k heads and its cos/sin
row by position and writes the rotated q and k; v stays a view of the qkv row.

It covers what the Llama family needs: full rotary dims and no per-head q/k norms. Qwen3 and
Gemma 3 (q/k norms) and Phi (partial rotary) keep the compiled `qkv_rope`. The arithmetic is
float32 with one rounding to the model's dtype, as inductor's kernel does. With
`TRITON_INTERPRET=1` set before this module is imported, the kernel runs on CPU tensors (the
tests use that).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(
    qkv_ptr,
    s_qkv,
    cos_ptr,
    sin_ptr,
    s_tab,
    n_pos,
    pos_ptr,
    q_ptr,
    k_ptr,
    H: tl.constexpr,
    K: tl.constexpr,
    D: tl.constexpr,
    HK_PAD: tl.constexpr,
):
    """One token: heads [0, H) of its row are q, [H, H + K) are k; each is rotated by the cos/sin
    row of the token's position (a negative position counts from the end, as torch indexing does)."""
    row = tl.program_id(0).to(tl.int64)
    pos = tl.load(pos_ptr + row)
    pos = tl.where(pos < 0, pos + n_pos, pos)
    heads = tl.arange(0, HK_PAD)
    offs = tl.arange(0, D)
    half: tl.constexpr = D // 2
    partner = (offs + half) % D  # rotate_half: x[j + D/2] negated for the first half, x[j - D/2] after
    sign = tl.where(offs < half, -1.0, 1.0)
    ok = heads < H + K
    base = qkv_ptr + row * s_qkv + heads[:, None] * D
    x = tl.load(base + offs[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
    x_rot = tl.load(base + partner[None, :], mask=ok[:, None], other=0.0).to(tl.float32) * sign[None, :]
    cos = tl.load(cos_ptr + pos * s_tab + offs).to(tl.float32)
    sin = tl.load(sin_ptr + pos * s_tab + offs).to(tl.float32)
    out = (x * cos[None, :] + x_rot * sin[None, :]).to(q_ptr.dtype.element_ty)
    is_q = heads < H
    tl.store(q_ptr + row * H * D + heads[:, None] * D + offs[None, :], out, mask=is_q[:, None])
    k_heads = tl.where(is_q, 0, heads - H)
    tl.store(k_ptr + row * K * D + k_heads[:, None] * D + offs[None, :], out, mask=(ok & ~is_q)[:, None])


def fused_qkv_rope(
    qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pos: torch.Tensor, n_heads: int, n_kv: int, head_dim: int
):
    """`decoder.qkv_rope` without q/k norms, reading the RoPE tables `cos`, `sin` `[positions,
    head_dim]` at `pos` `[n]` itself: (q `[n, H, D]`, k `[n, K, D]`, v `[n, K, D]`, a view of `qkv`)."""
    n = qkv.shape[0]
    H, K, D = n_heads, n_kv, head_dim
    if qkv.stride(-1) != 1 or cos.stride(-1) != 1 or cos.stride(0) != sin.stride(0) or D & (D - 1):
        raise ValueError("fused_qkv_rope needs contiguous rows, tables of one layout and a power-of-two head dim")
    q = torch.empty(n, H, D, device=qkv.device, dtype=qkv.dtype)
    k = torch.empty(n, K, D, device=qkv.device, dtype=qkv.dtype)
    _rope_kernel[(n,)](
        qkv,
        qkv.stride(0),
        cos,
        sin,
        cos.stride(0),
        cos.shape[0],
        pos,
        q,
        k,
        H=H,
        K=K,
        D=D,
        HK_PAD=triton.next_power_of_2(H + K),
        num_warps=4,
    )
    v = qkv[:, (H + K) * D :].view(n, K, D)
    return q, k, v
