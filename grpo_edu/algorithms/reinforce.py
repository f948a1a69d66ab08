"""REINFORCE: the policy gradient with the raw return, no baseline.

    grad J(theta) ~= (1/N) sum_i sum_t G_{i,t} grad log pi_theta(a_{i,t} | s_{i,t})
    G_t = sum_k gamma^k r_{t+k}

With the sparse final-answer reward and gamma = 1, G_t is the 0/1 reward of the whole
answer at every token: REINFORCE raises the log-probability of correct answers and leaves
wrong ones alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import functional as Fn
from .base import Algorithm, AlgorithmConfig, Batch, Estimate, check_range


@dataclass
class ReinforceConfig(AlgorithmConfig):
    gamma: float = 1.0  # discount of the return G_t

    def __post_init__(self):
        super().__post_init__()
        check_range(self, "gamma", lo=0, hi=1)


class Reinforce(Algorithm):
    name = "reinforce"
    Config = ReinforceConfig

    def returns(self, batch: Batch) -> torch.Tensor:
        """G_t = sum_k gamma^k r_{t+k}, per token [B, T]."""
        return Fn.discounted_returns(batch.scores, batch.rollout.mask, self.config.gamma)

    def advantages(self, batch: Batch) -> Estimate:
        return Estimate(self.returns(batch))  # A_t = G_t: no baseline

    def loss(self, batch: Batch, idx: torch.Tensor):
        logp, logits = self.policy_logprobs(batch, idx)
        per_token = Fn.policy_gradient_loss(logp, batch.advantages[idx])  # -A_t log pi(a_t|s_t)
        return self.finish_loss(per_token, batch, idx, logp, logits)
