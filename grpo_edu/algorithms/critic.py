"""The critic V_phi(s_t) of PPO and of REINFORCE with a learned baseline, and how it learns.

    L_V = 1/2 masked_mean((V_phi(s_t) - R_t)^2)        (optionally clipped around V_old)

One regression step (`Critic.step`) serves the algorithms (on each minibatch, after the
policy's step: two backward passes, never two graphs alive at once) and `fit_critic` (a
critic fitted at a fixed policy, for the variance measurements).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import functional as Fn
from ..model import ValueModel
from ..rollout import completion_values, sample_batch


class Critic:
    """A `ValueModel` of the policy's size, its AdamW optimizer and its regression step."""

    def __init__(
        self,
        policy,
        lr: float = 1e-3,
        init: str = "policy",
        max_grad_norm: float = 1.0,
        value_clip: float | None = None,
    ):
        if init == "policy":
            self.model = ValueModel.from_policy(policy)
        else:
            self.model = ValueModel(policy.config).to(policy.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.0)
        self.max_grad_norm, self.value_clip = max_grad_norm, value_clip

    @torch.no_grad()
    def values(self, rollout) -> torch.Tensor:
        """``V(s_t)`` of every completion step, ``[B, T]``, no grad (a baseline is data)."""
        return completion_values(self.model, rollout)

    def step(self, rollout, returns, mask, old_values=None) -> float:
        """One AdamW step on ``L_V``; returns the loss (before the step)."""
        values = completion_values(self.model, rollout)
        vloss = Fn.value_loss(
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


def fit_critic(
    policy, task, steps: int = 150, batch: int = 512, lr: float = 1e-3, seed: int = 0, progress: bool = True
):
    """Fit V_phi(s_t) to the sampled returns of a FIXED policy (the policy is not trained):
    ``steps`` x `Critic.step` on fresh batches of ``batch`` distinct prompts, G_t = R
    (gamma = 1, outcome reward), from the policy's trunk.

    Returns ``(critic ValueModel, info)``; MEASURED on a fresh batch:
    info["explained_variance"] = 1 - Var(R - V(s_0)) / Var(R), at the first answer token only. Near 0:
    the prompt alone does not say which answers will fail (at s_0 no answer token is sampled yet; at
    T=1 failures are sampling noise). V(s_t) by position, once digits are written:
    `grpo_edu.measure.credit`.
    """
    from ..train import progress_bar as tqdm

    device = next(policy.parameters()).device
    rng, gen = np.random.default_rng(seed), torch.Generator(device=device).manual_seed(seed)
    critic = Critic(policy, lr=lr)
    critic.model.train()
    losses = []
    for _ in tqdm(range(steps), desc="fit critic", disable=not progress, leave=False):
        ro, scores, _ = sample_batch(policy, task, batch, 1, rng, gen)
        losses.append(critic.step(ro, Fn.discounted_returns(scores, ro.mask, 1.0), ro.mask))
    critic.model.eval()
    with torch.no_grad():
        ro, scores, _ = sample_batch(policy, task, batch, 1, rng, gen)
        R, v0 = scores.sum(1), critic.values(ro)[:, 0]
    ev = 1.0 - float((R - v0).var()) / float(R.var()) if float(R.var()) > 0 else math.nan
    return critic.model, {
        "explained_variance": ev,
        "value_loss": float(np.mean(losses[-10:])) if losses else math.nan,
        "reward_mean": float(R.mean()),
        "value_mean": float(v0.mean()),
        "steps": steps,
    }
