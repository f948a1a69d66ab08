"""PPO with a critic, as PPO for language models does it.

    r_t   = r_phi(q, a_<=t) - beta * log(pi_old / pi_ref)        KL penalty inside the reward
    delta_t = r_t + gamma V(s_{t+1}) - V(s_t);  A_t = sum_k (gamma lambda)^k delta_{t+k}   (GAE)
    L_clip  = -min(rho_t A_t, clip(rho_t, 1 - eps_low, 1 + eps_high) A_t),  rho_t = pi_theta / pi_old
    L_V     = 1/2 (V(s_t) - (A_t + V_old(s_t)))^2               (optionally clipped)

Several epochs of minibatches over each rollout; the critic takes its own optimizer step
after the policy's (two backward passes, so only one graph is alive at a time).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import functional as Fn
from .base import Algorithm, AlgorithmConfig, Batch, Estimate, check_range
from .critic import Critic, CriticConfig


@dataclass
class ClipConfig(AlgorithmConfig):
    """The clip range of the surrogate (PPO and GRPO)."""

    eps_low: float = 0.2  # clip range below (TRL epsilon, verl clip_ratio_low)
    eps_high: float | None = None  # clip range above (TRL epsilon_high); None = eps_low; larger = clip-higher

    def __post_init__(self):
        super().__post_init__()
        check_range(self, "eps_low", lo=0, lo_open=True, hi=1)
        if self.eps_high is not None:
            check_range(self, "eps_high", lo=0, lo_open=True)


@dataclass
class PPOConfig(ClipConfig, CriticConfig):
    epochs: int = 2
    minibatches: int = 2
    beta: float = 0.04  # KL penalty in the reward
    gamma: float = 1.0
    lam: float = 1.0  # GAE lambda (1.0: Monte Carlo returns minus V)
    whiten_advantages: bool = True  # normalise A over the batch's tokens
    value_clip: float | None = 0.2  # PPO clips the value update too

    def __post_init__(self):
        super().__post_init__()
        check_range(self, "gamma", lo=0, hi=1)
        check_range(self, "lam", lo=0, hi=1)


class PPO(Algorithm):
    name = "ppo"
    Config = PPOConfig

    def make_critic(self, policy):
        return Critic.from_config(policy, self.config)

    def advantages(self, batch: Batch) -> Estimate:
        cfg, mask = self.config, batch.rollout.mask
        values = self.critic.values(batch.rollout)  # V(s_t) before the update
        adv, returns = Fn.gae(batch.scores, values, mask, cfg.gamma, cfg.lam)
        if cfg.whiten_advantages:
            adv = Fn.masked_whiten(adv, batch.mask if batch.mask.sum() > 0 else mask)
        return Estimate(adv, returns, values, {"value_mean": float(Fn.masked_mean(values, mask))})

    def loss(self, batch: Batch, idx: torch.Tensor):
        cfg = self.config
        logp, logits = self.policy_logprobs(batch, idx)
        per_token, clip_stats = Fn.clipped_surrogate_loss(  # -min(rho A, clip(rho) A)
            logp, batch.old_logp[idx], batch.advantages[idx], cfg.eps_low, cfg.eps_high, mask=batch.mask[idx]
        )
        return self.finish_loss(per_token, batch, idx, logp, logits, clip_stats)
