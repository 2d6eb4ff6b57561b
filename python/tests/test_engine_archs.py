"""Architecture coverage (issue 18, item 6): Gemma 2, Gemma 3 (text), Phi-3 and a windowed Mistral
on the fast path, GPT-2 and a longrope Phi-3 on the generic path, each a tiny random model checked
against transformers' own forward of the same weights (float32 on CPU, so 1e-4 is rounding: the
logits here spread over several nats).

The reference runs transformers' eager attention: its SDPA and flash paths drop Gemma 2's attention
soft-cap, and eager is the arithmetic the models were trained with. Windows are 6 tokens and
prompts 20 to 40, and norm weights are random (not Gemma's zeros), so a decoder that ignored the
window, the `1 + weight` norms or a soft-cap would fail (each was tried: the tests fail);
`test_the_checks_would_catch_an_ignored_window` shows the window matters at these lengths."""

from __future__ import annotations

import pytest
import torch
from test_engine_api import call, reference_logprobs
from test_engine_lora import make_adapter, peft_reference

from train_agent.engine.architectures import fast_path_refusal
from train_agent.engine.cli import BackgroundServer
from train_agent.engine.decoder import Decoder
from train_agent.engine.generic import GenericDecoder
from train_agent.engine.requests import SamplingParams
from train_agent.engine.scheduler import Generator
from train_agent.engine.server import Engine
from train_agent.engine.startup import build_decoder
from train_agent.models import ModelSource, load_model, load_tokenizer

VOCAB = 259  # tiny_bytes_model_dir's tokenizer: 256 bytes and 3 chat tokens
WINDOW = 6
SMALL = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2)
ARCHS = {
    "gemma2": dict(
        SMALL,
        num_hidden_layers=3,
        head_dim=16,
        sliding_window=WINDOW,
        query_pre_attn_scalar=24,
        attn_logit_softcapping=1.5,
        final_logit_softcapping=4.0,
    ),
    "gemma3_text": dict(
        SMALL,
        num_hidden_layers=3,
        head_dim=16,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10.0},
            "full_attention": {"rope_type": "linear", "rope_theta": 1000.0, "factor": 2.0},
        },
        query_pre_attn_scalar=24,
    ),
    "phi3": dict(SMALL, num_hidden_layers=2, sliding_window=WINDOW, partial_rotary_factor=0.5, pad_token_id=0),
    # Mistral's window is a fast-path mask too (the decoder ignored it before)
    "mistral": dict(SMALL, num_hidden_layers=2, sliding_window=WINDOW),
    # a Phi-3 with longrope: its tables switch with the sequence length, so only the generic path
    # serves it. (Past the switch, transformers' own forward over a whole sequence and its cached
    # decode disagree with each other; the sequences here stay below it.)
    "phi3-longrope": dict(
        SMALL,
        num_hidden_layers=2,
        pad_token_id=0,
        max_position_embeddings=256,
        original_max_position_embeddings=64,
        rope_parameters={"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [4.0] * 8},
    ),
    "gpt2": dict(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=256),
}
FAST = ("gemma2", "gemma3_text", "phi3", "mistral")
LORA_TARGETS = {
    "gemma2": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "gemma3_text": ["q_proj", "v_proj", "o_proj", "down_proj"],
    "phi3": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
    "mistral": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "phi3-longrope": ["qkv_proj", "gate_up_proj"],
    "gpt2": ["c_attn", "c_proj", "c_fc"],
}


def tokens(seed: int, n: int) -> list[int]:
    return torch.randint(3, 256, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def save_models(root, archs) -> dict:
    """Each architecture of `archs` (keys of ARCHS) saved under `root` with the byte-level tokenizer:
    random weights of std 0.1 (so logits spread over several nats) and random norm weights."""
    import tiny_model
    from transformers import AutoConfig, AutoModelForCausalLM

    tok = load_tokenizer(ModelSource.parse(str(tiny_model.tiny_bytes_model_dir())))
    out = {}
    for i, (arch, kw) in enumerate(ARCHS.items()):
        if arch not in archs:
            continue
        model_type = arch.split("-")[0]
        cfg = AutoConfig.for_model(model_type, initializer_range=0.1, tie_word_embeddings=True, **kw)
        cfg.bos_token_id, cfg.eos_token_id = tok.bos_token_id, tok.eos_token_id
        torch.manual_seed(i)
        model = AutoModelForCausalLM.from_config(cfg)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "norm" in name or name.endswith("ln_1.weight") or name.endswith("ln_2.weight"):
                    p.add_(torch.randn_like(p) * 0.3)
        model.save_pretrained(root / arch)
        tok.save_pretrained(root / arch)
        out[arch] = root / arch
    return out


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory, smollm2_gguf) -> dict:
    """Every architecture of ARCHS, saved once (save_models)."""
    return save_models(tmp_path_factory.mktemp("archs"), ARCHS)


