"""The objectives against numbers worked out by hand (no model)."""

import math

import pytest
import torch
import torch.nn.functional as F

from train_agent.trainer.loss import (
    KL_TOKEN_LIMIT,
    LOG_RATIO_LIMIT,
    grpo_loss,
    kl_k3,
    linear_token_logprobs,
    off_policy_grpo_loss,
    sft_loss,
    softcap_logits,
    token_logprobs,
    token_weights,
)


def approx(x, rel=1e-6, abs=1e-7):
    return pytest.approx(x, rel=rel, abs=abs)


def test_token_weights_by_hand():
    # two sequences with 3 and 1 trained tokens
    assert token_weights([3, 1], "token-mean") == approx([1 / 4, 1 / 4])
    assert token_weights([3, 1], "seq-mean-token-sum-norm", max_len_norm=8) == approx([1 / 16, 1 / 16])
    assert token_weights([3, 1], "seq-mean-token-mean") == approx([1 / 6, 1 / 2])
    with pytest.raises(ValueError, match="max_len_norm"):
        token_weights([3, 1], "seq-mean-token-sum-norm")
    with pytest.raises(ValueError, match="unknown aggregation"):
        token_weights([3, 1], "mean")


@pytest.mark.parametrize(
    "aggregation,expected",
    [
        # per-token losses: sequence 1 = [1, 2, 3], sequence 2 = [4]
        ("token-mean", (1 + 2 + 3 + 4) / 4),  # 2.5
        ("seq-mean-token-mean", ((1 + 2 + 3) / 3 + 4 / 1) / 2),  # 3.0
        ("seq-mean-token-sum-norm", (1 + 2 + 3 + 4) / (2 * 8)),  # 0.625
    ],
)
def test_each_aggregation_of_a_loss(aggregation, expected):
    per_seq = token_weights([3, 1], aggregation, max_len_norm=8)
    w = torch.tensor([per_seq[0]] * 3 + [per_seq[1]])
    # ratio 1 (new == old), so the per-token loss is -A: A = -[1, 2, 3, 4]
    logp = torch.zeros(4)
    loss, _ = grpo_loss(logp, logp.clone(), -torch.tensor([1.0, 2, 3, 4]), w, 0.2, 0.28)
    assert loss.item() == approx(expected)


def test_clipping_with_separate_low_and_high_epsilon():
    ratio = torch.tensor([1.5, 0.5, 1.1, 0.9, 0.5, 1.5])
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])
    logp = torch.log(ratio).requires_grad_()
    old = torch.zeros(6)
    w = torch.full((6,), 1 / 6)
    loss, stats = grpo_loss(logp, old, adv, w, eps_low=0.2, eps_high=0.28)
    # -min(r*A, clip(r, 0.8, 1.28)*A) per token:
    #   1.5, A=+1 -> -min(1.5, 1.28)  = -1.28 (clipped high)
    #   0.5, A=-1 -> -min(-0.5, -0.8) =  0.8  (clipped low)
    #   1.1, A=+1 -> -1.1 ; 0.9, A=-1 -> 0.9 (inside the range)
    #   0.5, A=+1 -> -min(0.5, 0.8)   = -0.5 (unclipped: pushing a low ratio up is allowed)
    #   1.5, A=-1 -> -min(-1.5, -1.28) = 1.5 (unclipped: pushing a high ratio down is allowed)
    assert loss.item() == approx((-1.28 + 0.8 - 1.1 + 0.9 - 0.5 + 1.5) / 6)
    assert stats["clip_high"].item() == 1 and stats["clip_low"].item() == 1
    assert stats["ratio_sum"].item() == approx(1.5 + 0.5 + 1.1 + 0.9 + 0.5 + 1.5)
    loss.backward()
    # d/dlogp of -w*r*A = -w*A*r where unclipped, 0 where clipped
    expected = [0.0, 0.0, -1.1 / 6, 0.9 / 6, -0.5 / 6, 1.5 / 6]
    assert logp.grad.tolist() == approx(expected)


def test_kl_k3_by_hand_and_in_the_loss():
    logp = torch.tensor([0.0, -1.0])
    ref = torch.tensor([math.log(2), -1.0])
    # exp(d) - d - 1 with d = ref - new: d = ln 2 -> 2 - 0.693147 - 1; d = 0 -> 0
    assert kl_k3(logp, ref).tolist() == approx([0.3068528, 0.0])
    w = torch.tensor([0.5, 0.5])
    adv = torch.zeros(2)
    loss, stats = grpo_loss(logp, logp.clone(), adv, w, 0.2, 0.2, ref_logp=ref, beta=0.1)
    assert loss.item() == approx(0.1 * 0.5 * 0.3068528)
    assert stats["kl_sum"].item() == approx(0.3068528)


