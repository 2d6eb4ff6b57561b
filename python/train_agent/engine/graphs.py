"""CUDA-graph capture for the fast decoder (a mixin of decoder.Decoder): the decode step is captured
once per (batch bucket, context bucket, top-p, guided) and the extend step once per (tokens bucket,
context bucket), then each is replayed with a single launch. Captured graphs read and write the
decoder's fixed buffers only (KV cache, slot state, LoRA banks), which is what keeps them valid."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


class GraphCapture:
    """`use_graphs`, `graphs` (key -> (graph, outputs)), their memory `pool`, and how many were
    captured (`captured`, in `capture_s` seconds: SlotState starts both at zero)."""

    use_graphs = False

    def _init_graphs(self, use_graphs: bool) -> None:
        self.use_graphs = use_graphs
        self.graphs: dict[tuple, tuple] = {}
        self.pool = torch.cuda.graph_pool_handle() if use_graphs else None

    def _replay(self, key: tuple, run: Callable[[], object], reset: Callable[[], None] = lambda: None):
        """The outputs of `run`'s graph under `key`, captured on first use, replayed."""
        if key not in self.graphs:
            self.graphs[key] = self._capture(run, reset)
        graph, out = self.graphs[key]
        graph.replay()
        return out

    def step(self, b: int, L: int, use_top_p: bool, guided: bool = False):
        """As SlotState.step; on CUDA each (b, L, use_top_p, guided) is captured once as a CUDA graph
        and replayed."""
        if not self.use_graphs:
            return self._step(b, L, use_top_p, guided)
        key = (b, L, use_top_p, guided)
        state = [t.clone() for t in (self.tok, self.pos)] if key not in self.graphs else None

        def reset():  # the warm-up steps advanced the rows
            self.tok.copy_(state[0])
            self.pos.copy_(state[1])

        return self._replay(key, lambda: self._step(*key), reset)

    def _capture(self, run: Callable[[], object], reset: Callable[[], None] = lambda: None):
        """(graph, outputs) of `run` captured after two warm-up runs, each followed by `reset`."""
        t0 = time.perf_counter()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm up (compiles kernels, sets up cuBLAS workspaces)
            for _ in range(2):
                run()
                reset()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            out = run()
        torch.cuda.synchronize()
        self.captured += 1
        self.capture_s += time.perf_counter() - t0
        return graph, out
