"""Autograder of homework 3 (PPO with a critic).

    python -m course.grade hw3 path/to/student_hw3.py

Each test calls the submission first (an unimplemented function fails the test with
NotImplementedError), then compares it with grpo_edu.functional or trains with it.
"""

import pytest
import torch

import grpo_edu.functional as Fn
from course.autograde import (
    check_close,
    check_float,
    check_no_grad,
    grad_of,
    randn,
    random_mask,
    training_tests,
)  # fmt: skip
from grpo_edu import make_algorithm

# Training checks: PPO (2 epochs x 2 minibatches, critic, KL in the reward), 128
# sequences/step. MEASURED on the cpu preset (reference at 26% held-out), seeds 0-3: the
# mean sampled reward rose by +0.052 .. +0.082 from the first 10 to the last 10 of 40
# steps (~5 s of training).
STEPS, WINDOW, MARGIN, SEQUENCES, REPRODUCE_STEPS = 40, 10, 0.02, 128, 6
STAT_KEYS = ("clip_low", "clip_high", "clip_ratio", "ratio_mean")


def _probe(sub):
    """Call both functions once on a tiny input (NotImplementedError surfaces here)."""
    z = torch.zeros(1, 2)
    sub.gae(z, z, torch.ones(1, 2), 1.0, 1.0)
    sub.clipped_surrogate_loss(z, z, torch.zeros(1))


