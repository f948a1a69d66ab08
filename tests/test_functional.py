"""Tests of grpo_edu.functional: hand-computed values, properties, Monte Carlo, gradcheck.

Every expected value is written as the arithmetic that produces it, so a reader can
check it with pencil and paper.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import grpo_edu.functional as Fn
from grpo_edu.functional import (
    aggregate_loss,
    clipped_surrogate_loss,
    discounted_returns,
    entropy,
    exact_kl,
    gae,
    group_advantages,
    kl_estimate,
    kl_penalized_rewards,
    masked_mean,
    masked_normalize,
    masked_sum,
    masked_whiten,
    policy_gradient_loss,
    token_logprobs,
    value_loss,
)

D = torch.float64
# deterministic and leaves no .hypothesis/ folder behind
FAST = settings(max_examples=30, deadline=None, derandomize=True, database=None)
LN2 = math.log(2.0)


def t(x, dtype=D):
    return torch.tensor(x, dtype=dtype)


def close(a, b, atol=1e-9):
    torch.testing.assert_close(
        torch.as_tensor(a, dtype=D), torch.as_tensor(b, dtype=D), atol=atol, rtol=0, equal_nan=True
    )


X = t([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
M = t([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])  # masked entries: 1, 2 | 4


def test_all_is_the_public_api():
    """``__all__`` names every public function the core's modules define, each one ``Fn.<name>``."""
    import importlib
    import pkgutil

    modules = [importlib.import_module(f"{Fn.__name__}.{m.name}") for m in pkgutil.iter_modules(Fn.__path__)]
    defined = {
        n
        for m in modules
        for n, f in vars(m).items()
        if not n.startswith("_") and callable(f) and getattr(f, "__module__", None) == m.__name__
    }
    assert len(modules) >= 5 and sorted(Fn.__all__) == sorted(defined)
    assert all(getattr(Fn, n).__module__.startswith(f"{Fn.__name__}.") for n in Fn.__all__)


# ------------------------------------------------------------------ masked reductions


def test_masked_sum_and_mean_by_hand():
    close(masked_sum(X, M), 1 + 2 + 4)
    close(masked_sum(X, M, dim=1), [1 + 2, 4])
    close(masked_sum(X, M, dim=0), [1 + 4, 2, 0])
    close(masked_sum(X, M.bool()), 7)  # a bool mask works the same
    close(masked_mean(X, M), (1 + 2 + 4) / 3)
    close(masked_mean(X, M, dim=1), [(1 + 2) / 2, 4 / 1])
    close(masked_normalize(X, M, constant=2.0), (1 + 2 + 4) / 2)
    close(masked_normalize(X, M, dim=1, constant=4.0), [3 / 4, 4 / 4])


