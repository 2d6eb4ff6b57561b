"""What the scheduler (scheduler.Generator) takes and gives: a request's sampling parameters, its
completions and timings, the per-request and per-sequence state it keeps, its statistics, and the
errors that fail one request."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import torch


@dataclass
class SamplingParams:
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    top_logprobs: int = 0
    ignore_eos: bool = False
    # called with a sequence's tokens after each new token; True ends it with "stop"
    stop_check: Callable[[list[int]], bool] | None = None
    # an xgrammar CompiledGrammar (guided.Grammars.compile): every token is drawn inside it
    grammar: object | None = None


@dataclass
class Completion:
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    finish_reason: str | None = None


@dataclass
class Result:
    completions: list[Completion]
    prompt_len: int
    t_submit: float
    t_first_token: float
    t_done: float


@dataclass
class Request:
    prompt: list[int]
    n: int
    params: SamplingParams
    adapter_slot: int
    future: Future
    t_submit: float
    seqs: list[Seq] = field(default_factory=list)
    t_first: float = 0.0
    done: int = 0
    key: int = -1  # the prefix cache's key of the adapter weights (-1: the base model)
    hashes: list[bytes] = field(default_factory=list)  # the prompt's block hashes
    cached: int = 0  # leading prompt tokens whose KV is reused, not prefilled
    copy_from: int = -1  # the slot to copy those `cached` rows from (-1: they are in place)


@dataclass
class Seq:
    req: Request
    slot: int
    seed: int
    out: Completion = field(default_factory=Completion)
    matcher: object | None = None  # the grammar's state after this sequence's tokens

    @property
    def length(self) -> int:
        return len(self.req.prompt) + len(self.out.token_ids)


@dataclass
class SchedulerStats:
    """Where the scheduler thread's time went since it started, for the engine's log and the benches.
    Every phase ends in a host sync (the first tokens' or the window's copy to the host), so wall
    time around it is the device's time too."""

    idle_s: float = 0.0  # waiting for requests
    admit_s: float = 0.0  # admitting requests: cache lookups, placement, and their prefills
    prefill_s: float = 0.0  # the prefills alone: row copies, the forward, the first tokens' draw
    prefills: int = 0
    prefill_tokens: int = 0  # prompt tokens computed (not served from the prefix cache)
    # the same as right-padded batches (requests x longest suffix, per prefill): the query rows of a
    # CUDA prefill's attention; on CPU (decoder.Decoder.prefill) and the generic path no row is padded
    prefill_padded: int = 0
    window_s: float = 0.0  # decode windows, their host sync and bookkeeping included
    windows: int = 0
    windows_ahead: int = 0  # launched before the previous window's tokens were read
    decode_steps: int = 0
    decode_rows: int = 0  # summed over steps: the batch width each step ran (a bucket with graphs)


@dataclass
class Window:
    """A launched decode window: the rows it ran, its step count, whether a grammar guided it, and
    its tokens, logprobs (and top logprobs) `[rows, k]` on their way to the host, there once
    `event` (CUDA) has passed."""

    seqs: list[Seq]
    k: int
    guided: bool
    out: list[torch.Tensor]
    event: torch.cuda.Event | None


class GrammarError(ValueError):
    """A request's grammar refused the token drawn under its own mask: a 400 for that request."""

    def __init__(self, index: int, token: int):
        super().__init__(
            f"response_format: the grammar allowed no token at completion token {index} (drew "
            f"{token} under its mask)\nhint: the schema must admit a finite JSON value: a required "
            "property or $ref that leads back to itself admits none"
        )


class AdapterError(Exception):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status
