"""The objectives after DAPO (2025-26), each its own function: GSPO's sequence-level ratio,
CISPO's clipped detached weight, and the importance weight of a sampler that is not the trainer."""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import _choice, _clip_range, _in_range, _ndim, _per_token, _same_shape
from .losses import _spread
from .reductions import masked_sum


def sequence_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """GSPO's length-normalised sequence log-ratio (Zheng et al. 2025), one per completion:

        log s_i = 1/|y_i| sum_t m_it (log pi_theta(y_it) - log pi_old(y_it))
        s_i     = (pi_theta(y_i) / pi_old(y_i)) ** (1/|y_i|)   (the geometric mean of rho_it)

    logp, old_logp, mask: [B, T]; old_logp is detached. Returns [B], with gradient through
    every token's log pi_theta (TRL ``importance_sampling_level="sequence"`` computes exactly
    this; |y_i| is clamped at 1, so an empty completion has log s_i = 0).
    """
    _ndim("logp", logp, 2, "[B, T]")
    _same_shape("logp", logp, old_logp=old_logp, mask=mask)
    m = mask.to(logp.dtype)
    return masked_sum(logp - old_logp.detach(), m, dim=-1) / m.sum(-1).clamp(min=1)


def gspo_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor,
    eps_low: float = 3e-4, eps_high: float | None = 4e-4,
) -> tuple[Tensor, dict]:  # fmt: skip
    """GSPO's clipped sequence-level surrogate (Zheng et al. 2025):

        s_i = exp(sequence_log_ratio)_i = exp(1/|y_i| sum_t log(pi_theta(y_it) / pi_old(y_it)))
        L_i = -min(s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i)

    One ratio and one clip decision per completion instead of per token. The loss is
    returned broadcast over the completion's tokens, L_it = L_i, so that ``aggregate_loss``
    weighs it: "sequence_mean" gives 1/B sum_i L_i, the GSPO objective (TRL warns that its
    token-summing losses weigh each sequence by its length); this is TRL's
    ``importance_sampling_level="sequence"`` term for term. Gradient: the clip is PPO's, and
    where s_i is not clipped, grad L_i = -A_i s_i 1/|y_i| sum_t grad log pi_theta(y_it);
    on-policy (s_i = 1) that is GRPO's token-level gradient under "sequence_mean".
    The paper's clip range is tiny (3e-4, 4e-4: the defaults), because log s_i is a mean.

    logp, old_logp, mask: [B, T]; advantages [B] or [B, T] (detached). ``eps_high=None``
    means eps_low. Returns ``(loss [B, T], stats)``; stats are python floats over the
    completions with at least one token (0.0 if none): clip_low (s < 1 - eps_low and A < 0),
    clip_high (s > 1 + eps_high and A > 0), clip_ratio (either), ratio_mean (mean s_i), and
    ratio_std (of s_i), advantage_abs_mean, advantage_abs_max (`losses._spread`).
    """
    eps_high = _clip_range(logp, old_logp, mask, eps_low, eps_high)
    adv = _per_token(advantages, logp).detach()
    s = torch.exp(sequence_log_ratio(logp, old_logp, mask)).unsqueeze(-1)  # [B, 1]
    loss = -torch.minimum(s * adv, torch.clamp(s, 1.0 - eps_low, 1.0 + eps_high) * adv)
    loss = loss.expand_as(logp)

    with torch.no_grad():
        seq = (mask.to(logp.dtype).sum(-1) > 0).to(logp.dtype)  # completions with tokens
        a = adv.expand_as(logp)[:, 0]  # a sequence-level clip reads the first token's advantage
        low = ((s[:, 0] < 1.0 - eps_low) & (a < 0)).to(logp.dtype)
        high = ((s[:, 0] > 1.0 + eps_high) & (a > 0)).to(logp.dtype)
        n = seq.sum().clamp(min=1)
        fracs = (torch.stack([low, high, low + high, s[:, 0]]).mul(seq).sum(1) / n).tolist()
        stats = dict(zip(("clip_low", "clip_high", "clip_ratio", "ratio_mean"), fracs, strict=True))
    return loss, {**stats, **_spread(s[:, 0], seq.bool(), advantages, mask.to(logp.dtype))}


