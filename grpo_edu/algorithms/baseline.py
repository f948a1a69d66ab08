"""REINFORCE with a baseline: subtract b(s_t) from the return.

    A_t = G_t - b(s_t)          E[b(s_t) grad log pi(a_t|s_t)] = 0, so still unbiased

``baseline="critic"``: a learned value function V_phi(s_t) (same size as the policy),
regressed on the returns, ``L_V = 1/2 (V_phi(s_t) - G_t)^2``.
``baseline="batch_mean"``: b = mean reward of this batch (no parameters).
``baseline="running_mean"``: b = exponential moving average of past batch rewards.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import functional as Fn
from ..rollout import completion_values
from .base import Batch, check_range
from .reinforce import Reinforce, ReinforceConfig


@dataclass
class BaselineConfig(ReinforceConfig):
    baseline: str = "critic"  # "critic" | "batch_mean" | "running_mean"
    critic_lr: float = 1e-3  # AdamW learning rate of the critic
    critic_init: str = "policy"  # "policy": start from the policy's trunk | "random"
    value_clip: float | None = None  # PPO-style value clipping (None: off)
    running_mean_decay: float = 0.9  # b <- decay * b + (1 - decay) * mean(R)

    def __post_init__(self):
        super().__post_init__()
        check_range(self, "baseline", choices={"critic", "batch_mean", "running_mean"})
        check_range(self, "critic_lr", lo=0, lo_open=True)
        check_range(self, "critic_init", choices={"policy", "random"})
        check_range(self, "running_mean_decay", lo=0, hi=1)


class ReinforceBaseline(Reinforce):
    name = "baseline"
    Config = BaselineConfig

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        self.uses_critic = self.config.baseline == "critic"
        self.running_mean = None

    def advantages(self, batch: Batch) -> torch.Tensor:
        G = self.returns(batch)
        mask = batch.rollout.mask
        kind = self.config.baseline
        if kind == "critic":
            values = completion_values(self.critic, batch.rollout)  # V(s_t), no grad here
            batch.returns, batch.old_values = G, values
            batch.stats["value_mean"] = float(Fn.masked_mean(values, mask))
            return (G - values) * mask  # A_t = G_t - V(s_t)
        mean_r = float(batch.rewards.mean())
        if kind == "batch_mean":
            b = mean_r
        else:
            d = self.config.running_mean_decay
            b = mean_r if self.running_mean is None else self.running_mean
            self.running_mean = d * b + (1 - d) * mean_r if self.running_mean is not None else mean_r
        batch.stats["baseline"] = b
        return (G - b) * mask  # A_t = G_t - b
