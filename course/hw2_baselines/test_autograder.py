"""Autograder of homework 2 (baselines).

    python -m course.grade hw2 path/to/student_hw2.py

Each test calls the submission first (an unimplemented function fails the test with
NotImplementedError), then compares it with grpo_edu or trains with it.
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

# Training checks: REINFORCE with a learned critic baseline, 128 sequences/step. MEASURED
# on the cpu preset (reference at 26% held-out), seeds 0-3: the mean sampled reward rose
# by +0.054 .. +0.076 from the first 15 to the last 15 of 50 steps (~3.5 s of training).
STEPS, WINDOW, MARGIN, SEQUENCES, REPRODUCE_STEPS = 50, 15, 0.02, 128, 5
NAN = float("nan")


def _probe(sub):
    """Call the three functions once on a tiny input (NotImplementedError surfaces here)."""
    x, m = torch.ones(1, 2), torch.ones(1, 2)
    sub.masked_mean(x, m)
    sub.baseline_advantages(x, 0.5, m)
    sub.value_loss(x, x, m)


# ------------------------------------------------------------------ (1) masked mean

X = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
M = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


@pytest.mark.graded(points=2)
def test_masked_mean_by_hand(submission):
    """masked_mean: the handout's example, over everything and along each dim"""
    check_close(submission.masked_mean(X, M), torch.tensor(7 / 3), "masked_mean(X, M) = (1 + 2 + 4) / 3")
    check_close(submission.masked_mean(X, M, dim=1), torch.tensor([1.5, 4.0]), "masked_mean(X, M, dim=1)")
    check_close(submission.masked_mean(X, M, dim=-1), torch.tensor([1.5, 4.0]), "masked_mean(X, M, dim=-1)")
    check_close(submission.masked_mean(X, M, dim=0), torch.tensor([2.5, 2.0, NAN]),
                "masked_mean(X, M, dim=0) (the last column has no real token: 0/0 = NaN)", equal_nan=True)  # fmt: skip


@pytest.mark.graded(points=1)
@pytest.mark.parametrize("dim", [None, 0, 1, -1], ids=lambda d: f"dim={d}")
def test_masked_mean_matches_library(submission, dim):
    """masked_mean: random values, a bool mask, as grpo_edu.functional"""
    x, m = randn(5, 7, seed=1), random_mask(5, 7, seed=2).bool()
    check_close(submission.masked_mean(x, m, dim=dim), Fn.masked_mean(x, m, dim=dim),
                f"masked_mean(random [5, 7], bool mask, dim={dim})")  # fmt: skip


# ------------------------------------------------------------ (2) baseline advantages


@pytest.mark.graded(points=2)
def test_baseline_advantages_by_hand(submission):
    """baseline_advantages: a constant b, one b per sequence, a critic's V(s_t)"""
    G = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 9.0]])
    m = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    check_close(submission.baseline_advantages(G, 0.25, m), torch.tensor([[0.75, 0.75, 0.75], [-0.25, -0.25, 0.0]]),
                "baseline_advantages(G, b=0.25, m) (0 on padding)")  # fmt: skip
    check_close(submission.baseline_advantages(G, torch.tensor(0.25), m),
                torch.tensor([[0.75, 0.75, 0.75], [-0.25, -0.25, 0.0]]), "baseline_advantages(G, b=tensor(0.25), m)")  # fmt: skip
    check_close(submission.baseline_advantages(G, torch.tensor([0.5, 1.0]), m),
                torch.tensor([[0.5, 0.5, 0.5], [-1.0, -1.0, 0.0]]), "baseline_advantages(G, b=[0.5, 1.0] per sequence, m)")  # fmt: skip
    V = torch.tensor([[0.2, 0.4, 0.8], [0.1, 0.3, 0.0]])
    check_close(submission.baseline_advantages(G, V, m), torch.tensor([[0.8, 0.6, 0.2], [-0.1, -0.3, 0.0]]),
                "baseline_advantages(G, V(s_t) [2, 3], m)")  # fmt: skip


