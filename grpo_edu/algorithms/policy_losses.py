"""The objective GRPO trains with, per token: one table, `POLICY_LOSSES` (``GRPOConfig.policy_loss``).

Each row names a function of the functional core with the signature ``(logp, old_logp, advantages,
eps_low=, eps_high=, mask=) -> (per-token loss [b, T], stats)``, the aggregation its definition
includes (None: ``loss_type``'s), the clip range GRPO calls it with and its other keyword arguments
(``knobs``). PPO's clip is the ladder's; GSPO's sequence ratio and CISPO's clipped weight are the
objectives after DAPO; Clip-Cov and KL-Cov (Cui et al. 2025, `grpo_edu.functional.covariance`) change
PPO's objective on the few tokens of largest covariance of log pi and the advantage. A new objective is
a function of the core (`grpo_edu.functional.objectives`) and a row here (and, if TRL has it, a row
of `grpo_edu.hf.names.TRL_LOSS_TYPES`).
"""

from __future__ import annotations

import inspect
from typing import Callable, NamedTuple

from .. import functional
from .base import check_range


class PolicyLoss(NamedTuple):  # a row of POLICY_LOSSES: how GRPO calls one objective of the functional core
    function: str  # its per-token loss, (logp, old_logp, advantages, eps_low=, eps_high=, mask=) -> (loss, stats)
    aggregation: str | None  # the aggregation its definition includes (loss_type must be it); None: loss_type's
    clip: Callable  # config -> the (eps_low, eps_high) it is called with
    knobs: Callable = lambda c, algorithm: {}  # (config, the algorithm) -> its other keyword arguments


def _default(function: str, parameter: str):  # a default of the functional core, written there once
    return inspect.signature(getattr(functional, function)).parameters[parameter].default


# fmt: off
POLICY_LOSSES = {  # policy_loss -> how GRPO calls the objective per token
    "clip": PolicyLoss("clipped_surrogate_loss", None, lambda c: (c.eps_low, c.eps_high)),  # PPO's, GRPO's, DAPO's
    "gspo": PolicyLoss("gspo_loss", None, lambda c: (c.eps_low, c.eps_high)),  # one ratio per completion, clipped
    "cispo": PolicyLoss("cispo_loss", "token_mean", lambda c: (None, _default("cispo_loss", "eps_high") if c.eps_high is None else c.eps_high)),
    # Cui et al. 2025 (verl loss_mode): the tokens of largest Cov(log pi, A) lose their gradient | get |log rho|
    "clip_cov": PolicyLoss("clip_cov_loss", None, lambda c: (c.eps_low, c.eps_high), lambda c, a: {
        "clip_cov_ratio": c.clip_cov_ratio, "clip_cov_lb": c.clip_cov_lb, "clip_cov_ub": c.clip_cov_ub,
        "generator": a.generator}),  # the draw among the eligible tokens: the run's own generator
    "kl_cov": PolicyLoss("kl_cov_loss", None, lambda c: (None, None), lambda c, a: {  # no ratio clip (verl's)
        "kl_cov_ratio": c.kl_cov_ratio, "ppo_kl_coef": c.ppo_kl_coef}),
}
# fmt: on

UNIT = dict(lo=0, lo_open=True, hi=1)  # the rule of a fraction of the tokens: (0, 1]


def check_cov_knobs(config, **rules) -> None:
    """Clip-Cov's and KL-Cov's knobs (``rules``: field -> `check_range`'s rule), then clip_cov_lb < clip_cov_ub."""
    for name, rule in rules.items():
        check_range(config, name, **rule)
    if not config.clip_cov_lb < config.clip_cov_ub:
        where = type(config).__name__
        raise ValueError(
            f"{where}.clip_cov_lb must be < clip_cov_ub, got {config.clip_cov_lb} and {config.clip_cov_ub}"
        )


def logged_covariance(Fn, old_logp, advantages, mask) -> float:
    """Cov(log pi_old, A) over the tokens of ``mask`` (`Fn.token_covariance`), the stat GRPO logs every step as
    ``cov_logp_adv``: minus it predicts the sign of the step's entropy change (Cui et al. 2025); NaN without tokens."""
    return float(Fn.token_covariance(old_logp, advantages, mask)) if bool(mask.any()) else float("nan")
