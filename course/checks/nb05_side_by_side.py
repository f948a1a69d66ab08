"""Checks of notebooks/05_side_by_side.ipynb (the four rungs side by side, in both worlds).

Before this registry the notebook held 18 assert lines: every rung's worst-seed gain > 0.1; PPO and GRPO
at 90% on every seed; GRPO's gradient the noisiest; the group mean = (G-1)/G of RLOO's step, the same
direction, and the group std more than doubling its length; the critic's memory (PPO over GRPO with every
row its own prompt), two minibatches halving REINFORCE's activations, REINFORCE at two minibatches as
large as GRPO with its own prompts, GRPO's shared prompts; at k = 100 a rung that reuses its batches the
fastest; GRPO's update cheaper than PPO's; five verdicts of `measure.claims` and the median seed of the
reuse claim. Now 16 checks (6 exact, 10 calibrated) and 7 printed: this run's gains, GRPO the noisiest
in the spread world and the score norms' predicted ratio (their calibration crossed or crowded the bound),
PPO's whitened gradient against the critic baseline's (a near-equality), and two timings. The verdicts are checked through the measurements they read: every rung learns
(every_rung_learns, on the kept runs), the reuse (reuse_fewer_answers_default, reuse_reaches_90), the
critic's memory (critic_costs_memory), the shared prompts (grpo_shares_prompts), the critic's prediction
(critic_predicts_spread_only). The two
timings (k = 100, GRPO's update against PPO's) are printed: wall time on a shared machine; the structural
fact under the second, the critic's passes per update, is counted exactly (grpo_runs_no_critic). Each
runs in both worlds where it measures a run, with its control beside it (the other world is the control
of most). The kept three-seed study (tests/data/spread_ablation, read by the notebook) is the same file
on every draw: the checks that read only it are exact.
"""

from __future__ import annotations

import statistics

from course.checks import Measured, check, printed

NB = "05_side_by_side"
WORLDS = ("default", "spread")
ORDER = ("reinforce", "baseline", "ppo", "grpo")


def _kept(ns, w, a):
    return ns["kept"][w]["algorithms"][a]


def _passed(ns, w, names) -> int:
    """Kept seeds of ``names`` in world ``w`` that passed 90% within the budget."""
    return sum(s is not None for a in names for s in _kept(ns, w, a)["samples_to_target"])


def _median_to_90(ns, w, names) -> float:
    """The median over seeds of completions to 90%, a seed that never got there counted at the budget + 1."""
    budget = ns["study"]["steps"] * ns["study"]["sequences_per_step"]
    return statistics.median(
        budget + 1 if s is None else s for a in names for s in _kept(ns, w, a)["samples_to_target"]
    )


def _paired(ns, w, arm):
    return next(r for r in ns["study"]["worlds"][w]["table"] if r["arm"] == arm)["diff"]


# ------------------------------------------------------------------ the race (kept three seeds: exact)
@check(
    NB,
    exact=True,
    claim="Every rung learns from its world's reference: over the kept three seeds, the worst seed gains more "
    "than 0.1 held-out accuracy, in both worlds",
    control="the reference itself (no training: a gain of 0)",
)
def every_rung_learns(ns):
    out = []
    for w in WORLDS:
        gain = min(min(_kept(ns, w, a)["final_accuracy"]) - _kept(ns, w, a)["initial_accuracy"] for a in ORDER)
        out.append(Measured(f"{w}: the lowest worst-seed gain of the four rungs", gain, ">", 0.1, 0.0))
    return out


@check(
    NB,
    exact=True,
    claim="PPO and GRPO pass 90% within the budget on every kept seed in the default world, and on none in the "
    "spread world",
    control="each world's count is the other's control",
)
def reuse_reaches_90(ns):
    d, s = (_passed(ns, w, ("ppo", "grpo")) for w in WORLDS)
    return [
        Measured("default: PPO and GRPO seeds that pass 90% (of 6)", d, ">", 5.5, s),
        Measured("spread: PPO and GRPO seeds that pass 90% (of 6)", s, "<", 0.5, d),
    ]


@check(
    NB,
    exact=True,
    claim="In the spread world REINFORCE passes 90% within the budget on every kept seed",
    control="GRPO in the spread world",
)
def reinforce_reaches_90_spread(ns):
    return Measured(
        "spread: REINFORCE seeds that pass 90% (of 3)",
        _passed(ns, "spread", ("reinforce",)),
        ">",
        2.5,
        _passed(ns, "spread", ("grpo",)),
    )


