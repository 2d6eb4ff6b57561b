"""The OpenAI-compatible API on the tiny random Llama, over real HTTP, with the engine's outputs
checked against a plain Hugging Face forward pass of the same weights."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from tiny_model import WEATHER

from train_agent.engine.cli import BackgroundServer, resolve_api_keys
from train_agent.engine.server import Engine
from train_agent.models import ModelSource, load_model, load_tokenizer


def call(url: str, path: str, body: dict | None = None, raw: bytes | None = None) -> tuple[int, dict | str]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    src = ModelSource.parse(str(tiny_model_dir))
    tok = load_tokenizer(src)
    model = load_model(src, "cpu", torch.float32)
    engine = Engine(model, tok, served_model_name="tiny", max_model_len=256, max_num_seqs=8)
    with BackgroundServer(engine) as url:
        yield url, model, tok
    engine.generator.close()


def chat(url: str, content: str = "Hello there", **kw) -> tuple[int, dict]:
    return call(
        url, "/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": content}], **kw}
    )


def reference_logprobs(model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    with torch.no_grad():
        lp = model(torch.tensor([prompt + completion])).logits.float().log_softmax(-1)[0]
    return lp[len(prompt) - 1 : len(prompt) - 1 + len(completion)]


def test_response_shape_usage_and_token_ids(tiny):
    url, _, tok = tiny
    status, r = chat(url, max_tokens=8, return_token_ids=True, seed=1)
    assert status == 200, r
    assert r["id"].startswith("chatcmpl-") and r["object"] == "chat.completion" and r["model"] == "tiny"
    [c] = r["choices"]
    assert c["index"] == 0 and c["message"]["role"] == "assistant" and c["finish_reason"] in ("stop", "length")
    assert c["message"]["tool_calls"] == [] and c["logprobs"] is None
    expected_prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Hello there"}], tokenize=False, add_generation_prompt=True
    )
    assert r["prompt_token_ids"] == tok(expected_prompt, add_special_tokens=False)["input_ids"]
    u = r["usage"]
    assert u["prompt_tokens"] == len(r["prompt_token_ids"]) and u["completion_tokens"] == len(c["token_ids"])
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    status, r = chat(url, max_tokens=4)
    assert r["prompt_token_ids"] is None and "token_ids" not in r["choices"][0]


def test_logprobs_match_a_forward_pass(tiny):
    url, model, tok = tiny
    status, r = chat(url, max_tokens=12, seed=7, logprobs=True, top_logprobs=3, return_token_ids=True)
    assert status == 200, r
    c = r["choices"][0]
    ref = reference_logprobs(model, r["prompt_token_ids"], c["token_ids"])
    content = c["logprobs"]["content"]
    assert len(content) == len(c["token_ids"])
    for j, (tid, entry) in enumerate(zip(c["token_ids"], content)):
        assert abs(entry["logprob"] - ref[j, tid].item()) < 1e-4
        assert entry["token"] == tok.decode([tid]) and entry["bytes"] == list(entry["token"].encode())
        tops = entry["top_logprobs"]
        assert len(tops) == 3 and tops[0]["logprob"] >= tops[1]["logprob"] >= tops[2]["logprob"]
        assert abs(tops[0]["logprob"] - ref[j].max().item()) < 1e-4


def test_temperature_zero_is_greedy_and_deterministic(tiny):
    url, model, _ = tiny
    outs = [chat(url, max_tokens=10, temperature=0, return_token_ids=True)[1] for _ in range(2)]
    ids = outs[0]["choices"][0]["token_ids"]
    assert ids == outs[1]["choices"][0]["token_ids"]
    ref = reference_logprobs(model, outs[0]["prompt_token_ids"], ids)
    assert ids == ref.argmax(-1).tolist()


def test_seed_reproducible_and_n_samples(tiny):
    url, _, _ = tiny
    a = chat(url, max_tokens=10, seed=123, n=3, return_token_ids=True)[1]
    b = chat(url, max_tokens=10, seed=123, n=3, return_token_ids=True)[1]
    c = chat(url, max_tokens=10, seed=124, n=3, return_token_ids=True)[1]
    ids = lambda r: [ch["token_ids"] for ch in r["choices"]]  # noqa: E731
    assert [ch["index"] for ch in a["choices"]] == [0, 1, 2]
    assert ids(a) == ids(b) and ids(a) != ids(c)
    assert len({tuple(x) for x in ids(a)}) == 3  # the n samples differ from each other
    assert a["usage"]["completion_tokens"] == sum(len(x) for x in ids(a))


def test_stop_strings_and_length(tiny):
    url, _, _ = tiny
    r = chat(url, max_tokens=20, seed=5, ignore_eos=True)[1]
    text, c = r["choices"][0]["message"]["content"], r["choices"][0]
    assert c["finish_reason"] == "length" and r["usage"]["completion_tokens"] == 20
    stop = text[len(text) // 2 : len(text) // 2 + 3]
    assert stop.strip()
    r = chat(url, max_tokens=20, seed=5, stop=[stop, "zzzqqq"])[1]
    c = r["choices"][0]
    assert c["finish_reason"] == "stop"
    assert c["message"]["content"] == text[: text.find(stop)].strip()
    assert stop not in c["message"]["content"]
    assert r["usage"]["completion_tokens"] < 20


def test_concurrent_requests_match_their_solo_outputs(tiny):
    url, _, _ = tiny
    prompts = ["one", "two two", "three three three", "a longer prompt about four things"]
    solo = [
        chat(url, p, max_tokens=12, temperature=0, return_token_ids=True)[1]["choices"][0]["token_ids"] for p in prompts
    ]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda p: chat(url, p, max_tokens=12, temperature=0, return_token_ids=True), prompts))
    assert [r["choices"][0]["token_ids"] for _, r in together] == solo


def test_tools_in_prompt_and_tool_choice_none(tiny):
    url, _, _ = tiny
    plain = chat(url, max_tokens=2, return_token_ids=True)[1]
    with_tools = chat(url, max_tokens=2, return_token_ids=True, tools=[WEATHER])[1]
    none = chat(url, max_tokens=2, return_token_ids=True, tools=[WEATHER], tool_choice="none")[1]
    named = chat(
        url, max_tokens=2, tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_weather"}}
    )
    assert len(with_tools["prompt_token_ids"]) > len(plain["prompt_token_ids"])
    assert none["prompt_token_ids"] == plain["prompt_token_ids"]
    assert named[0] == 200
    # a conversation with an earlier call and its result renders and runs
    status, r = call(
        url,
        "/v1/chat/completions",
        {
            "model": "tiny",
            "max_tokens": 2,
            "tools": [WEATHER],
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            ],
        },
    )
    assert status == 200, r


def assert_error(status: int, body, expected_status: int, *needles: str):
    assert status == expected_status, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == expected_status
    for n in needles:
        assert n in err["message"], err["message"]
    return err


def test_errors(tiny):
    url, _, _ = tiny
    s, b = call(url, "/v1/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "x"}]})
    assert assert_error(s, b, 404, "nope", "Available models: tiny")["type"] == "NotFoundError"
    s, b = chat(url, "word " * 400)
    assert_error(s, b, 400, "maximum context length is 256 tokens", "input tokens")
    s, b = chat(url, max_tokens=250)
    assert_error(s, b, 400, "'max_tokens' or 'max_completion_tokens' is too large: 250", "256")
    assert assert_error(*chat(url, n=0), 400, "'n'")["param"] == "n"
    assert_error(*chat(url, n=99), 400, "sequence slots")
    assert assert_error(*chat(url, temperature=-1), 400, "temperature")["param"] == "temperature"
    assert_error(*chat(url, temperature="hot"), 400, "temperature")
    assert_error(*chat(url, top_p=0), 400, "top_p")
    assert_error(*chat(url, tools=[{"type": "function"}]), 400, "tools[0]")
    assert_error(*chat(url, tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "x"}}), 400, "'x'")
    assert_error(*call(url, "/v1/chat/completions", raw=b"{not json"), 400, "not valid JSON")
    assert_error(*call(url, "/v1/chat/completions", {"model": "tiny"}), 400, "messages")


def test_models_and_health(tiny):
    url, _, _ = tiny
    status, body = call(url, "/health")
    assert status == 200
    status, body = call(url, "/v1/models")
    assert status == 200 and body["object"] == "list"
    [card] = body["data"]
    assert card["id"] == "tiny" and card["parent"] is None and card["max_model_len"] == 256
    assert card["object"] == "model"
    s, b = call(url, "/v1/load_lora_adapter", {"lora_name": "a", "lora_path": "/nonexistent"})
    assert_error(s, b, 400, "--enable-lora")


def test_more_concurrent_requests_than_sequence_slots_queue_instead_of_failing(tiny_model_dir):
    """Regression: admission counted free slots once per scheduler pass, so six requests arriving
    together on a 2-slot engine crashed the scheduler (IndexError on the free-slot heap)."""
    src = ModelSource.parse(str(tiny_model_dir))
    model = load_model(src, "cpu", torch.float32)
    engine = Engine(model, load_tokenizer(src), served_model_name="tiny", max_model_len=256, max_num_seqs=2)
    prompts = [f"prompt number {i}" for i in range(6)]
    try:
        with BackgroundServer(engine) as url:
            with ThreadPoolExecutor(6) as pool:
                results = list(pool.map(lambda p: chat(url, p, max_tokens=6, temperature=0, n=1), prompts))
            status, r = chat(url, "after the rush", max_tokens=6, n=2)
    finally:
        engine.generator.close()
    assert [s for s, _ in results] == [200] * 6, results
    assert status == 200 and len(r["choices"]) == 2


def test_the_cpu_kv_budget_is_a_quarter_of_the_available_memory(tiny_model_dir):
    from train_agent.engine.decoder import kv_bytes_per_token
    from train_agent.engine.startup import available_memory, plan_slots

    with open("/proc/meminfo") as f:
        total = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    config = load_model(ModelSource.parse(str(tiny_model_dir)), "cpu", torch.float32).config
    per_slot = kv_bytes_per_token(config, torch.float32) * (4096 + 8)
    # plan_slots reads the available memory itself, and on a busy machine it moves between reads:
    # the two readings around it bound the one it used.
    before = available_memory()
    slots = plan_slots(config, torch.float32, torch.device("cpu"), 4096, 10**6, 8, 0.9, None)
    after = available_memory()
    low, high = min(before, after), max(before, after)
    assert 0 < low <= high <= total
    assert slots * per_slot <= max(2 << 30, high // 4)
    assert max(2 << 30, low // 4) < (slots + 1) * per_slot * 1.01
    assert plan_slots(config, torch.float32, torch.device("cpu"), 4096, 10**6, 8, 0.9, per_slot * 3) == 3


def send(url: str, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, dict | str]:
    """One request with exactly these headers (urllib adds a Content-Type to every POST, and a Host
    header of its own): what a browser or another process could send."""
    conn = http.client.HTTPConnection(url.removeprefix("http://"), timeout=120)
    try:
        conn.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
        for k, v in {**headers, "Content-Length": str(len(body or b""))}.items():
            conn.putheader(k, v)
        conn.endheaders(body)
        r = conn.getresponse()
        status, text = r.status, r.read().decode()
    finally:
        conn.close()
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


def test_a_web_page_cannot_drive_the_engine(tiny):
    """Issue 29: a POST with `Content-Type: text/plain` (which a page may send anywhere without a
    CORS preflight) unloaded adapters, and a page whose name resolved to 127.0.0.1 (DNS rebinding)
    could do anything: the Host header was not checked."""
    url, _, _ = tiny
    port = url.rsplit(":", 1)[1]
    unload = json.dumps({"lora_name": "x"}).encode()
    evil = {"Origin": "http://evil.example"}
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=b", None):
        headers = {**evil, **({"Content-Type": ctype} if ctype else {})}
        s, b = send(url, "POST", "/v1/unload_lora_adapter", unload, headers)
        assert_error(s, b, 415, "Content-Type must be application/json", repr(ctype or "none"))
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode()
    s, b = send(url, "POST", "/v1/chat/completions", body, {"Content-Type": "Application/JSON; charset=utf-8"})
    assert s == 200, b
    s, b = send(url, "POST", "/v1/unload_lora_adapter", unload, {"Content-Type": "application/json"})
    assert_error(s, b, 404, "'x' cannot be found")  # read and acted on, unlike the bodies above

    json_headers = {"Content-Type": "application/json"}
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.2", f"[::2]:{port}", "", "a b"):
        for method, path, data in (("POST", "/v1/chat/completions", body), ("GET", "/v1/models", None)):
            s, b = send(url, method, path, data, {**json_headers, "Host": host})
            assert_error(s, b, 421, f"Host {host!r} does not name this server", "127.0.0.1")
        s, b = send(url, "GET", "/health", None, {"Host": host})
        assert s == 421, b
    # any port: a tunnel or port forward (ssh -L 9000:127.0.0.1:PORT) arrives with its own
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}", "127.0.0.1:9000"):
        s, b = send(url, "POST", "/v1/chat/completions", body, {**json_headers, "Host": host})
        assert s == 200, (host, b)


def test_an_api_key_guards_every_v1_route(tiny_model_dir, monkeypatch):
    """As `vllm serve --api-key` (or VLLM_API_KEY): /v1 routes need `Authorization: Bearer KEY`
    and answer 401 with an OpenAI error object otherwise; /health stays open."""
    monkeypatch.setenv("VLLM_API_KEY", "env-key")
    assert resolve_api_keys(None) == ["env-key"] and resolve_api_keys(["a", "b"]) == ["a", "b"]
    monkeypatch.setenv("VLLM_API_KEY", "")
    assert resolve_api_keys(None) == []
    src = ModelSource.parse(str(tiny_model_dir))
    engine = Engine(
        load_model(src, "cpu", torch.float32), load_tokenizer(src), served_model_name="tiny", max_num_seqs=2
    )
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode()
    json_headers = {"Content-Type": "application/json"}
    try:
        with BackgroundServer(engine, api_keys=["k-one", "k-two"]) as url:
            for auth in (None, "Bearer", "Bearer k-three", "Basic k-one", "k-one", "Bearer  k-one"):
                headers = {**json_headers, **({"Authorization": auth} if auth else {})}
                s, b = send(url, "POST", "/v1/chat/completions", body, headers)
                assert assert_error(s, b, 401, "Unauthorized", "Bearer")["type"] == "AuthenticationError"
                assert "k-one" not in b["error"]["message"]
                s, b = send(url, "GET", "/v1/models", None, headers)
                assert s == 401, b
            assert send(url, "GET", "/health", None, {})[0] == 200
            for key in ("k-one", "k-two"):
                headers = {**json_headers, "Authorization": f"bearer {key}"}
                s, b = send(url, "POST", "/v1/chat/completions", body, headers)
                assert s == 200, b
                assert send(url, "GET", "/v1/models", None, headers)[0] == 200
    finally:
        engine.generator.close()
