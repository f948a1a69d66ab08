"""The functional core: one pure function per equation, tensors in and tensors out.

No ``.backward()``, and no state in the math: REINFORCE, baseline, PPO and GRPO are assembled
from these pieces. One piece of state, on purpose, for the homework: the plug registry at the
bottom of this file. ``PLUGGED`` (name -> replacement) is process-global, and at import every
public function here is rebound to a wrapper that looks its name up there on each call: with
nothing plugged the wrapper calls the function as written; with a replacement plugged (only
``grpo_edu.plug(name=fn)`` writes it, inside a ``with`` block, restored on exit even when the
block raises) every caller, however it imported the name, gets the replacement. The registry is
shared by the whole process, so plug from one thread at a time. Notation and shapes (as in the
notebooks):

- ``B`` completions (rows), ``T`` completion length, ``V`` vocabulary size.
  ``B = n_prompts * group_size``; the samples of one prompt are consecutive rows.
- per-token tensors are ``[B, T]``, per-sequence tensors ``[B]``, logits ``[B, T, V]``.
- ``mask`` ``[B, T]`` (float or bool) is 1 on completion tokens up to and including
  EOS and 0 on padding. Values on padding must be finite (they are multiplied by 0).
- ``logp = log pi_theta(a_t | s_t)``, ``old_logp`` under pi_old (the sampler),
  ``ref_logp`` under pi_ref (the frozen SFT model).

Bad input (wrong shapes, unknown option strings, out-of-range numbers) raises a
``ValueError`` that names the argument and what was expected.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "masked_sum", "masked_mean", "masked_normalize", "masked_whiten",
    "discounted_returns", "gae", "baseline_advantages", "running_mean", "group_advantages",
    "token_logprobs", "entropy", "kl_estimate", "exact_kl", "kl_penalized_rewards",
    "policy_gradient_loss", "clipped_surrogate_loss", "value_loss", "aggregate_loss", "regularized_loss",
    "sequence_log_ratio", "gspo_loss", "cispo_loss", "sampler_importance_weights",
    "spurious_rewards", "signed_advantages",
]  # fmt: skip


# ----------------------------------------------------------------------------- checks


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


# ------------------------------------------------------------------ masked reductions


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


# -------------------------------------------------------------------------- returns


def discounted_returns(rewards: Tensor, mask: Tensor, gamma: float) -> Tensor:
    """Reward-to-go ``G_t = sum_{k>=0} gamma^k r_{t+k} = r_t + gamma G_{t+1}``.

    rewards, mask: [B, T]; masked-out rewards count as 0. Returns [B, T], 0 where mask is 0.
    """
    _ndim("rewards", rewards, 2, "[B, T]")
    _same_shape("rewards", rewards, mask=mask)
    _in_range("gamma", gamma, 0.0, 1.0)
    m = mask.to(rewards.dtype)
    r = rewards * m
    g = torch.zeros_like(r[:, 0])
    out = []
    for t in reversed(range(r.shape[1])):
        g = r[:, t] + gamma * g
        out.append(g)
    return torch.stack(out[::-1], dim=1) * m


def gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0, lam: float = 1.0) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016).

        delta_t = r_t + gamma * V_{t+1} - V_t
        A_t     = sum_{k>=0} (gamma * lam)^k delta_{t+k} = delta_t + gamma * lam * A_{t+1}
        R_t     = A_t + V_t            (the critic's regression target)

    The episode ends at the last masked token (EOS or truncation): V after it is 0.
    rewards, values, mask: [B, T]. Returns ``(advantages, returns)``, both [B, T] and 0
    where mask is 0. Both are *targets*: values (and rewards) are detached, so no
    gradient flows from the policy loss into the critic.
    """
    _ndim("rewards", rewards, 2, "[B, T]")
    _same_shape("rewards", rewards, values=values, mask=mask)
    _in_range("gamma", gamma, 0.0, 1.0)
    _in_range("lam", lam, 0.0, 1.0)
    r, v = rewards.detach(), values.detach()
    m = mask.to(v.dtype)
    next_value = next_adv = torch.zeros_like(v[:, 0])
    out = []
    for t in reversed(range(v.shape[1])):
        delta = r[:, t] + gamma * next_value - v[:, t]
        next_adv = (delta + gamma * lam * next_adv) * m[:, t]  # 0 on padding: resets
        next_value = v[:, t] * m[:, t]
        out.append(next_adv)
    advantages = torch.stack(out[::-1], dim=1)
    return advantages, (advantages + v) * m