@check(
    NB,
    exact=True,
    claim="In the default world the rungs that reuse each batch (PPO, GRPO) need fewer sampled answers to 90% "
    "than REINFORCE, on the median seed",
    control="the same medians in the spread world",
)
def reuse_fewer_answers_default(ns):
    def ratio(w):
        return _median_to_90(ns, w, ("ppo", "grpo")) / _median_to_90(ns, w, ("reinforce",))

    return Measured(
        "default: median completions to 90%, PPO and GRPO / REINFORCE",
        ratio("default"),
        "<",
        1.0,
        ratio("spread"),
        "log",
    )


# ------------------------------------------------------------------ this notebook's run (calibrated)
@printed(
    NB,
    claim="In the race every rung gains more than 0.1 held-out accuracy in RACE_STEPS steps, in both worlds",
    why="calibration shift 1: a rung gained 0.02 in the spread world's 64 steps (half the kept runs' budget), "
    "and the default world's lowest gain (0.13 to 0.25) sits under 3 sd from 0.1; every_rung_learns holds the "
    "claim on the kept runs' full budget, exactly",
)
def every_rung_learns_live(ns):
    out = []
    for w in WORLDS:
        rows = ns["race"][w]["algorithms"]
        gain = min(rows[a]["final_accuracy"][0] - rows[a]["initial_accuracy"] for a in ORDER)
        out.append(Measured(f"{w}: the lowest gain of the four rungs (this run)", gain, ">", 0.1, 0.0))
    return out


# ------------------------------------------------------------------ the gradient at the reference (calibrated)
def _noisiest(ns, w):
    rv = ns["at_ref"][w]["relative_variance"]
    grpo = rv["grpo"] / max(rv[a] for a in ORDER if a != "grpo")
    control = rv["reinforce"] / max(rv[a] for a in ORDER if a != "reinforce")
    return Measured(f"{w}: GRPO's relative variance / the largest of the others", grpo, ">", 1.0, control, "log")


@check(
    NB,
    claim="In the default world GRPO's gradient is the noisiest of the four rungs', each in the layout it trains "
    "with (PPO's with its advantage whitened, as it trains)",
    control="REINFORCE's relative variance over the largest of the other three",
)
def grpo_noisiest(ns):
    return [_noisiest(ns, "default")]


@printed(
    NB,
    claim="In the spread world GRPO's gradient is the noisiest of the four rungs', each in the layout it trains "
    "with (PPO's with its advantage whitened, as it trains)",
    why="calibration shift 3 measured GRPO's relative variance at 0.84 of PPO's, 0.86 of the critic baseline's: the spread "
    "world's ratio is on both sides of 1, and the lesson quotes it with the kept seeds' range, and GRPO's over "
    "each rung with a critic, to say which is noisier on some seeds",
)
def grpo_noisiest_spread(ns):
    rv = ns["at_ref"]["spread"]["relative_variance"]
    return [_noisiest(ns, "spread")] + [
        Measured(
            f"spread: GRPO's relative variance / {who}", rv["grpo"] / rv[a], ">", 1.0, rv["reinforce"] / rv[a], "log"
        )  # fmt: skip
        for a, who in (("baseline", "the critic baseline's"), ("ppo", "PPO's"))
    ]


@printed(
    NB,
    claim="PPO's whitened advantage (the batch mean subtracted, a second baseline, and the std divided out) gives a "
    "gradient about as noisy as the critic baseline's: above 0.9 of its relative variance, in both worlds",
    control="REINFORCE's relative variance over the critic baseline's",
    why="a near-equality: over the seeds the ratio sits close to 1 (the default world's on both sides of it, below "
    "0.9 at one seed), under 3 sd from any bound that the control fails; the lesson says what the seeds show",
)
def ppo_whitening(ns):
    out = []
    for w in WORLDS:
        rv = ns["at_ref"][w]["relative_variance"]
        out.append(Measured(f"{w}: PPO / critic baseline relative variance", rv["ppo"] / rv["baseline"], ">", 0.9,
                            rv["reinforce"] / rv["baseline"], "log"))  # fmt: skip
    return out


@check(
    NB,
    claim="The critic's V(s_0) explains much of the reward in the spread world and next to nothing in the default world",
    control="each world's explained share is the other's control",
)
def critic_predicts_spread_only(ns):
    s, d = (ns["at_ref"][w]["critic_ev"] for w in ("spread", "default"))
    return [
        Measured("spread: EV of V(s_0)", s, ">", 0.3, d),
        Measured("default: EV of V(s_0)", d, "<", 0.1, s),
    ]


