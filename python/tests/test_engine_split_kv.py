"""The split-KV decode attention kernels (split_kv.py) against the decoder's own attention path
(`ops.attention` under `Decoder._masks`): grouped query heads, ragged per-row positions, sliding
windows, context buckets that are not a multiple of the key block, splits of several blocks, an
idle row, and the new k/v written into the cache; then whole decode steps of tiny models with
windowed and global layers, the Triton path against SDPA.

Without CUDA the kernels run in Triton's interpreter on CPU tensors (TRITON_INTERPRET=1, which
Triton reads when the kernels are defined: conftest.py sets it before any module imports split_kv). The
interpreter's bf16 matmul is wrong (it multiplies the raw bits), so bf16 is checked on CUDA only."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

CUDA = torch.cuda.is_available()
pytest.importorskip("triton")

from test_engine_archs import ARCHS  # noqa: E402

from train_agent.engine.decoder import Decoder  # noqa: E402
from train_agent.engine.kernels.split_kv import split_kv_attention  # noqa: E402
from train_agent.engine.ops import attention  # noqa: E402

DEVICE = "cuda" if CUDA else "cpu"
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if CUDA else [])
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def reference(q, k, v, k_cache, v_cache, pos, L, window, scale):
    """Decoder._decode's SDPA path in float32: index writes of the new k/v, then attention under
    the masks Decoder._masks builds."""
    b, H, D = q.shape
    K = k.shape[1]
    k_cache, v_cache = k_cache.float(), v_cache.float()
    rows = torch.arange(b, device=q.device)
    k_cache[rows, :, pos] = k.float()
    v_cache[rows, :, pos] = v.float()
    masker = SimpleNamespace(
        positions=torch.arange(k_cache.shape[2], device=q.device),
        windows=[window],
        softcap=None,
        device=q.device,
        dtype=torch.float32,
    )
    mask = Decoder._masks(masker, pos[:, None], L)[window]
    o = attention(q.float().view(b, K, H // K, D), k_cache[:b, :, :L], v_cache[:b, :, :L], mask, scale, None, False)
    return o.reshape(b, H, D), k_cache, v_cache


CASES = {
    # heads, KV heads, head dim, context bucket L, cache length, window
    "gqa3": (6, 2, 16, 100, 120, None),
    "gqa3-window": (6, 2, 16, 100, 120, 7),
    "mha-dim24-window-across-splits": (2, 2, 24, 130, 140, 50),
    "gqa4-two-blocks-a-split": (4, 1, 32, 4500, 4510, None),
    "gqa4-two-blocks-a-split-window": (4, 1, 32, 4500, 4510, 150),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", list(CASES))
def test_kernel_matches_the_masked_sdpa_path(case, dtype):
    H, K, D, L, cache_len, window = CASES[case]
    g = torch.Generator().manual_seed(0)
    # the last position of the bucket, the first, both sides of a key-block edge, and an idle row
    # (Decoder's idle position, past the bucket)
    pos = torch.tensor([L - 1, 0, 63, 64, L // 2, cache_len - 1])
    b = len(pos)

    def rand(*shape):
        return torch.randn(*shape, generator=g).to(DEVICE, dtype)

    q = rand(b, H, D)
    k = rand(b, K, D)
    v = rand(b, K + 1, D)[:, 1:]  # a strided view, as the fused qkv split gives it
    k_cache, v_cache = rand(b + 1, K, cache_len, D), rand(b + 1, K, cache_len, D)
    pos = pos.to(DEVICE)
    want, want_k, want_v = reference(q, k, v, k_cache, v_cache, pos, L, window, 0.3)

    got = split_kv_attention(q, k, v, k_cache, v_cache, pos, L, window, 0.3)

    # an idle row attends to what its masks allow in the bucket; where they allow nothing (its
    # window lies past the bucket) the masks give NaN and the kernel zeros, never read either way
    empty = want.isnan().all(-1)
    assert (got.float() - want).abs()[~empty].max() < TOLERANCE[dtype]
    assert (got[empty] == 0).all()
    # the new k/v of active rows are in the cache, and nothing else changed: the idle row writes
    # nothing (the SDPA path writes scratch at its position)
    idle = torch.nonzero(pos >= L)[:, 0]
    want_k[idle, :, pos[idle]] = k_cache[idle, :, pos[idle]].float()
    want_v[idle, :, pos[idle]] = v_cache[idle, :, pos[idle]].float()
    assert torch.equal(k_cache.float(), want_k) and torch.equal(v_cache.float(), want_v)


@pytest.mark.parametrize("arch", ["mistral", "gemma3_text"])
def test_decode_steps_match_sdpa(arch):
    """Six greedy decode steps of three ragged rows and an idle slot, from the same prefilled
    state, on each path: the same tokens, logits and KV cache. Mistral's layers all have a 6-token
    window; Gemma 3 mixes windowed and global layers (and has q/k norms)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(arch, initializer_range=0.1, tie_word_embeddings=True, **ARCHS[arch])
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).to(DEVICE)
    dec = Decoder(model, num_slots=4, max_len=100, use_graphs=False, compile=False)
    assert any(layer.window for layer in dec.layers)
    prompts = [torch.randint(3, 256, (n,), generator=torch.Generator().manual_seed(n)).tolist() for n in (23, 9, 40)]
    with torch.inference_mode():
        logits = dec.prefill(prompts, [0, 1, 2], [-1, -1, -1])
        dec.tok[:3] = logits.argmax(-1)
        dec.pos[:3] = torch.tensor([len(p) for p in prompts], device=DEVICE)
        start = [t.clone() for t in (dec.tok, dec.pos, *dec.k_cache, *dec.v_cache)]
        runs = []
        for impl in ("sdpa", "triton"):
            for t, s in zip((dec.tok, dec.pos, *dec.k_cache, *dec.v_cache), start):
                t.copy_(s)
            dec.decode_attention = impl
            steps = [dec.step(4, 128, use_top_p=False) for _ in range(6)]
            runs.append(([s[0].clone() for s in steps], [s[2][:3].clone() for s in steps], dec.k_cache[0].clone()))
    (tok_a, logits_a, cache_a), (tok_b, logits_b, cache_b) = runs
    assert [t[:3].tolist() for t in tok_a] == [t[:3].tolist() for t in tok_b]
    assert max((a - b).abs().max() for a, b in zip(logits_a, logits_b)) < 1e-4
    # layer 0's new keys depend on the tokens only, so they match exactly (the idle row's scratch
    # position is written by the SDPA path only)
    assert torch.equal(cache_a[:3], cache_b[:3])