def baseline_advantages(returns: Tensor, baseline, mask: Tensor) -> Tensor:
    """REINFORCE with a baseline: ``A_t = G_t - b`` (0 where mask is 0).

    ``baseline`` is a number (a batch or running mean), a ``[B]`` tensor (one b per
    sequence) or a ``[B, T]`` tensor (a critic's V(s_t)). Since E[b grad log pi] = 0 for any
    b that does not depend on the action, the estimate stays unbiased. Both inputs are
    targets: no gradient flows into the returns or into the critic from here.
    returns, mask: [B, T]. Returns [B, T].
    """
    _ndim("returns", returns, 2, "[B, T]")
    _same_shape("returns", returns, mask=mask)
    b = torch.as_tensor(baseline, dtype=returns.dtype, device=returns.device).detach()
    if b.dim() == 1 and b.shape[0] == returns.shape[0]:
        b = b.unsqueeze(-1)
    elif b.dim() not in (0, 2) or (b.dim() == 2 and b.shape != returns.shape):
        raise ValueError(
            f"baseline must be a number, [B] = [{returns.shape[0]}] or [B, T] = {list(returns.shape)}, "
            f"got shape {list(b.shape)}"
        )
    return (returns.detach() - b) * mask.to(returns.dtype)


def running_mean(previous: float | None, value: float, decay: float) -> float:
    """``b <- decay * b + (1 - decay) * value``; the first value starts the average."""
    _in_range("decay", decay, 0.0, 1.0)
    return float(value) if previous is None else decay * previous + (1.0 - decay) * float(value)


def group_advantages(
    rewards: Tensor,
    group_size: int,
    scale: str = "group",
    eps: float = 1e-6,
    unbiased: bool = False,
    leave_one_out: bool = False,
) -> tuple[Tensor, dict]:
    """GRPO's group-relative advantage, one per completion.

    Rows ``i = g*G .. g*G + G-1`` (G = group_size) answer the same prompt g:

        A_i = (r_i - mean_g(r)) / (s + eps)

    with s = std_g(r) for ``scale="group"`` (GRPO), s = std of the whole batch for
    ``"batch"``, and no division for ``"none"`` (Dr. GRPO: A_i = r_i - mean_g(r)).
    ``unbiased=False`` is the 1/G std of the derivation; ``True`` is 1/(G-1) (torch.std's
    default; it only rescales the step). Both are ``torch.std`` with ``correction`` 0 or 1,
    so the numbers are the same bits a learner gets from torch.
    ``leave_one_out=True`` centres on the mean of the *other* G-1 rewards (RLOO):
    ``r_i - mean_{j != i} r_j = G/(G-1) (r_i - mean_g(r))``, which, unlike the group mean,
    does not contain r_i itself (the baseline is then independent of the sample: unbiased).
    A group whose rewards are all equal (always the case with G = 1) gets advantage exactly
    0, never NaN: it carries no signal.

    rewards: [B]. Returns ``(advantages [B], stats)`` with stats "mean" [n_groups],
    "std" [n_groups] (per-group std, with the chosen ``unbiased``) and "frac_zero_std"
    (python float: the fraction of groups whose rewards are all equal). (Long for its
    docstring and argument checks; the equation itself is the six lines at the end.)
    """
    _ndim("rewards", rewards, 1, "[B] (one reward per completion)")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}")
    if rewards.shape[0] % group_size != 0:
        raise ValueError(f"group_size must divide the batch size B = {rewards.shape[0]}, got {group_size}")
    _choice("scale", scale, ("group", "batch", "none"))
    _in_range("eps", eps)
    if not rewards.is_floating_point():
        rewards = rewards.float()
    correction = int(unbiased)

    def std(x: Tensor, dim: int) -> Tensor:  # a single sample has std 0 (not NaN)
        if x.shape[dim] <= correction:
            return torch.zeros_like(x.select(dim, 0))
        return torch.std(x, dim=dim, correction=correction)

    r = rewards.view(-1, group_size)  # [n_groups, G]
    mean, group_std = r.mean(1), std(r, 1)
    all_equal = r.amax(1) == r.amin(1)  # exact test: std of equal floats may be 1e-9, not 0
    centered = torch.where(all_equal[:, None], torch.zeros_like(r), r - mean[:, None])
    if leave_one_out and group_size > 1:
        centered = centered * (group_size / (group_size - 1))
    if scale == "group":
        denom = group_std[:, None] + eps
    elif scale == "batch":
        denom = std(rewards, 0) + eps
    else:
        denom = torch.ones_like(group_std[:, None])
    denom = torch.where(all_equal[:, None], torch.ones_like(r), denom)  # 0/0 -> 0, not NaN
    frac_zero_std = all_equal.sum().item() / all_equal.numel()
    stats = {"mean": mean.detach(), "std": group_std.detach(), "frac_zero_std": frac_zero_std}
    return (centered / denom).reshape(-1), stats


