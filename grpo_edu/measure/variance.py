"""How noisy is each policy-gradient estimator: gradient variance, score norms, the optimal baseline.

Each docstring says which numbers are MEASURED (run the code) and which COMPUTED (a formula).
The functional core is called through its module (``Fn.group_advantages``): ``grpo_edu.plug`` reaches it.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from .. import functional as Fn
from ..algorithms import GRPOConfig
from ..algorithms.critic import Critic
from ..rollout import completion_values, sample_batch, sequence_logprobs
from .common import flat_grad, progress_bar, rngs, trainable


def fit_critic(
    policy, task, steps: int = 150, batch: int = 512, lr: float = 1e-3, seed: int = 0, progress: bool = True
):
    """Fit V_phi(s_t) to the sampled returns of a FIXED policy (the policy is not trained):
    ``steps`` x `grpo_edu.algorithms.critic.Critic.step` on fresh batches of ``batch`` distinct
    prompts, G_t = R (gamma = 1, outcome reward), from the policy's trunk.

    Returns ``(critic ValueModel, info)``; MEASURED on a fresh batch:
    info["explained_variance"] = 1 - Var(R - V(s_0)) / Var(R), at the first answer token only. Near 0:
    the prompt alone does not say which answers will fail (at s_0 no answer token is sampled yet; at
    T=1 failures are sampling noise). V(s_t) by position, once digits are written:
    `grpo_edu.measure.credit`.
    """
    device = next(policy.parameters()).device
    rng, gen = np.random.default_rng(seed), torch.Generator(device=device).manual_seed(seed)
    critic = Critic(policy, lr=lr)
    critic.model.train()
    losses = []
    for _ in progress_bar(range(steps), progress, "fit critic"):
        ro, scores, _ = sample_batch(policy, task, batch, 1, rng, gen)
        losses.append(critic.step(ro, Fn.discounted_returns(scores, ro.mask, 1.0), ro.mask))
    critic.model.eval()
    with torch.no_grad():
        ro, scores, _ = sample_batch(policy, task, batch, 1, rng, gen)
        R, v0 = scores.sum(1), critic.values(ro)[:, 0]
    ev = 1.0 - float((R - v0).var()) / float(R.var()) if float(R.var()) > 0 else math.nan
    return critic.model, {
        "explained_variance": ev,
        "value_loss": float(np.mean(losses[-10:])) if losses else math.nan,
        "reward_mean": float(R.mean()),
        "value_mean": float(v0.mean()),
        "steps": steps,
    }


ESTIMATORS = ("raw", "batch_mean", "critic", "gae", "group_mean", "group_loo", "group_norm", "optimal")
GROUP_ESTIMATORS = ("group_mean", "group_loo", "group_norm")
# measured on request only (not among the defaults): PPO's own advantage, which needs the policy (`ppo_advantages`)
PPO_ESTIMATOR = "ppo"

GRPO_EPS = GRPOConfig.adv_eps  # eps of (r - mean) / (std + eps): GRPO's default (1e-4), not Fn's (1e-6)


def variance_stats(grads) -> dict:
    """COMPUTED (float64) from K gradient estimates ``grads [K, P]``, K >= 2:

        g_bar = 1/K sum_k g_k,   total_variance = tr Cov = sum_k |g_k - g_bar|^2 / (K - 1)
        mean_sq_norm = |g_bar|^2,   relative_variance = tr Cov / |g_bar|^2  (inverse SNR)
        relative_variance_corrected = tr Cov / (|g_bar|^2 - tr Cov / K)
        mean_cosine = 1/K sum_k cos(g_k, mean of the other K - 1)      (leave-one-out)

    E|g_bar|^2 = |E g|^2 + tr Cov / K, so the corrected ratio removes that bias (inf when
    the signal is not detectable: the denominator is <= 0).
    """
    g = torch.as_tensor(grads).to(torch.float64)
    if g.dim() != 2 or g.shape[0] < 2:
        raise ValueError(f"grads must be [K, P] with K >= 2, got {tuple(g.shape)}")
    K, mean = g.shape[0], g.mean(0)
    tv, msn = float(((g - mean) ** 2).sum() / (K - 1)), float(mean @ mean)
    cos = torch.nn.functional.cosine_similarity(g, (K * mean - g) / (K - 1), dim=1)
    signal = msn - tv / K  # estimates |E g|^2
    return {
        "total_variance": tv,
        "mean_sq_norm": msn,
        "relative_variance": tv / msn if msn > 0 else math.inf,
        "relative_variance_corrected": tv / signal if signal > 0 else math.inf,
        "mean_cosine": float(cos.mean()),
    }


def optimal_baseline(rewards, score_norm2) -> float:
    """COMPUTED: the constant b minimising tr Cov of (R - b) s, s = grad log pi(y) (E[s] = 0: b
    does not move the mean), a score-norm-weighted mean reward, far below the mean reward when
    wrong answers (R = 0) have the larger |s|^2:

        d/db E[(R - b)^2 |s|^2] = 0   =>   b* = E[R |s|^2] / E[|s|^2]
    """
    r, s2 = (torch.as_tensor(x, dtype=torch.float64) for x in (rewards, score_norm2))
    if r.shape != s2.shape or r.numel() == 0:
        raise ValueError(
            f"rewards and score_norm2 must be alike and non-empty, got {tuple(r.shape)} and {tuple(s2.shape)}"
        )
    return float((r * s2).sum() / s2.sum())


class _FittedCritic:
    """A fitted critic (a `ValueModel`) where `PPO.prepare` reads V(s_t): ``critic.values(rollout)``."""

    def __init__(self, model, known=None):
        self.model, self.known = model, known  # known: this rollout's V(s_t), already computed

    @torch.no_grad()
    def values(self, rollout) -> torch.Tensor:
        return self.known if self.known is not None else completion_values(self.model, rollout)


def ppo_advantages(policy, critic, rollout, scores, values=None, **config) -> torch.Tensor:
    """PPO's advantages [B, T] at its start, where its policy is its reference, as `PPO.prepare` computes
    them (PPO's default config, or ``config``'s overrides): GAE of the reward less beta k1 (k1 = 0 where
    pi = pi_ref, up to rounding) with ``critic``'s V(s_t) (a fitted `ValueModel`), then whitened over the
    batch's tokens (``whiten_advantages``): the batch mean subtracted (a second baseline), the std divided out.
    ``values``: ``critic``'s V(s_t) of this rollout when the caller has them (not computed again)."""
    from ..algorithms import make_algorithm

    algo = make_algorithm("ppo", **config)
    algo.policy = algo.reference = policy
    algo.critic = _FittedCritic(critic, values)
    return algo.prepare(rollout, scores).advantages


