"""The chunked Triton sampler (fused_sampling.py) against sampling.sample, the reference it replaces
at decode steps without top-p: the same tokens, logprobs, logsumexps and inverse temperatures, for
greedy and sampled rows, raw and processed logprobs, with and without a grammar bitmask, over a
vocabulary that ends in a partial chunk. Without CUDA the kernels run in Triton's interpreter
(conftest.py sets TRITON_INTERPRET before any module imports them)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from train_agent.engine.kernels.fused_sampling import CHUNK, sample_chunked, with_chunked_sampling  # noqa: E402
from train_agent.engine.sampling import sample  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
V = 2 * CHUNK + 1811  # three chunks, the last one partial


def rows(n_pos: int):
    """Logits of 6 rows at `n_pos` positions each: temperatures 0 (greedy), 0.5, 1 and 1.7, and a
    greedy row whose maximum appears in two chunks (the first index wins)."""
    g = torch.Generator().manual_seed(0)
    temps = torch.tensor([0.0, 0.5, 1.0, 1.7, 1.0, 0.0])
    logits = torch.randn(6, V, generator=g) * 3
    logits[5, 100] = logits[5, CHUNK + 7] = 40.0
    b = 6 * n_pos
    return (
        logits.repeat(n_pos, 1).to(DEVICE),
        temps.repeat(n_pos).to(DEVICE),
        torch.arange(b, device=DEVICE) % 3 * 1_000_003 + 17,  # seeds shared by rows, as n>1 samples are not
        torch.arange(b, device=DEVICE) // 6 * 5 + 100,
    )


@pytest.mark.parametrize("guided", [False, True], ids=["free", "guided"])
@pytest.mark.parametrize("processed", [False, True], ids=["raw", "processed"])
def test_chunked_sampler_matches_the_reference(processed, guided):
    logits, temp, seed, pos = rows(n_pos=8)
    b = logits.shape[0]
    bitmask = None
    if guided:
        bitmask = torch.randint(
            -(2**31), 2**31 - 1, (b, (V + 31) // 32), generator=torch.Generator().manual_seed(1), dtype=torch.int32
        ).to(DEVICE)
        bitmask[::4] = -1  # some rows unconstrained
        bitmask[5::6] = -1  # the tie row keeps both maxima
    top_p = torch.ones(b, device=DEVICE)

    want = sample(logits, temp, top_p, seed, pos, False, processed, bitmask)
    got = sample_chunked(logits, temp, seed, pos, processed, bitmask)

    assert got[0].tolist() == want[0].tolist()
    for g, w in zip(got[1:], want[1:]):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    # the draws are not all one token: the uniform and the chunk walk are exercised
    drawn = got[0][temp > 0]
    assert len(set(drawn.tolist())) > len(drawn) // 2
    assert {int(t) // CHUNK for t in drawn} == {0, 1, 2}
    assert (got[0][5::6] == 100).all()
    if guided:
        allowed = (bitmask[torch.arange(b), got[0] // 32] >> (got[0] % 32)) & 1
        assert allowed.bool().all()


def test_top_p_steps_go_to_the_nucleus_sampler():
    logits, temp, seed, pos = rows(n_pos=1)
    top_p = torch.full((6,), 0.3, device=DEVICE)
    run = with_chunked_sampling(sample)
    want = sample(logits, temp, top_p, seed, pos, True)
    got = run(logits, temp, top_p, seed, pos, True)
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    free = run(logits, temp, top_p, seed, pos, False)
    assert free[0].tolist() == sample(logits, temp, top_p, seed, pos, False)[0].tolist()
