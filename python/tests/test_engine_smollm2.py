"""The engine on the real SmolLM2-135M-Instruct GGUF through the CLI's own build path: a chat
completion and a tool-call request come back in the right shape (the model's skill is not tested)."""

from __future__ import annotations

import json

import pytest
from test_engine_api import call

from train_agent.engine.cli import BackgroundServer, build_engine, parse_args

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.mark.slow
def test_smollm2_chat_and_tools(smollm2_gguf):
    args = parse_args(
        [
            "--model",
            str(smollm2_gguf),
            "--served-model-name",
            "smollm2",
            "--max-model-len",
            "1024",
            "--max-num-seqs",
            "4",
            "--seed",
            "0",
        ]
    )
    engine = build_engine(args)
    with BackgroundServer(engine) as url:
        status, r = call(
            url,
            "/v1/chat/completions",
            {
                "model": "smollm2",
                "messages": [{"role": "user", "content": "What is the capital of France?"}],
                "max_tokens": 24,
                "temperature": 0,
                "logprobs": True,
                "return_token_ids": True,
            },
        )
        assert status == 200, r
        c = r["choices"][0]
        assert isinstance(c["message"]["content"], str) and c["message"]["content"]
        assert len(c["logprobs"]["content"]) == len(c["token_ids"]) == r["usage"]["completion_tokens"]
        assert all(e["logprob"] <= 0 for e in c["logprobs"]["content"])

        status, r = call(
            url,
            "/v1/chat/completions",
            {
                "model": "smollm2",
                "tools": [WEATHER],
                "max_tokens": 48,
                "temperature": 0,
                "messages": [
                    {"role": "system", "content": "You call tools when they help."},
                    {"role": "user", "content": "What's the weather in Paris right now?"},
                ],
            },
        )
        assert status == 200, r
        c = r["choices"][0]
        assert c["finish_reason"] in ("stop", "length", "tool_calls")
        for call_ in c["message"]["tool_calls"]:
            assert call_["id"].startswith("call_") and isinstance(json.loads(call_["function"]["arguments"]), dict)
        assert (c["finish_reason"] == "tool_calls") == bool(c["message"]["tool_calls"]) or c[
            "finish_reason"
        ] == "length"
    engine.generator.close()
