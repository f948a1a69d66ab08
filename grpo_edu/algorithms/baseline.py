"""REINFORCE with a baseline: subtract b(s_t) from the return.

    A_t = G_t - b(s_t)          E[b(s_t) grad log pi(a_t|s_t)] = 0, so still unbiased

``baseline="critic"``: a learned value function V_phi(s_t) (same size as the policy),
regressed on the returns, ``L_V = 1/2 (V_phi(s_t) - G_t)^2`` (its step: `Critic.step`,
taken by the loop in ``train.py`` after the policy's).
``baseline="batch_mean"``: b = mean reward of this batch (no parameters).
``baseline="running_mean"``: b = exponential moving average of past batch rewards.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from ..functional import AGGREGATIONS
from ..rollout import Batch, policy_logprobs
from .base import Algorithm, validate
from .critic import Critic


@dataclass
class BaselineConfig:
    baseline: str = "critic"
    """b(s_t): "critic" (V_phi) | "batch_mean" | "running_mean"."""
    running_mean_decay: float = 0.9
    """b <- decay * b + (1 - decay) * mean(R)."""
    critic_lr: float = 1e-3
    """AdamW learning rate of the critic (verl critic.optim.lr)."""
    critic_init: str = "policy"
    """"policy": the critic starts from the policy's trunk | "random"."""
    value_clip: float | None = None
    """Clip of the value update around V_old, None: off (verl cliprange_value)."""
    gamma: float = 1.0
    """Discount of the return G_t (verl algorithm.gamma)."""
    group_size: int = 1
    """Completions per prompt (TRL num_generations)."""
    temperature: float = 1.0
    """Sampling temperature of the rollouts (TRL temperature)."""
    loss_type: str = "token_mean"
    """How per-token losses become one number: "token_mean" | "sequence_mean" | "constant"."""
    max_length: int | None = None
    """The constant of loss_type="constant" (default: the batch's T)."""
    entropy_coef: float = 0.0
    """Entropy bonus (verl entropy_coeff)."""
    lr: float = 3e-4
    """AdamW learning rate of the policy (TRL learning_rate)."""
    max_grad_norm: float = 1.0
    """Global L2 gradient clipping, policy and critic (TRL max_grad_norm)."""
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
            baseline=dict(choices={"critic", "batch_mean", "running_mean"}),
            running_mean_decay=dict(lo=0, hi=1),
            critic_lr=dict(lo=0, lo_open=True),
            critic_init=dict(choices={"policy", "random"}),
            value_clip=dict(lo=0, lo_open=True, optional=True),
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


class ReinforceBaseline(Algorithm):
    name = "baseline"
    Config = BaselineConfig

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        self.running_mean = None  # b of the "running_mean" baseline, carried across steps

    def make_critic(self, policy):
        cfg = self.config
        if cfg.baseline != "critic":
            return None
        return Critic(policy, cfg.critic_lr, cfg.critic_init, cfg.max_grad_norm, cfg.value_clip, self.fn)

    @torch.no_grad()
    def prepare(self, rollout, scores) -> Batch:
        Fn = self.fn  # grpo_edu.functional, or the replacements this algorithm was given
        cfg, mask = self.config, rollout.mask
        returns = Fn.discounted_returns(scores, mask, cfg.gamma)  # G_t = sum_k gamma^k r_{t+k}
        rewards = Fn.masked_sum(scores, mask, dim=1)
        values = None
        if self.critic is not None:
            b = values = self.critic.values(rollout)  # b = V(s_t)
            stats = {"value_mean": float(Fn.masked_mean(values, mask))}
        else:
            b = mean_reward = float(rewards.mean())  # b = mean(R) of this batch
            if cfg.baseline == "running_mean":  # b = the average of the batches before this one
                b = mean_reward if self.running_mean is None else self.running_mean
                self.running_mean = Fn.running_mean(self.running_mean, mean_reward, cfg.running_mean_decay)
            stats = {"baseline": b}
        return Batch(
            rollout,
            scores,
            rewards,
            mask=mask,
            old_logp=rollout.logprobs,
            ref_logp=None,
            advantages=Fn.baseline_advantages(returns, b, mask),  # A_t = G_t - b(s_t)
            returns=None if values is None else returns,  # the critic's regression targets
            old_values=values,
            stats=stats,
        )

    def loss(self, batch: Batch, idx: torch.Tensor):
        Fn = self.fn  # grpo_edu.functional, or the replacements this algorithm was given
        cfg = self.config
        logp, logits = policy_logprobs(self.policy, batch, idx)  # log pi_theta(a_t|s_t), with grad
        per_token = Fn.policy_gradient_loss(logp, batch.advantages[idx])  # -A_t log pi(a_t|s_t)
        return Fn.regularized_loss(  # agg(L_t) - entropy_coef * H
            per_token, batch.mask[idx], cfg.loss_type, cfg.max_length, logits, batch.rollout.mask[idx], cfg.entropy_coef
        )
