"""The engine's decoder, chosen and sized at startup: the fast decoder (decoder.py) where it serves
the model exactly, else the generic path (generic.py), and the KV cache's slots from the memory
left (`plan_slots`)."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from train_agent.engine.architectures import fast_path_refusal
from train_agent.engine.decoder import Decoder, kv_bytes_per_token
from train_agent.engine.generic import GenericDecoder
from train_agent.engine.slots import SlotState

log = logging.getLogger("train_agent.engine")


def available_memory() -> int:
    """Bytes this process can still allocate: the kernel's MemAvailable, or less under a cgroup
    (v2) memory limit, as in a container, where /proc/meminfo shows the host's memory; 0 where
    /proc/meminfo does not exist (not Linux)."""
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        return 0
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            avail = min(avail, int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return avail


def plan_slots(
    config,
    dtype: torch.dtype,
    device: torch.device,
    max_model_len: int,
    max_num_seqs: int,
    lookahead: int,
    gpu_memory_utilization: float,
    kv_cache_memory: int | None,
) -> int:
    """How many sequences fit in the KV budget: `--kv-cache-memory` bytes if given, else on CUDA
    `gpu_memory_utilization * total` minus what this process already holds and a reserve for
    activations and logits (so a trainer can share the GPU), else on CPU a quarter of the memory
    available (at least 2 GiB): the rest is the trainer's, which shares the machine. In float32 a
    sequence of 4096 tokens of SmolLM2-135M takes 188 MiB, so a fixed 2 GiB ran the CPU demo's 20
    validation episodes in two waves of 11."""
    per_slot = kv_bytes_per_token(config, dtype) * (max_model_len + lookahead)
    if kv_cache_memory is not None:
        budget = kv_cache_memory
    elif device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        reserve = (1 << 30) + 8 * max_num_seqs * config.vocab_size * 4  # prefill activations, logits
        budget = min(gpu_memory_utilization * total - torch.cuda.memory_reserved(device), free) - reserve
    else:
        budget = max(2 << 30, available_memory() // 4)
    slots = min(max_num_seqs, int(budget // per_slot))
    if slots < 1:
        raise SystemExit(
            f"error: the KV cache for one sequence of {max_model_len} tokens needs {per_slot / 2**20:.0f} MiB, "
            f"but only {max(budget, 0) / 2**20:.0f} MiB are available\n"
            f"hint: lower --max-model-len, or raise --gpu-memory-utilization / --kv-cache-memory"
        )
    if slots < max_num_seqs:
        log.info(
            "KV budget holds %d sequences of %d tokens (asked for --max-num-seqs %d)",
            slots,
            max_model_len,
            max_num_seqs,
        )
    return slots


def build_decoder(
    model,
    *,
    max_model_len: int,
    max_num_seqs: int,
    gpu_memory_utilization: float,
    kv_cache_memory: int | None,
    use_graphs: bool | None,
    lookahead: int,
    **kw,
) -> SlotState:
    """The fast decoder (decoder.py) where it serves the model exactly, else the generic path
    (generic.py: transformers' own forward, one sequence at a time), saying which and why."""
    cfg = model.config
    refusal = fast_path_refusal(cfg)
    if refusal is not None:
        log.warning(
            "serving %s on the generic path (transformers' own forward, one sequence at a time, no CUDA "
            "graphs: slower): %s",
            cfg.model_type,
            refusal,
        )
        return GenericDecoder(model, num_slots=max_num_seqs, max_len=max_model_len, lookahead=lookahead, **kw)
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    slots = plan_slots(
        cfg, dtype, device, max_model_len, max_num_seqs, lookahead, gpu_memory_utilization, kv_cache_memory
    )
    log.info("serving %s on the fast path (static KV cache for %d sequences)", cfg.model_type, slots)
    return Decoder(model, num_slots=slots, max_len=max_model_len, use_graphs=use_graphs, lookahead=lookahead, **kw)