def cispo_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, eps_high: float = 4.0,
    eps_low: float | None = None, mask: Tensor | None = None,
) -> tuple[Tensor, dict]:  # fmt: skip
    """CISPO (MiniMax-M1, 2025): clip the importance weight, detached, not the update:

        rho_t = pi_theta(a_t) / pi_old(a_t)
        w_t   = sg[clip(rho_t, 1 - eps_low, 1 + eps_high)]      (sg = stop-gradient, .detach())
        L_t   = -w_t A_t log pi_theta(a_t)

    Every token keeps a REINFORCE gradient -w_t A_t grad log pi_theta; a clipped token's
    weight is capped instead of its gradient being zeroed (PPO's clip drops it). Where
    rho_t is not clipped, the gradient is rho_t A_t grad log pi_theta = A_t grad rho_t,
    PPO's unclipped gradient; at rho_t = 1 it is ``policy_gradient_loss``'s.
    ``eps_low=None`` is no lower bound (MiniMax-M1, ScaleRL and TRL clip from above only).
    TRL ``loss_type="cispo"`` computes ``clamp(rho, max=epsilon_high).detach()``: its
    epsilon_high is the cap itself (ScaleRL's eps_max, recommended 5.0), ours 1 + eps_high
    (so TRL epsilon_high = 1 + eps_high; the default cap 5.0). TRL aggregates it as "dapo"
    (a mean over the tokens).

    logp, old_logp: [B, T]; advantages [B] or [B, T] (detached, as is old_logp).
    Returns ``(loss [B, T], stats)``; stats are python floats over the masked tokens (all
    tokens if mask is None): clip_low (rho < 1 - eps_low), clip_high (rho > 1 + eps_high),
    clip_ratio (either; any advantage sign: TRL's cispo_clip_ratio counts A > 0 only),
    ratio_mean (the mean of rho), and ratio_std, advantage_abs_mean, advantage_abs_max
    (`losses._spread`).
    """
    _ndim("logp", logp, 2, "[B, T]")
    _same_shape("logp", logp, old_logp=old_logp, mask=mask)
    _in_range("eps_high", eps_high)
    if eps_low is not None:
        _in_range("eps_low", eps_low, 0.0, 1.0)
    adv = _per_token(advantages, logp).detach()
    rho = torch.exp(logp - old_logp.detach())
    lo = None if eps_low is None else 1.0 - eps_low
    w = torch.clamp(rho, min=lo, max=1.0 + eps_high).detach()
    loss = -w * adv * logp

    with torch.no_grad():
        m = torch.ones_like(rho) if mask is None else mask.to(rho.dtype)
        low = (rho < (-float("inf") if lo is None else lo)).to(rho.dtype)
        high = (rho > 1.0 + eps_high).to(rho.dtype)
        n = m.sum().clamp(min=1)
        fracs = (torch.stack([low, high, low + high, rho]).mul(m).sum((1, 2)) / n).tolist()
        stats = dict(zip(("clip_low", "clip_high", "clip_ratio", "ratio_mean"), fracs, strict=True))
    return loss, {**stats, **_spread(rho, m.bool(), advantages, m)}