@check(
    NB,
    claim="In the spread world the critic baseline's gradient is more than 1.9 times as noisy as REINFORCE's, "
    "although its V(s_0) predicts the reward",
    control="the default world's ratio, where V(s_0) predicts nothing (noisier there too, by less)",
)
def critic_noisier_spread(ns):
    def ratio(w):
        rv = ns["at_ref"][w]["relative_variance"]
        return rv["baseline"] / rv["reinforce"]

    return Measured("spread: critic baseline / REINFORCE relative variance", ratio("spread"), ">", 1.9,
                    ratio("default"), "log")  # fmt: skip


@check(
    NB,
    claim="In the spread world wrong answers carry most of the critic's extra variance that the score norms "
    "predict, E[(R - V)^2 |s|^2] with V = V(s_0): more than 70% of it",
    control="the default world's wrong answers' share",
)
def score_norms_predict(ns):
    s, d = ns["at_ref"]["spread"], ns["at_ref"]["default"]
    return [Measured("spread: wrong answers' share of it", s["wrong_share"], ">", 0.7, d["wrong_share"])]


@printed(
    NB,
    claim="The score norms predict the critic's extra variance in the spread world: E[(R - V)^2 |s|^2] / "
    "E[R^2 |s|^2] is above 1.5 with V = V(s_0)",
    why="over calibration shifts 1-4 it ranged 2.0 to 6.0, a log-sd so wide that no bound above 1 sits 3 sd "
    "from the mean; the measured ratio it predicts is held by critic_noisier_spread",
)
def score_norms_predict_ratio(ns):
    s = ns["at_ref"]["spread"]
    return Measured(
        "spread: predicted critic / REINFORCE variance",
        s["predicted_critic_over_raw"],
        ">",
        1.5,
        s["predicted_equal_norms"],
        "log",
    )


@printed(
    NB,
    claim="The score norms' prediction of the critic's variance over REINFORCE's is close to the measured ratio",
    why="a prediction from one batch of score norms against 16 batches of gradients: how close is a reading, "
    "with no rule that a wrong prediction would fail on its own",
)
def prediction_matches(ns):
    s = ns["at_ref"]["spread"]
    measured = s["relative_variance"]["baseline"] / s["relative_variance"]["reinforce"]
    return Measured("spread: predicted / measured ratio", s["predicted_critic_over_raw"] / measured, ">", 0.0)


@check(
    NB,
    exact=True,
    claim="The group mean's mean gradient is (G-1)/G of RLOO's, batch by batch, and points the same way",
    control="no factor (1); GRPO's std-scaled gradient for the direction",
)
def group_mean_is_scaled_rloo(ns):
    g = ns["at_ref"]["default"]["gradients"]["grouped"]
    G = g["_meta"]["group_size"]
    ratio = (g["group_mean"]["mean_sq_norm"] / g["group_loo"]["mean_sq_norm"]) ** 0.5
    return [
        Measured(
            "| |g_group_mean| / |g_group_loo| - (G-1)/G |", abs(ratio - (G - 1) / G), "<", 1e-4, abs(1.0 - (G - 1) / G)
        ),  # fmt: skip
        Measured(
            "| cos(g_group_mean, g_raw) - cos(g_group_loo, g_raw) |",
            abs(g["group_mean"]["cosine_to_raw"] - g["group_loo"]["cosine_to_raw"]),
            "<",
            1e-6,
            abs(g["group_norm"]["cosine_to_raw"] - g["group_loo"]["cosine_to_raw"]),
        ),  # fmt: skip
    ]


@check(
    NB,
    claim="GRPO's division by each group's std (at most 1/2 for 0/1 rewards) makes its mean gradient more than "
    "twice as long as the group mean's",
    control="RLOO's mean gradient over the group mean's (G/(G-1))",
)
def group_std_lengthens(ns):
    g = ns["at_ref"]["default"]["gradients"]["grouped"]
    msn = {e: g[e]["mean_sq_norm"] for e in ("group_mean", "group_loo", "group_norm")}
    return Measured("default: |g_group_norm| / |g_group_mean|", (msn["group_norm"] / msn["group_mean"]) ** 0.5, ">",
                    2.0, (msn["group_loo"] / msn["group_mean"]) ** 0.5, "log")  # fmt: skip


# ------------------------------------------------------------------ memory (calibrated)
@check(
    NB,
    claim="Like for like (two minibatches, every row its own prompt) the critic costs memory: PPO's step is larger "
    "than GRPO's",
    control="REINFORCE's step over GRPO's, like for like (neither has a critic)",
)
def critic_costs_memory(ns):
    peak = {n: m["measured_peak_step"] for n, m in ns["alike"].items()}
    return Measured("PPO / GRPO peak, like for like", peak["ppo"] / peak["grpo"], ">", 1.02,
                    peak["reinforce"] / peak["grpo"], "log")  # fmt: skip


