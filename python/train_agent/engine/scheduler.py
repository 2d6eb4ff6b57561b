"""The scheduler: continuous batching of token-id requests over one `Decoder`, in a background
thread.

Between decode windows the thread admits queued requests into free KV slots (one batched prefill;
the n samples of a prompt share it by copying its KV rows), applies adapter loads, and retires
finished sequences. A window runs up to `lookahead` decode steps back to back without looking at
the results (no host sync per token), then copies the new tokens to the host once and checks EOS,
stop strings and lengths. Rows that finished mid-window just produce a few tokens that are dropped.
With CUDA graphs (`overlap`), the next window is launched before the host reads the last one's
tokens, unless requests were just admitted or are waiting: the device then runs through that
bookkeeping instead of idling (~5% of a batch-64 decode step).

Requests with different LoRA adapters (or none) share every step: each row carries its adapter's
bank slot. Loading a name again writes the new weights into a free bank slot and repoints the
name, so a running request keeps the weights it started with.

With prefix caching on (the default), a prompt whose leading blocks some slot's row already holds
(an earlier turn of the same conversation, or a sibling rollout with the same system prompt and
task) reuses them and prefills only the rest (prefix_cache.py). Slots are handed out lowest first,
so the decode batch (every row below the highest busy slot) stays narrow; a request whose prefix sits
in a free slot inside that width takes that slot instead, and one past it has the prefix copied down.
Every phase's time is counted in `SchedulerStats` (logged every 256 requests).
"""

from __future__ import annotations

import heapq
import logging
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import torch

from train_agent.engine.guided import Grammars
from train_agent.engine.prefix_cache import PrefixCache, block_hashes, longest_prefix
from train_agent.engine.requests import (
    AdapterError,
    GrammarError,
    Request,
    Result,
    SamplingParams,
    SchedulerStats,
    Seq,
    Window,
)
from train_agent.engine.sampling import derive_seed
from train_agent.engine.slots import SlotState

log = logging.getLogger("train_agent.engine")