SAMPLER_IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def sampler_importance_weights(
    old_logp: Tensor, sampler_logp: Tensor, mask: Tensor, mode: str = "token_truncate",
    clip_max: float | None = 3.0, clip_min: float | None = None,
) -> tuple[Tensor, dict]:  # fmt: skip
    """Truncated / masked importance sampling for a sampler that is not the trainer (TIS, MIS).

    A serving engine (vLLM, SGLang; here: the policy in bfloat16) samples y ~ pi_sampler, while
    the loss is built on the trainer's own pi_old (recomputed in fp32): the samples are slightly
    off-policy. The correction weight, constant in the loss (data, detached):

        token:     log r_it = m_it (log pi_old(y_it) - log pi_sampler(y_it))
        sequence:  log r_i  = sum_t m_it (log pi_old(y_it) - log pi_sampler(y_it))  (no 1/|y_i|)
        "*_truncate" (TIS): w = clip(r, C_min, C_max)
        "*_mask"     (MIS): w = r if C_min <= r <= C_max else 0   (drop the token / the sequence)

    and the per-token loss becomes w * L_t (the KL term is not weighted). With C_max = inf and
    no C_min, w is the plain importance weight: E_sampler[w f] = E_old[f] exactly for the
    sequence modes (token modes weigh each token by its own ratio: the usual per-token
    approximation). Truncation trades that unbiasedness for bounded variance.
    TRL ``vllm_importance_sampling_mode`` (same four names), ``vllm_importance_sampling_clip_max``
    (C_max; the deprecated ``vllm_importance_sampling_cap``) and ``..._clip_min``; verl's rollout
    correction (``rollout_is="token"|"sequence"``, ``rollout_is_threshold``). A NaN sampler
    log-prob (one the engine could not score) gets weight 1, as in TRL.

    old_logp, sampler_logp, mask: [B, T]. ``clip_max``/``clip_min`` None mean no bound (a
    truncate mode needs one of them). Returns ``(weights [B, T], stats)``; sequence modes give
    every token of a completion its sequence's weight. stats (python floats over the masked
    tokens; sequence modes over the completions): is_ratio_mean, is_ratio_min, is_ratio_max (of
    w, as TRL's sampling/importance_sampling_ratio/*), is_clipped_frac (w != r), and
    logp_diff_mean, logp_diff_max (|log pi_old - log pi_sampler| per token).
    """
    _ndim("old_logp", old_logp, 2, "[B, T]")
    _same_shape("old_logp", old_logp, sampler_logp=sampler_logp, mask=mask)
    _choice("mode", mode, SAMPLER_IS_MODES)
    for name, c in (("clip_max", clip_max), ("clip_min", clip_min)):
        if c is not None:
            _in_range(name, c)
    if clip_max is not None and clip_min is not None and not clip_min < clip_max:
        raise ValueError(f"clip_min must be < clip_max, got clip_min={clip_min}, clip_max={clip_max}")
    if mode.endswith("truncate") and clip_max is None and clip_min is None:
        raise ValueError(f"clip_max or clip_min must be set for mode={mode!r} (a truncation needs a bound)")
    with torch.no_grad():
        m = mask.to(old_logp.dtype)
        diff = torch.nan_to_num((old_logp - sampler_logp) * m, nan=0.0)
        sequence = mode.startswith("sequence")
        log_r = diff.sum(-1, keepdim=True) if sequence else diff  # [B, 1] or [B, T]
        r = torch.exp(log_r)
        lo = -float("inf") if clip_min is None else clip_min
        hi = float("inf") if clip_max is None else clip_max
        if mode.endswith("truncate"):
            w = torch.clamp(r, min=lo, max=hi)
        else:
            w = r.masked_fill((r < lo) | (r > hi), 0.0)
        weights = w.expand_as(old_logp).clone()

        sel = (m.sum(-1) > 0) if sequence else m.bool()
        flat_w, flat_r = (w[:, 0][sel], r[:, 0][sel]) if sequence else (w[sel], r[sel])
        delta = (old_logp - sampler_logp).abs()[m.bool() & ~torch.isnan(sampler_logp)]

        def stat(x, f):
            return float(f(x)) if x.numel() else 0.0

        stats = {
            "is_ratio_mean": stat(flat_w, torch.mean),
            "is_ratio_min": stat(flat_w, torch.min),
            "is_ratio_max": stat(flat_w, torch.max),
            "is_clipped_frac": stat((flat_w != flat_r).to(old_logp.dtype), torch.mean),
            "logp_diff_mean": stat(delta, torch.mean),
            "logp_diff_max": stat(delta, torch.max),
        }
    return weights, stats
