"""Checks of notebooks/02_baseline_variance.ipynb (part 2: how much variance a baseline removes, both worlds).

Before this registry the notebook held 7 assert lines: the default critic's |EV| < 0.03; RLOO = G/(G-1) x
the group mean; no group baseline lowers the variance (> 1); the group mean adds more than the batch mean;
grouping raises the variance more than any baseline lowers it; b* below the mean reward (each snapshot);
the trained policy right more often. Six run here, with their controls computed beside them (the other world is the control of
several), plus the spread world's own claims; "the group mean adds more than the batch mean" is a printed
result, since the spread world, its only candidate control, passed its rule at two of five shifts. The
results its comments called "printed, not asserted" are recorded as printed results, with the reason.
A reader's round added three printed results: the group layout's batch mean and critic against raw, the
share of prompts whose own mean lies above their own b*_q, and the easy prompts' score gap in the spread world.
Reader's round 8: that share also beyond 2 b*_q (where a constant adds variance); E[R] / b* held above 2 ("far");
the trained policy's sampled reward over the reference's on 16384 answers each, so that its control (the reference
on another 16384) sits far from the bound. Reader's round 9: diversity_beats_baselines printed (its control, REINFORCE's
own ratio 1 among the candidates, could not pass by construction); the printed results' reasons no longer quote values
the testing page's row shows.
"""

from __future__ import annotations

import numpy as np

from course.checks import Measured, check, printed

NB = "02_baseline_variance"
WORLDS = ("default", "spread")
GROUP = ("group_mean", "group_loo", "group_norm")
SNAPSHOTS = ("default reference", "spread reference", "after REINFORCE (default)")


@check(
    NB,
    exact=True,
    claim="RLOO's advantage is G/(G-1) times the group mean's, on a sampled batch",
    control="the group mean's advantage itself (no factor)",
)
def rloo_is_scaled_group_mean(ns):
    A_loo, A_mean, G = ns["A_loo"], ns["A_mean"], ns["G"]
    err = float((A_loo - G / (G - 1) * A_mean).abs().max())
    return Measured("largest |A_loo - G/(G-1) A_mean|", err, "<", 1e-6, float((A_loo - A_mean).abs().max()))


@check(
    NB,
    claim="In the default world the critic predicts next to nothing of the reward from the prompt",
    control="the spread world's critic, fitted the same way",
)
def critic_ev_default(ns):
    ev = ns["fit"]
    return Measured(
        "default: EV of V(s_0)", ev["default"]["explained_variance"], "<", 0.03, ev["spread"]["explained_variance"]
    )


@check(
    NB,
    claim="In the spread world the critic learns much of the reward from the prompt",
    control="the default world's critic, fitted the same way",
)
def critic_ev_spread(ns):
    ev = ns["fit"]
    return Measured(
        "spread: EV of V(s_0)", ev["spread"]["explained_variance"], ">", 0.3, ev["default"]["explained_variance"]
    )


@check(
    NB,
    claim="Every group baseline (group mean, RLOO, GRPO's normalised advantage) adds gradient variance against "
    "REINFORCE in the group layout, in both worlds: the least of their ratios to raw",
    control="b* in the same layout and world: a constant far below the mean reward, whose ratio to raw stays within "
    "a few percent of 1",
)
def group_baselines_add(ns):
    rel = ns["rel"]
    return [
        Measured(
            f"{w}: least group baseline / raw, groups",
            min(rel[w]["group", e] for e in GROUP),
            ">",
            1.05,
            rel[w]["group", "optimal"],
            "log",
        )
        for w in WORLDS
    ]


@printed(
    NB,
    claim="With groups, the group mean's gradient variance over the batch mean's, in each world",
    why="the spread world, meant as the default world's control, was on both sides of 1 over the calibration "
    "shifts and past the default's bound 1.1 at two of them (the values are in this row): no world here fails "
    "the default world's rule, and the spread world's own (below 1) failed at four shifts of five",
    control="each world was meant as the other's",
)
def group_mean_vs_batch_mean(ns):
    rel = ns["rel"]
    ratio = {w: rel[w]["group", "group_mean"] / rel[w]["group", "batch_mean"] for w in WORLDS}
    return [
        Measured("default: group mean / batch mean, groups", ratio["default"], ">", 1.1, ratio["spread"], "log"),
        Measured("spread: group mean / batch mean, groups", ratio["spread"], "<", 1.0, ratio["default"], "log"),
    ]


