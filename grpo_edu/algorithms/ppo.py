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
from ..rollout import completion_values
from .base import Algorithm, AlgorithmConfig, Batch, check_range


@dataclass
class PPOConfig(AlgorithmConfig):
    epochs: int = 2
    minibatches: int = 2
    beta: float = 0.04  # KL penalty in the reward
    gamma: float = 1.0
    lam: float = 1.0  # GAE lambda (1.0: Monte Carlo returns minus V)
    eps_low: float = 0.2  # clip range below (TRL epsilon, verl clip_ratio_low)
    eps_high: float | None = None  # clip range above; None = eps_low (clip-higher when larger)
    whiten_advantages: bool = True  # normalise A over the batch's tokens
    critic_lr: float = 1e-3
    critic_init: str = "policy"  # "policy" | "random"
    value_clip: float | None = 0.2  # clip of the value update (None: off)

    def __post_init__(self):
        super().__post_init__()
        check_range(self, "gamma", lo=0, hi=1)
        check_range(self, "lam", lo=0, hi=1)
        check_range(self, "eps_low", lo=0, lo_open=True, hi=1)
        if self.eps_high is not None:
            check_range(self, "eps_high", lo=0, lo_open=True)
        check_range(self, "critic_lr", lo=0, lo_open=True)
        check_range(self, "critic_init", choices={"policy", "random"})


class PPO(Algorithm):
    name = "ppo"
    uses_critic = True
    Config = PPOConfig

    def advantages(self, batch: Batch) -> torch.Tensor:
        cfg = self.config
        mask = batch.rollout.mask
        values = completion_values(self.critic, batch.rollout)  # V(s_t) before the update
        adv, returns = Fn.gae(batch.scores, values, mask, cfg.gamma, cfg.lam)
        batch.returns, batch.old_values = returns, values
        batch.stats["value_mean"] = float(Fn.masked_mean(values, mask))
        if cfg.whiten_advantages:
            adv = Fn.masked_whiten(adv, batch.mask if batch.mask.sum() > 0 else mask)
        return adv

    def loss(self, batch: Batch, idx: torch.Tensor):
        return self._clipped_loss(batch, idx)
