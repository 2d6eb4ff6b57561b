"""The fast decoder's architectures: one `Architecture` row per Hugging Face `model_type`, saying
how its layers differ from Llama's. decoder.Decoder, layers.read_layer and `fast_path_refusal` read
these rows and the model's config, nothing else per model type, so serving a new Llama-family
architecture on the fast path is one row in `ARCHITECTURES` (docs/architecture.md, "Adding an
architecture", says which tests to extend). Model types without a row are served exactly by the
generic path (generic.GenericDecoder, transformers' own forward).

What varies inside a model type is read from its config, as transformers reads it: the gate
activation (`ACTIVATIONS`), the RoPE parameters (scaling included: the tables come from the model's
own rotary module, and a partial rotary dimension such as Phi-3's `partial_rotary_factor` from
their width), the soft-cap values and the sliding windows (`layer_windows`).
"""

from __future__ import annotations

from dataclasses import dataclass

# hidden activation -> whether the gate is GELU (tanh approximation) rather than SiLU
ACTIVATIONS = {"silu": False, "gelu_pytorch_tanh": True}
# RoPE types whose tables depend on the length of the sequence being run, which one static table
# for every position cannot reproduce
LENGTH_DEPENDENT_ROPE = ("dynamic", "longrope")
NORMS = ("llama", "gemma")
ROPES = ("shared", "per_layer_type")


@dataclass(frozen=True)
class Architecture:
    """How one model type's decoder layers differ from Llama's. The defaults are Llama's."""

    model_type: str
    # RMSNorm weights: "llama" scales by `w` in the model's dtype after the cast back; "gemma" by
    # `1 + w` in float32 before it (GemmaRMSNorm)
    norm: str = "llama"
    # "sandwich" norms (Gemma): a norm on the attention's output (`post_attention_layernorm`) and on
    # the MLP's (`post_feedforward_layernorm`); the MLP's input norm is then `pre_feedforward_layernorm`
    sandwich_norms: bool = False
    # the config attribute naming the MLP's gate activation (a key of ACTIVATIONS; `hidden_act`
    # where that one is unset)
    activation_key: str = "hidden_act"
    # the config attribute whose inverse square root scales the queries (None: the head dim)
    query_scale_key: str | None = None
    # embeddings multiplied by the embedding module's `embed_scale` (Gemma: sqrt(hidden))
    scaled_embeddings: bool = False
    # the checkpoint's attention input and MLP gate/up projections, in order: three and two modules
    # that the decoder fuses into one matmul each, or one module already fused (Phi-3). Their names
    # are also the PEFT module names a LoRA adapter may target (with `o_proj` and `down_proj`).
    qkv: tuple[str, ...] = ("q_proj", "k_proj", "v_proj")
    gate_up: tuple[str, ...] = ("gate_proj", "up_proj")
    # per-head RMSNorms of q and k before RoPE (`self_attn.q_norm`, `self_attn.k_norm`)
    qk_norm: bool = False
    # "shared": one RoPE table for every layer; "per_layer_type": one per layer type, from the
    # config's nested `rope_parameters` (Gemma 3's local and global layers)
    rope: str = "shared"
    # tanh soft-caps, from the config: of attention scores (`attn_logit_softcapping`) and of the
    # final logits (`final_logit_softcapping`), each None when unset
    softcaps: bool = False

    def __post_init__(self):
        if self.norm not in NORMS or self.rope not in ROPES:
            raise ValueError(f"{self.model_type}: norm must be one of {NORMS} and rope one of {ROPES}")

    @property
    def lora_targets(self) -> dict[str, tuple[str, int]]:
        """PEFT module name -> (the decoder's fused projection, part index inside it)."""
        return {
            **{name: ("qkv", i) for i, name in enumerate(self.qkv)},
            "o_proj": ("o", 0),
            **{name: ("gate_up", i) for i, name in enumerate(self.gate_up)},
            "down_proj": ("down", 0),
        }


_GEMMA = dict(
    norm="gemma",
    sandwich_norms=True,
    activation_key="hidden_activation",
    query_scale_key="query_pre_attn_scalar",
    scaled_embeddings=True,
    softcaps=True,
)

ARCHITECTURES: dict[str, Architecture] = {
    a.model_type: a
    for a in (
        Architecture("llama"),
        Architecture("mistral"),
        Architecture("qwen2"),
        Architecture("qwen3", qk_norm=True),
        Architecture("gemma2", **_GEMMA),
        Architecture("gemma3_text", **_GEMMA, qk_norm=True, rope="per_layer_type"),
        Architecture("phi3", qkv=("qkv_proj",), gate_up=("gate_up_proj",)),
    )
}


def activation(cfg, arch: Architecture) -> str:
    """The MLP's gate activation named by the config."""
    return getattr(cfg, arch.activation_key, None) or getattr(cfg, "hidden_act", "silu")


def rope_parameters(cfg, arch: Architecture) -> dict[str, dict]:
    """The config's RoPE parameter sets by table name: one per layer type, or one ("default")."""
    params = getattr(cfg, "rope_parameters", None) or {}
    if arch.rope == "per_layer_type":
        return {k: v for k, v in params.items() if isinstance(v, dict)}
    return {"default": params}


def softcaps(cfg, arch: Architecture) -> tuple[float | None, float | None]:
    """(attention score cap, final logit cap), None where the model caps nothing."""
    if not arch.softcaps:
        return None, None
    return getattr(cfg, "attn_logit_softcapping", None), getattr(cfg, "final_logit_softcapping", None)


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


def fast_path_refusal(cfg) -> str | None:
    """Why the fast decoder cannot serve a model of config `cfg` exactly, or None when it can."""
    arch = ARCHITECTURES.get(cfg.model_type)
    if arch is None:
        return f"model type {cfg.model_type!r} has no fast path (it has: {', '.join(ARCHITECTURES)})"
    act = activation(cfg, arch)
    if act not in ACTIVATIONS:
        return f"activation {act!r} has no fast path (it has: {', '.join(ACTIVATIONS)})"
    for params in rope_parameters(cfg, arch).values():
        if params.get("rope_type") in LENGTH_DEPENDENT_ROPE:
            return f"RoPE type {params['rope_type']!r} depends on the sequence length, which one static table cannot follow"
    if getattr(cfg, "use_bidirectional_attention", False):
        return "bidirectional attention has no fast path"
    return None
