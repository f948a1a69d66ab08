"""Autograder of homework 1 (REINFORCE).

    python -m course.grade hw1 path/to/student_hw1.py

Each test calls the submission first (an unimplemented function fails the test with
NotImplementedError), then compares it with grpo_edu.functional or trains with it.
"""

import pytest
import torch

import grpo_edu.functional as Fn
from course.autograde import (
    check_close,
    check_no_grad,
    grad_of,
    randn,
    random_mask,
    training_tests,
)
from grpo_edu import make_algorithm, plug
from grpo_edu.demos.maze_pg import train_maze

# Training checks. MEASURED on the cpu preset (reference at 26% held-out), seeds 0-3,
# 128 sequences/step: the mean sampled reward rose by +0.052 .. +0.120 from the first 20
# to the last 20 of 60 steps (~2.5 s of training).
STEPS, WINDOW, MARGIN, SEQUENCES, REPRODUCE_STEPS = 60, 20, 0.02, 128, 5
# The maze (40 steps x 8 episodes, seeds 0-3): success 0.3-0.5 -> 1.0 and mean episode
# length 41-45 -> 11-12 steps from the first 10 steps to the last 10.
MAZE = dict(gamma=0.95, steps=40, episodes_per_step=8, seed=0, progress=False)


def _plugs(sub):
    return dict(discounted_returns=sub.discounted_returns, policy_gradient_loss=sub.policy_gradient_loss)


def _probe(sub):
    """Call both functions once on a tiny input (NotImplementedError surfaces here)."""
    sub.discounted_returns(torch.zeros(1, 2), torch.ones(1, 2), 1.0)
    sub.policy_gradient_loss(torch.zeros(1, 2), torch.zeros(1))


# ------------------------------------------------------------ (1) discounted returns


@pytest.mark.graded(points=2)
def test_discounted_returns_by_hand(submission):
    """discounted_returns: the hand-computed examples of the handout"""
    cases = [  # (rewards, mask, gamma, expected, what)
        ([[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]], [[1, 1, 1], [1, 1, 1]], 0.5,
         [[0.25, 0.5, 1.0], [1.75, 1.5, 1.0]], "gamma=0.5"),
        ([[0.0, 0.0, 1.0, 0.0]], [[1, 1, 1, 0]], 1.0, [[1.0, 1.0, 1.0, 0.0]],
         "gamma=1, a sparse final reward, one padding step"),
        ([[1.0, 0.0, 5.0]], [[1, 1, 0]], 0.9, [[1.0, 0.0, 0.0]],
         "a reward on padding must count as 0"),
        ([[-0.01, -0.01, 1.0]], [[1, 1, 1]], 0.0, [[-0.01, -0.01, 1.0]], "gamma=0: G_t = r_t"),
    ]  # fmt: skip
    for rewards, mask, gamma, expected, what in cases:
        r, m = torch.tensor(rewards), torch.tensor(mask, dtype=torch.float32)
        got = submission.discounted_returns(r, m, gamma)
        check_close(got, torch.tensor(expected), f"discounted_returns({rewards}, mask={mask}, gamma={gamma}) [{what}]")


@pytest.mark.graded(points=1)
@pytest.mark.parametrize("gamma", [0.0, 0.5, 0.9, 1.0], ids=lambda g: f"gamma={g}")
def test_discounted_returns_matches_library(submission, gamma):
    """discounted_returns: random rewards and ragged masks, as grpo_edu.functional"""
    rewards, mask = randn(6, 9, seed=1), random_mask(6, 9, seed=2)
    got = submission.discounted_returns(rewards, mask, gamma)
    check_close(got, Fn.discounted_returns(rewards, mask, gamma),
                f"discounted_returns(random [6, 9] rewards, ragged mask, gamma={gamma})")  # fmt: skip


