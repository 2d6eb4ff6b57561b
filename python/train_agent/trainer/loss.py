"""The training objectives, on flat vectors of the tokens the policy generated.

Every function here takes 1-D tensors with one entry per trained token (the positions where the
loss mask is 1), so the math reads like the papers:

    ratio   = exp(logp_new - logp_old)
    pg      = -min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)      PPO / DAPO clip-higher
    kl      = min(exp(ref - new) - (ref - new) - 1, KL_TOKEN_LIMIT)            k3 estimator, >= 0
    loss    = sum_t w_t * (pg_t + beta * kl_t)                                 GRPO
    loss    = sum_t w_t * -logp_new_t                                          SFT

Samples drawn by an older policy than the trainer's (asynchronous GRPO: the engine plays step n+1
while the trainer updates on step n) take the decoupled form (AReaL) with a truncated importance
weight (Yao et al., "Your efficient RL framework secretly brings you off-policy RL training"):

    prox    = logp_new, detached               the trainer's policy before this update
    ratio   = exp(logp_new - prox)             clipped as above
    is      = min(exp(prox - logp_behav), C)   no gradient; logp_behav the sampler's
    pg      = -is * min(ratio * A, clip(ratio) * A)

The per-token weights `w` come from `token_weights` and are computed from the counts of the WHOLE
step, so splitting a step over micro-batches or ranks and summing the pieces gives exactly the loss
(and gradient) of the unsplit step:

    token-mean                 w = 1 / N_tokens            (DAPO)
    seq-mean-token-sum-norm    w = 1 / (N_seqs * L_norm)   (Dr. GRPO, L_norm a constant)
    seq-mean-token-mean        w = 1 / (N_seqs * len_seq)  (GRPO)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _seq_mean_token_sum_norm(lengths: list[int], max_len_norm: float | None) -> list[float]:
    if not max_len_norm:
        raise ValueError("aggregation seq-mean-token-sum-norm needs max_len_norm (Dr. GRPO's constant)")
    return [1.0 / (len(lengths) * max_len_norm)] * len(lengths)


# The dispatch on `loss.aggregation`. Its names are Rust's (ta_trainer::Aggregation, which owns the
# allowed values); tests/test_contract.py checks that these keys are exactly those.
AGGREGATIONS = {
    "token-mean": lambda lengths, _: [1.0 / max(sum(lengths), 1)] * len(lengths),
    "seq-mean-token-sum-norm": _seq_mean_token_sum_norm,
    "seq-mean-token-mean": lambda lengths, _: [1.0 / (len(lengths) * max(n, 1)) for n in lengths],
}


def token_weights(lengths: list[int], aggregation: str, max_len_norm: float | None = None) -> list[float]:
    """The weight of each trained token of each sequence, given every sequence's count of trained
    tokens in the step. Returns one weight per sequence (all its tokens share it)."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {aggregation!r}; expected one of {', '.join(AGGREGATIONS)}")
    return AGGREGATIONS[aggregation](lengths, max_len_norm)


def softcap_logits(logits: torch.Tensor, softcap: float | None) -> torch.Tensor:
    """Gemma 2's final-logit soft-cap, `cap * tanh(logits / cap)` (before any temperature), in the
    order of operations of transformers' head and the engine's (engine.decoder.Decoder.logits); None: as is."""
    if softcap is None:
        return logits
    return torch.tanh(logits / softcap) * softcap


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor):
    """Log-probability of each target token and the entropy of its distribution (no gradient).
    logits (M, V) are the rows that predict targets (M,); computed in float32."""
    logp_all = F.log_softmax(logits.float(), dim=-1)
    logp = logp_all.gather(-1, targets[:, None]).squeeze(-1)
    with torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


# Rows of float32 logits one chunk of `linear_token_logprobs` materializes, as a byte budget:
# 512 MiB is ~880 tokens over Qwen2.5's 152k vocabulary, large enough for full-speed matmuls.
LOGIT_CHUNK_BYTES = 512 << 20


