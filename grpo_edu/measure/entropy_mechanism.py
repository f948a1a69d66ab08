"""The entropy mechanism (Cui et al. 2025): what one policy-gradient step does to the entropy, and the
tokens Clip-Cov and KL-Cov act on.

For a softmax policy pi(a|s) = exp z_{s,a} / sum_b exp z_{s,b}, a step that moves the logits by dz
changes the entropy at s, to first order, by minus a covariance under the policy's own expectation
(the paper's Lemma 1):

    H(pi' | s) - H(pi | s) = -Cov_{a~pi(.|s)}( log pi(a|s), dz_{s,a} ) + O(|dz|^2)

A tabular softmax trained by the exact policy gradient of E_{a~pi}[A(s,a)] with step eta moves the
logits by dz = eta pi(a|s) A(s,a) (the paper's Theorem 2); natural policy gradient moves them by
dz = eta A(s,a) (Theorem 3), so that

    natural:  dH ~ -eta Cov_{a~pi}( log pi(a|s), A(s,a) )
    vanilla:  dH ~ -eta Cov_{a~pi}( log pi(a|s), pi(a|s) A(s,a) )

An action that is likely and has a positive advantage (or unlikely and negative) lowers the entropy.
The theory's covariance is over pi at one state; in an LLM batch the paper measures it, and Clip-Cov
and KL-Cov rank tokens by it, as the batch's centred products over its tokens (`covariance_terms`):

    c_i = (log pi(y_i) - mean_j log pi(y_j)) (A_i - mean_j A_j),     Cov = mean_i c_i

Clip-Cov drops the gradient of a few tokens drawn at random among those with lb < c_i < ub (not
already clipped by the ratio); KL-Cov puts a penalty |log pi - log pi_old| on the top fraction of c_i.
Both, and the covariance itself, are functions of the functional core (`grpo_edu.functional.covariance`,
re-exported here), knobs of GRPO (``policy_loss="clip_cov"`` / ``"kl_cov"``); GRPO logs the batch's
Cov(log pi_old, A) every step as ``cov_logp_adv``.

Per step of a run, `EntropyProbe` (a ``train`` callback) measures the entropy change of the step's update on
the step's own tokens, and `entropy_prediction` scores -Cov as its prediction, per step and summed.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import Tensor

from ..functional import entropy, masked_mean
from ..functional.covariance import (
    CLIP_COV_BOUNDS,
    CLIP_COV_RATIO,
    KL_COV_RATIO,
    clip_cov_tokens,
    covariance_terms,
    kl_cov_tokens,
    token_covariance,
)
from ..rollout import sequence_logprobs

__all__ = [
    "CLIP_COV_BOUNDS",
    "CLIP_COV_RATIO",
    "EntropyProbe",
    "KL_COV_RATIO",
    "clip_cov_tokens",
    "covariance_terms",
    "entropy_change_first_order",
    "entropy_prediction",
    "kl_cov_tokens",
    "predicted_entropy_change",
    "rollout_entropy",
    "softmax_entropy",
    "token_covariance",
]


def softmax_entropy(logits: Tensor) -> Tensor:
    """H = -sum_a pi(a) log pi(a), pi = softmax(logits) over the last dim. [..., K] -> [...]."""
    logp = torch.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def entropy_change_first_order(logits: Tensor, delta_logits: Tensor) -> Tensor:
    """-Cov_{a~pi}(log pi(a), dz_a) = -( sum_a pi_a log pi_a dz_a - (sum_a pi_a log pi_a)(sum_a pi_a dz_a) ).

    logits, delta_logits: [..., K] (one softmax per row) -> [...]: the first-order change of H when the
    logits move by ``delta_logits`` (the paper's Lemma 1)."""
    if logits.shape != delta_logits.shape:
        raise ValueError(
            f"logits and delta_logits must have one shape, got {tuple(logits.shape)} and {tuple(delta_logits.shape)}"
        )
    logp = torch.log_softmax(logits, dim=-1)
    p = logp.exp()
    cov = (p * logp * delta_logits).sum(-1) - (p * logp).sum(-1) * (p * delta_logits).sum(-1)
    return -cov


def predicted_entropy_change(logits: Tensor, advantages: Tensor, eta: float, step: str = "natural") -> Tensor:
    """dH ~ -eta Cov_{a~pi}(log pi(a), A(a))          (step="natural": dz = eta A)
       dH ~ -eta Cov_{a~pi}(log pi(a), pi(a) A(a))    (step="vanilla": dz = eta pi A, the exact PG of E_pi[A])

    A tabular softmax: logits, advantages [..., K] (one state per row, every action's advantage) -> [...]."""
    if step not in ("natural", "vanilla"):
        raise ValueError(f"step must be 'natural' or 'vanilla', got {step!r}")
    if not eta > 0:
        raise ValueError(f"eta must be > 0, got {eta}")
    if logits.shape != advantages.shape:
        raise ValueError(
            f"logits and advantages must have one shape, got {tuple(logits.shape)} and {tuple(advantages.shape)}"
        )
    dz = eta * advantages if step == "natural" else eta * torch.softmax(logits, dim=-1) * advantages
    return entropy_change_first_order(logits, dz)


@torch.no_grad()
def rollout_entropy(policy, rollout) -> float:
    """H = the mean over the rollout's completion tokens of H(pi(. | s_t)), at the rollout's temperature."""
    was = policy.training
    policy.eval()
    _, logits = sequence_logprobs(policy, rollout, return_logits=True)
    policy.train(was)
    return float(masked_mean(entropy(logits / rollout.temperature), rollout.mask))


class EntropyProbe:
    """``train(..., callback=EntropyProbe(reference))``: per step, the entropy of the policy before and after
    the step's update, both on the step's own rollout (its states), and the step's logged covariance.

    ``start``: the policy the run starts from (``train`` trains a copy of ``reference``). After each step the
    probe keeps a copy of the updated weights: they are the next step's "before" (pi_old, when the policy
    samples its own rollouts: no ``policy_lag`` or ``sampler_dtype``). ``rows``: one dict per step,
    ``step``, ``entropy_before``, ``entropy_after``, ``entropy_change`` (after - before) and ``covariance``
    (GRPO's ``cov_logp_adv``: Cov(log pi_old, A) over the tokens the loss trains). Costs two no-grad
    forward passes of the batch per step."""

    def __init__(self, start):
        self._before = copy.deepcopy(start)
        self.rows: list[dict] = []

    def __call__(self, info) -> None:
        before = rollout_entropy(self._before, info.rollout)
        after = rollout_entropy(info.policy, info.rollout)
        cov = info.metrics.get("cov_logp_adv", math.nan)
        self.rows.append(
            {"step": info.step, "entropy_before": before, "entropy_after": after,
             "entropy_change": after - before, "covariance": float(cov)}
        )  # fmt: skip
        self._before.load_state_dict(info.policy.state_dict())

    def series(self, key: str) -> np.ndarray:
        return np.array([r[key] for r in self.rows], dtype=float)


def entropy_prediction(covariance, entropy_change, fit: float = 0.5) -> dict:
    """How well -Cov predicts the measured entropy change dH, per step and summed over a run.

    covariance, entropy_change: one value per step (the same steps). Per step: ``pearson``, the correlation
    of -Cov_t with dH_t, and ``sign_agreement``, the share of steps with sign(dH_t) = sign(-Cov_t) (steps
    where either is 0 not counted). Summed: the theory's dH = -eta Cov has an unknown step eta (Adam, a
    network: no closed form), so ``scale`` c is fitted by least squares through 0, dH ~ c (-Cov), on the
    first ``fit`` share of the steps, and the rest's summed change predicted: ``summed_measured`` = sum dH,
    ``summed_predicted`` = c sum(-Cov) over the rest; ``summed_sign`` 1.0 if they share a sign, else 0.0;
    ``summed_naive`` = the first part's mean dH times the rest's steps (its rate continued: what to beat).
    ``steps``: how many steps were scored."""
    cov, dh = np.asarray(covariance, dtype=float), np.asarray(entropy_change, dtype=float)
    if cov.shape != dh.shape or cov.ndim != 1:
        raise ValueError(f"covariance and entropy_change must be two 1-d series of one length, got {cov.shape} and {dh.shape}")  # fmt: skip
    if len(cov) < 4 or not np.isfinite(cov).all() or not np.isfinite(dh).all():
        raise ValueError(f"entropy_prediction needs at least 4 finite steps, got {len(cov)}")
    if not 0 < fit < 1:
        raise ValueError(f"fit must be in (0, 1), got {fit}")
    x = -cov
    pearson = float(np.corrcoef(x, dh)[0, 1]) if x.std() > 0 and dh.std() > 0 else math.nan
    signed = (x != 0) & (dh != 0)
    agree = float(np.mean(np.sign(x[signed]) == np.sign(dh[signed]))) if signed.any() else math.nan
    n = max(2, int(len(x) * fit))
    scale = float(x[:n] @ dh[:n] / (x[:n] @ x[:n])) if (x[:n] @ x[:n]) > 0 else math.nan
    measured, predicted = float(dh[n:].sum()), float(scale * x[n:].sum())
    naive = float(dh[:n].mean() * (len(x) - n))
    return {
        "steps": len(x), "pearson": pearson, "sign_agreement": agree, "scale": scale, "fit_steps": n,
        "summed_measured": measured, "summed_predicted": predicted,
        "summed_sign": float(np.sign(measured) == np.sign(predicted)), "summed_naive": naive,
    }  # fmt: skip
