"""The embedded inference engine: an OpenAI-compatible chat server that mirrors the part of vLLM's
API that train-agent uses, so `vllm serve BASE --enable-lora --tool-call-parser hermes` can stand
in for it one-for-one.

    python -m train_agent.engine --model smollm2-135m-instruct --port 8000 --enable-lora

Endpoints: POST /v1/chat/completions, GET /v1/models, GET /health, GET /metrics (Prometheus text:
the prefix cache's counters), POST /v1/load_lora_adapter, POST /v1/unload_lora_adapter. This module is the HTTP and text layer only: prompts are rendered
and outputs parsed in `chat_format`, tokens come from the scheduler (`scheduler`), which drives
the fast forward pass in `decoder` (the command line and startup are `cli` and `startup`).

Who may drive it: every request must name this server in its `Host` header (a loopback name or
`--host`), every POST must carry `Content-Type: application/json`, and with
`--api-key` (or `VLLM_API_KEY`) every /v1 route needs `Authorization: Bearer <key>`, as vLLM's.
See `_guard` for why.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import threading
import time

import yarl
from aiohttp import web

from train_agent.chat_format import RequestError, normalize_messages, parse_output, render_prompt, validate_tools
from train_agent.engine.guided import Grammars, parse_response_format
from train_agent.engine.prefix_cache import BLOCK_SIZE
from train_agent.engine.requests import AdapterError, SamplingParams
from train_agent.engine.scheduler import Generator
from train_agent.engine.startup import build_decoder

log = logging.getLogger("train_agent.engine")
MAX_TOP_LOGPROBS = 20
# sequences decoded together at most, as vLLM's default; fewer when the KV budget holds fewer
MAX_NUM_SEQS = 256


class Engine:
    """A served base model (and its LoRA adapters) behind the OpenAI-compatible routes."""

    def __init__(
        self,
        model,
        tokenizer,
        *,
        served_model_name: str,
        root: str = "",
        max_model_len: int | None = None,
        max_num_seqs: int = MAX_NUM_SEQS,
        enable_lora: bool = False,
        max_loras: int = 1,
        max_lora_rank: int = 16,
        gpu_memory_utilization: float = 0.9,
        kv_cache_memory: int | None = None,
        seed: int = 0,
        use_graphs: bool | None = None,
        lookahead: int = 8,
        logprobs_mode: str = "raw_logprobs",
        prefix_caching: bool = True,
    ):
        cfg = model.config
        self.tokenizer = tokenizer
        self.name, self.root = served_model_name, root or served_model_name
        self.max_model_len = max_model_len or getattr(cfg, "max_position_embeddings", 4096)
        self.decoder = build_decoder(
            model,
            max_model_len=self.max_model_len,
            max_num_seqs=max_num_seqs,
            enable_lora=enable_lora,
            max_loras=max_loras,
            max_lora_rank=max_lora_rank,
            gpu_memory_utilization=gpu_memory_utilization,
            kv_cache_memory=kv_cache_memory,
            use_graphs=use_graphs,
            lookahead=lookahead,
            logprobs_mode=logprobs_mode,
        )
        self.generator = Generator(
            self.decoder, self._eos_ids(model, tokenizer), seed=seed, prefix_caching=prefix_caching
        )
        self.created = int(time.time())
        self.grammar_lock = threading.Lock()

    def compile_grammar(self, spec: tuple[str, str]):
        """Compiles a parsed response_format (guided.parse_response_format), preparing the
        vocabulary for xgrammar on first use. Blocking: call it off the event loop."""
        with self.grammar_lock:
            if self.generator.grammars is None:
                self.generator.grammars = Grammars(self.tokenizer, self.decoder.vocab, self.generator.eos_ids)
        return self.generator.grammars.compile(spec)

    @staticmethod
    def _eos_ids(model, tokenizer) -> set[int]:
        ids = set()
        for src in (getattr(model, "generation_config", None), model.config, tokenizer):
            eos = getattr(src, "eos_token_id", None) if src is not None else None
            ids.update([eos] if isinstance(eos, int) else (eos or []))
        return ids

    # ---- routes -------------------------------------------------------------------------------

    def app(self, host: str = "127.0.0.1", api_keys: list[str] | None = None) -> web.Application:
        """The routes, served on `host` (the address bound, for the Host check), requiring one of
        `api_keys` on /v1 routes if any is given."""
        app = web.Application(client_max_size=64 << 20, middlewares=[_errors, _guard(host, api_keys or [])])
        app.add_routes(
            [
                web.post("/v1/chat/completions", self.chat_completions),
                web.get("/v1/models", self.models),
                web.get("/health", self.health),
                web.get("/metrics", self.metrics),
                web.post("/v1/load_lora_adapter", self.load_lora),
                web.post("/v1/unload_lora_adapter", self.unload_lora),
            ]
        )
        app.on_cleanup.append(lambda _: asyncio.to_thread(self.generator.close))
        return app

    async def health(self, _request: web.Request) -> web.Response:
        if not self.generator.thread.is_alive():
            return web.Response(status=503, text="scheduler thread died")
        return web.Response(status=200)

    async def metrics(self, _request: web.Request) -> web.Response:
        """vLLM's names, so one scraper reads either server: the KV cache's size
        (`vllm:cache_config_info`, its `block_size` and `num_gpu_blocks` labels; here every slot
        is a row of the whole context, so the blocks are the slots' positions over BLOCK_SIZE),
        from which `train-agent` tells how many sequences run at once, and the prefix-cache
        counters (prompt tokens looked up, and found cached), absent when prefix caching is off."""
        dec = self.generator.dec
        blocks = dec.num_slots * dec.cache_len // BLOCK_SIZE
        lines = [
            "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
            "# TYPE vllm:cache_config_info gauge",
            f'vllm:cache_config_info{{block_size="{BLOCK_SIZE}",num_gpu_blocks="{blocks}"}} 1.0',
        ]
        cache = self.generator.cache
        if cache is not None:
            label = json.dumps(self.name)
            for name, value, help in (
                ("queries", cache.queries, "Prompt tokens looked up in the prefix cache."),
                ("hits", cache.hits, "Prompt tokens found in the prefix cache."),
            ):
                lines += [
                    f"# HELP vllm:prefix_cache_{name}_total {help}",
                    f"# TYPE vllm:prefix_cache_{name}_total counter",
                    f"vllm:prefix_cache_{name}_total{{model_name={label}}} {value}",
                ]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def models(self, _request: web.Request) -> web.Response:
        card = lambda id, root, parent: {  # noqa: E731
            "id": id,
            "object": "model",
            "created": self.created,
            "owned_by": "vllm",
            "root": root,
            "parent": parent,
            "max_model_len": self.max_model_len,
            "permission": [],
        }
        data = [card(self.name, self.root, None)]
        data += [card(n, path, self.name) for n, (_, path) in sorted(self.generator.adapters.items())]
        return web.json_response({"object": "list", "data": data})

    async def load_lora(self, request: web.Request) -> web.Response:
        body = await _json(request)
        name, path = body.get("lora_name"), body.get("lora_path")
        if not isinstance(name, str) or not name or not isinstance(path, str) or not path:
            raise RequestError("both 'lora_name' and 'lora_path' are required strings", "lora_name")
        if name == self.name:
            raise RequestError(f"'{name}' is the base model's name; pick another lora_name", "lora_name")
        try:
            fut = await asyncio.to_thread(self.generator.load_adapter, name, path)
            await asyncio.wrap_future(fut)
        except (OSError, ValueError) as e:
            raise RequestError(f"could not load LoRA adapter '{name}' from {path}: {e}", "lora_path") from e
        log.info("loaded LoRA adapter %s from %s", name, path)
        return web.Response(text=f"Success: LoRA adapter '{name}' added successfully.")

    async def unload_lora(self, request: web.Request) -> web.Response:
        body = await _json(request)
        name = body.get("lora_name")
        await asyncio.wrap_future(self.generator.unload_adapter(name))
        log.info("unloaded LoRA adapter %s", name)
        return web.Response(text=f"Success: LoRA adapter '{name}' removed successfully.")

    async def chat_completions(self, request: web.Request) -> web.Response:
        body = await _json(request)
        model = body.get("model") or self.name
        adapter = None
        if model != self.name:
            if model not in self.generator.adapters:
                names = ", ".join([self.name, *sorted(self.generator.adapters)])
                raise RequestError(
                    f"The model `{model}` does not exist. Available models: {names}", "model", 404, "NotFoundError"
                )
            adapter = model
        messages = normalize_messages(body.get("messages"))
        tools = validate_tools(body.get("tools"))
        tool_choice = _tool_choice(body.get("tool_choice"), tools)
        prompt_tools = tools if tool_choice != "none" else None
        params, n, want_logprobs, return_ids = self._sampling(body)
        guided = parse_response_format(body.get("response_format"))
        if guided is not None:
            params.grammar = await asyncio.to_thread(self.compile_grammar, guided)

        text = render_prompt(self.tokenizer, messages, prompt_tools)
        prompt = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        P, M = len(prompt), self.max_model_len
        if P >= M:
            raise RequestError(
                f"This model's maximum context length is {M} tokens. However, your request has "
                f"{P} input tokens. Please reduce the length of the input messages.",
                "messages",
            )
        if params.max_tokens is None:
            params.max_tokens = M - P
        elif P + params.max_tokens > M:
            raise RequestError(
                f"'max_tokens' or 'max_completion_tokens' is too large: {params.max_tokens}. "
                f"This model's maximum context length is {M} tokens and your request has {P} "
                f"input tokens ({params.max_tokens} > {M} - {P}).",
                "max_tokens",
            )
        stops = _stops(body.get("stop"))
        if stops:
            params.stop_check = self._stop_checker(stops)

        fut = self.generator.submit(prompt, n, params, adapter)
        result = await asyncio.wrap_future(fut)

        choices = []
        for i, c in enumerate(result.completions):
            ids = c.token_ids
            body_ids = ids[:-1] if ids and ids[-1] in self.generator.eos_ids and not params.ignore_eos else ids
            out = self.tokenizer.decode(body_ids, skip_special_tokens=True)
            if stops and c.finish_reason == "stop":
                cut = min((out.find(s) for s in stops if s in out), default=-1)
                out = out[:cut] if cut >= 0 else out
            parsed = parse_output(out, parse_tools=prompt_tools is not None)
            finish = "tool_calls" if parsed.tool_calls and c.finish_reason == "stop" else c.finish_reason
            choice = {
                "index": i,
                "message": {
                    "role": "assistant",
                    "content": parsed.content,
                    "reasoning_content": parsed.reasoning_content,
                    "tool_calls": parsed.tool_calls,
                },
                "logprobs": self._logprobs(c) if want_logprobs else None,
                "finish_reason": finish,
                "stop_reason": None,
            }
            if return_ids:
                choice["token_ids"] = ids
            choices.append(choice)
        completion_tokens = sum(len(c.token_ids) for c in result.completions)
        response = {
            "id": "chatcmpl-" + secrets.token_hex(16),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
            "usage": {
                "prompt_tokens": P,
                "completion_tokens": completion_tokens,
                "total_tokens": P + completion_tokens,
            },
            "prompt_token_ids": prompt if return_ids else None,
        }
        return web.json_response(response)

    # ---- helpers ------------------------------------------------------------------------------

    def _sampling(self, body: dict) -> tuple[SamplingParams, int, bool, bool]:
        n = body.get("n", 1) if body.get("n") is not None else 1
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise RequestError(f"'n' must be a positive integer, got {n!r}", "n")
        if n > self.decoder.num_slots:
            raise RequestError(
                f"'n' is {n}, above this engine's {self.decoder.num_slots} sequence slots (--max-num-seqs)", "n"
            )
        temperature = _number(body, "temperature", 1.0)
        if temperature < 0:
            raise RequestError(f"'temperature' must be >= 0, got {temperature}", "temperature")
        top_p = _number(body, "top_p", 1.0)
        if not 0 < top_p <= 1:
            raise RequestError(f"'top_p' must be in (0, 1], got {top_p}", "top_p")
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is not None and (
            not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
        ):
            raise RequestError(f"'max_tokens' must be a positive integer, got {max_tokens!r}", "max_tokens")
        seed = body.get("seed")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise RequestError(f"'seed' must be an integer, got {seed!r}", "seed")
        want_logprobs = bool(body.get("logprobs"))
        top = body.get("top_logprobs") or 0
        if not isinstance(top, int) or not 0 <= top <= MAX_TOP_LOGPROBS:
            raise RequestError(f"'top_logprobs' must be an integer in [0, {MAX_TOP_LOGPROBS}]", "top_logprobs")
        if top and not want_logprobs:
            raise RequestError("'top_logprobs' needs 'logprobs': true", "top_logprobs")
        params = SamplingParams(
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            seed=None if seed is None else seed & ((1 << 62) - 1),
            top_logprobs=top,
            ignore_eos=bool(body.get("ignore_eos", False)),
        )
        return params, n, want_logprobs, bool(body.get("return_token_ids"))

    def _stop_checker(self, stops: list[str]):
        window = max(len(s) for s in stops) + 8  # tokens: every token is at least ~1 character

        def check(ids: list[int]) -> bool:
            tail = self.tokenizer.decode(ids[-window:], skip_special_tokens=True)
            return any(s in tail for s in stops)

        return check

    def _logprobs(self, c) -> dict:
        def entry(tok: int, lp: float) -> dict:
            text = self.tokenizer.decode([tok])
            return {"token": text, "logprob": max(lp, -9999.0), "bytes": list(text.encode("utf-8"))}

        content = []
        for j, (tok, lp) in enumerate(zip(c.token_ids, c.logprobs)):
            e = entry(tok, lp)
            e["top_logprobs"] = [entry(t, lp_) for t, lp_ in c.top_logprobs[j]] if c.top_logprobs else []
            content.append(e)
        return {"content": content}


def _number(body: dict, key: str, default: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestError(f"'{key}' must be a number, got {value!r}", key)
    return float(value)


def _stops(stop) -> list[str]:
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise RequestError("'stop' must be a string or a list of strings", "stop")
    return [s for s in stops if s]


def _tool_choice(choice, tools: list[dict] | None):
    """Validates tool_choice. "required" and named choices are not enforced by constrained
    decoding: the tools are offered and the output parsed as for "auto"."""
    if choice is None:
        return "auto" if tools else "none"
    if choice in ("none", "auto", "required"):
        if choice == "required" and not tools:
            raise RequestError("tool_choice 'required' needs 'tools'", "tool_choice")
        return choice
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        name = choice["function"].get("name")
        if not tools or name not in {t["function"]["name"] for t in tools}:
            raise RequestError(f"tool_choice names function {name!r}, which is not in 'tools'", "tool_choice")
        return choice
    raise RequestError(
        f"'tool_choice' must be 'none', 'auto', 'required' or a named function, got {choice!r}", "tool_choice"
    )


async def _json(request: web.Request) -> dict:
    """The body of a POST as a JSON object. Only a JSON content type is read: a web page can send
    text/plain, form-encoded or untyped bodies to any address without asking first, but a JSON one
    only after a CORS preflight, which this server never grants."""
    ctype = request.content_type
    if ctype != "application/json" and not (ctype.startswith("application/") and ctype.endswith("+json")):
        raise RequestError(
            f"Content-Type must be application/json, got {request.headers.get('Content-Type', 'none')!r}"
            "\nhint: send the body as JSON with the header 'Content-Type: application/json'",
            status=415,
            type="UnsupportedMediaType",
        )
    try:
        body = await request.json()
    except json.JSONDecodeError as e:
        raise RequestError(f"request body is not valid JSON: {e}") from e
    if not isinstance(body, dict):
        raise RequestError("request body must be a JSON object")
    return body


def _error(status: int, message: str, type: str, param: str | None = None) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": type, "param": param, "code": status}}, status=status
    )


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


def _guard(bind_host: str, api_keys: list[str]):
    """The middleware that decides who may drive the engine, before any route runs.

    Host: a page on another site that gets its name resolved to 127.0.0.1 (DNS rebinding) is
    same-origin with the engine for the browser, so it could send JSON and read the answers; but
    its requests still say `Host: its.name`, which names no address the engine is bound to. So the
    Host header must name a loopback address or `--host`, else 421 (Misdirected Request). The port
    is not checked: a page cannot fake the name, and a tunnel or port forward (`ssh -L 9000:...`)
    reaches the engine on a port other than its own. Bound to a wildcard address, the engine serves
    whatever names the machine has on the network, which it cannot know: the check is off, and
    `--api-key` is the protection (a warning says so at startup).

    Key: as vLLM's `--api-key`: every /v1 route needs `Authorization: Bearer <one of the keys>`
    (compared as SHA-256 digests in constant time); /health and /metrics stay open."""
    names = LOOPBACK_NAMES | {bind_host.strip("[]").lower()}
    digests = [hashlib.sha256(k.encode()).digest() for k in api_keys]

    @web.middleware
    async def guard(request: web.Request, handler):
        if bind_host not in WILDCARD_HOSTS:
            host = request.headers.get("Host", "")
            try:
                name = yarl.URL(f"http://{host}").host or ""
            except ValueError:
                name = ""
            if name.lower() not in names:
                raise RequestError(
                    f"Host {host!r} does not name this server (bound to {bind_host})\nhint: connect "
                    "through http://127.0.0.1:PORT or http://localhost:PORT",
                    status=421,
                    type="MisdirectedRequest",
                )
        if digests and request.path.startswith("/v1"):
            scheme, _, key = request.headers.get("Authorization", "").partition(" ")
            digest = hashlib.sha256(key.encode()).digest()
            if scheme.lower() != "bearer" or not any([secrets.compare_digest(digest, d) for d in digests]):
                raise RequestError(
                    "Unauthorized: this engine requires 'Authorization: Bearer <key>' with the key "
                    "it was started with (--api-key or VLLM_API_KEY)",
                    status=401,
                    type="AuthenticationError",
                )
        return await handler(request)

    return guard


@web.middleware
async def _errors(request: web.Request, handler):
    """Every failure leaves as an OpenAI error object, as vLLM's server sends them."""
    try:
        return await handler(request)
    except RequestError as e:
        return _error(e.status, e.message, e.type, e.param)
    except AdapterError as e:
        return _error(e.status, str(e), "NotFoundError" if e.status == 404 else "BadRequestError")
    except ValueError as e:
        return _error(400, str(e), "BadRequestError")
    except web.HTTPException as e:
        return _error(e.status, e.reason, type(e).__name__)
    except Exception as e:  # a bug: say what, keep serving
        log.exception("request to %s failed", request.path)
        return _error(500, f"{type(e).__name__}: {e}", "InternalServerError")