class Generator:
    def __init__(
        self,
        decoder: SlotState,
        eos_ids: set[int],
        *,
        seed: int = 0,
        max_prefill_tokens: int = 16384,
        grammars: Grammars | None = None,
        prefix_caching: bool = True,
        overlap: bool | None = None,
    ):
        self.dec = decoder
        # launch the next decode window before reading this one's tokens (default: with CUDA graphs)
        self.overlap = decoder.use_graphs if overlap is None else overlap
        self.grammars = grammars
        self.eos_ids = eos_ids
        self.rng = random.Random(seed)
        self.max_prefill_tokens = max_prefill_tokens
        self.free_slots = list(range(decoder.num_slots))
        self.active: dict[int, Seq] = {}  # slot -> sequence
        self.pending: list[Request] = []
        self.commands: list[tuple[Callable[[], object], Future]] = []
        self.adapters: dict[str, tuple[int, str]] = {}  # name -> (bank slot, path)
        self.bank_refs = [0] * decoder.lora_slots  # requests holding each bank slot
        # each install gets a new key, so KV computed under replaced weights is never matched
        self.bank_keys = [0] * decoder.lora_slots
        self.installs = 0
        self.cache = PrefixCache(decoder.num_slots) if prefix_caching else None
        self.admitted = 0
        self.logged = 0  # `admitted` at the last stats line
        self.stats = SchedulerStats()
        self.cv = threading.Condition()
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="engine-scheduler", daemon=True)
        self.thread.start()

    # ---- public, thread-safe ------------------------------------------------------------------

    def submit(self, prompt: list[int], n: int, params: SamplingParams, adapter: str | None = None) -> Future:
        fut: Future = Future()
        if n > self.dec.num_slots:
            raise ValueError(f"n={n} is more than the engine's {self.dec.num_slots} sequence slots")
        with self.cv:
            slot = -1
            if adapter is not None:
                if adapter not in self.adapters:
                    raise AdapterError(f"adapter {adapter!r} is not loaded", 404)
                slot = self.adapters[adapter][0]
                self.bank_refs[slot] += 1
            seed = params.seed if params.seed is not None else self.rng.getrandbits(62)
            params = SamplingParams(**{**params.__dict__, "seed": seed})
            self.pending.append(Request(prompt, n, params, slot, fut, time.perf_counter()))
            self.cv.notify()
        return fut

    def load_adapter(self, name: str, path: str) -> Future:
        """Reads the adapter here (caller's thread), installs it on the scheduler thread."""
        if not self.dec.lora_slots:
            raise AdapterError("LoRA is not enabled: start the engine with --enable-lora")
        adapter = self.dec.read_adapter(path)

        def install():
            used = {s for s, _ in self.adapters.values()}
            free = [s for s in range(self.dec.lora_slots) if s not in used and self.bank_refs[s] == 0]
            if not free or (name not in self.adapters and len(self.adapters) >= self.dec.lora_slots - 1):
                raise AdapterError(
                    f"cannot load {name!r}: {len(self.adapters)} adapters loaded, the "
                    f"maximum is --max-loras {self.dec.lora_slots - 1}; unload one first"
                )
            # copied to the device here, on the scheduler thread: no CUDA work may run on another
            # thread while a graph is being captured
            self.dec.install_adapter(free[0], *adapter)
            self.installs += 1
            self.bank_keys[free[0]] = self.installs
            self.adapters[name] = (free[0], path)

        return self._command(install)

    def unload_adapter(self, name: str) -> Future:
        def remove():
            if name not in self.adapters:
                raise AdapterError(f"The lora adapter '{name}' cannot be found.", 404)
            del self.adapters[name]  # its bank slot frees itself once no request holds it

        return self._command(remove)

    def close(self) -> None:
        with self.cv:
            self.stopping = True
            self.cv.notify()
        self.thread.join(timeout=10)

    def _command(self, fn: Callable[[], object]) -> Future:
        fut: Future = Future()
        with self.cv:
            self.commands.append((fn, fut))
            self.cv.notify()
        return fut

    # ---- scheduler thread ---------------------------------------------------------------------

    def _run(self) -> None:
        inflight: Window | None = None  # launched ahead, its tokens not yet read
        with torch.inference_mode():
            while True:
                with self.cv:
                    if self.logged != self.admitted and not (self.pending or self.active or self.commands):
                        # the work just finished: an evaluation's prefill/decode split is in the log
                        # even when it admitted fewer than the 256 requests between two lines
                        self._log_stats()
                    t0 = time.perf_counter()
                    while not (self.pending or self.active or self.commands or self.stopping):
                        self.cv.wait()
                    self.stats.idle_s += time.perf_counter() - t0
                    if self.stopping:
                        return
                    commands, self.commands = self.commands, []
                    admitted = []
                    free = len(self.free_slots)  # slots are taken in _admit, after the lock
                    while self.pending and self.pending[0].n <= free:
                        free -= self.pending[0].n
                        admitted.append(self.pending.pop(0))
                for fn, fut in commands:
                    try:
                        fut.set_result(fn())
                    except Exception as e:  # reported to the caller, the loop goes on
                        fut.set_exception(e)
                try:
                    if admitted:
                        t0 = time.perf_counter()
                        self._admit(admitted)
                        self.stats.admit_s += time.perf_counter() - t0
                    if self.active:
                        t0 = time.perf_counter()
                        window = inflight or self._launch(None)
                        inflight = self._launch(window) if self._may_overlap(window, bool(admitted)) else None
                        self._collect(window)
                        if not self.active:  # every row it runs has finished
                            inflight = None
                        self.stats.window_s += time.perf_counter() - t0
                except Exception as e:
                    log.exception("generation failed; failing the running requests")
                    inflight = None
                    self._fail_all(e)

    def _admit(self, reqs: list[Request]) -> None:
        chunk: list[Request] = []
        coming: dict[bytes, None] = {}  # the blocks the chunk's prefill will compute
        for req in reqs:
            if self.cache is not None:
                req.key = self.bank_keys[req.adapter_slot] if req.adapter_slot >= 0 else -1
                req.hashes = block_hashes(req.prompt, req.key)
                if longest_prefix(req.hashes, coming)[0] > self.cache.longest(req.hashes)[0]:
                    # a request of the chunk computes more of this prompt than the cache holds (the
                    # rollouts of a group arrive together): prefill the chunk first, then reuse it
                    self._prefill(chunk)
                    chunk, coming = [], {}
            self._place(req)
            width = max([len(r.prompt) - r.cached for r in chunk + [req]]) * (len(chunk) + 1)
            if chunk and width > self.max_prefill_tokens:
                self._prefill(chunk)
                chunk, coming = [], {}
            chunk.append(req)
            coming.update(dict.fromkeys(req.hashes))
        if chunk:
            self._prefill(chunk)
        self.admitted += len(reqs)
        if (self.admitted - len(reqs)) // 256 != self.admitted // 256:
            self._log_stats()

    def _log_stats(self) -> None:
        self.logged = self.admitted
        st, c = self.stats, self.cache
        if c is not None:
            log.info(
                "prefix cache: %d of %d prompt tokens reused (%.1f%%)",
                c.hits,
                c.queries,
                100 * c.hits / max(c.queries, 1),
            )
        log.info(
            "scheduler: idle %.1f s, admitting %.1f s (%d prefills of %d tokens, %d padded: %.1f s), "
            "decoding %.1f s (%d windows, %d launched ahead, %d steps of mean width %.1f); "
            "CUDA graphs captured so far: %d (%.1f s)",
            st.idle_s,
            st.admit_s,
            st.prefills,
            st.prefill_tokens,
            st.prefill_padded,
            st.prefill_s,
            st.window_s,
            st.windows,
            st.windows_ahead,
            st.decode_steps,
            st.decode_rows / max(st.decode_steps, 1),
            self.dec.captured,
            self.dec.capture_s,
        )

    def _place(self, req: Request) -> None:
        """Gives the request's sequences their slots: the first takes a free slot that holds the
        prompt's longest cached prefix if there is one inside the decode batch's width, else (as
        every other sequence) the lowest free slot, whose cached blocks are dropped."""
        n, holders = self.cache.longest(req.hashes) if self.cache is not None else (0, set())
        # the holder with the longest match past the last common block; free ones first (no copy)
        best = max(
            sorted(holders), default=-1, key=lambda h: (self.cache.reusable(h, req.prompt, n), h in self.free_slots)
        )
        # a free holder past the decode batch's width would widen every step until it retires, so
        # its rows are copied down to the lowest free slot
        in_place = best >= 0 and best in self.free_slots and (best <= self.free_slots[0] or best < self._width())
        req.cached = min(self.cache.reusable(best, req.prompt, n), len(req.prompt) - 1) if best >= 0 else 0
        req.copy_from = best if best >= 0 and not in_place else -1
        for i in range(req.n):
            if i == 0 and in_place:
                slot, kept = best, req.cached
                self.free_slots.remove(slot)
                heapq.heapify(self.free_slots)
            else:
                slot, kept = heapq.heappop(self.free_slots), 0
            if self.cache is not None:
                self.cache.keep(slot, kept)
            seq = Seq(req, slot, derive_seed(req.params.seed, len(req.seqs)))
            if req.params.grammar is not None:
                seq.matcher = self.grammars.matcher(req.params.grammar)
            req.seqs.append(seq)
        if self.cache is not None:
            self.cache.count(len(req.prompt), req.cached)

    def _prefill(self, reqs: list[Request]) -> None:
        t0 = time.perf_counter()
        dec = self.dec
        for r in reqs:
            if r.copy_from >= 0:
                dec.copy_slot(r.copy_from, [r.seqs[0].slot], r.cached)
        logits = dec.prefill(
            [r.prompt for r in reqs],
            [r.seqs[0].slot for r in reqs],
            [r.adapter_slot for r in reqs],
            [r.cached for r in reqs],
        )
        for r in reqs:
            if r.n > 1:
                dec.copy_slot(r.seqs[0].slot, [s.slot for s in r.seqs[1:]], len(r.prompt))
            if self.cache is not None:
                for s in r.seqs:
                    self.cache.hold(s.slot, r.prompt, r.hashes)
        seqs = [s for r in reqs for s in r.seqs]
        rows = torch.tensor([i for i, r in enumerate(reqs) for _ in range(r.n)], device=dec.device)
        slots = torch.tensor([s.slot for s in seqs], device=dec.device)
        dev = dict(device=dec.device)
        dec.seed[slots] = torch.tensor([s.seed for s in seqs], **dev)
        dec.temp[slots] = torch.tensor([s.req.params.temperature for s in seqs], dtype=torch.float32, **dev)
        dec.top_p[slots] = torch.tensor([s.req.params.top_p for s in seqs], dtype=torch.float32, **dev)
        dec.lora[slots] = torch.tensor([s.req.adapter_slot for s in seqs], **dev)
        last = torch.tensor([len(s.req.prompt) - 1 for s in seqs], **dev)
        logits = logits[rows]
        guided = [s for s in seqs if s.matcher is not None]
        self._fill_masks(guided)
        dec.pos[slots] = last  # the draw's randomness is keyed by the position it is made from
        tok, lp, lse, inv_t = dec.sample(logits, slots, any(s.req.params.top_p < 1 for s in seqs), bool(guided))
        dec.tok[slots] = tok
        dec.pos[slots] = last + 1
        top = self._top(logits, lse, inv_t, seqs)
        now = time.perf_counter()
        for r in reqs:
            r.t_first = now
        for i, (s, t, logprob) in enumerate(zip(seqs, tok.tolist(), lp.tolist())):
            if s.out.finish_reason is None:  # else a sibling's grammar failure ended its request
                self.active[s.slot] = s
                self._append(s, t, logprob, top[i] if top else None)
        self._fill_masks([s for s in guided if s.out.finish_reason is None])
        st = self.stats
        st.prefill_s += time.perf_counter() - t0
        st.prefills += 1
        st.prefill_tokens += sum(len(r.prompt) - r.cached for r in reqs)
        st.prefill_padded += len(reqs) * max(len(r.prompt) - r.cached for r in reqs)

    def _top(self, logits: torch.Tensor, lse: torch.Tensor, inv_t: torch.Tensor, seqs: list[Seq]) -> list | None:
        k = max(s.req.params.top_logprobs for s in seqs)
        if k == 0:
            return None
        vals, ids = logits.topk(k, dim=-1)
        vals = vals * inv_t[:, None] - lse[:, None]
        return [list(zip(i, v)) for i, v in zip(ids.tolist(), vals.tolist())]

    def _fill_masks(self, seqs: list[Seq]) -> None:
        """Writes each guided sequence's next-token allow-list into its slot's bitmask."""
        if not seqs:
            return
        mask = self.grammars.bitmask(len(seqs))
        for i, s in enumerate(seqs):
            s.matcher.fill_next_token_bitmask(mask, i)
        self.dec.bitmask[torch.tensor([s.slot for s in seqs], device=self.dec.device)] = mask.to(self.dec.device)

    def _may_overlap(self, window: Window, admitted: bool) -> bool:
        """Whether to launch the next window before reading `window`: not while requests wait for
        slots or commands for the thread (they come first), nor right after admitting requests
        (more tend to follow: the rest of a burst, the next turns of a group, and a window launched
        ahead would hold back their prefill by a window), nor under a grammar (its next mask
        depends on the token just drawn). Measured in benches/RESULTS.md."""
        return self.overlap and not admitted and not window.guided and not self.pending and not self.commands

    def _launch(self, ahead: Window | None) -> Window | None:
        """Enqueues a decode window over the active rows, and the copy of its tokens to the host;
        nothing waits for the device. With `ahead` (a window launched, not yet read) the rows are
        that window's tokens further on; None if none of them has room left.

        Launching ahead is safe because one stream orders everything: rows that finish inside
        `ahead` run one more window, writing past the tokens their slot keeps (dropped, like the
        tail of a window); requests admitted meanwhile prefill after it."""
        dec = self.dec
        seqs = list(self.active.values())
        # tokens a row has on the device, not yet read (rows admitted since `ahead` have none)
        unread = {id(s): ahead.k for s in ahead.seqs} if ahead is not None else {}
        left = max(
            min(s.req.params.max_tokens - len(s.out.token_ids), dec.max_len - s.length) - unread.get(id(s), 0)
            for s in seqs
        )
        if ahead is not None and left <= 0:
            return None
        b = self._width()
        guided = any(s.matcher is not None for s in seqs)
        # a grammar's next mask depends on the token just drawn: guided batches sync every token
        k = 1 if guided else max(1, min(dec.lookahead if dec.use_graphs else 1, left))
        # rows past the cache have finished (they are clamped to the idle position)
        L = dec.context_width(min(max(s.length + unread.get(id(s), 0) for s in seqs) + k, dec.cache_len))
        use_top_p = any(s.req.params.top_p < 1 for s in seqs)
        want_top = max(s.req.params.top_logprobs for s in seqs)
        toks, lps, vals, ids = [], [], [], []
        for _ in range(k):
            tok, lp, logits, lse, inv_t = dec.step(b, L, use_top_p, guided)
            toks.append(tok.clone())
            lps.append(lp.clone())
            if want_top:
                v, i = logits.topk(want_top, dim=-1)
                vals.append(v * inv_t[:, None] - lse[:, None])
                ids.append(i)
        out = [torch.stack(toks, 1), torch.stack(lps, 1)]
        if want_top:
            out += [torch.stack(vals, 1), torch.stack(ids, 1)]
        event = None
        if dec.device.type == "cuda":
            out = [t.to("cpu", non_blocking=True) for t in out]  # pinned by the copy: no sync
            event = torch.cuda.Event()
            event.record()
        self.stats.windows += 1
        self.stats.windows_ahead += ahead is not None
        self.stats.decode_steps += k
        self.stats.decode_rows += k * b
        return Window(seqs, k, guided, out, event)

    def _collect(self, window: Window) -> None:
        """Reads a launched window's tokens (the one host sync of a window) and appends them."""
        if window.event is not None:
            window.event.synchronize()
        toks_h, lps_h, *tops = (t.tolist() for t in window.out)
        for s in window.seqs:
            for j in range(window.k):
                if s.out.finish_reason is not None:
                    break
                top = list(zip(tops[1][s.slot][j], tops[0][s.slot][j])) if tops else None
                self._append(s, toks_h[s.slot][j], lps_h[s.slot][j], top)
        self._fill_masks([s for s in window.seqs if s.matcher is not None and s.out.finish_reason is None])

    def _width(self) -> int:
        """The rows a decode step runs: [0, highest busy slot], rounded up to a batch bucket with
        graphs (0: none)."""
        return self.dec.batch_width(max(self.active) + 1) if self.active else 0

    def _append(self, s: Seq, tok: int, lp: float, top: list | None) -> None:
        p = s.req.params
        s.out.token_ids.append(tok)
        s.out.logprobs.append(lp)
        if s.matcher is not None and not s.matcher.accept_token(tok):
            # the mask allowed nothing (the schema has a dead end), or xgrammar disagrees with itself
            self._fail(s.req, GrammarError(len(s.out.token_ids) - 1, tok))
            return
        if p.top_logprobs and top is not None:
            s.out.top_logprobs.append(top[: p.top_logprobs])
        if tok in self.eos_ids and not p.ignore_eos:
            s.out.finish_reason = "stop"
        elif p.stop_check is not None and p.stop_check(s.out.token_ids):
            s.out.finish_reason = "stop"
        elif len(s.out.token_ids) >= p.max_tokens or s.length >= self.dec.max_len:
            s.out.finish_reason = "length"
        if s.out.finish_reason is not None:
            self._retire(s)

    def _retire(self, s: Seq) -> None:
        if self.cache is not None:  # the row keeps every token but the last (never fed back)
            tokens = s.req.prompt + s.out.token_ids[:-1]
            self.cache.hold(s.slot, tokens, block_hashes(tokens, s.req.key, s.req.hashes))
        self._release(s.slot)
        with self.cv:
            req = s.req
            req.done += 1
            if req.done == req.n:
                if req.adapter_slot >= 0:
                    self.bank_refs[req.adapter_slot] -= 1
                res = Result([q.out for q in req.seqs], len(req.prompt), req.t_submit, req.t_first, time.perf_counter())
                req.future.set_result(res)

    def _release(self, slot: int) -> None:
        """Frees a slot: idle rows decode greedily at the idle position, harmlessly."""
        self.active.pop(slot, None)  # a row whose request failed during its prefill never ran
        dec = self.dec
        dec.temp[slot] = 0.0
        dec.pos[slot] = dec.idle_pos
        dec.lora[slot] = -1
        dec.bitmask[slot] = -1
        with self.cv:
            heapq.heappush(self.free_slots, slot)

    def _fail(self, req: Request, err: Exception) -> None:
        """Ends one request with `err` and frees its rows; the rest of the batch goes on (issue 29:
        one request's grammar failure used to fail every request decoding beside it)."""
        for s in req.seqs:
            if s.out.finish_reason is None:
                s.out.finish_reason = "error"
                self._release(s.slot)  # the prefix cache keeps its prompt, computed as any other
        with self.cv:
            if req.adapter_slot >= 0:
                self.bank_refs[req.adapter_slot] -= 1
        req.future.set_exception(err)

    def _fail_all(self, err: Exception) -> None:
        reqs = {id(s.req): s.req for s in self.active.values()}
        for slot in list(self.active):
            del self.active[slot]
            heapq.heappush(self.free_slots, slot)
            if self.cache is not None:  # the failure may have left its row half written
                self.cache.keep(slot, 0)
        for req in reqs.values():
            if req.adapter_slot >= 0:
                self.bank_refs[req.adapter_slot] -= 1
            if not req.future.done():
                req.future.set_exception(err)