def _check_stats(got, expected, what):
    assert isinstance(got, dict), f"{what}: the second output should be a dict of statistics, got {type(got).__name__}"
    missing = [k for k in STAT_KEYS if k not in got]
    assert not missing, f"{what}: the statistics dict misses {missing} (expected keys {list(STAT_KEYS)})"
    for k in STAT_KEYS:
        check_float(got[k], expected[k], f"{what}: stats[{k!r}]", rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- (1)-(2) GAE


@pytest.mark.graded(points=2)
def test_gae_by_hand(submission):
    """gae: lambda = 1 gives G - V, lambda = 0 gives the one-step TD error"""
    r = torch.tensor([[0.0, 0.0, 1.0, 0.0]])
    V = torch.tensor([[0.5, 0.6, 0.7, 9.0]])  # 9.0 sits on padding: it must not matter
    m = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    A, R = submission.gae(r, V, m, gamma=1.0, lam=1.0)
    check_close(A, torch.tensor([[0.5, 0.4, 0.3, 0.0]]), "gae(r=[0,0,1], V=[.5,.6,.7], lam=1) advantages (= G - V)")
    check_close(R, torch.tensor([[1.0, 1.0, 1.0, 0.0]]), "gae(..., lam=1) returns (= A + V = G)")
    A, R = submission.gae(r, V, m, gamma=1.0, lam=0.0)
    check_close(A, torch.tensor([[0.1, 0.1, 0.3, 0.0]]),
                "gae(..., lam=0) advantages (= delta_t = r_t + V_{t+1} - V_t, V after the end = 0)")  # fmt: skip
    check_close(R, torch.tensor([[0.6, 0.7, 1.0, 0.0]]), "gae(..., lam=0) returns (= r_t + V_{t+1})")
    A, _ = submission.gae(r, V, m, gamma=0.5, lam=0.5)
    d = [0 + 0.5 * 0.6 - 0.5, 0 + 0.5 * 0.7 - 0.6, 1 - 0.7]  # delta_t with gamma = 0.5
    expected = [d[0] + 0.25 * d[1] + 0.0625 * d[2], d[1] + 0.25 * d[2], d[2], 0.0]
    check_close(A, torch.tensor([expected]), "gae(..., gamma=0.5, lam=0.5) advantages")


@pytest.mark.graded(points=1)
@pytest.mark.parametrize(
    "gamma,lam",
    [(1.0, 1.0), (1.0, 0.95), (0.9, 0.0), (0.99, 0.5)],
    ids=["gamma=1,lam=1", "gamma=1,lam=0.95", "gamma=0.9,lam=0", "gamma=0.99,lam=0.5"],
)
def test_gae_matches_library(submission, gamma, lam):
    """gae: random rewards, values and ragged masks, as grpo_edu.functional"""
    r, V, m = randn(6, 7, seed=1), randn(6, 7, seed=2), random_mask(6, 7, seed=3)
    out = submission.gae(r, V, m, gamma, lam)
    assert isinstance(out, tuple) and len(out) == 2, (
        f"gae should return (advantages, returns), got {type(out).__name__}"
    )
    A_lib, R_lib = Fn.gae(r, V, m, gamma, lam)
    check_close(out[0], A_lib, f"gae(random [6, 7], gamma={gamma}, lam={lam}) advantages", atol=1e-5)
    check_close(out[1], R_lib, f"gae(random [6, 7], gamma={gamma}, lam={lam}) returns", atol=1e-5)


@pytest.mark.graded(points=1)
def test_gae_targets_are_detached(submission):
    """gae: advantages and returns are targets: no gradient into rewards or values"""
    r, V, m = randn(3, 4, seed=4), randn(3, 4, seed=5), random_mask(3, 4, seed=6)
    g_r, g_V = grad_of(lambda a, b: sum(submission.gae(a, b, m, 1.0, 0.9)), r, V)
    check_no_grad(g_r, "rewards", "gae")
    check_no_grad(g_V, "values", "gae (the critic learns from value_loss only)")


# ------------------------------------------------------------ (3)-(4) clipped surrogate


@pytest.mark.graded(points=2)
def test_clipped_surrogate_by_hand(submission):
    """clipped_surrogate_loss: rho in {0.5, 0.9, 1, 1.1, 1.5} with A = +1 and A = -1"""
    rho = torch.tensor([0.5, 0.9, 1.0, 1.1, 1.5])
    logp = rho.log().repeat(2, 1)
    old = torch.zeros(2, 5)
    loss, stats = submission.clipped_surrogate_loss(logp, old, torch.tensor([1.0, -1.0]), eps_low=0.2)
    expected = torch.tensor([[-0.5, -0.9, -1.0, -1.1, -1.2],  # A > 0: -min(rho, clip(rho))
                             [0.8, 0.9, 1.0, 1.1, 1.5]])  # A < 0: max(rho, clip(rho))  # fmt: skip
    check_close(loss, expected, "clipped_surrogate_loss(rho=[0.5, 0.9, 1, 1.1, 1.5], A=[+1, -1], eps=0.2)")
    _check_stats(stats, {"clip_low": 0.1, "clip_high": 0.1, "clip_ratio": 0.2, "ratio_mean": 1.0},
                 "the same example (one token clipped low with A < 0, one high with A > 0, of 10)")  # fmt: skip


@pytest.mark.graded(points=1)
@pytest.mark.parametrize(
    "eps_low,eps_high",
    [(0.2, None), (0.2, 0.28), (0.1, 0.4)],
    ids=["eps=0.2", "eps_low=0.2,eps_high=0.28", "eps_low=0.1,eps_high=0.4"],
)
@pytest.mark.parametrize("per_token", [False, True], ids=["A[B]", "A[B,T]"])
def test_clipped_surrogate_matches_library(submission, eps_low, eps_high, per_token):
    """clipped_surrogate_loss: random ratios and advantages, masked statistics, as grpo_edu"""
    logp, old = -randn(6, 5, seed=7).abs(), -randn(6, 5, seed=8).abs()
    old = logp + 0.4 * (old - logp)  # ratios between ~0.5 and ~2
    adv = randn(6, 5, seed=9) if per_token else randn(6, seed=9)
    m = random_mask(6, 5, seed=10)
    what = f"clipped_surrogate_loss(random, eps_low={eps_low}, eps_high={eps_high}, advantages {list(adv.shape)})"
    loss, stats = submission.clipped_surrogate_loss(logp, old, adv, eps_low, eps_high, mask=m)
    lib_loss, lib_stats = Fn.clipped_surrogate_loss(logp, old, adv, eps_low, eps_high, mask=m)
    check_close(loss, lib_loss, what)
    _check_stats(stats, lib_stats, what + " with a mask")


@pytest.mark.graded(points=2)
def test_clipped_surrogate_gradient(submission):
    """clipped_surrogate_loss: gradient 0 on clipped tokens, -A at rho = 1, none into old_logp or A"""
    logp, adv = -randn(6, 5, seed=11).abs(), randn(6, 5, seed=12)
    old = logp + 0.5 * randn(6, 5, seed=13)
    g_logp, g_old, g_adv = grad_of(lambda a, b, c: submission.clipped_surrogate_loss(a, b, c, 0.2, 0.3)[0],
                                   logp, old, adv)  # fmt: skip
    (e_logp,) = grad_of(lambda a: Fn.clipped_surrogate_loss(a, old, adv, 0.2, 0.3)[0], logp)
    assert g_logp is not None, "clipped_surrogate_loss: no gradient flowed into logp"
    check_close(g_logp, e_logp, "d loss / d logp (0 where the min picks the clipped, constant term)")
    check_no_grad(g_old, "old_logp", "clipped_surrogate_loss")
    check_no_grad(g_adv, "advantages", "clipped_surrogate_loss")
    (g_at_1,) = grad_of(lambda a: submission.clipped_surrogate_loss(a, logp, adv)[0], logp)
    check_close(g_at_1, -adv, "d loss / d logp at rho = 1 (logp == old_logp): the policy gradient -A")


@pytest.mark.graded(points=1)
def test_clipped_surrogate_stats_edges(submission):
    """clipped_surrogate_loss: stats over all tokens without a mask, 0.0 with an empty mask"""
    logp, old, adv = torch.tensor([[0.5, -0.5]]), torch.zeros(1, 2), torch.tensor([[1.0, -1.0]])
    _, stats = submission.clipped_surrogate_loss(logp, old, adv, 0.2)
    _, lib = Fn.clipped_surrogate_loss(logp, old, adv, 0.2)
    _check_stats(stats, lib, "rho = [e^0.5, e^-0.5], A = [+1, -1], no mask (both tokens clipped)")
    _, stats = submission.clipped_surrogate_loss(logp, old, adv, 0.2, mask=torch.zeros(1, 2))
    _check_stats(stats, dict.fromkeys(STAT_KEYS, 0.0), "an all-zero mask (no token: every statistic is 0.0)")


# ------------------------------------------------------------ training with your code


def _plugs(sub):
    return dict(gae=sub.gae, clipped_surrogate_loss=_logged_as_the_library(sub.clipped_surrogate_loss))


def _logged_as_the_library(surrogate):
    """Your surrogate, its statistics completed with those the library also logs and this homework
    does not ask for (the ratio's spread, the advantages' size): the library's, on the same inputs,
    so the training logs can be compared key by key. Your loss and your STAT_KEYS are used as given."""

    def clipped_surrogate_loss(logp, old_logp, advantages, eps_low=0.2, eps_high=None, mask=None):
        loss, stats = surrogate(logp, old_logp, advantages, eps_low, eps_high, mask)
        with torch.no_grad():  # inside the plug, Fn's name is the library's own function
            _, lib = Fn.clipped_surrogate_loss(logp.detach(), old_logp, advantages, eps_low, eps_high, mask)
        return loss, {**{k: v for k, v in lib.items() if k not in STAT_KEYS}, **stats}

    return clipped_surrogate_loss


test_training_reproduces_library, test_training_improves = training_tests(
    lambda: make_algorithm("ppo"),
    _plugs,
    _probe,
    "PPO",
    (
        "arithmetic: PPO with your GAE and surrogate reproduces the library's run",
        "arithmetic: with your GAE and surrogate, PPO's sampled reward rises during training",
    ),
    steps=STEPS,
    window=WINDOW,
    margin=MARGIN,
    sequences=SEQUENCES,
    reproduce_steps=REPRODUCE_STEPS,
)
