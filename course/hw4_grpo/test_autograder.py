"""Autograder of homework 4 (GRPO).

    python -m course.grade hw4 path/to/student_hw4.py

Each test calls the submission first (an unimplemented function fails the test with
NotImplementedError), then compares it with grpo_edu.functional or trains with it.
"""

import math

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

# Training checks: GRPO's defaults (2 epochs x 2 minibatches, beta*k3 in the loss,
# token_mean, GRPOConfig's default loss_type) with groups of 4 and 256 sequences/step (64
# prompts: with 16 prompts of 8 the mean reward per step is too noisy to see learning in a
# few steps): the mean sampled reward must rise by MARGIN from the first WINDOW to the last
# WINDOW of STEPS steps (course/autograde.training_tests).
CONFIG = dict(group_size=4)
STEPS, WINDOW, MARGIN, SEQUENCES, REPRODUCE_STEPS = 40, 10, 0.02, 256, 6


def _probe(sub):
    """Call the three functions once on a tiny input (NotImplementedError surfaces here)."""
    z, m = torch.zeros(2, 2), torch.ones(2, 2)
    sub.group_advantages(torch.tensor([0.0, 1.0]), 2)
    sub.kl_penalized_rewards(z, z, z, m, 0.1)
    sub.aggregate_loss(z, m)


def _check_group_stats(got, expected, what):
    assert isinstance(got, dict), f"{what}: the second output should be a dict of statistics, got {type(got).__name__}"
    for k in ("mean", "std", "frac_zero_std"):
        assert k in got, f"{what}: the statistics dict misses {k!r} (expected keys mean, std, frac_zero_std)"
    check_close(got["mean"], expected["mean"], f"{what}: stats['mean'] (one per group)")
    check_close(got["std"], expected["std"], f"{what}: stats['std'] (one per group)")
    check_float(got["frac_zero_std"], expected["frac_zero_std"], f"{what}: stats['frac_zero_std']")


# ------------------------------------------------------------ (1) group advantages


@pytest.mark.graded(points=2)
def test_group_advantages_by_hand(submission):
    """group_advantages: two groups of 4 and an all-equal group, each scale"""
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    s1 = math.sqrt(0.25 * 0.75)  # std (1/G) of [1, 0, 0, 0]
    adv, stats = submission.group_advantages(r, 4, scale="group", eps=0.0)
    expected = [0.75 / s1, -0.25 / s1, -0.25 / s1, -0.25 / s1, 1.0, 1.0, -1.0, -1.0, 0.0, 0.0, 0.0, 0.0]
    check_close(adv, torch.tensor(expected),
                "group_advantages([1,0,0,0 | 1,1,0,0 | 1,1,1,1], G=4, scale='group', eps=0) "
                "(the all-equal group gets 0, not NaN)")  # fmt: skip
    _check_group_stats(stats, {"mean": torch.tensor([0.25, 0.5, 1.0]), "std": torch.tensor([s1, 0.5, 0.0]),
                               "frac_zero_std": 1 / 3}, "the same example")  # fmt: skip
    adv, _ = submission.group_advantages(r, 4, scale="none")
    check_close(adv, torch.tensor([0.75, -0.25, -0.25, -0.25, 0.5, 0.5, -0.5, -0.5, 0, 0, 0, 0]),
                "group_advantages(same rewards, scale='none') (Dr. GRPO: r - mean, no division)")  # fmt: skip
    adv, _ = submission.group_advantages(r, 4, scale="group", eps=0.0, unbiased=True)
    u1 = math.sqrt(0.75 / 3)  # std (1/(G-1)) of [1, 0, 0, 0]
    u2 = math.sqrt(1.0 / 3)
    check_close(adv, torch.tensor([0.75 / u1, -0.25 / u1, -0.25 / u1, -0.25 / u1,
                                   0.5 / u2, 0.5 / u2, -0.5 / u2, -0.5 / u2, 0, 0, 0, 0]),
                "group_advantages(same rewards, scale='group', unbiased=True)")  # fmt: skip


@pytest.mark.graded(points=1)
@pytest.mark.parametrize("unbiased", [False, True], ids=["1/G", "1/(G-1)"])
@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_group_advantages_matches_library(submission, scale, unbiased):
    """group_advantages: random 0/1 and real rewards, as grpo_edu.functional"""
    g = torch.Generator().manual_seed(1)
    binary = (torch.rand(32, generator=g) < 0.3).float()
    binary[:8] = 1.0  # two all-equal groups
    for rewards, kind in ((binary, "0/1"), (randn(32, seed=2), "real-valued")):
        what = f"group_advantages({kind} rewards [32], G=4, scale={scale!r}, unbiased={unbiased})"
        adv, stats = submission.group_advantages(rewards, 4, scale=scale, eps=1e-4, unbiased=unbiased)
        lib_adv, lib_stats = Fn.group_advantages(rewards, 4, scale=scale, eps=1e-4, unbiased=unbiased)
        check_close(adv, lib_adv, what)
        _check_group_stats(stats, lib_stats, what)


