"""The per-token losses of the ladder (REINFORCE's, PPO's clipped surrogate), the critic's
regression loss, and the end of every rung's loss (aggregate, entropy bonus)."""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import _clip_range, _in_range, _ndim, _per_token, _same_shape
from .logprobs import entropy
from .reductions import aggregate_loss, masked_mean, masked_sum


def policy_gradient_loss(logp: Tensor, advantages: Tensor) -> Tensor:
    """REINFORCE per-token loss ``L_t = -A_t * log pi(a_t | s_t)``; its gradient is
    ``-A_t grad log pi``, the policy-gradient estimate.

    logp: [B, T]; advantages: [B] (broadcast over T) or [B, T], a constant weight
    (detached: no gradient flows into whatever produced it). Returns [B, T].
    """
    _ndim("logp", logp, 2, "[B, T]")
    return -_per_token(advantages, logp).detach() * logp


def clipped_surrogate_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, eps_low: float = 0.2,
    eps_high: float | None = None, mask: Tensor | None = None,
) -> tuple[Tensor, dict]:  # fmt: skip
    """PPO's clipped surrogate, per token:

        rho_t = pi_theta(a_t) / pi_old(a_t) = exp(logp - old_logp)
        L_t   = -min(rho_t A_t, clip(rho_t, 1 - eps_low, 1 + eps_high) A_t)

    ``eps_high=None`` means eps_high = eps_low (DAPO's "clip-higher" sets it larger).
    logp, old_logp: [B, T]; advantages [B] or [B, T] (detached, as is old_logp).
    Returns ``(loss [B, T], stats)``; stats are python floats over the masked tokens
    (all tokens if mask is None; 0.0 if there are none):

        clip_low   fraction with rho < 1 - eps_low  and A < 0
        clip_high  fraction with rho > 1 + eps_high and A > 0
        clip_ratio fraction with either; ratio_mean the mean of rho.

        ratio_std  the spread (1/N std) of rho over those tokens
        advantage_abs_mean, advantage_abs_max  the size of the advantages, one per completion
                   (|A_i|, or the mean of |A_it| over its tokens): `_spread`

    These clipped tokens are exactly the tokens with A != 0 whose gradient is zero: the
    min picks the constant clipped term. (At rho = 1 the loss has the gradient of
    ``policy_gradient_loss``.)
    """
    eps_high = _clip_range(logp, old_logp, mask, eps_low, eps_high)
    adv = _per_token(advantages, logp).detach()
    rho = torch.exp(logp - old_logp.detach())
    unclipped = rho * adv
    clipped = torch.clamp(rho, 1.0 - eps_low, 1.0 + eps_high) * adv
    loss = -torch.minimum(unclipped, clipped)

    with torch.no_grad():
        m = torch.ones_like(rho) if mask is None else mask.to(rho.dtype)
        low = ((rho < 1.0 - eps_low) & (adv < 0)).to(rho.dtype)
        high = ((rho > 1.0 + eps_high) & (adv > 0)).to(rho.dtype)
        n = m.sum().clamp(min=1)
        fracs = (torch.stack([low, high, low + high, rho]).mul(m).sum((1, 2)) / n).tolist()
        stats = dict(zip(("clip_low", "clip_high", "clip_ratio", "ratio_mean"), fracs, strict=True))
    return loss, {**stats, **_spread(rho, m.bool(), advantages, m)}


def _spread(ratio: Tensor, selected: Tensor, advantages: Tensor, mask: Tensor) -> dict:
    """The stats of an objective that say what its inputs were (silent bugs move them, notebook 11),
    python floats: ``ratio_std``, the 1/N std of ``ratio[selected]`` (0.0 if none), and
    ``advantage_abs_mean``, ``advantage_abs_max`` over the completions of ``a_i = |A_i|`` for
    advantages [B], or ``a_i = sum_t m_it |A_it| / sum_t m_it`` for advantages [B, T]."""
    with torch.no_grad():
        r = ratio[selected]
        a = advantages.detach().abs()
        a = a if a.dim() == 1 else (a * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        return {
            "ratio_std": float(r.std(correction=0)) if r.numel() else 0.0,
            "advantage_abs_mean": float(a.mean()) if a.numel() else 0.0,
            "advantage_abs_max": float(a.max()) if a.numel() else 0.0,
        }


def value_loss(
    values: Tensor, returns: Tensor, mask: Tensor,
    old_values: Tensor | None = None, clip: float | None = None,
) -> Tensor:  # fmt: skip
    """The critic's regression loss, a scalar:

        L = 1/2 * masked_mean((V - R)^2)
        clipped (PPO): V_clip = V_old + clamp(V - V_old, -clip, clip)
                       L = 1/2 * masked_mean(max((V - R)^2, (V_clip - R)^2))

    values, returns, mask, old_values: [B, T]; returns and old_values are targets
    (detached). ``clip`` needs ``old_values``. With no masked token the loss is 0.
    """
    _ndim("values", values, 2, "[B, T]")
    _same_shape("values", values, returns=returns, mask=mask, old_values=old_values)
    if clip is not None:
        _in_range("clip", clip)
        if old_values is None:
            raise ValueError("old_values must be given when clip is set (clipped value loss)")
    returns = returns.detach()
    err2 = (values - returns) ** 2
    if clip is not None:
        old = old_values.detach()
        v_clipped = old + torch.clamp(values - old, -clip, clip)
        err2 = torch.maximum(err2, (v_clipped - returns) ** 2)
    m = mask.to(values.dtype)
    return 0.5 * masked_sum(err2, m) / m.sum().clamp(min=1)


def regularized_loss(
    per_token_loss: Tensor,
    mask: Tensor,
    mode: str,
    max_length: int | None,
    logits: Tensor,
    entropy_mask: Tensor,
    entropy_coef: float = 0.0,
) -> tuple[Tensor, dict]:
    """The end of every rung's loss: per-token losses [B, T] -> one number, minus the entropy bonus:

        L = agg_{i,t} L_it - c_H * H,    H = masked mean over the completion tokens of H(pi_theta(. | s_t))

    ``mode``, ``max_length``: `aggregate_loss`'s. ``logits`` [B, T, V] of the policy, ``entropy_mask``
    [B, T] the completion tokens H averages over; H carries a gradient only when ``entropy_coef``
    (c_H) > 0, otherwise it is only logged. Returns ``(L, {"loss": L, "entropy": H})``, the dict in floats.
    """
    loss = aggregate_loss(per_token_loss, mask, mode, max_length)
    with torch.set_grad_enabled(entropy_coef > 0 and torch.is_grad_enabled()):  # H, with grad as a bonus
        ent = masked_mean(entropy(logits), entropy_mask)
    if entropy_coef > 0:
        loss = loss - entropy_coef * ent
    return loss, {"loss": float(loss.detach()), "entropy": float(ent.detach())}
