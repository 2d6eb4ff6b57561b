"""Token sampling on the device, with no host sync and no generator state.

Randomness is a counter-based hash of (sequence seed, position), not a torch.Generator: the draw
for a token depends only on the request's seed and where the token sits, so the same seed gives
the same completion whether the request ran alone or batched with others, and the whole sampler
can live inside a captured CUDA graph. One uniform per row picks a token by inverse CDF (softmax,
cumsum, searchsorted): three passes over the vocabulary instead of one random number per entry.
"""

from __future__ import annotations

import torch

def _shr(x: torch.Tensor, n: int) -> torch.Tensor:
    """Logical right shift of int64 (torch's >> is arithmetic)."""
    return (x >> n) & ((1 << (64 - n)) - 1)


def mix64(x: torch.Tensor) -> torch.Tensor:
    """splitmix64's finaliser on int64 tensors (multiplication wraps modulo 2^64)."""
    x = (x ^ _shr(x, 30)) * -4658895280553007687  # 0xBF58476D1CE4E5B9 as int64
    x = (x ^ _shr(x, 27)) * -7723592293110705685  # 0x94D049BB133111EB as int64
    return x ^ _shr(x, 31)


def uniform(seed: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """A deterministic uniform in (0, 1) per row from (seed, position)."""
    x = mix64(seed * -7046029254386353131 + pos)  # 0x9E3779B97F4A7C15
    return (_shr(x, 40).float() + 0.5) / float(1 << 24)


def derive_seed(seed: int, index: int) -> int:
    """The seed of sample `index` of a request (n>1 samples must differ)."""
    x = mix64(torch.tensor([(seed * 1_000_003 + index) & ((1 << 63) - 1)], dtype=torch.long))
    return int(x.item()) & ((1 << 62) - 1)


def sample(logits: torch.Tensor, temp: torch.Tensor, top_p: torch.Tensor, seed: torch.Tensor,
           pos: torch.Tensor, use_top_p: bool):
    """Returns (token [b], its logprob [b], all logprobs [b, vocab]).

    Logprobs are of the model's raw distribution (before temperature and top-p), as vLLM reports
    them by default. temp == 0 means greedy. `use_top_p` is static so graphs without nucleus
    sampling skip the vocabulary sort."""
    logits = logits.float()
    logprobs = logits.log_softmax(-1)
    t = torch.where(temp > 0, temp, torch.ones_like(temp))
    probs = (logits / t[:, None]).softmax(-1)
    u = uniform(seed, pos)[:, None]
    if use_top_p:
        probs, order = probs.sort(dim=-1, descending=True)
        keep = (probs.cumsum(-1) - probs) < top_p[:, None]  # the top token is always kept
        cdf = (probs * keep).cumsum(-1)
        idx = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).clamp_(max=probs.shape[-1] - 1)
        drawn = order.gather(-1, idx)[:, 0]
    else:
        cdf = probs.cumsum(-1)
        drawn = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).clamp_(max=probs.shape[-1] - 1)[:, 0]
    tok = torch.where(temp > 0, drawn, logits.argmax(-1))
    return tok, logprobs.gather(-1, tok[:, None])[:, 0], logprobs
