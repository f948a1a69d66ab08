"""GRPO's extras that are not an objective, each called by GRPO's main path only when its knob is on.

- ``dynamic_sampling=True`` (DAPO): only the groups whose rewards differ are trained on,
  sampled again until there are enough (`dynamic_sampling`).
- ``reward_signal`` other than "true" (notebook 12): a reward that ignores correctness, or the true
  one negated (`spurious_rewards`).

The objectives (PPO's clip, GSPO, CISPO) are the rows of ``grpo.POLICY_LOSSES``; a sampler that is
not the trainer (``sampler_dtype``) is sampler.py.
"""

from __future__ import annotations

import torch

from ..functional._checks import _choice, _in_range, _ndim
from ..rollout import Rollout


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


def spurious_rewards(correct: torch.Tensor, signal: str = "true", p: float = 0.5, generator=None) -> torch.Tensor:
    """A reward that ignores correctness, or turns it around, per completion (notebook 12):

        "true":     r_i = c_i                      (the checker: c_i = 1 for a right answer, else 0)
        "random":   r_i ~ Bernoulli(p), independent of c_i (Shao et al. 2025's random reward, p = 0.5)
        "negated":  r_i = 1 - c_i                  (the true objective negated: every wrong answer paid)

    "negated" is not Shao et al.'s "incorrect label" reward, which pays only the answers that match one
    fixed wrong label per prompt (a relabelled task: `grpo_edu.studies.regimes.spurious_rewards.IncorrectLabels`);
    maximising 1 - c_i is minimising the accuracy, so the accuracy must fall.

    correct: [B] of 0/1; ``generator`` draws the random rewards (a seeded ``torch.Generator``).
    Returns [B] float rewards.
    """
    _ndim("correct", correct, 1, "[B] (one 0/1 per completion)")
    _choice("signal", signal, ("true", "random", "negated"))
    _in_range("p", p, 0.0, 1.0)
    c = correct.float()
    if bool(((c != 0) & (c != 1)).any()):
        raise ValueError("correct must hold only 0 and 1")
    if signal == "true":
        return c
    if signal == "negated":
        return 1.0 - c
    u = torch.rand(c.shape, generator=generator, device="cpu" if generator is None else generator.device)
    return (u.to(c.device) < p).float()
