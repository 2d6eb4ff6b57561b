"""Decode attention in Triton: one query token per row over the decoder's slot KV cache, split
along the keys ("flash-decoding"), with the new token's k/v written into the cache by the same
kernel. Each row names the cache row (slot) it reads, so the same kernels also run the decoder's
extend steps (`Decoder.prefill` of short suffixes): every token of a prompt's uncached suffix is a
row of its slot, at its own position, after all of the suffix's k/v have been written.

Why not SDPA at decode: a decode step has q_len 1, so a fused kernel tiled for long queries wastes
most of its work; cuDNN's took ~18 µs a layer for Qwen2.5-0.5B on an H100 (benches/RESULTS.md),
about a quarter of the step. Here:
- the query heads that share a KV head (GQA) are one tile, so every KV block is read once;
- each row reads only the keys it may attend to (its window up to its own position), not the whole
  context bucket `L`;
- the keys are cut into splits processed in parallel and combined by a second kernel, so one row
  with a long context still fills the GPU;
- the split size depends on `L` alone, not on the batch size: a row's arithmetic is the same
  whichever rows share its step, under the same context bucket;
- the new k/v are stored by the kernel that reads the block they land in (in place of two index
  writes a layer), and the window is a key range (no additive masks to build each step).

The grid is fixed by (b, L), positions are read on the device, and nothing syncs with the host,
so the two kernels live inside the decoder's captured CUDA graphs. With `TRITON_INTERPRET=1` set
before this module is imported, the same kernels run on CPU tensors (the tests use that).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# at most this many splits of a row's keys: enough parallel work for one row over a long context
MAX_SPLITS = 64


@triton.jit
def _key_range(pos_ptr, row, L, WINDOW: tl.constexpr):
    """The cache positions [lo, hi) row `row` attends to: its window up to its own position, inside
    [0, L) (the additive masks of decoder.Decoder._masks, as a range). Empty for idle rows whose
    position lies past the window's reach."""
    pos = tl.load(pos_ptr + row)
    hi = tl.minimum(pos + 1, L)
    if WINDOW > 0:
        lo = tl.maximum(pos - WINDOW + 1, 0)
    else:
        lo = pos * 0
    return pos, lo, hi


@triton.jit
def _split_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    kc_ptr,
    vc_ptr,
    pos_ptr,
    slot_ptr,
    acc_ptr,
    m_ptr,
    l_ptr,
    sq_b,
    sq_h,
    sk_b,
    sk_h,
    sv_b,
    sv_h,
    sc_b,
    sc_h,
    sc_t,
    L,
    n_splits,
    scale_log2e,
    H: tl.constexpr,
    G: tl.constexpr,
    G_PAD: tl.constexpr,
    D: tl.constexpr,
    D_PAD: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCKS: tl.constexpr,
    WINDOW: tl.constexpr,
    PRECISION: tl.constexpr,
    WRITE: tl.constexpr,
):
    """One (row, KV head, split): the unnormalised attention of the G query heads of this KV head
    over the split's keys of the row's slot, with its running max (log2 units) and sum, for
    _combine_kernel."""
    row = tl.program_id(0).to(tl.int64)
    kvh = tl.program_id(1)
    s = tl.program_id(2)
    pos, lo, hi = _key_range(pos_ptr, row, L, WINDOW)
    split_len = BLOCKS * BLOCK_N
    s0 = s * split_len
    start = tl.maximum(lo, s0)
    end = tl.minimum(hi, s0 + split_len)

    offs_d = tl.arange(0, D_PAD)
    d_ok = offs_d < D
    k_new = tl.load(k_ptr + row * sk_b + kvh * sk_h + offs_d, mask=d_ok, other=0.0)
    v_new = tl.load(v_ptr + row * sv_b + kvh * sv_h + offs_d, mask=d_ok, other=0.0)
    cache_row = tl.load(slot_ptr + row).to(tl.int64) * sc_b + kvh * sc_h
    if WRITE:
        # the one program whose split holds the row's position writes the new k/v there; it uses
        # them from registers below, so no program ever reads that cache entry
        owner = (pos >= s0) & (pos < s0 + split_len) & (pos < L)
        tl.store(kc_ptr + cache_row + pos * sc_t + offs_d, k_new, mask=d_ok & owner)
        tl.store(vc_ptr + cache_row + pos * sc_t + offs_d, v_new, mask=d_ok & owner)

    if start < end:
        offs_g = tl.arange(0, G_PAD)
        heads = kvh * G + offs_g
        g_ok = offs_g < G
        q = tl.load(
            q_ptr + row * sq_b + heads[:, None] * sq_h + offs_d[None, :],
            mask=g_ok[:, None] & d_ok[None, :],
            other=0.0,
        )
        m = tl.full([G_PAD], float("-inf"), tl.float32)
        l_sum = tl.zeros([G_PAD], tl.float32)
        acc = tl.zeros([G_PAD, D_PAD], tl.float32)
        offs_n = tl.arange(0, BLOCK_N)
        # a loop of constant length (runtime bounds also break Triton's interpreter under NumPy 2.4)
        for i in range(BLOCKS):
            n0 = s0 + i * BLOCK_N
            if (n0 < end) & (n0 + BLOCK_N > start):
                n = n0 + offs_n
                n_ok = (n >= start) & (n < end)
                at = cache_row + n[:, None] * sc_t + offs_d[None, :]
                ok = n_ok[:, None] & d_ok[None, :]
                mine = (n == pos)[:, None]
                k = tl.where(mine, k_new[None, :], tl.load(kc_ptr + at, mask=ok, other=0.0))
                v = tl.where(mine, v_new[None, :], tl.load(vc_ptr + at, mask=ok, other=0.0))
                scores = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale_log2e
                scores = tl.where(n_ok[None, :], scores, float("-inf"))
                m_new = tl.maximum(m, tl.max(scores, 1))
                p = tl.exp2(scores - m_new[:, None])
                alpha = tl.exp2(m - m_new)
                l_sum = l_sum * alpha + tl.sum(p, 1)
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
                m = m_new
        part = (row * H + heads) * n_splits + s
        tl.store(m_ptr + part, m, mask=g_ok)
        tl.store(l_ptr + part, l_sum, mask=g_ok)
        tl.store(acc_ptr + part[:, None] * D + offs_d[None, :], acc, mask=g_ok[:, None] & d_ok[None, :])


