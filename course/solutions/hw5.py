"""Homework 5 (diagnose a silent bug): reference solution, plain torch.

Written independently of grpo_edu: ``diagnose`` reads only the run's metrics
(``history.steps`` and ``history.evals``), never its name or config.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["diagnose", "group_advantages", "clipped_surrogate_loss"]


G = 8  # GRPO's group size in every graded run (GRPOConfig's default)
SQRT_G_MINUS_1 = math.sqrt(G - 1)  # the largest |z-score| a group of G can hold: one sample against G - 1 equal ones
DEFAULT_EPS = 1e-4  # GRPOConfig's adv_eps


def _binomial_frac_zero_std(r: float) -> float:
    """P(a group of G 0/1 rewards is all equal) if every sample were right with the batch's rate r,
    independently of its prompt: (1 - r)^G + r^G. A prompt's own G samples tie MORE often than that
    when prompts differ in difficulty (easy prompts: all right; hard ones: all wrong)."""
    return (1 - r) ** G + r**G


# The thresholds were set on practice runs (RL seeds 0-2 from the default world's SFT seed 0, 0-1 from
# its SFT seed 1 and from the spread world's SFT seeds 0 and 1), then checked on the graded runs
# (other RL seeds; data/runs.json as python -m course.hw5_diagnosis.make_data last wrote it), where every
# rule's quantity stayed far from its threshold (min..max over the 4 runs of each class):
#   truncated_frac at step 1: answers_cut 0.969..0.996, every other class <= 0.016      (0.2)
#   kl at step 1: temperature_mismatch 0.038..0.060; k3_naive_float32 2.6e-9..5.0e-9;
#                 the other classes 0 or |kl| <= 1.7e-13                                  (1e-4, 1e-11)
#   lr_past_collapse: max kl 2.83..3.68, last-10 reward / step-1 reward 0.008..0.017     (1.0, 0.3)
#   max advantage_abs_max: std_floor_too_small 2.645751, every other class <= 2.644952   (2.64535)
#   excess of frac_reward_zero_std: healthy 0.444..0.513, group_misaligned -0.027..-0.008 (0.15)


def diagnose(history) -> str:
    """Part A: the class of a run from its metrics (a decision list, from the signatures).

    Each rule reads a quantity that the healthy run pins down whatever the reference: an exact
    zero, the value at step 1 (where the policy IS the reference), a ceiling of the group z-score,
    or a ratio to what 0/1 rewards would give. Absolute levels (entropy, grad_norm, accuracy) differ
    between references and are avoided, except for a collapse to a fraction of the run's own start.

    Returns:
        "healthy" or a bug name.
    """
    steps = history.steps
    series = {k: [s[k] for s in steps] for k in steps[0]}
    kl, first = series["kl"], steps[0]

    # answers_cut: the very first rollout (from the reference, before any update) already has most
    # answers cut at the length limit; a healthy reference ends nearly every answer with <eos>.
    if first["truncated_frac"] > 0.2:
        return "answers_cut"
    # kl_sign_flipped: KL(pi || pi_ref) >= 0, and its k3 estimate is >= 0 token by token; a logged KL
    # that is negative at most steps is the penalty's sign turned around.
    if sorted(kl)[len(kl) // 2] < 0:
        return "kl_sign_flipped"
    # reference_is_policy: the policy moves (clip_ratio > 0, ratio_std > 0) yet the KL to the
    # reference is exactly 0 at every step: the reference moves with it.
    if all(v == 0.0 for v in kl):
        return "reference_is_policy"
    # ratio_always_one: with 2 epochs x 2 minibatches per batch, the ratio pi/pi_old leaves 1 after
    # the first update; exactly 0 spread and exactly 0 clipping at every step means pi_old = pi.
    if all(v == 0.0 for v in series["ratio_std"]) and all(v == 0.0 for v in series["clip_ratio"]):
        return "ratio_always_one"
    # At step 1 the policy IS the reference: the true KL is 0 and the logged k3 is the rounding of
    # the two log-prob computations, ~(1e-7)^2 / 2 ~ 1e-14.
    # temperature_mismatch: the trainer's log-probs at another temperature than the reference's:
    # a real KL (~0.05) at step 1.
    if first["kl"] > 1e-4:
        return "temperature_mismatch"
    # k3_naive_float32: exp(-x) - 1 + x in float32 cancels to multiples of 2^-24 per token: ~1e-9,
    # four orders of magnitude above the healthy ~1e-14 (and can be negative).
    if abs(first["kl"]) > 1e-11:
        return "k3_naive_float32"
    # lr_past_collapse: the KL jumps to nats per token and the reward collapses to a fraction of
    # the run's own start (healthy practice runs kept at least three quarters of it).
    reward = series["reward"]
    late = sum(reward[-10:]) / len(reward[-10:])
    if max(kl) > 1.0 and late < 0.3 * reward[0]:
        return "lr_past_collapse"
    # std_floor_too_small: for a 0/1 reward the largest advantage is that of the one right answer
    # among G (or the one wrong one): |A| = sqrt(G-1) / (1 + eps/std) = 2.6450 with eps = 1e-4.
    # Reaching the ceiling sqrt(G-1) = 2.6458 itself needs a floor negligible against the spread;
    # with the KL in the reward, noise-level spreads get z-scored to full size.
    ceiling = SQRT_G_MINUS_1 / (1 + DEFAULT_EPS / math.sqrt((G - 1) / G**2))
    if max(series["advantage_abs_max"]) > (ceiling + SQRT_G_MINUS_1) / 2:
        return "std_floor_too_small"
    # group_misaligned: groups that mix G prompts tie (all right or all wrong) about as often as
    # independent samples at the batch's reward rate; a prompt's own samples tie far more often
    # where prompts differ (the graded runs' "spread" world: easy prompts all right, hard ones all
    # wrong). The excess of frac_reward_zero_std over the independent prediction, averaged over steps:
    excess = sum(s["frac_reward_zero_std"] - _binomial_frac_zero_std(s["reward"]) for s in steps) / len(steps)
    if excess < 0.15:
        return "group_misaligned"
    return "healthy"


def group_advantages(
    rewards: Tensor, group_size: int, scale: str = "group", eps: float = 1e-6,
    unbiased: bool = False, leave_one_out: bool = False,
) -> tuple[Tensor, dict]:  # fmt: skip
    """Equation (1) of README.md: GRPO's group-relative advantage, one per completion.
    Rows g*G .. g*G + G-1 answer the same prompt g (G = group_size):

        A_i = (r_i - mean_g(r)) / (s + eps)

    s = std of the group for ``scale="group"``, of the whole batch for ``"batch"``, no
    division for ``"none"``; the 1/G std (``unbiased=True``: 1/(G-1)). A group whose rewards
    are all equal gets A = 0 exactly. ``leave_one_out=True`` centres on the mean of the other
    G-1 rewards: G/(G-1) (r_i - mean_g(r)). (Fixed.)

    Args:
        rewards: [B] rewards; group_size: G, divides B; scale: "group" | "batch" | "none";
        eps: >= 0; unbiased: the std's correction; leave_one_out: RLOO's baseline.
    Returns:
        ``(advantages [B], stats)``, stats "mean" [B // G] and "std" [B // G] (one per
        prompt, in prompt order) and "frac_zero_std" (python float).
    """
    if scale not in ("group", "batch", "none"):
        raise ValueError(f"scale must be 'group', 'batch' or 'none', got {scale!r}")
    if rewards.dim() != 1 or rewards.shape[0] % group_size:
        raise ValueError(f"rewards must be [B] with group_size={group_size} dividing B, got {list(rewards.shape)}")
    r = rewards if rewards.is_floating_point() else rewards.float()
    B = r.shape[0]
    n_groups = B // group_size
    correction = int(unbiased)

    def std(x: Tensor) -> Tensor:  # over the last dim; a single sample has std 0
        if x.shape[-1] <= correction:
            return torch.zeros_like(x[..., 0])
        return x.std(-1, correction=correction)

    # THE FIX: rows g*G .. g*G + G-1 answer prompt g, so the prompt of row i is i // G. The planted
    # bug took i % n_groups (what a sampler that tiles prompts, prompts.repeat(G), would produce): each
    # "group" then mixed completions of G different prompts, a baseline that knows nothing of the prompt.
    prompt = torch.arange(B) // group_size  # the prompt each row answers
    order = torch.argsort(prompt, stable=True)  # the rows of prompt 0, then those of prompt 1, ...
    groups = r[order].reshape(n_groups, group_size)  # [n_groups, G]
    mean, group_std = groups.mean(-1), std(groups)
    equal = groups.amax(-1) == groups.amin(-1)  # all-equal groups: no signal
    centered = groups - mean[:, None]
    if leave_one_out and group_size > 1:
        centered = centered * (group_size / (group_size - 1))
    if scale == "group":
        denom = group_std[:, None] + eps
    elif scale == "batch":
        denom = std(r) + eps
    else:
        denom = torch.ones_like(centered)
    denom = torch.where(equal[:, None], torch.ones_like(centered), denom)
    adv_groups = torch.where(equal[:, None], torch.zeros_like(centered), centered / denom)
    advantages = torch.empty_like(r)
    advantages[order] = adv_groups.reshape(-1)  # back to the rows' own order
    stats = {"mean": mean, "std": group_std, "frac_zero_std": float(equal.float().mean())}
    return advantages, stats


def clipped_surrogate_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, eps_low: float = 0.2,
    eps_high: float | None = None, mask: Tensor | None = None,
) -> tuple[Tensor, dict]:  # fmt: skip
    """Equation (2) of README.md: PPO's clipped surrogate, per token,

        rho_t = exp(logp_t - old_logp_t)
        L_t   = -min(rho_t A_t, clip(rho_t, 1 - eps_low, 1 + eps_high) A_t)

    ``eps_high=None`` means eps_high = eps_low. old_logp and the advantages are data
    (no gradient flows into them). (Fixed.)

    Args:
        logp, old_logp: [B, T]; advantages: [B] (one per sequence) or [B, T];
        eps_low, eps_high: the clip range; mask: [B, T] or None (every token counts).
    Returns:
        ``(loss [B, T], stats)``, stats python floats over the masked tokens (0.0 if none):
        "clip_low" (rho < 1 - eps_low and A < 0), "clip_high" (rho > 1 + eps_high and A > 0),
        "clip_ratio" (either), "ratio_mean" (the mean of rho).
    """
    eps_high = eps_low if eps_high is None else eps_high
    adv = advantages.detach()
    if adv.dim() == 1:
        adv = adv[:, None]  # one advantage per sequence, the same for each of its tokens
    rho = torch.exp(logp - old_logp.detach())
    unclipped = rho * adv
    clipped = rho.clamp(1.0 - eps_low, 1.0 + eps_high) * adv
    # THE FIX: the pessimistic bound is the MINIMUM of the two terms (-min, the largest loss). The
    # planted bug took the maximum: for A > 0 past 1 + eps_high the unclipped term kept its gradient
    # (no clipping where clipping matters), and for A > 0 below 1 - eps_low the gradient vanished.
    loss = -torch.minimum(unclipped, clipped)

    with torch.no_grad():
        adv = adv.expand_as(rho)
        w = torch.ones_like(rho) if mask is None else mask.to(rho.dtype)
        n = float(w.sum())
        low = (rho < 1.0 - eps_low) & (adv < 0)
        high = (rho > 1.0 + eps_high) & (adv > 0)

        def frac(x: Tensor) -> float:
            return float((x.to(rho.dtype) * w).sum()) / n if n > 0 else 0.0

        stats = {
            "clip_low": frac(low),
            "clip_high": frac(high),
            "clip_ratio": frac(low | high),
            "ratio_mean": frac(rho),
        }
    return loss, stats
