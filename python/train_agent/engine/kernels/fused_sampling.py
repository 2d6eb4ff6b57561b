"""sampling.sample in two Triton kernels, for decode steps without top-p on CUDA.

Why: the sampler's reductions run over the vocabulary once per row. Compiled by torch.compile, a
reduction of 64 rows is 64 programs, each walking 152k logits alone, a large share of a batch-64
decode step (benches/RESULTS.md, "Engine decode throughput"). Here the
vocabulary is cut into chunks of `CHUNK` logits, one program per (row, chunk), so the first pass
fills the GPU and reads the logits once:
- `_chunk_kernel`: per chunk, the max and sum of exponentials of the scaled logits (for the
  logsumexp), the same of the sampling distribution `softmax(logits / T)` under the grammar mask
  (for the draw), and the chunk's argmax of the policy (for greedy rows);
- `_pick_kernel`, one program per row: the logsumexp, the row's uniform (sampling.uniform, the
  same bits), the chunk that the uniform's target falls in by the cumulative chunk sums, then the
  token inside that chunk by a cumulative sum over its logits. This is sampling._draw's inverse CDF
  with blocks of `CHUNK` unnormalised weights instead of 1,024 normalised probabilities: the same
  token up to floating-point rounding at a CDF boundary.

The outputs, and their meaning, are sampling.sample's (tokens, logprobs, logsumexp, inverse
temperature). With `TRITON_INTERPRET=1` set before this module is imported the kernels run on CPU
tensors (the tests use that); the decoder uses them on CUDA only.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl

# logits a program of the first pass reads: 75 chunks for Qwen's 152k vocabulary, 4,800 programs at batch 64
CHUNK = 2048


@triton.jit
def _row_settings(temp_ptr, row, PROCESSED: tl.constexpr):
    """(t, inv_t): the row's temperature (1 for greedy rows, temp 0) and what scales its logits."""
    temp = tl.load(temp_ptr + row)
    t = tl.where(temp > 0, temp, 1.0)
    if PROCESSED:
        inv_t = tl.math.div_rn(1.0, t)
    else:
        inv_t = t * 0 + 1.0
    return temp, t, inv_t


