"""The critic V_phi(s_t) of PPO and of REINFORCE with a learned baseline, and how it learns.

    L_V = 1/2 masked_mean((V_phi(s_t) - R_t)^2)        (optionally clipped around V_old)

One regression step (`Critic.step`) serves the algorithms (on each minibatch, after the
policy's step: two backward passes, never two graphs alive at once) and the lab's
`grpo_edu.measure.fit_critic` (a critic fitted at a fixed policy, for the variance measurements).
"""

from __future__ import annotations

import torch

from .. import functional as Fn
from ..model import ValueModel
from ..rollout import completion_values
from .base import adamw


class Critic:
    """A `ValueModel` of the policy's size, its AdamW optimizer and its regression step."""

    def __init__(
        self,
        policy,
        lr: float = 1e-3,
        init: str = "policy",
        max_grad_norm: float = 1.0,
        value_clip: float | None = None,
        functions=None,
    ):
        if init == "policy":
            self.model = ValueModel.from_policy(policy)
        else:
            self.model = ValueModel(policy.config).to(policy.device)
        self.optimizer = adamw(self.model.parameters(), lr)
        self.max_grad_norm, self.value_clip = max_grad_norm, value_clip
        self.fn = Fn if functions is None else functions  # the algorithm's (its value_loss may be replaced)

    @torch.no_grad()
    def values(self, rollout) -> torch.Tensor:
        """``V(s_t)`` of every completion step, ``[B, T]``, no grad (a baseline is data)."""
        return completion_values(self.model, rollout)

    def step(self, rollout, returns, mask, old_values=None) -> float:
        """One AdamW step on ``L_V``; returns the loss (before the step)."""
        values = completion_values(self.model, rollout)
        vloss = self.fn.value_loss(
            values, returns, mask, old_values if self.value_clip is not None else None, self.value_clip
        )
        if not bool(torch.isfinite(vloss)):
            raise FloatingPointError(f"value loss is {float(vloss)}")
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        vloss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        return float(vloss.detach())
