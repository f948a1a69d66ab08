"""On-policy distillation's per-token signal: the student samples, a teacher scores every token of the
student's own answer (Agarwal et al. 2024, GKD; Thinking Machines 2025, "On-Policy Distillation")."""

from __future__ import annotations

from torch import Tensor

from ._checks import _in_range, _ndim, _same_shape


def distillation_advantages(logp: Tensor, teacher_logp: Tensor, mask: Tensor, coef: float = 1.0) -> Tensor:
    """The per-token advantage of on-policy distillation: minus the sampled reverse KL to the teacher,

        A_t = -coef * (log pi_theta(a_t | s_t) - log pi_teacher(a_t | s_t)),   a_t ~ pi_theta

    each token its own, no sum over the tokens after it (Thinking Machines' discount 0). ``-A_t`` is the
    estimator k1 of KL(pi_theta || pi_teacher) at s_t (`kl_estimate` with the teacher in pi_ref's place);
    its expectation over a_t ~ pi_theta is the exact per-token reverse KL (`exact_kl`, direction "pi||ref").
    Fed to the policy gradient, ``-A_t grad log pi_theta(a_t)`` averages to ``grad KL(pi_theta || pi_teacher)``
    at each visited state: the student is pushed down where the teacher finds its token less likely than
    it does, up where more. A teacher equal to the student gives A = 0.

    logp: [B, T] the student's log-probs of its sampled tokens (log pi_old: fixed, like a reward);
    teacher_logp: [B, T] the teacher's log-probs of the same tokens; mask: [B, T]; coef >= 0 (Thinking
    Machines' ``kl_penalty_coef``). Both log-probs are detached: A is data. Returns [B, T], 0 off-mask.
    """
    _ndim("logp", logp, 2, "[B, T]")
    _same_shape("logp", logp, teacher_logp=teacher_logp, mask=mask)
    _in_range("coef", coef)
    return -coef * (logp.detach() - teacher_logp.detach()) * mask.to(logp.dtype)
