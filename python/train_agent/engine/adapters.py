"""LoRA adapters for the engine: PEFT adapter directories read and checked (`read_lora_config`,
`read_peft_adapter`; the generic path reads only the config, PEFT the rest), and the fast decoder's
fixed-size banks (`LoraBanks`): `A: [in, parts*slots*rank]`, `B: [parts*slots*rank, out]` per fused
projection and a per-row adapter index, so rows of different adapters share one step and loading an
adapter is an in-place copy that keeps captured CUDA graphs valid (a punica-style batched LoRA in
two matmuls)."""

from __future__ import annotations

import json
import os
import re

import torch

from train_agent.engine.architectures import ARCHITECTURES
from train_agent.engine.layers import Proj

# PEFT module name -> (our fused projection, part index inside it), for Llama's modules; each
# architecture has its own (architectures.Architecture.lora_targets: Phi-3 has one LoRA per fused
# module)
LORA_TARGETS = ARCHITECTURES["llama"].lora_targets

_KEY = re.compile(r"layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")


def read_lora_config(path: str, max_rank: int) -> tuple[dict, float]:
    """A PEFT LoRA directory's adapter_config.json and its scale (alpha/r, or alpha/sqrt(r) with
    rsLoRA). Raises ValueError for what the engine cannot serve."""
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
    `targets` are the module names the model's banks hold (its architecture's `lora_targets`;
    Llama's by default). Raises ValueError for what the banks cannot hold."""
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


class LoraBanks:
    """The fast decoder's LoRA banks (a mixin of decoder.Decoder, which sets `layers`,
    `lora_slots`, `lora_rank`, `lora_targets`, `device` and `dtype`)."""

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
