"""The numbers `grpo_edu.figures.plots.plot_token_view` draws: one batch, token by token, computed from
the functional core (the clipped surrogate's gradient says which tokens were clipped).
`grpo_edu.figures.plots` re-exports both names (``plots.token_view_values``, notebook 04)."""

from __future__ import annotations

import torch

from .. import functional as Fn

TOKEN_VIEW = ("advantage", "ratio", "clipped", "entropy")  # what plot_token_view colours, in panel order


def token_view_values(logp, old_logp, advantages, logits, mask, eps_low: float = 0.2,
                      eps_high: float | None = None) -> dict:  # fmt: skip
    """The four numbers of `plot_token_view` per completion token, from `grpo_edu.functional`:

        advantage  A_{i,t}: the advantage of the token's completion (``advantages`` [B] or [B, T])
        ratio      rho_{i,t} = pi_theta(a_t | s_t) / pi_old(a_t | s_t) = exp(logp - old_logp)
        clipped    1.0 where `Fn.clipped_surrogate_loss` gives the token no gradient although
                   A != 0 (rho outside [1 - eps_low, 1 + eps_high] on the side A pushes), else 0.0
        entropy    H_t = `Fn.entropy(logits)` (nats), of pi_theta at the token's position

    logp, old_logp, mask: [B, T]; logits: [B, T, V] of pi_theta. Returns name -> [B, T] float
    tensors (detached), NaN where mask is 0.
    """
    if logp.dim() != 2:
        raise ValueError(f"logp must be [B, T], got shape {list(logp.shape)}")
    for name, t in (("old_logp", old_logp), ("mask", mask)):
        if t.shape != logp.shape:
            raise ValueError(f"{name} must have logp's shape {list(logp.shape)}, got {list(t.shape)}")
    if logits.dim() != 3 or tuple(logits.shape[:2]) != tuple(logp.shape):
        raise ValueError(f"logits must be [B, T, V] with [B, T] = {list(logp.shape)}, got {list(logits.shape)}")
    if advantages.shape not in (logp.shape[:1], logp.shape):
        raise ValueError(f"advantages must be [B] or [B, T] = {list(logp.shape)}, got {list(advantages.shape)}")
    lp = logp.detach().double().requires_grad_(True)
    adv = advantages.detach().double()
    adv = (adv[:, None] if adv.dim() == 1 else adv).expand_as(lp)
    loss, _ = Fn.clipped_surrogate_loss(lp, old_logp.detach().double(), adv, eps_low, eps_high, mask=mask)
    (grad,) = torch.autograd.grad(loss.sum(), lp)  # d L_t / d log pi_t = -rho_t A_t, or 0 where clipped
    values = {
        "advantage": adv.detach(),
        "ratio": torch.exp(lp.detach() - old_logp.detach().double()),
        "clipped": ((grad == 0) & (adv != 0)).double(),
        "entropy": Fn.entropy(logits.detach().double()),
    }
    off = mask.detach().to(torch.float64) == 0
    return {k: v.masked_fill(off, float("nan")).float() for k, v in values.items()}