def estimator_advantages(name, rollout, scores, group_size=1, values=None, b_star=None, gae_lambda=1.0):
    """The advantage A of one estimator, [B] or [B, T] (R = sum_t r_t, here 0/1):

    raw        A = R                                   REINFORCE
    batch_mean A = R - mean_batch(R)
    optimal    A = R - b*                              b* from a separate batch
    critic     A_t = G_t - V(s_t)                      value baseline, gamma = 1
    gae        A_t = GAE(gamma=1, lambda) from V       PPO's, unwhitened (= critic at lambda=1)
    group_mean A = R - mean_group(R)                   Dr. GRPO (biased: (G-1)/G of RLOO's step)
    group_loo  A = R - mean of the other G-1 in the group   RLOO (unbiased)
    group_norm A = (R - mean_group(R)) / (std_group(R) + 1e-4)     GRPO

    PPO's own ("ppo": gae, then whitened over the batch) needs the policy: `ppo_advantages`.
    """
    if name == PPO_ESTIMATOR:
        raise ValueError("the 'ppo' estimator needs the policy and the critic: use ppo_advantages")
    mask, R = rollout.mask, Fn.masked_sum(scores, rollout.mask, dim=1)
    if name in ("raw", "batch_mean", "optimal"):
        return R - {"raw": 0.0, "batch_mean": R.mean(), "optimal": b_star}[name]
    if name in GROUP_ESTIMATORS:
        scale = "group" if name == "group_norm" else "none"
        return Fn.group_advantages(R, group_size, scale=scale, eps=GRPO_EPS, leave_one_out=name == "group_loo")[0]
    if name == "critic":
        return (Fn.discounted_returns(scores, mask, 1.0) - values) * mask
    if name == "gae":
        return Fn.gae(scores, values, mask, 1.0, gae_lambda)[0]
    raise ValueError(f"unknown estimator {name!r}; choose from {ESTIMATORS}")