@pytest.mark.graded(points=1)
def test_group_advantages_edge_cases(submission):
    """group_advantages: G = 1, integer rewards, equal rewards with eps = 0"""
    adv, stats = submission.group_advantages(torch.tensor([1.0, 0.0, 1.0]), 1)
    check_close(adv, torch.zeros(3), "group_advantages(G=1): a group of one has no baseline but itself -> 0")
    check_float(stats["frac_zero_std"], 1.0, "group_advantages(G=1): stats['frac_zero_std']")
    adv, _ = submission.group_advantages(torch.tensor([1, 0, 1, 1]), 2)
    check_close(
        adv, Fn.group_advantages(torch.tensor([1, 0, 1, 1]), 2)[0], "group_advantages(integer rewards [1,0,1,1], G=2)"
    )
    adv, _ = submission.group_advantages(torch.tensor([0.3, 0.3, 0.3, 0.3]), 4, eps=0.0)
    assert bool(torch.isfinite(adv).all()), f"group_advantages(all equal, eps=0) must be 0, not NaN: got {adv.tolist()}"
    check_close(
        adv, torch.zeros(4), "group_advantages([0.3]*4, G=4, eps=0) (0.3 - mean can be 1e-8, not 0: test equality)"
    )


@pytest.mark.graded(points=1)
def test_group_advantages_leave_one_out(submission):
    """group_advantages: leave_one_out (RLOO) by hand and as grpo_edu.functional"""
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    adv, _ = submission.group_advantages(r, 4, scale="none", leave_one_out=True)
    # r_i - mean of the other three: 1 - 0, 0 - 1/3 | 1 - 1/3, 0 - 2/3 | all equal -> 0
    expected = [1.0, -1 / 3, -1 / 3, -1 / 3, 2 / 3, 2 / 3, -2 / 3, -2 / 3, 0.0, 0.0, 0.0, 0.0]
    check_close(adv, torch.tensor(expected), "group_advantages([1,0,0,0 | 1,1,0,0 | 1,1,1,1], G=4, "
                "scale='none', leave_one_out=True) = r_i - mean of the other G-1")  # fmt: skip
    for scale in ("group", "none"):
        rewards = randn(32, seed=3)
        got, _ = submission.group_advantages(rewards, 4, scale=scale, eps=1e-4, leave_one_out=True)
        lib, _ = Fn.group_advantages(rewards, 4, scale=scale, eps=1e-4, leave_one_out=True)
        check_close(got, lib, f"group_advantages(real rewards [32], G=4, scale={scale!r}, leave_one_out=True)")


# ------------------------------------------------------------ (2) KL-penalised reward


@pytest.mark.graded(points=2)
def test_kl_penalized_rewards(submission):
    """kl_penalized_rewards: by hand, as grpo_edu.functional, and detached"""
    scores = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    logp = torch.tensor([[-0.1, -0.2, -0.3], [-1.0, -2.0, -3.0]])
    ref = torch.tensor([[-0.2, -0.2, -0.6], [-1.0, -1.0, -3.0]])
    m = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    tok, seq = submission.kl_penalized_rewards(scores, logp, ref, m, 0.5)
    check_close(tok, torch.tensor([[-0.05, 0.0, 1.0 - 0.15], [0.0, 0.5, 0.0]]),
                "kl_penalized_rewards(...) token rewards r_t = score_t - 0.5 (logp - ref_logp), 0 on padding")  # fmt: skip
    check_close(seq, torch.tensor([0.8, 0.5]), "kl_penalized_rewards(...) sequence rewards sum_t r_t")
    s, lp, rf, mm = randn(5, 6, seed=3), randn(5, 6, seed=4), randn(5, 6, seed=5), random_mask(5, 6, seed=6)
    for beta in (0.0, 0.04, 1.0):
        tok, seq = submission.kl_penalized_rewards(s, lp, rf, mm, beta)
        lib_tok, lib_seq = Fn.kl_penalized_rewards(s, lp, rf, mm, beta)
        check_close(tok, lib_tok, f"kl_penalized_rewards(random, beta={beta}) token rewards")
        check_close(seq, lib_seq, f"kl_penalized_rewards(random, beta={beta}) sequence rewards")
    g_lp, g_rf = grad_of(lambda a, b: sum(x.sum() for x in submission.kl_penalized_rewards(s, a, b, mm, 0.1)), lp, rf)
    check_no_grad(g_lp, "logp", "kl_penalized_rewards (rewards are data)")
    check_no_grad(g_rf, "ref_logp", "kl_penalized_rewards (rewards are data)")


