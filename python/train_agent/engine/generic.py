"""The generic path: any causal LM that transformers loads, served through transformers' own
forward, so that a model the fast decoder (decoder.py) does not cover is still served, exactly.

It keeps the scheduler's interface (`slots.SlotState`: the same slots, sampling, logprobs and
prefix-cache bookkeeping), but each slot holds the model's own `past_key_values` and every
sequence runs its own forward, one token per step: no static cache, no batching across sequences,
no CUDA graphs. It is correct wherever transformers is (sliding windows, any RoPE scaling, any
cache type), and slower by about the batch size (every step is one forward per running
sequence). Logits are the model's own (soft-capping and all), cast to float32; in bf16 the fast
path's float32 output head is therefore closer to the trainer's.

LoRA adapters go through PEFT (`PeftModel.load_adapter`), one PEFT adapter per bank slot, picked
per sequence with PEFT's `adapter_names`; any module PEFT can adapt is served.
"""

from __future__ import annotations

import copy
import inspect
import logging

import torch

from train_agent.engine.adapters import read_lora_config
from train_agent.engine.slots import SlotState

log = logging.getLogger("train_agent.engine")
BASE = "__base__"  # PEFT's name for "no adapter" in `adapter_names`


def _trimmed(cache, n: int):
    """`cache` holding exactly its first `n` tokens, or None when it cannot: a cache that keeps only
    a window (or a state) has no earlier prefix to return to, and the prompt is then recomputed."""
    from transformers.cache_utils import DynamicLayer

    if cache is None:
        return None
    have = cache.get_seq_length()
    if have == n:
        return cache
    layers = getattr(cache, "layers", None)
    if have < n or not layers or any(type(layer) is not DynamicLayer for layer in layers):
        return None
    cache.crop(n - have)  # a negative count: tokens to drop from the end
    return cache


class GenericDecoder(SlotState):
    """Serves `model` (any `AutoModelForCausalLM`) one sequence at a time through its own forward."""

    def __init__(
        self,
        model,
        *,
        num_slots: int,
        max_len: int,
        enable_lora: bool = False,
        max_loras: int = 1,
        max_lora_rank: int = 16,
        lookahead: int = 8,
        logprobs_mode: str = "raw_logprobs",
    ):
        model.eval().requires_grad_(False)
        self.model = model
        vocab = model.get_output_embeddings().weight.shape[0]
        self._init_slots(num_slots, max_len, lookahead, vocab, next(model.parameters()).device, logprobs_mode)
        # only the last position's logits are needed; models that can skip the rest say so
        self.keep = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
        self.caches: list = [None] * num_slots
        self.lora_slots = max_loras + 1 if enable_lora else 0  # as the fast path's banks
        self.lora_rank = max_lora_rank
        self.peft = None  # the PeftModel around `model`, made by the first adapter
        self.adapter_names: list[str | None] = [None] * self.lora_slots
        self.installs = 0

    # ---- LoRA through PEFT --------------------------------------------------------------------

    def read_adapter(self, path: str) -> tuple[str]:
        """Checks a PEFT adapter directory (off the scheduler thread); PEFT reads it on install."""
        read_lora_config(path, self.lora_rank)
        return (path,)

    def install_adapter(self, slot: int, path: str) -> None:
        """Loads the adapter at `path` as bank `slot`'s PEFT adapter, then drops the one it replaces."""
        from peft import PeftModel

        self.installs += 1
        name = f"slot{slot}-{self.installs}"
        if self.peft is None:
            self.peft = PeftModel.from_pretrained(self.model, path, adapter_name=name).eval()
        else:
            self.peft.load_adapter(path, adapter_name=name)
        old, self.adapter_names[slot] = self.adapter_names[slot], name
        if old is not None:
            self.peft.delete_adapter(old)

    # ---- forward ------------------------------------------------------------------------------

    def _run(self, slot: int, ids: list[int] | torch.Tensor, cache, adapter: int) -> torch.Tensor:
        """Feeds `ids` to slot `slot`'s sequence on top of `cache` under bank slot `adapter` (-1: the
        base model); returns the last position's float32 logits."""
        ids = torch.as_tensor(ids, device=self.device).view(1, -1)
        if self.peft is None:
            out = self.model(input_ids=ids, past_key_values=cache, use_cache=True, **self.keep)
        else:
            name = self.adapter_names[adapter] if adapter >= 0 else BASE
            out = self.peft(input_ids=ids, past_key_values=cache, use_cache=True, adapter_names=[name], **self.keep)
        self.caches[slot] = out.past_key_values
        return out.logits[0, -1].float()

    def prefill(
        self, prompts: list[list[int]], slots: list[int], lora: list[int], cached: list[int] | None = None
    ) -> torch.Tensor:
        """As Decoder.prefill: the first `cached[i]` tokens are reused from the slot's cache where it
        can be cut back to them exactly, else the whole prompt is recomputed."""
        cached = cached or [0] * len(prompts)
        out = []
        for prompt, slot, adapter, n in zip(prompts, slots, lora, cached):
            cache = _trimmed(self.caches[slot], n) if n else None
            out.append(self._run(slot, prompt[n if cache is not None else 0 :], cache, adapter))
        return torch.stack(out)

    def copy_slot(self, src: int, dsts: list[int], length: int) -> None:
        """As Decoder.copy_slot, on copies of the source's cache object."""
        for d in dsts:
            self.caches[d] = _trimmed(copy.deepcopy(self.caches[src]), length)

    def _decode(self, b: int, L: int) -> torch.Tensor:
        """Runs every busy row of [0, b) (idle rows sit at the idle position) on its own cache."""
        logits = torch.zeros(b, self.vocab, device=self.device)
        for slot in (self.pos[:b] != self.idle_pos).nonzero().flatten().tolist():
            logits[slot] = self._run(slot, self.tok[slot : slot + 1], self.caches[slot], int(self.lora[slot]))
        return logits
