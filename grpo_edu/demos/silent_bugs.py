"""Silent bugs: the GRPO mistakes practitioners report, each injected into the library's own loop.

Most GRPO runs that fail do not crash: they learn a little, or not at all, and the logs look
plausible. Each `Bug` below is one such mistake, of the kind reported again and again on the public
trackers (TRL, verl, OpenRLHF, open-r1), injected WITHOUT a second training loop, into the one
GRPO object the run trains (`make_bugged`): functions of the functional core it calls in place of
the library's (``make_algorithm("grpo", functions=...)``), a config override, an attribute of each
rollout as its trainer reads it, or a task override. `run_bugged` trains that GRPO with
`grpo_edu.train`; `signatures` runs the healthy run and each bugged run from the same reference and
seeds, for notebook 11's table. Each bug's signature is stated twice: in words (``Bug.signature``, what
homework 5's grader shows) and as rules on numbers read from a run (`SIGNATURES`: `Signature`), which
notebook 11, the course's checks and the tests read, and which hold on homework 5's graded runs (tested).
Nothing outside the bugged algorithm (and the task copy) changes.

    from grpo_edu.demos.silent_bugs import BUGS, BUG_NAMES, make_bugged, run_bugged
    preset = get_preset("cpu", world="spread")                  # prompts that differ, as in LLM training
    reference = reference_policy(preset)
    h = run_bugged("ratio_always_one", reference, preset)      # a History, config["bug"] names it
    h.series("ratio_std")                                       # 0.0 at every step: nothing clipped

The default budget is 30 steps of 256 completions (a few seconds a run on one quiet thread; notebook 11
prints its time). The healthy run's held-out accuracy rises from the "spread" world's reference at some
seeds and not within the run at others (notebook 11 and homework 5's runs show both).

The loss's own stats carry what several bugs move (`grpo_edu.functional.clipped_surrogate_loss`):
``ratio_std`` (the spread of rho = pi_theta / pi_old over the loss's tokens), ``advantage_abs_max``
and ``advantage_abs_mean`` (of the advantages the loss receives), averaged over the step's
optimizer updates; a bug that replaces the loss wraps the library's, so they show what it saw.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import functional as Fn
from ..algorithms import GRPO
from ..progress import progress_bar
from ..train import History, train

__all__ = ["BUGS", "BUG_NAMES", "Bug", "METRICS", "SIGNATURES", "Signature", "make_bugged", "run_bugged", "signatures",
           "summary"]  # fmt: skip

TRAINER_TEMPERATURE = 0.7  # temperature_mismatch: the trainer's log-probs at 0.7, the sampler at the config's 1.0
SHORT_LIMIT = 2  # answers_cut: tokens a completion may have (a 2-digit sum and <eos> need 3)
COLLAPSE_LR = 1e-2  # lr_past_collapse: the learning rate (the default is 3e-4)
TINY_EPS = 1e-9  # std_floor_too_small: adv_eps, with the KL in the reward (the default eps is 1e-4)


@dataclass(frozen=True)
class Bug:
    """One silent bug: what it is, where such reports come from, what it moves, how it is injected."""

    name: str
    description: str
    """One line: the mistake."""
    report: str
    """The kind of public report it comes from (themes of TRL/verl/OpenRLHF/open-r1 issues)."""
    signature: str
    """The metric it moves, in words (measured in tests/test_silent_bugs.py and notebook 11)."""
    injection: str
    """How run_bugged injects it, in words."""
    functions: dict = field(default_factory=dict)
    """functional name -> factory(inner) -> the replacement the bugged GRPO calls; ``inner`` is the library's."""
    config: dict = field(default_factory=dict)
    """GRPOConfig overrides."""
    rollout: dict = field(default_factory=dict)
    """Attributes of each training rollout as the trainer reads it (the sampler sampled with its own)."""
    task: dict = field(default_factory=dict)
    """Attributes of the task overridden on a copy of it (e.g. ``max_answer_length``)."""


# ------------------------------------------- the bugs, as replacements of the library's functions


