"""A serving forward pass for Llama-family decoders (Llama, Mistral, Qwen2, Qwen3) and their close
relatives (Gemma 2, Gemma 3 text, Phi-3/Phi-4), written over the Hugging Face module's own weights.
Other causal LMs are served by `generic.GenericDecoder` through transformers' own forward.

The relatives differ from Llama only in parameters of the same layer: each model type is one row of
architectures.ARCHITECTURES (what it changes: layers.read_layer and this class read the row), and the
values come from the config:
- Gemma: embeddings scaled by sqrt(hidden), RMSNorm weights `1 + w` applied in float32 before the
  cast back, a second norm after attention and after the MLP ("sandwich" norms), GELU (tanh) gates,
  queries scaled by `query_pre_attn_scalar`, tanh soft-capping of attention scores and of the final
  logits (Gemma 2), q/k norms and a separate RoPE table for local layers (Gemma 3);
- Phi-3: q/k/v and gate/up already fused in the checkpoint, RoPE on part of each head
  (`partial_rotary_factor`);
- sliding-window layers (Gemma's local layers, Mistral, Phi-3, Qwen2 with `use_sliding_window`):
  the static cache keeps every position, so a window is only a mask over it, exact at any length.

Why not `model.generate`: every decode step there is hundreds of small kernel launches driven from
Python (benches/RESULTS.md, "Engine decode throughput"). Here the decode step works on fixed buffers
only, so on CUDA it is captured once per (batch bucket, context bucket) as a CUDA graph and
replayed with a single launch:

- a static KV cache, one row ("slot") per running sequence: `k_cache[layer][slot, kv_head, pos, :]`;
- q/k/v and gate/up projections fused into one matmul each (the HF modules keep views of the fused
  weights, so the model object still works for reference forwards);
- LoRA as fixed-size banks (`A: [in, parts*slots*rank]`, `B: [parts*slots*rank, out]`) and a
  per-row adapter index, so rows of different adapters share one step and loading an adapter is an
  in-place copy that keeps the captured graphs valid (a punica-style batched LoRA in two matmuls;
  adapters.py);
- small elementwise pieces (ops.py: RMSNorm, RoPE, SiLU*up) compiled by torch.compile into one
  kernel each; RoPE of q and k in one Triton kernel where no q/k norms or partial rotary dims need
  that one (kernels/fused_rope.py);
- the sampler in two Triton kernels over vocabulary chunks (kernels/fused_sampling.py; steps with
  top-p keep the compiled torch sampler);
- decode attention in Triton (kernels/split_kv.py): a split-KV kernel that reads each row's own keys only
  and writes the new k/v into the cache itself (SDPA, for q_len 1, cost ~18 µs a layer);
- short prefills (the suffixes prefix caching leaves) as extend steps: one such kernel row per
  token, captured per (tokens bucket, context bucket) like the decode step (`_extend`; the capture
  is graphs.py's).

On CPU the same code runs eagerly (no graphs, no compile); it matches the HF forward to fp32
rounding, which the tests check.
"""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Callable

import torch
import torch.nn.functional as F

from train_agent.engine.adapters import LoraBanks
from train_agent.engine.architectures import (
    ACTIVATIONS,
    ARCHITECTURES,
    activation,
    fast_path_refusal,
    layer_windows,
    rope_parameters,
    softcaps,
)
from train_agent.engine.graphs import GraphCapture
from train_agent.engine.layers import Layer, norm_weight, read_layer
from train_agent.engine.ops import act_mul, add_rms_norm, attention, qkv_rope, rms_norm
from train_agent.engine.sampling import sample
from train_agent.engine.slots import SlotState, buckets, pick_bucket

# A prefill of at most this many tokens (all prompts' uncached suffixes together) runs as an extend
# step (Decoder._extend): the later turns of a multi-turn rollout under prefix caching, whose
# suffixes are a tool result and a few template tokens. Its attention reads each row's prefix once
# per row, so longer prefills (first turns, no cache) stay on the batched SDPA path.
EXTEND_TOKENS = 1024
# the extend step's key splits: its rows already fill the GPU, and fewer splits keep the partial
# sums of a 1024-row step small (1024 x heads x splits x head dim floats)
EXTEND_SPLITS = 8


