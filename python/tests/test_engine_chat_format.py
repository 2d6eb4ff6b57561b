"""Prompt rendering and tool-call parsing (no model needed beyond the tokenizer)."""

import json

import pytest
from tiny_model import WEATHER

from train_agent.chat_format import (
    RequestError,
    hermes_messages,
    normalize_messages,
    parse_output,
    render_prompt,
    template_supports_tools,
    validate_tools,
)


def test_hermes_block_becomes_a_tool_call():
    out = parse_output(
        'I will check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    )
    assert out.content == "I will check."
    [call] = out.tool_calls
    assert call["id"].startswith("call_") and call["type"] == "function"
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}


def test_several_hermes_blocks_and_unterminated_last():
    text = (
        '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call>\n'
        '<tool_call>{"name": "c", "arguments": {"y": [1, 2]}}'
    )
    out = parse_output(text)
    assert [c["function"]["name"] for c in out.tool_calls] == ["a", "b", "c"]
    assert out.content is None
    assert len({c["id"] for c in out.tool_calls}) == 3


def test_bare_json_call_and_list():
    out = parse_output('{"name": "get_weather", "arguments": {"city": "Oslo"}}')
    assert out.tool_calls[0]["function"]["name"] == "get_weather" and out.content is None
    out = parse_output('[{"name": "a", "arguments": {}}, {"name": "b", "parameters": {"q": "x"}}]')
    assert [c["function"]["name"] for c in out.tool_calls] == ["a", "b"]
    assert json.loads(out.tool_calls[1]["function"]["arguments"]) == {"q": "x"}


def test_fenced_json_call_keeps_the_prose():
    text = 'Let me look that up.\n```json\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Rome\\"}"}\n```\n'
    out = parse_output(text)
    assert out.content == "Let me look that up."
    assert json.loads(out.tool_calls[0]["function"]["arguments"]) == {"city": "Rome"}


def test_bare_call_after_prose():
    out = parse_output('Sure: {"name": "get_weather", "arguments": {"city": "Lima"}} done')
    assert out.tool_calls[0]["function"]["name"] == "get_weather"
    assert out.content == "Sure:  done"


def test_malformed_json_stays_content():
    for text in [
        '<tool_call>{"name": "a", "arguments": {</tool_call>',
        '```json\n{"not": "a call"}\n```',
        '{"name": "x", "arguments": 3}',
        "plain words",
    ]:
        out = parse_output(text)
        assert out.tool_calls == [] and out.content == text.strip()


def test_think_blocks_go_to_reasoning():
    out = parse_output('<think>need weather</think>\n<tool_call>{"name": "a", "arguments": {}}</tool_call>')
    assert out.reasoning_content == "need weather" and out.tool_calls and out.content is None
    out = parse_output("thinking opened by the template</think>The answer is 4.")
    assert out.reasoning_content == "thinking opened by the template" and out.content == "The answer is 4."


def test_no_parsing_without_tools():
    out = parse_output('<tool_call>{"name": "a", "arguments": {}}</tool_call>', parse_tools=False)
    assert out.tool_calls == [] and "<tool_call>" in out.content


def test_validate_tools_rejects_bad_shapes():
    assert validate_tools([WEATHER]) == [WEATHER]
    for bad in [
        {"a": 1},
        [{"type": "function"}],
        [{"type": "function", "function": {"name": ""}}],
        [{"type": "function", "function": {"name": "f", "parameters": "x"}}],
        ["f"],
    ]:
        with pytest.raises(RequestError) as e:
            validate_tools(bad)
        assert e.value.param == "tools"


def test_hermes_rendering_for_a_template_without_tools(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert not template_supports_tools(tok)
    messages = normalize_messages(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_2", "content": "22C"},
        ]
    )
    rewritten = hermes_messages(messages, [WEATHER])
    assert [m["role"] for m in rewritten] == ["system", "user", "assistant", "user"]
    assert rewritten[0]["content"].startswith("Be brief.\n\n# Tools")
    assert '<tools>\n{"type": "function", "function": {"name": "get_weather"' in rewritten[0]["content"]
    assert "<tool_call></tool_call> XML tags" in rewritten[0]["content"]
    assert (
        rewritten[2]["content"] == '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    )
    assert rewritten[3]["content"].count("<tool_response>") == 2
    text = render_prompt(tok, messages, [WEATHER])
    assert "<tools>" in text and text.rstrip().endswith("<|im_start|>assistant")
    assert "<tools>" not in render_prompt(tok, messages, None)


def test_normalize_rejects_bad_messages():
    for bad in [
        [],
        "hi",
        [{"role": "wizard", "content": "x"}],
        [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}],
    ]:
        with pytest.raises(RequestError):
            normalize_messages(bad)