@check(
    NB,
    claim="Like for like, REINFORCE's step is as large as GRPO's (within 15%): the difference of the steps as they "
    "train is the minibatching and the prompt sharing",
    control="REINFORCE as it trains (the whole batch per update) against GRPO like for like",
)
def alike_equal_without_critic(ns):
    g = ns["alike"]["grpo"]["measured_peak_step"]
    return Measured("| REINFORCE / GRPO like for like - 1 |", abs(ns["alike"]["reinforce"]["measured_peak_step"] / g - 1),
                    "<", 0.15, abs(ns["as_trained"]["reinforce"]["measured_peak_step"] / g - 1))  # fmt: skip


@check(
    NB,
    claim="Two minibatches cut REINFORCE's step memory (the activations of half the batch at a time)",
    control="the whole batch against itself (1)",
)
def minibatches_cut_activations(ns):
    r = ns["alike"]["reinforce"]["measured_peak_step"] / ns["as_trained"]["reinforce"]["measured_peak_step"]
    return Measured("REINFORCE, 2 minibatches / the whole batch", r, "<", 0.7, 1.0, "log")


@check(
    NB,
    claim="GRPO's G answers per prompt let it run each prompt once: fewer activations",
    control="one answer per prompt, nothing to share (1)",
)
def grpo_shares_prompts(ns):
    r = ns["grpo_shared"]["measured_peak_step"] / ns["alike"]["grpo"]["measured_peak_step"]
    return Measured("GRPO, each prompt once / every row its own", r, "<", 0.8, 1.0, "log")


@check(
    NB,
    claim="The critic's share grows with the model: PPO over GRPO at the largest model of the sweep is above 1.5",
    control="the same ratio at the smallest model (activations dominate)",
)
def critic_share_grows(ns):
    small, large = ns["sweep"][0], ns["sweep"][-1]
    return Measured("PPO / GRPO at the largest model of the sweep", large["ratio_measured"], ">", 1.5,
                    small["ratio_measured"], "log")  # fmt: skip


# ------------------------------------------------------------------ a step's cost
@check(
    NB,
    exact=True,
    claim="PPO's update runs the critic forward and backward, GRPO's runs no critic (passes counted by hooks)",
    control="GRPO's count of critic backward passes per update",
)
def grpo_runs_no_critic(ns):
    passes = {n: ns["cost"][n]["passes_per_update"] for n in ("ppo", "grpo")}
    return [
        Measured(
            "PPO: critic backward passes per update",
            passes["ppo"]["critic_backward"],
            ">",
            0.5,
            passes["grpo"]["critic_backward"],
        ),
        Measured(
            "GRPO: critic forward passes per update",
            passes["grpo"]["critic_forward"],
            "<",
            0.5,
            passes["ppo"]["critic_forward"],
        ),
    ]


@printed(
    NB,
    claim="Like for like (the same rows, each running its own prompt, timed apart by step_cost) GRPO's update is "
    "cheaper than PPO's: no critic to run and train",
    control="PPO's update against itself (1)",
    why="a timing on a shared machine; the structural fact, the critic's passes, is counted in grpo_runs_no_critic",
)
def grpo_update_cheaper(ns):
    u = ns["upd"]
    return Measured("GRPO's update / PPO's, every row its own prompt, timed apart", u["grpo_alike"] / u["ppo"], "<",
                    0.9, 1.0, "log")  # fmt: skip


@printed(
    NB,
    claim="When generation dominates (k = 100) a rung that reuses each batch reaches 90% first in the default world",
    why="built on timings on a shared machine (generation and update seconds); the answers it rests on, fewer to "
    "90% for PPO and GRPO in the default world, are held exactly by reuse_fewer_answers_default",
)
def generation_dominates(ns):
    def ratio(w):
        t = ns["to_90"][w][100]
        if "reinforce" not in t:
            return float("nan")
        budget = ns["study"]["steps"]  # a rung that never passed: its whole budget, a lower bound
        u, gen = ns["updates"][w], ns["gen"]
        best = min(t.get(n, budget * (100 * gen + u[n])) for n in ("ppo", "grpo"))
        return best / t["reinforce"]

    return Measured("time to 90% at k = 100: the faster of PPO and GRPO / REINFORCE, default world", ratio("default"),
                    "<", 1.0, ratio("spread"), "log")  # fmt: skip
