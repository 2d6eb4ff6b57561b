"""Automatic prefix caching on the tiny random Llama (CPU): the same tokens and logprobs with the
cache as without it (and as a plain Hugging Face forward), reuse across the turns of conversations
and across the rollouts of a group, eviction when slots run out, and no reuse of KV computed under
an adapter's earlier weights."""

from __future__ import annotations

import time

import torch
from test_engine_api import call, reference_logprobs
from test_engine_lora import make_adapter, peft_reference

from train_agent.engine.cli import BackgroundServer, parse_args, prefix_caching_on
from train_agent.engine.decoder import Decoder
from train_agent.engine.prefix_cache import BLOCK_SIZE, PrefixCache, block_hashes
from train_agent.engine.requests import SamplingParams
from train_agent.engine.scheduler import Generator
from train_agent.engine.server import Engine
from train_agent.models import ModelSource, load_model, load_tokenizer


def generator(model_dir, caching: bool, slots: int = 8, lora: bool = False, overlap: bool = False) -> Generator:
    model = load_model(ModelSource.parse(str(model_dir)), "cpu", torch.float32)
    dec = Decoder(model, num_slots=slots, max_len=512, enable_lora=lora, max_loras=1, max_lora_rank=8)
    return Generator(dec, eos_ids=set(), prefix_caching=caching, overlap=overlap)


