"""On-policy distillation: the student samples, a teacher scores every token of the student's own answer.

Beside the ladder, not a rung of it: no reward, a teacher instead (Agarwal et al. 2024, GKD; Thinking
Machines 2025, "On-Policy Distillation"). For a student completion a ~ pi_old (the student itself):

    A_t = -kl_coef * (log pi_old(a_t|s_t) - log pi_teacher(a_t|s_t))       (Fn.distillation_advantages)
    L   = agg_t -min(rho_t A_t, clip(rho_t, 1-eps_low, 1+eps_high) A_t)    (objective="advantage")

each token its own advantage (discount 0): the signal is dense, like SFT's, and on the student's own
states, like RL's. Its gradient averages to that of the per-token reverse KL(pi_theta || pi_teacher) at
the states the student visits; ``objective="reverse_kl"`` differentiates that KL itself, exactly over the
vocabulary (GKD with beta = 1), ``"forward_kl"`` KL(pi_teacher || pi_theta) (GKD beta = 0). With
``samples="teacher"`` the teacher samples instead and ``objective="nll"`` is SFT on its answers,
``-log pi_theta(a_t)`` (REINFORCE's loss with A = 1 on the teacher's tokens; TRL GKD ``seq_kd``).
The task's reward is logged (``reward``) and used nowhere. The teacher is any policy with the
student's tokenizer: ``OnPolicyDistillation(teacher=model)`` or ``make_algorithm("distill", teacher=model)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from ..functional import AGGREGATIONS
from ..rollout import Batch, Rollout, policy_logprobs, sequence_logprobs, teacher_forced
from .base import Algorithm, validate

OBJECTIVES = {  # objective -> the samples it is defined on
    "advantage": ("student",),  # Thinking Machines: -A_t log pi with A_t minus the sampled reverse KL
    "reverse_kl": ("student", "teacher"),  # exact KL(pi_theta || pi_teacher) per token (GKD beta = 1)
    "forward_kl": ("student", "teacher"),  # exact KL(pi_teacher || pi_theta) per token (GKD beta = 0)
    "nll": ("teacher",),  # SFT on the teacher's answers: -log pi_theta(a_t)
}


@dataclass
class DistillConfig:
    samples: str = "student"
    """Who samples the answers: "student" (on-policy, TRL GKD lmbda=1) | "teacher" (TRL seq_kd=True, lmbda=0)."""
    objective: str = "advantage"
    """"advantage" (minus the sampled reverse KL per token) | "reverse_kl" | "forward_kl" (exact, GKD beta 1 | 0) | "nll"."""
    kl_coef: float = 1.0
    """The advantage's scale: A_t = -kl_coef * (log pi_old - log pi_teacher) (Thinking Machines kl_penalty_coef)."""
    group_size: int = 1
    """Answers per prompt (TRL num_generations); distillation needs no group."""
    eps_low: float = 0.2
    """Clip range below of objective="advantage" across epochs (TRL epsilon)."""
    eps_high: float | None = None
    """Clip range above; None: eps_low (TRL epsilon_high)."""
    temperature: float = 1.0
    """Sampling temperature, also of the log-probs and the KLs (TRL GKD temperature)."""
    loss_type: str = "token_mean"
    """How per-token losses become one number: "token_mean" | "sequence_mean" | "constant"."""
    max_length: int | None = None
    """The constant of loss_type="constant" (default: the batch's T)."""
    entropy_coef: float = 0.0
    """Entropy bonus (verl entropy_coeff)."""
    lr: float = 3e-4
    """AdamW learning rate (TRL learning_rate)."""
    max_grad_norm: float = 1.0
    """Global L2 gradient clipping (TRL max_grad_norm)."""
    epochs: int = 2
    """Passes over each batch (TRL num_iterations), as GRPO's default."""
    minibatches: int = 2
    """Optimizer steps per pass (TRL steps_per_generation), as GRPO's default."""
    warmup_steps: int = 0
    """Linear learning-rate warmup, in optimizer updates (TRL warmup_steps)."""
    adam_betas: tuple = (0.9, 0.999)
    """AdamW betas (TRL adam_beta1, adam_beta2)."""

    def __post_init__(self):  # the allowed range of each field, in the order above
        validate(
            self,
            samples=dict(choices={"student", "teacher"}),
            objective=dict(choices=set(OBJECTIVES)),
            kl_coef=dict(lo=0),
            group_size=dict(lo=1),
            eps_low=dict(lo=0, lo_open=True, hi=1),
            eps_high=dict(lo=0, lo_open=True, optional=True),
            temperature=dict(lo=0, lo_open=True),
            loss_type=dict(choices=set(AGGREGATIONS)),
            max_length=dict(lo=1, optional=True),
            entropy_coef=dict(lo=0),
            lr=dict(lo=0, lo_open=True),
            max_grad_norm=dict(lo=0, lo_open=True),
            epochs=dict(lo=1),
            minibatches=dict(lo=1),
            warmup_steps=dict(lo=0),
        )
        if self.samples not in OBJECTIVES[self.objective]:
            raise ValueError(
                f"DistillConfig.objective={self.objective!r} is defined on samples {OBJECTIVES[self.objective]}, "
                f"got samples={self.samples!r}"
            )

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class DistillBatch(Batch):
    """A `Batch` with the teacher's logits of the answers (the exact KLs read them)."""

    teacher_logits: torch.Tensor | None = None  # [B, T, V] the teacher at each completion position


