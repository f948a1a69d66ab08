"""Homework 5: diagnose a silent bug. Your name: ______________________

Part A: write ``diagnose(history)``, which names the silent bug behind a training run (or
says "healthy") from its logged metrics alone. Part B: two functions below each carry one
planted bug: find it and fix it (change as little as you can). Then check them:

    python -m course.grade hw5 path/to/this_file.py      # from the repository root
    python path/to/this_file.py                          # score your diagnose on practice runs

The Part B functions have the signature of their namesakes in `grpo_edu.functional`.
Shapes: B = n_prompts x group_size completions, the G samples of one prompt in consecutive
rows; T completion tokens; ``mask`` [B, T] is 1 up to and including EOS, 0 on padding.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["diagnose", "group_advantages", "clipped_surrogate_loss"]


# ------------------------------------------------------------------ Part A: diagnosis


def diagnose(history) -> str:
    """Part A: which silent bug (if any) produced this run? Decide from its metrics alone.

    ``history`` is a `grpo_edu.train.History` of one GRPO run from the SFT reference:
    ``history.steps`` is a list with one dict per RL step (``"reward"``, ``"reward_std"``,
    ``"kl"``, ``"entropy"``, ``"clip_ratio"``, ``"completion_length"``,
    ``"frac_reward_zero_std"``, ``"grad_norm"``, ``"loss"``, ... : print one to see them all),
    ``history.evals`` the held-out ``"accuracy"`` every few steps, and ``history.series(key)``
    one metric as a numpy array. The grader's runs carry no name and no config: only metrics.

    Returns:
        one of README.md's class names: ``"healthy"`` or the name of a bug in
        ``grpo_edu.demos.silent_bugs.BUGS`` (any other string is an error).
    """
    raise NotImplementedError("implement diagnose: read the signatures in README.md, Part A")


# ------------------------------------------------------- Part B: find and fix the bug


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
    G-1 rewards: G/(G-1) (r_i - mean_g(r)). THIS FUNCTION HAS ONE BUG.

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

    prompt = torch.arange(B) % n_groups  # the prompt each row answers
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
    (no gradient flows into them). THIS FUNCTION HAS ONE BUG.

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
    loss = -torch.maximum(unclipped, clipped)

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


# ------------------------------------------------------------------ practice for Part A


def practice_runs(names=None, seeds=(0,), **kwargs) -> dict:
    """Part A's practice set: ``{name: [History per seed]}``, one GRPO run per class
    (``"healthy"`` and each bug of ``grpo_edu.demos.silent_bugs``; ``names`` picks some) and
    seed, from the notebook's reference (the ``world="spread"`` SFT reference), through
    ``grpo_edu.demos.silent_bugs.run_bugged`` (``kwargs`` go to it, e.g. ``steps=``; about 5 s a
    run on one thread). The grader uses other seeds and another reference: do not tune to these."""
    from grpo_edu import get_preset, reference_policy
    from grpo_edu.demos.silent_bugs import BUG_NAMES, run_bugged

    preset = get_preset("cpu", world="spread")  # the notebook's and the grader's world
    reference = reference_policy(preset, progress=False)
    names = BUG_NAMES if names is None else tuple(names)
    return {name: [run_bugged(name, reference, preset, seed=seed, **kwargs) for seed in seeds] for name in names}


def score(runs: dict, diagnose=None) -> float:
    """The fraction of ``runs`` (``{true name: [History, ...]}``) that ``diagnose`` (default:
    yours, above) names right; prints each miss."""
    diagnose = diagnose or globals()["diagnose"]
    right = total = 0
    for name, histories in runs.items():
        for i, h in enumerate(histories):
            answer = diagnose(h)
            right += answer == name
            total += 1
            if answer != name:
                print(f"  {name} (run {i}): diagnosed {answer!r}")
    return right / max(total, 1)


if __name__ == "__main__":
    torch.set_num_threads(1)
    runs = practice_runs()
    print(f"diagnose names {score(runs):.0%} of the practice runs right")