@pytest.mark.graded(points=1)
def test_discounted_returns_edge_cases(submission):
    """discounted_returns: one step, an empty row, a bool mask, float64"""
    got = submission.discounted_returns(torch.tensor([[2.0]]), torch.tensor([[1.0]]), 0.9)
    check_close(got, torch.tensor([[2.0]]), "discounted_returns with T = 1")
    r, m = randn(3, 4, seed=3), torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    got = submission.discounted_returns(r, m, 0.7)
    check_close(got, Fn.discounted_returns(r, m, 0.7),
                "discounted_returns with a bool mask and an all-padding row (its returns are all 0)")  # fmt: skip
    r64, m64 = randn(4, 5, seed=4, dtype=torch.float64), random_mask(4, 5, seed=5).double()
    got = submission.discounted_returns(r64, m64, 0.99)
    check_close(got, Fn.discounted_returns(r64, m64, 0.99), "discounted_returns in float64", rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------ (2) policy-gradient loss


@pytest.mark.graded(points=2)
def test_policy_gradient_loss_values(submission):
    """policy_gradient_loss: values for [B] and [B, T] advantages, as grpo_edu.functional"""
    logp = -randn(4, 6, seed=6).abs()
    got = submission.policy_gradient_loss(logp, torch.tensor([1.0, 0.0, -2.0, 0.5]))
    check_close(got, Fn.policy_gradient_loss(logp, torch.tensor([1.0, 0.0, -2.0, 0.5])),
                "policy_gradient_loss(logp [4, 6], advantages [4] = [1, 0, -2, 0.5]) (broadcast over T)")  # fmt: skip
    adv = randn(4, 6, seed=7)
    got = submission.policy_gradient_loss(logp, adv)
    check_close(got, Fn.policy_gradient_loss(logp, adv), "policy_gradient_loss(logp [4, 6], advantages [4, 6])")
    got = submission.policy_gradient_loss(torch.tensor([[-0.5, -2.0]]), torch.tensor([3.0]))
    check_close(got, torch.tensor([[1.5, 6.0]]), "policy_gradient_loss([[-0.5, -2.0]], [3.0]) = -A log pi")


@pytest.mark.graded(points=2)
def test_policy_gradient_loss_gradient(submission):
    """policy_gradient_loss: d loss / d logp = -A, and no gradient into the advantages"""
    logp, adv = -randn(3, 5, seed=8).abs(), randn(3, seed=9)
    g_logp, g_adv = grad_of(submission.policy_gradient_loss, logp, adv)
    assert g_logp is not None, "policy_gradient_loss: no gradient flowed into logp (did you detach it?)"
    check_close(g_logp, -adv[:, None].expand(3, 5), "d sum(policy_gradient_loss) / d logp (should be -A_t)")
    check_no_grad(g_adv, "advantages", "policy_gradient_loss")


# ------------------------------------------------------------ training with your code


def _same_maze(student, library):
    for key in ("return", "length", "success"):
        same = student[key] == library[key]
        assert same, (
            f"maze with your functions plugged in: per-step {key!r} should be the library's "
            f"(same seed) {[round(v, 3) for v in library[key][:8]]}..., got "
            f"{[round(v, 3) for v in student[key][:8]]}..."
        )


@pytest.mark.graded(points=2)
def test_maze_training(submission):
    """maze: tabular REINFORCE with your functions reproduces the library and reaches the goal"""
    _probe(submission)
    with plug(**_plugs(submission)):
        student = train_maze(**MAZE)
    library = train_maze(**MAZE)
    _same_maze(student, library)
    success = sum(student["success"][-10:]) / 10
    first, last = sum(student["length"][:10]) / 10, sum(student["length"][-10:]) / 10
    assert success >= 0.9, f"maze: expected the goal reached in >= 90% of the last episodes, got {success:.0%}"
    assert last <= first - 10, f"maze: expected episodes >= 10 steps shorter by the end, got {first:.1f} -> {last:.1f}"


test_arithmetic_reproduces_library, test_arithmetic_improves = training_tests(
    lambda: make_algorithm("reinforce"),
    _plugs,
    _probe,
    "REINFORCE",
    (
        "arithmetic: REINFORCE with your functions plugged in reproduces the library's run",
        "arithmetic: with your functions, the sampled reward rises during training",
    ),
    steps=STEPS,
    window=WINDOW,
    margin=MARGIN,
    sequences=SEQUENCES,
    reproduce_steps=REPRODUCE_STEPS,
)