def spurious_rewards(correct: Tensor, signal: str = "true", p: float = 0.5, generator=None) -> Tensor:
    """A reward that may ignore correctness (Shao et al. 2025, "Spurious Rewards"), per completion:

        "true":    r_i = c_i                       (the checker: c_i = 1 for a right answer, else 0)
        "wrong":   r_i = 1 - c_i                   (paid for a wrong answer)
        "random":  r_i ~ Bernoulli(p), independent of c_i

    correct: [B] of 0/1; ``generator`` draws the random rewards (a seeded ``torch.Generator``).
    Returns [B] float rewards.
    """
    _ndim("correct", correct, 1, "[B] (one 0/1 per completion)")
    _choice("signal", signal, ("true", "wrong", "random"))
    _in_range("p", p, 0.0, 1.0)
    c = correct.float()
    if bool(((c != 0) & (c != 1)).any()):
        raise ValueError("correct must hold only 0 and 1")
    if signal == "true":
        return c
    if signal == "wrong":
        return 1.0 - c
    u = torch.rand(c.shape, generator=generator, device="cpu" if generator is None else generator.device)
    return (u.to(c.device) < p).float()


def signed_advantages(advantages: Tensor, sign: str = "both", positive_weight: float = 1.0) -> Tensor:
    """The advantage with one sign kept, or the positive one weighted (Zhu et al. 2025):

        A'_i = lambda_pos max(A_i, 0) + lambda_neg min(A_i, 0)

    ``sign="both"``: lambda_pos = ``positive_weight``, lambda_neg = 1 (W-REINFORCE: lambda_pos = 0.1);
    ``"negative"`` (NSR, only the wrong answers pushed down): lambda_pos = 0, lambda_neg = 1;
    ``"positive"`` (PSR, only the right answers pulled up): lambda_pos = ``positive_weight``, lambda_neg = 0.
    advantages: [B] or [B, T]; returns the same shape.
    """
    _choice("sign", sign, ("both", "negative", "positive"))
    _in_range("positive_weight", positive_weight)
    lambda_pos = 0.0 if sign == "negative" else positive_weight
    lambda_neg = 0.0 if sign == "positive" else 1.0
    return lambda_pos * advantages.clamp(min=0) + lambda_neg * advantages.clamp(max=0)


# --------------------------------------------------------------- log-probs, entropy, KL


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


# ----------------------------------------------------------------------------- losses


def policy_gradient_loss(logp: Tensor, advantages: Tensor) -> Tensor:
    """REINFORCE per-token loss ``L_t = -A_t * log pi(a_t | s_t)``; its gradient is
    ``-A_t grad log pi``, the policy-gradient estimate.

    logp: [B, T]; advantages: [B] (broadcast over T) or [B, T], a constant weight
    (detached: no gradient flows into whatever produced it). Returns [B, T].
    """
    _ndim("logp", logp, 2, "[B, T]")
    return -_per_token(advantages, logp).detach() * logp