class OnPolicyDistillation(Algorithm):
    name = "distill"
    Config = DistillConfig

    def __init__(self, config=None, functions: dict | None = None, teacher=None, **overrides):
        super().__init__(config, functions, **overrides)
        self.teacher = teacher

    def setup(self, policy, reference=None, generator: torch.Generator | None = None):
        """As every algorithm's, and the teacher frozen; no teacher is a ``ValueError`` before any work."""
        if self.teacher is None:
            raise ValueError("OnPolicyDistillation needs a teacher: OnPolicyDistillation(teacher=model)")
        if self.teacher is policy:
            raise ValueError("the teacher must not be the policy being trained: pass a copy")
        self.teacher.eval()
        for p in self.teacher.parameters():
            p.requires_grad_(False)
        return super().setup(policy, reference, generator)

    def sampling_policy(self):  # the student (on-policy), or the teacher (SFT on its answers)
        return self.policy if self.config.samples == "student" else self.teacher

    @torch.no_grad()
    def prepare(self, rollout: Rollout, scores: torch.Tensor) -> DistillBatch:
        Fn, cfg, mask = self.fn, self.config, rollout.mask
        rewards = Fn.masked_sum(scores, mask, dim=1)  # logged, used nowhere
        if cfg.objective == "nll":  # SFT on the teacher's answers: A = 1 on each of its tokens, no forward here
            return DistillBatch(rollout, scores, rewards, mask=mask, old_logp=rollout.logprobs, ref_logp=None,
                                advantages=mask.clone())  # fmt: skip
        logits = teacher_forced(self.teacher, rollout)  # the teacher reads every answer token: one forward
        teacher_logp = Fn.token_logprobs(logits, rollout.completion_ids, rollout.temperature) * mask
        # log pi_old, the student's, teacher-forced as the teacher's is: a teacher equal to the student gives
        # A = 0 exactly (the sampler's log-probs differ by float rounding, which Adam would scale into steps)
        old = sequence_logprobs(self.policy, rollout)
        adv = Fn.distillation_advantages(old, teacher_logp, mask, cfg.kl_coef)  # -coef (log pi_old - log pi_teacher)
        # the sampled reverse KL the teacher gives the student's answers, per token (k1; on teacher samples: -A)
        stats = {"teacher_kl": float(Fn.masked_mean(old - teacher_logp, mask))}
        return DistillBatch(rollout, scores, rewards, mask=mask, old_logp=old, ref_logp=None, advantages=adv,
                            stats=stats, teacher_logits=logits)  # fmt: skip

    def loss(self, batch: DistillBatch, idx: torch.Tensor):
        Fn, cfg, mask = self.fn, self.config, batch.mask[idx]
        logp, logits = policy_logprobs(self.policy, batch, idx)  # log pi_theta(a_t|s_t), with grad
        if cfg.objective == "advantage":  # -min(rho A_t, clip(rho) A_t), A_t = -(log pi_old - log pi_teacher)
            per_token, stats = Fn.clipped_surrogate_loss(
                logp, batch.old_logp[idx], batch.advantages[idx], eps_low=cfg.eps_low, eps_high=cfg.eps_high, mask=mask
            )
        elif cfg.objective == "nll":  # -log pi_theta(a_t) on the teacher's tokens: -A log pi with A = 1
            per_token, stats = Fn.policy_gradient_loss(logp, batch.advantages[idx]), {}
        else:  # the exact per-token KL over the vocabulary, at the sampling temperature
            direction = "pi||ref" if cfg.objective == "reverse_kl" else "ref||pi"  # the teacher in pi_ref's place
            tau = cfg.temperature
            per_token = Fn.exact_kl(logits / tau, batch.teacher_logits[idx] / tau, direction)
            stats = {}
        loss, reg = Fn.regularized_loss(  # agg(L_t) - entropy_coef * H
            per_token, mask, cfg.loss_type, cfg.max_length, logits, batch.rollout.mask[idx], cfg.entropy_coef
        )
        return loss, {**reg, **stats}
