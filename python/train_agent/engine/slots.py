"""The per-slot decode state the scheduler drives (`SlotState`), shared by the fast decoder
(decoder.Decoder) and the generic one (generic.GenericDecoder), and the bucket sizes that CUDA
graphs are captured for."""

from __future__ import annotations

import torch

from train_agent.engine.sampling import LOGPROBS_MODES, sample


def buckets(limit: int, start: int) -> list[int]:
    out, b = [], start
    while b < limit:
        out.append(b)
        b *= 2
    return out + [limit]


def pick_bucket(buckets: list[int], need: int) -> int:
    return next(b for b in buckets if b >= need)


class SlotState:
    """The per-slot decode state the scheduler (scheduler.Generator) drives, and the sampling and
    stepping on top of `_decode`: shared by the fast `Decoder` and `generic.GenericDecoder`.

    State buffers (all `[slots]`): `tok` (next input token), `pos` (its position), `seed`, `temp`,
    `top_p`, `lora` (adapter slot, -1 = base). The scheduler writes them between steps; `step`
    advances every row in `[0, b)` by one token."""

    use_graphs = False
    # sampling.sample, or (Decoder on CUDA) its torch.compile'd version
    _sample = staticmethod(sample)

    def _init_slots(self, num_slots: int, max_len: int, lookahead: int, vocab: int, device, logprobs_mode: str) -> None:
        if logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"logprobs mode {logprobs_mode!r} is not one of {', '.join(LOGPROBS_MODES)}")
        self.device, self.vocab = device, vocab
        self.num_slots, self.max_len, self.lookahead = num_slots, max_len, lookahead
        # rows run past their end until the next host check; the last position is never part of a
        # sequence: idle rows (free slots) decode there, so they never overwrite a row's cached prefix
        self.cache_len = max_len + max(lookahead, 1)
        self.idle_pos = self.cache_len - 1
        kw = dict(device=device)
        self.tok = torch.zeros(num_slots, dtype=torch.long, **kw)
        self.pos = torch.full((num_slots,), self.idle_pos, dtype=torch.long, **kw)
        self.seed = torch.zeros(num_slots, dtype=torch.long, **kw)
        self.temp = torch.zeros(num_slots, dtype=torch.float32, **kw)
        self.top_p = torch.ones(num_slots, dtype=torch.float32, **kw)
        self.lora = torch.full((num_slots,), -1, dtype=torch.long, **kw)
        # xgrammar's packed allow-list per slot (guided.py), read by steps of guided batches only
        self.bitmask = torch.full((num_slots, (vocab + 31) // 32), -1, dtype=torch.int32, **kw)
        self.processed_logprobs = logprobs_mode == "processed_logprobs"
        self.rows = torch.arange(num_slots, **kw)
        self.positions = torch.arange(self.cache_len, **kw)
        self.batch_buckets = buckets(num_slots, 1)
        self.len_buckets = buckets(self.cache_len, 128)
        self.captured, self.capture_s = 0, 0.0  # CUDA graphs captured, and the time it took

    def context_width(self, need: int) -> int:
        """The positions [0, L) a decode step attends over when its rows need `need`: a bucket when
        steps replay CUDA graphs (one graph per bucket), else exactly `need`. An eager step (CPU)
        costs what it reads, every row's keys and values up to L, and on two CPU cores the
        doubling buckets read up to twice the positions there are (benches/RESULTS.md, "Eager
        decode widths")."""
        return pick_bucket(self.len_buckets, need) if self.use_graphs else min(need, self.cache_len)

    def batch_width(self, rows: int) -> int:
        """The rows [0, b) a decode step runs when the highest busy slot is `rows - 1`: a bucket with
        graphs, else exactly those rows."""
        return pick_bucket(self.batch_buckets, rows) if self.use_graphs else rows

    def _decode(self, b: int, L: int) -> torch.Tensor:
        """float32 logits `[b, vocab]` of the next token of rows [0, b), attending to positions [0, L)."""
        raise NotImplementedError

    def sample(self, logits: torch.Tensor, rows: torch.Tensor | slice, use_top_p: bool, guided: bool):
        """Draws the next token of `rows` from their logits with each slot's settings (and, when
        `guided`, its grammar bitmask). Returns sampling.sample's (tok, logprob, lse, inv_t)."""
        return self._sample(
            logits,
            self.temp[rows],
            self.top_p[rows],
            self.seed[rows],
            self.pos[rows],
            use_top_p,
            self.processed_logprobs,
            self.bitmask[rows] if guided else None,
        )

    def _step(self, b: int, L: int, use_top_p: bool, guided: bool):
        logits = self._decode(b, L)
        tok, logprob, lse, inv_t = self.sample(logits, slice(0, b), use_top_p, guided)
        self.tok[:b].copy_(tok)
        self.pos[:b].copy_((self.pos[:b] + 1).clamp_(max=self.idle_pos))
        return tok, logprob, logits, lse, inv_t

    def step(self, b: int, L: int, use_top_p: bool, guided: bool = False):
        """Advances rows [0, b) by one sampled token. Returns (tokens [b], their logprobs [b], float32
        logits [b, vocab], logsumexp [b], inverse temperature [b]: a token's logprob is
        `logits * inv_t - lse`); the tensors are only valid until the next call."""
        return self._step(b, L, use_top_p, guided)
