"""On-policy distillation: its per-token signal by hand, its gradient against the exact reverse KL's,
the algorithm's zero signal when the teacher is the student, and a short seeded learning test with its
controls (the teacher equal to the student, a learning rate of ~0)."""

import copy

import numpy as np
import pytest
import torch

from grpo_edu import functional as Fn
from grpo_edu.algorithms import DistillConfig, OnPolicyDistillation, make_algorithm
from grpo_edu.rollout import sample_batch, sequence_logprobs, teacher_forced
from grpo_edu.train import update


def test_distillation_advantages_by_hand():
    logp = torch.tensor([[-1.0, -2.0, -0.5], [-0.1, -3.0, -4.0]])
    teacher = torch.tensor([[-1.5, -0.5, -0.5], [-2.1, -1.0, -9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    # A = -coef (logp - teacher): row 0: -(0.5), -(-1.5), 0; row 1: -(2.0), -(-2.0), masked
    want = 0.5 * torch.tensor([[-0.5, 1.5, 0.0], [-2.0, 2.0, 0.0]])
    got = Fn.distillation_advantages(logp.requires_grad_(), teacher, mask, coef=0.5)
    assert torch.allclose(got, want) and not got.requires_grad  # data, like a reward
    same = Fn.distillation_advantages(teacher, teacher, mask)
    assert torch.equal(same, torch.zeros_like(same))  # a teacher equal to the student: no signal
    # -A is k1 of KL(student || teacher), the teacher in pi_ref's place
    assert torch.allclose(-Fn.distillation_advantages(logp, teacher, mask), Fn.kl_estimate(logp, teacher, "k1") * mask)


def test_distillation_advantages_bad_input():
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="teacher_logp must have the shape"):
        Fn.distillation_advantages(x, torch.zeros(2, 4), x)
    with pytest.raises(ValueError, match="coef must be in"):
        Fn.distillation_advantages(x, x, x, coef=-1.0)
    with pytest.raises(ValueError, match=r"logp must be \[B, T\]"):
        Fn.distillation_advantages(torch.zeros(3), torch.zeros(3), torch.zeros(3))


def test_expected_policy_gradient_is_the_reverse_kl_gradient():
    """At one state, sum_a pi(a) * grad(-A_a log pi(a)) over every token a (the expectation the sampled
    update estimates) equals grad KL(pi || pi_teacher), exactly: the signal's gradient check."""
    torch.manual_seed(0)
    V = 7
    z = torch.randn(1, 1, V, dtype=torch.float64, requires_grad=True)
    zt = torch.randn(1, 1, V, dtype=torch.float64)
    logpi = torch.log_softmax(z, -1).reshape(1, V)  # each token a as a column: [1, V]
    logq = torch.log_softmax(zt, -1).reshape(1, V)
    adv = Fn.distillation_advantages(logpi, logq, torch.ones(1, V, dtype=torch.float64))
    surrogate = (logpi.detach().exp() * Fn.policy_gradient_loss(logpi, adv)).sum()
    (g_pg,) = torch.autograd.grad(surrogate, z)
    (g_kl,) = torch.autograd.grad(Fn.exact_kl(z, zt, "pi||ref").sum(), z)
    assert torch.allclose(g_pg, g_kl, atol=1e-12) and g_kl.abs().max() > 1e-3  # control: a gradient, not zeros
    (g_fwd,) = torch.autograd.grad(Fn.exact_kl(z, zt, "ref||pi").sum(), z)
    assert not torch.allclose(g_pg, g_fwd, atol=1e-3)  # control: it is the reverse KL's, not the forward's


def test_config_and_setup_refuse_bad_input(tiny_policy):
    with pytest.raises(ValueError, match="DistillConfig.objective='nll' is defined on samples"):
        DistillConfig(objective="nll")
    with pytest.raises(ValueError, match="DistillConfig.samples must be one of"):
        DistillConfig(samples="both")
    with pytest.raises(ValueError, match="DistillConfig.kl_coef must be >= 0"):
        DistillConfig(kl_coef=-1.0)
    with pytest.raises(ValueError, match="needs a teacher"):
        make_algorithm("distill").setup(tiny_policy)
    with pytest.raises(ValueError, match="must not be the policy"):
        make_algorithm("distill", teacher=tiny_policy).setup(tiny_policy)
    assert isinstance(make_algorithm("distill", teacher=copy.deepcopy(tiny_policy)), OnPolicyDistillation)


def _batch(policy, task, n=32, seed=0):
    return sample_batch(policy, task, n, 1, np.random.default_rng(seed), torch.Generator().manual_seed(seed))[:2]


@pytest.mark.parametrize("objective", ["advantage", "reverse_kl", "forward_kl"])
def test_a_teacher_equal_to_the_student_gives_no_signal(objective, task, tiny_policy):
    """The control of the learning tests below: the student is its own teacher, its gradient is zero.
    The sampled signal is zero exactly, so a whole update (Adam included) moves no parameter; the exact
    KLs' gradient is zero only to float rounding, which Adam's normalisation would scale into steps."""
    algo = make_algorithm("distill", teacher=copy.deepcopy(tiny_policy), objective=objective)
    algo.setup(tiny_policy, generator=torch.Generator().manual_seed(0))
    ro, scores = _batch(tiny_policy, task)
    batch = algo.prepare(ro, scores)
    loss, _ = algo.loss(batch, torch.arange(ro.batch_size))
    grads = torch.autograd.grad(loss, list(tiny_policy.parameters()))
    assert batch.stats["teacher_kl"] == 0.0 and max(float(g.abs().max()) for g in grads) < 1e-7
    if objective == "advantage":
        before = [p.detach().clone() for p in tiny_policy.parameters()]
        assert update(algo, ro, scores)["grad_norm"] == 0.0
        assert all(torch.equal(a, b) for a, b in zip(before, tiny_policy.parameters(), strict=True))


def test_the_first_step_is_the_sampled_reverse_kl_gradient(task, tiny_policy, reference):
    """objective="advantage" at rho = 1 has the gradient of token_mean((log pi_old - log pi_teacher) log pi)."""
    algo = make_algorithm("distill", teacher=reference)
    algo.setup(tiny_policy, generator=torch.Generator().manual_seed(0))
    ro, scores = _batch(tiny_policy, task)
    batch = algo.prepare(ro, scores)
    idx = torch.arange(ro.batch_size)
    loss, _ = algo.loss(batch, idx)
    g = torch.autograd.grad(loss, list(tiny_policy.parameters()))
    logp = sequence_logprobs(tiny_policy, ro)
    teacher = Fn.token_logprobs(teacher_forced(reference, ro), ro.completion_ids) * ro.mask
    manual = Fn.masked_mean((ro.logprobs - teacher) * logp, ro.mask)
    want = torch.autograd.grad(manual, list(tiny_policy.parameters()))
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(g, want, strict=True))
    assert max(float(a.abs().max()) for a in g) > 1e-4  # control: a real gradient


def _probe_kl(student, teacher, task):
    """The exact per-token KL(student || teacher), averaged over the teacher's greedy held-out answers."""
    from grpo_edu.rollout import generate

    probs = task.eval_problems()[:200]
    with torch.no_grad():
        ro = generate(teacher, task.encode_prompts(probs), max_new_tokens=task.max_answer_length, temperature=0.0,
                      tokenizer=task.tokenizer)  # fmt: skip
        kl = Fn.exact_kl(teacher_forced(student, ro), teacher_forced(teacher, ro), "pi||ref")
    return float(Fn.masked_mean(kl, ro.mask))


def _distill(task, student, teacher, steps=15, **config):
    algo = make_algorithm("distill", teacher=teacher, **config)
    algo.setup(student, generator=torch.Generator().manual_seed(0))
    rng, gen = np.random.default_rng(0), torch.Generator().manual_seed(0)
    for _ in range(steps):
        ro, scores, _ = sample_batch(algo.sampling_policy(), task, 128, 1, rng, gen)
        update(algo, ro, scores)
    return _probe_kl(student, teacher, task)


@pytest.mark.parametrize("config", [{}, {"objective": "reverse_kl"}, {"samples": "teacher", "objective": "nll"}])
def test_the_student_learns_the_teacher(config, task, tiny_policy, reference):
    """15 steps of 128 answers: a random student's KL to the teacher (the cpu reference) falls; with a
    learning rate of ~0 it does not move (and the teacher-equal-student control is the test above)."""
    start = _probe_kl(tiny_policy, reference, task)
    frozen = _distill(task, copy.deepcopy(tiny_policy), reference, lr=1e-12, **config)
    learned = _distill(task, copy.deepcopy(tiny_policy), reference, lr=3e-3, **config)
    assert abs(frozen - start) < 1e-4 * start
    assert learned < 0.7 * start, (start, learned)
