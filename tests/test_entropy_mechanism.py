"""Cui et al.'s entropy mechanism: the batch covariance by hand, Clip-Cov's and KL-Cov's tokens by hand,
and on a bandit (a tabular softmax) one exact policy-gradient step's entropy change against the first-order
prediction -eta Cov(log pi, A): the ratio goes to 1 as eta -> 0, the error is O(eta^2), and an advantage
uncorrelated with log pi predicts ~0 (and moves the entropy only at second order)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_edu.measure.entropy_mechanism import (
    CLIP_COV_BOUNDS,
    CLIP_COV_RATIO,
    KL_COV_RATIO,
    clip_cov_tokens,
    covariance_terms,
    entropy_change_first_order,
    kl_cov_tokens,
    predicted_entropy_change,
    softmax_entropy,
    token_covariance,
)

D = torch.float64

# a 2 x 3 batch, 4 masked tokens: log pi = 0, -2, -4, -2 (mean -2), A = 3, -1, -1, -1 (mean 0);
# centred products c = (2)(3), (0)(-1), (-2)(-1), (0)(-1) = 6, 0, 2, 0; Cov = 8 / 4 = 2
LOGP = torch.tensor([[0.0, -2.0, -9.0], [-4.0, -2.0, -9.0]], dtype=D)
ADV = torch.tensor([[3.0, -1.0, 7.0], [-1.0, -1.0, 7.0]], dtype=D)
MASK = torch.tensor([[1, 1, 0], [1, 1, 0]])


def test_covariance_by_hand():
    terms = covariance_terms(LOGP, ADV, MASK)
    assert terms.tolist() == [[6.0, 0.0, 0.0], [2.0, 0.0, 0.0]]  # the padding (-9, 7) counts nowhere
    assert token_covariance(LOGP, ADV, MASK).item() == pytest.approx(2.0)


def test_kl_cov_picks_the_largest_terms():
    # N = 4: ratio 1/4 -> k = 1 (the 6), ratio 1/2 -> k = 2 (the 6 and the 2); the default -> k = max(1, 0) = 1
    assert kl_cov_tokens(LOGP, ADV, MASK, ratio=0.25).tolist() == [[True, False, False], [False, False, False]]
    assert kl_cov_tokens(LOGP, ADV, MASK, ratio=0.5).tolist() == [[True, False, False], [True, False, False]]
    assert kl_cov_tokens(LOGP, ADV, MASK).sum().item() == 1 and KL_COV_RATIO == 2e-4


def test_clip_cov_picks_inside_the_band_at_random():
    # the default band (1, 5) holds only the 2 (the 6 is above it): the one token drawn is that one
    assert CLIP_COV_BOUNDS == (1.0, 5.0) and CLIP_COV_RATIO == 2e-4
    assert clip_cov_tokens(LOGP, ADV, MASK).tolist() == [[False, False, False], [True, False, False]]
    # a band (1, 10) holds the 6 and the 2: k = 1 picks one of them, each for some seed; k = 2 picks both
    picks = {
        tuple(
            clip_cov_tokens(LOGP, ADV, MASK, bounds=(1.0, 10.0), generator=torch.Generator().manual_seed(s))
            .nonzero()[0]
            .tolist()
        )
        for s in range(20)
    }
    assert picks == {(0, 0), (1, 0)}
    assert clip_cov_tokens(LOGP, ADV, MASK, ratio=0.5, bounds=(1.0, 10.0)).sum().item() == 2
    # a token PPO's clip already cuts is not eligible; an empty band picks nothing
    clipped = torch.tensor([[False, False, False], [True, False, False]])
    assert clip_cov_tokens(LOGP, ADV, MASK, clipped=clipped).sum().item() == 0
    assert clip_cov_tokens(LOGP, ADV, MASK, bounds=(2.5, 5.0)).sum().item() == 0


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="one shape"):
        token_covariance(LOGP, ADV[:, :2], MASK)
    with pytest.raises(ValueError, match="no token"):
        token_covariance(LOGP, ADV, torch.zeros_like(MASK))
    with pytest.raises(ValueError, match="ratio"):
        kl_cov_tokens(LOGP, ADV, MASK, ratio=0.0)
    with pytest.raises(ValueError, match="bounds"):
        clip_cov_tokens(LOGP, ADV, MASK, bounds=(5.0, 1.0))
    with pytest.raises(ValueError, match="step"):
        predicted_entropy_change(LOGP, ADV, 0.1, step="adam")
    with pytest.raises(ValueError, match="eta"):
        predicted_entropy_change(LOGP, ADV, 0.0)


# the bandit: 5 arms, logits z, rewards r; A = r - E_pi r (every arm's advantage, exact)
Z = torch.tensor([1.5, 0.5, 0.0, -0.5, -1.0], dtype=D)
R = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0], dtype=D)


def advantage(z, r):
    return r - (torch.softmax(z, -1) * r).sum()


def exact_step(z, r, eta, step):
    """z + eta grad_z E_pi[r] (vanilla, by autograd), or z + eta A (natural): the step's true dH."""
    if step == "vanilla":
        zz = z.clone().requires_grad_(True)
        (torch.softmax(zz, -1) * r).sum().backward()
        z_new = z + eta * zz.grad
    else:
        z_new = z + eta * advantage(z, r)
    return (softmax_entropy(z_new) - softmax_entropy(z)).item()


