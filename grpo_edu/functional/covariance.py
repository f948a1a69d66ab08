"""Clip-Cov and KL-Cov (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning
Language Models"): PPO's objective changed on the few tokens whose log-probability and advantage covary most.

One policy-gradient step changes the entropy by about minus the covariance, over the batch's tokens, of
log pi(y_i) and the advantage A_i (`grpo_edu.measure.entropy_mechanism`). The two objectives act on the
tokens that drive that covariance, ranked by their centred products

    c_i = (log pi(y_i) - mean_j log pi(y_j)) (A_i - mean_j A_j)      (means over the masked tokens)

    Clip-Cov:  L_i = -min(rho_i A_i, clip(rho_i, 1-eps_low, 1+eps_high) A_i) * (0 if i in I_clip else 1)
               I_clip: k = max(1, floor(r N)) tokens drawn uniformly among those with lb < c_i < ub that
               the ratio's clip does not already cut
    KL-Cov:    L_i = -rho_i A_i + (kappa |log pi(y_i) - log pi_old(y_i)| if i in I_KL else 0)
               I_KL: the k = max(1, floor(r N)) tokens of largest c_i

Both follow the authors' implementation, verl's ``compute_policy_loss_clip_cov`` and
``compute_policy_loss_kl_cov`` (trainer/ppo/core_algos.py, loss_mode "clip_cov" / "kl_cov", first written
in PRIME-RL/Entropy-Mechanism-of-RL), choice by choice:

- the centring: c_i centres log pi and A on their means over the masked tokens of the batch the loss is
  called on (verl: ``masked_mean`` over the micro-batch's ``response_mask``; here the minibatch GRPO's loss
  is called with), log pi the current policy's (``log_prob``, not ``old_log_prob``), detached: c_i only
  ranks tokens, no gradient flows through it;
- which tokens: k = max(1, int(ratio * N)), N the masked tokens (verl ``clip_num`` / ``k_percent_nums``).
  Clip-Cov draws them uniformly without replacement (verl ``torch.randperm``; here from ``generator``) from
  lb < c_i < ub (strict, verl's defaults lb = 1, ub = 5), excluding padding and the tokens PPO's clip
  already binds (verl ``clip_by_origin = pg_losses2 > pg_losses1``: A > 0 with rho > 1+eps_high, A < 0
  with rho < 1-eps_low); KL-Cov takes the top k by ``torch.topk`` (largest first), no band;
- the detach: Clip-Cov multiplies the chosen tokens' clipped loss by a constant 0 (verl ``corr``), so they
  add neither loss nor gradient; the others keep PPO's clipped loss, eps_low/eps_high as given;
- the KL term's form: KL-Cov's is ``ppo_kl_coef * |log pi - log pi_old|`` (verl ``abs_kl``, the absolute
  log-ratio, not a KL estimator), added to the *unclipped* -rho A on the chosen tokens; every other token
  has the unclipped -rho A too: verl's KL-Cov has no ratio clip. At rho = 1 (the first update of a batch)
  |log rho| has gradient 0 (torch's sign(0) = 0): the penalty acts from the second update on, as in verl.
  verl's default ppo_kl_coef is 1, its kl_cov_ratio 2e-4 (PRIME-RL's first version took the ratio in
  percent, ``k / 100``); both ratios here are fractions, as verl's.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import _clip_range, _in_range, _ndim, _per_token
from .losses import _spread
from .reductions import masked_mean

CLIP_COV_RATIO = 2e-4  # verl clip_cov_ratio: the fraction of the masked tokens whose gradient Clip-Cov drops
CLIP_COV_BOUNDS = (1.0, 5.0)  # verl (clip_cov_lb, clip_cov_ub): a token is eligible when lb < c_i < ub
KL_COV_RATIO = 2e-4  # verl kl_cov_ratio: the fraction of the masked tokens, largest c_i first, KL-Cov penalises
PPO_KL_COEF = 1.0  # verl ppo_kl_coef: kappa of KL-Cov's kappa |log pi - log pi_old|


def _tokens(logp: Tensor, advantages: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """The checks of the token functions: advantages [B] or [B, T] -> [B, T]; mask None -> all ones."""
    _ndim("logp", logp, 2, "[B, T]")
    mask = torch.ones_like(logp) if mask is None else mask
    if advantages.dim() == 1 and advantages.shape[0] == logp.shape[0]:
        advantages = advantages.unsqueeze(-1).expand_as(logp)
    if logp.shape != advantages.shape or logp.shape != mask.shape:
        raise ValueError(
            f"logp, advantages and mask must have one shape, got {tuple(logp.shape)}, "
            f"{tuple(advantages.shape)} and {tuple(mask.shape)}"
        )
    if not bool((mask != 0).any()):
        raise ValueError("mask selects no token: there is no covariance of nothing")
    return advantages, mask


def covariance_terms(logp: Tensor, advantages: Tensor, mask: Tensor | None = None) -> Tensor:
    """c_i = (log pi(y_i) - mean_j log pi(y_j)) (A_i - mean_j A_j), the means over the masked tokens.

    logp: [B, T]; advantages: [B] (one per completion, every token its completion's) or [B, T]; mask
    [B, T] (None: every token). Returns [B, T], 0 off the mask; detached (a ranking, not a loss)."""
    advantages, mask = _tokens(logp, advantages, mask)
    logp, advantages = logp.detach(), advantages.detach()
    centred_logp = logp - masked_mean(logp, mask)
    centred_adv = advantages - masked_mean(advantages, mask)
    return centred_logp * centred_adv * mask.to(logp.dtype)


def token_covariance(logp: Tensor, advantages: Tensor, mask: Tensor | None = None) -> Tensor:
    """Cov = mean_i c_i over the masked tokens: the batch's covariance of log pi and the advantage (1/N).

    [B, T] (advantages [B] or [B, T]) -> a scalar. Positive: the step is predicted to lower the entropy."""
    _, mask = _tokens(logp, advantages, mask)
    return masked_mean(covariance_terms(logp, advantages, mask), mask)


def _count(mask: Tensor, ratio: float) -> int:  # k = max(1, int(ratio * N)), verl's clip_num / k_percent_nums
    return max(1, int(int((mask != 0).sum()) * ratio))


def kl_cov_tokens(logp: Tensor, advantages: Tensor, mask: Tensor | None = None, ratio: float = KL_COV_RATIO) -> Tensor:
    """KL-Cov's tokens: the k = max(1, floor(ratio N)) masked tokens of largest c_i (N masked tokens).

    [B, T] -> a bool [B, T], True on the k tokens that get the penalty (ties: ``torch.topk``'s order)."""
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio must be in (0, 1], got {ratio}")
    terms = covariance_terms(logp, advantages, mask)
    _, mask = _tokens(logp, advantages, mask)
    on = mask.reshape(-1) != 0
    ranked = terms.reshape(-1).masked_fill(~on, float("-inf"))
    chosen = torch.zeros_like(on)
    chosen[torch.topk(ranked, _count(mask, ratio), largest=True, sorted=True).indices] = True
    return chosen.reshape(mask.shape)


def clip_cov_tokens(
    logp: Tensor,
    advantages: Tensor,
    mask: Tensor | None = None,
    ratio: float = CLIP_COV_RATIO,
    bounds: tuple[float, float] = CLIP_COV_BOUNDS,
    clipped: Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Clip-Cov's tokens: min(k, |E|) tokens drawn uniformly without replacement from
    E = {i masked, lb < c_i < ub, not already clipped by the ratio}, k = max(1, floor(ratio N)).

    ``clipped``: bool [B, T], the tokens PPO's clip already binds (None: none). [B, T] -> a bool [B, T],
    True on the tokens whose loss and gradient are dropped. ``generator``: the draw's (None: torch's global)."""
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio must be in (0, 1], got {ratio}")
    lb, ub = bounds
    if not lb < ub:
        raise ValueError(f"bounds must be (lb, ub) with lb < ub, got {bounds}")
    terms = covariance_terms(logp, advantages, mask)
    _, mask = _tokens(logp, advantages, mask)
    on = mask != 0
    eligible = on & (terms > lb) & (terms < ub)
    if clipped is not None:
        eligible = eligible & ~clipped.bool()
    candidates = torch.nonzero(eligible.reshape(-1)).reshape(-1)
    order = torch.randperm(len(candidates), generator=generator).to(candidates.device)
    chosen = torch.zeros(on.numel(), dtype=torch.bool, device=on.device)
    chosen[candidates[order[: _count(mask, ratio)]]] = True
    return chosen.reshape(mask.shape)


def clip_cov_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, eps_low: float = 0.2, eps_high: float | None = None,
    mask: Tensor | None = None, clip_cov_ratio: float = CLIP_COV_RATIO, clip_cov_lb: float = CLIP_COV_BOUNDS[0],
    clip_cov_ub: float = CLIP_COV_BOUNDS[1], generator: torch.Generator | None = None,
) -> tuple[Tensor, dict]:  # fmt: skip
    """Clip-Cov (verl loss_mode "clip_cov"), per token:

        L_t = -min(rho_t A_t, clip(rho_t, 1-eps_low, 1+eps_high) A_t) * (1 - 1[t in I_clip])

    I_clip: `clip_cov_tokens` (k = max(1, floor(clip_cov_ratio N)) drawn from clip_cov_lb < c_t < clip_cov_ub,
    the ratio's clipped tokens excluded). logp, old_logp: [B, T]; advantages [B] or [B, T]; mask [B, T] (None:
    all). Returns ``(loss [B, T], stats)``: `clipped_surrogate_loss`'s stats and ``cov_frac``, the share of
    the masked tokens I_clip holds (verl's ``pg_clipfrac`` of this mode)."""
    eps_high = _clip_range(logp, old_logp, mask, eps_low, eps_high)
    _in_range("clip_cov_ratio", clip_cov_ratio, 0.0, 1.0)
    adv = _per_token(advantages, logp).detach()
    rho = torch.exp(logp - old_logp.detach())
    unclipped, clipped = rho * adv, torch.clamp(rho, 1.0 - eps_low, 1.0 + eps_high) * adv
    m = torch.ones_like(rho) if mask is None else mask.to(rho.dtype)
    with torch.no_grad():
        low = (rho < 1.0 - eps_low) & (adv < 0)
        high = (rho > 1.0 + eps_high) & (adv > 0)
        chosen = clip_cov_tokens(
            logp, adv.expand_as(logp), m, clip_cov_ratio, (clip_cov_lb, clip_cov_ub), low | high, generator
        )
    loss = -torch.minimum(unclipped, clipped) * (~chosen).to(rho.dtype)
    with torch.no_grad():
        n = m.sum().clamp(min=1)
        fracs = (torch.stack([low, high, low | high, chosen]).to(rho.dtype).mul(m).sum((1, 2)) / n).tolist()
        stats = dict(zip(("clip_low", "clip_high", "clip_ratio", "cov_frac"), fracs, strict=True))
        stats["ratio_mean"] = float((rho * m).sum() / n)
    return loss, {**stats, **_spread(rho, m.bool(), advantages, m)}


def kl_cov_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, eps_low: None = None, eps_high: None = None,
    mask: Tensor | None = None, kl_cov_ratio: float = KL_COV_RATIO, ppo_kl_coef: float = PPO_KL_COEF,
) -> tuple[Tensor, dict]:  # fmt: skip
    """KL-Cov (verl loss_mode "kl_cov"), per token, no ratio clip:

        L_t = -rho_t A_t + ppo_kl_coef * |log pi(y_t) - log pi_old(y_t)| * 1[t in I_KL]

    I_KL: `kl_cov_tokens` (the k = max(1, floor(kl_cov_ratio N)) tokens of largest c_t). ``eps_low``,
    ``eps_high``: must be None (KL-Cov has no clip; GRPO's row passes None). Shapes as `clip_cov_loss`.
    Returns ``(loss [B, T], stats)``: ``cov_frac`` (the share of masked tokens in I_KL), ``ppo_kl_abs``
    (the masked mean of |log rho|, verl's ``ppo_kl`` of this mode), ``ratio_mean`` and `_spread`'s."""
    if eps_low is not None or eps_high is not None:
        raise ValueError(f"kl_cov_loss has no ratio clip: eps_low and eps_high must be None, got {eps_low}, {eps_high}")
    _clip_range(logp, old_logp, mask, 0.0, 0.0)  # the shapes
    _in_range("kl_cov_ratio", kl_cov_ratio, 0.0, 1.0)
    _in_range("ppo_kl_coef", ppo_kl_coef)
    adv = _per_token(advantages, logp).detach()
    log_ratio = logp - old_logp.detach()
    rho = torch.exp(log_ratio)
    m = torch.ones_like(rho) if mask is None else mask.to(rho.dtype)
    chosen = kl_cov_tokens(logp, adv.expand_as(logp), m, kl_cov_ratio)
    loss = -rho * adv + ppo_kl_coef * log_ratio.abs() * chosen.to(rho.dtype)
    with torch.no_grad():
        n = m.sum().clamp(min=1)
        stats = {
            "cov_frac": float((chosen.to(rho.dtype) * m).sum() / n),
            "ppo_kl_abs": float((log_ratio.abs() * m).sum() / n),
            "ratio_mean": float((rho * m).sum() / n),
        }
    return loss, {**stats, **_spread(rho, m.bool(), advantages, m)}
