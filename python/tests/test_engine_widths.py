"""The widths of a decode step (batch rows b, context positions L) on the tiny random Llama (CPU):
eager steps run exactly the busy rows and the positions they need, graph steps a bucket."""

from __future__ import annotations

import torch

from train_agent.engine.decoder import Decoder
from train_agent.engine.requests import SamplingParams
from train_agent.engine.scheduler import Generator
from train_agent.models import ModelSource, load_model


def test_eager_steps_run_the_busy_rows_and_the_positions_they_need(tiny_model_dir):
    dec = Decoder(load_model(ModelSource.parse(str(tiny_model_dir)), "cpu", torch.float32), num_slots=8, max_len=512)
    steps: list[tuple[int, int, int]] = []  # (b, L, longest busy row's position)
    step = dec.step

    def recording(b, L, use_top_p, guided=False):
        steps.append((b, L, int(dec.pos[:b][dec.pos[:b] != dec.idle_pos].max())))
        return step(b, L, use_top_p, guided)

    dec.step = recording
    gen = Generator(dec, eos_ids=set(), prefix_caching=False)
    prompts = [
        torch.randint(100, 30000, (n,), generator=torch.Generator().manual_seed(n)).tolist() for n in (30, 41, 52)
    ]
    try:
        futs = [gen.submit(p, 1, SamplingParams(max_tokens=6, temperature=0.0)) for p in prompts]
        outs = [f.result().completions[0].token_ids for f in futs]
    finally:
        gen.close()
    assert all(len(o) == 6 for o in outs)
    assert steps
    # three requests hold slots 0-2: never the 4-row bucket, never past the busy rows
    assert max(b for b, _, _ in steps) == 3
    # each step attends over its longest row's positions (and the scheduler's one spare), not the
    # 128-position bucket
    assert all(top < L <= top + 2 for _, L, top in steps), steps


def test_graph_steps_round_up_to_a_bucket(tiny_model_dir):
    dec = Decoder(load_model(ModelSource.parse(str(tiny_model_dir)), "cpu", torch.float32), num_slots=8, max_len=512)
    assert (dec.batch_width(3), dec.context_width(53)) == (3, 53)
    dec.use_graphs = True  # the widths only; nothing is captured
    assert (dec.batch_width(3), dec.context_width(53), dec.context_width(129)) == (4, 128, 256)
    assert dec.context_width(dec.cache_len) == dec.cache_len
