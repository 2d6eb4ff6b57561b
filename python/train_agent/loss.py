"""The training objectives, on flat vectors of the tokens the policy generated.

Every function here takes 1-D tensors with one entry per trained token (the positions where the
loss mask is 1), so the math reads like the papers:

    ratio   = exp(logp_new - logp_old)
    pg      = -min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)      PPO / DAPO clip-higher
    kl      = exp(ref - new) - (ref - new) - 1                                 k3 estimator, >= 0
    loss    = sum_t w_t * (pg_t + beta * kl_t)                                 GRPO
    loss    = sum_t w_t * -logp_new_t                                          SFT

The per-token weights `w` come from `token_weights` and are computed from the counts of the WHOLE
step, so splitting a step over micro-batches or ranks and summing the pieces gives exactly the loss
(and gradient) of the unsplit step:

    token-mean                 w = 1 / N_tokens            (DAPO)
    seq-mean-token-sum-norm    w = 1 / (N_seqs * L_norm)   (Dr. GRPO, L_norm a constant)
    seq-mean-token-mean        w = 1 / (N_seqs * len_seq)  (GRPO)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

AGGREGATIONS = ("token-mean", "seq-mean-token-sum-norm", "seq-mean-token-mean")


def token_weights(lengths: list[int], aggregation: str, max_len_norm: float | None = None) -> list[float]:
    """The weight of each trained token of each sequence, given every sequence's count of trained
    tokens in the step. Returns one weight per sequence (all its tokens share it)."""
    n_seqs, n_tokens = len(lengths), sum(lengths)
    if aggregation == "token-mean":
        return [1.0 / max(n_tokens, 1)] * n_seqs
    if aggregation == "seq-mean-token-sum-norm":
        if not max_len_norm:
            raise ValueError("aggregation seq-mean-token-sum-norm needs max_len_norm (Dr. GRPO's constant)")
        return [1.0 / (n_seqs * max_len_norm)] * n_seqs
    if aggregation == "seq-mean-token-mean":
        return [1.0 / (n_seqs * max(n, 1)) for n in lengths]
    raise ValueError(f"unknown aggregation {aggregation!r}; expected one of {', '.join(AGGREGATIONS)}")


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor):
    """Log-probability of each target token and the entropy of its distribution (no gradient).
    logits (M, V) are the rows that predict targets (M,); computed in float32."""
    logp_all = F.log_softmax(logits.float(), dim=-1)
    logp = logp_all.gather(-1, targets[:, None]).squeeze(-1)
    with torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference): exp(ref - new) - (ref - new) - 1."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


LOG_RATIO_LIMIT = 20.0


def grpo_loss(logp, old_logp, advantages, weights, eps_low: float, eps_high: float, ref_logp=None, beta: float = 0.0):
    """Clipped policy-gradient loss (+ beta * KL). All arguments are flat per-token vectors.
    Returns (loss, stats) where stats holds weighted sums and counts that add up over micro-batches
    and ranks: policy_loss, kl_sum, clip_low, clip_high, ratio_sum."""
    # The log-ratio is clamped (as verl does) so a token the sampler found near-impossible cannot
    # overflow the ratio, or its gradient, to inf: with a negative advantage the unclipped term wins.
    ratio = torch.exp((logp - old_logp).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT))
    clipped = ratio.clamp(1 - eps_low, 1 + eps_high)
    pg = -torch.minimum(ratio * advantages, clipped * advantages)
    policy_loss = (weights * pg).sum()
    loss = policy_loss
    kl = torch.zeros_like(logp)
    if ref_logp is not None:
        kl = kl_k3(logp, ref_logp)
        if beta:
            loss = loss + beta * (weights * kl).sum()
    with torch.no_grad():
        # a token is clipped when the clipped term wins the min, i.e. its gradient is zero
        clip_low = ((ratio < 1 - eps_low) & (advantages < 0)).sum()
        clip_high = ((ratio > 1 + eps_high) & (advantages > 0)).sum()
        stats = dict(policy_loss=policy_loss.detach(), kl_sum=kl.detach().sum(), clip_low=clip_low,
                     clip_high=clip_high, ratio_sum=ratio.detach().sum())
    return loss, stats


def sft_loss(logp, weights):
    """Weighted negative log-likelihood of the trained tokens."""
    loss = -(weights * logp).sum()
    return loss, dict(policy_loss=loss.detach())
