"""The fast decoder's view of a Hugging Face decoder layer: its norms and its projections, fused
into one matmul each (`Proj`, with the LoRA banks of adapters.LoraBanks), read as the model type's
row of architectures.ARCHITECTURES says."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from train_agent.engine.architectures import Architecture


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


def fuse(modules: list[torch.nn.Linear]) -> Proj:
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


def norm_weight(w: torch.Tensor, arch: Architecture) -> torch.Tensor:
    """An RMSNorm weight as ops.rms_norm takes it: Gemma's multiplies by 1 + weight in float32
    (rms_norm keys its order on the dtype), Llama's is the weight itself."""
    return 1 + w.float() if arch.norm == "gemma" else w


def read_layer(layer, arch: Architecture, kind: str, window: int | None) -> Layer:
    """Layer `layer` of the HF model (its fused weights become views of ours), of layer type `kind`
    with sliding window `window`."""
    at, mlp = layer.self_attn, layer.mlp
    norm = lambda m: norm_weight(m.weight, arch) if m is not None else None  # noqa: E731
    sandwich = arch.sandwich_norms
    return Layer(
        ln1=norm(layer.input_layernorm),
        ln2=norm(layer.pre_feedforward_layernorm if sandwich else layer.post_attention_layernorm),
        qkv=fuse([getattr(at, name) for name in arch.qkv]),
        o=fuse([at.o_proj]),
        gate_up=fuse([getattr(mlp, name) for name in arch.gate_up]),
        down=fuse([mlp.down_proj]),
        q_norm=norm(at.q_norm) if arch.qk_norm else None,
        k_norm=norm(at.k_norm) if arch.qk_norm else None,
        post_attn=norm(layer.post_attention_layernorm) if sandwich else None,
        post_ff=norm(layer.post_feedforward_layernorm) if sandwich else None,
        rope=kind if arch.rope == "per_layer_type" else "default",
        window=window,
    )