def clipped_surrogate_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, eps_low: float = 0.2,
    eps_high: float | None = None, mask: Tensor | None = None,
) -> tuple[Tensor, dict]:  # fmt: skip
    """PPO's clipped surrogate, per token:

        rho_t = pi_theta(a_t) / pi_old(a_t) = exp(logp - old_logp)
        L_t   = -min(rho_t A_t, clip(rho_t, 1 - eps_low, 1 + eps_high) A_t)

    ``eps_high=None`` means eps_high = eps_low (DAPO's "clip-higher" sets it larger).
    logp, old_logp: [B, T]; advantages [B] or [B, T] (detached, as is old_logp).
    Returns ``(loss [B, T], stats)``; stats are python floats over the masked tokens
    (all tokens if mask is None; 0.0 if there are none):

        clip_low   fraction with rho < 1 - eps_low  and A < 0
        clip_high  fraction with rho > 1 + eps_high and A > 0
        clip_ratio fraction with either; ratio_mean the mean of rho.

    These clipped tokens are exactly the tokens with A != 0 whose gradient is zero: the
    min picks the constant clipped term. (At rho = 1 the loss has the gradient of
    ``policy_gradient_loss``.)
    """
    eps_high = _clip_range(logp, old_logp, mask, eps_low, eps_high)
    adv = _per_token(advantages, logp).detach()
    rho = torch.exp(logp - old_logp.detach())
    unclipped = rho * adv
    clipped = torch.clamp(rho, 1.0 - eps_low, 1.0 + eps_high) * adv
    loss = -torch.minimum(unclipped, clipped)

    with torch.no_grad():
        m = torch.ones_like(rho) if mask is None else mask.to(rho.dtype)
        low = ((rho < 1.0 - eps_low) & (adv < 0)).to(rho.dtype)
        high = ((rho > 1.0 + eps_high) & (adv > 0)).to(rho.dtype)
        n = m.sum().clamp(min=1)
        fracs = (torch.stack([low, high, low + high, rho]).mul(m).sum((1, 2)) / n).tolist()
    return loss, dict(zip(("clip_low", "clip_high", "clip_ratio", "ratio_mean"), fracs, strict=True))


def value_loss(
    values: Tensor, returns: Tensor, mask: Tensor,
    old_values: Tensor | None = None, clip: float | None = None,
) -> Tensor:  # fmt: skip
    """The critic's regression loss, a scalar:

        L = 1/2 * masked_mean((V - R)^2)
        clipped (PPO): V_clip = V_old + clamp(V - V_old, -clip, clip)
                       L = 1/2 * masked_mean(max((V - R)^2, (V_clip - R)^2))

    values, returns, mask, old_values: [B, T]; returns and old_values are targets
    (detached). ``clip`` needs ``old_values``. With no masked token the loss is 0.
    """
    _ndim("values", values, 2, "[B, T]")
    _same_shape("values", values, returns=returns, mask=mask, old_values=old_values)
    if clip is not None:
        _in_range("clip", clip)
        if old_values is None:
            raise ValueError("old_values must be given when clip is set (clipped value loss)")
    returns = returns.detach()
    err2 = (values - returns) ** 2
    if clip is not None:
        old = old_values.detach()
        v_clipped = old + torch.clamp(values - old, -clip, clip)
        err2 = torch.maximum(err2, (v_clipped - returns) ** 2)
    m = mask.to(values.dtype)
    return 0.5 * masked_sum(err2, m) / m.sum().clamp(min=1)


LOSS_TYPES = {  # loss_type (TRL's name or ours) -> its mode of aggregate_loss
    "sequence_mean": "sequence_mean",
    "grpo": "sequence_mean",
    "token_mean": "token_mean",
    "dapo": "token_mean",
    "bnpo": "token_mean",
    "constant": "constant",
    "dr_grpo": "constant",
}


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


def regularized_loss(
    per_token_loss: Tensor,
    mask: Tensor,
    mode: str,
    max_length: int | None,
    logits: Tensor,
    entropy_mask: Tensor,
    entropy_coef: float = 0.0,
) -> tuple[Tensor, dict]:
    """The end of every rung's loss: per-token losses [B, T] -> one number, minus the entropy bonus:

        L = agg_{i,t} L_it - c_H * H,    H = masked mean over the completion tokens of H(pi_theta(. | s_t))

    ``mode``, ``max_length``: `aggregate_loss`'s. ``logits`` [B, T, V] of the policy, ``entropy_mask``
    [B, T] the completion tokens H averages over; H carries a gradient only when ``entropy_coef``
    (c_H) > 0, otherwise it is only logged. Returns ``(L, {"loss": L, "entropy": H})``, the dict in floats.
    """
    loss = aggregate_loss(per_token_loss, mask, mode, max_length)
    with torch.set_grad_enabled(entropy_coef > 0 and torch.is_grad_enabled()):  # H, with grad as a bonus
        ent = masked_mean(entropy(logits), entropy_mask)
    if entropy_coef > 0:
        loss = loss - entropy_coef * ent
    return loss, {"loss": float(loss.detach()), "entropy": float(ent.detach())}


