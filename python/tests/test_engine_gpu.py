"""The engine's CUDA path: graphs, compiled kernels, bf16, batching and LoRA, on small random
Qwen2 / Qwen3 models built from configs (the GPU machines reach no model hub). Skipped without CUDA."""

from __future__ import annotations

import pytest
import torch

from train_agent.engine.decoder import Decoder
from train_agent.engine.requests import SamplingParams
from train_agent.engine.scheduler import Generator

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def small_model(kind: str, dtype: torch.dtype):
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    common = dict(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=2,
        vocab_size=32000,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
    )
    if kind == "qwen3":
        model = Qwen3ForCausalLM(Qwen3Config(head_dim=64, **common))
    else:
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    return model.to("cuda", dtype).eval()


def reference(model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    with torch.no_grad():
        ids = torch.tensor([prompt + completion], device="cuda")
        lp = model(ids).logits.float().log_softmax(-1)[0]
    return lp[len(prompt) - 1 : len(prompt) - 1 + len(completion)].cpu()


def prompts(k: int, length: int = 40) -> list[list[int]]:
    g = torch.Generator().manual_seed(k)
    return [torch.randint(100, 30000, (length + 7 * i,), generator=g).tolist() for i in range(k)]


@pytest.fixture(scope="module", params=["qwen2", "qwen3"])
def fp32_engine(request):
    torch.backends.cuda.matmul.allow_tf32 = False
    model = small_model(request.param, torch.float32)
    gen = Generator(
        Decoder(model, num_slots=16, max_len=512, enable_lora=True, max_loras=2, max_lora_rank=8), eos_ids=set()
    )
    yield model, gen
    gen.close()


def test_graphs_match_hf_forward_fp32(fp32_engine):
    model, gen = fp32_engine
    assert gen.dec.use_graphs
    p = prompts(1)[0]
    res = gen.submit(p, 1, SamplingParams(max_tokens=40, temperature=1.0, seed=3)).result()
    c = res.completions[0]
    ref = reference(model, p, c.token_ids)
    got = torch.tensor(c.logprobs)
    assert (got - ref[torch.arange(len(c.token_ids)), c.token_ids]).abs().max() < 2e-3
    greedy = gen.submit(p, 1, SamplingParams(max_tokens=40, temperature=0)).result().completions[0].token_ids
    assert greedy == reference(model, p, greedy).argmax(-1).tolist()


def test_batching_matches_solo_and_seeds_reproduce(fp32_engine):
    _, gen = fp32_engine
    ps = prompts(12)
    solo = [
        gen.submit(p, 1, SamplingParams(max_tokens=24, temperature=0)).result().completions[0].token_ids for p in ps
    ]
    futs = [gen.submit(p, 1, SamplingParams(max_tokens=24, temperature=0)) for p in ps]
    assert [f.result().completions[0].token_ids for f in futs] == solo
    a = gen.submit(ps[0], 4, SamplingParams(max_tokens=16, seed=11)).result()
    b = gen.submit(ps[0], 4, SamplingParams(max_tokens=16, seed=11)).result()
    assert [c.token_ids for c in a.completions] == [c.token_ids for c in b.completions]
    assert len({tuple(c.token_ids) for c in a.completions}) == 4
    topp = gen.submit(ps[1], 2, SamplingParams(max_tokens=16, seed=5, top_p=0.5)).result()
    assert all(len(c.token_ids) == 16 for c in topp.completions)


def test_lora_in_graphs_matches_peft(fp32_engine, tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model

    model, gen = fp32_engine
    base_copy = small_model(model.config.model_type, torch.float32)
    torch.manual_seed(1)
    peft = get_peft_model(
        base_copy,
        LoraConfig(
            r=8,
            lora_alpha=16,
            init_lora_weights=False,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        ),
    )
    with torch.no_grad():
        for n, p in peft.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    peft.save_pretrained(tmp_path / "ad")
    gen.load_adapter("ad", str(tmp_path / "ad")).result()
    ref_model = PeftModel.from_pretrained(small_model(model.config.model_type, torch.float32), str(tmp_path / "ad"))
    ps = prompts(4)
    futs = [
        gen.submit(p, 1, SamplingParams(max_tokens=20, temperature=0), "ad" if i % 2 else None)
        for i, p in enumerate(ps)
    ]
    for i, (p, f) in enumerate(zip(ps, futs)):
        ids = f.result().completions[0].token_ids
        ref = reference(ref_model if i % 2 else model, p, ids)
        assert ids == ref.argmax(-1).tolist()
    gen.unload_adapter("ad").result()


def test_bf16_serving_agrees_with_hf():
    model = small_model("qwen2", torch.bfloat16)
    gen = Generator(Decoder(model, num_slots=8, max_len=512), eos_ids=set())
    try:
        p = prompts(1)[0]
        c = gen.submit(p, 1, SamplingParams(max_tokens=32, seed=1)).result().completions[0]
        ref = reference(model, p, c.token_ids)
        diff = (torch.tensor(c.logprobs) - ref[torch.arange(len(c.token_ids)), c.token_ids]).abs()
        assert diff.mean() < 0.05 and diff.max() < 0.3
        futs = [gen.submit(q, 2, SamplingParams(max_tokens=32, seed=i)) for i, q in enumerate(prompts(6))]
        assert all(len(x.token_ids) == 32 for f in futs for x in f.result().completions)
    finally:
        gen.close()


def test_guided_decoding_in_cuda_graphs(tiny_model_dir):
    """response_format on CUDA in bf16: the grammar's bitmask is applied inside the captured decode
    graphs, next to unguided rows, and every guided answer validates."""
    import json

    from test_engine_api import call
    from test_engine_guided import FORMAT, validate

    from train_agent.engine.cli import BackgroundServer
    from train_agent.engine.server import Engine
    from train_agent.models import ModelSource, load_model, load_tokenizer

    src = ModelSource.parse(str(tiny_model_dir))
    engine = Engine(
        load_model(src, "cuda", torch.bfloat16),
        load_tokenizer(src),
        served_model_name="tiny",
        max_model_len=512,
        max_num_seqs=8,
    )
    assert engine.decoder.use_graphs
    try:
        with BackgroundServer(engine) as url:
            for temperature in (0.0, 1.0):
                status, r = call(
                    url,
                    "/v1/chat/completions",
                    {
                        "model": "tiny",
                        "messages": [{"role": "user", "content": "grade"}],
                        "n": 4,
                        "max_tokens": 200,
                        "temperature": temperature,
                        "seed": 5,
                        "response_format": FORMAT,
                    },
                )
                assert status == 200, r
                for c in r["choices"]:
                    assert c["finish_reason"] == "stop", c
                    validate(json.loads(c["message"]["content"]))
    finally:
        engine.generator.close()


def test_prefix_cache_in_cuda_graphs_matches_no_cache_fp32():
    """Multi-turn conversations sharing a system prompt, cached and uncached, on the graph path:
    the uncached suffix's prefill attends to copied and in-place rows as an extend step, then the
    captured decode graphs run on them, windows launched before the last is read while rows
    finish at different lengths."""
    from test_engine_prefix_cache import assert_same_turns, conversations

    torch.backends.cuda.matmul.allow_tf32 = False
    outs = []
    for caching in (False, True):
        model = small_model("qwen2", torch.float32)
        gen = Generator(Decoder(model, num_slots=8, max_len=512), eos_ids=set(), prefix_caching=caching)
        try:
            outs.append(conversations(gen, lengths=(40, 12, 27, 5)))
            hits = gen.cache.hits if caching else 0
            assert gen.overlap and gen.stats.windows_ahead > 0
        finally:
            gen.close()
    assert_same_turns(outs[1], outs[0], atol=2e-3)
    assert hits > 500