@pytest.mark.graded(points=2)
def test_baseline_advantages_random_and_detached(submission):
    """baseline_advantages: random G, V and masks; no gradient into G or the baseline"""
    G, V, m = randn(6, 5, seed=3), randn(6, 5, seed=4), random_mask(6, 5, seed=5)
    check_close(submission.baseline_advantages(G, V, m), (G - V) * m, "baseline_advantages(random G, V, ragged mask)")
    g_G, g_V = grad_of(lambda g, v: submission.baseline_advantages(g, v, m), G, V)
    check_no_grad(g_G, "returns", "baseline_advantages")
    check_no_grad(g_V, "baseline", "baseline_advantages (the critic learns from its own loss only)")


# -------------------------------------------------------------------- (3) value loss


@pytest.mark.graded(points=2)
def test_value_loss_values(submission):
    """value_loss: by hand, then random values and masks, as grpo_edu.functional"""
    V, R = torch.tensor([[0.5, 0.0, 7.0]]), torch.tensor([[1.0, 1.0, 0.0]])
    m = torch.tensor([[1.0, 1.0, 0.0]])
    check_float(submission.value_loss(V, R, m), 0.5 * (0.25 + 1.0) / 2,
                "value_loss(V=[[0.5, 0, 7]], R=[[1, 1, 0]], m=[[1, 1, 0]]) = 1/2 (0.5^2 + 1^2) / 2")  # fmt: skip
    V, R, m = randn(6, 5, seed=6), randn(6, 5, seed=7), random_mask(6, 5, seed=8)
    got = submission.value_loss(V, R, m)
    check_close(got, Fn.value_loss(V, R, m), "value_loss(random [6, 5], ragged mask)")


@pytest.mark.graded(points=1)
@pytest.mark.parametrize("clip", [0.0, 0.2, 10.0], ids=lambda c: f"clip={c}")
def test_value_loss_clipped(submission, clip):
    """value_loss with clip: values and gradient, as grpo_edu.functional"""
    V, R, V_old, m = randn(6, 5, seed=9), randn(6, 5, seed=10), randn(6, 5, seed=11), random_mask(6, 5, seed=12)
    got = submission.value_loss(V, R, m, old_values=V_old, clip=clip)
    check_close(got, Fn.value_loss(V, R, m, old_values=V_old, clip=clip),
                f"value_loss(random, old_values=random, clip={clip})")  # fmt: skip
    g_V, g_R, g_old = grad_of(lambda v, r, o: submission.value_loss(v, r, m, o, clip), V, R, V_old)
    (e_V,) = grad_of(lambda v: Fn.value_loss(v, R, m, V_old, clip), V)
    assert g_V is not None, "value_loss: no gradient flowed into values"
    check_close(g_V, e_V, f"d value_loss / d values with clip={clip}")
    check_no_grad(g_R, "returns", "value_loss (clipped)")
    check_no_grad(g_old, "old_values", "value_loss (clipped)")


@pytest.mark.graded(points=2)
def test_value_loss_gradient_and_edges(submission):
    """value_loss: d L / d V = (V - R) m / n, no gradient into R; an empty mask gives 0"""
    V, R, m = randn(4, 6, seed=13), randn(4, 6, seed=14), random_mask(4, 6, seed=15)
    g_V, g_R = grad_of(lambda v, r: submission.value_loss(v, r, m), V, R)
    assert g_V is not None, "value_loss: no gradient flowed into values"
    check_close(g_V, (V - R) * m / m.sum(), "d value_loss / d values (should be (V - R) m / sum(m))")
    check_no_grad(g_R, "returns", "value_loss")
    empty = torch.zeros(4, 6)
    got = submission.value_loss(V, R, empty)
    check_float(got, 0.0, "value_loss with no real token (must be 0, not NaN)")
    with pytest.raises(ValueError):
        submission.value_loss(V, R, m, old_values=None, clip=0.2)


# ------------------------------------------------------------ training with your code


def _plugs(sub):
    return dict(masked_mean=sub.masked_mean, baseline_advantages=sub.baseline_advantages, value_loss=sub.value_loss)


test_training_reproduces_library, test_training_improves = training_tests(
    lambda: make_algorithm("baseline", baseline="critic"),
    _plugs,
    _probe,
    "REINFORCE + critic baseline",
    (
        "arithmetic: REINFORCE with your critic baseline reproduces the library's run",
        "arithmetic: with your critic baseline, the sampled reward rises during training",
    ),
    steps=STEPS,
    window=WINDOW,
    margin=MARGIN,
    sequences=SEQUENCES,
    reproduce_steps=REPRODUCE_STEPS,
    finite="value_loss",
)
