"""Log-probabilities of the chosen tokens, entropy, the KL to the reference (sampled
estimators and exact), and the per-token reward with the KL penalty inside it."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ._checks import _choice, _in_range, _ndim, _same_shape


def token_logprobs(logits: Tensor, tokens: Tensor, temperature: float = 1.0) -> Tensor:
    """``log pi(a_t | s_t) = log_softmax(z_t / tau)[a_t]``.

    logits: [B, T, V]; tokens: [B, T] integer ids in [0, V). Returns [B, T]. Use the
    sampling temperature tau > 0, so that the log-probs are those of the sampler.
    """
    _ndim("logits", logits, 3, "[B, T, V]")
    if tokens.shape != logits.shape[:2]:
        raise ValueError(
            f"tokens must be [B, T] = {list(logits.shape[:2])} (logits' first two dims), got {list(tokens.shape)}"
        )
    if tokens.is_floating_point() or tokens.dtype == torch.bool:
        raise ValueError(f"tokens must be integer token ids, got dtype {tokens.dtype}")
    if tokens.numel() and (tokens.min() < 0 or tokens.max() >= logits.shape[-1]):
        raise ValueError(f"tokens must be ids in [0, V={logits.shape[-1]}), got values outside")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    logp = F.log_softmax(logits / temperature, dim=-1)
    return logp.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


def _kl_terms(logp: Tensor, logq: Tensor) -> Tensor:
    """``p * (log p - log q)`` per vocabulary entry, with 0 * anything = 0 where p = 0
    (so -inf logits give no NaN, in the value or in the gradient)."""
    p = logp.exp()
    return p * (logp - logq).masked_fill(p == 0, 0.0)


def entropy(logits: Tensor) -> Tensor:
    """``H_t = -sum_v pi(v | s_t) log pi(v | s_t)``. logits: [B, T, V] -> [B, T].

    Stable: computed from log_softmax; -inf and huge logits give no NaN.
    """
    _ndim("logits", logits, 3, "[B, T, V]")
    logp = F.log_softmax(logits, dim=-1)
    return -_kl_terms(logp, torch.zeros_like(logp)).sum(-1)


def kl_estimate(logp: Tensor, ref_logp: Tensor, kind: str = "k3") -> Tensor:
    """Sampled per-token KL estimators (Schulman, "Approximating KL divergence").

    With ``log r = log(pi_ref / pi) = ref_logp - logp`` on tokens a_t ~ pi:

        k1 = -log r = log pi - log pi_ref      unbiased for KL(pi||pi_ref), can be < 0
        k2 = (log r)^2 / 2                     biased, low variance, >= 0
        k3 = r - 1 - log r                     unbiased for KL(pi||pi_ref), >= 0, low variance

    (k1 and k3 are unbiased only when the tokens come from pi: E_pi[r - 1] = 0.)
    k3 >= 0 because log r <= r - 1. logp, ref_logp: same shape. Returns that shape.
    """
    _same_shape("logp", logp, ref_logp=ref_logp)
    _choice("kind", kind, ("k1", "k2", "k3"))
    log_ratio = logp - ref_logp  # log pi/pi_ref = -log r
    if kind == "k1":
        return log_ratio
    if kind == "k2":
        return 0.5 * log_ratio**2
    return torch.expm1(-log_ratio) + log_ratio  # = exp(-log_ratio) - 1 + log_ratio, exact near 0


def exact_kl(logits: Tensor, ref_logits: Tensor, direction: str = "pi||ref") -> Tensor:
    """Exact KL over the vocabulary at every position (the vocabulary is tiny here).

        "pi||ref": KL(pi||pi_ref) = sum_v pi(v) (log pi(v) - log pi_ref(v))
        "ref||pi": KL(pi_ref||pi) = sum_v pi_ref(v) (log pi_ref(v) - log pi(v))

    logits, ref_logits: [B, T, V] -> [B, T]. Stable via log_softmax; >= 0 up to rounding.
    """
    _ndim("logits", logits, 3, "[B, T, V]")
    _same_shape("logits", logits, ref_logits=ref_logits)
    _choice("direction", direction, ("pi||ref", "ref||pi"))
    logp, logq = F.log_softmax(logits, dim=-1), F.log_softmax(ref_logits, dim=-1)
    if direction == "ref||pi":
        logp, logq = logq, logp
    return _kl_terms(logp, logq).sum(-1)


def kl_penalized_rewards(
    scores: Tensor, logp: Tensor, ref_logp: Tensor, mask: Tensor, beta: float, kind: str = "k1"
) -> tuple[Tensor, Tensor]:
    """The per-token reward with the KL penalty inside it (InstructGPT / PPO-RLHF):

        r_{i,t} = r_phi(q, a_{i,<=t}) - beta * k_{i,t}
        r_i     = sum_t r_{i,t}

    with k the per-token KL estimate ``kl_estimate(logp, ref_logp, kind)``; the derivation
    uses ``kind="k1"``: k = log(pi_theta(a_t) / pi_ref(a_t)).
    scores: [B, T] task scores r_phi (a sparse outcome reward is 0 except at the last
    completion token); logp, ref_logp, mask: [B, T]; beta >= 0. Rewards are data: the
    log-probs are detached. Returns ``(token_rewards [B, T], seq_rewards [B])``, token
    rewards 0 where mask is 0.
    """
    _ndim("scores", scores, 2, "[B, T]")
    _same_shape("scores", scores, logp=logp, ref_logp=ref_logp, mask=mask)
    _in_range("beta", beta)
    kl = kl_estimate(logp.detach(), ref_logp.detach(), kind)
    token_rewards = (scores - beta * kl) * mask.to(scores.dtype)
    return token_rewards, token_rewards.sum(-1)