# ------------------------------------------------- the objectives after DAPO (2025-26)


def sequence_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """GSPO's length-normalised sequence log-ratio (Zheng et al. 2025), one per completion:

        log s_i = 1/|y_i| sum_t m_it (log pi_theta(y_it) - log pi_old(y_it))
        s_i     = (pi_theta(y_i) / pi_old(y_i)) ** (1/|y_i|)   (the geometric mean of rho_it)

    logp, old_logp, mask: [B, T]; old_logp is detached. Returns [B], with gradient through
    every token's log pi_theta (TRL ``importance_sampling_level="sequence"`` computes exactly
    this; |y_i| is clamped at 1, so an empty completion has log s_i = 0).
    """
    _ndim("logp", logp, 2, "[B, T]")
    _same_shape("logp", logp, old_logp=old_logp, mask=mask)
    m = mask.to(logp.dtype)
    return masked_sum(logp - old_logp.detach(), m, dim=-1) / m.sum(-1).clamp(min=1)


def gspo_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor,
    eps_low: float = 3e-4, eps_high: float | None = 4e-4,
) -> tuple[Tensor, dict]:  # fmt: skip
    """GSPO's clipped sequence-level surrogate (Zheng et al. 2025):

        s_i = exp(sequence_log_ratio)_i = exp(1/|y_i| sum_t log(pi_theta(y_it) / pi_old(y_it)))
        L_i = -min(s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i)

    One ratio and one clip decision per completion instead of per token. The loss is
    returned broadcast over the completion's tokens, L_it = L_i, so that ``aggregate_loss``
    weighs it: "sequence_mean" gives 1/B sum_i L_i, the GSPO objective (TRL warns that its
    token-summing losses weigh each sequence by its length); this is TRL's
    ``importance_sampling_level="sequence"`` term for term. Gradient: the clip is PPO's, and
    where s_i is not clipped, grad L_i = -A_i s_i 1/|y_i| sum_t grad log pi_theta(y_it);
    on-policy (s_i = 1) that is GRPO's token-level gradient under "sequence_mean".
    The paper's clip range is tiny (3e-4, 4e-4: the defaults), because log s_i is a mean.

    logp, old_logp, mask: [B, T]; advantages [B] or [B, T] (detached). ``eps_high=None``
    means eps_low. Returns ``(loss [B, T], stats)``; stats are python floats over the
    completions with at least one token (0.0 if none): clip_low (s < 1 - eps_low and A < 0),
    clip_high (s > 1 + eps_high and A > 0), clip_ratio (either), ratio_mean (mean s_i).
    """
    eps_high = _clip_range(logp, old_logp, mask, eps_low, eps_high)
    adv = _per_token(advantages, logp).detach()
    s = torch.exp(sequence_log_ratio(logp, old_logp, mask)).unsqueeze(-1)  # [B, 1]
    loss = -torch.minimum(s * adv, torch.clamp(s, 1.0 - eps_low, 1.0 + eps_high) * adv)
    loss = loss.expand_as(logp)

    with torch.no_grad():
        seq = (mask.to(logp.dtype).sum(-1) > 0).to(logp.dtype)  # completions with tokens
        a = adv.expand_as(logp)[:, 0]  # a sequence-level clip reads the first token's advantage
        low = ((s[:, 0] < 1.0 - eps_low) & (a < 0)).to(logp.dtype)
        high = ((s[:, 0] > 1.0 + eps_high) & (a > 0)).to(logp.dtype)
        n = seq.sum().clamp(min=1)
        fracs = (torch.stack([low, high, low + high, s[:, 0]]).mul(seq).sum(1) / n).tolist()
    return loss, dict(zip(("clip_low", "clip_high", "clip_ratio", "ratio_mean"), fracs, strict=True))


