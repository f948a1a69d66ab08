"""GRPO: PPO's clipped objective with the critic replaced by the group's mean reward.

For each prompt q, sample G completions a_1..a_G from pi_old and score them:

    r_{i,t} = r_phi(q, a_{i,<=t}) - beta * log(pi_old / pi_ref)   (kl_placement="reward")
    r_i     = sum_t r_{i,t}
    A_i     = (r_i - mean(r_1..r_G)) / (std(r_1..r_G) + eps)      (scale_rewards="group")
    L       = agg_{i,t} -min(rho_{i,t} A_i, clip(rho_{i,t}, 1-eps_low, 1+eps_high) A_i)
              [+ beta * k3(pi_theta, pi_ref)                        (kl_placement="loss")]

then several epochs over the batch with pi_old fixed, and pi_old <- pi_theta.
No value model: the G samples of the same prompt are each other's baseline.

Knobs named as practitioners name them (TRL GRPOConfig / verl): ``group_size``
(num_generations), ``epochs`` (num_iterations / ppo_epochs), ``eps_low``/``eps_high``
(epsilon / epsilon_high, clip_ratio_low/high: clip-higher when eps_high > eps_low),
``scale_rewards``, ``loss_type``, ``mask_truncated_completions``, ``dynamic_sampling``
(DAPO), ``kl_placement`` ("reward": verl use_kl_in_reward; "loss": use_kl_loss),
``kl_estimator`` (verl kl_loss_type: k1, k2, k3 = "low_var_kl").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import functional as Fn
from .base import Algorithm, AlgorithmConfig, Batch, check_range


@dataclass
class GRPOConfig(AlgorithmConfig):
    group_size: int = 8  # G, samples per prompt (TRL num_generations)
    epochs: int = 2  # passes over each batch with pi_old fixed (TRL num_iterations)
    minibatches: int = 2  # optimizer steps per epoch
    beta: float = 0.04  # KL coefficient
    kl_placement: str = "loss"  # GRPO paper (DeepSeekMath): beta*k3 in the loss; "reward": in r_t
    eps_low: float = 0.2  # clip range below (TRL epsilon)
    eps_high: float | None = None  # clip range above (TRL epsilon_high); None = eps_low
    scale_rewards: str = "group"  # "group" | "batch" | "none" (Dr. GRPO), as TRL names it
    unbiased_std: bool = False  # std with 1/(G-1) (torch.std) instead of the derivation's 1/G
    adv_eps: float = 1e-4  # eps in (r - mean) / (std + eps)
    loss_type: str = "token_mean"  # "dapo"/"bnpo"/"token_mean" | "grpo"/"sequence_mean" | "dr_grpo"/"constant"
    dynamic_sampling: bool = False  # DAPO: drop groups whose rewards are all equal, refill
    max_resample: int = 4  # at most this many extra generation rounds for dynamic sampling

    def __post_init__(self):
        super().__post_init__()
        check_range(self, "group_size", lo=2)
        check_range(self, "eps_low", lo=0, lo_open=True, hi=1)
        if self.eps_high is not None:
            check_range(self, "eps_high", lo=0, lo_open=True)
        check_range(self, "scale_rewards", choices={"group", "batch", "none"})
        check_range(self, "adv_eps", lo=0)
        check_range(self, "max_resample", lo=0)


class GRPO(Algorithm):
    name = "grpo"
    Config = GRPOConfig

    def advantages(self, batch: Batch) -> torch.Tensor:
        cfg = self.config
        adv, st = Fn.group_advantages(
            batch.rewards, cfg.group_size, scale=cfg.scale_rewards, eps=cfg.adv_eps, unbiased=cfg.unbiased_std
        )
        batch.stats["frac_reward_zero_std"] = st["frac_zero_std"]
        return adv  # [B]: every token of a completion gets its completion's advantage

    def loss(self, batch: Batch, idx: torch.Tensor):
        return self._clipped_loss(batch, idx)

    def keep_groups(self, rewards: torch.Tensor) -> torch.Tensor:
        """Dynamic sampling: a bool [B] mask of rows whose group has rewards that differ."""
        g = rewards.view(-1, self.config.group_size)
        informative = (g.max(dim=1).values - g.min(dim=1).values) > 0
        return informative.repeat_interleave(self.config.group_size)
