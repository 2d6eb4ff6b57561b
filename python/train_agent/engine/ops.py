"""The fast decoder's element-wise pieces (RMSNorm, RoPE, the gated activation, attention), on
tensors only: decoder.Decoder runs them eagerly on CPU and torch.compile'd on CUDA."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm in float32. A `w` in the model's dtype scales after the cast back (LlamaRMSNorm); a
    float32 `w` (Gemma's `1 + weight`) scales before it (GemmaRMSNorm): the two round differently
    in bf16, and in float32 they are the same arithmetic."""
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    if w.dtype == torch.float32:
        return (x32 * w).to(x.dtype)
    return w * x32.to(x.dtype)


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor, eps: float):
    residual = x + residual
    return rms_norm(residual, w, eps), residual


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on the first `cos.shape[-1]` dims of each head (all of them unless the rotary part is
    partial, as Phi's `partial_rotary_factor` makes it); the rest pass through."""
    d = cos.shape[-1]
    if d == x.shape[-1]:
        return x * cos + _rotate_half(x) * sin
    rot = x[..., :d]
    return torch.cat((rot * cos + _rotate_half(rot) * sin, x[..., d:]), dim=-1)


def qkv_rope(qkv, cos, sin, n_heads: int, n_kv: int, head_dim: int, q_w, k_w, eps: float):
    """Splits a fused qkv row into heads, applies per-head q/k norms if any (Qwen3, Gemma 3), then RoPE."""
    n = qkv.shape[0]
    q, k, v = qkv.split([n_heads * head_dim, n_kv * head_dim, n_kv * head_dim], dim=-1)
    q = q.reshape(n, n_heads, head_dim)
    k = k.reshape(n, n_kv, head_dim)
    v = v.reshape(n, n_kv, head_dim)
    if q_w is not None:
        q = rms_norm(q, q_w, eps)
        k = rms_norm(k, k_w, eps)
    cos, sin = cos[:, None, :], sin[:, None, :]
    return _rope(q, cos, sin), _rope(k, cos, sin), v


def act_mul(gate_up: torch.Tensor, gelu: bool) -> torch.Tensor:
    """act(gate) * up of a fused gate/up row: SiLU (Llama, Phi-3) or tanh-approximated GELU (Gemma)."""
    gate, up = gate_up.chunk(2, dim=-1)
    return (F.gelu(gate, approximate="tanh") if gelu else F.silu(gate)) * up


def attention(q, k, v, mask: torch.Tensor | None, scale: float, softcap: float | None, math: bool) -> torch.Tensor:
    """Attention of q `[B, H, T, D]` over k, v `[B, K, S, D]` (H a multiple of K) under an additive
    `mask` broadcastable to `[B, H, T, S]` (None: causal over T == S). Soft-capped scores (Gemma 2:
    `cap * tanh(s / cap)`) have no fused kernel, so they, and `math`, take two matmuls, in the order
    of transformers' eager attention."""
    if softcap is None and not math:
        gqa = q.shape[1] != k.shape[1]
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None, scale=scale, enable_gqa=gqa
        )
    if q.shape[1] != k.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    w = torch.matmul(q, k.transpose(-1, -2)) * scale
    if softcap is not None:
        w = torch.tanh(w / softcap) * softcap
    w = w + mask
    return torch.matmul(w.softmax(-1, dtype=torch.float32).to(q.dtype), v)