@triton.jit
def _chunk_logits(
    logits_ptr, s_lb, mask_ptr, s_mb, row, offs, V, t, inv_t, PROCESSED: tl.constexpr, GUIDED: tl.constexpr
):
    """(scaled, policy, sampling logits) of the vocabulary entries `offs`: sampling.sample's
    `scaled`, `policy` (scaled under the grammar mask) and `policy / t` (raw mode) or `policy`
    (processed mode, already divided); -inf outside the vocabulary and where the grammar forbids."""
    ok = offs < V
    x = tl.load(logits_ptr + row * s_lb + offs, mask=ok, other=float("-inf"))
    scaled = x * inv_t
    allowed = ok
    if GUIDED:
        word = tl.load(mask_ptr + row * s_mb + offs // 32, mask=ok, other=0)
        allowed = ok & (((word >> (offs % 32)) & 1) != 0)
    policy = tl.where(allowed, scaled, float("-inf"))
    if PROCESSED:
        y = policy
    else:
        y = tl.math.div_rn(policy, t)
    return scaled, policy, y


@triton.jit
def _max_sum_exp(x):
    """(max, sum of exp(x - max)) of a block; (-inf, 0) when all of it is -inf."""
    top = tl.max(x, 0)
    safe = tl.where(top > float("-inf"), top, 0.0)
    return top, tl.sum(tl.exp(x - safe), 0)


@triton.jit
def _chunk_kernel(
    logits_ptr,
    s_lb,
    temp_ptr,
    mask_ptr,
    s_mb,
    stats_ptr,
    arg_ptr,
    V,
    n_chunks,
    CHUNK: tl.constexpr,
    PROCESSED: tl.constexpr,
    GUIDED: tl.constexpr,
):
    """One (row, chunk): the max and sum of exponentials of the scaled and of the sampling logits,
    the policy's max and its first index, into stats[0..4, row, chunk] and arg[row, chunk]."""
    row = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    _, t, inv_t = _row_settings(temp_ptr, row, PROCESSED)
    offs = c * CHUNK + tl.arange(0, CHUNK)
    scaled, policy, y = _chunk_logits(logits_ptr, s_lb, mask_ptr, s_mb, row, offs, V, t, inv_t, PROCESSED, GUIDED)
    s_max, s_sum = _max_sum_exp(scaled)
    y_max, y_sum = _max_sum_exp(y)
    p_max, p_arg = tl.max(policy, 0, return_indices=True, return_indices_tie_break_left=True)
    at = row * n_chunks + c
    plane = n_chunks * tl.num_programs(0)
    tl.store(stats_ptr + at, s_max)
    tl.store(stats_ptr + plane + at, s_sum)
    tl.store(stats_ptr + 2 * plane + at, y_max)
    tl.store(stats_ptr + 3 * plane + at, y_sum)
    tl.store(stats_ptr + 4 * plane + at, p_max)
    tl.store(arg_ptr + at, c * CHUNK + p_arg)


@triton.jit
def _uniform(seed, pos):
    """sampling.uniform's bits: splitmix64's finaliser of seed * golden + pos, top 24 bits."""
    x = seed.to(tl.uint64, bitcast=True) * 0x9E3779B97F4A7C15 + pos.to(tl.uint64, bitcast=True)
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB
    x = x ^ (x >> 31)
    return ((x >> 40).to(tl.float32) + 0.5) * (1.0 / 16777216.0)


@triton.jit
def _pick_kernel(
    logits_ptr,
    s_lb,
    temp_ptr,
    seed_ptr,
    pos_ptr,
    mask_ptr,
    s_mb,
    stats_ptr,
    arg_ptr,
    tok_ptr,
    lp_ptr,
    lse_ptr,
    inv_t_ptr,
    V,
    n_chunks,
    CHUNK: tl.constexpr,
    C_PAD: tl.constexpr,
    PROCESSED: tl.constexpr,
    GUIDED: tl.constexpr,
):
    """One row: its logsumexp, the drawn (or, at temperature 0, greedy) token and that token's logprob."""
    row = tl.program_id(0).to(tl.int64)
    temp, t, inv_t = _row_settings(temp_ptr, row, PROCESSED)
    offs_c = tl.arange(0, C_PAD)
    c_ok = offs_c < n_chunks
    at = row * n_chunks + offs_c
    plane = n_chunks * tl.num_programs(0)
    s_max = tl.load(stats_ptr + at, mask=c_ok, other=float("-inf"))
    s_sum = tl.load(stats_ptr + plane + at, mask=c_ok, other=0.0)
    y_max = tl.load(stats_ptr + 2 * plane + at, mask=c_ok, other=float("-inf"))
    y_sum = tl.load(stats_ptr + 3 * plane + at, mask=c_ok, other=0.0)
    p_max = tl.load(stats_ptr + 4 * plane + at, mask=c_ok, other=float("-inf"))

    top = tl.max(s_max, 0)
    lse = top + tl.log(tl.sum(tl.where(s_max > float("-inf"), s_sum * tl.exp(s_max - top), 0.0), 0))

    # the draw: the chunk whose cumulative weight passes the target, then the token inside it
    y_top = tl.max(y_max, 0)
    w = tl.where(y_max > float("-inf"), y_sum * tl.exp(y_max - y_top), 0.0)
    cum = tl.cumsum(w, 0)
    target = _uniform(tl.load(seed_ptr + row), tl.load(pos_ptr + row)) * tl.sum(w, 0)
    j = tl.minimum(tl.sum((c_ok & (cum <= target)).to(tl.int32), 0), n_chunks - 1)
    before = tl.sum(tl.where(offs_c < j, w, 0.0), 0)
    offs = j * CHUNK + tl.arange(0, CHUNK)
    _, _, y = _chunk_logits(logits_ptr, s_lb, mask_ptr, s_mb, row, offs, V, t, inv_t, PROCESSED, GUIDED)
    e = tl.exp(y - y_top)
    inner = tl.cumsum(e, 0)
    k = tl.sum((inner <= target - before).to(tl.int32), 0)
    # rounding can leave the target past the chunk's own sum: take its last token that can be drawn
    last = tl.max(tl.where(e > 0, tl.arange(0, CHUNK), 0), 0)
    drawn = j * CHUNK + tl.minimum(k, last)

    # greedy: the first chunk holding the policy's max, then that chunk's first index of it
    p_top = tl.max(p_max, 0)
    first = tl.min(tl.where(c_ok & (p_max == p_top), offs_c, C_PAD), 0)
    greedy = tl.load(arg_ptr + row * n_chunks + first)

    tok = tl.where(temp > 0, drawn.to(tl.int64), greedy.to(tl.int64))
    x = tl.load(logits_ptr + row * s_lb + tok)
    tl.store(tok_ptr + row, tok)
    tl.store(lp_ptr + row, x * inv_t - lse)
    tl.store(lse_ptr + row, lse)
    tl.store(inv_t_ptr + row, inv_t)


def sample_chunked(
    logits: torch.Tensor,
    temp: torch.Tensor,
    seed: torch.Tensor,
    pos: torch.Tensor,
    processed: bool = False,
    bitmask: torch.Tensor | None = None,
):
    """sampling.sample without top-p: (token [b], its logprob [b], logsumexp [b], inverse
    temperature [b]) of float32 `logits` `[b, vocab]`, each row drawn with its `temp` (0: greedy),
    `seed` and `pos`, under the packed `bitmask` if given. No host sync: graph-capturable."""
    if logits.dtype != torch.float32 or logits.stride(-1) != 1:
        raise ValueError("sample_chunked reads float32 logits with a contiguous vocabulary")
    b, V = logits.shape
    n_chunks = triton.cdiv(V, CHUNK)
    dev = logits.device
    stats = torch.empty(5, b, n_chunks, device=dev, dtype=torch.float32)
    arg = torch.empty(b, n_chunks, device=dev, dtype=torch.int32)
    tok = torch.empty(b, device=dev, dtype=torch.long)
    lp, lse, inv_t = torch.empty(3, b, device=dev, dtype=torch.float32)
    guided = bitmask is not None
    mask = bitmask if guided else arg  # never read without a grammar
    s_mb = mask.stride(0)
    flags = dict(CHUNK=CHUNK, PROCESSED=processed, GUIDED=guided)
    _chunk_kernel[(b, n_chunks)](
        logits, logits.stride(0), temp, mask, s_mb, stats, arg, V, n_chunks, **flags, num_warps=8
    )
    _pick_kernel[(b,)](
        logits,
        logits.stride(0),
        temp,
        seed,
        pos,
        mask,
        s_mb,
        stats,
        arg,
        tok,
        lp,
        lse,
        inv_t,
        V,
        n_chunks,
        C_PAD=triton.next_power_of_2(n_chunks),
        **flags,
        num_warps=8,
    )
    return tok, lp, lse, inv_t


def with_chunked_sampling(nucleus: Callable) -> Callable:
    """A sampler with sampling.sample's signature that runs `sample_chunked` and hands steps with
    top-p (a sort of the vocabulary) to `nucleus` (sampling.sample, compiled)."""

    def run(logits, temp, top_p, seed, pos, use_top_p, processed=False, bitmask=None):
        if use_top_p:
            return nucleus(logits, temp, top_p, seed, pos, use_top_p, processed, bitmask)
        return sample_chunked(logits, temp, seed, pos, processed, bitmask)

    return run
