"""Homework 4 (GRPO): reference solution, plain torch.

Written independently of grpo_edu.functional.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["group_advantages", "kl_penalized_rewards", "aggregate_loss"]


def _std(x: Tensor, unbiased: bool) -> Tensor:
    """Std over the last dim with 1/n or 1/(n-1); a single sample has std 0."""
    n = x.shape[-1]
    var = (x - x.mean(-1, keepdim=True)).square().sum(-1) / max(n - int(unbiased), 1)
    return var.sqrt()


def group_advantages(rewards, group_size, scale="group", eps=1e-6, unbiased=False, leave_one_out=False):
    """(1) A_i = (r_i - mean_g) / (s + eps); all-equal groups get exactly 0.
    (1b) leave_one_out: r_i - mean of the other G-1 = G/(G-1) (r_i - mean_g)."""
    if scale not in ("group", "batch", "none"):
        raise ValueError(f"scale must be 'group', 'batch' or 'none', got {scale!r}")
    r = rewards.float() if not rewards.is_floating_point() else rewards
    groups = r.reshape(-1, group_size)  # [n_groups, G]
    mean = groups.mean(-1, keepdim=True)
    group_std = _std(groups, unbiased)
    constant = (groups == groups[:, :1]).all(-1, keepdim=True)  # every reward equals the first
    if scale == "group":
        denom = group_std[:, None] + eps
    elif scale == "batch":
        denom = _std(r, unbiased) + eps
    else:
        denom = torch.ones_like(mean)
    safe = torch.where(constant, torch.ones_like(groups), denom.expand_as(groups))
    centered = groups - mean
    if leave_one_out and group_size > 1:
        others = (groups.sum(-1, keepdim=True) - groups) / (group_size - 1)
        centered = groups - others
    adv = torch.where(constant, torch.zeros_like(groups), centered / safe)
    stats = {
        "mean": mean.squeeze(-1).detach(),
        "std": group_std.detach(),
        "frac_zero_std": float(constant.float().mean()),
    }
    return adv.reshape(-1), stats


def kl_penalized_rewards(scores, logp, ref_logp, mask, beta, kind="k1"):
    """(2) r_t = score_t - beta k_t, as data; r_i = sum_t r_t; (2b) k1, k2 or k3."""
    log_ratio = logp.detach() - ref_logp.detach()  # log pi / pi_ref
    if kind == "k1":
        k = log_ratio
    elif kind == "k2":
        k = 0.5 * log_ratio**2
    elif kind == "k3":
        k = torch.exp(-log_ratio) - 1 + log_ratio
    else:
        raise ValueError(f"kind must be 'k1', 'k2' or 'k3', got {kind!r}")
    penalty = beta * k
    token_rewards = torch.where(mask.bool(), scores - penalty, torch.zeros_like(scores))
    return token_rewards, token_rewards.sum(dim=1)


def aggregate_loss(per_token_loss: Tensor, mask: Tensor, mode="sequence_mean", max_length=None) -> Tensor:
    """(3) sequence_mean, (4) token_mean, (5) constant; empty rows/batches give 0."""
    w = mask.to(per_token_loss.dtype)
    masked = torch.where(w > 0, per_token_loss * w, torch.zeros_like(per_token_loss))
    B, T = masked.shape
    if mode == "sequence_mean":
        lengths = w.sum(1).clamp(min=1.0)
        return (masked.sum(1) / lengths).sum() / B
    if mode == "token_mean":
        return masked.sum() / w.sum().clamp(min=1.0)
    if mode == "constant":
        return masked.sum() / (B * (T if max_length is None else max_length))
    raise ValueError(f"mode must be 'sequence_mean', 'token_mean' or 'constant', got {mode!r}")
