"""Structured output (`response_format`, guided decoding with xgrammar) on the tiny random Llama over
real HTTP: whatever the random policy would write, the content parses and validates, for n > 1,
greedy and sampled, with a LoRA adapter, and logprobs stay the model's own."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from test_engine_api import assert_error, call, reference_logprobs
from test_engine_lora import make_adapter, peft_reference

from train_agent.engine.cli import BackgroundServer
from train_agent.engine.server import Engine
from train_agent.models import ModelSource, load_model, load_tokenizer

SCHEMA = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["correct", "wrong", "unsure"]},
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
        "passed": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 3},
    },
    "required": ["verdict", "score", "passed", "tags"],
    "additionalProperties": False,
}
FORMAT = {"type": "json_schema", "json_schema": {"name": "grade", "schema": SCHEMA, "strict": True}}


def validate(value) -> None:
    """SCHEMA's constraints, checked one by one."""
    assert isinstance(value, dict) and set(value) == set(SCHEMA["required"]), value
    assert value["verdict"] in ("correct", "wrong", "unsure")
    assert isinstance(value["score"], int) and not isinstance(value["score"], bool) and 0 <= value["score"] <= 10
    assert isinstance(value["passed"], bool)
    assert isinstance(value["tags"], list) and len(value["tags"]) <= 3 and set(value["tags"]) <= {"a", "b"}


@pytest.fixture(scope="module")
def served(tiny_model_dir, tmp_path_factory):
    src = ModelSource.parse(str(tiny_model_dir))
    model = load_model(src, "cpu", torch.float32)
    engine = Engine(
        model,
        load_tokenizer(src),
        served_model_name="tiny",
        max_model_len=512,
        max_num_seqs=8,
        enable_lora=True,
        max_loras=1,
        max_lora_rank=8,
    )
    adapter = make_adapter(tiny_model_dir, tmp_path_factory.mktemp("adapters") / "judge", 5)
    with BackgroundServer(engine) as url:
        status, text = call(url, "/v1/load_lora_adapter", {"lora_name": "judge", "lora_path": str(adapter)})
        assert status == 200, text
        yield url, model, tiny_model_dir, adapter
    engine.generator.close()


def ask(url: str, model: str = "tiny", **kw) -> dict:
    status, r = call(
        url,
        "/v1/chat/completions",
        {
            "model": model,
            "messages": [{"role": "user", "content": "Grade the answer 42."}],
            "max_tokens": 200,
            "logprobs": True,
            "return_token_ids": True,
            **kw,
        },
    )
    assert status == 200, r
    return r


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_schema_output_parses_and_validates(served, temperature):
    url, model, _, _ = served
    r = ask(url, response_format=FORMAT, n=3, temperature=temperature, seed=11)
    assert len(r["choices"]) == 3
    for c in r["choices"]:
        assert c["finish_reason"] == "stop", c  # the grammar ended it, not the token budget
        validate(json.loads(c["message"]["content"]))
        # the logprobs are the model's own distribution (vLLM's raw_logprobs), not the masked one
        ids = c["token_ids"]
        ref = reference_logprobs(model, r["prompt_token_ids"], ids)
        got = [e["logprob"] for e in c["logprobs"]["content"]]
        assert len(got) == len(ids) and max(abs(g - ref[j, t].item()) for j, (t, g) in enumerate(zip(ids, got))) < 1e-4
    if temperature == 0:
        assert len({c["message"]["content"] for c in r["choices"]}) == 1
    # without the grammar the same request writes something else: the mask did the work
    free = ask(url, n=1, temperature=temperature, seed=11, max_tokens=20)["choices"][0]["message"]["content"]
    with pytest.raises((ValueError, AssertionError)):
        validate(json.loads(free))


def test_json_object_and_adapter(served):
    url, _, base_dir, adapter = served
    r = ask(url, "judge", response_format={"type": "json_object"}, n=2, seed=3, temperature=0.7)
    for c in r["choices"]:
        if c["finish_reason"] == "stop":
            assert isinstance(json.loads(c["message"]["content"]), dict)
        else:  # a random policy may keep opening values until the budget; what it wrote is a JSON prefix
            assert c["message"]["content"].lstrip().startswith("{")
    r = ask(url, "judge", response_format=FORMAT, seed=4)
    c = r["choices"][0]
    validate(json.loads(c["message"]["content"]))
    ref = reference_logprobs(peft_reference(base_dir, adapter), r["prompt_token_ids"], c["token_ids"])
    got = [e["logprob"] for e in c["logprobs"]["content"]]
    assert max(abs(g - ref[j, t].item()) for j, (t, g) in enumerate(zip(c["token_ids"], got))) < 1e-4