def test_kl_of_a_token_the_policy_ruled_out_is_bounded_and_leaves_the_rest_of_the_step():
    """A token whose policy logprob fell far below the reference's (here by 25 nats) would give
    exp(25) unbounded and a gradient that outweighs every other token's; bounded, it gives
    KL_TOKEN_LIMIT and no gradient, and the other token's KL gradient is untouched."""
    logp = torch.tensor([-25.0, -1.0], requires_grad=True)
    ref = torch.tensor([0.0, -1.0 + math.log(2)])
    kl = kl_k3(logp, ref)
    assert kl.tolist() == approx([KL_TOKEN_LIMIT, 0.3068528])
    w = torch.tensor([0.5, 0.5])
    loss, stats = grpo_loss(logp, logp.detach().clone(), torch.zeros(2), w, 0.2, 0.2, ref_logp=ref, beta=0.1)
    loss.backward()
    assert stats["kl_sum"].item() == approx(KL_TOKEN_LIMIT + 0.3068528)
    # d/dnew of exp(ref - new) - (ref - new) - 1 = 1 - exp(ref - new): 1 - 2 for the second token
    assert logp.grad.tolist() == approx([0.0, 0.1 * 0.5 * (1 - 2)])


def test_sft_loss_is_weighted_nll():
    logp = torch.tensor([-1.0, -2.0, -3.0])
    loss, _ = sft_loss(logp, torch.full((3,), 1 / 3))
    assert loss.item() == approx(2.0)


def test_token_logprobs_and_entropy_by_hand():
    logits = torch.tensor([[0.0, 0.0, 0.0], [0.0, math.log(3), -1e9]])
    logp, ent = token_logprobs(logits, torch.tensor([2, 1]))
    # uniform over 3: ln(1/3); [1, 3, 0] / 4: ln(3/4)
    assert logp.tolist() == approx([-1.0986123, -0.2876821])
    # ln 3; -(1/4 ln 1/4 + 3/4 ln 3/4)
    assert ent.tolist() == approx([1.0986123, 0.5623351])


def test_log_ratio_is_clamped_so_a_near_impossible_token_cannot_overflow():
    logp = torch.tensor([-0.1, -0.2], requires_grad=True)
    old = torch.tensor([-1000.0, -0.2])  # the sampler saw the first token as near-impossible
    loss, _ = grpo_loss(logp, old, torch.tensor([-1.0, 1.0]), torch.tensor([0.5, 0.5]), 0.2, 0.28)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
    assert abs(loss.item() - 0.5 * math.exp(LOG_RATIO_LIMIT) + 0.5 * 1.0) < 1e-3 * math.exp(LOG_RATIO_LIMIT)


@pytest.mark.parametrize(
    "temperature,bias,softcap", [(1.0, False, None), (0.7, True, None), (1.0, False, 4.0), (0.7, True, 2.5)]
)
def test_chunked_head_matches_full_logits_in_values_and_gradients(temperature, bias, softcap):
    """Against autograd through the whole [M, V] logits, with and without Gemma 2's final-logit
    soft-cap (`cap * tanh(z / cap)` before the temperature)."""
    torch.manual_seed(0)
    M, d, V = 37, 16, 50  # 37 rows in chunks of 8: the last chunk is partial
    h = torch.randn(M, d, requires_grad=True)
    w, b = torch.randn(V, d), torch.randn(V) if bias else None
    targets = torch.randint(0, V, (M,))
    upstream = torch.randn(M)  # a loss that weighs every token differently

    ref_logp, ref_ent = token_logprobs(softcap_logits(F.linear(h, w, b), softcap) / temperature, targets)
    (ref_logp * upstream).sum().backward()
    ref_grad, h.grad = h.grad.clone(), None

    logp, ent = linear_token_logprobs(h, w, b, targets, temperature, chunk_rows=8, softcap=softcap)
    (logp * upstream).sum().backward()
    assert torch.allclose(logp, ref_logp, atol=1e-5)
    assert torch.allclose(ent, ref_ent, atol=1e-5)
    assert torch.allclose(h.grad, ref_grad, atol=1e-5)
    assert h.grad.abs().max() > 0.1
    if softcap is not None:  # the cap binds: logits of std ~4 against a cap of 4 or 2.5
        uncapped, _ = linear_token_logprobs(h, w, b, targets, temperature, chunk_rows=8)
        assert (uncapped - logp).abs().max() > 0.5