def cispo_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, eps_high: float = 4.0,
    eps_low: float | None = None, mask: Tensor | None = None,
) -> tuple[Tensor, dict]:  # fmt: skip
    """CISPO (MiniMax-M1, 2025): clip the importance weight, detached, not the update:

        rho_t = pi_theta(a_t) / pi_old(a_t)
        w_t   = sg[clip(rho_t, 1 - eps_low, 1 + eps_high)]      (sg = stop-gradient, .detach())
        L_t   = -w_t A_t log pi_theta(a_t)

    Every token keeps a REINFORCE gradient -w_t A_t grad log pi_theta; a clipped token's
    weight is capped instead of its gradient being zeroed (PPO's clip drops it). Where
    rho_t is not clipped, the gradient is rho_t A_t grad log pi_theta = A_t grad rho_t,
    PPO's unclipped gradient; at rho_t = 1 it is ``policy_gradient_loss``'s.
    ``eps_low=None`` is no lower bound (MiniMax-M1, ScaleRL and TRL clip from above only).
    TRL ``loss_type="cispo"`` computes ``clamp(rho, max=epsilon_high).detach()``: its
    epsilon_high is the cap itself (ScaleRL's eps_max, recommended 5.0), ours 1 + eps_high
    (so TRL epsilon_high = 1 + eps_high; the default cap 5.0). TRL aggregates it as "dapo"
    (a mean over the tokens).

    logp, old_logp: [B, T]; advantages [B] or [B, T] (detached, as is old_logp).
    Returns ``(loss [B, T], stats)``; stats are python floats over the masked tokens (all
    tokens if mask is None): clip_low (rho < 1 - eps_low), clip_high (rho > 1 + eps_high),
    clip_ratio (either; any advantage sign: TRL's cispo_clip_ratio counts A > 0 only),
    ratio_mean (the mean of rho).
    """
    _ndim("logp", logp, 2, "[B, T]")
    _same_shape("logp", logp, old_logp=old_logp, mask=mask)
    _in_range("eps_high", eps_high)
    if eps_low is not None:
        _in_range("eps_low", eps_low, 0.0, 1.0)
    adv = _per_token(advantages, logp).detach()
    rho = torch.exp(logp - old_logp.detach())
    lo = None if eps_low is None else 1.0 - eps_low
    w = torch.clamp(rho, min=lo, max=1.0 + eps_high).detach()
    loss = -w * adv * logp

    with torch.no_grad():
        m = torch.ones_like(rho) if mask is None else mask.to(rho.dtype)
        low = (rho < (-float("inf") if lo is None else lo)).to(rho.dtype)
        high = (rho > 1.0 + eps_high).to(rho.dtype)
        n = m.sum().clamp(min=1)
        fracs = (torch.stack([low, high, low + high, rho]).mul(m).sum((1, 2)) / n).tolist()
    return loss, dict(zip(("clip_low", "clip_high", "clip_ratio", "ratio_mean"), fracs, strict=True))


