"""Easy and hard prompts: the algebra of a per-prompt baseline, and its measurement.

For a 0/1 reward and p_q = P(right | q), the variance of R splits into a part within prompts
and a part between them (the law of total variance):

    Var(R) = E_q[p_q (1 - p_q)] + Var_q(p_q)

The best value of a prompt is V(q) = p_q, so a baseline that sees only the prompt (a critic's V(s_0)
among them; not its V(s_t) once answer tokens are written, `grpo_edu.measure.credit`) explains at most

    EV_max = Var_q(p) / Var(R)

and against the batch mean a per-prompt baseline from G samples of each prompt leaves

    Var(R - b_loo)   / Var(R - b_batch) = G/(G-1) (1 - EV_max)   RLOO: the mean of the other G-1
    Var(R - b_group) / Var(R - b_batch) = (G-1)/G (1 - EV_max)   the group mean (r_i inside it)
    Var(R - p_q)     / Var(R - b_batch) =          1 - EV_max    a perfect critic

so the leave-one-out group beats the batch mean iff EV_max > 1/G. That is the advantage.
A gradient weighs each answer's (R - b)^2 by its score norm |s|^2 = |grad log pi(y | q)|^2,

    tr Cov(g) ~ (1/N) E[(R - b)^2 |s|^2]

and the sure answers of easy prompts have small score norms, their rare wrong answers large
ones, so what a per-prompt baseline removes there weighs little (`score_weighted_ratios`);
the variance-optimal per-prompt baseline is b*_q = E[R |s|^2 | q] / E[|s|^2 | q], not p_q.

COMPUTED (formulas, hand-checked in tests/test_difficulty.py): `variance_decomposition`,
`tied_share`, `advantage_ratios`, `score_weighted_ratios`, `per_prompt_optimal_baseline`, `pass_at_k`,
`std_weight`, `group_push`, `easy_mask`. MEASURED (sample the policy): `prompt_success`,
`score_norms_by_prompt`, `pass_at_k_curve`, `measure_world` (all of it at one policy).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..algorithms import GRPOConfig
from ..rollout import completion_values, generate, sample_batch
from .common import rngs
from .variance import fit_critic, gradient_variance, row_score_norms

PASS_KS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


# ------------------------------------------------------------------ the algebra (computed)
def variance_decomposition(p, group_size: int = GRPOConfig.group_size, n_samples: int | None = None) -> dict:
    """COMPUTED from per-prompt success rates ``p`` [n_prompts] (one prompt drawn uniformly):

        within = E_q[p (1 - p)],   between = Var_q(p),   total = within + between = pbar (1 - pbar)
        ev_max = between / total
        predicted["group_loo"]  = G/(G-1) (1 - ev_max)     (Var(R - b) / Var(R - b_batch))
        predicted["group_mean"] = (G-1)/G (1 - ev_max),    predicted["critic"] = 1 - ev_max
        tied = E[p^G + (1-p)^G]  (the share of groups of G whose rewards all agree), all_right = E[p^G]

    ``n_samples``: ``p`` are estimates k/n from n samples each; then within uses the unbiased
    p (1 - p) n / (n - 1) and between = total - within (Var of the estimates is Var_q(p) plus
    the sampling noise E[p (1 - p)] / n, which would inflate ev_max), and tied, all_right and
    all_wrong are `tied_share`'s unbiased estimates from the counts k (the plug-in k/n in the
    convex p^G + (1-p)^G overstates them; nan when n < G, where no unbiased estimate exists)."""
    p = np.asarray(p, dtype=np.float64)
    G = int(group_size)
    if p.ndim != 1 or p.size == 0 or not np.all((p >= 0) & (p <= 1)):
        raise ValueError(f"p must be a non-empty 1-d array of success rates in [0, 1], got shape {p.shape}")
    if G < 2:
        raise ValueError(f"group_size must be >= 2 (a group baseline needs another sample), got {group_size}")
    if n_samples is not None and int(n_samples) < 2:
        raise ValueError(f"n_samples must be None or >= 2, got {n_samples}")
    pbar = float(p.mean())
    total = pbar * (1 - pbar)
    if n_samples is None:
        within = float((p * (1 - p)).mean())
        between = float(p.var())
    else:
        n = int(n_samples)
        within = min(float((p * (1 - p)).mean()) * n / (n - 1), total)
        between = total - within
    ev_max = between / total if total > 0 else math.nan
    if n_samples is None:
        ties = {"tied": float((p**G + (1 - p) ** G).mean()), "all_right": float((p**G).mean()),
                "all_wrong": float(((1 - p) ** G).mean())}  # fmt: skip
    elif int(n_samples) < G:
        ties = dict.fromkeys(("tied", "all_right", "all_wrong"), math.nan)
    else:
        ties = tied_share(np.rint(p * int(n_samples)).astype(int), int(n_samples), G)
    return {
        "mean": pbar,
        "within": within,
        "between": between,
        "total": total,
        "ev_max": ev_max,
        "group_size": G,
        "predicted": {
            "critic": 1 - ev_max,
            "group_mean": (G - 1) / G * (1 - ev_max),
            "group_loo": G / (G - 1) * (1 - ev_max),
        },
        **ties,
    }


def tied_share(correct, n: int, group_size: int = GRPOConfig.group_size) -> dict:
    """COMPUTED: the unbiased share of tied groups from ``correct`` [n_prompts] right answers
    among ``n`` samples of each prompt: for one prompt with k right,

        all_right = C(k, G) / C(n, G),   all_wrong = C(n - k, G) / C(n, G),   tied = their sum

    the chance that G of its n samples, drawn without replacement, are all right (all wrong); its
    expectation over k ~ Bin(n, p) is exactly p^G ((1 - p)^G), where the plug-in (k/n)^G is biased
    upward (Jensen: x^G is convex). Each is the mean over prompts (one prompt drawn uniformly)."""
    n, G = int(n), int(group_size)
    k = np.asarray(correct)
    if k.ndim != 1 or k.size == 0 or not np.all((k >= 0) & (k <= n) & (k == np.round(k))):
        raise ValueError(f"correct must be a non-empty 1-d array of counts in [0, n={n}], got shape {k.shape}")
    if not 2 <= G <= n:
        raise ValueError(f"tied_share needs 2 <= group_size <= n, got group_size={group_size}, n={n}")
    total = math.comb(n, G)
    right = np.array([math.comb(int(c), G) / total for c in k])
    wrong = np.array([math.comb(n - int(c), G) / total for c in k])
    return {"tied": float((right + wrong).mean()), "all_right": float(right.mean()), "all_wrong": float(wrong.mean())}


def advantage_ratios(rewards, values=None) -> dict:
    """COMPUTED from grouped rewards ``[n_prompts, G]`` (row = one prompt's G samples) and,
    optionally, a critic's V(s_0) of each sample (same shape): mean squared advantage of each
    baseline over the batch mean's,

        ratio[b] = mean (R - b)^2 / mean (R - mean(R))^2

    for b = the leave-one-out mean ("group_loo"), the group mean ("group_mean") and V ("critic").
    Also the share of groups that tie ("tied", "all_right", "all_wrong")."""
    R = torch.as_tensor(rewards, dtype=torch.float64)
    if R.dim() != 2 or R.shape[1] < 2:
        raise ValueError(f"rewards must be [n_prompts, G] with G >= 2, got {tuple(R.shape)}")
    G = R.shape[1]
    batch = float(((R - R.mean()) ** 2).mean())
    mean = R.mean(1, keepdim=True)
    loo = (R.sum(1, keepdim=True) - R) / (G - 1)
    out = {"group_loo": float(((R - loo) ** 2).mean()), "group_mean": float(((R - mean) ** 2).mean())}
    if values is not None:
        V = torch.as_tensor(values, dtype=torch.float64)
        if V.shape != R.shape:
            raise ValueError(f"values must have the rewards' shape {tuple(R.shape)}, got {tuple(V.shape)}")
        out["critic"] = float(((R - V) ** 2).mean())
    ratios = {k: v / batch if batch > 0 else math.nan for k, v in out.items()}
    tied = R.amax(1) == R.amin(1)
    return {
        "ratio": ratios,
        "batch": batch,
        "tied": float(tied.float().mean()),
        "all_right": float((tied & (R[:, 0] > 0)).float().mean()),
        "all_wrong": float((tied & (R[:, 0] <= 0)).float().mean()),
    }


def per_prompt_optimal_baseline(rewards, score_norm2):
    """COMPUTED per prompt (rows of ``[n_prompts, n]``): b*_q = sum_i R_i |s_i|^2 / sum_i |s_i|^2,
    the constant that minimises E[(R - b)^2 |s|^2 | q] (`measure.optimal_baseline`, per prompt)."""
    R, s2 = (torch.as_tensor(x, dtype=torch.float64) for x in (rewards, score_norm2))
    if R.shape != s2.shape or R.dim() != 2:
        raise ValueError(
            f"rewards and score_norm2 must both be [n_prompts, n], got {tuple(R.shape)}, {tuple(s2.shape)}"
        )
    return ((R * s2).sum(1) / s2.sum(1)).numpy()


def score_weighted_ratios(
    rewards, score_norm2, p, group_size: int = GRPOConfig.group_size, prompt_weights=None
) -> dict:
    """COMPUTED: the advantage algebra with every answer weighted by its score norm, i.e. the
    predicted tr Cov(g) of a baseline over the batch mean's (``rewards``, ``score_norm2`` [n_prompts, n]
    of n samples per prompt, ``p`` [n_prompts] their success rates from many more samples):

        batch   = sum |s|^2 (R - pbar)^2                                  (pbar: the mean of p)
        critic  = sum |s|^2 (R - p_q)^2                                   (a perfect V = p_q)
        group_loo = sum |s|^2 [(R - p_q)^2 + p_q (1 - p_q) / (G - 1)]     (b_loo: mean p_q, its noise)
        b_star  = sum |s|^2 (R - b*_q)^2                                  (b*_q from these samples)

    each over ``batch``. With |s|^2 the same for every answer these are the unweighted
    predictions (`variance_decomposition`): the gap between the two is the score norms' doing.
    ``prompt_weights`` [n_prompts] (default equal): how often the world draws each prompt
    (pbar and every sum weighted by it), for prompts chosen, say, half easy and half hard."""
    R, s2 = (torch.as_tensor(x, dtype=torch.float64) for x in (rewards, score_norm2))
    q = torch.as_tensor(p, dtype=torch.float64)[:, None]
    if R.shape != s2.shape or R.dim() != 2 or q.shape[0] != R.shape[0]:
        raise ValueError("rewards, score_norm2 must be [n_prompts, n] and p [n_prompts]")
    G = int(group_size)
    w = torch.ones_like(q) if prompt_weights is None else torch.as_tensor(prompt_weights, dtype=torch.float64)[:, None]
    if w.shape != q.shape or bool((w < 0).any()) or not float(w.sum()) > 0:
        raise ValueError("prompt_weights must be [n_prompts], non-negative, not all 0")
    b_star = torch.as_tensor(per_prompt_optimal_baseline(R, s2))[:, None]
    s2 = s2 * w
    batch = float((s2 * (R - (w * q).sum() / w.sum()) ** 2).sum())
    terms = {
        "critic": (s2 * (R - q) ** 2).sum(),
        "group_loo": (s2 * ((R - q) ** 2 + q * (1 - q) / (G - 1))).sum(),
        "b_star": (s2 * (R - b_star) ** 2).sum(),
    }
    return {k: float(v) / batch if batch > 0 else math.nan for k, v in terms.items()}


def pass_at_k(n: int, c, k: int):
    """COMPUTED: the unbiased pass@k of Chen et al. (2021) from ``c`` right answers among ``n``
    samples of a prompt (``c``: an int or an array, one per prompt):

        pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n-c+1}^{n} (1 - k / i)   (1 when n - c < k)

    the chance that k of the n samples, drawn without replacement, hold at least one right one."""
    n, k = int(n), int(k)
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    c_arr = np.asarray(c)
    if np.any(c_arr < 0) or np.any(c_arr > n):
        raise ValueError(f"c must be between 0 and n={n}")
    out = np.array(
        [1.0 if n - ci < k else 1.0 - float(np.prod(1.0 - k / np.arange(n - ci + 1, n + 1))) for ci in c_arr.ravel()]
    ).reshape(c_arr.shape)
    return float(out) if out.ndim == 0 else out


def std_weight(p, group_size: int = GRPOConfig.group_size) -> np.ndarray:
    """COMPUTED: E[1 / std_g(r) | the group does not tie] for G samples at success rate p, the
    factor GRPO's ``scale_rewards="group"`` puts on a group's advantages (Dr. GRPO drops it):
    with k right of G, std = sqrt(k (G - k)) / G, so it is largest for p near 0 or 1."""
    p, G = np.atleast_1d(np.asarray(p, dtype=np.float64)), int(group_size)
    ks = np.arange(1, G)
    binom = np.array([math.comb(G, int(k)) for k in ks], dtype=np.float64)
    pk = binom * p[:, None] ** ks * (1 - p[:, None]) ** (G - ks)
    w = (pk * (G / np.sqrt(ks * (G - ks)))).sum(1)
    informative = pk.sum(1)
    return np.where(informative > 0, w / np.where(informative > 0, informative, 1.0), np.nan)


def group_push(p, group_size: int = GRPOConfig.group_size, scale: str = "group") -> np.ndarray:
    """COMPUTED: E[sum_i |A_i|] of one prompt's group at success rate p, the total push GRPO's
    update gives it: with k right of G, sum |r_i - mean| = 2 k (G - k) / G, divided by the group's
    std sqrt(k (G - k)) / G under ``scale="group"`` (GRPO: 2 sqrt(k (G - k))), not under
    ``"none"`` (Dr. GRPO). A tied group (k = 0 or G) pushes nothing."""
    if scale not in ("group", "none"):
        raise ValueError(f"scale must be 'group' or 'none', got {scale!r}")
    p, G = np.atleast_1d(np.asarray(p, dtype=np.float64)), int(group_size)
    ks = np.arange(1, G)
    binom = np.array([math.comb(G, int(k)) for k in ks], dtype=np.float64)
    pk = binom * p[:, None] ** ks * (1 - p[:, None]) ** (G - ks)
    push = 2 * np.sqrt(ks * (G - ks)) if scale == "group" else 2 * ks * (G - ks) / G
    return (pk * push).sum(1)


def easy_mask(problems, bound: int) -> np.ndarray:
    """True where both operands are < ``bound`` (the part of the world the spread reference was taught)."""
    return np.array([p.a < bound and p.b < bound for p in problems], dtype=bool)


# ------------------------------------------------------------------ measured at a policy
@torch.no_grad()
def prompt_success(policy, task, problems=None, n_prompts: int = 384, samples: int = 64, seed: int = 0,
                   temperature: float = 1.0, chunk: int = 16384) -> dict:  # fmt: skip
    """MEASURED: ``samples`` answers (temperature 1, as RL samples) to each of ``problems``
    (default: ``n_prompts`` training problems drawn with ``seed``). Returns ``{"problems",
    "correct" [n_prompts] (right answers out of n), "n", "p" (= correct / n)}``."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    problems = task.sample(n_prompts, seed) if problems is None else list(problems)
    device = next(policy.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed)
    per = max(1, chunk // samples)
    correct = []
    for i in range(0, len(problems), per):
        part = problems[i : i + per]
        ro = generate(policy, task.encode_prompts(part).to(device), samples, task.max_answer_length, temperature,
                      generator=gen, tokenizer=task.tokenizer)  # fmt: skip
        rows = [p for p in part for _ in range(samples)]
        r = task.rewards_from_ids(rows, ro.completion_ids) * (~ro.truncated).float()
        correct.append(r.view(len(part), samples).sum(1).round().long().cpu())
    c = torch.cat(correct).numpy()
    return {"problems": problems, "correct": c, "n": samples, "p": c / samples}


def score_norms_by_prompt(policy, task, problems, n: int = 16, seed: int = 0) -> dict:
    """MEASURED: n answers to each of ``problems`` and |s|^2 = |grad log pi(y | q)|^2 of each
    (`measure.variance.row_score_norms`, one backward per answer). Returns ``{"rewards",
    "score_norm2"}``, both [n_prompts, n]."""
    device = next(policy.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        ro = generate(policy, task.encode_prompts(problems).to(device), n, task.max_answer_length, 1.0,
                      generator=gen, tokenizer=task.tokenizer)  # fmt: skip
        rows = [p for p in problems for _ in range(n)]
        R = task.rewards_from_ids(rows, ro.completion_ids) * (~ro.truncated).float()
    s2 = row_score_norms(policy, ro)
    return {
        "rewards": R.double().view(len(problems), n).cpu().numpy(),
        "score_norm2": s2.view(len(problems), n).numpy(),
    }


def pass_at_k_curve(policy, task, ks=PASS_KS, n: int | None = None, problems=None, bound: int | None = None,
                    seed: int = 0) -> dict:  # fmt: skip
    """MEASURED: pass@k (`pass_at_k`, unbiased, from n = max(ks) samples per prompt unless
    given) averaged over ``problems`` (default: the held-out set), for each k of ``ks``;
    with ``bound`` also over the easy (both operands < bound) and the hard prompts alone."""
    ks = tuple(int(k) for k in ks)
    n = int(n or max(ks))
    problems = task.eval_problems() if problems is None else list(problems)
    c = prompt_success(policy, task, problems, samples=n, seed=seed)["correct"]
    parts = {"all": np.ones(len(problems), dtype=bool)}
    if bound is not None:
        easy = easy_mask(problems, bound)
        parts.update(easy=easy, hard=~easy)
    out = {"ks": list(ks), "n": n, "correct": c}
    for name, sel in parts.items():
        out[name] = {k: float(pass_at_k(n, c[sel], k).mean()) if sel.any() else math.nan for k in ks}
    return out


def measure_world(policy, task, bound: int = 60, group_size: int = GRPOConfig.group_size, n_prompts: int = 384, samples: int = 64,
                  batches: int = 8, prompts_per_batch: int = 64, grad_batches: int = 16, critic_steps: int = 60,
                  score_prompts: int = 48, score_samples: int = 16, seed: int = 0, progress: bool = False) -> dict:  # fmt: skip
    """MEASURED at one policy, every number of the algebra side by side:

    - "decomposition": `variance_decomposition` of p_q from ``samples`` answers to each of
      ``n_prompts`` prompts (debiased for the finite n), with EV_max and the predicted ratios;
      "p_easy" / "p_hard": the mean p_q of the prompts with both operands < ``bound`` and the rest;
    - "critic_ev": the explained variance of a critic fitted ``critic_steps`` steps (`fit_critic`);
    - "advantage": `advantage_ratios` measured on ``batches`` batches of ``prompts_per_batch`` x G
      (the RL layout), the critic's V(s_0) included, and the tied groups;
    - "gradient": tr Cov(g_b) / tr Cov(g_batch_mean) over ``grad_batches`` batches
      (`gradient_variance`, the same critic), for the leave-one-out group mean and the critic;
    - "score": |s|^2 of ``score_samples`` answers to each of ``score_prompts`` prompts: the mean
      |s|^2 of right and wrong answers on easy and hard prompts, `score_weighted_ratios`, and
      b*_q against p_q (mean of each on easy prompts)."""
    G, device = group_size, next(policy.parameters()).device
    succ = prompt_success(policy, task, n_prompts=n_prompts, samples=samples, seed=seed)
    dec = variance_decomposition(succ["p"], G, n_samples=samples)
    easy = easy_mask(succ["problems"], bound)
    critic, info = fit_critic(policy, task, steps=critic_steps, seed=seed + 1, progress=progress)
    rng, gen = rngs(seed + 2, device)
    R, V = [], []
    with torch.no_grad():
        for _ in range(batches):
            ro, scores, _ = sample_batch(policy, task, prompts_per_batch, G, rng, gen)
            R.append(scores.sum(1).view(-1, G))
            V.append(completion_values(critic, ro)[:, 0].view(-1, G))
    adv = advantage_ratios(torch.cat(R), torch.cat(V))
    gv = gradient_variance(policy, task, ("batch_mean", "group_loo", "critic"), n_batches=grad_batches,
                           prompts_per_batch=prompts_per_batch, group_size=G, critic=critic, seed=seed + 3,
                           progress=progress)  # fmt: skip
    base = gv["batch_mean"]["total_variance"]
    grad = {e: gv[e]["total_variance"] / base if base > 0 else math.nan for e in ("group_loo", "critic")}
    # score norms on a few prompts, half easy and half hard, with p_q from many samples
    pool = task.sample(8 * score_prompts, seed + 4)
    pe = easy_mask(pool, bound)
    chosen = [p for p, e in zip(pool, pe) if e][: score_prompts // 2] + [p for p, e in zip(pool, pe) if not e]
    chosen = chosen[:score_prompts]
    ce = easy_mask(chosen, bound)
    pq = prompt_success(policy, task, chosen, samples=256, seed=seed + 5)["p"]
    sn = score_norms_by_prompt(policy, task, chosen, score_samples, seed=seed + 6)
    Rs, s2 = sn["rewards"], sn["score_norm2"]
    by = {}
    for part, sel in (("easy", ce), ("hard", ~ce)):
        for what, ok in (("right", Rs > 0.5), ("wrong", Rs <= 0.5)):
            m = sel[:, None] & ok
            by[f"{part} {what}"] = float(s2[m].mean()) if m.any() else math.nan
    b_star = per_prompt_optimal_baseline(Rs, s2)
    # the score-weighted sums stand for a batch drawn from the whole world: reweight the
    # (half easy) chosen prompts to the world's share of easy ones
    share = float(easy.mean())
    w = np.where(ce, share / max(ce.mean(), 1e-12), (1 - share) / max(1 - ce.mean(), 1e-12))
    weighted = score_weighted_ratios(Rs, s2, pq, G, prompt_weights=w)
    return {
        "bound": bound,
        "decomposition": dec,
        "p_easy": float(succ["p"][easy].mean()) if easy.any() else math.nan,
        "p_hard": float(succ["p"][~easy].mean()) if (~easy).any() else math.nan,
        "easy_share": share,
        "critic_ev": info["explained_variance"],
        "advantage": adv,
        "gradient": grad,
        "score": {
            "by": by,
            "weighted": weighted,
            "b_star_easy": float(b_star[ce].mean()) if ce.any() else math.nan,
            "p_easy": float(pq[ce].mean()) if ce.any() else math.nan,
            "b_star_hard": float(b_star[~ce].mean()) if (~ce).any() else math.nan,
            "p_hard": float(pq[~ce].mean()) if (~ce).any() else math.nan,
        },
    }
