"""Checks of notebooks/01_reinforce.ipynb (the policy gradient, the maze, REINFORCE, its noise).

Before this registry the notebook held 11 assert statements: gamma^t G_t gives the true gradient; G_t
alone is the true gradient with the later rows 1/gamma too large; the Monte Carlo estimate is near the
exact gradient; one sample is noisier than the signal; both maze runs find the goal; with gamma < 1 the
greedy path is the shortest; without a discount episodes stay long; REINFORCE improves on the
reference; the sampled reward climbs; the total variance scales as 1/N (two-sided); at N batches
largely agree (with N/4's cosine below N's). All eleven run here, each with a control computed beside
it (the two-sided 1/N law as two comparisons, its upper control the total variance at N/16; the Monte Carlo
estimate's distance in standard errors; the cosine's claim as the difference N minus N/4, whose control is
the same difference between two measurements at N/4; REINFORCE's gain against its own early minimum). The results its comments called "printed, not asserted" are recorded as printed results,
with the reason; so is "with gamma < 1 the greedy path is the shortest", whose control (gamma = 1's greedy
path) took the shortest path too at shift 3.
"""

from __future__ import annotations

import numpy as np
import torch

from course.checks import Measured, check, printed

NB = "01_reinforce"


@check(
    NB,
    exact=True,
    claim="On the two-step problem, E[sum_t gamma^t G_t grad log pi] is the gradient of J_gamma (autograd)",
    control="E[sum_t G_t grad log pi], the estimator without gamma^t (its later rows 1/gamma too large)",
)
def discounted_estimator_is_the_gradient(ns):
    grad, with_discount, common = ns["grad_J"], ns["with_discount"], ns["common"]
    return Measured(
        "largest |E[sum gamma^t G_t grad log pi] - grad J|",
        (with_discount - grad).abs().max(),
        "<",
        1e-9,
        (common - grad).abs().max(),
    )


@check(
    NB,
    exact=True,
    claim="The estimator the code uses (G_t without gamma^t) is the gradient of J_gamma on the first state's "
    "row and 1/gamma times it on the later rows",
    control="the same estimator against the gradient itself, unscaled",
)
def common_estimator_rescales_later_rows(ns):
    grad, common, gamma = ns["grad_J"], ns["common"], ns["gamma"]
    scaled = torch.cat([grad[:1], grad[1:] / gamma])
    return Measured(
        "largest |E[sum G_t grad log pi] - grad J with its later rows / gamma|",
        (common - scaled).abs().max(),
        "<",
        1e-9,
        (common - grad).abs().max(),
    )


def _shuffled_estimate(ns) -> torch.Tensor:
    """The same Monte Carlo average with the rewards shuffled across the samples (E = E[R] E[score] = 0)."""
    a, R, score = ns["a"], ns["R"], ns["score"]
    gen = torch.Generator().manual_seed(ns["SEED"] + 7)
    shuffled = R[a][torch.randperm(len(a), generator=gen)]
    return (shuffled[:, None] * score[a]).mean(0)


@check(
    NB,
    claim="The Monte Carlo estimate from 20,000 samples (the library's loss) is within 4.5 standard errors of the "
    "exact gradient on every component, on the 4-armed bandit",
    control="the same average with the rewards shuffled across the samples (reward and action unlinked)",
)
def monte_carlo_is_unbiased(ns):
    grad, single = ns["grad_exact"], ns["single"]
    se = single.std(0) / len(single) ** 0.5  # the standard error of the mean of the single-sample estimates
    return Measured(
        "largest |Monte Carlo - exact gradient| / its standard error",
        ((ns["grad_mc"] - grad).abs() / se).max(),
        "<",
        4.5,
        ((_shuffled_estimate(ns) - grad).abs() / se).max(),
    )


@check(
    NB,
    claim="One sample's estimate R(a) grad log pi(a) is off by more than the gradient's own size (over 1.2 "
    "x |grad J| on average): single samples are noisier than the signal",
    control="the same distance for averages of 100 samples",
)
def single_samples_are_noisy(ns):
    single, grad = ns["single"], ns["grad_exact"]
    k = len(single) // 100 * 100
    averages = single[:k].reshape(-1, 100, single.shape[1]).mean(1)
    control = float((averages - grad).norm(dim=1).mean() / grad.norm())
    return Measured("mean |one sample's estimate - grad J| / |grad J|", ns["spread"], ">", 1.2, control)