def test_guided_and_free_requests_share_a_batch(served):
    url, _, _, _ = served
    with ThreadPoolExecutor(4) as pool:
        guided = [pool.submit(ask, url, response_format=FORMAT, seed=s) for s in range(2)]
        free = [pool.submit(ask, url, seed=s, max_tokens=30, ignore_eos=True) for s in range(2)]
        for f in guided:
            validate(json.loads(f.result()["choices"][0]["message"]["content"]))
        for f in free:
            assert len(f.result()["choices"][0]["token_ids"]) == 30


def test_bad_response_format_is_a_400(served):
    url, _, _, _ = served
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    status, r = call(
        url,
        "/v1/chat/completions",
        {
            **body,
            "response_format": {"type": "json_schema", "json_schema": {"name": "bad", "schema": {"type": "objekt"}}},
        },
    )
    assert_error(status, r, 400, "invalid JSON schema in response_format")
    assert r["error"]["param"] == "response_format" and "hint:" in r["error"]["message"]
    status, r = call(url, "/v1/chat/completions", {**body, "response_format": {"type": "yaml"}})
    assert_error(status, r, 400, "response_format type 'yaml' is not supported")
    status, r = call(url, "/v1/chat/completions", {**body, "response_format": {"type": "json_schema"}})
    assert_error(status, r, 400, "needs an object 'json_schema'")
    status, r = call(url, "/v1/chat/completions", {**body, "response_format": {"type": "text"}})
    assert status == 200, r


def schema_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "bad", "schema": schema}}


def beside_a_plain_request(url: str, bad: dict) -> tuple[tuple[int, dict], tuple[int, dict]]:
    """Sends a plain request of 400 tokens, then, once the engine has admitted it (its prefix cache
    counted the prompt) and while it decodes, `bad`; returns both answers."""
    plain = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 400, "ignore_eos": True}

    def admitted() -> float:
        return float(call(url, "/metrics")[1].split("vllm:prefix_cache_queries_total")[-1].split()[1])

    before = admitted()
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(call, url, "/v1/chat/completions", {**plain, "return_token_ids": True})
        while admitted() == before:
            time.sleep(0.005)
        second = pool.submit(call, url, "/v1/chat/completions", bad)
        return first.result(), second.result()


def test_a_schema_that_is_only_a_ref_to_itself_is_a_400_and_its_neighbour_is_served(served):
    """Issue 29: a recursive $ref sent while a plain request ran failed both with 500 "grammar
    rejected token". xgrammar compiles such a schema into a grammar that allows no first token: it
    is refused at admission, before it reaches the scheduler."""
    url, _, _, _ = served
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20}
    for schema in (
        {"$ref": "#"},
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
    ):
        (s1, plain), (s2, bad) = beside_a_plain_request(url, {**body, "response_format": schema_format(schema)})
        assert s1 == 200 and len(plain["choices"][0]["token_ids"]) == 400, plain
        assert_error(s2, bad, 400, "JSON schema admits no value", "hint:")
        assert bad["error"]["param"] == "response_format"


def test_a_grammar_that_dead_ends_mid_answer_fails_only_its_own_request(served):
    """A schema whose property is a $ref to itself passes admission (its grammar allows `{"a": `)
    and then allows no token: the scheduler fails that request alone (400, both of its n rows),
    frees its rows, and the request decoding beside it finishes."""
    url, _, _, _ = served
    dead_end = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/x"}},
        "required": ["a"],
        "$defs": {"x": {"$ref": "#/$defs/x"}},
    }
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20, "n": 2}
    (s1, plain), (s2, bad) = beside_a_plain_request(url, {**body, "response_format": schema_format(dead_end)})
    assert s1 == 200 and len(plain["choices"][0]["token_ids"]) == 400, plain
    assert_error(s2, bad, 400, "the grammar allowed no token at completion token", "finite JSON value")
    # its rows were freed: a request for every slot of the engine runs
    r = ask(url, n=8, max_tokens=4, ignore_eos=True)
    assert [len(c["token_ids"]) for c in r["choices"]] == [4] * 8