class Decoder(GraphCapture, LoraBanks, SlotState):
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
        arch = self.arch = ARCHITECTURES[cfg.model_type]
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
        self._init_graphs(cuda if use_graphs is None else use_graphs)
        self.n_heads = cfg.num_attention_heads
        self.n_kv = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps = cfg.rms_norm_eps
        self.scale = (getattr(cfg, arch.query_scale_key) if arch.query_scale_key else self.head_dim) ** -0.5
        self.softcap, self.final_softcap = softcaps(cfg, arch)
        self.gelu = ACTIVATIONS[activation(cfg, arch)]
        self._read_weights(model, cuda)
        self._rope_tables(inner, rope_parameters(cfg, arch))

        shape = (num_slots, self.n_kv, self.cache_len, self.head_dim)
        self.k_cache = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in self.layers]
        self.v_cache = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in self.layers]

        self.lora_slots = max_loras + 1 if enable_lora else 0  # one spare: replace while in use
        self.lora_rank = max_lora_rank
        self.lora_targets = arch.lora_targets
        if enable_lora:
            self._make_lora_banks()

        # extend steps (`_extend`): token, position, slot and LoRA slot of each row, staged in one copy
        self.extend_buckets = buckets(EXTEND_TOKENS, 32)
        self.ext = torch.zeros(4, EXTEND_TOKENS, dtype=torch.long, device=self.device)
        self._pick_kernels(cuda, cuda if compile is None else compile)

    def _read_weights(self, model, cuda: bool) -> None:
        """The embeddings, the layers (their fused projections), the final norm and the output head."""
        inner, arch = model.model, self.arch
        self.embed = inner.embed_tokens.weight
        # Gemma scales embeddings by sqrt(hidden), rounded to the model's dtype as its module does
        self.embed_scale = inner.embed_tokens.embed_scale.to(self.dtype) if arch.scaled_embeddings else None
        self.norm = norm_weight(inner.norm.weight, arch)
        # The output head runs in float32, as the trainer's does (trainer.model.trained_logprobs), so
        # the sampler's logprobs and the trainer's agree to float32 rounding of the same bf16 hidden
        # states, and the first update's importance ratio is 1 (issue 15). A product of two bf16
        # (or fp16) numbers is exact in float32, so on CUDA the model's own 16-bit head with float32
        # accumulation and output (`logits`) is that arithmetic up to the order of the sums, on
        # tensor cores and reading half the bytes, where a float32 matmul over a 152k vocabulary
        # would run on the CUDA cores every step. Elsewhere (CPU, float32 models): one float32 copy.
        half = cuda and self.dtype in (torch.bfloat16, torch.float16)
        self.lm_head = model.lm_head.weight if half else model.lm_head.weight.float()
        # a window at least as long as the cache masks nothing (Mistral's 4096 under a 4k context): such
        # layers stay global, which keeps SDPA's causal kernels for the prefill
        self.layers: list[Layer] = [
            read_layer(layer, arch, kind, window if window is not None and window < self.cache_len else None)
            for layer, (kind, window) in zip(inner.layers, layer_windows(model.config))
        ]
        self.windows = sorted({L.window for L in self.layers}, key=lambda w: w or 0)

    def _rope_tables(self, inner, rope_sets: dict[str, dict]) -> None:
        """RoPE tables for every position, from the model's own rotary module (covers rope scaling),
        one per layer type when the architecture has one RoPE parameter set per type (Gemma 3)."""
        positions = self.positions[None]
        dummy = torch.zeros(1, device=self.device, dtype=self.dtype)
        per_type = self.arch.rope == "per_layer_type"
        self.rope: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        for kind in rope_sets:
            cos, sin = inner.rotary_emb(dummy, positions, kind) if per_type else inner.rotary_emb(dummy, positions)
            self.rope[kind] = (cos[0].contiguous(), sin[0].contiguous())

    def _pick_kernels(self, cuda: bool, do_compile: bool) -> None:
        """Decode attention, compiled element-wise pieces, and the Triton sampler and RoPE kernels."""
        # "triton" (kernels/split_kv.py: split-KV kernels that also write the new k/v into the cache;
        # the default on CUDA with Triton installed, for models without soft-capped scores), "sdpa"
        # (cuDNN/flash fused kernel) or "math" (two matmuls). Set it before the first step:
        # captured graphs keep the choice.
        triton = cuda and importlib.util.find_spec("triton") is not None
        self.decode_attention = "triton" if triton and self.softcap is None else "sdpa"
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
        if triton:  # a vocabulary-wide pass that fills the GPU at any batch size (kernels/fused_sampling.py)
            from train_agent.engine.kernels.fused_sampling import with_chunked_sampling

            self._sample = with_chunked_sampling(self._sample)
        # one kernel for q and k's RoPE where no q/k norms and no partial rotary need the compiled one
        self._fused_rope = None
        full_rotary = all(cos.shape[-1] == self.head_dim for cos, _ in self.rope.values())
        power_of_two = self.head_dim & (self.head_dim - 1) == 0
        if triton and full_rotary and power_of_two and not self.arch.qk_norm:
            from train_agent.engine.kernels.fused_rope import fused_qkv_rope

            self._fused_rope = fused_qkv_rope

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
        """Runs whole prompts, fills their slots' KV cache and returns the logits of each prompt's
        last token `[len(prompts), vocab]` (float32). With `cached`, the first `cached[i]` tokens of
        prompt i already have their KV in its slot's row (prefix caching, prefix_cache.py): only the
        rest is computed, attending to those rows.

        The projections and the MLP run on the prompts' own tokens, packed. A batch mixes a first
        turn's whole prompt with later turns' short suffixes: padded to the longest, its padding
        ran through every matmul and attended to every row's whole context (benches/RESULTS.md,
        "Packed prefill, and a GGUF file read once"). On CUDA attention still sees the rows
        right-padded into one `[B, T]` batch (one kernel for all); elsewhere it runs row by row
        over each row's own tokens (`_attend_rows`)."""
        B = len(prompts)
        cached = cached or [0] * B
        suffixes = [p[c:] for p, c in zip(prompts, cached)]
        if self.decode_attention == "triton" and sum(map(len, suffixes)) <= EXTEND_TOKENS:
            return self._extend(suffixes, cached, slots, lora)
        lens = [len(p) for p in suffixes]
        lens_t = torch.tensor(lens, device=self.device)
        ids = torch.tensor([t for p in suffixes for t in p], device=self.device)
        pos = torch.cat([self.positions[c : c + n] for c, n in zip(cached, lens)])
        lora_idx = torch.tensor(lora, device=self.device).repeat_interleave(lens_t) if self.lora_slots else None
        last = lens_t.cumsum(0).sub_(1)
        if self.device.type != "cuda":
            h = self._forward(ids, pos, lora_idx, self._attend_rows(slots, cached, lens))
            return self.logits(h[last])
        T = max(lens)
        # each token's place in the padded [B, T] batch
        keep = torch.cat([torch.arange(i * T, i * T + n) for i, n in enumerate(lens)]).to(self.device)
        rows = torch.tensor(slots, device=self.device)
        H, K, D = self.n_heads, self.n_kv, self.head_dim

        def padded(x: torch.Tensor) -> torch.Tensor:
            out = x.new_zeros((B * T, *x.shape[1:]))
            out[keep] = x
            return out

        if not any(cached):
            masks = self._masks(self.positions[:T][None], T, causal_ok=True)

            def attend(i, q, k, v):
                k = padded(k).view(B, T, K, D).transpose(1, 2)
                v = padded(v).view(B, T, K, D).transpose(1, 2)
                self.k_cache[i][rows, :, :T] = k
                self.v_cache[i][rows, :, :T] = v
                q = padded(q).view(B, T, H, D).transpose(1, 2)
                o = attention(q, k, v, masks[self.layers[i].window], self.scale, self.softcap, False)
                return o.transpose(1, 2).reshape(B * T, H * D)[keep]
        else:
            # row i's tokens sit at positions cached[i]...; pads past the cache go to the idle position
            pos2 = (torch.tensor(cached, device=self.device)[:, None] + self.positions[:T]).clamp_(max=self.idle_pos)
            span = max(c + len(p) for c, p in zip(cached, suffixes))
            masks = self._masks(pos2, span)
            slot_rows = rows[:, None]

            def attend(i, q, k, v):
                self.k_cache[i][slot_rows, :, pos2] = padded(k).view(B, T, K, D)
                self.v_cache[i][slot_rows, :, pos2] = padded(v).view(B, T, K, D)
                keys, values = self.k_cache[i][rows, :, :span], self.v_cache[i][rows, :, :span]
                q = padded(q).view(B, T, H, D).transpose(1, 2)
                o = attention(q, keys, values, masks[self.layers[i].window], self.scale, self.softcap, False)
                return o.transpose(1, 2).reshape(B * T, H * D)[keep]

        h = self._forward(ids, pos, lora_idx, attend)
        return self.logits(h[last])

    def _attend_rows(self, slots: list[int], cached: list[int], lens: list[int]):
        """`_forward`'s attention for a packed prefill, one row at a time: row r's `lens[r]` tokens
        go to its slot at positions `cached[r]`... and attend to that slot's first `cached[r] +
        lens[r]` positions, so no row pays for another's length."""
        starts = [0, *itertools.accumulate(lens)][:-1]
        # the masks of every row, built once for all layers: None (causal) where nothing is cached
        masks = [self._masks(self.positions[c : c + n][None], c + n, causal_ok=c == 0) for c, n in zip(cached, lens)]
        H, D = self.n_heads, self.head_dim

        def attend(i, q, k, v):
            out = []
            for slot, start, c, n, mask in zip(slots, starts, cached, lens, masks):
                keys, values = self.k_cache[i][slot], self.v_cache[i][slot]  # [K, S, D]
                keys[:, c : c + n] = k[start : start + n].transpose(0, 1)
                values[:, c : c + n] = v[start : start + n].transpose(0, 1)
                q_row = q[start : start + n].transpose(0, 1)[None]
                kv = keys[None, :, : c + n], values[None, :, : c + n]
                o = attention(q_row, *kv, mask[self.layers[i].window], self.scale, self.softcap, False)
                out.append(o[0].transpose(0, 1).reshape(n, H * D))
            return torch.cat(out)

        return attend

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
            h = self._replay(("extend", n, L), lambda: self._extend_forward(n, L))
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


def kv_bytes_per_token(config, dtype: torch.dtype) -> int:
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    itemsize = torch.empty((), dtype=dtype).element_size()
    return config.num_hidden_layers * 2 * config.num_key_value_heads * head_dim * itemsize