def _uniform_success(ns, episodes: int = 320) -> float:
    from envs import MazeEnv
    from grpo_edu.demos.maze_pg import TabularPolicy, run_episodes

    env = MazeEnv(step_cost=0.0)
    ep = run_episodes(env, TabularPolicy(env.n_states, env.n_actions), n_episodes=episodes, seed=ns["SEED"])
    return float(ep.success.float().mean())


@check(
    NB,
    claim="Both maze runs find the goal: over their last 20 steps, gamma = 0.95 in over 90% of the episodes, "
    "gamma = 1 in over 80%",
    control="the untrained, uniform policy on the same maze (320 episodes)",
)
def maze_finds_the_goal(ns):
    m95, m1, control = ns["m95"], ns["m1"], _uniform_success(ns)
    return [
        Measured("gamma 0.95: share of episodes reaching G", m95["success"], ">", 0.9, control),
        Measured("gamma 1: share of episodes reaching G", m1["success"], ">", 0.8, control),
    ]


def _greedy_excess(ns, s) -> float:
    """The greedy path's length minus the shortest; a path that never reaches G counts as the episode cap."""
    length = s["greedy"] if s["greedy"] is not None else ns["maze"].max_steps
    return float(length - ns["short"])


@check(
    NB,
    claim="Without a discount, episodes stay long: gamma = 1's mean episode length (last 20 steps) over 1.2 "
    "times gamma = 0.95's",
    control="gamma = 0.95 trained again with the next seed, over this seed's run (the same setting)",
)
def maze_no_discount_stays_long(ns):
    from envs import MazeEnv
    from grpo_edu.demos.maze_pg import train_maze

    again = train_maze(env=MazeEnv(step_cost=0.0), gamma=0.95, steps=150, seed=ns["SEED"] + 1, progress=False)
    m95 = ns["m95"]["length"]
    return Measured(
        "mean episode length, gamma 1 / gamma 0.95",
        ns["m1"]["length"] / m95,
        ">",
        1.2,
        float(np.mean(again["length"][-20:])) / m95,
        "log",
    )


@check(
    NB,
    claim="REINFORCE improves on the reference: every seed's final greedy held-out accuracy is over 0.19 above "
    "the reference's",
    control="the same runs at their lowest greedy accuracy in steps 1-40, before REINFORCE has learned",
)
def reinforce_improves(ns):
    return Measured(
        "lowest of 3 seeds: final minus the reference's greedy accuracy",
        min(ns["acc_after"]) - ns["acc_before"],
        ">",
        0.19,
        min(ns["early_min"]) - ns["acc_before"],
    )


def _reference_climb(ns, batches: int = 10) -> float:
    """The untrained reference's sampled reward on fresh batches of REINFORCE's size: the mean of the last
    ``batches/2`` minus the mean of the first ``batches/2`` (about 0: nothing learns)."""
    from grpo_edu import sample_batch

    preset = ns["preset"]
    rng = np.random.default_rng(ns["SEED"] + 1000)
    gen = torch.Generator(device=preset.device).manual_seed(ns["SEED"] + 1000)
    rewards = [
        float(sample_batch(ns["reference"], ns["task"], preset.sequences_per_step, 1, rng, gen)[1].sum(1).mean())
        for _ in range(batches)
    ]
    half = batches // 2
    return float(np.mean(rewards[half:]) - np.mean(rewards[:half]))


@check(
    NB,
    claim="The sampled reward climbs: each seed's mean over its last 5 steps is over 0.2 above its first 5 steps'",
    control="the untrained reference on 10 fresh batches of the same size (the last 5 minus the first 5)",
)
def reward_climbs(ns):
    climb = min(r1 - r0 for r0, r1 in zip(ns["reward_start"], ns["reward_end"]))
    return Measured(
        "lowest of 3 seeds: sampled reward, last 5 steps minus first 5", climb, ">", 0.2, _reference_climb(ns)
    )


def _raw_variance(ns, n: int, seed: int) -> dict:
    """REINFORCE's gradient statistics at the reference, K batches of ``n`` distinct prompts, as section 4."""
    from grpo_edu import measure

    v = measure.gradient_variance(
        ns["reference"],
        ns["task"],
        estimators=("raw",),
        n_batches=ns["K"],
        layout="distinct",
        prompts_per_batch=n,
        group_size=1,
        seed=seed,
        progress=False,
    )
    return v["raw"]