def test_masked_mean_of_empty_row_is_nan_but_sum_is_zero():
    empty = t([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    close(masked_sum(X, empty, dim=1), [3, 0])
    mean = masked_mean(X, empty, dim=1)
    close(mean[0], 1.5)
    assert torch.isnan(mean[1])  # documented: there is no mean of nothing


def test_masked_whiten_by_hand():
    mu = (1 + 2 + 4) / 3
    sigma = math.sqrt(((1 - mu) ** 2 + (2 - mu) ** 2 + (4 - mu) ** 2) / 3)  # = sqrt(14)/3
    assert sigma == pytest.approx(math.sqrt(14) / 3)
    w = masked_whiten(X, M, eps=0.0)
    close(w, [[(1 - mu) / sigma, (2 - mu) / sigma, 0], [(4 - mu) / sigma, 0, 0]])
    w_keep = masked_whiten(X, M, shift_mean=False, eps=0.0)
    close(w_keep, (w + mu) * M)
    close(masked_whiten(X, torch.zeros_like(M)), torch.zeros_like(X))  # nothing to whiten: 0


# -------------------------------------------------------------------------- returns


def test_discounted_returns_by_hand_gamma_half():
    rewards = t([[1.0, 0.0, 2.0], [0.0, 3.0, 5.0]])
    mask = t([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # row 1: the reward 5 is on padding
    g = 0.5
    expected = [
        [1 + g * 0 + g**2 * 2, 0 + g * 2, 2],  # 1.5, 1, 2
        [0 + g * 3, 3, 0],  # masked-out 5 counts as 0; padding gives 0
    ]
    close(discounted_returns(rewards, mask, gamma=g), expected)
    close(discounted_returns(rewards, mask, gamma=0.0), rewards * mask)  # gamma=0: G_t = r_t


def test_gae_by_hand_lam_below_one():
    rewards = t([[0.0, 0.0, 1.0], [0.0, 1.0, 9.0]])
    values = t([[0.5, 0.6, 0.7], [0.5, 0.6, 0.7]])
    mask = t([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # row 1 ends at t=1: V_2 counts as 0
    g, lam = 0.9, 0.8
    # row 0: delta_2 = 1 - 0.7, delta_1 = 0.9*0.7 - 0.6, delta_0 = 0.9*0.6 - 0.5
    d = [0.9 * 0.6 - 0.5, 0.9 * 0.7 - 0.6, 1 - 0.7]
    a2 = d[2]
    a1 = d[1] + g * lam * a2
    a0 = d[0] + g * lam * a1
    # row 1: delta_1 = 1 + 0.9*0 - 0.6 (episode over), delta_0 = 0.9*0.6 - 0.5
    b1 = 1 - 0.6
    b0 = (0.9 * 0.6 - 0.5) + g * lam * b1
    adv, ret = gae(rewards, values, mask, gamma=g, lam=lam)
    close(adv, [[a0, a1, a2], [b0, b1, 0]])
    close(ret, [[a0 + 0.5, a1 + 0.6, a2 + 0.7], [b0 + 0.5, b1 + 0.6, 0]])


def test_gae_limits_and_detach():
    torch.manual_seed(0)
    rewards, values = torch.randn(3, 5, dtype=D), torch.randn(3, 5, dtype=D, requires_grad=True)
    mask = t([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [0, 0, 0, 0, 0]])
    adv, ret = gae(rewards, values, mask, gamma=0.7, lam=1.0)
    # lam = 1: A_t = G_t - V_t (Monte Carlo return minus the baseline)
    close(adv, (discounted_returns(rewards, mask, 0.7) - values.detach()) * mask)
    close(ret, discounted_returns(rewards, mask, 0.7))
    assert not adv.requires_grad and not ret.requires_grad  # no gradient into the critic
    # lam = 0: A_t = delta_t = r_t + gamma V_{t+1} - V_t (one-step TD error)
    adv0, _ = gae(rewards, values, mask, gamma=0.7, lam=0.0)
    v = values.detach()
    v_next = torch.cat([v[:, 1:] * mask[:, 1:], torch.zeros(3, 1, dtype=D)], dim=1)
    close(adv0, (rewards + 0.7 * v_next - v) * mask)


# -------------------------------------------------------------- group advantages


def test_group_advantages_group_scale_biased_and_unbiased():
    r = t([1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0])  # group 0 mixed, group 1 all equal
    adv, stats = group_advantages(r, group_size=4)
    a = (1 - 0.5) / (0.5 + 1e-6)  # mean 0.5, population std sqrt(4 * 0.25 / 4) = 0.5
    close(adv, [a, -a, a, -a, 0, 0, 0, 0])
    close(stats["mean"], [0.5, 1.0])
    close(stats["std"], [0.5, 0.0])
    assert stats["frac_zero_std"] == 0.5 and isinstance(stats["frac_zero_std"], float)

    adv_u, stats_u = group_advantages(r, group_size=4, unbiased=True)
    s = math.sqrt(4 * 0.25 / (4 - 1))  # Bessel: 1/(G-1)
    close(
        adv_u,
        [0.5 / (s + 1e-6), -0.5 / (s + 1e-6), 0.5 / (s + 1e-6), -0.5 / (s + 1e-6), 0, 0, 0, 0],
    )
    close(stats_u["std"], [s, 0.0])
    close(stats_u["std"], r.view(2, 4).std(1))  # same as torch.std


def test_group_advantages_batch_and_none_scales():
    r = t([1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    batch_mean = 6 / 8
    batch_std = math.sqrt((6 * (1 - batch_mean) ** 2 + 2 * (0 - batch_mean) ** 2) / 8)  # sqrt(0.1875)
    adv, _ = group_advantages(r, group_size=4, scale="batch")
    a = (1 - 0.5) / (batch_std + 1e-6)  # centred by the *group* mean, scaled by the batch std
    close(adv, [a, -a, a, -a, 0, 0, 0, 0])
    adv_u, _ = group_advantages(r, group_size=4, scale="batch", unbiased=True)
    close(adv_u[0], 0.5 / (math.sqrt(1.5 / 7) + 1e-6))  # 1/(B-1) over the batch
    adv_none, _ = group_advantages(r, group_size=4, scale="none")  # Dr. GRPO
    close(adv_none, [0.5, -0.5, 0.5, -0.5, 0, 0, 0, 0])


def test_group_advantages_all_equal_groups_are_exactly_zero():
    r = t([0.1, 0.1, 0.1, 3.0, 3.0, 3.0], dtype=torch.float32)  # mean of 0.1s is not exactly 0.1
    for scale in ("group", "batch", "none"):
        for unbiased in (False, True):
            adv, stats = group_advantages(r, 3, scale=scale, eps=0.0, unbiased=unbiased)
            assert torch.equal(adv, torch.zeros(6)), (scale, unbiased)
            assert stats["frac_zero_std"] == 1.0


def test_group_advantages_group_size_one_and_integer_rewards():
    for unbiased in (False, True):
        adv, stats = group_advantages(t([0.3, 1.0, 0.0]), group_size=1, unbiased=unbiased)
        assert torch.equal(adv, torch.zeros(3, dtype=D))  # no group to compare with: 0, not NaN
        assert torch.equal(stats["std"], torch.zeros(3, dtype=D))
        assert stats["frac_zero_std"] == 1.0
    adv, _ = group_advantages(torch.tensor([1, 0, 0, 0]), group_size=4)  # int rewards are fine
    close(adv, t([0.75, -0.25, -0.25, -0.25]) / (math.sqrt(3 / 16) + 1e-6), atol=1e-6)


cents = st.integers(-500, 500).map(lambda c: c / 100)  # a grid: any nonzero std is >= 0.003


@FAST
@given(n_groups=st.integers(1, 4), group_size=st.integers(2, 8), data=st.data())
def test_group_advantages_are_standardised_within_each_group(n_groups, group_size, data):
    values = data.draw(st.lists(cents, min_size=n_groups * group_size, max_size=n_groups * group_size))
    r = t(values)
    adv, stats = group_advantages(r, group_size)
    adv_u, _ = group_advantages(r, group_size, unbiased=True)
    for g, a in enumerate(adv.view(n_groups, group_size)):
        assert abs(a.mean().item()) < 1e-9
        if stats["std"][g] > 0:
            assert a.std(unbiased=False).item() == pytest.approx(1.0, abs=1e-3)
            # Bessel's correction only rescales the step, by sqrt((G-1)/G)
            close(
                adv_u.view(n_groups, group_size)[g],
                a * math.sqrt((group_size - 1) / group_size),
                atol=1e-3,
            )
        else:
            assert torch.equal(a, torch.zeros_like(a))


# --------------------------------------------------------------- log-probs, entropy, KL


def test_token_logprobs_by_hand():
    logits = torch.log(t([[[1.0, 1.0, 2.0], [1.0, 3.0, 4.0]]]))  # probs [1,1,2]/4 and [1,3,4]/8
    tokens = torch.tensor([[2, 0]])
    close(token_logprobs(logits, tokens), [[math.log(2 / 4), math.log(1 / 8)]])
    # temperature 2: softmax(log p / 2) is proportional to sqrt(p)
    tau2 = token_logprobs(logits, tokens, temperature=2.0)
    close(
        tau2,
        [[math.log(math.sqrt(2) / (1 + 1 + math.sqrt(2))), math.log(1 / (1 + math.sqrt(3) + 2))]],
    )
    huge = token_logprobs(t([[[1e4, 0.0, -1e4]]]), torch.tensor([[2]]))
    close(huge, [[-2e4]])  # stable: no -inf, no NaN


def test_entropy_by_hand_and_stable():
    close(entropy(torch.zeros(1, 1, 4, dtype=D)), [[math.log(4)]])  # uniform over 4
    close(entropy(torch.log(t([[[0.5, 0.25, 0.25]]]))), [[0.5 * LN2 + 2 * 0.25 * math.log(4)]])
    logits = t([[[0.0, -math.inf, 0.0], [1e30, 0.0, -1e30]]], dtype=torch.float32).requires_grad_()
    h = entropy(logits)
    close(h, [[LN2, 0.0]], atol=1e-6)  # -inf logit: probability 0; huge logit: one-hot
    h.sum().backward()
    assert torch.isfinite(logits.grad).all()


def test_kl_estimators_by_hand():
    logp, ref_logp = t([math.log(0.5)]), t([math.log(0.25)])  # log pi/pi_ref = ln 2, r = 1/2
    close(kl_estimate(logp, ref_logp, "k1"), [LN2])
    close(kl_estimate(logp, ref_logp, "k2"), [LN2**2 / 2])
    close(kl_estimate(logp, ref_logp, "k3"), [0.5 - 1 - math.log(0.5)])  # r - 1 - log r
    close(kl_estimate(logp, ref_logp), kl_estimate(logp, ref_logp, "k3"))  # default k3


def test_exact_kl_by_hand_both_directions():
    pi, ref = torch.log(t([[[0.5, 0.5]]])), torch.log(t([[[0.25, 0.75]]]))
    close(exact_kl(pi, ref), [[0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)]])
    close(exact_kl(pi, ref, "ref||pi"), [[0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)]])
    one_hot = t([[[0.0, -math.inf]]])  # pi = [1, 0]
    uniform = torch.zeros(1, 1, 2, dtype=D)
    close(exact_kl(one_hot, uniform), [[math.log(1 / 0.5)]])  # 0 * log 0 = 0, not NaN
    assert exact_kl(one_hot, uniform, "ref||pi").item() == math.inf  # pi puts 0 where ref does not


def test_kl_penalized_rewards_by_hand():
    scores = t([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    logp = t([[-1.0, -1.0, -1.0], [-2.0, -2.0, -2.0]], dtype=D).requires_grad_()
    ref_logp = t([[-1.5, -1.0, -0.5], [-1.0, -2.0, -3.0]])  # log ratios [.5, 0, -.5], [-1, 0, 1]
    mask = t([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    tok, seq = kl_penalized_rewards(scores, logp, ref_logp, mask, beta=0.1)
    close(tok, [[-0.1 * 0.5, 0.0, 1 - 0.1 * -0.5], [-0.1 * -1, 1.0, 0.0]])
    close(seq, [-0.05 + 0.0 + 1.05, 0.1 + 1.0])
    assert not tok.requires_grad  # rewards are data


# ----------------------------------------------------------------------------- losses


def test_policy_gradient_loss_by_hand():
    logp = t([[-1.0, -2.0], [-0.5, -0.25]])
    close(policy_gradient_loss(logp, t([2.0, -1.0])), [[2 * 1, 2 * 2], [-0.5, -0.25]])
    close(policy_gradient_loss(logp, t([[1.0, 0.0], [3.0, 1.0]])), [[1.0, 0.0], [1.5, 0.25]])
    a = t([2.0, -1.0]).requires_grad_()
    assert not policy_gradient_loss(logp, a).requires_grad  # A is a constant weight: detached


def test_clipped_surrogate_by_hand_with_asymmetric_clip():
    rho = t([[1.5, 0.5, 1.25, 0.5, 1.5]])
    adv = t([[1.0, -1.0, 1.0, 1.0, -1.0]])
    logp = torch.log(rho).requires_grad_()
    old = torch.zeros_like(rho)
    loss, stats = clipped_surrogate_loss(logp, old, adv, eps_low=0.2, eps_high=0.28)
    expected = [
        -min(1.5 * 1, 1.28 * 1),  # A>0, rho > 1+0.28: clipped high
        -min(0.5 * -1, 0.8 * -1),  # A<0, rho < 1-0.2: clipped low
        -min(1.25 * 1, 1.25 * 1),  # 1.25 < 1.28: inside (would be clipped with eps_high = 0.2)
        -min(0.5 * 1, 0.8 * 1),  # A>0, rho small: not clipped (the min keeps the pessimistic term)
        -min(1.5 * -1, 1.28 * -1),  # A<0, rho large: not clipped
    ]
    close(loss, [expected])
    assert stats == pytest.approx(
        {
            "clip_low": 1 / 5,
            "clip_high": 1 / 5,
            "clip_ratio": 2 / 5,
            "ratio_mean": (1.5 + 0.5 + 1.25 + 0.5 + 1.5) / 5,
            "ratio_std": math.sqrt((2.25 + 0.25 + 1.5625 + 0.25 + 2.25) / 5 - 1.05**2),  # 1/N std of rho
            "advantage_abs_mean": 1.0,  # the one completion's mean |A_t|
            "advantage_abs_max": 1.0,
        }
    )
    loss.sum().backward()
    close(logp.grad, [[0.0, 0.0, -1.25 * 1, -0.5 * 1, -1.5 * -1]])  # d(-rho A)/dlogp = -rho A
    _, sym = clipped_surrogate_loss(logp, old, adv, eps_low=0.2)  # eps_high = eps_low
    assert sym["clip_high"] == pytest.approx(2 / 5)
    mask = t([[0.0, 1.0, 1.0, 1.0, 1.0]])  # stats over masked tokens only
    _, masked = clipped_surrogate_loss(logp, old, adv, eps_low=0.2, eps_high=0.28, mask=mask)
    assert masked == pytest.approx(
        {"clip_low": 1 / 4, "clip_high": 0.0, "clip_ratio": 1 / 4, "ratio_mean": 3.75 / 4,
         "ratio_std": math.sqrt((0.25 + 1.5625 + 0.25 + 2.25) / 4 - (3.75 / 4) ** 2),
         "advantage_abs_mean": 1.0, "advantage_abs_max": 1.0}
    )  # fmt: skip
    _, empty = clipped_surrogate_loss(logp, old, adv, mask=torch.zeros_like(mask))
    assert empty == {"clip_low": 0.0, "clip_high": 0.0, "clip_ratio": 0.0, "ratio_mean": 0.0, "ratio_std": 0.0,
                     "advantage_abs_mean": 0.0, "advantage_abs_max": 0.0}  # fmt: skip
    _, per_seq = clipped_surrogate_loss(logp, old, t([-3.0]), mask=mask)  # advantages [B]: |A_i| itself
    assert (per_seq["advantage_abs_mean"], per_seq["advantage_abs_max"]) == (3.0, 3.0)


def test_value_loss_by_hand_plain_and_clipped():
    values = t([[1.0, 2.0, 3.0]])
    returns = t([[0.0, 2.0, 5.0]])
    mask = t([[1.0, 1.0, 0.0]])
    close(value_loss(values, returns, mask), 0.5 * ((1 - 0) ** 2 + (2 - 2) ** 2) / 2)
    old = t([[0.5, 2.5, 3.0]])
    # V_clip = old + clamp(V - old, -0.2, 0.2) = [0.7, 2.3]; max((V-R)^2, (V_clip-R)^2) = [1, 0.09]
    clipped = value_loss(values, returns, mask, old_values=old, clip=0.2)
    close(clipped, 0.5 * (max(1.0, 0.7**2) + max(0.0, (2.3 - 2) ** 2)) / 2)
    close(value_loss(values, returns, torch.zeros_like(mask)), 0.0)  # no tokens: 0, not NaN


def test_aggregate_loss_three_modes_with_empty_completion():
    loss = t([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    mask = t([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])  # the last completion is empty
    close(aggregate_loss(loss, mask), ((1 + 2) / 2 + (4 + 5 + 6) / 3 + 0) / 3)
    close(aggregate_loss(loss, mask, "token_mean"), (1 + 2 + 4 + 5 + 6) / 5)
    close(aggregate_loss(loss, mask, "constant"), (1 + 2 + 4 + 5 + 6) / (3 * 3))
    close(aggregate_loss(loss, mask, "constant", max_length=6), (1 + 2 + 4 + 5 + 6) / (3 * 6))
    for mode in ("sequence_mean", "token_mean", "constant"):
        close(aggregate_loss(loss, torch.zeros_like(mask), mode), 0.0)


# ------------------------------------------------------------------------ properties


@FAST
@given(arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 6)), elements=st.floats(-100, 100)))
def test_masked_mean_with_all_ones_mask_is_mean(x):
    x = torch.from_numpy(x)
    close(masked_mean(x, torch.ones_like(x)), x.mean(), atol=1e-9)


@FAST
@given(arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 6)), elements=st.floats(-10, 10)))
def test_discounted_returns_gamma_one_is_reversed_cumsum(r):
    r = torch.from_numpy(r)
    close(discounted_returns(r, torch.ones_like(r), 1.0), r.flip(-1).cumsum(-1).flip(-1), atol=1e-9)


log_ratios = st.floats(-1.0, 1.0)
advs = st.floats(-2.0, -0.01) | st.floats(0.01, 2.0)  # A = 0: zero gradient, yet not clipped


@FAST
@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 5)),
    eps_low=st.floats(0.05, 0.5),
    eps_high=st.floats(0.05, 0.5),
    data=st.data(),
)
def test_clipped_tokens_are_exactly_the_zero_gradient_tokens(shape, eps_low, eps_high, data):
    lr = torch.from_numpy(data.draw(arrays(np.float64, shape, elements=log_ratios)))
    adv = torch.from_numpy(data.draw(arrays(np.float64, shape, elements=advs)))
    rho = lr.exp()
    assume(((rho - (1 - eps_low)).abs() > 1e-9).all() and ((rho - (1 + eps_high)).abs() > 1e-9).all())
    old = torch.full(shape, -1.0, dtype=D)
    logp = (old + lr).requires_grad_()
    loss, stats = clipped_surrogate_loss(logp, old, adv, eps_low, eps_high)
    (grad,) = torch.autograd.grad(loss.sum(), logp)
    clipped = ((rho < 1 - eps_low) & (adv < 0)) | ((rho > 1 + eps_high) & (adv > 0))
    assert torch.equal(grad == 0, clipped)
    assert stats["clip_ratio"] == pytest.approx(clipped.double().mean().item())
    close(grad[~clipped], (-adv * rho)[~clipped], atol=1e-12)  # importance-weighted pg gradient


@FAST
@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 5)), eps=st.floats(0.0, 0.5), data=st.data())
def test_clipped_loss_at_rho_one_has_the_policy_gradient(shape, eps, data):
    logp = torch.from_numpy(data.draw(arrays(np.float64, shape, elements=st.floats(-5, 0))))
    adv = torch.from_numpy(data.draw(arrays(np.float64, shape[:1], elements=advs)))  # per sequence
    logp = logp.requires_grad_()
    loss, stats = clipped_surrogate_loss(logp, logp.detach(), adv, eps_low=eps)
    (g_clip,) = torch.autograd.grad(loss.sum(), logp)
    (g_pg,) = torch.autograd.grad(policy_gradient_loss(logp, adv).sum(), logp)
    close(g_clip, g_pg, atol=1e-12)
    assert stats["clip_ratio"] == 0.0 and stats["ratio_mean"] == pytest.approx(1.0)