def load(path, eager: bool = True):
    model = load_model(ModelSource.parse(str(path)), "cpu", torch.float32)
    if eager:
        model.set_attn_implementation("eager")
    return model


def generator(model, lora: bool, slots: int = 4) -> Generator:
    dec = build_decoder(
        model,
        max_model_len=128,
        max_num_seqs=slots,
        gpu_memory_utilization=0.9,
        kv_cache_memory=None,
        use_graphs=False,
        lookahead=8,
        enable_lora=lora,
        max_loras=1,
        max_lora_rank=8,
    )
    return Generator(dec, eos_ids=set())


def test_each_architecture_takes_its_path(model_dirs):
    for arch, path in model_dirs.items():
        gen = generator(load(path), lora=False)
        try:
            assert isinstance(gen.dec, Decoder if arch in FAST else GenericDecoder), arch
        finally:
            gen.close()
    longrope = load(model_dirs["phi3-longrope"]).config
    assert "'longrope'" in fast_path_refusal(longrope)
    with pytest.raises(ValueError, match="generic path"):
        Decoder(load(model_dirs["phi3-longrope"]), num_slots=1, max_len=64)
    assert "'gpt2' has no fast path" in fast_path_refusal(load(model_dirs["gpt2"]).config)


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("with_lora", [False, True], ids=["base", "lora"])
def test_logits_and_logprobs_match_transformers(model_dirs, tmp_path, arch, with_lora):
    """Prefill logits (every vocabulary entry), then sampled tokens' logprobs over 10 decode steps,
    for two prompts batched together, a follow-up turn that reuses the first one's KV (prefix
    cache), all longer than the window, with and without a random PEFT adapter."""
    path = model_dirs[arch]
    model = load(path)
    ref = model
    if with_lora:
        adapter = make_adapter(path, tmp_path / "adapter", seed=5, r=4, targets=LORA_TARGETS[arch])
        ref = peft_reference(path, adapter)
        ref.base_model.model.set_attn_implementation("eager")
    gen = generator(model, with_lora)
    name = None
    try:
        if with_lora:
            gen.load_adapter("ad", str(adapter)).result()
            name = "ad"
        slot = gen.adapters["ad"][0] if with_lora else -1
        prompts = [tokens(1, 23), tokens(2, 17)]
        with torch.inference_mode():
            logits = gen.dec.prefill(prompts, [0, 1], [slot, slot])
            for p, got in zip(prompts, logits):
                want = ref(torch.tensor([p])).logits[0, -1].float()
                assert (want.max() - want.min()) > 2  # spread: a wrong head or cap would show
                assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()
        params = SamplingParams(max_tokens=10, temperature=1.0, seed=3, ignore_eos=True)
        futs = [gen.submit(p, 1, params, name) for p in prompts]
        runs = [(p, f.result().completions[0]) for p, f in zip(prompts, futs)]
        follow = runs[0][0] + runs[0][1].token_ids + tokens(3, 5)
        runs.append((follow, gen.submit(follow, 1, params, name).result().completions[0]))
        assert gen.cache.hits > 0  # the follow-up reused the first conversation's KV
    finally:
        gen.close()
    for p, c in runs:
        want = reference_logprobs(ref, p, c.token_ids)
        got = torch.tensor(c.logprobs)
        assert torch.allclose(got, want[torch.arange(len(c.token_ids)), c.token_ids], atol=1e-4)
    if with_lora:  # the adapter matters
        plain = reference_logprobs(load(path), runs[0][0], runs[0][1].token_ids)
        assert (plain - reference_logprobs(ref, runs[0][0], runs[0][1].token_ids)).abs().max() > 1e-2