def gradient_variance(
    policy,
    task,
    estimators=ESTIMATORS,
    n_batches=32,
    prompts_per_batch=64,
    group_size=GRPOConfig.group_size,
    layout="group",
    critic=None,
    seed=0,
    progress=True,
    gae_lambda=1.0,
    critic_steps=150,
    ppo_config=None,
) -> dict:
    """MEASURED: the spread of K = n_batches policy-gradient estimates at one fixed policy. For
    each of K batches of N = prompts_per_batch x group_size sequences and each estimator e:

        g_k^e = grad_theta 1/N sum_i sum_t A^e_{i,t} log pi_theta(a_{i,t} | s_{i,t})

    one backward per estimator on the SAME batch (estimators differ only in A);
    ``layout="distinct"``: N distinct prompts x 1 sample (group estimators skipped). Returns
    ``{e: variance_stats(g^e_1..K) | {"cosine_to_raw": cos(g_bar^e, g_bar^raw)}}`` (near 1: all
    are unbiased) and "_meta". A critic is fitted (``critic_steps``) when not given; b* comes
    from ``score_norms`` on a separate batch. group_norm divides A by std ~ 0.3, scaling the
    raw variance: compare the relative numbers and cosines. ``"ppo"`` (asked for by name, not a
    default): PPO's own advantage, `ppo_advantages` with ``ppo_config``'s overrides (GAE at PPO's
    lambda, whitened over the batch's tokens).
    """
    unknown = [e for e in estimators if e not in (*ESTIMATORS, PPO_ESTIMATOR)]
    if layout not in ("group", "distinct") or unknown or not estimators or n_batches < 2:
        raise ValueError(
            f"need layout 'group'|'distinct' (got {layout!r}), estimators from {(*ESTIMATORS, PPO_ESTIMATOR)} "
            f"(unknown: {unknown}) and n_batches >= 2 (got {n_batches})"
        )
    t0, N = time.perf_counter(), prompts_per_batch * group_size
    n_prompts, G = (prompts_per_batch, group_size) if layout == "group" else (N, 1)
    skipped = [e for e in estimators if e in GROUP_ESTIMATORS and G < 2]
    estimators = [e for e in estimators if e not in skipped]
    meta = dict(layout=layout, n_batches=n_batches, sequences_per_batch=N, prompts_per_batch=n_prompts)
    meta.update(group_size=G, skipped=skipped)
    if {"critic", "gae", PPO_ESTIMATOR} & set(estimators) and critic is None:
        critic, info = fit_critic(policy, task, steps=critic_steps, seed=seed + 1, progress=progress)
        meta["critic_explained_variance"] = info["explained_variance"]
    b_star = score_norms(policy, task, n=min(N, 512), seed=seed + 2)["b_star"] if "optimal" in estimators else None
    meta["b_star"] = b_star
    rng, gen = rngs(seed, next(policy.parameters()).device)
    grads, rewards, zero_std = {e: [] for e in estimators}, [], []
    was_training, _ = policy.training, policy.eval()
    with trainable(policy) as params:
        for _ in progress_bar(range(n_batches), progress, f"gradient variance ({layout})"):
            ro, scores = sample_batch(policy, task, n_prompts, G, rng, gen)[:2]
            rewards.append(R := scores.sum(1))
            zero_std.append(float((R.view(-1, G).amax(1) == R.view(-1, G).amin(1)).float().mean()))
            with torch.no_grad():
                values = completion_values(critic, ro) if critic is not None else None
            logp = sequence_logprobs(policy, ro)  # [B, T], differentiable, one forward per batch
            for j, e in enumerate(estimators):
                if e == PPO_ESTIMATOR:
                    A = ppo_advantages(policy, critic, ro, scores, values, **(ppo_config or {}))
                else:
                    A = estimator_advantages(e, ro, scores, G, values, b_star, gae_lambda)
                loss = Fn.masked_sum(Fn.policy_gradient_loss(logp, A), ro.mask, dim=1).mean()
                grads[e].append(-flat_grad(loss, params, retain_graph=j < len(estimators) - 1).cpu())
    policy.train(was_training)
    out = {e: variance_stats(torch.stack(gs)) for e, gs in grads.items()}
    if "raw" in grads:
        g_bar = {e: torch.stack(gs).double().mean(0) for e, gs in grads.items()}
        for e in grads:
            out[e]["cosine_to_raw"] = float(torch.nn.functional.cosine_similarity(g_bar[e], g_bar["raw"], dim=0))
    R, zero = torch.cat(rewards), float(np.mean(zero_std)) if G > 1 else None
    meta.update(reward_mean=float(R.mean()), reward_std=float(R.std()), frac_zero_std_groups=zero)
    meta.update(n_params=sum(p.numel() for p in policy.parameters()), seconds=time.perf_counter() - t0)
    return {**out, "_meta": meta}


