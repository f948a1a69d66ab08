"""REINFORCE: the policy gradient with the raw return, no baseline.

    grad J(theta) ~= (1/N) sum_i sum_t G_{i,t} grad log pi_theta(a_{i,t} | s_{i,t})
    G_t = sum_k gamma^k r_{t+k}

With the sparse final-answer reward and gamma = 1, G_t is the 0/1 reward of the whole
answer at every token: REINFORCE raises the log-probability of correct answers and leaves
wrong ones alone. The update (epochs x minibatches of ``loss.backward(); clip; step``) is
the one loop in ``grpo_edu/train.py``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from ..functional import AGGREGATIONS
from ..rollout import Batch, policy_logprobs
from .base import Algorithm, validate


@dataclass
class ReinforceConfig:
    gamma: float = 1.0
    """Discount of the return G_t (verl algorithm.gamma)."""
    group_size: int = 1
    """Completions per prompt (TRL num_generations); REINFORCE needs no group."""
    temperature: float = 1.0
    """Sampling temperature of the rollouts (TRL temperature)."""
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
    epochs: int = 1
    """Passes over each batch: 1, the on-policy gradient (TRL num_iterations)."""
    minibatches: int = 1
    """Optimizer steps per pass (TRL steps_per_generation)."""
    gradient_accumulation_steps: int = 1
    """Micro-batches per optimizer step, weighted so that they sum to the one-batch gradient (TRL, same)."""
    warmup_steps: int = 0
    """Linear learning-rate warmup, in optimizer updates (TRL warmup_steps)."""
    adam_betas: tuple = (0.9, 0.999)
    """AdamW betas (TRL adam_beta1, adam_beta2)."""

    def __post_init__(self):  # the allowed range of each field, in the order above
        validate(
            self,
            gamma=dict(lo=0, hi=1),
            group_size=dict(lo=1),
            temperature=dict(lo=0, lo_open=True),
            loss_type=dict(choices=set(AGGREGATIONS)),
            max_length=dict(lo=1, optional=True),
            entropy_coef=dict(lo=0),
            lr=dict(lo=0, lo_open=True),
            max_grad_norm=dict(lo=0, lo_open=True),
            epochs=dict(lo=1),
            minibatches=dict(lo=1),
            gradient_accumulation_steps=dict(lo=1),
            warmup_steps=dict(lo=0),
        )

    def to_dict(self) -> dict:
        return asdict(self)


class Reinforce(Algorithm):
    name = "reinforce"
    Config = ReinforceConfig

    @torch.no_grad()
    def prepare(self, rollout, scores) -> Batch:
        Fn = self.fn  # grpo_edu.functional, or the replacements this algorithm was given
        mask = rollout.mask
        returns = Fn.discounted_returns(scores, mask, self.config.gamma)  # G_t = sum_k gamma^k r_{t+k}
        rewards = Fn.masked_sum(scores, mask, dim=1)
        return Batch(
            rollout, scores, rewards, mask=mask, old_logp=rollout.logprobs, ref_logp=None, advantages=returns
        )  # A_t = G_t

    def loss(self, batch: Batch, idx: torch.Tensor):
        Fn = self.fn  # grpo_edu.functional, or the replacements this algorithm was given
        cfg = self.config
        logp, logits = policy_logprobs(self.policy, batch, idx)  # log pi_theta(a_t|s_t), with grad
        per_token = Fn.policy_gradient_loss(logp, batch.advantages[idx])  # -A_t log pi(a_t|s_t)
        return Fn.regularized_loss(  # agg(L_t) - entropy_coef * H
            per_token, batch.mask[idx], cfg.loss_type, cfg.max_length, logits, batch.rollout.mask[idx], cfg.entropy_coef
        )
