"""Masked sums and means over the completion tokens, and the three ways to turn per-token
losses into one number (``aggregate_loss``)."""

from __future__ import annotations

from torch import Tensor

from ._checks import _choice, _in_range, _ndim, _same_shape

AGGREGATIONS = ("sequence_mean", "token_mean", "constant")
"""The modes of `aggregate_loss`: every config's ``loss_type`` is one of these."""


def masked_sum(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """``sum_t x_t * m_t`` over ``dim`` (everything if None). x, mask: same shape."""
    _same_shape("x", x, mask=mask)
    xm = x * mask.to(x.dtype)
    return xm.sum() if dim is None else xm.sum(dim)


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """``sum_t x_t m_t / sum_t m_t`` over ``dim`` (over everything if ``dim`` is None).

    An all-masked slice is 0/0 = NaN on purpose (there is no mean of nothing); callers
    that can hit it guard it (``aggregate_loss`` and ``value_loss`` do).
    """
    _same_shape("x", x, mask=mask)
    m = mask.to(x.dtype)
    return masked_sum(x, m, dim) / (m.sum() if dim is None else m.sum(dim))


def masked_normalize(x: Tensor, mask: Tensor, dim: int | None = None, constant: float = 1.0) -> Tensor:
    """``sum_t x_t m_t / C``: the masked sum divided by a constant ``C > 0``."""
    if not constant > 0:
        raise ValueError(f"constant must be > 0, got {constant}")
    return masked_sum(x, mask, dim) / constant


def masked_whiten(x: Tensor, mask: Tensor, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """``(x - mu) / (sigma + eps)`` with mu, sigma the mean and std of the masked entries.

    Used to whiten PPO advantages over the whole batch. sigma is the population std
    (1/N). With ``shift_mean=False`` the mean is kept: ``(x - mu)/(sigma + eps) + mu``
    (as in OpenAI's lm-human-preferences and TRL). Output: x's shape, 0 where mask is 0.
    """
    _same_shape("x", x, mask=mask)
    _in_range("eps", eps)
    m = mask.to(x.dtype)
    n = m.sum().clamp(min=1)
    mu = (x * m).sum() / n
    sigma = ((((x - mu) * m) ** 2).sum() / n).sqrt()
    out = (x - mu) / (sigma + eps)
    if not shift_mean:
        out = out + mu
    return out * m


def aggregate_loss(
    per_token_loss: Tensor, mask: Tensor, mode: str = "sequence_mean", max_length: int | None = None
) -> Tensor:
    """Per-token losses [B, T] -> one scalar, three ways (|o_i| = tokens of completion i):

        "sequence_mean": 1/B sum_i 1/|o_i| sum_t L_it    GRPO paper; TRL loss_type="grpo"
        "token_mean":    sum_it L_it / sum_i |o_i|        DAPO; TRL "dapo" / "bnpo"
        "constant":      sum_it L_it / (B * max_length)   Dr. GRPO; TRL "dr_grpo"

    Length bias. "sequence_mean" gives each token of a completion weight 1/|o_i|: a
    long wrong answer is penalised less per token than a short one, so wrong answers
    drift longer. "token_mean" weighs every token alike within the batch, but the step
    size still depends on the batch's total length. "constant" (max_length defaults to
    T) weighs every token by the same fixed constant: the plain policy-gradient sum.
    A completion with no tokens contributes 0 (its count is clamped at 1) and still
    counts in the 1/B of "sequence_mean"; an empty batch gives 0, not NaN.
    """
    _ndim("per_token_loss", per_token_loss, 2, "[B, T]")
    _same_shape("per_token_loss", per_token_loss, mask=mask)
    _choice("mode", mode, ("sequence_mean", "token_mean", "constant"))
    m = mask.to(per_token_loss.dtype)
    if mode == "sequence_mean":
        per_seq = masked_sum(per_token_loss, m, dim=-1) / m.sum(-1).clamp(min=1)
        return per_seq.mean()
    if mode == "token_mean":
        return masked_sum(per_token_loss, m) / m.sum().clamp(min=1)
    max_length = m.shape[1] if max_length is None else max_length
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length must be a positive int, got {max_length!r}")
    return masked_normalize(per_token_loss, m, constant=m.shape[0] * max_length)