@FAST
@given(
    arrays(np.float64, 6, elements=st.floats(-30, 0)),
    arrays(np.float64, 6, elements=st.floats(-30, 0)),
    st.sampled_from([torch.float32, torch.float64]),
)
def test_k3_is_never_negative(logp, ref_logp, dtype):
    k3 = kl_estimate(torch.from_numpy(logp).to(dtype), torch.from_numpy(ref_logp).to(dtype), "k3")
    assert (k3 >= 0).all()
    assert (kl_estimate(torch.from_numpy(logp), torch.from_numpy(ref_logp), "k2") >= 0).all()


@FAST
@given(
    logits=arrays(np.float64, st.integers(2, 6).map(lambda v: (2, v)), elements=st.floats(-2, 2)),
    shift=st.floats(-50, 50),
    data=st.data(),
)
def test_exact_kl_is_zero_iff_logits_equal_up_to_a_constant(logits, shift, data):
    z = torch.from_numpy(logits)[None]  # [1, 2, V]
    delta = torch.from_numpy(data.draw(arrays(np.float64, z.shape, elements=st.floats(-2, 2))))
    for direction in ("pi||ref", "ref||pi"):
        same = exact_kl(z, z + shift, direction)  # a constant shift does not change softmax
        assert (same.abs() <= 1e-6).all()
        kl = exact_kl(z, z + delta, direction)
        assert (kl >= -1e-12).all()
        spread = delta.amax(-1) - delta.amin(-1)  # 0 iff delta is constant over the vocabulary
        assert ((kl > 1e-6) == (spread > 0.5))[spread.le(1e-3) | spread.gt(0.5)].all()


