"""Chat prompts in, tool calls out: the text conventions between OpenAI messages and a model.

Rendering uses the model's own chat template with `tools=`. A template that knows nothing of
tools (SmolLM2's) gets the Hermes convention that Qwen2.5's template uses: the tools described in
the system prompt, earlier calls as `<tool_call>` blocks in assistant turns, and results as
`<tool_response>` blocks in user turns.

Parsing takes generated text apart into `content`, `reasoning_content` (`<think>` blocks) and
`tool_calls`: Hermes `<tool_call>{...}</tool_call>` blocks, and, failing those, bare or ```json
fenced objects `{"name": ..., "arguments": {...}}` (what small models write when they half follow
the format). Text that does not parse stays in `content`.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field


class RequestError(Exception):
    """A client error; becomes an OpenAI error object with this status."""

    def __init__(self, message: str, param: str | None = None, status: int = 400, type: str = "BadRequestError"):
        super().__init__(message)
        self.message, self.param, self.status, self.type = message, param, status, type


HERMES_SYSTEM = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)


def validate_tools(tools) -> list[dict] | None:
    """Checks the OpenAI `tools` shape; returns it (or None) or raises RequestError."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise RequestError('\'tools\' must be a list of {"type": "function", "function": {...}}', "tools")
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type", "function") != "function" or not isinstance(fn, dict):
            raise RequestError(f'tools[{i}] must be {{"type": "function", "function": {{...}}}}', "tools")
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise RequestError(f"tools[{i}].function.name must be a non-empty string", "tools")
        params = fn.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise RequestError(f"tools[{i}].function.parameters must be a JSON Schema object", "tools")
    return tools


def _text(content) -> str:
    """OpenAI content: a string, None, or a list of parts of which we keep the text ones."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    raise RequestError("message content must be a string or a list of content parts", "messages")


def _arguments(call: dict) -> dict:
    fn = call.get("function") or {}
    args = fn.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as e:
            raise RequestError(
                f"tool call {fn.get('name')!r} has arguments that are not JSON: {args[:200]}", "messages"
            ) from e
    return args


def normalize_messages(messages) -> list[dict]:
    """Validates messages and converts them to what chat templates expect (text content, tool-call
    arguments as objects rather than JSON strings)."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty list", "messages")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "developer", "user", "assistant", "tool"):
            raise RequestError(f"messages[{i}] needs a role of system, user, assistant or tool", "messages")
        msg = {"role": "system" if m["role"] == "developer" else m["role"], "content": _text(m.get("content"))}
        if m["role"] == "assistant" and m.get("tool_calls"):
            msg["tool_calls"] = [
                {
                    "id": c.get("id"),
                    "type": "function",
                    "function": {"name": (c.get("function") or {}).get("name"), "arguments": _arguments(c)},
                }
                for c in m["tool_calls"]
            ]
        if m["role"] == "assistant" and m.get("reasoning_content"):
            msg["reasoning_content"] = m["reasoning_content"]
        if m["role"] == "tool":
            msg["tool_call_id"] = m.get("tool_call_id")
            if m.get("name"):
                msg["name"] = m["name"]
        out.append(msg)
    return out


def template_supports_tools(tokenizer) -> bool:
    template = tokenizer.chat_template
    if isinstance(template, dict):
        template = " ".join(template.values())
    return isinstance(template, str) and "tools" in template


