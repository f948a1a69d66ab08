"""The objective GRPO trains with, per token: one table, `POLICY_LOSSES` (``GRPOConfig.policy_loss``).

Each row names a function of the functional core with the signature ``(logp, old_logp, advantages,
eps_low=, eps_high=, mask=) -> (per-token loss [b, T], stats)``, the aggregation its definition
includes (None: ``loss_type``'s) and the clip range GRPO calls it with. PPO's clip is the ladder's;
GSPO's sequence ratio and CISPO's clipped weight are the objectives after DAPO. A new objective is
a function of the core (`grpo_edu.functional.objectives`) and a row here (and, if TRL has it, a row
of `grpo_edu.hf.names.TRL_LOSS_TYPES`).
"""

from __future__ import annotations

import inspect
from typing import Callable, NamedTuple

from .. import functional


class PolicyLoss(NamedTuple):  # a row of POLICY_LOSSES: how GRPO calls one objective of the functional core
    function: str  # its per-token loss, (logp, old_logp, advantages, eps_low=, eps_high=, mask=) -> (loss, stats)
    aggregation: str | None  # the aggregation its definition includes (loss_type must be it); None: loss_type's
    clip: Callable  # config -> the (eps_low, eps_high) it is called with


def _default(function: str, parameter: str):  # a default of the functional core, written there once
    return inspect.signature(getattr(functional, function)).parameters[parameter].default


# fmt: off
POLICY_LOSSES = {  # policy_loss -> how GRPO calls the objective per token
    "clip": PolicyLoss("clipped_surrogate_loss", None, lambda c: (c.eps_low, c.eps_high)),  # PPO's, GRPO's, DAPO's
    "gspo": PolicyLoss("gspo_loss", None, lambda c: (c.eps_low, c.eps_high)),  # one ratio per completion, clipped
    "cispo": PolicyLoss("cispo_loss", "token_mean", lambda c: (None, _default("cispo_loss", "eps_high") if c.eps_high is None else c.eps_high)),
}
# fmt: on