def tokens(seed: int, n: int) -> list[int]:
    return torch.randint(100, 30000, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def conversations(
    gen: Generator, turns: int = 3, lengths: tuple[int, ...] = (12,) * 4
) -> list[tuple[list[int], list[int], list[float]]]:
    """Four conversations of a "group": one 70-token system prompt, two tasks (two rollouts each),
    every turn re-sending the whole conversation plus a 9-token "tool result", and sampling
    `lengths` tokens. Greedy and seeded sampling alternate. Returns (prompt, tokens, logprobs) of
    every turn of every conversation."""
    system = tokens(0, 70)
    convs = [system + tokens(1 + i // 2, 20) for i in range(4)]
    out = []
    for turn in range(turns):
        params = [
            SamplingParams(max_tokens=lengths[i], temperature=0.0 if (i + turn) % 2 else 1.0, seed=100 * turn + i)
            for i in range(4)
        ]
        futs = [gen.submit(c, 1, p) for c, p in zip(convs, params)]  # arrive together, as a group does
        for i, f in enumerate(futs):
            c = f.result().completions[0]
            out.append((convs[i], c.token_ids, c.logprobs))
            convs[i] = convs[i] + c.token_ids + tokens(50 + 10 * turn + i, 9)
    return out


def assert_same_turns(got, expected, atol: float = 1e-4) -> None:
    """`conversations` twice: the same tokens in every turn, and logprobs within `atol`."""
    assert [t for _, t, _ in got] == [t for _, t, _ in expected]
    for (_, _, a), (_, _, b) in zip(got, expected):
        assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=atol)


def test_same_tokens_and_logprobs_with_and_without_the_cache_and_reuse_across_turns(tiny_model_dir):
    cold, warm = generator(tiny_model_dir, False), generator(tiny_model_dir, True)
    try:
        expected, got = conversations(cold), conversations(warm)
    finally:
        cold.close()
        warm.close()
    assert_same_turns(got, expected)
    # and against the model itself, for the last turn (its prompt is most of it reused KV)
    model = load_model(ModelSource.parse(str(tiny_model_dir)), "cpu", torch.float32)
    prompt, toks, lps = got[-1]
    ref = reference_logprobs(model, prompt, toks)[torch.arange(len(toks)), toks]
    assert torch.allclose(torch.tensor(lps), ref, atol=1e-4)
    assert cold.cache is None
    # turn 1: the second rollout of a task reuses the first's prompt, the other task the system
    # prompt; turns 2 and 3: each conversation's previous turn (all but the last, unfed token)
    # (the 9-token tool result and the last sampled token, never fed back, are new)
    c = warm.cache
    first_turn = [0, 89, 70, 89]
    assert c.queries == sum(len(p) for p, _, _ in got)
    assert c.hits == sum(first_turn) + sum(len(p) - 9 - 1 for p, _, _ in got[4:])
    # the scheduler's counts: every prompt token computed without the cache, only the misses with it
    assert cold.stats.prefill_tokens == c.queries and warm.stats.prefill_tokens == c.queries - c.hits
    for st in (cold.stats, warm.stats):
        assert st.decode_steps >= 11 and st.windows >= 1 and 0 < st.prefill_s <= st.admit_s
        assert st.prefill_tokens <= st.prefill_padded and 1 <= st.prefills <= 12


def test_windows_launched_ahead_change_no_token_and_no_reuse(tiny_model_dir):
    """The scheduler launching each decode window before reading the previous one (its default
    with CUDA graphs), here on the CPU: rows that finish inside a window run one more, writing past
    the tokens their slot keeps for the next turn. The same tokens, logprobs and cache hits as
    window by window."""
    plain, ahead = generator(tiny_model_dir, True), generator(tiny_model_dir, True, overlap=True)
    lengths = (12, 4, 9, 2)  # rows finish in different windows
    try:
        expected, got = conversations(plain, lengths=lengths), conversations(ahead, lengths=lengths)
    finally:
        plain.close()
        ahead.close()
    assert_same_turns(got, expected)
    assert ahead.cache.hits == plain.cache.hits and ahead.cache.queries == plain.cache.queries
    assert ahead.stats.windows_ahead >= 3 * (12 - 2 - 1) and plain.stats.windows_ahead == 0


def test_eviction_when_slots_run_out_keeps_outputs_exact(tiny_model_dir):
    """Two slots: a third conversation takes the lowest free slot, evicting what it held."""
    gen, ref = generator(tiny_model_dir, True, slots=2), generator(tiny_model_dir, False, slots=2)
    a, b, c = tokens(10, 60), tokens(11, 60), tokens(12, 60)
    greedy = SamplingParams(max_tokens=8, temperature=0.0)
    try:
        futs = [gen.submit(p, 1, greedy) for p in (a, b)]  # a in slot 0, b in slot 1
        [f.result() for f in futs]
        gen.submit(c, 1, greedy).result()  # evicts a (slot 0)
        before = gen.cache.hits
        again_a = gen.submit(a, 1, greedy).result().completions[0].token_ids  # a miss: takes slot 0 again
        assert gen.cache.hits == before
        again_b = gen.submit(b, 1, greedy).result().completions[0].token_ids  # still cached in slot 1
        assert gen.cache.hits == before + len(b) - 1
        for p, got in ((a, again_a), (b, again_b)):
            assert got == ref.submit(p, 1, greedy).result().completions[0].token_ids
    finally:
        gen.close()
        ref.close()


def test_a_reloaded_adapter_never_reuses_kv_of_its_earlier_weights(tiny_model_dir, tmp_path):
    """Loading a name again writes the new weights into a bank slot that may have held an earlier
    adapter (here: the same slot, after a swap back). KV cached under the old weights must not
    match, or the new adapter's outputs would be computed on stale keys and values."""
    gen = generator(tiny_model_dir, True, lora=True)
    paths = [make_adapter(tiny_model_dir, tmp_path / n, s) for n, s in (("a", 1), ("b", 2), ("c", 3))]
    prompt = tokens(20, 50)
    params = SamplingParams(max_tokens=8, temperature=1.0, seed=4)
    try:
        outs = []
        # a -> bank slot 0, b -> 1, c -> 0 again. a's 4 samples fill KV slots 0-3 and b's one sample
        # reuses slot 0, so slots 1-3 still hold the prompt's KV under a's weights when c comes
        for path, n in zip(paths, (4, 1, 4)):
            gen.load_adapter("ad", str(path)).result()
            before = gen.cache.hits
            outs.append(gen.submit(prompt, n, params, adapter="ad").result().completions[0])
            assert gen.cache.hits == before  # nothing from the base model or an earlier adapter
            again = gen.submit(prompt, 1, params, adapter="ad").result().completions[0]
            assert gen.cache.hits == before + len(prompt) - 1  # but its own KV, yes
            assert again.token_ids == outs[-1].token_ids
        assert [gen.adapters["ad"][0]] == [0]
    finally:
        gen.close()
    for path, out in zip(paths, outs):
        ref = reference_logprobs(peft_reference(tiny_model_dir, path), prompt, out.token_ids)
        assert torch.allclose(
            torch.tensor(out.logprobs), ref[torch.arange(len(out.token_ids)), out.token_ids], atol=1e-4
        )


def test_n_samples_and_requests_sharing_a_prompt_in_one_admission(tiny_model_dir):
    gen, ref = generator(tiny_model_dir, True), generator(tiny_model_dir, False)
    prompt = tokens(30, 45)
    params = [SamplingParams(max_tokens=6, seed=s) for s in range(3)]
    try:
        got = [gen.submit(prompt, 2, p) for p in params]
        want = [ref.submit(prompt, 2, p) for p in params]
        for g, w in zip(got, want):
            assert [c.token_ids for c in g.result().completions] == [c.token_ids for c in w.result().completions]
    finally:
        gen.close()
        ref.close()
    assert gen.cache.hits == 2 * (len(prompt) - 1)  # the second and third request


def test_block_hashes_chain_over_the_prefix_and_the_adapter_key():
    t = list(range(40))
    h = block_hashes(t, 0)
    assert len(h) == 40 // BLOCK_SIZE
    assert block_hashes(t[:32] + [7] * 8, 0)[:2] == h[:2]  # a change after block 2 leaves blocks 1-2
    assert block_hashes([99] + t[1:], 0)[1] != h[1]  # a change in block 1 renames every later block
    assert block_hashes(t, 1)[0] != h[0]  # another adapter install: nothing in common
    assert block_hashes(t + list(range(30)), 0, prior=h) == block_hashes(t + list(range(30)), 0)
    cache = PrefixCache(3)
    cache.hold(0, t, h)
    cache.hold(1, t[:20], h[:1])
    assert cache.longest(block_hashes(t[:20], 0)) == (1, {0, 1})
    assert cache.longest(h) == (2, {0})
    assert cache.reusable(1, t, 1) == 20 and cache.reusable(0, t[:35] + [0, 0], 2) == 35
    cache.keep(0, 20)
    assert cache.longest(h) == (1, {0, 1}) and h[1] not in cache.where and cache.tokens[0] == t[:20]


def test_metrics_route_and_the_flags(tiny_model_dir, monkeypatch):
    src = ModelSource.parse(str(tiny_model_dir))
    engine = Engine(
        load_model(src, "cpu", torch.float32),
        load_tokenizer(src),
        served_model_name="tiny",
        max_model_len=256,
        max_num_seqs=2,
    )
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Tell me a long story about a cat " * 4}],
        "max_tokens": 4,
    }
    try:
        with BackgroundServer(engine) as url:
            call(url, "/v1/chat/completions", body)
            call(url, "/v1/chat/completions", body)
            status, text = call(url, "/metrics")
    finally:
        engine.generator.close()
    assert status == 200
    metrics = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    queries = int(metrics['vllm:prefix_cache_queries_total{model_name="tiny"}'])
    hits = int(metrics['vllm:prefix_cache_hits_total{model_name="tiny"}'])
    assert queries > 60 and hits == queries // 2 - 1
    # the KV cache's size as vLLM writes it: two slots of the whole context (256 tokens and the
    # decoder's 8-token lookahead), 16 tokens a block; `train-agent` reads 2 sequences of 256 from it
    assert metrics['vllm:cache_config_info{block_size="16",num_gpu_blocks="33"}'] == "1.0"

    def on(*flags: str) -> bool:
        return prefix_caching_on(parse_args(["--model", "m", *flags]).enable_prefix_caching)

    monkeypatch.delenv("TRAIN_AGENT_PREFIX_CACHING", raising=False)
    assert on() and on("--enable-prefix-caching"), "on by default"
    assert not on("--no-prefix-caching") and not on("--no-enable-prefix-caching")
    monkeypatch.setenv("TRAIN_AGENT_PREFIX_CACHING", "0")
    assert not on() and on("--enable-prefix-caching")
    monkeypatch.setenv("TRAIN_AGENT_PREFIX_CACHING", "1")
    assert on() and not on("--no-prefix-caching")


def test_the_stats_are_logged_once_when_the_work_ends(tiny_model_dir, caplog):
    """A handful of requests (far from the 256 admissions between two periodic lines) still leave
    the prefix cache's and the scheduler's counters in the log once the engine has nothing left
    to do, once per busy spell, not on every idle wake-up."""
    gen = generator(tiny_model_dir, caching=True)
    caplog.set_level("INFO", logger="train_agent.engine")

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.getMessage().startswith("scheduler:")]

    def wait_for(n: int) -> None:
        deadline = time.monotonic() + 10
        while len(lines()) < n and time.monotonic() < deadline:
            time.sleep(0.02)

    try:
        for f in [gen.submit(tokens(i, 30), 1, SamplingParams(max_tokens=3, temperature=0.0)) for i in range(3)]:
            f.result()
        wait_for(1)
        assert len(lines()) == 1 and "prefills of" in lines()[0], lines()
        assert any(r.getMessage().startswith("prefix cache:") for r in caplog.records)
        gen._command(lambda: None).result()  # wakes the scheduler with no request: no new line
        time.sleep(0.2)
        assert len(lines()) == 1, lines()
        gen.submit(tokens(9, 30), 1, SamplingParams(max_tokens=3, temperature=0.0)).result()
        wait_for(2)
        assert len(lines()) == 2, lines()
    finally:
        gen.close()