def hermes_messages(messages: list[dict], tools: list[dict] | None) -> list[dict]:
    """Rewrites tool-aware messages into plain system/user/assistant turns in the Hermes style."""
    out: list[dict] = []
    if tools:
        block = "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools)
        system = HERMES_SYSTEM.format(tools=block)
        if messages and messages[0]["role"] == "system":
            system = messages[0]["content"] + "\n\n" + system
            messages = messages[1:]
        out.append({"role": "system", "content": system})
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            parts = [m["content"]] if m["content"] else []
            for c in m["tool_calls"]:
                call = {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                parts.append("<tool_call>\n" + json.dumps(call, ensure_ascii=False) + "\n</tool_call>")
            out.append({"role": "assistant", "content": "\n".join(parts)})
        elif m["role"] == "tool":
            block = "<tool_response>\n" + m["content"] + "\n</tool_response>"
            if out and out[-1].get("_tool"):  # consecutive results share one user turn, as Qwen's does
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_tool": True})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return [{k: v for k, v in m.items() if k != "_tool"} for m in out]


def render_prompt(tokenizer, messages: list[dict], tools: list[dict] | None, add_generation_prompt: bool = True) -> str:
    """The prompt text for a generation turn, through the model's chat template. SFT renders
    finished conversations with the same function (`add_generation_prompt=False`), so training
    text and inference prompts cannot drift apart."""
    if template_supports_tools(tokenizer):
        kwargs = {"tools": tools} if tools else {}
        return tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
        )
    return tokenizer.apply_chat_template(
        hermes_messages(messages, tools), tokenize=False, add_generation_prompt=add_generation_prompt
    )


# ---- parsing ------------------------------------------------------------------------------


@dataclass
class ParsedOutput:
    content: str | None
    reasoning_content: str | None = None
    tool_calls: list[dict] = field(default_factory=list)


_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL)
_CALL_START = re.compile(r'\{\s*"name"\s*:')


def _as_calls(obj) -> list[dict] | None:
    """`{"name", "arguments"}` (or a list of them) -> OpenAI tool calls; None if not that shape."""
    items = obj if isinstance(obj, list) else [obj]
    calls = []
    for it in items:
        if not isinstance(it, dict) or not isinstance(it.get("name"), str):
            return None
        args = it.get("arguments", it.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                return None
        if not isinstance(args, dict):
            return None
        calls.append(
            {
                "id": "call_" + secrets.token_hex(12),
                "type": "function",
                "function": {"name": it["name"], "arguments": json.dumps(args, ensure_ascii=False)},
            }
        )
    return calls or None


def _loads(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def parse_output(text: str, parse_tools: bool = True) -> ParsedOutput:
    reasoning = None
    if "</think>" in text and "<think>" not in text:  # the template opened the block in the prompt
        reasoning, text = text.split("</think>", 1)
        reasoning = reasoning.strip()
    elif "<think>" in text:
        reasoning = "\n".join(m.strip() for m in _THINK.findall(text)).strip()
        text = _THINK.sub("", text)
    calls: list[dict] = []
    if parse_tools:
        rest = []
        last = 0
        for m in _TOOL_CALL.finditer(text):  # Hermes blocks
            parsed = _as_calls(_loads(m.group(1)))
            if parsed:
                calls += parsed
                rest.append(text[last : m.start()])
                last = m.end()
        text = "".join(rest) + text[last:]
        if not calls:
            text, calls = _bare_calls(text)
    content = text.strip()
    return ParsedOutput((content or None) if calls else content, reasoning or None, calls)


def _bare_calls(text: str) -> tuple[str, list[dict]]:
    """Fenced ```json blocks and bare JSON objects that are calls."""
    calls: list[dict] = []

    def fence(m: re.Match) -> str:
        parsed = _as_calls(_loads(m.group(1).strip()))
        if parsed:
            calls.extend(parsed)
            return ""
        return m.group(0)

    text = _FENCE.sub(fence, text)
    if calls:
        return text, calls
    whole = _as_calls(_loads(text.strip()))  # a bare list of calls, or one call
    if whole:
        return "", whole
    decoder = json.JSONDecoder()
    out, i = [], 0
    for m in _CALL_START.finditer(text):
        if m.start() < i:
            continue
        try:
            obj, end = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        parsed = _as_calls(obj)
        if parsed:
            calls += parsed
            out.append(text[i : m.start()])
            i = end
    out.append(text[i:])
    return "".join(out), calls