class _LinearTokenLogprobs(torch.autograd.Function):
    """`log_softmax(cap(h @ W.T + b) / T)[target]` chunked over rows, so no [M, V] tensor outlives a
    chunk (`cap` the optional final-logit soft-cap, y = c * tanh(z / c); without it, y = z).

    Each logprob depends on its own hidden row only, so its gradient is a per-row vector that the
    forward pass can finish. With z = W h_i + b, y = cap(z), p_i = softmax(y / T):

        d logp_i / d y_v = (1[v = t_i] - p_iv) / T          d y_v / d z_v = s_v = 1 - tanh^2(z_v / c)
        d logp_i / d h_i = sum_v (1[v = t_i] - p_iv) s_v W[v] / T = (s_t W[t_i] - (p_i * s) @ W) / T

    and without the cap s = 1: (W[t_i] - p_i @ W) / T. Forward stores that [M, d] Jacobian (small: d,
    not V, per token) and backward scales it by the incoming per-token gradient. The matmul count
    equals autograd's (logits, then p @ W in place of grad_logits @ W) with no recompute, unlike
    checkpointing the head (Liger's fused linear cross-entropy does the same for its loss; here the
    loss is applied later, to the logprobs). The head weight and bias are constants: the trainer's
    head is frozen (an adapted head takes `token_logprobs`). The arithmetic is float32 (float64 for
    float64 inputs, which the gradient check uses)."""

    @staticmethod
    def forward(ctx, h, weight, bias, targets, temperature, chunk_rows, softcap=None):
        with torch.autocast(h.device.type, enabled=False):  # the head runs in float32 under bf16-mixed
            return _LinearTokenLogprobs._forward(ctx, h, weight, bias, targets, temperature, chunk_rows, softcap)

    @staticmethod
    def _forward(ctx, h, weight, bias, targets, temperature, chunk_rows, softcap):
        acc = torch.promote_types(h.dtype, torch.float32)
        w32 = weight.to(acc)
        b32 = None if bias is None else bias.to(acc)
        need_grad = ctx.needs_input_grad[0]
        logp = torch.empty(h.shape[0], dtype=acc, device=h.device)
        entropy = torch.empty_like(logp)
        jac = torch.empty(h.shape, dtype=acc, device=h.device) if need_grad else None
        for start in range(0, h.shape[0], chunk_rows):
            rows = slice(start, start + chunk_rows)
            t = targets[rows]
            logits = F.linear(h[rows].to(acc), w32, b32)
            if softcap is not None:
                th = logits.div_(softcap).tanh_()  # in place: tanh(z / c), kept for the gradient
                logits = th * softcap
            if temperature != 1.0:
                logits /= temperature
            logq = logits.sub_(logits.logsumexp(-1, keepdim=True))  # in place: log-softmax
            logp[rows] = logq.gather(-1, t[:, None])[:, 0]
            p = logq.exp()
            entropy[rows] = -(p * logq).sum(-1)
            if need_grad:
                if softcap is None:
                    jac[rows] = (w32[t] - p @ w32) / temperature
                else:
                    del logits, logq  # free the log-softmax: the gradient needs only tanh and p
                    s = th.square_().neg_().add_(1)  # in place: 1 - tanh^2(z / c) = dy/dz
                    s_t = s.gather(-1, t[:, None])
                    jac[rows] = (s_t * w32[t] - p.mul_(s) @ w32) / temperature
        ctx.save_for_backward(jac)
        ctx.h_dtype = h.dtype
        ctx.mark_non_differentiable(entropy)
        return logp, entropy

    @staticmethod
    def backward(ctx, grad_logp, _grad_entropy):
        (jac,) = ctx.saved_tensors
        return (jac * grad_logp[:, None]).to(ctx.h_dtype), None, None, None, None, None, None


def linear_token_logprobs(
    h: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    temperature: float = 1.0,
    chunk_rows: int | None = None,
    softcap: float | None = None,
):
    """`token_logprobs(softcap_logits(F.linear(h, W, b).float(), softcap) / temperature, targets)`
    without materializing the [M, V] float32 logits (the trainer's memory peak over a 152k
    vocabulary): chunks of `chunk_rows` rows (default: LOGIT_CHUNK_BYTES of logits). `softcap` is
    the model's final-logit soft-cap (Gemma 2's `final_logit_softcapping`), applied before the
    temperature as the engine applies it. Gradients flow to `h` only."""
    if torch.is_grad_enabled() and (weight.requires_grad or (bias is not None and bias.requires_grad)):
        raise ValueError("linear_token_logprobs treats the output head as a constant, but it requires grad")
    if chunk_rows is None:
        chunk_rows = max(1, LOGIT_CHUNK_BYTES // (4 * weight.shape[0]))
    return _LinearTokenLogprobs.apply(h, weight, bias, targets, temperature, chunk_rows, softcap)


LOG_RATIO_LIMIT = 20.0
KL_TOKEN_LIMIT = 10.0


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference): exp(ref - new) - (ref - new) - 1, bounded
    as verl bounds its `low_var_kl`: the log-ratio to +-LOG_RATIO_LIMIT and each token's estimate to
    KL_TOKEN_LIMIT. Unbounded, one token the policy has all but ruled out and the reference has not
    outweighs the whole step: its exp(ref - new) dominates the step's mean KL and, through the
    gradient 1 - exp(ref - new), the clipped gradient norm, so the update is spent on that token
    (benches/RESULTS.md, run 24). A token past the bound gets no KL gradient, as in verl; the policy
    term still moves it."""
    d = (ref_logp - logp).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    return (torch.exp(d) - d - 1).clamp(max=KL_TOKEN_LIMIT)


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
        stats = dict(
            policy_loss=policy_loss.detach(),
            kl_sum=kl.detach().sum(),
            clip_low=clip_low,
            clip_high=clip_high,
            ratio_sum=ratio.detach().sum(),
        )
    return loss, stats


def off_policy_grpo_loss(
    logp,
    behav_logp,
    advantages,
    weights,
    eps_low: float,
    eps_high: float,
    importance_cap: float,
    ref_logp=None,
    beta: float = 0.0,
):
    """`grpo_loss` for samples an older policy drew: the trust region is taken around the trainer's
    own policy before this update (`prox`, which is `logp` itself: every micro-batch of a step is
    computed before its one optimizer step), and each token is reweighted by the truncated
    importance ratio min(prox / behav, importance_cap) of that policy to the sampler's. The stats add
    is_weight_sum and is_truncated (tokens whose weight the cap cut)."""
    prox = logp.detach()
    log_is = (prox - behav_logp).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    is_weight = torch.exp(log_is).clamp(max=importance_cap)
    loss, stats = grpo_loss(logp, prox, advantages * is_weight, weights, eps_low, eps_high, ref_logp, beta)
    with torch.no_grad():
        stats.update(is_weight_sum=is_weight.sum(), is_truncated=(log_is > math.log(importance_cap)).sum())
    return loss, stats


def sft_loss(logp, weights):
    """Weighted negative log-likelihood of the trained tokens."""
    loss = -(weights * logp).sum()
    return loss, dict(policy_loss=loss.detach())
