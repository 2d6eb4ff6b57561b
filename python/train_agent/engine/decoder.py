"""A serving forward pass for Llama-family decoders (Llama, Mistral, Qwen2, Qwen3) and their close
relatives (Gemma 2, Gemma 3 text, Phi-3/Phi-4), written over the Hugging Face module's own weights.
Other causal LMs are served by `generic.GenericDecoder` through transformers' own forward.

The relatives differ from Llama only in parameters of the same layer, read from the config:
- Gemma: embeddings scaled by sqrt(hidden), RMSNorm weights `1 + w` applied in float32 before the
  cast back, a second norm after attention and after the MLP ("sandwich" norms), GELU (tanh) gates,
  queries scaled by `query_pre_attn_scalar`, tanh soft-capping of attention scores and of the final
  logits (Gemma 2), q/k norms and a separate RoPE table for local layers (Gemma 3);
- Phi-3: q/k/v and gate/up already fused in the checkpoint, RoPE on part of each head
  (`partial_rotary_factor`);
- sliding-window layers (Gemma's local layers, Mistral, Phi-3, Qwen2 with `use_sliding_window`):
  the static cache keeps every position, so a window is only a mask over it, exact at any length.

Why not `model.generate`: every decode step there is hundreds of small kernel launches driven from
Python (~95 ms a step for Qwen2.5-0.5B on an H100). Here the decode step works on fixed buffers
only, so on CUDA it is captured once per (batch bucket, context bucket) as a CUDA graph and
replayed with a single launch:

- a static KV cache, one row ("slot") per running sequence: `k_cache[layer][slot, kv_head, pos, :]`;
- q/k/v and gate/up projections fused into one matmul each (the HF modules keep views of the fused
  weights, so the model object still works for reference forwards);
- LoRA as fixed-size banks (`A: [in, parts*slots*rank]`, `B: [parts*slots*rank, out]`) and a
  per-row adapter index, so rows of different adapters share one step and loading an adapter is an
  in-place copy that keeps the captured graphs valid (a punica-style batched LoRA in two matmuls);
- small elementwise pieces (RMSNorm, RoPE, SiLU*up) compiled by torch.compile into one kernel each;
  RoPE of q and k in one Triton kernel where no q/k norms or partial rotary dims need that one
  (fused_rope.py);
- the sampler in two Triton kernels over vocabulary chunks (fused_sampling.py; steps with top-p
  keep the compiled torch sampler);
- decode attention in Triton (split_kv.py): a split-KV kernel that reads each row's own keys only
  and writes the new k/v into the cache itself (SDPA, for q_len 1, cost ~18 µs a layer);
- short prefills (the suffixes prefix caching leaves) as extend steps: one such kernel row per
  token, captured per (tokens bucket, context bucket) like the decode step (`_extend`).

On CPU the same code runs eagerly (no graphs, no compile); it matches the HF forward to fp32
rounding, which the tests check.
"""

from __future__ import annotations

import importlib.util
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from train_agent.engine.sampling import LOGPROBS_MODES, sample

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "phi3")
GEMMA_TYPES = ("gemma2", "gemma3_text")
# hidden activation -> whether the gate is GELU (tanh approximation) rather than SiLU
ACTIVATIONS = {"silu": False, "gelu_pytorch_tanh": True}
# RoPE types whose tables depend on the length of the sequence being run, which one static table
# for every position cannot reproduce
LENGTH_DEPENDENT_ROPE = ("dynamic", "longrope")
# PEFT module name -> (our fused projection, part index inside it)
LORA_TARGETS = {
    "q_proj": ("qkv", 0),
    "k_proj": ("qkv", 1),
    "v_proj": ("qkv", 2),
    "o_proj": ("o", 0),
    "gate_proj": ("gate_up", 0),
    "up_proj": ("gate_up", 1),
    "down_proj": ("down", 0),
}
# A prefill of at most this many tokens (all prompts' uncached suffixes together) runs as an extend
# step (Decoder._extend): the later turns of a multi-turn rollout under prefix caching, whose
# suffixes are a tool result and a few template tokens. Its attention reads each row's prefix once
# per row, so longer prefills (first turns, no cache) stay on the batched SDPA path.
EXTEND_TOKENS = 1024
# the extend step's key splits: its rows already fill the GPU, and fewer splits keep the partial
# sums of a 1024-row step small (1024 x heads x splits x head dim floats)
EXTEND_SPLITS = 8
# checkpoints that fuse q/k/v and gate/up themselves (Phi-3): one LoRA per fused module
FUSED_LORA_TARGETS = {
    "qkv_proj": ("qkv", 0),
    "o_proj": ("o", 0),
    "gate_up_proj": ("gate_up", 0),
    "down_proj": ("down", 0),
}


# ---- elementwise pieces (compiled on CUDA) ----------------------------------------------------


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


# ---- layers -----------------------------------------------------------------------------------


