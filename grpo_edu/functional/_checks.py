"""The argument checks every function of the core starts with: a bad input is a one-line
``ValueError`` naming the argument and what was expected, before any work."""

from __future__ import annotations

from torch import Tensor


def _same_shape(ref_name: str, ref: Tensor, **others: Tensor | None) -> None:
    for name, t in others.items():
        if t is not None and t.shape != ref.shape:
            raise ValueError(f"{name} must have the shape of {ref_name} {list(ref.shape)}, got {list(t.shape)}")


def _ndim(name: str, t: Tensor, ndim: int, what: str) -> None:
    if t.dim() != ndim:
        raise ValueError(f"{name} must be {what}, got shape {list(t.shape)}")


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


def _in_range(name: str, value: float, lo: float = 0.0, hi: float = float("inf")) -> None:
    if not lo <= value <= hi:  # also rejects NaN
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {value}")


def _clip_range(logp: Tensor, old_logp: Tensor, mask, eps_low: float, eps_high) -> float:
    """The checks of a clipped surrogate's inputs; returns eps_high (None: eps_low)."""
    _ndim("logp", logp, 2, "[B, T]")
    _same_shape("logp", logp, old_logp=old_logp, mask=mask)
    eps_high = eps_low if eps_high is None else eps_high
    _in_range("eps_low", eps_low)
    _in_range("eps_high", eps_high)
    return eps_high


def _per_token(advantages: Tensor, like: Tensor) -> Tensor:
    """Advantages [B] (one per sequence, broadcast over T) or [B, T] -> [B, T]-broadcastable."""
    if advantages.shape == like.shape:
        return advantages
    if advantages.dim() == 1 and like.dim() == 2 and advantages.shape[0] == like.shape[0]:
        return advantages.unsqueeze(-1)
    raise ValueError(f"advantages must be [B] or [B, T] = {list(like.shape)}, got {list(advantages.shape)}")
