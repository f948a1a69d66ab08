"""DAPO's dynamic sampling, the collect hook GRPO mixes in: drop the groups whose rewards
all agree (no signal) and sample more, so every update sees only informative groups."""

from __future__ import annotations

import torch

from ..rollout import Rollout


class DynamicSampling:
    """Overrides `Algorithm.collect` when ``config.dynamic_sampling`` is on."""

    def informative_groups(self, rewards: torch.Tensor) -> torch.Tensor:
        """A bool [B] mask of the rows whose group has rewards that differ."""
        g = rewards.view(-1, self.config.group_size)
        return ((g.max(dim=1).values - g.min(dim=1).values) > 0).repeat_interleave(self.config.group_size)

    def collect(self, sample):
        """Dynamic sampling (DAPO): keep only informative groups, sample again until there are
        as many as one rollout has, at most ``max_resample`` extra rounds; ``generated``
        counts every completion sampled, kept or not (the cost)."""
        if not self.config.dynamic_sampling:
            return super().collect(sample)
        G, parts, kept, generated, have = self.config.group_size, [], [], 0, 0
        for _ in range(self.config.max_resample + 1):
            ro, scores, problems = sample()
            generated += ro.batch_size
            idx = self.informative_groups(scores.sum(dim=1)).nonzero().squeeze(1)
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