SAMPLER_IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def sampler_importance_weights(
    old_logp: Tensor, sampler_logp: Tensor, mask: Tensor, mode: str = "token_truncate",
    clip_max: float | None = 3.0, clip_min: float | None = None,
) -> tuple[Tensor, dict]:  # fmt: skip
    """Truncated / masked importance sampling for a sampler that is not the trainer (TIS, MIS).

    A serving engine (vLLM, SGLang; here: the policy in bfloat16) samples y ~ pi_sampler, while
    the loss is built on the trainer's own pi_old (recomputed in fp32): the samples are slightly
    off-policy. The correction weight, constant in the loss (data, detached):

        token:     log r_it = m_it (log pi_old(y_it) - log pi_sampler(y_it))
        sequence:  log r_i  = sum_t m_it (log pi_old(y_it) - log pi_sampler(y_it))  (no 1/|y_i|)
        "*_truncate" (TIS): w = clip(r, C_min, C_max)
        "*_mask"     (MIS): w = r if C_min <= r <= C_max else 0   (drop the token / the sequence)

    and the per-token loss becomes w * L_t (the KL term is not weighted). With C_max = inf and
    no C_min, w is the plain importance weight: E_sampler[w f] = E_old[f] exactly for the
    sequence modes (token modes weigh each token by its own ratio: the usual per-token
    approximation). Truncation trades that unbiasedness for bounded variance.
    TRL ``vllm_importance_sampling_mode`` (same four names), ``vllm_importance_sampling_clip_max``
    (C_max; the deprecated ``vllm_importance_sampling_cap``) and ``..._clip_min``; verl's rollout
    correction (``rollout_is="token"|"sequence"``, ``rollout_is_threshold``). A NaN sampler
    log-prob (one the engine could not score) gets weight 1, as in TRL.

    old_logp, sampler_logp, mask: [B, T]. ``clip_max``/``clip_min`` None mean no bound (a
    truncate mode needs one of them). Returns ``(weights [B, T], stats)``; sequence modes give
    every token of a completion its sequence's weight. stats (python floats over the masked
    tokens; sequence modes over the completions): is_ratio_mean, is_ratio_min, is_ratio_max (of
    w, as TRL's sampling/importance_sampling_ratio/*), is_clipped_frac (w != r), and
    logp_diff_mean, logp_diff_max (|log pi_old - log pi_sampler| per token).
    """
    _ndim("old_logp", old_logp, 2, "[B, T]")
    _same_shape("old_logp", old_logp, sampler_logp=sampler_logp, mask=mask)
    _choice("mode", mode, SAMPLER_IS_MODES)
    for name, c in (("clip_max", clip_max), ("clip_min", clip_min)):
        if c is not None:
            _in_range(name, c)
    if clip_max is not None and clip_min is not None and not clip_min < clip_max:
        raise ValueError(f"clip_min must be < clip_max, got clip_min={clip_min}, clip_max={clip_max}")
    if mode.endswith("truncate") and clip_max is None and clip_min is None:
        raise ValueError(f"clip_max or clip_min must be set for mode={mode!r} (a truncation needs a bound)")
    with torch.no_grad():
        m = mask.to(old_logp.dtype)
        diff = torch.nan_to_num((old_logp - sampler_logp) * m, nan=0.0)
        sequence = mode.startswith("sequence")
        log_r = diff.sum(-1, keepdim=True) if sequence else diff  # [B, 1] or [B, T]
        r = torch.exp(log_r)
        lo = -float("inf") if clip_min is None else clip_min
        hi = float("inf") if clip_max is None else clip_max
        if mode.endswith("truncate"):
            w = torch.clamp(r, min=lo, max=hi)
        else:
            w = r.masked_fill((r < lo) | (r > hi), 0.0)
        weights = w.expand_as(old_logp).clone()

        sel = (m.sum(-1) > 0) if sequence else m.bool()
        flat_w, flat_r = (w[:, 0][sel], r[:, 0][sel]) if sequence else (w[sel], r[sel])
        delta = (old_logp - sampler_logp).abs()[m.bool() & ~torch.isnan(sampler_logp)]

        def stat(x, f):
            return float(f(x)) if x.numel() else 0.0

        stats = {
            "is_ratio_mean": stat(flat_w, torch.mean),
            "is_ratio_min": stat(flat_w, torch.min),
            "is_ratio_max": stat(flat_w, torch.max),
            "is_clipped_frac": stat((flat_w != flat_r).to(old_logp.dtype), torch.mean),
            "logp_diff_mean": stat(delta, torch.mean),
            "logp_diff_max": stat(delta, torch.max),
        }
    return weights, stats


# ------------------------------------------------ plugging in a replacement (`grpo_edu.plug`)

# name -> a replacement that every call of that function of the core uses instead (the library's
# own calls, these functions' calls of each other, and a caller's that imported it by name).
# `grpo_edu.plug` is its only writer (checked, and restored on exit).
PLUGGED: dict = {}
_running: set = set()  # the names whose replacement is running now


def _pluggable(fn):
    """``fn`` that defers to ``PLUGGED[fn.__name__]`` when there is one. Inside a replacement,
    a call of the same name is the library's own (a replacement may wrap the original)."""
    name = fn.__name__

    @functools.wraps(fn)
    def call(*args, **kwargs):
        replacement = PLUGGED.get(name)
        if replacement is None or name in _running:
            return fn(*args, **kwargs)
        _running.add(name)
        try:
            return replacement(*args, **kwargs)
        finally:
            _running.discard(name)

    return call


for _name in __all__:  # every public function consults the registry (one wrapper each, at import)
    globals()[_name] = _pluggable(globals()[_name])
del _name