@dataclass
class Proj:
    """A (possibly fused) linear layer with an optional LoRA bank.

    `parts` are the output sizes of the fused projections (q, k, v); the LoRA bank holds, for each
    part p and adapter slot s, `rank` columns of A and rows of B at `(p * slots + s) * rank`.
    B is block-diagonal over parts, so one matmul pair serves the whole fused output."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    parts: list[int]
    lora_a: torch.Tensor | None = None
    lora_b: torch.Tensor | None = None

    def __call__(self, x: torch.Tensor, masks: dict[int, torch.Tensor] | None) -> torch.Tensor:
        y = F.linear(x, self.weight, self.bias)
        if self.lora_a is not None and masks is not None:
            y = y + ((x @ self.lora_a) * masks[len(self.parts)]) @ self.lora_b
        return y


@dataclass
class Layer:
    """One decoder layer. `ln1`/`ln2` are the norms before attention and before the MLP; Gemma adds
    `post_attn`/`post_ff` on their outputs. `rope` names the layer's RoPE table and `window` its
    sliding window (None: global attention)."""

    ln1: torch.Tensor
    ln2: torch.Tensor
    qkv: Proj
    o: Proj
    gate_up: Proj
    down: Proj
    q_norm: torch.Tensor | None
    k_norm: torch.Tensor | None
    post_attn: torch.Tensor | None
    post_ff: torch.Tensor | None
    rope: str
    window: int | None


def _fuse(modules: list[torch.nn.Linear]) -> Proj:
    """Concatenates the weights of `modules` and points each module at a view of the result."""
    weight = torch.cat([m.weight.data for m in modules], dim=0)
    biases = [m.bias for m in modules]
    bias = torch.cat([b.data for b in biases], dim=0) if biases[0] is not None else None
    start = 0
    for m in modules:
        size = m.weight.shape[0]
        m.weight = torch.nn.Parameter(weight[start : start + size], requires_grad=False)
        if bias is not None:
            m.bias = torch.nn.Parameter(bias[start : start + size], requires_grad=False)
        start += size
    return Proj(weight, bias, [m.weight.shape[0] for m in modules])


def _layer(layer, kind: str, window: int | None, norm_weight: Callable, per_kind_rope: bool) -> Layer:
    at, mlp = layer.self_attn, layer.mlp
    fused = hasattr(at, "qkv_proj")  # Phi-3
    sandwich = hasattr(layer, "pre_feedforward_layernorm")  # Gemma
    norm = lambda m: norm_weight(m.weight) if m is not None else None  # noqa: E731
    return Layer(
        ln1=norm(layer.input_layernorm),
        ln2=norm(layer.pre_feedforward_layernorm if sandwich else layer.post_attention_layernorm),
        qkv=_fuse([at.qkv_proj] if fused else [at.q_proj, at.k_proj, at.v_proj]),
        o=_fuse([at.o_proj]),
        gate_up=_fuse([mlp.gate_up_proj] if fused else [mlp.gate_proj, mlp.up_proj]),
        down=_fuse([mlp.down_proj]),
        q_norm=norm(getattr(at, "q_norm", None)),
        k_norm=norm(getattr(at, "k_norm", None)),
        post_attn=norm(layer.post_attention_layernorm) if sandwich else None,
        post_ff=norm(layer.post_feedforward_layernorm) if sandwich else None,
        rope=kind if per_kind_rope else "default",
        window=window,
    )


def _rope_parameters(cfg) -> tuple[dict, bool]:
    """The config's RoPE parameter sets, and whether they are one per layer type (Gemma 3's local
    and global layers) rather than one for all layers."""
    params = getattr(cfg, "rope_parameters", None) or {}
    nested = {k: v for k, v in params.items() if isinstance(v, dict)}
    return (nested, True) if nested else ({"default": params}, False)


def layer_windows(cfg) -> list[tuple[str, int | None]]:
    """(layer type, sliding window) of each layer, as transformers decides them: by `layer_types`
    where the config has them (Gemma, Qwen2/3), else the config's `sliding_window` on every layer
    (Mistral, Phi-3)."""
    window = getattr(cfg, "sliding_window", None)
    types = getattr(cfg, "layer_types", None)
    if types is None:
        kind = "full_attention" if window is None else "sliding_attention"
        return [(kind, window)] * cfg.num_hidden_layers
    return [(t, window if t == "sliding_attention" else None) for t in types]


def _activation(cfg) -> str:
    """The MLP's gate activation: Gemma names it `hidden_activation`, the others `hidden_act`."""
    return getattr(cfg, "hidden_activation", None) or getattr(cfg, "hidden_act", "silu")