@printed(
    NB,
    claim="Grouping raises the variance more than any baseline lowers it: spending the completions on groups raises "
    "REINFORCE's variance by a larger factor than the best baseline's ratio takes off, in both worlds",
    why="no control can fail it: the control it had, the distinct layout times the best baseline's ratio, is at "
    "most 1 by construction (REINFORCE's own ratio, 1, is among the candidates), and no layout change that leaves "
    "the variance as it is was measured; the values, above 1 at every draw, are in this row",
    control="the distinct layout itself (a factor of 1 from the layout, times the best baseline's ratio)",
)
def diversity_beats_baselines(ns):
    rel, diversity, est = ns["rel"], ns["diversity"], ns["estimators"]["distinct"]
    out = []
    for w in WORLDS:
        best = min(rel[w]["distinct", e] for e in est)
        out.append(
            Measured(f"{w}: layouts' factor x the best baseline's ratio", diversity[w] * best, ">", 1.0, best, "log")
        )
    return out


@check(
    NB,
    claim="A critic that predicts the reward still makes the gradient noisier: in the spread world, the critic's "
    "and the batch mean's gradients have well over REINFORCE's relative variance, with distinct prompts",
    control="b* in the same world and layout, the constant that does not add variance",
)
def spread_baselines_add(ns):
    r = ns["rel"]["spread"]
    return [
        Measured(
            f"spread: {e.replace('_', ' ')} / raw, distinct prompts",
            r["distinct", e],
            ">",
            1.5,
            r["distinct", "optimal"],
            "log",
        )
        for e in ("critic", "batch_mean")
    ]


@check(
    NB,
    claim="b* lies far below the mean reward, at both references and after training: E[R] / b*, above 2",
    control="the same answers with the rewards shuffled against the score norms (|s|^2 then carries nothing of R): "
    "E[R] / b* of the shuffled pairs, the median over 21 seeded shuffles",
)
def mean_over_bstar(ns):
    rng, out = np.random.default_rng(ns["SEED"] + 7), []
    for name in SNAPSHOTS:
        sn = ns["norms"][name]
        R, s2 = np.asarray(sn["rewards"], float), np.asarray(sn["score_norm2"], float)
        shuffled = [np.sum(rng.permutation(R) * s2) / np.sum(s2) for _ in range(21)]  # b* of shuffled pairs
        control = float(np.median(sn["mean_reward"] / np.asarray(shuffled)))
        out.append(Measured(f"{name}: E[R] / b*", sn["mean_reward"] / sn["b_star"], ">", 2.0, control, "log"))
    return out


SAMPLES = 16384  # answers per sampled reward: sampling alone (no backward pass) is cheap (about a second)


def _sampled_reward(policy, task, seed):
    # the mean reward of SAMPLES answers at T = 1, to as many training prompts drawn with `seed`
    import torch

    from grpo_edu import sample_batch

    gen = torch.Generator(device=next(policy.parameters()).device).manual_seed(seed)
    return float(sample_batch(policy, task, SAMPLES, 1, seed, gen)[1].sum(1).mean())


@check(
    NB,
    claim=f"After 60 steps of REINFORCE the policy is right more often: its sampled reward over the reference's, "
    f"{SAMPLES} answers each",
    control=f"the default reference on another {SAMPLES} answers, over the same reference's",
)
def trained_right_more_often(ns):
    task, ref, seed = ns["task"], ns["references"]["default"], ns["SEED"] + 11
    at_ref = _sampled_reward(ref, task, seed)
    after = _sampled_reward(ns["trained"], task, seed + 1)
    again = _sampled_reward(ref, task, seed + 2)
    return Measured(
        f"after REINFORCE / the default reference: sampled reward, {SAMPLES} answers each",
        after / at_ref,
        ">",
        1.2,
        again / at_ref,
        "log",
    )


# ------------------------------------------------------------------ printed, not checked


@printed(
    NB,
    claim="The between-prompt share of the reward's variance (what a perfect V(s_0) explains), in each world",
    why="the default world's share was 0.076 at an earlier held-out shift 13 (native kernel), past the bound 0.05 "
    "it had then; the spread world's is recorded beside it",
)
def prompt_share(ns):
    return [Measured(f"{w}: between-prompt share", ns["ceiling"][w], ">", 0.0) for w in WORLDS]


@printed(
    NB,
    claim="The critic learned the mean reward: mean V(s_0) minus the mean reward, in each world",
    why="in the default world +0.036 at an earlier held-out shift 6 (`default` kernel), past the old bound 0.03 "
    "(the mean reward itself is known to +-0.014 from 512 samples)",
)
def critic_mean_offset(ns):
    return [
        Measured(f"{w}: mean V(s_0) - mean reward", ns["fit"][w]["value_mean"] - ns["fit"][w]["reward_mean"], "<", 0.03)
        for w in WORLDS
    ]


@printed(
    NB,
    claim="Every estimator estimates the same direction at the references: the least cosine of an estimator's mean "
    "gradient to REINFORCE's, in each world",
    why="a null claim (no estimator here turns the gradient), with no positive case to show a bound failing",
)
def min_cosine(ns):
    return [
        Measured(
            f"{w}: least cosine to raw",
            min(x["cosine_to_raw"] for v in ns["var_ref"][w].values() for e, x in v.items() if e != "_meta"),
            ">",
            0.95,
        )
        for w in WORLDS
    ]