def _misaligned_groups(inner):
    """Group statistics over rows j, j+n, j+2n, ... (n = B / G): as if the G samples of a prompt were
    interleaved (``repeat``) while they are consecutive (``repeat_interleave``). Each completion keeps
    its own reward; its baseline and std come from G different prompts."""

    def group_advantages(rewards, group_size, scale="group", eps=1e-6, unbiased=False, leave_one_out=False):
        B = rewards.shape[0]
        perm = torch.arange(B, device=rewards.device).view(group_size, B // group_size).t().reshape(-1)
        adv, stats = inner(rewards[perm], group_size, scale, eps, unbiased, leave_one_out)
        out = torch.empty_like(adv)
        out[perm] = adv
        return out, stats

    return group_advantages


def _old_is_current(inner):
    """log pi_old taken from the policy being trained (detached): rho = 1 at every update."""

    def clipped_surrogate_loss(logp, old_logp, advantages, eps_low=0.2, eps_high=None, mask=None):
        return inner(logp, logp.detach(), advantages, eps_low, eps_high, mask)

    return clipped_surrogate_loss


def _reference_is_policy(inner):
    """log pi_ref taken from the policy itself (a reference that moves with it): every KL is 0."""

    def kl_estimate(logp, ref_logp, kind="k3"):
        return inner(logp, logp.detach(), kind)

    return kl_estimate


def _kl_sign_flipped(inner):
    """The per-token KL with its sign flipped: the penalty pays for drifting, and the logged KL
    (computed by the same function, as TRL logs the tensor it adds to the loss) is negative."""

    def kl_estimate(logp, ref_logp, kind="k3"):
        return -inner(logp, ref_logp, kind)

    return kl_estimate


def _k3_naive(inner):
    """k3 = exp(-x) - 1 + x written out in float32 (x = log pi - log pi_ref): where |x| is near
    float32's resolution, exp(-x) - 1 cancels to a multiple of 2^-24 and k3 can come out negative.
    (The library computes expm1(-x) + x.)"""

    def kl_estimate(logp, ref_logp, kind="k3"):
        if kind != "k3":
            return inner(logp, ref_logp, kind)
        x = (logp - ref_logp).float()
        return torch.exp(-x) - 1.0 + x

    return kl_estimate


def _loss_over_padding(inner):
    """The loss (and the logged entropy) aggregated over every position, padding after <eos> too."""

    def regularized_loss(per_token_loss, mask, mode, max_length, logits, entropy_mask, entropy_coef=0.0):
        ones = torch.ones_like(mask)
        return inner(per_token_loss, ones, mode, max_length, logits, ones, entropy_coef)

    return regularized_loss


BUGS: dict[str, Bug] = {
    b.name: b
    for b in (
        Bug(
            "group_misaligned",
            "the group statistics taken over rows that are not one prompt's samples (repeat vs repeat_interleave)",
            "TRL / OpenRLHF / verl threads on the order of generations: samples of a prompt assumed consecutive "
            "when they are interleaved, so each 'group' mixes prompts",
            "frac_reward_zero_std falls where prompts differ (mixed groups tie less often than a prompt's own: its "
            "mean below 0.3 in the spread world); expected to move little where every prompt is about as hard (the "
            "default world: not measured here)",
            "group_advantages replaced: rows j, j+n, j+2n, ... form a group (n = B / G)",
            functions={"group_advantages": _misaligned_groups},
        ),
        Bug(
            "ratio_always_one",
            "log pi_old taken from the policy being trained, so rho = 1 and nothing is ever clipped",
            "TRL / open-r1 questions 'clip_ratio is always 0' (num_iterations=1 makes it true by design; "
            "with several updates per batch it is a bug: old log-probs recomputed after the update)",
            "clip_ratio exactly 0 and the ratio's spread (ratio_std) exactly 0 at every step (with several updates "
            "per batch, in a trainer whose sampler's log-probs differ from the trainer's by rounding); the held-out "
            "accuracy ends more than 0.07 below the healthy run's from the same reference and seed",
            "clipped_surrogate_loss replaced: old_logp replaced by logp.detach()",
            functions={"clipped_surrogate_loss": _old_is_current},
        ),
        Bug(
            "reference_is_policy",
            "the reference model updated with the policy (or the same module), so the KL is always 0",
            "TRL / verl / OpenRLHF reports of 'kl is 0 for the whole run' (a ref model not loaded, or sharing "
            "the policy's weights)",
            "kl exactly 0 at every step, while the policy moves (clip_ratio and ratio_std above 0); no KL brake",
            "kl_estimate replaced: ref_logp replaced by logp.detach()",
            functions={"kl_estimate": _reference_is_policy},
        ),
        Bug(
            "kl_sign_flipped",
            "the KL term with its sign flipped: a bonus for drifting from the reference instead of a penalty",
            "TRL / verl / open-r1 threads on 'negative KL' and on the sign of the KL term in the loss or reward",
            "the logged kl is negative at every step after the first, and its size grows past the healthy run's "
            "(its largest |kl| over twice the healthy run's largest kl); the accuracy falls to about 0",
            "kl_estimate replaced: returns minus the estimate (in the loss and in the log)",
            functions={"kl_estimate": _kl_sign_flipped},
        ),
        Bug(
            "k3_naive_float32",
            "k3 = exp(-x) - 1 + x computed naively in float32 (the form TRL writes), where the log-ratio x is tiny "
            "(cancellation): an artefact of the logged number near 0 more than a training bug",
            "verl / TRL discussions of the k3 estimator's numerics (low_var_kl clamps, float32 log-ratios)",
            "the logged kl at the first step (policy = reference): of order 1e-9, over 100 times the healthy run's "
            "(of order 1e-13); after it the runs differ from the healthy ones as two runs that differ by float "
            "rounding do",
            "kl_estimate replaced: k3 written as exp(-x) - 1 + x instead of expm1(-x) + x",
            functions={"kl_estimate": _k3_naive},
        ),
        Bug(
            "std_floor_too_small",
            "a std floor (adv_eps) far below the spread of nearly tied groups, with the KL inside the reward",
            "TRL / verl threads on scale_rewards and on groups whose rewards differ only by tiny amounts "
            "(KL in the reward, float noise): the z-score blows noise up to full-size advantages",
            "advantage_abs_mean rises (tied groups get |A| ~ 1, not 0: its mean above 0.6), frac_reward_zero_std "
            "falls (its mean below 0.3, as group_misaligned's), and advantage_abs_max reaches sqrt(G - 1) = 2.6458 "
            "(above 2.6453; the default floor adv_eps = 1e-4 keeps a 0/1 group's largest |A| at 2.6450)",
            f"config kl_placement='reward', adv_eps={TINY_EPS}",
            config={"kl_placement": "reward", "adv_eps": TINY_EPS},
        ),
        Bug(
            "loss_over_padding",
            "the loss averaged over padding after <eos> as well as the completion's tokens",
            "TRL / OpenRLHF / open-r1 reports of completion masks that do not stop at <eos> (pad = eos "
            "confusions, masks built from attention masks)",
            "the logged entropy drops (it averages the padding's positions too) and so does grad_norm; "
            "with Adam the updates barely change",
            "regularized_loss replaced: mask and entropy_mask replaced by ones",
            functions={"regularized_loss": _loss_over_padding},
        ),
        Bug(
            "answers_cut",
            "a completion length limit so short that almost every answer is cut before its end (a two-digit sum and "
            "<eos> need 3 tokens; only one-digit sums fit)",
            "TRL / open-r1 reports of 'reward always 0' with max_completion_length too small for the format",
            "reward near 0 (its mean below 0.02), truncated_frac near 1 from the first step (its mean above 0.9) and "
            "frac_reward_zero_std near 1; grad_norm below half the healthy run's, and 0 at a first step whose groups "
            "all tie (at the reference only the advantages move the policy); the accuracy stays near 0",
            f"task override max_answer_length={SHORT_LIMIT}",
            task={"max_answer_length": SHORT_LIMIT},
        ),
        Bug(
            "temperature_mismatch",
            "the sampler at one temperature and the trainer's log-probs at another",
            "TRL / verl / OpenRLHF reports of logits not divided by the sampling temperature in the trainer "
            "(vLLM samples at T, the loss recomputes at 1)",
            "kl > 0 at the first step (policy = reference: above 1e-3, where the healthy run's is rounding); the "
            "first step's grad_norm differs from the healthy run's too, larger on some seeds and smaller on others",
            f"the trainer reads each rollout as sampled at temperature {TRAINER_TEMPERATURE} (its log-probs and "
            "the reference's); the sampler sampled at 1.0",
            rollout={"temperature": TRAINER_TEMPERATURE},
        ),
        Bug(
            "lr_past_collapse",
            "a learning rate far above the default (where the run breaks; the boundary itself is not measured here)",
            "TRL / open-r1 / verl threads on reward crashes and garbled outputs after the learning rate was raised "
            "(here the entropy rises: not the entropy collapse of other threads)",
            "kl jumps to nats per token (its largest above 1.5) and the entropy rises from the first step (to over 1.5 "
            "times the healthy run's); the reward and the accuracy fall to about 0",
            f"config lr={COLLAPSE_LR}",
            config={"lr": COLLAPSE_LR},
        ),
    )
}

BUG_NAMES = ("healthy", *BUGS)


# ------------------------------------------------------------ the signatures as rules on numbers


@dataclass(frozen=True)
class Signature:
    """One mark of a bug, as a rule on one number read from its run: ``value(run, healthy) op bound``, where
    ``healthy`` is the healthy run from the same reference and seed (a relative mark reads it, an absolute one
    does not). The bounds are set for `run_bugged`'s budget in the spread world; `Bug.signature` says the same
    in words."""

    quantity: str
    value: Callable
    op: str
    bound: float

    def of(self, run: History, healthy: History) -> float:
        return float(self.value(run, healthy))

    def shows(self, run: History, healthy: History) -> bool:
        v = self.of(run, healthy)
        return bool(v > self.bound) if self.op == ">" else bool(v < self.bound)

    def rule(self) -> str:
        return f"{self.quantity} {self.op} {self.bound:g}"


def _mean(h, key):
    return float(np.mean(h.series(key)))


def _max(h, key):
    return float(np.max(h.series(key)))


def _first(h, key):
    return float(h.series(key)[0])


def _log10_ratio(a, b):  # -inf for a = 0 (a kl exactly 0), without numpy's divide-by-zero warning
    with np.errstate(divide="ignore"):
        return float(np.log10(a / b))


ENDS_NEAR_ZERO = Signature("final held-out accuracy", lambda h, ok: h.final_accuracy, "<", 0.05)
FEW_TIES = Signature("mean frac_reward_zero_std", lambda h, ok: _mean(h, "frac_reward_zero_std"), "<", 0.3)
SIGNATURES: dict[str, tuple[Signature, ...]] = {
    "group_misaligned": (FEW_TIES,),
    "ratio_always_one": (
        Signature("largest clip_ratio or ratio_std of any step", lambda h, ok: max(_max(h, "clip_ratio"), _max(h, "ratio_std")), "<", 1e-12),
        Signature("final held-out accuracy below the healthy run's", lambda h, ok: ok.final_accuracy - h.final_accuracy, ">", 0.07),
    ),
    "reference_is_policy": (
        Signature("largest |kl| of any step", lambda h, ok: float(np.max(np.abs(h.series("kl")))), "<", 1e-30),
    ),
    "kl_sign_flipped": (
        Signature("largest kl after the first step", lambda h, ok: float(np.max(h.series("kl")[1:])), "<", 0.0),
        Signature("largest |kl| over the healthy run's largest kl", lambda h, ok: float(np.max(np.abs(h.series("kl")))) / _max(ok, "kl"), ">", 2.0),
        ENDS_NEAR_ZERO,
    ),
    "k3_naive_float32": (
        Signature("log10 of |kl| at step 1 over the healthy run's", lambda h, ok: _log10_ratio(abs(_first(h, "kl")), abs(_first(ok, "kl"))), ">", 2.0),
    ),
    "std_floor_too_small": (
        Signature("mean advantage_abs_mean", lambda h, ok: _mean(h, "advantage_abs_mean"), ">", 0.6),
        FEW_TIES,
        Signature("largest advantage_abs_max", lambda h, ok: _max(h, "advantage_abs_max"), ">", 2.6453),
    ),
    "loss_over_padding": (
        Signature("entropy at step 1 below the healthy run's", lambda h, ok: _first(ok, "entropy") - _first(h, "entropy"), ">", 0.015),
    ),
    "answers_cut": (
        Signature("mean truncated_frac", lambda h, ok: _mean(h, "truncated_frac"), ">", 0.9),
        Signature("mean reward", lambda h, ok: _mean(h, "reward"), "<", 0.02),
        Signature("mean grad_norm over the healthy run's", lambda h, ok: _mean(h, "grad_norm") / _mean(ok, "grad_norm"), "<", 0.5),
        ENDS_NEAR_ZERO,
    ),
    "temperature_mismatch": (
        Signature("kl at step 1", lambda h, ok: _first(h, "kl"), ">", 1e-3),
    ),
    "lr_past_collapse": (
        Signature("largest kl of any step", lambda h, ok: _max(h, "kl"), ">", 1.5),
        Signature("entropy at step 1 over the healthy run's", lambda h, ok: _first(h, "entropy") / _first(ok, "entropy"), ">", 1.5),
        ENDS_NEAR_ZERO,
    ),
}  # fmt: skip

METRICS = (  # what signatures() records of each run, in the order of the figure
    "reward",
    "accuracy",
    "kl",
    "entropy",
    "clip_ratio",
    "ratio_std",
    "frac_reward_zero_std",
    "advantage_abs_mean",
    "grad_norm",
    "completion_length",
)


def _bug(bug) -> Bug | None:
    if bug is None or bug == "healthy":
        return None
    if isinstance(bug, Bug):
        return bug
    if not isinstance(bug, str) or bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose one of {list(BUG_NAMES)}")
    return BUGS[bug]


# ------------------------------------------------------------ the bugged algorithm


class BuggedGRPO(GRPO):
    """GRPO whose trainer reads each rollout it collects with ``rollout_attributes`` changed."""

    def __init__(self, config=None, functions=None, rollout_attributes=None, **overrides):
        super().__init__(config, functions, **overrides)
        self.rollout_attributes = dict(rollout_attributes or {})

    def collect(self, sample):
        rollout, scores, problems, generated = super().collect(sample)
        return dataclasses.replace(rollout, **self.rollout_attributes), scores, problems, generated


def make_bugged(bug, **config) -> GRPO:
    """The GRPO a run trains with ``bug`` in (``"healthy"`` or None: a plain one): GRPOConfig overrides
    (``config`` first, the bug's on top), the functions it replaces (each wrapping the library's) and
    the rollout attributes its trainer reads. For a look at one batch, e.g.
    ``make_bugged("group_misaligned").setup(policy, reference).prepare(rollout, scores)``."""
    b = _bug(bug)
    config = {**config, **(b.config if b else {})}
    functions = {name: make(getattr(Fn, name)) for name, make in b.functions.items()} if b else {}
    if b is not None and b.rollout:
        return BuggedGRPO(functions=functions, rollout_attributes=b.rollout, **config)
    return GRPO(functions=functions, **config)


def _task_for(bug: Bug | None, task):
    if bug is None or not bug.task:
        return task
    bugged = copy.copy(task)
    for k, v in bug.task.items():
        if not hasattr(task, k):
            raise ValueError(f"bug {bug.name!r} overrides task.{k}, which {type(task).__name__} does not have")
        setattr(bugged, k, v)
    return bugged


def run_bugged(
    bug,
    reference,
    preset,
    task=None,
    seed: int = 0,
    steps: int = 30,
    sequences_per_step: int = 256,
    progress: bool = False,
    eval_every: int = 10,
    **config,
) -> History:
    """GRPO from ``reference`` with one silent bug injected (``"healthy"`` or None: none), a `History`.

    The library's own ``grpo_edu.train`` runs `make_bugged`'s algorithm (``config`` goes to it) on
    ``task`` (default ``make_task(preset)``), or on a copy of it with the bug's attributes. The
    History's config records ``"bug"``. ``seed`` is the RL seed (a caller adds the seed shift).
    """
    b = _bug(bug)
    for name, v in (("steps", steps), ("sequences_per_step", sequences_per_step), ("eval_every", eval_every)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if task is None:
        from ..warmstart.presets import make_task

        task = make_task(preset)
    name = b.name if b else "healthy"
    h = train(
        make_bugged(b, **config),
        task=_task_for(b, task),
        reference=reference,
        preset=preset,
        steps=steps,
        sequences_per_step=sequences_per_step,
        seed=seed,
        eval_every=eval_every,
        progress=progress,
        name=name,
    )
    h.config["bug"] = name
    return h


# ---------------------------------------------------------------- the signature table


def summary(h: History, first: int = 3) -> dict:
    """The numbers of one run the table compares: for each of `METRICS`, its mean over the first
    ``first`` steps and over the last third of the run; accuracy as the held-out greedy accuracy at
    the start and at the end."""
    n = len(h.steps)
    last = max(1, n // 3)
    out = {}
    for k in METRICS:
        if k == "accuracy":
            out[k] = {"first": h.initial_accuracy, "last": h.final_accuracy}
            continue
        s = h.series(k)
        out[k] = {"first": float(np.nanmean(s[:first])) if n else math.nan,
                  "last": float(np.nanmean(s[-last:])) if n else math.nan}  # fmt: skip
    return out


def signatures(
    reference,
    preset,
    bugs=None,
    seeds=(0,),
    steps: int = 30,
    sequences_per_step: int = 256,
    task=None,
    progress: bool = True,
    **config,
) -> dict:
    """The healthy run and each bugged run, from the same reference and the same ``seeds``.

    Returns ``{name: [History per seed]}`` for "healthy" and each of ``bugs`` (default: all of
    `BUGS`), in `BUG_NAMES` order. ``progress`` shows one bar over all the runs."""
    names = list(BUGS) if bugs is None else [bugs] if isinstance(bugs, str) else list(bugs)
    for n in names:
        _bug(n)
    names = ["healthy", *[n for n in names if n != "healthy"]]
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    if task is None:
        from ..warmstart.presets import make_task

        task = make_task(preset)
    out = {n: [] for n in names}
    bar = progress_bar(total=len(names) * len(seeds), desc="signatures", disable=not progress)
    for n in names:
        for s in seeds:
            out[n].append(run_bugged(n, reference, preset, task=task, seed=s, steps=steps,
                                     sequences_per_step=sequences_per_step, **config))  # fmt: skip
            bar.update(1)
    bar.close()
    return out