@check(
    NB,
    claim="The total variance of the gradient scales as 1/N: a quarter of the batch gives between 2.8 and 5.7 "
    "times the total variance (1/N predicts 4; N^-a with a between about 0.74 and 1.26)",
    control="for the lower bound, the squared norm of the mean gradient, which does not scale with N; for the "
    "upper, the total variance at N/16 over at N (1/N predicts 16)",
)
def variance_scales_as_one_over_n(ns):
    big, small, ratio = ns["big"], ns["small"], ns["ratio"]
    signal = small["mean_sq_norm"] / big["mean_sq_norm"]
    sixteenth = _raw_variance(ns, ns["N"] // 16, ns["SEED"])["total_variance"] / big["total_variance"]
    return [
        Measured("total variance at N/4 over at N (above)", ratio, ">", 2.8, signal, "log"),
        Measured("total variance at N/4 over at N (below)", ratio, "<", 5.7, sixteenth, "log"),
    ]


@check(
    NB,
    claim="Batch gradients agree more at REINFORCE's batch N than at N/4: the mean cosine of a batch gradient to "
    "the others' mean is over 0.1 higher at N",
    control="the same difference between two independent measurements at N/4 (the next seed's minus this one's)",
)
def batches_agree_at_n(ns):
    again = _raw_variance(ns, ns["N"] // 4, ns["SEED"] + 1)["mean_cosine"]
    small = ns["small"]["mean_cosine"]
    return Measured(
        "mean cosine of a batch gradient to the others' mean, N minus N/4",
        ns["big"]["mean_cosine"] - small,
        ">",
        0.1,
        again - small,
    )


# ------------------------------------------------------------------ printed, not checked


@printed(
    NB,
    claim="With gamma < 1 (0.95) the greedy policy takes the shortest path",
    control="the gamma = 1 run's greedy path (a path that never reaches G counts as the episode cap)",
    why="its control fails on some seeds only: gamma = 1's greedy path never reached G at shifts 0, 1, 2 and 4 "
    "but took the shortest path too at shift 3; gamma = 0.95's was the shortest at all five shifts, which the "
    "lesson quotes. What the discount changes on every seed is asserted: the episodes' length "
    "(maze_no_discount_stays_long)",
)
def maze_discount_finds_shortest(ns):
    return Measured(
        "gamma 0.95: greedy path length - shortest",
        _greedy_excess(ns, ns["m95"]),
        "<",
        0.5,
        _greedy_excess(ns, ns["m1"]),
    )


@printed(
    NB,
    claim="The relative variance of REINFORCE's gradient is below 1 at its batch (N) and above 1 at N/4",
    why="below 1 at N and above 1 at N/4 at every one of shifts 0-4 (0.31 to 0.84 and 1.43 to 2.72), but on a log "
    "scale within 2.5 sd of 1 on each side; at held-out shift 21 (native) it was 1.07 at N",
)
def relative_variance(ns):
    return [
        Measured("relative variance at N", ns["big"]["relative_variance_corrected"], "<", 1.0, scale="log"),
        Measured("relative variance at N/4", ns["small"]["relative_variance_corrected"], ">", 1.0, scale="log"),
    ]


@printed(
    NB,
    claim="REINFORCE's lowest seed ends above 0.85 greedy held-out accuracy in 128 steps",
    why="above it at shifts 0-4 (the lesson quotes the range), but not on every reference: at shift 14 on the "
    "`default` kernel the three seeds ended at 0.838, 0.820 and 0.750 (commit f24bb07; 0.772 at an earlier commit)",
)
def final_accuracy(ns):
    return Measured("lowest of 3 seeds: final greedy accuracy", min(ns["acc_after"]), ">", 0.85)


@printed(
    NB,
    claim="Greedy accuracy dips below the reference's in steps 1-40 before it climbs, in most runs",
    why="in most runs, not all: a count of 3 runs, which no bound holds",
)
def greedy_dip(ns):
    return Measured("runs of 3 that dip below the reference in steps 1-40", ns["n_dip"], ">", 0.5)


@printed(
    NB,
    claim="The gradient norm moves by about a third of its mean from one step to the next",
    why="its control, the jitter of a gradient without the batch's sampling noise, is not run here (section 4 "
    "measures that noise directly); 0.25 to 0.36 before the registry",
)
def grad_norm_jitter(ns):
    return Measured("largest of 3 seeds: mean |change| of the gradient norm / its mean", max(ns["jitter"]), ">", 0.1)


@printed(
    NB,
    claim="The sampled reward stays below the greedy accuracy, at the start and at the end",
    why="the reference passes it too, and no policy here is sure enough for the two to meet",
)
def reward_below_greedy(ns):
    gap = min(a - r for a, r in zip(ns["acc_after"], ns["reward_end"]))
    return Measured("least of 3 seeds: final greedy accuracy minus last-5 sampled reward", gap, ">", 0.0)
