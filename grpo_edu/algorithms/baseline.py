"""REINFORCE with a baseline: subtract b(s_t) from the return.

    A_t = G_t - b(s_t)          E[b(s_t) grad log pi(a_t|s_t)] = 0, so still unbiased

``baseline="critic"``: a learned value function V_phi(s_t) (same size as the policy),
regressed on the returns, ``L_V = 1/2 (V_phi(s_t) - G_t)^2``.
``baseline="batch_mean"``: b = mean reward of this batch (no parameters).
``baseline="running_mean"``: b = exponential moving average of past batch rewards.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import functional as Fn
from .base import Batch, Estimate, check_range
from .critic import Critic, CriticConfig
from .reinforce import Reinforce, ReinforceConfig


@dataclass
class BaselineConfig(ReinforceConfig, CriticConfig):
    baseline: str = "critic"  # "critic" | "batch_mean" | "running_mean"
    running_mean_decay: float = 0.9  # b <- decay * b + (1 - decay) * mean(R)

    def __post_init__(self):
        super().__post_init__()
        check_range(self, "baseline", choices={"critic", "batch_mean", "running_mean"})
        check_range(self, "running_mean_decay", lo=0, hi=1)


class ReinforceBaseline(Reinforce):
    name = "baseline"
    Config = BaselineConfig

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        self.running_mean = None  # b of the "running_mean" baseline, carried across steps

    def make_critic(self, policy):
        return Critic.from_config(policy, self.config) if self.config.baseline == "critic" else None

    def advantages(self, batch: Batch) -> Estimate:
        returns, mask = self.returns(batch), batch.rollout.mask
        if self.critic is not None:
            values = self.critic.values(batch.rollout)  # b = V(s_t)
            adv = Fn.baseline_advantages(returns, values, mask)  # A_t = G_t - V(s_t)
            return Estimate(adv, returns, values, {"value_mean": float(Fn.masked_mean(values, mask))})
        mean_reward = float(batch.rewards.mean())
        b = mean_reward
        if self.config.baseline == "running_mean":
            b = mean_reward if self.running_mean is None else self.running_mean
            self.running_mean = Fn.running_mean(self.running_mean, mean_reward, self.config.running_mean_decay)
        return Estimate(Fn.baseline_advantages(returns, b, mask), stats={"baseline": b})  # A_t = G_t - b
