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

import inspect
import math
from dataclasses import asdict

import torch

from .. import functional


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
    check_accumulation(config)


def check_accumulation(config) -> None:
    """``gradient_accumulation_steps`` (k > 1) with an entropy bonus only where the bonus's tokens are the
    loss's (``loss_type="token_mean"``, no ``mask_truncated_completions``): each micro-batch is weighed by
    its share of the loss's normaliser (`micro_batch_weights`), which is then the bonus's share too."""
    k = getattr(config, "gradient_accumulation_steps", 1)
    if k > 1 and getattr(config, "entropy_coef", 0) > 0:
        if config.loss_type != "token_mean" or getattr(config, "mask_truncated_completions", False):
            raise ValueError(
                f"{type(config).__name__}.gradient_accumulation_steps={k} with entropy_coef > 0 needs "
                "loss_type='token_mean' without mask_truncated_completions (the bonus is a mean over the loss's tokens)"
            )


def micro_batch_weights(mask: torch.Tensor, parts, loss_type: str) -> torch.Tensor:
    """``[k]`` the weight w_j of each micro-batch ``parts[j]`` (row indices into ``mask``, ``[B, T]`` the loss's
    mask) in one optimizer step over all of them, so that the accumulated loss is the one-batch loss:

        sum_j w_j * agg(L over micro-batch j) = agg(L over all rows)
        token_mean:              w_j = tokens_j / sum_j tokens_j   (the unit a token mean divides by)
        sequence_mean, constant: w_j = rows_j / sum_j rows_j

    Not 1/k: a token mean per micro-batch averaged with 1/k weighs each token by 1/(k tokens_j), more in a
    micro-batch of short completions (the normalisation bug of gradient accumulation). A step without tokens
    gets weights 0 (its loss is 0 either way)."""
    if loss_type == "token_mean":
        n = torch.stack([mask[p].sum() for p in parts]).to(torch.float64)
    else:
        n = torch.tensor([float(len(p)) for p in parts], dtype=torch.float64)
    return n / n.sum().clamp(min=1)


BOOL = dict(choices={True, False})  # the rule of a yes/no field


def adamw(params, lr: float, betas=(0.9, 0.999)) -> torch.optim.AdamW:
    """AdamW without weight decay (the policy's and the critic's optimizer), its update in one fused
    kernel for all the parameters where this torch has one for their device (torch >= 2.4 on a CPU:
    the same update to float rounding, a few operations a step instead of ten per parameter), else
    the per-parameter loop batched (``foreach``, the same numbers as the plain loop)."""
    params, betas = list(params), tuple(betas)
    try:
        return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=0.0, fused=True)
    except (RuntimeError, ValueError):  # no fused kernel for these parameters' device or dtype
        return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=0.0, foreach=True)


def check_replacements(functions: dict, where: str) -> dict:
    """``functions`` (name -> replacement of that function of `grpo_edu.functional`), checked: each
    name is the core's, each replacement callable and able to take every parameter of the original
    by name (the library calls them with their full signature). A ``ValueError`` naming ``where``
    and the first fault, before any work."""
    if not isinstance(functions, dict):
        raise ValueError(f"{where}: functions must be a dict of name -> function, got {type(functions).__name__}")
    unknown = [name for name in functions if name not in functional.__all__]
    if unknown:
        raise ValueError(f"{where}: {unknown} are not functions of grpo_edu.functional {functional.__all__}")
    for name, fn in functions.items():
        if not callable(fn):
            raise ValueError(f"{where}: {name} must be callable, got {type(fn).__name__}")
        original = inspect.signature(getattr(functional, name))
        missing = _missing_parameters(original, fn)
        if missing:
            raise ValueError(
                f"{where}: your {name} has no parameter {', '.join(missing)}; the library calls it as {name}{original}"
            )
    return dict(functions)


def _missing_parameters(original: inspect.Signature, replacement) -> list[str]:
    """The parameters of ``original`` that ``replacement`` cannot take by name."""
    try:
        params = inspect.signature(replacement).parameters
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return []
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return []
    takes = {n for n, p in params.items() if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    return [n for n in original.parameters if n not in takes]


class Functions:
    """The functions an algorithm calls, ``self.fn``: each name given to it is the replacement, every
    other name `grpo_edu.functional`'s, looked up when it is called."""

    def __init__(self, replacements: dict):
        self.__dict__.update(replacements)

    def __getattr__(self, name):  # a name not replaced: the core's
        return getattr(functional, name)

    def __repr__(self) -> str:
        return f"Functions(replacing {sorted(self.__dict__)})"


class Algorithm:
    """The wiring every rung shares; a rung writes ``prepare(rollout, scores) -> Batch`` and
    ``loss(batch, idx) -> (loss, stats)`` (and ``make_critic`` if it learns one), each calling the
    functional core through ``self.fn``.

    ``functions`` (name -> function) replaces functions of `grpo_edu.functional` for this algorithm
    only, e.g. ``GRPO(functions={"group_advantages": mine})``: ``self.fn`` is then a namespace where
    those names are yours and every other name is the core's; without it ``self.fn`` is
    `grpo_edu.functional` itself. The replacements travel with the algorithm (the loop's update
    logs through it too); nothing else in the process sees them."""

    name = "algorithm"
    Config = None

    def __init__(self, config=None, functions: dict | None = None, **overrides):
        if config is None:
            config = self.Config(**overrides)
        elif overrides:
            config = type(config)(**{**asdict(config), **overrides})
        if not isinstance(config, self.Config):
            raise ValueError(f"{type(self).__name__} needs a {self.Config.__name__}, got {type(config).__name__}")
        self.config = config
        self.functions = check_replacements(functions or {}, type(self).__name__)
        self.fn = Functions(self.functions) if self.functions else functional
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
        self.optimizer = adamw(policy.parameters(), cfg.lr, cfg.adam_betas)
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

    def micro_batches(self, batch, idx: torch.Tensor) -> list:
        """One optimizer step's rows ``idx`` as ``gradient_accumulation_steps`` micro-batches (in order, sizes
        differing by at most one) with their weights: ``[(rows_j, w_j)]``, `micro_batch_weights` over the
        loss's mask, so that the step's gradient is the one-batch gradient of ``loss(batch, idx)``."""
        k = getattr(self.config, "gradient_accumulation_steps", 1)
        if k == 1:
            return [(idx, 1.0)]
        parts = list(torch.tensor_split(idx, k))
        w = micro_batch_weights(batch.mask, parts, getattr(self.config, "loss_type", "token_mean"))
        return list(zip(parts, w.tolist()))
