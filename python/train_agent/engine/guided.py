"""Structured output: `response_format` turned into a token mask per decode step, with xgrammar (the
library behind vLLM's default structured-output backend), so local teachers and judges return JSON
that parses and, with a schema, validates.

    {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": true}}
    {"type": "json_object"}             any JSON object (vLLM compiles the schema {"type": "object"})
    {"type": "text"} or absent          unconstrained

A request's grammar is compiled once (and cached by xgrammar); each of its `n` sequences gets its own
matcher, advanced by every sampled token on the host. The decoder masks the sampling distribution
with a per-slot bitmask (`apply_bitmask`); reported logprobs stay those of the model (see sampling.py).
"""

from __future__ import annotations

import json

import torch

from train_agent.chat_format import RequestError


def parse_response_format(rf) -> tuple[str, str] | None:
    """Validates `response_format` and returns ("json", schema text) or None for free text."""
    if rf is None:
        return None
    if not isinstance(rf, dict) or not isinstance(rf.get("type"), str):
        raise RequestError(f"'response_format' must be an object with a 'type', got {rf!r}", "response_format")
    kind = rf["type"]
    if kind == "text":
        return None
    if kind == "json_object":
        return "json", '{"type": "object"}'
    if kind == "json_schema":
        spec = rf.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise RequestError(
                "response_format 'json_schema' needs an object 'json_schema' with a string 'name' "
                'and a \'schema\'\nhint: {"type": "json_schema", "json_schema": {"name": "answer", '
                '"schema": {...}}}',
                "response_format",
            )
        schema = spec.get("schema", {})
        if not isinstance(schema, (dict, bool)):
            raise RequestError(
                f"response_format json_schema '{spec['name']}': 'schema' must be a JSON Schema object, got {schema!r}",
                "response_format",
            )
        return "json", json.dumps(schema)
    raise RequestError(
        f"response_format type {kind!r} is not supported; expected 'text', 'json_object' or 'json_schema'",
        "response_format",
    )


class Grammars:
    """The tokenizer's vocabulary prepared once for xgrammar, and the compiler (thread-safe, cached)."""

    def __init__(self, tokenizer, vocab_size: int, stop_ids: set[int]):
        import xgrammar as xgr

        self.xgr = xgr
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=sorted(stop_ids))
        self.compiler = xgr.GrammarCompiler(info, max_threads=1)
        self.vocab_size = vocab_size

    def compile(self, spec: tuple[str, str]):
        """The compiled grammar of a parsed response_format; a schema xgrammar rejects is a 400."""
        _, schema = spec
        try:
            # no free whitespace (vLLM's disable_any_whitespace): a weak model offered whitespace
            # can spend the whole token budget on it, a known failure of JSON mode
            compiled = self.compiler.compile_json_schema(schema, any_whitespace=False)
        except Exception as e:  # xgrammar raises RuntimeError/ValueError with the reason
            raise RequestError(
                f"invalid JSON schema in response_format: {e}\nhint: the schema must be a valid "
                f"JSON Schema (draft 2020-12) using types xgrammar supports",
                "response_format",
            ) from e
        # xgrammar compiles a schema that is only a $ref to itself (directly or through other
        # $defs) into a grammar that allows no first token; in the batch, the token drawn under that
        # empty mask used to fail every request beside it. Refused here, to its sender alone.
        mask = self.bitmask(1)
        self.matcher(compiled).fill_next_token_bitmask(mask, 0)
        if not mask.any():
            raise RequestError(
                "response_format's JSON schema admits no value: its grammar allows no first token"
                "\nhint: a $ref that leads only back to itself (or to $defs that refer to each "
                "other) describes nothing; give it a type or properties",
                "response_format",
            )
        return compiled

    def matcher(self, compiled):
        return self.xgr.GrammarMatcher(compiled)

    def bitmask(self, rows: int) -> torch.Tensor:
        return self.xgr.allocate_token_bitmask(rows, self.vocab_size)


def apply_bitmask(logits: torch.Tensor, bitmask: torch.Tensor) -> torch.Tensor:
    """`logits` with the tokens whose bit is 0 in `bitmask` ([b, ceil(V/32)] int32, xgrammar's layout:
    token i is bit i % 32 of word i // 32) set to -inf. Pure tensor ops, so it runs inside a
    captured CUDA graph and identically on CPU; rows with an all-ones mask are unchanged."""
    b, V = logits.shape
    bits = torch.arange(32, device=logits.device, dtype=torch.int32)
    allowed = ((bitmask[:, :, None] >> bits) & 1).view(b, -1)[:, :V].bool()
    return logits.masked_fill(~allowed, float("-inf"))
