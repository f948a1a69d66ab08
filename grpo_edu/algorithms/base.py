"""What the four rungs share that is not the algorithm: the wiring (policy, frozen reference,
optimizer, critic) and the validation of their configs. The batch they prepare (`Batch`) and the
log-probs they read are rollout.py's (re-exported here).

Each rung's own file holds its config, its ``prepare`` (advantages) and its ``loss``; the
update that calls them, epochs x minibatches of ``loss.backward(); clip; step``, is the
one loop in ``grpo_edu/train.py``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, fields

import torch

from .. import functional as Fn
from ..functional import LOSS_TYPES
from ..rollout import Batch, Rollout, loss_mask, policy_logprobs, reference_logprobs

# The allowed range of every config field that any rung has, in one table: a rung's config
# lists its own fields (flat, no inheritance) and `validate` checks those it has.
RULES = {
    "lr": dict(lo=0, lo_open=True),
    "max_grad_norm": dict(lo=0, lo_open=True),
    "epochs": dict(lo=1),
    "minibatches": dict(lo=1),
    "group_size": dict(lo=1),
    "beta": dict(lo=0),
    "entropy_coef": dict(lo=0),
    "temperature": dict(lo=0, lo_open=True),
    "warmup_steps": dict(lo=0),
    "gamma": dict(lo=0, hi=1),
    "lam": dict(lo=0, hi=1),
    "kl_placement": dict(choices={"reward", "loss", "none"}),
    "kl_estimator": dict(choices={None, "k1", "k2", "k3"}),
    "loss_type": dict(choices=set(LOSS_TYPES)),
    "mask_truncated_completions": dict(choices={True, False}),
    "whiten_advantages": dict(choices={True, False}),
    "critic_lr": dict(lo=0, lo_open=True),
    "critic_init": dict(choices={"policy", "random"}),
    "value_clip": dict(lo=0, lo_open=True, optional=True),
    "eps_low": dict(lo=0, lo_open=True, hi=1),
    "eps_high": dict(lo=0, lo_open=True, optional=True),
    "baseline": dict(choices={"critic", "batch_mean", "running_mean"}),
    "running_mean_decay": dict(lo=0, hi=1),
    "scale_rewards": dict(choices={"group", "batch", "none"}),
    "unbiased_std": dict(choices={True, False}),
    "adv_eps": dict(lo=0),
    "leave_one_out": dict(choices={True, False}),
    "dynamic_sampling": dict(choices={True, False}),
    "max_resample": dict(lo=0),
    "importance_sampling_level": dict(choices={"token", "sequence"}),
    "sampler_dtype": dict(choices={None, "bfloat16", "float16"}),
    "vllm_importance_sampling_correction": dict(choices={True, False}),
    "vllm_importance_sampling_mode": dict(choices=set(Fn.SAMPLER_IS_MODES)),
    "vllm_importance_sampling_clip_max": dict(lo=0, lo_open=True, optional=True),
    "vllm_importance_sampling_clip_min": dict(lo=0, optional=True),
}


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


def validate(config, **own_rules) -> None:
    """Check every field of ``config`` that has a rule (`RULES`, or ``own_rules`` first)."""
    for f in fields(config):
        rule = own_rules.get(f.name, RULES.get(f.name))
        if rule is not None:
            check_range(config, f.name, **rule)
    betas = getattr(config, "adam_betas", (0.9, 0.999))
    if not (
        isinstance(betas, (tuple, list))
        and len(betas) == 2
        and all(isinstance(x, (int, float)) and 0 <= x < 1 for x in betas)
    ):
        raise ValueError(f"{type(config).__name__}.adam_betas must be a pair of numbers in [0, 1), got {betas!r}")


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

    def prepare(self, rollout: Rollout, scores: torch.Tensor) -> Batch:
        raise NotImplementedError

    def loss(self, batch: Batch, idx: torch.Tensor):
        """``(scalar loss, stats dict)`` on the rows ``idx`` of the batch (with grad)."""
        raise NotImplementedError

    # -- small helpers the rungs' prepare and loss call (rollout.py's functions) --------------
    def loss_mask(self, rollout: Rollout) -> torch.Tensor:
        """The completion mask, minus the truncated rows with ``mask_truncated_completions``."""
        return loss_mask(rollout, getattr(self.config, "mask_truncated_completions", False))

    def reference_logprobs(self, rollout: Rollout) -> torch.Tensor | None:
        """``log pi_ref(a_t|s_t)`` [B, T] when the KL penalty is on (it costs a forward), else None."""
        cfg = self.config
        return reference_logprobs(
            self.reference, rollout, getattr(cfg, "beta", 0), getattr(cfg, "kl_placement", "none")
        )

    def policy_logprobs(self, batch: Batch, idx: torch.Tensor):
        """``(log pi_theta(a_t|s_t) [b, T], logits [b, T, V])`` of the rows ``idx``, with grad."""
        return policy_logprobs(self.policy, batch, idx)

    def entropy(self, logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Mean token entropy; with grad only when it is a bonus (``entropy_coef > 0``)."""
        with torch.set_grad_enabled(self.config.entropy_coef > 0 and torch.is_grad_enabled()):
            return Fn.masked_mean(Fn.entropy(logits), mask)
