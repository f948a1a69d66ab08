"""The corrections for a sampler whose weights are behind the learner's (policy lag: asynchronous RL).

Three policies meet in the loss once the sampler lags (AReaL's names, Fu et al. 2025):

    pi_behav   the behaviour policy: the weights, k optimizer updates old, that sampled y
    pi_prox    the proximal policy: the learner at the start of this step (a forward recomputes it)
    pi_theta   the learner being optimised (with gradient)

Each correction here is a per-token weight or mask ``[B, T]`` (data: detached) that the loss multiplies
into its per-token objective, and the share of the completion tokens it drops (``dropped_frac``):

    decoupled_weights   AReaL: w = pi_prox / pi_behav, a token dropped above the cap; the clip is on pi_theta / pi_prox
    icepop_weights      IcePop (Ling team, Ring-1T): the same ratio, kept only inside [alpha, beta]
    m2po_mask           M2PO (Zheng et al. 2025): drop the tokens of largest (log pi_theta / pi_behav)^2 until
                        their mean square, M2, is under a threshold
    (truncated IS)      w = min(pi_prox / pi_behav, C): `sampler_importance_weights` "token_truncate" (objectives.py)

The two weights are the masked mode of `sampler_importance_weights` (the same formula TRL and verl apply
to a serving engine's numbers) with the bounds each paper chose: they call it, and say which bounds.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import _in_range, _ndim, _same_shape
from .objectives import sampler_importance_weights


def _dropped(weights: Tensor, mask: Tensor) -> float:
    """The share of the masked tokens whose weight is 0 (0.0 with no masked token)."""
    m = mask.bool()
    return float((weights[m] == 0).float().mean()) if bool(m.any()) else 0.0


def decoupled_weights(
    prox_logp: Tensor, behav_logp: Tensor, mask: Tensor, cap: float | None = 5.0
) -> tuple[Tensor, dict]:
    """AReaL's decoupled PPO objective (Fu et al. 2025), its behaviour weight:

        w_t = pi_prox(y_t) / pi_behav(y_t) = exp(log pi_prox - log pi_behav)
        w_t = 0 where w_t > cap          (AReaL ``behav_imp_weight_cap``: dropped, not truncated)

    and the loss it weighs, the clip measured against the proximal policy, not the sampler:

        L_t = w_t * -min(r_t A_t, clip(r_t, 1 - eps_low, 1 + eps_high) A_t),   r_t = pi_theta / pi_prox

    so the product w_t r_t = pi_theta / pi_behav is the full importance weight, but the trust region
    is around the weights the learner has now. ``cap=None``: untruncated. This is
    `sampler_importance_weights` ``mode="token_mask"`` with C_max = cap and no C_min.

    prox_logp, behav_logp, mask: [B, T]. Returns ``(weights [B, T], stats)``: the stats of
    `sampler_importance_weights` and ``dropped_frac``, the share of the masked tokens with weight 0.
    """
    _ndim("prox_logp", prox_logp, 2, "[B, T]")
    _same_shape("prox_logp", prox_logp, behav_logp=behav_logp, mask=mask)
    weights, stats = sampler_importance_weights(prox_logp, behav_logp, mask, "token_mask", clip_max=cap)
    return weights, {**stats, "dropped_frac": _dropped(weights, mask)}


def icepop_weights(
    prox_logp: Tensor, behav_logp: Tensor, mask: Tensor, alpha: float = 0.5, beta: float = 5.0
) -> tuple[Tensor, dict]:
    """IcePop's two-sided mask (Ling team 2025, Ring-1T), per token:

        k_t = pi_prox(y_t) / pi_behav(y_t)          (IcePop: pi_train(theta_old) / pi_infer(theta_old))
        w_t = k_t if alpha <= k_t <= beta, else 0    (the blog's M(k; alpha, beta))

    and the loss ``L_t = w_t * -min(r_t A_t, clip(r_t, 1 - eps_low, 1 + eps_high) A_t)`` with
    r_t = pi_theta / pi_prox: AReaL's decoupled weight with a floor as well as a cap. IcePop was made
    for the numbers of a training engine and a serving engine that disagree; here the disagreement is
    the lag. This is `sampler_importance_weights` ``mode="token_mask"`` with C_min = alpha, C_max = beta.
    The blog leaves alpha and beta as settings; the defaults [0.5, 5] are this course's choice, following
    OpenRLHF-style two-sided truncation, not values the blog fixes.

    prox_logp, behav_logp, mask: [B, T]; 0 <= alpha < beta. Returns ``(weights [B, T], stats)``: the
    stats of `sampler_importance_weights` and ``dropped_frac``.
    """
    _ndim("prox_logp", prox_logp, 2, "[B, T]")
    _same_shape("prox_logp", prox_logp, behav_logp=behav_logp, mask=mask)
    _in_range("alpha", alpha)
    if not alpha < beta:
        raise ValueError(f"alpha must be < beta, got alpha={alpha}, beta={beta}")
    weights, stats = sampler_importance_weights(
        prox_logp, behav_logp, mask, "token_mask", clip_max=beta, clip_min=alpha
    )
    return weights, {**stats, "dropped_frac": _dropped(weights, mask)}


def m2po_mask(log_ratio: Tensor, mask: Tensor, threshold: float = 0.04) -> tuple[Tensor, dict]:
    """M2PO's second-moment mask (Zheng, Zhao and Chen 2025), over the masked tokens of a batch:

        d_t  = log pi_theta(y_t) - log pi_behav(y_t)          (``log_ratio``, detached)
        M2   = 1/N sum_t d_t^2                                 (the batch's second moment)
        while M2 of the kept tokens > threshold: drop the kept token of largest d_t^2
        keep_t = 1 if kept else 0

    The paper's objective is then ``L_t = -keep_t * r_t A_t`` with r_t = pi_theta / pi_behav and no
    epsilon clip (the mask is the trust region); its threshold is 0.04 in every experiment. If even
    the smallest d_t^2 alone is above the threshold, every token is dropped. Ties in d_t^2 are dropped
    in the order of the tokens (a stable sort).

    log_ratio, mask: [B, T]. Returns ``(keep [B, T] of 0/1 in log_ratio's dtype, stats)``; stats are
    python floats: ``dropped_frac`` (share of the masked tokens dropped), ``m2`` (M2 of all of them)
    and ``m2_kept`` (M2 of the kept ones; 0.0 when none).
    """
    _ndim("log_ratio", log_ratio, 2, "[B, T]")
    _same_shape("log_ratio", log_ratio, mask=mask)
    _in_range("threshold", threshold)
    with torch.no_grad():
        m = mask.bool()
        d2 = log_ratio.detach()[m].square()  # [N]: d_t^2 of the masked tokens
        n = d2.numel()
        keep = torch.zeros_like(log_ratio.detach())
        if n == 0:
            return keep, {"dropped_frac": 0.0, "m2": 0.0, "m2_kept": 0.0}
        s, order = torch.sort(d2, descending=True, stable=True)  # largest first
        kept_m2 = s.flip(0).cumsum(0).flip(0) / torch.arange(n, 0, -1, dtype=s.dtype, device=s.device)
        under = (kept_m2 <= threshold).nonzero()  # kept_m2[j]: M2 after dropping the j largest
        j = int(under[0]) if len(under) else n  # how many to drop
        flat = torch.ones(n, dtype=log_ratio.dtype, device=log_ratio.device)
        flat[order[:j]] = 0.0
        keep[m] = flat
        stats = {"dropped_frac": j / n, "m2": float(d2.mean()), "m2_kept": float(kept_m2[j]) if j < n else 0.0}
    return keep, stats
