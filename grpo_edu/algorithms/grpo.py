"""GRPO: PPO's clipped objective with the critic replaced by the group's mean reward.

For each prompt q, sample G completions a_1..a_G from pi_old and score them:

    r_i = R(q, a_i)                          [- beta sum_t log(pi_old/pi_ref): kl_placement="reward"]
    A_i = (r_i - mean(r_1..r_G)) / (std(r_1..r_G) + eps)      (scale_rewards="group")
    L   = agg_{i,t} -min(rho_{i,t} A_i, clip(rho_{i,t}, 1-eps_low, 1+eps_high) A_i)
          [+ beta * k3(pi_theta, pi_ref)                        (kl_placement="loss")]

then several epochs over the batch with pi_old fixed, and pi_old <- pi_theta. The loss is
PPO's (`PPO.loss`, inherited); what differs is the advantage: no value model, the G samples
of the same prompt are each other's baseline.

The knobs are named as TRL's GRPOConfig and verl name them (each field says which).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import functional as Fn
from .base import Batch, Estimate, check_range
from .dynamic_sampling import DynamicSampling
from .ppo import PPO, ClipConfig


@dataclass
class GRPOConfig(ClipConfig):
    group_size: int = 8  # G, samples per prompt (TRL num_generations)
    epochs: int = 2  # passes over each batch with pi_old fixed (TRL num_iterations)
    minibatches: int = 2  # optimizer steps per epoch
    beta: float = 0.04  # KL coefficient
    kl_placement: str = "loss"  # GRPO paper (DeepSeekMath): beta*k3 in the loss; "reward": in r_t
    scale_rewards: str = "group"  # "group" | "batch" | "none" (Dr. GRPO), as TRL names it
    unbiased_std: bool = False  # std with 1/(G-1) (torch.std) instead of the derivation's 1/G
    adv_eps: float = 1e-4  # eps in (r - mean) / (std + eps)
    leave_one_out: bool = False  # RLOO: centre on the mean of the other G-1 (verl adv_estimator="rloo")
    loss_type: str = "token_mean"  # "dapo"/"bnpo"/"token_mean" | "grpo"/"sequence_mean" | "dr_grpo"/"constant"
    dynamic_sampling: bool = False  # DAPO: drop groups whose rewards are all equal, sample more
    max_resample: int = 4  # at most this many extra generation rounds for dynamic sampling

    def __post_init__(self):
        super().__post_init__()
        check_range(self, "group_size", lo=2)
        check_range(self, "scale_rewards", choices={"group", "batch", "none"})
        check_range(self, "adv_eps", lo=0)
        check_range(self, "max_resample", lo=0)


class GRPO(DynamicSampling, PPO):
    name = "grpo"
    Config = GRPOConfig

    def make_critic(self, policy):
        return None  # no value model: the group is the baseline

    def advantages(self, batch: Batch) -> Estimate:
        cfg = self.config
        rloo = {"leave_one_out": True} if cfg.leave_one_out else {}  # a homework version may lack it
        adv, st = Fn.group_advantages(
            batch.rewards, cfg.group_size, scale=cfg.scale_rewards, eps=cfg.adv_eps, unbiased=cfg.unbiased_std, **rloo
        )
        # [B]: every token of a completion gets its completion's advantage
        return Estimate(adv, stats={"frac_reward_zero_std": st["frac_zero_std"]})