def test_the_exact_gradient_is_pi_times_a():
    zz = Z.clone().requires_grad_(True)
    (torch.softmax(zz, -1) * R).sum().backward()
    assert torch.allclose(zz.grad, torch.softmax(Z, -1) * advantage(Z, R), atol=1e-15)


@pytest.mark.parametrize("step", ["vanilla", "natural"])
def test_one_step_entropy_change_matches_the_covariance_as_eta_shrinks(step):
    a = advantage(Z, R)
    gaps = []
    for eta in (1e-1, 1e-2, 1e-3, 1e-4):
        predicted = predicted_entropy_change(Z, a, eta, step).item()
        gaps.append(abs(exact_step(Z, R, eta, step) / predicted - 1))
    assert predicted < 0  # the likely arm 0 is rewarded: Cov > 0, the entropy falls
    assert gaps[-1] < 1e-3 and gaps[-2] < 1e-2  # the ratio -> 1 ...
    for big, small in zip(gaps, gaps[1:]):
        assert small == pytest.approx(big / 10, rel=0.2)  # ... its gap linear in eta: the error is O(eta^2)


def test_uncorrelated_advantage_predicts_no_change():
    # project log pi out of a reward: A has E_pi A = 0 and Cov_pi(log pi, A) = 0
    logp = torch.log_softmax(Z, -1)
    p = logp.exp()
    a0 = advantage(Z, R)
    lc = logp - (p * logp).sum()
    a = a0 - (p * lc * a0).sum() / (p * lc * lc).sum() * lc
    assert (p * a).sum().abs() < 1e-12
    assert abs(predicted_entropy_change(Z, a, 1e-2).item()) < 1e-15
    moved = abs((softmax_entropy(Z + 1e-2 * a) - softmax_entropy(Z)).item())
    control = abs(exact_step(Z, R, 1e-2, "natural"))  # the correlated advantage of the same bandit
    assert moved < 1e-2 * control  # only a second-order change is left
    # a uniform policy: log pi is constant, the covariance 0 whatever the advantage
    assert predicted_entropy_change(torch.zeros(5, dtype=D), a0, 0.5).abs().item() < 1e-15


def test_batch_covariance_estimates_the_policys():
    # tokens sampled from pi at one state: the batch's centred products average to Cov_{a~pi}(log pi, A)
    g = torch.Generator().manual_seed(0)
    logp, a = torch.log_softmax(Z, -1), advantage(Z, R)
    arms = torch.multinomial(logp.exp(), 40_000, replacement=True, generator=g)
    batch = token_covariance(logp[arms][None], a[arms][None], torch.ones(1, len(arms)))
    exact = -predicted_entropy_change(Z, a, 1.0).item()  # eta = 1: the covariance itself
    assert batch.item() == pytest.approx(exact, rel=0.05)
    assert exact > 0.05  # not a trivially small target


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-3, 3), min_size=2, max_size=6).flatmap(
        lambda z: st.tuples(st.just(z), st.lists(st.floats(-1, 1), min_size=len(z), max_size=len(z)))
    )
)
def test_first_order_error_is_second_order(za):
    # for any logits and logit move, |dH - (-Cov(log pi, dz))| is O(|dz|^2): below 4 |dz|_inf^2 here
    z, dz = (torch.tensor(v, dtype=D) for v in za)
    for eta in (1e-2, 1e-3):
        exact = (softmax_entropy(z + eta * dz) - softmax_entropy(z)).item()
        first = entropy_change_first_order(z, eta * dz).item()
        assert abs(exact - first) <= 4 * (eta * dz.abs().max().item()) ** 2 + 1e-14
    assert math.isfinite(first)