@pytest.mark.parametrize("softcap", [None, 1.5])
def test_chunked_head_gradient_passes_gradcheck_in_float64(softcap):
    """Finite differences of the chunked head (in float64, where it computes in float64) against its
    hand-derived Jacobian, soft-capped or not, at a temperature and with a bias."""
    torch.manual_seed(1)
    M, d, V = 5, 4, 7
    h = torch.randn(M, d, dtype=torch.float64, requires_grad=True)
    w, b = torch.randn(V, d, dtype=torch.float64), torch.randn(V, dtype=torch.float64)
    targets = torch.randint(0, V, (M,))
    f = lambda x: linear_token_logprobs(x, w, b, targets, 0.8, chunk_rows=2, softcap=softcap)[0]  # noqa: E731
    assert f(h).dtype == torch.float64
    assert torch.autograd.gradcheck(f, (h,), eps=1e-6, atol=1e-7)


def test_chunked_head_without_a_cap_is_bit_identical_to_the_uncapped_formula():
    """softcap=None takes exactly the arithmetic of the head before the cap existed: float32 logits,
    temperature, log-softmax, and the Jacobian (W[t] - p @ W) / T."""
    torch.manual_seed(2)
    h = torch.randn(19, 16, requires_grad=True)
    w, b = torch.randn(50, 16), torch.randn(50)
    targets = torch.randint(0, 50, (19,))
    logp, ent = linear_token_logprobs(h, w, b, targets, 0.7, chunk_rows=19)
    logp.sum().backward()
    logits = F.linear(h.detach(), w, b)
    logits /= 0.7
    logq = logits.sub_(logits.logsumexp(-1, keepdim=True))
    p = logq.exp()
    assert torch.equal(logp, logq.gather(-1, targets[:, None])[:, 0])
    assert torch.equal(ent, -(p * logq).sum(-1))
    assert torch.equal(h.grad, (w[targets] - p @ w) / 0.7)


def test_chunked_head_keeps_a_bf16_hidden_states_gradient_in_bf16_and_refuses_a_trained_head():
    h = torch.randn(5, 8, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(11, 8, dtype=torch.bfloat16)
    logp, _ = linear_token_logprobs(h, w, None, torch.tensor([0, 1, 2, 3, 10]))
    assert logp.dtype == torch.float32
    logp.sum().backward()
    assert h.grad.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="requires grad"):
        linear_token_logprobs(h, w.requires_grad_(), None, torch.tensor([0, 1, 2, 3, 10]))


def test_off_policy_loss_weighs_each_token_by_its_truncated_importance_ratio():
    logp = torch.tensor([-1.0, -2.0, -0.5, -3.0], requires_grad=True)
    # the sampler's logprobs: prox/behav ratios 1, e^0.5, e^2 (cut to the cap 2), e^-2
    behav = torch.tensor([-1.0, -2.5, -2.5, -1.0])
    adv = torch.tensor([1.0, -1.0, 1.0, 1.0])
    w = torch.full((4,), 0.25)
    loss, stats = off_policy_grpo_loss(logp, behav, adv, w, 0.2, 0.28, importance_cap=2.0)
    is_w = torch.tensor([1.0, math.exp(0.5), 2.0, math.exp(-2.0)])
    # the ratio to the trainer's own policy is 1, so no clip acts: pg = -is * A
    assert loss.item() == approx(-(0.25 * is_w * adv).sum().item())
    loss.backward()
    assert logp.grad.tolist() == approx((-0.25 * is_w * adv).tolist())
    assert stats["is_weight_sum"].item() == approx(is_w.sum().item())
    assert stats["is_truncated"].item() == 1
    assert stats["clip_low"].item() == 0 and stats["clip_high"].item() == 0


def test_off_policy_loss_of_on_policy_samples_has_the_gradient_of_the_clipped_loss():
    """When the sampler was the trainer's policy, every importance weight is 1 and the update is
    the on-policy loss's (at a ratio of 1, where the clip does not act)."""
    torch.manual_seed(0)
    logp = (torch.randn(16) - 2).requires_grad_()
    adv, w = torch.randn(16), torch.full((16,), 1 / 16)
    off, _ = off_policy_grpo_loss(logp, logp.detach(), adv, w, 0.2, 0.28, importance_cap=2.0)
    (g_off,) = torch.autograd.grad(off, logp)
    on, _ = grpo_loss(logp, logp.detach(), adv, w, 0.2, 0.28)
    (g_on,) = torch.autograd.grad(on, logp)
    assert off.item() == approx(on.item())
    assert torch.equal(g_off, g_on)