@printed(
    NB,
    claim="The layouts' factor: REINFORCE's relative variance with groups over distinct prompts",
    why="x1.19 in the default world at an earlier held-out shift 14 (`default` kernel), past the bound 1.4 it had "
    "then (that it outweighs every baseline is printed too: diversity_beats_baselines)",
)
def layouts_factor(ns):
    return [Measured(f"{w}: groups over distinct prompts, raw", ns["diversity"][w], ">", 1.4) for w in WORLDS]


@printed(
    NB,
    claim="b* changes the variance by a few percent: its ratio to raw, distinct prompts",
    why="0.091 off 1 at an earlier held-out shift 17 (native), past the bound 0.08 it had then; and 0.080 off 1 "
    "after training at held-out shift 16 (`default`)",
)
def bstar_ratio(ns):
    rel = ns["rel"]
    return [Measured(f"{k}: b* / raw, distinct prompts", rel[k]["distinct", "optimal"], "<", 1.08) for k in rel]


@printed(
    NB,
    claim="In the default world the batch mean and the critic add variance against raw (distinct prompts)",
    why="above 1 at every calibration shift, by under three deviations (the values are in this row)",
)
def default_baselines_add(ns):
    r = ns["rel"]["default"]
    return [
        Measured(f"default: {e.replace('_', ' ')} / raw, distinct prompts", r["distinct", e], ">", 1.0)
        for e in ("batch_mean", "critic")
    ]


@printed(
    NB,
    claim="With groups the batch mean and the critic add variance against raw too, in each world",
    why="with groups REINFORCE's own variance is larger and these two add less to it: in the default world no "
    "bound sits three deviations from the values; the spread world's, recorded "
    "first in the same draws and with no control beside them, are printed with them",
)
def grouped_baselines_add(ns):
    rel = ns["rel"]
    return [
        Measured(f"{w}: {e.replace('_', ' ')} / raw, groups", rel[w]["group", e], ">", 1.0)
        for w in WORLDS
        for e in ("batch_mean", "critic")
    ]


@printed(
    NB,
    claim="A prompt's mean reward lies beyond twice its own b*, where a constant baseline adds variance: the share of "
    "the prompts with both right and wrong answers (8 each) where it does, in each world (and the share above b*_q)",
    why="a measurement from a few dozen prompts with mixed answers, with no prompt set at hand where the claim is "
    "false to serve as a control (shuffling a prompt's rewards against its score norms leaves b*_q to the one or "
    "two longest scores, often a wrong answer's, so the shuffled share is not near 0)",
)
def prompt_mean_over_bstar(ns):
    return [
        Measured(f"{w}: share of mixed prompts with mean above {k}", ns["by_prompt"][w][key], ">", 0.5)
        for w in WORLDS
        for k, key in (("b*_q", "above"), ("2 b*_q", "above_twice"))
    ]


@printed(
    NB,
    claim="In the spread world the wrong answers to easy prompts have much longer scores than the right ones: "
    "|s|^2 wrong / right on easy prompts",
    why="a measurement (reader's round 7) from the few wrong answers the spread reference gives on easy "
    "prompts (a few dozen of 256), with no calibrated bound",
)
def easy_wrong_scores(ns):
    return Measured("spread: |s|^2 wrong / right, easy prompts", ns["by_prompt"]["spread"]["easy_gap"], ">", 1.0)


@printed(
    NB,
    claim="Wrong answers' score norms over right answers', at each snapshot",
    why="x2.18 at an earlier held-out shift 16 (`default` kernel), under the bound 2.5 it had then",
)
def score_gap(ns):
    return [Measured(f"{name}: |s|^2 wrong / right", ns["gap"][name], ">", 2.5) for name in SNAPSHOTS]


@printed(
    NB,
    claim="The score gap widens with training: after REINFORCE over the default reference's",
    why="below 1 at one calibration shift and at held-out shift 26 (`default` kernel; the values are in this row), "
    "and x0.98 at an earlier held-out shift 6 (`default`), under the old bound 1.2",
)
def gap_widens(ns):
    gap = ns["gap"]
    return Measured("gap after / gap at the default reference", gap[SNAPSHOTS[2]] / gap[SNAPSHOTS[0]], ">", 1.2)


@printed(
    NB,
    claim="The batch mean adds more variance after training than at the reference (distinct prompts)",
    why="above the bound at every calibration shift, by under three deviations; under it at held-out shift 26 "
    "(`default` kernel; the values are in this row)",
)
def batch_mean_after_training(ns):
    rel = ns["rel"]
    ratio = rel[SNAPSHOTS[2]]["distinct", "batch_mean"] / rel["default"]["distinct", "batch_mean"]
    return Measured("batch mean / raw: after over before", ratio, ">", 1.2)
