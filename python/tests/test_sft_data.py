"""SFT loss masks on real chat templates: SmolLM2 (no tools in its template: the engine's Hermes
fallback) and Qwen2.5 (tools in the template). Only the assistant replies are trained, tool calls
included; system, user and tool-result tokens are not; and the prompt tokens before each reply are
exactly what the engine would send the model at that turn."""

from __future__ import annotations

import copy
import json

import pytest

from train_agent.chat_format import normalize_messages, render_prompt, template_supports_tools
from train_agent.models import ModelSource, load_tokenizer
from train_agent.trainer.sft_data import (
    TemplateError,
    read_dataset,
    tokenize_conversation,
    tokenize_dataset,
    write_parquet,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "list_tables",
            "description": "List the tables.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_query",
            "description": "Run one SELECT.",
            "parameters": {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "complete_task",
            "description": "Finish with the answer.",
            "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]},
        },
    },
]
TOOL_RESULTS = ["Tables in the company database:\n- departments (9 rows): teams", "count(*)\n9\n(1 row)"]
CONVERSATION = [
    {"role": "system", "content": "You answer questions about the company database."},
    {"role": "user", "content": "How many departments does the company have?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "list_tables", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c0", "name": "list_tables", "content": TOOL_RESULTS[0]},
    {
        "role": "assistant",
        "content": "Counting them.",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "run_query", "arguments": '{"sql": "SELECT count(*) FROM departments"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "name": "run_query", "content": TOOL_RESULTS[1]},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "complete_task", "arguments": '{"summary": "9"}'}}
        ],
    },
]


@pytest.fixture(scope="module", params=["smollm2", "qwen2.5"])
def tokenizer(request):
    if request.param == "smollm2":
        tok = load_tokenizer(ModelSource.parse(str(request.getfixturevalue("tiny_model_dir"))))
        assert not template_supports_tools(tok), "SmolLM2's template has no tools: the Hermes fallback is tested"
    else:
        tok = load_tokenizer(ModelSource.parse(str(request.getfixturevalue("qwen_tokenizer_dir"))))
        assert template_supports_tools(tok), "Qwen2.5's template renders tools itself"
    return tok