# ----------------------------------------------------------------------- Monte Carlo


def test_k1_and_k3_sample_means_estimate_kl_pi_ref_not_kl_ref_pi():
    """Tokens sampled from pi: mean k1 and mean k3 -> KL(pi||pi_ref), not KL(pi_ref||pi).

    With these logits KL(pi||ref) = 1.1334 and KL(ref||pi) = 1.2752; from 200k samples
    (seed 0) mean k1 = 1.1334 (SE 0.0027) and mean k3 = 1.1322 (SE 0.0036), while k2 is
    biased (1.389). k1 misses KL(ref||pi) by 0.14, about 52 standard errors.
    """
    pi_logits = t([2.0, 1.0, 0.0, -1.0, -2.0])
    ref_logits = t([0.0, 0.5, 1.0, 1.5, 0.0])
    kl_pi_ref = exact_kl(pi_logits[None, None], ref_logits[None, None]).item()
    kl_ref_pi = exact_kl(pi_logits[None, None], ref_logits[None, None], "ref||pi").item()
    n = 200_000
    gen = torch.Generator().manual_seed(0)
    tokens = torch.multinomial(pi_logits.softmax(-1), n, replacement=True, generator=gen)
    logp, ref_logp = pi_logits.log_softmax(-1)[tokens], ref_logits.log_softmax(-1)[tokens]
    for kind in ("k1", "k3"):
        k = kl_estimate(logp, ref_logp, kind)
        se = k.std().item() / math.sqrt(n)
        assert abs(k.mean().item() - kl_pi_ref) < 5 * se, (kind, k.mean().item(), kl_pi_ref, se)
    k1 = kl_estimate(logp, ref_logp, "k1")
    se = k1.std().item() / math.sqrt(n)
    assert abs(kl_ref_pi - kl_pi_ref) > 0.1  # the two directions differ noticeably here
    assert abs(k1.mean().item() - kl_ref_pi) > 20 * se, (k1.mean().item(), kl_ref_pi, se)