def row_score_norms(policy, rollout) -> torch.Tensor:
    """MEASURED: |s_i|^2 = |grad_theta log pi(y_i | q_i)|^2 of every row of ``rollout``, float64 [B]
    (one backward per row: log pi(y_i) = sum_t log pi(a_t | s_t) of row i alone, then its gradient)."""
    device, norms = next(policy.parameters()).device, []
    with trainable(policy) as params:
        for i in range(rollout.batch_size):
            logp_i = sequence_logprobs(policy, rollout.select(torch.tensor([i], device=device))).sum()
            norms.append(float(flat_grad(logp_i, params).double().pow(2).sum()))
    return torch.tensor(norms, dtype=torch.float64)


def score_norms(policy, task, n=512, seed=0) -> dict:
    """MEASURED: |s_i|^2 = |grad_theta log pi(y_i | q_i)|^2 of n sampled answers (distinct
    prompts, one backward each). COMPUTED: its mean over R = 1 / R = 0 ("score_norm2_correct"
    / "_wrong", nan if none), "b_star" (``optimal_baseline``), "corr" = Pearson(R, |s|^2),
    "mean_reward"; per-sample "rewards", "score_norm2" (numpy). Wrong answers come from
    low-probability tokens: larger score norms, so b* sits far below the mean reward.
    """
    device = next(policy.parameters()).device
    ro, scores = sample_batch(policy, task, n, 1, *rngs(seed, device))[:2]
    s2 = row_score_norms(policy, ro)
    R = scores.sum(1).cpu().double()
    ok = R > 0.5
    corr = float(np.corrcoef(R.numpy(), s2.numpy())[0, 1]) if 0 < int(ok.sum()) < n else math.nan
    return {
        "score_norm2_correct": float(s2[ok].mean()) if ok.any() else math.nan,
        "score_norm2_wrong": float(s2[~ok].mean()) if not ok.all() else math.nan,
        "mean_reward": float(R.mean()),
        "b_star": optimal_baseline(R, s2),
        "corr": corr,
        "n": n,
        "rewards": R.numpy(),
        "score_norm2": s2.numpy(),
    }
