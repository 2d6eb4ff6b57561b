"""`python -m train_agent.engine`: the engine's command line, the server's startup, and
`BackgroundServer` (an engine served from a thread, for tests and benches). The routes are
server.py's."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import threading

import torch
from aiohttp import web

from train_agent.engine import server
from train_agent.engine.sampling import LOGPROBS_MODES
from train_agent.engine.server import MAX_NUM_SEQS, WILDCARD_HOSTS, Engine
from train_agent.models import ModelSource, default_device, load_model, load_tokenizer, parse_dtype

log = logging.getLogger("train_agent.engine")


def _bytes(text: str) -> int:
    """'4G', '512MiB', '1000000' -> bytes."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    return int(float(t[:-1]) * units[t[-1]]) if t[-1:] in units else int(t)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m train_agent.engine", description=server.__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="hub id, local directory, .gguf file or packaged model name")
    p.add_argument("--served-model-name", help="name clients use for the base model (default: --model)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument(
        "--api-key",
        nargs="+",
        help="as vLLM's: every /v1 route needs 'Authorization: Bearer KEY' with one of these keys "
        "(default: VLLM_API_KEY if set, else none needed)",
    )
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--dtype",
        default="auto",
        help="auto (bf16 on GPU and on CPUs fast at bf16: AMX, or AMD with AVX512-BF16; else fp32), bfloat16, float16, float32",
    )
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    p.add_argument("--max-model-len", type=int, help="context length (default: the model's)")
    p.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=0.9,
        help="fraction of GPU memory this engine may use (weights + KV cache)",
    )
    p.add_argument("--kv-cache-memory", type=_bytes, help="KV cache size in bytes (e.g. 4G); overrides the fraction")
    p.add_argument(
        "--max-num-seqs",
        type=int,
        default=MAX_NUM_SEQS,
        help="sequences decoded together at most (vLLM's default; fewer when the KV budget holds fewer)",
    )
    p.add_argument("--enable-lora", action="store_true")
    p.add_argument("--max-loras", type=int, default=1, help="adapters loaded at once")
    p.add_argument("--max-lora-rank", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs (debugging)")
    p.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="reuse the KV of prompt prefixes computed before (default: TRAIN_AGENT_PREFIX_CACHING=1 "
        "or 0 if set, else on)",
    )
    p.add_argument(
        "--no-prefix-caching",
        dest="enable_prefix_caching",
        action="store_false",
        help="the same as --no-enable-prefix-caching",
    )
    p.add_argument(
        "--logprobs-mode",
        default="raw_logprobs",
        choices=LOGPROBS_MODES,
        help="as vLLM's: raw_logprobs (the model's distribution) or processed_logprobs (after "
        "temperature: what the trainer computes with loss.temperature; docs/training.md)",
    )
    return p.parse_args(argv)


def build_engine(args: argparse.Namespace) -> Engine:
    device = default_device() if args.device == "auto" else args.device
    dtype = parse_dtype(args.dtype, device)
    torch.manual_seed(args.seed)
    source = ModelSource.parse(args.model)
    log.info("loading %s on %s as %s", args.model, device, dtype)
    tokenizer = load_tokenizer(source)
    model = load_model(source, device, dtype)
    return Engine(
        model,
        tokenizer,
        served_model_name=args.served_model_name or args.model,
        root=source.path,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        enable_lora=args.enable_lora,
        max_loras=args.max_loras,
        max_lora_rank=args.max_lora_rank,
        gpu_memory_utilization=args.gpu_memory_utilization,
        kv_cache_memory=args.kv_cache_memory,
        seed=args.seed,
        use_graphs=False if args.enforce_eager else None,
        logprobs_mode=args.logprobs_mode,
        prefix_caching=prefix_caching_on(args.enable_prefix_caching),
    )


def prefix_caching_on(flag: bool | None) -> bool:
    """The command line's choice, else TRAIN_AGENT_PREFIX_CACHING's (0 or 1), else on: multi-turn
    rollouts re-send whole conversations, and with the cache their rollout phase ran 2.66x faster on
    a CPU and 2.2x faster on an H200, where the suffixes left run as extend steps in CUDA graphs
    (benches/RESULTS.md)."""
    if flag is not None:
        return flag
    env = os.environ.get("TRAIN_AGENT_PREFIX_CACHING")
    return env != "0" if env is not None else True


def resolve_api_keys(flag: list[str] | None) -> list[str]:
    """The keys of `--api-key`, else VLLM_API_KEY's (as `vllm serve` reads them): a launcher passes
    the key in the environment, where other users cannot read it, unlike a command line."""
    return [k for k in flag or [os.environ.get("VLLM_API_KEY", "")] if k]


async def serve(engine: Engine, host: str, port: int, keys: list[str]) -> None:
    if host in WILDCARD_HOSTS and not keys:
        log.warning(
            "serving on every address (--host %r) with no --api-key: anyone who can reach this "
            "machine can generate and load adapters",
            host,
        )
    runner = web.AppRunner(engine.app(host, keys), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(f"engine ready on http://{host}:{port}", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


class BackgroundServer:
    """Serves an Engine on a free port from a thread (tests, benchmarks, notebooks).

    with BackgroundServer(engine) as url: requests.post(url + "/v1/chat/completions", ...)"""

    def __init__(self, engine: Engine, host: str = "127.0.0.1", api_keys: list[str] | None = None):
        self.engine, self.host, self.api_keys = engine, host, api_keys
        self.loop = asyncio.new_event_loop()
        self.url = ""

    def __enter__(self) -> str:

        ready = threading.Event()

        async def start():
            self.runner = web.AppRunner(self.engine.app(self.host, self.api_keys), access_log=None)
            await self.runner.setup()
            site = web.TCPSite(self.runner, self.host, 0)
            await site.start()
            self.url = f"http://{self.host}:{site._server.sockets[0].getsockname()[1]}"
            ready.set()

        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(start(), self.loop).result()
        ready.wait()
        return self.url

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args = parse_args(argv)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # logs go to a file under the run directory: no tqdm bars
    engine = build_engine(args)
    asyncio.run(serve(engine, args.host, args.port, resolve_api_keys(args.api_key)))
