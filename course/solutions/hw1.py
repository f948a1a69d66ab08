"""Homework 1 (REINFORCE): reference solution, plain torch.

Written independently of grpo_edu.functional: the returns come from one matrix product
with the discount matrix instead of the backward recursion.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["discounted_returns", "policy_gradient_loss"]


def discounted_returns(rewards: Tensor, mask: Tensor, gamma: float) -> Tensor:
    """(1) G_t = sum_k gamma^(k-t) r_k m_k over k >= t, as G = r D^T with
    D[t, k] = gamma^(k - t) for k >= t and 0 below the diagonal."""
    m = mask.to(rewards.dtype)
    r = rewards * m
    steps = torch.arange(r.shape[-1], device=r.device)
    lag = steps[None, :] - steps[:, None]  # lag[t, k] = k - t
    powers = torch.full(lag.shape, float(gamma), dtype=r.dtype, device=r.device) ** lag.clamp(min=0)
    discount = powers * (lag >= 0).to(r.dtype)  # 0 ** 0 = 1 on the diagonal, so gamma = 0 works
    return (r @ discount.T) * m


def policy_gradient_loss(logp: Tensor, advantages: Tensor) -> Tensor:
    """(2) L_t = -A_t log pi(a_t | s_t), with A a constant (no gradient into it)."""
    weight = advantages.detach()
    if weight.dim() == 1:
        weight = weight.unsqueeze(1)  # one advantage per sequence -> every token of it
    return -(weight * logp)
