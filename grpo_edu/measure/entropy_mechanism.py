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
The defaults here are those of the paper's reference implementation (in verl).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..functional import masked_mean

__all__ = [
    "CLIP_COV_BOUNDS",
    "CLIP_COV_RATIO",
    "KL_COV_RATIO",
    "clip_cov_tokens",
    "covariance_terms",
    "entropy_change_first_order",
    "kl_cov_tokens",
    "predicted_entropy_change",
    "softmax_entropy",
    "token_covariance",
]

CLIP_COV_RATIO = 2e-4  # Clip-Cov: the fraction of the batch's tokens whose gradient is dropped
CLIP_COV_BOUNDS = (1.0, 5.0)  # Clip-Cov: a token is eligible when lb < c_i < ub
KL_COV_RATIO = 2e-4  # KL-Cov: the fraction of the batch's tokens, highest c_i first, that get the KL penalty


def _check_tokens(logp: Tensor, advantages: Tensor, mask: Tensor) -> None:
    if logp.shape != advantages.shape or logp.shape != mask.shape:
        raise ValueError(
            f"logp, advantages and mask must have one shape, got {tuple(logp.shape)}, "
            f"{tuple(advantages.shape)} and {tuple(mask.shape)}"
        )
    if not bool((mask != 0).any()):
        raise ValueError("mask selects no token: there is no covariance of nothing")


def covariance_terms(logp: Tensor, advantages: Tensor, mask: Tensor) -> Tensor:
    """c_i = (log pi(y_i) - mean_j log pi(y_j)) (A_i - mean_j A_j), means over the masked tokens.

    logp, advantages, mask: [B, T] (advantages broadcast per token). Returns [B, T], 0 off the mask;
    detached (a ranking, not a loss)."""
    _check_tokens(logp, advantages, mask)
    logp, advantages = logp.detach(), advantages.detach()
    centred_logp = logp - masked_mean(logp, mask)
    centred_adv = advantages - masked_mean(advantages, mask)
    return centred_logp * centred_adv * mask.to(logp.dtype)


def token_covariance(logp: Tensor, advantages: Tensor, mask: Tensor) -> Tensor:
    """Cov = mean_i c_i over the masked tokens: the batch's covariance of log pi and the advantage (1/N).

    logp, advantages, mask: [B, T] -> a scalar. Its sign predicts the sign of the step's entropy change
    (positive: the entropy falls)."""
    return masked_mean(covariance_terms(logp, advantages, mask), mask)


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


def kl_cov_tokens(logp: Tensor, advantages: Tensor, mask: Tensor, ratio: float = KL_COV_RATIO) -> Tensor:
    """KL-Cov's tokens: the k = max(1, floor(ratio N)) masked tokens of largest c_i (N masked tokens).

    [B, T] -> a bool [B, T], True on the k tokens that get the penalty |log pi - log pi_old| (ties: the
    first in row-major order)."""
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio must be in (0, 1], got {ratio}")
    terms = covariance_terms(logp, advantages, mask)
    on = mask.reshape(-1) != 0
    k = max(1, int(int(on.sum()) * ratio))
    ranked = terms.reshape(-1).masked_fill(~on, float("-inf"))
    chosen = torch.zeros_like(on)
    chosen[torch.topk(ranked, k, largest=True, sorted=True).indices] = True
    return chosen.reshape(mask.shape)


def clip_cov_tokens(
    logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    ratio: float = CLIP_COV_RATIO,
    bounds: tuple[float, float] = CLIP_COV_BOUNDS,
    clipped: Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Clip-Cov's tokens: min(k, |E|) tokens drawn uniformly without replacement from
    E = {i masked, lb < c_i < ub, not already clipped by the ratio}, k = max(1, floor(ratio N)).

    ``clipped``: bool [B, T], the tokens PPO's clip already cuts (None: none). [B, T] -> a bool [B, T],
    True on the tokens whose gradient is dropped."""
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio must be in (0, 1], got {ratio}")
    lb, ub = bounds
    if not lb < ub:
        raise ValueError(f"bounds must be (lb, ub) with lb < ub, got {bounds}")
    terms = covariance_terms(logp, advantages, mask)
    on = mask != 0
    eligible = on & (terms > lb) & (terms < ub)
    if clipped is not None:
        eligible = eligible & ~clipped.bool()
    k = max(1, int(int(on.sum()) * ratio))
    candidates = torch.nonzero(eligible.reshape(-1)).reshape(-1)
    picked = candidates[torch.randperm(len(candidates), generator=generator)[:k]]
    chosen = torch.zeros(on.numel(), dtype=torch.bool, device=mask.device)
    chosen[picked] = True
    return chosen.reshape(mask.shape)
