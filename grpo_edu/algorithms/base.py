"""What the four rungs share that is not the algorithm: the wiring (policy, frozen reference,
optimizer, critic) and the range check each config calls with its own rules.

Each rung's own file holds the rung whole, written one way: its flat config (every field
described in the string below it, its allowed range in ``__post_init__`` beside the fields), its
``prepare`` (the advantage, building one `grpo_edu.rollout.Batch`) and its ``loss``, both calls
into rollout.py (log-probs, masks) and functional.py (the equations), the loss ending in
`grpo_edu.functional.regularized_loss` (aggregate, entropy bonus, stats). The update that calls
them, epochs x minibatches of ``loss.backward(); clip; step``, is the one loop in ``grpo_edu/train.py``.
"""

from __future__ import annotations

import math
from dataclasses import asdict

import torch


def check_range(obj, name, lo=None, hi=None, lo_open=False, choices=None, optional=False):
    """Raise ``ValueError`` naming ``type(obj).name`` when its value is out of range."""
    v = getattr(obj, name)
    where = f"{type(obj).__name__}.{name}"
    if optional and v is None:
        return
    if choices is not None:
        if v not in choices:
            raise ValueError(f"{where} must be one of {sorted(map(str, choices))}, got {v!r}")
        return
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        raise ValueError(f"{where} must be a number, got {v!r}")
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise ValueError(f"{where} must be {'>' if lo_open else '>='} {lo}, got {v}")
    if hi is not None and v > hi:
        raise ValueError(f"{where} must be <= {hi}, got {v}")


def validate(config, **rules) -> None:
    """Check each field of ``config`` named in ``rules`` (``field=dict(lo=, hi=, lo_open=,
    choices=, optional=)``, see `check_range`), in order, then ``adam_betas``: a pair in [0, 1)."""
    for name, rule in rules.items():
        check_range(config, name, **rule)
    betas = config.adam_betas
    if not (
        isinstance(betas, (tuple, list))
        and len(betas) == 2
        and all(isinstance(x, (int, float)) and 0 <= x < 1 for x in betas)
    ):
        raise ValueError(f"{type(config).__name__}.adam_betas must be a pair of numbers in [0, 1), got {betas!r}")


BOOL = dict(choices={True, False})  # the rule of a yes/no field


class Algorithm:
    """The wiring every rung shares; a rung writes ``prepare(rollout, scores) -> Batch`` and
    ``loss(batch, idx) -> (loss, stats)`` (and ``make_critic`` if it learns one)."""

    name = "algorithm"
    Config = None

    def __init__(self, config=None, **overrides):
        if config is None:
            config = self.Config(**overrides)
        elif overrides:
            config = type(config)(**{**asdict(config), **overrides})
        if not isinstance(config, self.Config):
            raise ValueError(f"{type(self).__name__} needs a {self.Config.__name__}, got {type(config).__name__}")
        self.config = config
        self.policy = self.reference = self.critic = self.optimizer = self.scheduler = None

    def setup(self, policy, reference=None, generator: torch.Generator | None = None):
        """Attach the policy (trained), the frozen reference, the optimizer and the critic."""
        self.policy, self.reference = policy, reference
        for p in policy.parameters():
            p.requires_grad_(True)
        if reference is not None:
            reference.eval()
            for p in reference.parameters():
                p.requires_grad_(False)
        cfg = self.config
        self.optimizer = torch.optim.AdamW(
            policy.parameters(), lr=cfg.lr, betas=tuple(cfg.adam_betas), weight_decay=0.0
        )
        w = cfg.warmup_steps  # linear warmup of the learning rate (no scheduler without one)
        self.scheduler = (
            torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda u: min(1.0, (u + 1) / w)) if w else None
        )
        self.generator = generator  # the minibatch shuffle
        self.critic = self.make_critic(policy)
        return self

    def sampling_policy(self):
        """The model that samples the rollouts: the policy itself (GRPO's ``sampler_dtype`` overrides)."""
        return self.policy

    def collect(self, sample):
        """One rollout for the update from ``sample()`` -> ``(rollout, scores, problems)``: here
        ``sample()`` once (GRPO's ``dynamic_sampling`` overrides). Returns ``(rollout, scores,
        problems, generated)``, ``generated`` counting every completion sampled."""
        rollout, scores, problems = sample()
        return rollout, scores, problems, rollout.batch_size

    def make_critic(self, policy):
        """The critic (a `Critic`) of algorithms that learn one; None for the others."""
        return None

    def prepare(self, rollout, scores: torch.Tensor):
        """The `Batch` of the update: advantages (and whatever the loss reads), without grad."""
        raise NotImplementedError

    def loss(self, batch, idx: torch.Tensor):
        """``(scalar loss, stats dict)`` on the rows ``idx`` of the batch (with grad)."""
        raise NotImplementedError
