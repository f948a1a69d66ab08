"""Homework 3 (PPO): reference solution, plain torch.

Written independently of grpo_edu.functional: GAE as one matrix product with the
(gamma lambda)^k discount matrix, the surrogate as the max of the two losses.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["gae", "clipped_surrogate_loss"]


def gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0, lam: float = 1.0):
    """(1) delta_t = r_t + gamma V_{t+1} - V_t,  A = sum_k (gamma lam)^k delta_{t+k};
    (2) R_t = A_t + V_t. Masks are contiguous prefixes, so the episode ends at the last 1."""
    m = mask.to(values.dtype)
    v = values.detach() * m
    r = rewards.detach() * m
    v_next = torch.cat([v[:, 1:], torch.zeros_like(v[:, :1])], dim=1)  # V(s_{t+1}), 0 after the end
    delta = (r + gamma * v_next - v) * m
    steps = torch.arange(v.shape[1], device=v.device)
    lag = steps[None, :] - steps[:, None]  # lag[t, k] = k - t
    decay = torch.full(lag.shape, float(gamma * lam), dtype=v.dtype, device=v.device) ** lag.clamp(min=0)
    discount = decay * (lag >= 0).to(v.dtype)
    advantages = (delta @ discount.T) * m
    return advantages, (advantages + v) * m


def clipped_surrogate_loss(logp, old_logp, advantages, eps_low=0.2, eps_high=None, mask=None):
    """(3) rho = exp(logp - old_logp); (4) L = max(-rho A, -clip(rho) A), with statistics."""
    eps_high = eps_low if eps_high is None else eps_high
    a = advantages.detach()
    if a.dim() == 1:
        a = a[:, None].expand_as(logp)
    rho = (logp - old_logp.detach()).exp()
    loss = torch.maximum(-rho * a, -rho.clamp(1.0 - eps_low, 1.0 + eps_high) * a)

    with torch.no_grad():
        w = torch.ones_like(rho) if mask is None else mask.to(rho.dtype)
        n = float(w.sum())

        def frac(flags):
            return float((flags.to(rho.dtype) * w).sum()) / n if n > 0 else 0.0

        low, high = (rho < 1.0 - eps_low) & (a < 0), (rho > 1.0 + eps_high) & (a > 0)
        stats = {
            "clip_low": frac(low),
            "clip_high": frac(high),
            "clip_ratio": frac(low | high),
            "ratio_mean": float((rho * w).sum()) / n if n > 0 else 0.0,
        }
    return loss, stats
