"""Homework 2 (baselines): reference solution, plain torch.

Written independently of grpo_edu.functional.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["masked_mean", "baseline_advantages", "value_loss"]


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """(1) sum(x m) / sum(m); an empty slice is 0/0 = NaN."""
    w = mask.to(x.dtype)
    if dim is None:
        return (x * w).sum() / w.sum()
    return (x * w).sum(dim) / w.sum(dim)


def baseline_advantages(returns: Tensor, baseline, mask: Tensor) -> Tensor:
    """(2) A_t = (G_t - b(s_t)) m_t, with G and b constants."""
    b = torch.as_tensor(baseline, dtype=returns.dtype, device=returns.device).detach()
    if b.dim() == 1:
        b = b[:, None]  # one baseline per sequence
    return (returns.detach() - b) * mask.to(returns.dtype)


def value_loss(values, returns, mask, old_values=None, clip=None) -> Tensor:
    """(3) 1/2 masked mean of the squared error, PPO-clipped when ``clip`` is set."""
    if clip is not None and old_values is None:
        raise ValueError("value_loss: clip needs old_values")
    target = returns.detach()
    sq = (values - target).square()
    if clip is not None:
        v_old = old_values.detach()
        v_clipped = torch.clamp(values, v_old - clip, v_old + clip)  # = V_old + clamp(V - V_old)
        sq = torch.maximum(sq, (v_clipped - target).square())
    w = mask.to(values.dtype)
    n = w.sum()
    if n == 0:
        return (sq * w).sum()  # 0, still connected to the graph
    return 0.5 * (sq * w).sum() / n