# ------------------------------------------------------------------------- gradcheck


def test_gradcheck_losses_and_logprob_functions():
    gen = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, dtype=D, generator=gen).requires_grad_()

    mask = t([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    adv = t([0.7, -1.3])
    assert torch.autograd.gradcheck(lambda lp: policy_gradient_loss(lp, adv), (randn(2, 4),))
    # log-ratios away from the clip edges log(0.8) = -0.223 and log(1.2) = 0.182
    old = t([[-1.0, -2.0, -0.5, -1.5], [-1.0, -1.0, -3.0, -0.2]])
    lr = t([[-0.5, -0.1, 0.05, 0.4], [0.3, -0.4, 0.0, 0.1]])
    logp = (old + lr).requires_grad_()
    adv_t = t([[1.0, -1.0, 2.0, -0.5], [-1.0, 1.0, 0.5, 1.5]])
    assert torch.autograd.gradcheck(lambda lp: clipped_surrogate_loss(lp, old, adv_t, 0.2, 0.1)[0], (logp,))
    returns, old_v = (
        torch.randn(2, 4, dtype=D, generator=gen),
        t([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]),
    )
    values = (old_v + t([[0.5, -0.05, 0.1, -1.0], [-0.7, 0.3, 0.0, 0.0]])).requires_grad_()
    assert torch.autograd.gradcheck(lambda v: value_loss(v, returns, mask), (values,))
    assert torch.autograd.gradcheck(lambda v: value_loss(v, returns, mask, old_v, clip=0.2), (values,))
    for mode in ("sequence_mean", "token_mean", "constant"):
        assert torch.autograd.gradcheck(lambda x, mode=mode: aggregate_loss(x, mask, mode), (randn(2, 4),))
    logits, ref_logits = randn(2, 3, 5), randn(2, 3, 5)
    assert torch.autograd.gradcheck(entropy, (logits,))
    for direction in ("pi||ref", "ref||pi"):
        assert torch.autograd.gradcheck(lambda a, b, d=direction: exact_kl(a, b, d), (logits, ref_logits))
    tokens = torch.randint(0, 5, (2, 3), generator=gen)
    assert torch.autograd.gradcheck(lambda z: token_logprobs(z, tokens, temperature=0.7), (logits,))
    assert torch.autograd.gradcheck(lambda a, b: kl_estimate(a, b, "k3"), (randn(2, 3), randn(2, 3)))


# ------------------------------------------------------------------------- bad input

L3 = torch.zeros(2, 3, 4)
BT = torch.zeros(2, 3)
TOK = torch.zeros(2, 3, dtype=torch.long)

BAD_INPUT = [
    (lambda: masked_sum(BT, torch.ones(2, 4)), "mask"),
    (lambda: masked_mean(BT, torch.ones(3, 3)), "mask"),
    (lambda: masked_normalize(BT, BT, constant=0.0), "constant"),
    (lambda: masked_whiten(BT, BT, eps=-1.0), "eps"),
    (lambda: discounted_returns(BT, BT, gamma=1.5), "gamma"),
    (lambda: discounted_returns(BT, BT, gamma=-0.1), "gamma"),
    (lambda: discounted_returns(torch.zeros(3), torch.zeros(3), gamma=1.0), "rewards"),
    (lambda: gae(BT, BT, BT, gamma=2.0), "gamma"),
    (lambda: gae(BT, BT, BT, lam=-0.1), "lam"),
    (lambda: gae(BT, torch.zeros(2, 4), BT), "values"),
    (lambda: group_advantages(torch.zeros(4), group_size=3), "group_size"),
    (lambda: group_advantages(torch.zeros(4), group_size=0), "group_size"),
    (lambda: group_advantages(torch.zeros(4), group_size=2.0), "group_size"),
    (lambda: group_advantages(torch.zeros(4), 2, scale="std"), "scale"),
    (lambda: group_advantages(torch.zeros(4), 2, eps=-1e-6), "eps"),
    (lambda: group_advantages(torch.zeros(2, 2), 2), "rewards"),
    (lambda: token_logprobs(L3, TOK, temperature=0.0), "temperature"),
    (lambda: token_logprobs(L3, torch.zeros(2, 4, dtype=torch.long)), "tokens"),
    (lambda: token_logprobs(L3, BT), "tokens"),
    (lambda: token_logprobs(L3, TOK + 4), "tokens"),
    (lambda: token_logprobs(BT, TOK), "logits"),
    (lambda: entropy(BT), "logits"),
    (lambda: kl_estimate(BT, BT, kind="k4"), "kind"),
    (lambda: kl_estimate(BT, torch.zeros(3, 2)), "ref_logp"),
    (lambda: exact_kl(L3, L3, direction="forward"), "direction"),
    (lambda: exact_kl(L3, torch.zeros(2, 3, 5)), "ref_logits"),
    (lambda: kl_penalized_rewards(BT, BT, BT, BT, beta=-0.1), "beta"),
    (lambda: kl_penalized_rewards(BT, BT, BT, torch.ones(2, 4), beta=0.1), "mask"),
    (lambda: policy_gradient_loss(BT, torch.zeros(3)), "advantages"),
    (lambda: clipped_surrogate_loss(BT, BT, torch.zeros(2), eps_low=-0.1), "eps_low"),
    (lambda: clipped_surrogate_loss(BT, BT, torch.zeros(2), eps_high=-0.1), "eps_high"),
    (lambda: clipped_surrogate_loss(BT, BT, torch.zeros(2), mask=torch.ones(2, 4)), "mask"),
    (lambda: clipped_surrogate_loss(BT, BT, torch.zeros(2, 4)), "advantages"),
    (lambda: clipped_surrogate_loss(BT, torch.zeros(2, 4), torch.zeros(2)), "old_logp"),
    (lambda: value_loss(BT, BT, BT, clip=0.2), "old_values"),
    (lambda: value_loss(BT, BT, BT, old_values=BT, clip=-0.2), "clip"),
    (lambda: value_loss(BT, torch.zeros(2, 4), BT), "returns"),
    (lambda: aggregate_loss(BT, BT, mode="sum"), "mode"),
    (lambda: aggregate_loss(BT, BT, mode="constant", max_length=0), "max_length"),
    (lambda: aggregate_loss(BT, torch.ones(2, 4)), "mask"),
]


@pytest.mark.parametrize("call, name", BAD_INPUT, ids=[f"{i}-{n}" for i, (_, n) in enumerate(BAD_INPUT)])
def test_bad_input_raises_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must"):
        call()