@pytest.mark.graded(points=1)
@pytest.mark.parametrize("kind", ["k2", "k3"])
def test_kl_penalized_rewards_other_estimators(submission, kind):
    """kl_penalized_rewards: kind='k2' / 'k3' as grpo_edu.functional, detached"""
    s, lp, rf, mm = randn(5, 6, seed=3), randn(5, 6, seed=4), randn(5, 6, seed=5), random_mask(5, 6, seed=6)
    tok, seq = submission.kl_penalized_rewards(s, lp, rf, mm, 0.1, kind=kind)
    lib_tok, lib_seq = Fn.kl_penalized_rewards(s, lp, rf, mm, 0.1, kind=kind)
    check_close(tok, lib_tok, f"kl_penalized_rewards(random, beta=0.1, kind={kind!r}) token rewards")
    check_close(seq, lib_seq, f"kl_penalized_rewards(random, beta=0.1, kind={kind!r}) sequence rewards")
    (g_lp,) = grad_of(lambda a: sum(x.sum() for x in submission.kl_penalized_rewards(s, a, rf, mm, 0.1, kind=kind)), lp)
    check_no_grad(g_lp, "logp", f"kl_penalized_rewards(kind={kind!r}) (rewards are data)")


# ------------------------------------------------------------ (3)-(5) loss aggregation

# Two completions: one of 1 token with loss 1, one of 3 tokens with loss 1 each (T = 4).
L_EX = torch.tensor([[1.0, 7.0, 7.0, 7.0], [1.0, 1.0, 1.0, 7.0]])
M_EX = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]])


@pytest.mark.graded(points=2)
def test_aggregate_loss_by_hand(submission):
    """aggregate_loss: the three modes on the handout's two-completion example"""
    check_float(submission.aggregate_loss(L_EX, M_EX, "sequence_mean"), 1.0,
                "aggregate_loss(example, 'sequence_mean') = 1/2 (1/1 + 3/3)")  # fmt: skip
    check_float(submission.aggregate_loss(L_EX, M_EX, "token_mean"), 1.0, "aggregate_loss(example, 'token_mean') = 4/4")
    check_float(submission.aggregate_loss(L_EX, M_EX, "constant"), 0.5, "aggregate_loss(example, 'constant') = 4/(2*4)")
    check_float(submission.aggregate_loss(L_EX, M_EX, "constant", max_length=10), 0.2,
                "aggregate_loss(example, 'constant', max_length=10) = 4/(2*10)")  # fmt: skip
    check_float(submission.aggregate_loss(L_EX, M_EX), 1.0, "aggregate_loss(example) (default mode 'sequence_mean')")


@pytest.mark.graded(points=1)
@pytest.mark.parametrize("mode", ["sequence_mean", "token_mean", "constant"])
def test_aggregate_loss_gradient_weights(submission, mode):
    """aggregate_loss: the weight of each token (its gradient), as grpo_edu.functional"""
    L, m = randn(5, 6, seed=7), random_mask(5, 6, seed=8)
    check_close(
        submission.aggregate_loss(L, m, mode), Fn.aggregate_loss(L, m, mode), f"aggregate_loss(random [5, 6], {mode!r})"
    )
    (got,) = grad_of(lambda x: submission.aggregate_loss(x, m, mode), L)
    (exp,) = grad_of(lambda x: Fn.aggregate_loss(x, m, mode), L)
    assert got is not None, f"aggregate_loss({mode!r}): no gradient flowed into the per-token losses"
    check_close(got, exp, f"d aggregate_loss({mode!r}) / d L_it (the weight of each token; 0 on padding)")


@pytest.mark.graded(points=1)
def test_aggregate_loss_empty(submission):
    """aggregate_loss: an empty completion counts in 1/B; an all-padding batch gives 0"""
    L = torch.tensor([[2.0, 2.0], [5.0, 5.0]])
    m = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    check_float(submission.aggregate_loss(L, m, "sequence_mean"), 1.0,
                "aggregate_loss('sequence_mean') with one empty completion = 1/2 (4/2 + 0)")  # fmt: skip
    for mode in ("sequence_mean", "token_mean", "constant"):
        got = submission.aggregate_loss(L, torch.zeros(2, 2), mode)
        check_float(got, 0.0, f"aggregate_loss({mode!r}) of an all-padding batch (0, not NaN)")


# ------------------------------------------------------------ training with your code


def _plugs(sub):
    return dict(group_advantages=sub.group_advantages, kl_penalized_rewards=sub.kl_penalized_rewards,
                aggregate_loss=sub.aggregate_loss)  # fmt: skip


test_training_reproduces_library, test_training_improves = training_tests(
    lambda: make_algorithm("grpo", **CONFIG),
    _plugs,
    _probe,
    "GRPO",
    (
        "arithmetic: GRPO with your functions reproduces the library's run",
        "arithmetic: with your functions, GRPO's sampled reward rises during training",
    ),
    steps=STEPS,
    window=WINDOW,
    margin=MARGIN,
    sequences=SEQUENCES,
    reproduce_steps=REPRODUCE_STEPS,
)