def fast_path_refusal(cfg) -> str | None:
    """Why the fast decoder cannot serve a model of config `cfg` exactly, or None when it can."""
    if cfg.model_type not in SUPPORTED_MODEL_TYPES:
        return f"model type {cfg.model_type!r} has no fast path (it has: {', '.join(SUPPORTED_MODEL_TYPES)})"
    act = _activation(cfg)
    if act not in ACTIVATIONS:
        return f"activation {act!r} has no fast path (it has: {', '.join(ACTIVATIONS)})"
    for params in _rope_parameters(cfg)[0].values():
        if params.get("rope_type") in LENGTH_DEPENDENT_ROPE:
            return f"RoPE type {params['rope_type']!r} depends on the sequence length, which one static table cannot follow"
    if getattr(cfg, "use_bidirectional_attention", False):
        return "bidirectional attention has no fast path"
    return None


def _buckets(limit: int, start: int) -> list[int]:
    out, b = [], start
    while b < limit:
        out.append(b)
        b *= 2
    return out + [limit]


def pick_bucket(buckets: list[int], need: int) -> int:
    return next(b for b in buckets if b >= need)


class SlotState:
    """The per-slot decode state the scheduler (generation.Generator) drives, and the sampling and
    stepping on top of `_decode`: shared by the fast `Decoder` and `generic.GenericDecoder`.

    State buffers (all `[slots]`): `tok` (next input token), `pos` (its position), `seed`, `temp`,
    `top_p`, `lora` (adapter slot, -1 = base). The scheduler writes them between steps; `step`
    advances every row in `[0, b)` by one token."""

    use_graphs = False
    # sampling.sample, or (Decoder on CUDA) its torch.compile'd version
    _sample = staticmethod(sample)

    def _init_slots(self, num_slots: int, max_len: int, lookahead: int, vocab: int, device, logprobs_mode: str) -> None:
        if logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"logprobs mode {logprobs_mode!r} is not one of {', '.join(LOGPROBS_MODES)}")
        self.device, self.vocab = device, vocab
        self.num_slots, self.max_len, self.lookahead = num_slots, max_len, lookahead
        # rows run past their end until the next host check; the last position is never part of a
        # sequence: idle rows (free slots) decode there, so they never overwrite a row's cached prefix
        self.cache_len = max_len + max(lookahead, 1)
        self.idle_pos = self.cache_len - 1
        kw = dict(device=device)
        self.tok = torch.zeros(num_slots, dtype=torch.long, **kw)
        self.pos = torch.full((num_slots,), self.idle_pos, dtype=torch.long, **kw)
        self.seed = torch.zeros(num_slots, dtype=torch.long, **kw)
        self.temp = torch.zeros(num_slots, dtype=torch.float32, **kw)
        self.top_p = torch.ones(num_slots, dtype=torch.float32, **kw)
        self.lora = torch.full((num_slots,), -1, dtype=torch.long, **kw)
        # xgrammar's packed allow-list per slot (guided.py), read by steps of guided batches only
        self.bitmask = torch.full((num_slots, (vocab + 31) // 32), -1, dtype=torch.int32, **kw)
        self.processed_logprobs = logprobs_mode == "processed_logprobs"
        self.rows = torch.arange(num_slots, **kw)
        self.positions = torch.arange(self.cache_len, **kw)
        self.batch_buckets = _buckets(num_slots, 1)
        self.len_buckets = _buckets(self.cache_len, 128)
        self.captured, self.capture_s = 0, 0.0  # CUDA graphs captured, and the time it took

    def _decode(self, b: int, L: int) -> torch.Tensor:
        """float32 logits `[b, vocab]` of the next token of rows [0, b), attending to positions [0, L)."""
        raise NotImplementedError

    def sample(self, logits: torch.Tensor, rows: torch.Tensor | slice, use_top_p: bool, guided: bool):
        """Draws the next token of `rows` from their logits with each slot's settings (and, when
        `guided`, its grammar bitmask). Returns sampling.sample's (tok, logprob, lse, inv_t)."""
        return self._sample(
            logits,
            self.temp[rows],
            self.top_p[rows],
            self.seed[rows],
            self.pos[rows],
            use_top_p,
            self.processed_logprobs,
            self.bitmask[rows] if guided else None,
        )

    def _step(self, b: int, L: int, use_top_p: bool, guided: bool):
        logits = self._decode(b, L)
        tok, logprob, lse, inv_t = self.sample(logits, slice(0, b), use_top_p, guided)
        self.tok[:b].copy_(tok)
        self.pos[:b].copy_((self.pos[:b] + 1).clamp_(max=self.idle_pos))
        return tok, logprob, logits, lse, inv_t

    def step(self, b: int, L: int, use_top_p: bool, guided: bool = False):
        """Advances rows [0, b) by one sampled token. Returns (tokens [b], their logprobs [b], float32
        logits [b, vocab], logsumexp [b], inverse temperature [b]: a token's logprob is
        `logits * inv_t - lse`); the tensors are only valid until the next call."""
        return self._step(b, L, use_top_p, guided)


class Decoder(SlotState):
    """Owns the weights' fast view, the KV cache, the LoRA banks and the per-slot decode state."""

    def __init__(
        self,
        model,
        *,
        num_slots: int,
        max_len: int,
        enable_lora: bool = False,
        max_loras: int = 1,
        max_lora_rank: int = 16,
        use_graphs: bool | None = None,
        compile: bool | None = None,
        lookahead: int = 8,
        logprobs_mode: str = "raw_logprobs",
    ):
        cfg = model.config
        refusal = fast_path_refusal(cfg)
        if refusal is not None:
            raise ValueError(f"{refusal}; serve this model on the generic path (generic.GenericDecoder)")
        model.eval().requires_grad_(False)
        self.model = model
        inner = model.model
        self._init_slots(
            num_slots,
            max_len,
            lookahead,
            model.lm_head.weight.shape[0],
            inner.embed_tokens.weight.device,
            logprobs_mode,
        )
        self.dtype = inner.embed_tokens.weight.dtype
        cuda = self.device.type == "cuda"
        self.use_graphs = cuda if use_graphs is None else use_graphs
        do_compile = cuda if compile is None else compile
        self.n_heads = cfg.num_attention_heads
        self.n_kv = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps = cfg.rms_norm_eps
        gemma = cfg.model_type in GEMMA_TYPES
        self.scale = (cfg.query_pre_attn_scalar if gemma else self.head_dim) ** -0.5
        self.softcap = getattr(cfg, "attn_logit_softcapping", None)
        self.final_softcap = getattr(cfg, "final_logit_softcapping", None)
        self.gelu = ACTIVATIONS[_activation(cfg)]

        self.embed = inner.embed_tokens.weight
        # Gemma scales embeddings by sqrt(hidden), rounded to the model's dtype as its module does
        scale = getattr(inner.embed_tokens, "embed_scale", None)
        self.embed_scale = scale.to(self.dtype) if scale is not None else None
        # Gemma's RMSNorm multiplies by 1 + weight in float32 (rms_norm keys its order on the dtype)
        norm_weight = (lambda w: 1 + w.float()) if gemma else (lambda w: w)
        self.norm = norm_weight(inner.norm.weight)
        # The output head runs in float32, as the trainer's does (trainer.trained_logprobs), so the
        # sampler's logprobs and the trainer's agree to float32 rounding of the same bf16 hidden
        # states, and the first update's importance ratio is 1 (issue 15). A product of two bf16
        # (or fp16) numbers is exact in float32, so on CUDA the model's own 16-bit head with float32
        # accumulation and output (`logits`) is that arithmetic up to the order of the sums, on
        # tensor cores and reading half the bytes (at batch 64, a float32 matmul over Qwen2.5's 152k
        # vocabulary is 17 GFLOP for CUDA cores: ~0.3 ms a step at an H100's 67 TFLOPS). Elsewhere
        # (CPU, float32 models): one float32 copy.
        half = cuda and self.dtype in (torch.bfloat16, torch.float16)
        self.lm_head = model.lm_head.weight if half else model.lm_head.weight.float()
        rope_sets, per_kind_rope = _rope_parameters(cfg)
        # a window at least as long as the cache masks nothing (Mistral's 4096 under a 4k context): such
        # layers stay global, which keeps SDPA's causal kernels for the prefill
        self.layers: list[Layer] = [
            _layer(
                layer,
                kind,
                window if window is not None and window < self.cache_len else None,
                norm_weight,
                per_kind_rope,
            )
            for layer, (kind, window) in zip(inner.layers, layer_windows(cfg))
        ]
        self.windows = sorted({L.window for L in self.layers}, key=lambda w: w or 0)
        fused = hasattr(inner.layers[0].self_attn, "qkv_proj")
        self.lora_targets = FUSED_LORA_TARGETS if fused else LORA_TARGETS

        # RoPE tables for every position, from the model's own rotary module (covers rope scaling),
        # one per layer type when the config has one RoPE parameter set per type (Gemma 3)
        positions = self.positions[None]
        dummy = torch.zeros(1, device=self.device, dtype=self.dtype)
        self.rope: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        for kind in rope_sets:
            cos, sin = inner.rotary_emb(dummy, positions, kind) if per_kind_rope else inner.rotary_emb(dummy, positions)
            self.rope[kind] = (cos[0].contiguous(), sin[0].contiguous())

        shape = (num_slots, self.n_kv, self.cache_len, self.head_dim)
        self.k_cache = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in self.layers]
        self.v_cache = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in self.layers]

        self.lora_slots = max_loras + 1 if enable_lora else 0  # one spare: replace while in use
        self.lora_rank = max_lora_rank
        if enable_lora:
            self._make_lora_banks()

        self.graphs: dict[tuple, tuple] = {}
        # extend steps (`_extend`): token, position, slot and LoRA slot of each row, staged in one copy
        self.extend_buckets = _buckets(EXTEND_TOKENS, 32)
        self.ext = torch.zeros(4, EXTEND_TOKENS, dtype=torch.long, device=self.device)
        # "triton" (split_kv.py: split-KV kernels that also write the new k/v into the cache; the
        # default on CUDA with Triton installed, for models without soft-capped scores), "sdpa"
        # (cuDNN/flash fused kernel) or "math" (two matmuls). Set it before the first step:
        # captured graphs keep the choice.
        triton = cuda and importlib.util.find_spec("triton") is not None
        self.decode_attention = "triton" if triton and self.softcap is None else "sdpa"
        self.pool = torch.cuda.graph_pool_handle() if self.use_graphs else None
        if do_compile:
            opts = dict(dynamic=True, fullgraph=True)
            self._rms = torch.compile(rms_norm, **opts)
            self._add_rms = torch.compile(add_rms_norm, **opts)
            self._qkv_rope = torch.compile(qkv_rope, **opts)
            self._act_mul = torch.compile(act_mul, **opts)
            # eagerly the sampler is ~50 kernels a step (a dozen integer ops for the uniform alone,
            # several passes over the vocabulary at batch 64); compiled, far fewer
            self._sample = torch.compile(sample, **opts)
        else:
            self._rms, self._add_rms, self._qkv_rope, self._act_mul = rms_norm, add_rms_norm, qkv_rope, act_mul
        if triton:  # a vocabulary-wide pass that fills the GPU at any batch size (fused_sampling.py)
            from train_agent.engine.kernels.fused_sampling import with_chunked_sampling

            self._sample = with_chunked_sampling(self._sample)
        # one kernel for q and k's RoPE where no q/k norms and no partial rotary need the compiled one
        self._fused_rope = None
        full_rotary = all(cos.shape[-1] == self.head_dim for cos, _ in self.rope.values())
        power_of_two = self.head_dim & (self.head_dim - 1) == 0
        if triton and full_rotary and power_of_two and all(L.q_norm is None for L in self.layers):
            from train_agent.engine.kernels.fused_rope import fused_qkv_rope

            self._fused_rope = fused_qkv_rope

    # ---- LoRA banks ---------------------------------------------------------------------------

    def _make_lora_banks(self) -> None:
        s, r = self.lora_slots, self.lora_rank
        for layer in self.layers:
            for proj in (layer.qkv, layer.o, layer.gate_up, layer.down):
                cols = len(proj.parts) * s * r
                proj.lora_a = torch.zeros(proj.weight.shape[1], cols, device=self.device, dtype=self.dtype)
                proj.lora_b = torch.zeros(cols, proj.weight.shape[0], device=self.device, dtype=self.dtype)
        # column -> adapter slot, per number of fused parts
        self.col_slot = {p: (torch.arange(p * s * r, device=self.device) // r) % s for p in (1, 2, 3)}

    def lora_masks(self, idx: torch.Tensor) -> dict[int, torch.Tensor] | None:
        if not self.lora_slots:
            return None
        return {p: (cs[None, :] == idx[:, None]).to(self.dtype) for p, cs in self.col_slot.items()}

    def read_adapter(self, path: str) -> tuple[dict, float]:
        """Reads and checks a PEFT adapter directory (off the scheduler thread); returns the
        arguments of `install_adapter` after the slot."""
        weights, scale, _ = read_peft_adapter(path, self.lora_rank, self.lora_targets)
        for layer, _ in weights:
            if layer >= len(self.layers):
                raise ValueError(f"adapter {path} has layer {layer}; the model has {len(self.layers)}")
        return weights, scale

    def install_adapter(
        self, slot: int, weights: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]], scale: float
    ) -> None:
        """Writes an adapter into bank `slot` in place. `weights[(layer, peft_module)] = (A [r, in],
        B [out, r])`. The caller makes sure no running row uses `slot` meanwhile."""
        s, R = self.lora_slots, self.lora_rank
        for layer in self.layers:  # clear the slot first: modules the adapter skips stay zero
            for proj in (layer.qkv, layer.o, layer.gate_up, layer.down):
                for p in range(len(proj.parts)):
                    c = (p * s + slot) * R
                    proj.lora_a[:, c : c + R] = 0
                    proj.lora_b[c : c + R, :] = 0
        for (li, name), (a, b) in weights.items():
            fused, part = self.lora_targets[name]
            proj: Proj = getattr(self.layers[li], fused)
            r = a.shape[0]
            c = (part * s + slot) * R
            off = sum(proj.parts[:part])
            proj.lora_a[:, c : c + r] = a.t().to(proj.lora_a)
            proj.lora_b[c : c + r, off : off + proj.parts[part]] = (b.t() * scale).to(proj.lora_b)

    # ---- forward ------------------------------------------------------------------------------

    def _forward(
        self,
        tokens: torch.Tensor,
        pos: torch.Tensor,
        lora_idx: torch.Tensor | None,
        attend: Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    ):
        """Runs all layers on a flat batch of tokens `[n]` at positions `pos`; `attend(layer, q, k, v)`
        stores k/v in the cache and returns the attention output `[n, heads*head_dim]`. Returns the
        final hidden states `[n, d]`."""
        masks = self.lora_masks(lora_idx) if lora_idx is not None else None
        # the fused kernel reads the tables by position itself
        rope = self.rope if self._fused_rope else {kind: (cos[pos], sin[pos]) for kind, (cos, sin) in self.rope.items()}
        x = F.embedding(tokens, self.embed)
        if self.embed_scale is not None:
            x = x * self.embed_scale
        residual = None
        for i, L in enumerate(self.layers):
            if residual is None:
                residual, h = x, self._rms(x, L.ln1, self.eps)
            else:
                h, residual = self._add_rms(x, residual, L.ln1, self.eps)
            cos, sin = rope[L.rope]
            if self._fused_rope:
                q, k, v = self._fused_rope(L.qkv(h, masks), cos, sin, pos, self.n_heads, self.n_kv, self.head_dim)
            else:
                q, k, v = self._qkv_rope(
                    L.qkv(h, masks), cos, sin, self.n_heads, self.n_kv, self.head_dim, L.q_norm, L.k_norm, self.eps
                )
            x = L.o(attend(i, q, k, v), masks)
            if L.post_attn is not None:
                x = self._rms(x, L.post_attn, self.eps)
            h, residual = self._add_rms(x, residual, L.ln2, self.eps)
            x = L.down(self._act_mul(L.gate_up(h, masks), self.gelu), masks)
            if L.post_ff is not None:
                x = self._rms(x, L.post_ff, self.eps)
        h, _ = self._add_rms(x, residual, self.norm, self.eps)
        return h

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """float32 logits of final hidden states (kept in the model's dtype, as the trainer's are),
        soft-capped where the model caps them (Gemma 2)."""
        if self.lm_head.dtype == torch.float32:
            logits = F.linear(h.float(), self.lm_head)
        else:
            logits = torch.mm(h, self.lm_head.t(), out_dtype=torch.float32)
        if self.final_softcap is not None:
            logits = torch.tanh(logits / self.final_softcap) * self.final_softcap
        return logits

    def _masks(self, q_pos: torch.Tensor, span: int, causal_ok: bool = False) -> dict[int | None, torch.Tensor | None]:
        """Additive attention masks `[B, 1, T, span]` of queries at positions `q_pos` `[B, T]` over
        cache positions [0, span), one per sliding window the layers use (None: global). With
        `causal_ok` (queries and keys are the same positions 0..T-1) the global one is None, which
        lets SDPA take its causal kernels, unless scores are soft-capped (no fused kernel)."""
        keys = self.positions[:span]
        out = {}
        for w in self.windows:
            if w is None and causal_ok and self.softcap is None:
                out[w] = None
                continue
            allowed = keys <= q_pos[..., None]
            if w is not None:
                allowed &= keys > q_pos[..., None] - w
            mask = torch.zeros(allowed.shape, device=self.device, dtype=self.dtype)
            out[w] = mask.masked_fill_(~allowed, float("-inf"))[:, None]
        return out

    def prefill(
        self, prompts: list[list[int]], slots: list[int], lora: list[int], cached: list[int] | None = None
    ) -> torch.Tensor:
        """Runs whole prompts (right-padded into one batch), fills their slots' KV cache and returns
        the logits of each prompt's last token `[len(prompts), vocab]` (float32). With `cached`, the
        first `cached[i]` tokens of prompt i already have their KV in its slot's row (prefix caching,
        prefix_cache.py): only the rest is computed, attending to those rows."""
        B = len(prompts)
        cached = cached or [0] * B
        suffixes = [p[c:] for p, c in zip(prompts, cached)]
        if self.decode_attention == "triton" and sum(map(len, suffixes)) <= EXTEND_TOKENS:
            return self._extend(suffixes, cached, slots, lora)
        T = max(len(p) for p in suffixes)
        ids = torch.zeros(B, T, dtype=torch.long)
        for i, p in enumerate(suffixes):
            ids[i, : len(p)] = torch.tensor(p)
        ids = ids.to(self.device).flatten()
        lens = torch.tensor([len(p) for p in suffixes], device=self.device)
        rows = torch.tensor(slots, device=self.device)
        lora_idx = None
        if self.lora_slots:
            lora_idx = torch.tensor(lora, device=self.device).repeat_interleave(T)
        H, K, D = self.n_heads, self.n_kv, self.head_dim

        if not any(cached):
            pos = self.positions[:T].repeat(B)
            masks = self._masks(self.positions[:T][None], T, causal_ok=True)

            def attend(i, q, k, v):
                k = k.view(B, T, K, D).transpose(1, 2)
                v = v.view(B, T, K, D).transpose(1, 2)
                self.k_cache[i][rows, :, :T] = k
                self.v_cache[i][rows, :, :T] = v
                q = q.view(B, T, H, D).transpose(1, 2)
                o = attention(q, k, v, masks[self.layers[i].window], self.scale, self.softcap, False)
                return o.transpose(1, 2).reshape(B * T, H * D)
        else:
            # row i's tokens sit at positions cached[i]...; pads past the cache go to the idle position
            pos2 = (torch.tensor(cached, device=self.device)[:, None] + self.positions[:T]).clamp_(max=self.idle_pos)
            pos = pos2.flatten()
            span = max(c + len(p) for c, p in zip(cached, suffixes))
            masks = self._masks(pos2, span)
            slot_rows = rows[:, None]

            def attend(i, q, k, v):
                self.k_cache[i][slot_rows, :, pos2] = k.view(B, T, K, D)
                self.v_cache[i][slot_rows, :, pos2] = v.view(B, T, K, D)
                keys, values = self.k_cache[i][rows, :, :span], self.v_cache[i][rows, :, :span]
                q = q.view(B, T, H, D).transpose(1, 2)
                o = attention(q, keys, values, masks[self.layers[i].window], self.scale, self.softcap, False)
                return o.transpose(1, 2).reshape(B * T, H * D)

        h = self._forward(ids, pos, lora_idx, attend)
        last = h.view(B, T, -1)[torch.arange(B, device=self.device), lens - 1]
        return self.logits(last)

    def _extend(self, suffixes: list[list[int]], cached: list[int], slots: list[int], lora: list[int]) -> torch.Tensor:
        """`prefill` of short suffixes as one step of one row per token (split_kv.py's kernels read
        each row's slot up to the row's position), replayed from a CUDA graph per (tokens, context)
        bucket. An eager prefill is hundreds of small kernels launched from Python: tens of ms of
        host time whatever its size, where the suffixes the prefix cache leaves are tens of tokens."""
        lens = [len(p) for p in suffixes]
        lens_t = torch.tensor(lens)
        N = sum(lens)
        n = pick_bucket(self.extend_buckets, N)
        L = pick_bucket(self.len_buckets, max(c + t for c, t in zip(cached, lens)))
        # pads sit at position -1: they attend to nothing, and their k/v land on the idle position
        host = torch.tensor([[0], [-1], [0], [-1]]).repeat(1, n)
        host[0, :N] = torch.tensor([t for p in suffixes for t in p])
        host[1, :N] = torch.cat([torch.arange(c, c + t) for c, t in zip(cached, lens)])
        host[2, :N] = torch.tensor(slots).repeat_interleave(lens_t)
        host[3, :N] = torch.tensor(lora).repeat_interleave(lens_t)
        self.ext[:, :n].copy_(host)
        if self.use_graphs:
            key = ("extend", n, L)
            if key not in self.graphs:
                self.graphs[key] = self._capture(lambda: self._extend_forward(n, L))
            graph, h = self.graphs[key]
            graph.replay()
        else:
            h = self._extend_forward(n, L)
        last = lens_t.cumsum(0).sub_(1).to(self.device)
        return self.logits(h[last])

    def _extend_forward(self, n: int, L: int) -> torch.Tensor:
        from train_agent.engine.kernels.split_kv import split_kv_attention

        tok, pos, slot, lora = self.ext[:, :n]

        def attend(i, q, k, v):
            # the step's k/v first: a row reads the rows of its slot before it
            self.k_cache[i][slot, :, pos] = k
            self.v_cache[i][slot, :, pos] = v
            o = split_kv_attention(
                q,
                k,
                v,
                self.k_cache[i],
                self.v_cache[i],
                pos,
                L,
                self.layers[i].window,
                self.scale,
                slot,
                write=False,
                max_splits=EXTEND_SPLITS,
            )
            return o.view(n, -1)

        return self._forward(tok, pos, lora if self.lora_slots else None, attend)

    def copy_slot(self, src: int, dsts: list[int], length: int) -> None:
        """Prefix sharing: the n samples of a prompt reuse one prefill's KV cache, and a prompt whose
        prefix another row holds copies it (prefix_cache.py)."""
        idx = torch.tensor(dsts, device=self.device)
        for cache in (*self.k_cache, *self.v_cache):
            cache[idx, :, :length] = cache[src, :, :length]

    def _decode(self, b: int, L: int) -> torch.Tensor:
        pos, rows = self.pos[:b], self.rows[:b]
        H, K, D = self.n_heads, self.n_kv, self.head_dim
        if self.decode_attention == "triton":
            if self.softcap is not None:
                raise ValueError("decode_attention 'triton' has no soft-capped scores; use 'sdpa'")
            from train_agent.engine.kernels.split_kv import split_kv_attention

            def attend(i, q, k, v):
                o = split_kv_attention(
                    q, k, v, self.k_cache[i], self.v_cache[i], pos, L, self.layers[i].window, self.scale, rows
                )
                return o.view(b, H * D)
        else:
            # additive masks, built once per step rather than in every layer
            masks = self._masks(pos[:, None], L)
            math = self.decode_attention == "math"  # two small matmuls beat a fused kernel at q_len 1

            def attend(i, q, k, v):
                self.k_cache[i][rows, :, pos] = k
                self.v_cache[i][rows, :, pos] = v
                q = q.view(b, K, H // K, D)  # grouped heads as the "query length": no repeat of k/v
                keys, values = self.k_cache[i][:b, :, :L], self.v_cache[i][:b, :, :L]
                o = attention(q, keys, values, masks[self.layers[i].window], self.scale, self.softcap, math)
                return o.reshape(b, H * D)

        lora_idx = self.lora[:b] if self.lora_slots else None
        h = self._forward(self.tok[:b], pos, lora_idx, attend)
        return self.logits(h)

    def step(self, b: int, L: int, use_top_p: bool, guided: bool = False):
        """As SlotState.step; on CUDA each (b, L, use_top_p, guided) is captured once as a CUDA graph
        and replayed."""
        if not self.use_graphs:
            return self._step(b, L, use_top_p, guided)
        key = (b, L, use_top_p, guided)
        if key not in self.graphs:
            state = [t.clone() for t in (self.tok, self.pos)]

            def reset():  # the warm-up steps advanced the rows
                self.tok.copy_(state[0])
                self.pos.copy_(state[1])

            self.graphs[key] = self._capture(lambda: self._step(*key), reset)
        graph, out = self.graphs[key]
        graph.replay()
        return out

    def _capture(self, run: Callable[[], object], reset: Callable[[], None] = lambda: None):
        """(graph, outputs) of `run` captured after two warm-up runs, each followed by `reset`."""
        t0 = time.perf_counter()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm up (compiles kernels, sets up cuBLAS workspaces)
            for _ in range(2):
                run()
                reset()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            out = run()
        torch.cuda.synchronize()
        self.captured += 1
        self.capture_s += time.perf_counter() - t0
        return graph, out


def kv_bytes_per_token(config, dtype: torch.dtype) -> int:
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    itemsize = torch.empty((), dtype=dtype).element_size()
    return config.num_hidden_layers * 2 * config.num_key_value_heads * head_dim * itemsize


_KEY = re.compile(r"layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")


def read_lora_config(path: str, max_rank: int) -> tuple[dict, float]:
    """A PEFT LoRA directory's adapter_config.json and its scale (alpha/r, or alpha/sqrt(r) with
    rsLoRA). Raises ValueError for what the engine cannot serve."""
    import json
    import os

    cfg_path = os.path.join(path, "adapter_config.json")
    if not os.path.exists(cfg_path):
        raise FileNotFoundError(f"{path} is not a PEFT adapter directory (no adapter_config.json)")
    with open(cfg_path) as f:
        cfg = json.load(f)
    if cfg.get("peft_type", "LORA") != "LORA":
        raise ValueError(f"adapter {path} is {cfg.get('peft_type')}, only LORA is supported")
    if cfg.get("use_dora"):
        raise ValueError(f"adapter {path} uses DoRA, which the engine does not support")
    r = int(cfg["r"])
    if r > max_rank:
        raise ValueError(f"adapter {path} has rank {r}, above --max-lora-rank {max_rank}")
    alpha = float(cfg.get("lora_alpha", r))
    return cfg, alpha / (r**0.5) if cfg.get("use_rslora") else alpha / r


def read_peft_adapter(path: str, max_rank: int, targets: dict = LORA_TARGETS) -> tuple[dict, float, dict]:
    """Reads a PEFT LoRA directory into `{(layer, module): (A, B)}`, its scale and its config.
    `targets` are the module names the model's banks hold (LORA_TARGETS, or FUSED_LORA_TARGETS for
    Phi-3). Raises ValueError for what the banks cannot hold."""
    import os

    from safetensors.torch import load_file

    cfg, scale = read_lora_config(path, max_rank)
    file = os.path.join(path, "adapter_model.safetensors")
    if os.path.exists(file):
        tensors = load_file(file)
    else:
        tensors = torch.load(os.path.join(path, "adapter_model.bin"), map_location="cpu", weights_only=True)
    pairs: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    for name, t in tensors.items():
        m = _KEY.search(name)
        if not m or m.group(2) not in targets:
            raise ValueError(
                f"adapter {path}: unsupported tensor {name} (this model takes LoRA on {', '.join(targets)})"
            )
        pairs.setdefault((int(m.group(1)), m.group(2)), {})[m.group(3)] = t
    weights = {k: (v["A"], v["B"]) for k, v in pairs.items() if "A" in v and "B" in v}
    return weights, scale, cfg
