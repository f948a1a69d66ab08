"""GRPO's production extras, each called by GRPO's main path only when its knob is on.

- ``importance_sampling_level="sequence"`` (GSPO) and ``loss_type="cispo"`` (CISPO): another
  objective in place of the clipped token ratio (`other_objective`).
- ``dynamic_sampling=True`` (DAPO): only the groups whose rewards differ are trained on,
  sampled again until there are enough (`dynamic_sampling`).

The fourth, a sampler that is not the trainer (``sampler_dtype``), is sampler.py.
"""

from __future__ import annotations

import torch

from .. import functional as Fn
from ..rollout import Rollout


def other_objective(config, logp, old_logp, adv, mask):
    """``(per-token loss [b, T], clip stats)`` of CISPO (``loss_type="cispo"``) or else GSPO
    (``importance_sampling_level="sequence"``), in place of GRPO's clipped token ratio."""
    if config.loss_type == "cispo":  # -sg[clip(rho, max=1+eps_high)] A log pi_theta (MiniMax-M1), token mean
        return Fn.cispo_loss(logp, old_logp, adv, cispo_eps_high(config), mask=mask)
    # GSPO: s_i = exp(mean_t log rho_it), clipped
    return Fn.gspo_loss(logp, old_logp, adv, mask, config.eps_low, config.eps_high)


def informative_groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """A bool [B] mask of the rows whose group's rewards differ (an all-equal group has A = 0)."""
    g = rewards.view(-1, group_size)
    return ((g.max(dim=1).values - g.min(dim=1).values) > 0).repeat_interleave(group_size)


def dynamic_sampling(sample, group_size: int, max_resample: int):
    """DAPO's dynamic sampling: keep only the informative groups of ``sample()`` (which returns
    ``(rollout, scores, problems)``), sample again until there are as many as one rollout has,
    at most ``max_resample`` extra rounds. Returns ``(rollout, scores, problems, generated)``;
    ``generated`` counts every completion sampled, kept or not (the cost)."""
    G, parts, kept, generated, have = group_size, [], [], 0, 0
    for _ in range(max_resample + 1):
        ro, scores, problems = sample()
        generated += ro.batch_size
        idx = informative_groups(scores.sum(dim=1), G).nonzero().squeeze(1)
        idx = idx[: (ro.batch_size // G - have) * G]
        if len(idx):
            parts.append((ro.select(idx), scores[idx]))
            kept += [problems[i] for i in idx.tolist()]
            have += len(idx) // G
        if have >= ro.batch_size // G:
            break
    if not parts:  # nothing informative at all: the last (all-equal) batch
        return ro, scores, problems, generated
    T = max(s.shape[1] for _, s in parts)
    scores = torch.cat([torch.nn.functional.pad(s, (0, T - s.shape[1])) for _, s in parts])
    return Rollout.concat([r for r, _ in parts]), scores, kept, generated


def cispo_eps_high(config) -> float:
    """CISPO's cap on the weight is 1 + eps_high: ``config.eps_high``, or when it is None the
    default of `Fn.cispo_loss` (4.0: a cap of 5, ScaleRL's and TRL's recommended epsilon_high),
    not the clip range eps_low (a cap of 1.2 would clip most of the weights CISPO keeps)."""
    import inspect

    if config.eps_high is not None:
        return float(config.eps_high)
    return float(inspect.signature(Fn.cispo_loss).parameters["eps_high"].default)
