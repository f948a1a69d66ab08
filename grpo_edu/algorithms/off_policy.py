"""A sampler k optimizer updates behind the learner (``GRPOConfig.policy_lag``), and how the loss treats
its log-probs (``GRPOConfig.off_policy_correction``): GRPO's main path calls this file only when a knob puts
the sampler apart from the policy (these two, or ``sampler_dtype``, whose steps are sampler.py's): for the
model that samples (`sampler_apart`) and the log-probs its loss takes (`sampler_old_logprobs`).

Real trainers sample with weights a few updates old, because generation and training run side by side
(PipelineRL, AReaL, TRL's ``AsyncGRPOTrainer`` with ``max_staleness``, tinker's ``max_steps_off_policy``).
Here the lag is simulated exactly and deterministically: after every optimizer update the learner's
weights are copied into a ring of ``policy_lag + 1`` copies, and each rollout is sampled from the oldest,
the weights ``policy_lag`` updates before the learner's now (M2PO's "stale-k"; until the learner has
taken k updates, the ring's oldest copy is the weights the run started from). The rollout's log-probs are
then pi_behav's; `CORRECTIONS` says, per correction, which log-probs the objective's ratio is taken
against (pi_behav, or pi_prox: the learner at the start of the step, one forward) and which weight
multiplies each token's loss (`grpo_edu.functional.off_policy`).
"""

from __future__ import annotations

import copy
from collections import deque
from typing import Callable, NamedTuple

import torch

from ..rollout import Rollout, sequence_logprobs
from .sampler import check_sampler_knobs, sampler_copy, trainer_old_logprobs


class Correction(NamedTuple):  # a row of CORRECTIONS: how the loss treats a lagged sampler's log-probs
    proximal: (
        bool  # True: the ratio is pi_theta / pi_prox (the learner's log-probs at the step's start); False: / pi_behav
    )
    weights: (
        Callable | None
    )  # (fn, prox_logp, behav_logp, mask) -> (w [B, T], stats), each paper's bounds; None: no weight


CORRECTIONS = {  # off_policy_correction -> which log-probs the ratio is against, and the weight per token
    # the lag ignored: the loss is built as if the learner had sampled (its own log-probs; no weight)
    "none": Correction(True, None),
    # PPO's clip against the sampler: rho = pi_theta / pi_behav clipped at 1 +- eps (a loop that keeps the rollout's log-probs)
    "ppo_clip": Correction(False, None),
    # AReaL: clip against pi_prox, times w = pi_prox / pi_behav, dropped above the cap 5 (decoupled_weights)
    "decoupled": Correction(True, lambda fn, p, b, m: fn.decoupled_weights(p, b, m)),
    # IcePop: the same weight, kept only inside [alpha, beta] = [0.5, 5] (icepop_weights)
    "icepop": Correction(True, lambda fn, p, b, m: fn.icepop_weights(p, b, m)),
    # M2PO: rho = pi_theta / pi_behav, no eps clip, the tokens of largest (log rho)^2 dropped until M2 <= 0.04 (m2po_objective)
    "m2po": Correction(False, None),
    # truncated IS: clip against pi_prox, times w = min(pi_prox / pi_behav, C), TRL's C = 3 (sampler_importance_weights)
    "tis": Correction(True, lambda fn, p, b, m: fn.sampler_importance_weights(p, b, m, "token_truncate")),
}
"""A new correction is a row here (its weight a function of the core); the bounds are the core functions' defaults."""


def check_off_policy_knobs(config) -> None:
    """The cross-field rules of the sampler knobs (each alone is checked by `validate`), one-line ValueErrors:
    a sampler apart's (`check_sampler_knobs`), then a sampler behind's."""
    check_sampler_knobs(config)
    where, name = type(config).__name__, config.off_policy_correction
    if not isinstance(config.policy_lag, int) or isinstance(config.policy_lag, bool):
        raise ValueError(
            f"{where}.policy_lag must be an integer number of optimizer updates, got {config.policy_lag!r}"
        )
    if config.policy_lag > 0 and config.sampler_dtype is not None:
        raise ValueError(f"{where}.policy_lag > 0 with sampler_dtype={config.sampler_dtype!r}: one sampler apart at a time")  # fmt: skip
    if name == "m2po" and config.policy_loss != "clip":
        raise ValueError(f"{where}.off_policy_correction='m2po' opens the clip of policy_loss='clip', got policy_loss={config.policy_loss!r}")  # fmt: skip


def _snapshot(policy) -> dict:
    return {k: v.detach().clone() for k, v in policy.state_dict().items()}