@triton.jit
def _combine_kernel(
    acc_ptr,
    m_ptr,
    l_ptr,
    pos_ptr,
    o_ptr,
    so_b,
    so_h,
    L,
    split_len,
    n_splits,
    H: tl.constexpr,
    D: tl.constexpr,
    D_PAD: tl.constexpr,
    S_PAD: tl.constexpr,
    WINDOW: tl.constexpr,
):
    """One (row, query head): the softmax-weighted sum of the splits that overlap the row's keys
    (the others were never written). A row with no keys gets zeros."""
    pid = tl.program_id(0).to(tl.int64)
    row = pid // H
    h = pid % H
    pos, lo, hi = _key_range(pos_ptr, row, L, WINDOW)
    offs_s = tl.arange(0, S_PAD)
    live = (offs_s < n_splits) & (offs_s * split_len < hi) & ((offs_s + 1) * split_len > lo) & (lo < hi)
    part = (row * H + h) * n_splits + offs_s
    m = tl.load(m_ptr + part, mask=live, other=float("-inf"))
    l_sum = tl.load(l_ptr + part, mask=live, other=0.0)
    top = tl.max(m, 0)
    w = tl.where(live, tl.exp2(m - tl.where(top > float("-inf"), top, 0.0)), 0.0)
    offs_d = tl.arange(0, D_PAD)
    d_ok = offs_d < D
    acc = tl.load(acc_ptr + part[:, None] * D + offs_d[None, :], mask=live[:, None] & d_ok[None, :], other=0.0)
    den = tl.sum(l_sum * w, 0)
    out = tl.sum(acc * w[:, None], 0) / tl.where(den > 0, den, 1.0)
    tl.store(o_ptr + row * so_b + h * so_h + offs_d, out.to(o_ptr.dtype.element_ty), mask=d_ok)


def split_kv_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    pos: torch.Tensor,
    L: int,
    window: int | None,
    scale: float,
    slots: torch.Tensor | None = None,
    write: bool = True,
    max_splits: int = MAX_SPLITS,
) -> torch.Tensor:
    """Writes the new keys and values `k`, `v` `[b, K, D]` of rows [0, b) at their positions `pos`
    `[b]` into `k_cache`, `v_cache` `[slots, K, cache_len, D]`, and returns the attention of the
    queries `q` `[b, H, D]` over cache positions [0, L) that are at most the row's position and, with
    a `window`, within it: `[b, H, D]`, what ops.attention gives under decoder.Decoder._masks.
    A row whose position is L or more (an idle slot) writes nothing; one at position -1 (a pad)
    attends to nothing and gets zeros.

    Row i reads and writes cache row `slots[i]` (default: i). Rows that share a slot must not write
    (`write=False`, their k/v stored beforehand): one row's write would race another's read. The
    keys are cut into at most `max_splits` splits, a number that depends on `L` alone."""
    if any(t.stride(-1) != 1 for t in (q, k, v, k_cache, v_cache)):
        raise ValueError("split_kv_attention reads the head dimension as contiguous; a tensor here is strided")
    b, H, D = q.shape
    K = k.shape[1]
    G = H // K
    if slots is None:
        slots = torch.arange(b, device=q.device)
    block_n = 64 if D <= 128 else 32
    blocks = triton.cdiv(triton.cdiv(L, block_n), max_splits)  # per split
    split_len = block_n * blocks
    n_splits = triton.cdiv(L, split_len)
    f32 = dict(device=q.device, dtype=torch.float32)
    acc = torch.empty(b, H, n_splits, D, **f32)
    m = torch.empty(b, H, n_splits, **f32)
    l_sum = torch.empty(b, H, n_splits, **f32)
    o = torch.empty(b, H, D, device=q.device, dtype=q.dtype)
    window = window or 0
    d_pad = triton.next_power_of_2(D)
    # 8 warps for tiles of 8k elements: with 4, head dim 128 spills registers (ptxas, sm_90)
    warps = 4 if d_pad * block_n <= 4096 else 8
    _split_kernel[(b, K, n_splits)](
        q,
        k,
        v,
        k_cache,
        v_cache,
        pos,
        slots,
        acc,
        m,
        l_sum,
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        L,
        n_splits,
        scale * 1.4426950408889634,  # log2(e): the kernel uses exp2
        H=H,
        G=G,
        G_PAD=max(16, triton.next_power_of_2(G)),  # tl.dot's smallest tile
        D=D,
        D_PAD=d_pad,
        BLOCK_N=block_n,
        BLOCKS=blocks,
        WINDOW=window,
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32",  # fp32 models stay fp32
        WRITE=write,
        num_warps=warps,
        num_stages=2,
    )
    _combine_kernel[(b * H,)](
        acc,
        m,
        l_sum,
        pos,
        o,
        o.stride(0),
        o.stride(1),
        L,
        split_len,
        n_splits,
        H=H,
        D=D,
        D_PAD=d_pad,
        S_PAD=triton.next_power_of_2(n_splits),
        WINDOW=window,
        num_warps=4,
    )
    return o
