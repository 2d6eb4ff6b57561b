"""Token sampling on the device, with no host sync and no generator state.

Randomness is a counter-based hash of (sequence seed, position), not a torch.Generator: the draw
for a token depends only on the request's seed and where the token sits, so the same seed gives
the same completion whether the request ran alone or batched with others, and the whole sampler
can live inside a captured CUDA graph. One uniform per row picks a token by inverse CDF (softmax,
cumsum, searchsorted): three passes over the vocabulary instead of one random number per entry.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from train_agent.engine.guided import apply_bitmask


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


def _draw(probs: torch.Tensor, u: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """Inverse-CDF draw in two levels: pick a block of `block` tokens by the cumsum of block sums,
    then a token inside it: a full-vocabulary cumsum is a slow scan."""
    b, V = probs.shape
    pad = -V % block
    P = F.pad(probs, (0, pad)).view(b, -1, block)
    cum = P.sum(-1).cumsum(-1)  # [b, blocks]
    target = u * cum[:, -1:]
    j = torch.searchsorted(cum, target, right=True).clamp_(max=cum.shape[1] - 1)
    before = torch.where(j > 0, cum.gather(-1, (j - 1).clamp(min=0)), torch.zeros_like(target))
    inner = P.gather(1, j[:, :, None].expand(b, 1, block))[:, 0].cumsum(-1)  # [b, block]
    k = torch.searchsorted(inner, target - before, right=True).clamp_(max=block - 1)
    return (j * block + k)[:, 0].clamp_(max=V - 1)


LOGPROBS_MODES = ("raw_logprobs", "processed_logprobs")


def sample(
    logits: torch.Tensor,
    temp: torch.Tensor,
    top_p: torch.Tensor,
    seed: torch.Tensor,
    pos: torch.Tensor,
    use_top_p: bool,
    processed: bool = False,
    bitmask: torch.Tensor | None = None,
):
    """Returns (token [b], its logprob [b], logsumexp [b], inverse temperature [b]); the logprob of any
    token v is `logits[v] * inv_t - lse` (top logprobs use the same formula).

    Logprobs are vLLM's `logprobs_mode`: "raw_logprobs" (processed=False) are of the model's own
    distribution, before temperature, top-p and any grammar mask, as vLLM reports them by default;
    "processed_logprobs" are of the temperature-scaled distribution `softmax(logits / T)` that the
    token was drawn from (greedy rows: T = 1), which is what the trainer computes with its
    `loss.temperature` (docs/training.md). Top-p truncation and the grammar mask are in neither: the
    trainer cannot reproduce them. temp == 0 means greedy. `bitmask` (xgrammar's packed allow-list,
    guided.py) restricts what is drawn. `use_top_p` is static so graphs without nucleus sampling skip
    the vocabulary sort."""
    t = torch.where(temp > 0, temp, torch.ones_like(temp))
    inv_t = t.reciprocal() if processed else torch.ones_like(t)
    scaled = logits.float() * inv_t[:, None]
    lse = scaled.logsumexp(-1)
    policy = scaled if bitmask is None else apply_bitmask(scaled, bitmask)
    probs = (policy if processed else policy / t[:, None]).softmax(-1)
    u = uniform(seed, pos)[:, None]
    if use_top_p:
        probs, order = probs.sort(dim=-1, descending=True)
        keep = (probs.cumsum(-1) - probs) < top_p[:, None]  # the top token is always kept
        drawn = order.gather(-1, _draw(probs * keep, u)[:, None])[:, 0]
    else:
        drawn = _draw(probs, u)
    tok = torch.where(temp > 0, drawn, policy.argmax(-1))
    return tok, scaled.gather(-1, tok[:, None])[:, 0] - lse, lse, inv_t