class LaggedSampler:
    """The policy as it was ``lag`` optimizer updates ago: a ring of ``lag + 1`` copies of its weights,
    one appended after every ``optimizer.step()`` (a step post-hook on the learner's optimizer), and a
    frozen copy of the model loaded with the oldest. ``sampler()`` returns that copy; ``staleness`` is how
    many updates it is behind the learner (``lag`` once the learner has taken ``lag`` updates, fewer before)."""

    def __init__(self, policy: torch.nn.Module, optimizer: torch.optim.Optimizer, lag: int):
        if lag < 1:
            raise ValueError(f"lag must be >= 1 (0: the policy itself samples), got {lag}")
        self.ring = deque([_snapshot(policy)], maxlen=lag + 1)
        self.model, self.optimizer = copy.deepcopy(policy).requires_grad_(False).eval(), optimizer
        self._hook = optimizer.register_step_post_hook(lambda *_: self.ring.append(_snapshot(policy)))

    @property
    def staleness(self) -> int:
        return len(self.ring) - 1

    def sampler(self) -> torch.nn.Module:
        self.model.load_state_dict(self.ring[0])
        return self.model.eval()


def lagged_sampler(algorithm) -> LaggedSampler:
    """The algorithm's `LaggedSampler`, made at its first rollout (its ring starts with the weights the run
    starts from) and again whenever ``setup`` has given it a new optimizer (a new run)."""
    lagged = getattr(algorithm, "_lagged", None)
    if lagged is None or lagged.optimizer is not algorithm.optimizer:
        lagged = algorithm._lagged = LaggedSampler(algorithm.policy, algorithm.optimizer, algorithm.config.policy_lag)
    return lagged


@torch.no_grad()
def lagged_old_logprobs(fn, policy, rollout: Rollout, config, staleness: int = 0):
    """``(old_logp [B, T], weights [B, T] or None, stats)`` of a rollout sampled ``staleness`` updates
    behind: old_logp is pi_prox's (one forward of the learner; with no lag the rollout's own, the same
    policy) or pi_behav's (the rollout's) as `CORRECTIONS` says, and the correction's weight per token
    (``fn``: the algorithm's functions, `grpo_edu.functional` or its replacements)."""
    row = CORRECTIONS[config.off_policy_correction]
    behav = rollout.logprobs
    prox = sequence_logprobs(policy, rollout) if config.policy_lag > 0 else behav
    stats = {"staleness": float(staleness)} if config.policy_lag > 0 else {}
    if row.weights is None:
        return (prox if row.proximal else behav), None, stats
    weights, w_stats = row.weights(fn, prox, behav, rollout.mask)
    keys = ("is_ratio_mean", "is_ratio_max", "is_clipped_frac", "dropped_frac")
    return prox, weights, {**stats, **{f"off_policy_{k}": w_stats.get(k, 0.0) for k in keys}}


def m2po_objective(fn, objective, logp, batch, idx, mask):
    """M2PO's per-token loss ``L_t = -keep_t * rho_t A_t``, rho_t = pi_theta / pi_behav: the objective's
    clip opened (eps = inf: no trust region but the mask) and the tokens of `m2po_mask` kept (its default
    threshold, the paper's 0.04), the mask taken on this minibatch's detached log-ratio. Returns
    ``(loss [b, T], stats)`` on the rows ``idx`` of the `Batch` (its old_logp: pi_behav's)."""
    behav_logp, advantages = batch.old_logp[idx], batch.advantages[idx]
    keep, m2 = fn.m2po_mask(logp.detach() - behav_logp, mask)
    per_token, stats = getattr(fn, objective.function)(
        logp, behav_logp, advantages, eps_low=float("inf"), eps_high=float("inf"), mask=mask
    )
    return per_token * keep, {**stats, **{f"m2po_{k}": v for k, v in m2.items()}}


def sampler_apart(algorithm):
    """GRPO's sampler when it is not the policy: with ``policy_lag`` k the policy's weights k optimizer
    updates ago (`lagged_sampler`), with ``sampler_dtype`` its copy in that dtype (sampler.py)."""
    cfg = algorithm.config
    if cfg.policy_lag > 0:
        return lagged_sampler(algorithm).sampler()
    algorithm._sampler = sampler_copy(algorithm.policy, cfg.sampler_dtype, getattr(algorithm, "_sampler", None))
    return algorithm._sampler


def sampler_old_logprobs(algorithm, rollout: Rollout):
    """``(old_logp [B, T], weights [B, T] or None, stats)`` for GRPO's loss when the policy did not sample
    the rollout as it is now: with ``sampler_dtype`` the trainer's log-probs and w = pi_old / pi_sampler
    (sampler.py); with ``policy_lag`` or an ``off_policy_correction`` the log-probs and the weight its
    row of `CORRECTIONS` names (`lagged_old_logprobs`)."""
    cfg = algorithm.config
    if cfg.sampler_dtype is not None:
        return trainer_old_logprobs(algorithm.policy, rollout, cfg)
    staleness = lagged_sampler(algorithm).staleness if cfg.policy_lag > 0 else 0
    return lagged_old_logprobs(algorithm.fn, algorithm.policy, rollout, cfg, staleness)
