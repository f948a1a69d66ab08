"""Returns and advantages: G_t, GAE, ``G_t - b``, GRPO's group-relative advantage, and one
sign of it."""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import _choice, _in_range, _ndim, _same_shape


def discounted_returns(rewards: Tensor, mask: Tensor, gamma: float) -> Tensor:
    """Reward-to-go ``G_t = sum_{k>=0} gamma^k r_{t+k} = r_t + gamma G_{t+1}``.

    rewards, mask: [B, T]; masked-out rewards count as 0. Returns [B, T], 0 where mask is 0.
    """
    _ndim("rewards", rewards, 2, "[B, T]")
    _same_shape("rewards", rewards, mask=mask)
    _in_range("gamma", gamma, 0.0, 1.0)
    m = mask.to(rewards.dtype)
    r = rewards * m
    g = torch.zeros_like(r[:, 0])
    out = []
    for t in reversed(range(r.shape[1])):
        g = r[:, t] + gamma * g
        out.append(g)
    return torch.stack(out[::-1], dim=1) * m


def gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0, lam: float = 1.0) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016).

        delta_t = r_t + gamma * V_{t+1} - V_t
        A_t     = sum_{k>=0} (gamma * lam)^k delta_{t+k} = delta_t + gamma * lam * A_{t+1}
        R_t     = A_t + V_t            (the critic's regression target)

    The episode ends at the last masked token (EOS or truncation): V after it is 0.
    rewards, values, mask: [B, T]. Returns ``(advantages, returns)``, both [B, T] and 0
    where mask is 0. Both are *targets*: values (and rewards) are detached, so no
    gradient flows from the policy loss into the critic.
    """
    _ndim("rewards", rewards, 2, "[B, T]")
    _same_shape("rewards", rewards, values=values, mask=mask)
    _in_range("gamma", gamma, 0.0, 1.0)
    _in_range("lam", lam, 0.0, 1.0)
    r, v = rewards.detach(), values.detach()
    m = mask.to(v.dtype)
    next_value = next_adv = torch.zeros_like(v[:, 0])
    out = []
    for t in reversed(range(v.shape[1])):
        delta = r[:, t] + gamma * next_value - v[:, t]
        next_adv = (delta + gamma * lam * next_adv) * m[:, t]  # 0 on padding: resets
        next_value = v[:, t] * m[:, t]
        out.append(next_adv)
    advantages = torch.stack(out[::-1], dim=1)
    return advantages, (advantages + v) * m


def baseline_advantages(returns: Tensor, baseline, mask: Tensor) -> Tensor:
    """REINFORCE with a baseline: ``A_t = G_t - b`` (0 where mask is 0).

    ``baseline`` is a number (a batch or running mean), a ``[B]`` tensor (one b per
    sequence) or a ``[B, T]`` tensor (a critic's V(s_t)). Since E[b grad log pi] = 0 for any
    b that does not depend on the action, the estimate stays unbiased. Both inputs are
    targets: no gradient flows into the returns or into the critic from here.
    returns, mask: [B, T]. Returns [B, T].
    """
    _ndim("returns", returns, 2, "[B, T]")
    _same_shape("returns", returns, mask=mask)
    b = torch.as_tensor(baseline, dtype=returns.dtype, device=returns.device).detach()
    if b.dim() == 1 and b.shape[0] == returns.shape[0]:
        b = b.unsqueeze(-1)
    elif b.dim() not in (0, 2) or (b.dim() == 2 and b.shape != returns.shape):
        raise ValueError(
            f"baseline must be a number, [B] = [{returns.shape[0]}] or [B, T] = {list(returns.shape)}, "
            f"got shape {list(b.shape)}"
        )
    return (returns.detach() - b) * mask.to(returns.dtype)


def running_mean(previous: float | None, value: float, decay: float) -> float:
    """``b <- decay * b + (1 - decay) * value``; the first value starts the average."""
    _in_range("decay", decay, 0.0, 1.0)
    return float(value) if previous is None else decay * previous + (1.0 - decay) * float(value)


def group_advantages(
    rewards: Tensor,
    group_size: int,
    scale: str = "group",
    eps: float = 1e-6,
    unbiased: bool = False,
    leave_one_out: bool = False,
) -> tuple[Tensor, dict]:
    """GRPO's group-relative advantage, one per completion.

    Rows ``i = g*G .. g*G + G-1`` (G = group_size) answer the same prompt g:

        A_i = (r_i - mean_g(r)) / (s + eps)

    with s = std_g(r) for ``scale="group"`` (GRPO), s = std of the whole batch for
    ``"batch"``, and no division for ``"none"`` (Dr. GRPO: A_i = r_i - mean_g(r)).
    ``unbiased=False`` is the 1/G std of the derivation; ``True`` is 1/(G-1) (torch.std's
    default; it only rescales the step). Both are ``torch.std`` with ``correction`` 0 or 1,
    so the numbers are the same bits a learner gets from torch.
    ``leave_one_out=True`` centres on the mean of the *other* G-1 rewards (RLOO):
    ``r_i - mean_{j != i} r_j = G/(G-1) (r_i - mean_g(r))``, which, unlike the group mean,
    does not contain r_i itself (the baseline is then independent of the sample: unbiased).
    A group whose rewards are all equal (always the case with G = 1) gets advantage exactly
    0, never NaN: it carries no signal.

    rewards: [B]. Returns ``(advantages [B], stats)`` with stats "mean" [n_groups],
    "std" [n_groups] (per-group std, with the chosen ``unbiased``) and "frac_zero_std"
    (python float: the fraction of groups whose rewards are all equal). (Long for its
    docstring and argument checks; the equation itself is the six lines at the end.)
    """
    _ndim("rewards", rewards, 1, "[B] (one reward per completion)")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}")
    if rewards.shape[0] % group_size != 0:
        raise ValueError(f"group_size must divide the batch size B = {rewards.shape[0]}, got {group_size}")
    _choice("scale", scale, ("group", "batch", "none"))
    _in_range("eps", eps)
    if not rewards.is_floating_point():
        rewards = rewards.float()
    correction = int(unbiased)

    def std(x: Tensor, dim: int) -> Tensor:  # a single sample has std 0 (not NaN)
        if x.shape[dim] <= correction:
            return torch.zeros_like(x.select(dim, 0))
        return torch.std(x, dim=dim, correction=correction)

    r = rewards.view(-1, group_size)  # [n_groups, G]
    mean, group_std = r.mean(1), std(r, 1)
    all_equal = r.amax(1) == r.amin(1)  # exact test: std of equal floats may be 1e-9, not 0
    centered = torch.where(all_equal[:, None], torch.zeros_like(r), r - mean[:, None])
    if leave_one_out and group_size > 1:
        centered = centered * (group_size / (group_size - 1))
    if scale == "group":
        denom = group_std[:, None] + eps
    elif scale == "batch":
        denom = std(rewards, 0) + eps
    else:
        denom = torch.ones_like(group_std[:, None])
    denom = torch.where(all_equal[:, None], torch.ones_like(r), denom)  # 0/0 -> 0, not NaN
    frac_zero_std = all_equal.sum().item() / all_equal.numel()
    stats = {"mean": mean.detach(), "std": group_std.detach(), "frac_zero_std": frac_zero_std}
    return (centered / denom).reshape(-1), stats


def signed_advantages(advantages: Tensor, sign: str = "both", positive_weight: float = 1.0) -> Tensor:
    """The advantage with one sign kept, or the positive one weighted (Zhu et al. 2025):

        A'_i = lambda_pos max(A_i, 0) + lambda_neg min(A_i, 0)

    ``sign="both"``: lambda_pos = ``positive_weight``, lambda_neg = 1 (W-REINFORCE: lambda_pos = 0.1);
    ``"negative"`` (NSR, only the wrong answers pushed down): lambda_pos = 0, lambda_neg = 1;
    ``"positive"`` (PSR, only the right answers pulled up): lambda_pos = ``positive_weight``, lambda_neg = 0.
    advantages: [B] or [B, T]; returns the same shape.
    """
    _choice("sign", sign, ("both", "negative", "positive"))
    _in_range("positive_weight", positive_weight)
    lambda_pos = 0.0 if sign == "negative" else positive_weight
    lambda_neg = 0.0 if sign == "positive" else 1.0
    return lambda_pos * advantages.clamp(min=0) + lambda_neg * advantages.clamp(max=0)