def trained_spans(ids, mask):
    """(start, end) token ranges where the mask is 1."""
    spans, start = [], None
    for i, m in enumerate(mask + [0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    return spans


def test_only_assistant_replies_are_trained_tool_calls_included(tokenizer):
    ids, mask = tokenize_conversation(tokenizer, CONVERSATION, TOOLS)
    spans = trained_spans(ids, mask)
    replies = [tokenizer.decode(ids[a:b]) for a, b in spans]
    assert len(replies) == 3, replies
    eos = "<|im_end|>"  # both templates end a turn with it; the model must write it to stop
    for reply in replies:
        assert reply.endswith(eos) and reply.count(eos) == 1, reply
        assert reply.count("<tool_call>") == 1 and "</tool_call>" in reply, reply
    calls = [json.loads(r.split("<tool_call>")[1].split("</tool_call>")[0]) for r in replies]
    assert calls == [
        {"name": "list_tables", "arguments": {}},
        {"name": "run_query", "arguments": {"sql": "SELECT count(*) FROM departments"}},
        {"name": "complete_task", "arguments": {"summary": "9"}},
    ]
    assert replies[1].startswith("Counting them.")
    untrained = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
    trained = "".join(replies)
    for text in TOOL_RESULTS + [CONVERSATION[0]["content"], CONVERSATION[1]["content"]]:
        assert text in untrained and text not in trained
    assert "<tool_response>" not in trained and "<|im_start|>" not in trained


def test_prompt_tokens_before_each_reply_are_the_engines(tokenizer):
    """What precedes each trained span is, token for token, the prompt the engine would build for
    that turn (engine/server.py: render_prompt, then tokenizer(text, add_special_tokens=False))."""
    ids, mask = tokenize_conversation(tokenizer, CONVERSATION, TOOLS)
    msgs = normalize_messages(CONVERSATION)
    turns = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    for (start, _), i in zip(trained_spans(ids, mask), turns):
        engine_prompt = tokenizer(render_prompt(tokenizer, msgs[:i], TOOLS), add_special_tokens=False)["input_ids"]
        assert ids[:start] == engine_prompt
    whole = render_prompt(tokenizer, msgs, TOOLS, add_generation_prompt=False)
    assert ids == tokenizer(whole, add_special_tokens=False)["input_ids"], (
        "tokenising segment by segment gives the tokens of the whole text"
    )


def test_train_on_last_trains_only_the_final_reply(tokenizer):
    ids, mask = tokenize_conversation(tokenizer, CONVERSATION, TOOLS, train_on="last")
    [(a, b)] = trained_spans(ids, mask)
    assert "complete_task" in tokenizer.decode(ids[a:b])
    assert ids == tokenize_conversation(tokenizer, CONVERSATION, TOOLS)[0], "the mask changes, not the tokens"


def test_a_turn_of_weight_0_is_shown_not_trained(tokenizer):
    """A reference trace's slip (`collect --recovery-share`): the model sees the failed query in its
    context, and learns the turns after it, not the slip."""
    slipped = copy.deepcopy(CONVERSATION)
    slipped[4]["weight"] = 0
    ids, mask = tokenize_conversation(tokenizer, slipped, TOOLS)
    assert ids == tokenize_conversation(tokenizer, CONVERSATION, TOOLS)[0], "the same tokens, another mask"
    replies = [tokenizer.decode(ids[a:b]) for a, b in trained_spans(ids, mask)]
    assert len(replies) == 2 and "list_tables" in replies[0] and "complete_task" in replies[1], replies
    untrained = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
    assert "Counting them." in untrained and "SELECT count(*) FROM departments" in untrained
    slipped[6]["weight"] = 1
    assert tokenize_conversation(tokenizer, slipped, TOOLS)[1] == mask, "weight 1 trains, as no weight does"


def test_a_template_that_rewrites_earlier_turns_is_refused_with_a_hint(tiny_model_dir):
    tok = copy.deepcopy(load_tokenizer(ModelSource.parse(str(tiny_model_dir))))
    tok.chat_template = (
        "{% for m in messages %}{% if m.role != 'assistant' or loop.last %}<|im_start|>{{ m.role }}\n"
        "{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    with pytest.raises(TemplateError, match="--train-on last"):
        tokenize_conversation(tok, CONVERSATION, TOOLS)
    ids, mask = tokenize_conversation(tok, CONVERSATION, TOOLS, train_on="last")  # unrolled data still works
    assert sum(mask) > 0


def test_dataset_rows_round_trip_through_parquet(tmp_path, tiny_model_dir):
    rows = [
        {"messages": CONVERSATION, "tools": TOOLS, "id": "dept#0", "scenario_id": "dept", "source": "reference"},
        {
            "messages": CONVERSATION[:4] + [{**CONVERSATION[4], "weight": 0}] + CONVERSATION[5:],
            "tools": TOOLS,
            "id": "slip#0",
            "scenario_id": "slip",
            "source": "reference",
        },
        {"messages": CONVERSATION[:2], "tools": TOOLS, "id": "q#0", "scenario_id": "q", "source": "teacher"},
    ]
    src = tmp_path / "train.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert write_parquet(src, tmp_path / "train.parquet") == 3
    back = read_dataset(tmp_path / "train.parquet")
    assert [r["tools"] for r in back] == [TOOLS, TOOLS, TOOLS]
    assert [m["weight"] for m in back[1]["messages"]] == [None] * 4 + [0, None, None], "the slip's weight kept"
    assert back[0]["messages"][4]["tool_calls"][0]["function"] == CONVERSATION[4]["tool_calls"][0]["function"]
    tok = load_tokenizer(ModelSource.parse(str(tiny_model_dir)))
    from_jsonl, s1 = tokenize_dataset(tok, read_dataset(tmp_path), max_len=10_000)
    from_parquet, s2 = tokenize_dataset(tok, back, max_len=10_000)
    assert from_jsonl == from_parquet and len(from_jsonl) == 2
    assert s1["no_assistant_turn"] == 1 and s1["kept"] == 2
    _, short = tokenize_dataset(tok, back, max_len=50)
    assert short["too_long"] == 2 and short["kept"] == 0