@pytest.mark.parametrize("arch", ["mistral", "gemma3_text"])
def test_extend_prefill_matches_the_batched_prefill(arch):
    """Decoder.prefill of short suffixes as an extend step (one kernel row per token, each reading
    its own slot) against the batched SDPA prefill: two prompts prefilled whole, then their
    continuations on top of the cached rows beside a new prompt, under a LoRA adapter for one of
    them and the base model for the others. The same logits and the same KV cache rows; the step's
    pad rows (21 tokens in a 32-row bucket) change nothing."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from train_agent.engine.adapters import LORA_TARGETS

    cfg = AutoConfig.for_model(arch, initializer_range=0.1, tie_word_embeddings=True, **ARCHS[arch])
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).to(DEVICE)
    dec = Decoder(model, num_slots=4, max_len=100, use_graphs=False, compile=False, enable_lora=True, max_lora_rank=4)
    g = torch.Generator().manual_seed(1)
    weights = {}
    for i, layer in enumerate(dec.layers):
        outs = dict(zip(("q_proj", "k_proj", "v_proj"), layer.qkv.parts))
        outs |= {"o_proj": layer.o.parts[0], "gate_proj": layer.gate_up.parts[0], "up_proj": layer.gate_up.parts[1]}
        outs["down_proj"] = layer.down.parts[0]
        ins = {"o_proj": layer.o.weight.shape[1], "down_proj": layer.down.weight.shape[1]}
        for name in LORA_TARGETS:
            d_in = ins.get(name, layer.qkv.weight.shape[1])
            weights[(i, name)] = (
                torch.randn(4, d_in, generator=g) * 0.1,
                torch.randn(outs[name], 4, generator=g) * 0.1,
            )
    dec.install_adapter(0, weights, 2.0)
    rand = lambda n, seed: torch.randint(3, 256, (n,), generator=torch.Generator().manual_seed(seed)).tolist()  # noqa: E731
    first = [rand(23, 1), rand(40, 2)]
    second = [first[0] + rand(9, 3), first[1] + rand(5, 4), rand(7, 5)]
    runs = []
    with torch.inference_mode():
        for impl in ("sdpa", "triton"):
            for c in (*dec.k_cache, *dec.v_cache):
                c.zero_()
            dec.decode_attention = impl
            a = dec.prefill(first, [0, 1], [0, -1])
            b = dec.prefill(second, [0, 1, 2], [0, -1, -1], [23, 40, 0])
            # each slot's prompt so far (the batched prefill also writes its pads' k/v past them)
            rows = [
                torch.cat([c[s, :, :n] for s, n in enumerate((32, 45, 7))], 1) for c in (*dec.k_cache, *dec.v_cache)
            ]
            runs.append((a, b, rows))
    (a0, b0, cache0), (a1, b1, cache1) = runs
    assert (a0 - a1).abs().max() < 1e-4
    assert (b0 - b1).abs().max() < 1e-4
    assert max((x - y).abs().max() for x, y in zip(cache0, cache1)) < 1e-5
    assert all(c.abs().sum(-1).gt(0).all() for c in cache1)  # every position was written