@pytest.mark.parametrize("arch", FAST)
def test_a_batch_of_rows_with_different_prefixes_and_lengths_prefills_each_as_its_own(model_dirs, tmp_path, arch):
    """One prefill of rows whose cached prefixes and new tokens all differ in length (a first turn
    beside later turns' short suffixes, as the scheduler batches them), with an adapter on some rows
    only: each row's logits are its own prompt's through the reference forward, and so are the
    logprobs its slot then decodes from that cache."""
    path = model_dirs[arch]
    ref_base = load(path)
    adapter = make_adapter(path, tmp_path / "adapter", seed=7, r=4, targets=LORA_TARGETS[arch])
    ref_lora = peft_reference(path, adapter)
    ref_lora.base_model.model.set_attn_implementation("eager")
    gen = generator(load(path), True)
    try:
        gen.load_adapter("ad", str(adapter)).result()
        ad = gen.adapters["ad"][0]
        dec = gen.dec
        heads = [tokens(10, 9), tokens(11, 30), tokens(12, 2)]
        prompts = [heads[0] + tokens(20, 21), heads[1] + tokens(21, 3), heads[2] + tokens(22, 40), tokens(23, 17)]
        lora = [ad, -1, ad, -1]
        with torch.inference_mode():
            for slot, head in enumerate(heads):  # the cached prefixes, each prefilled alone
                dec.prefill([head], [slot], [lora[slot]])
            logits = dec.prefill(prompts, [0, 1, 2, 3], lora, [len(h) for h in heads] + [0])
            for p, adapter_slot, got in zip(prompts, lora, logits):
                ref = ref_lora if adapter_slot >= 0 else ref_base
                want = ref(torch.tensor([p])).logits[0, -1].float()
                assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()
            # the cache each row was left with: one decode step of all four rows
            dec.tok[:4] = torch.tensor([5, 6, 7, 8])
            dec.pos[:4] = torch.tensor([len(p) for p in prompts])
            dec.lora[:4] = torch.tensor(lora)
            dec.temp[:4] = 1.0
            dec.top_p[:4] = 1.0
            _, _, step, _, _ = dec.step(4, max(map(len, prompts)) + 1, False)
            for p, t, adapter_slot, got in zip(prompts, [5, 6, 7, 8], lora, step):
                ref = ref_lora if adapter_slot >= 0 else ref_base
                want = ref(torch.tensor([p + [t]])).logits[0, -1].float()
                assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()
    finally:
        gen.close()


def test_the_checks_would_catch_an_ignored_window(model_dirs):
    """At these lengths the window changes the logits by far more than the tolerance."""
    for arch in FAST:
        model = load(model_dirs[arch])
        ids = torch.tensor([tokens(1, 23)])
        with torch.no_grad():
            windowed = model(ids).logits[0, -1]
            model.config.sliding_window = 10**6
            unwindowed = model(ids).logits[0, -1]
        assert (windowed - unwindowed).abs().max() > 1e-2, arch


@pytest.mark.parametrize("arch", list(ARCHS))
def test_greedy_chat_completion_equals_transformers_generate(model_dirs, arch):
    """End to end over HTTP: the engine's greedy tokens are transformers' `generate` tokens."""
    path = model_dirs[arch]
    src = ModelSource.parse(str(path))
    engine = Engine(load(path), load_tokenizer(src), served_model_name="tiny", max_model_len=256, max_num_seqs=4)
    try:
        with BackgroundServer(engine) as url:
            body = {
                "model": "tiny",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "a prompt longer than the window"},
                ],
                "max_tokens": 8,
                "temperature": 0,
                "logprobs": True,
                "return_token_ids": True,
            }
            status, r = call(url, "/v1/chat/completions", body)
    finally:
        engine.generator.close()
    assert status == 200, r
    prompt, ids = r["prompt_token_ids"], r["choices"][0]["token_ids"]
    ref = load(path)
    with torch.no_grad():
        out = ref.generate(
            torch.tensor([prompt]), max_new_tokens=len(ids), do_sample=False, eos_token_id=None, pad_token_id=0
        )
    assert out[0, len(prompt) :].tolist() == ids
    want = reference_logprobs(ref, prompt, ids)
    got = [e["logprob"] for e in r["choices"][0]["logprobs"]["content"]]
    assert max(abs(a - want[j, t].item()) for j, (t, a) in enumerate(zip(ids, got))) < 1e-4
