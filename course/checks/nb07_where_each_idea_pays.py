"""Checks of notebooks/07_where_each_idea_pays.ipynb (each claim of the derivation where it fails and where it holds).

Before this registry the notebook held 24 assert statements, 33 comparisons as they ran, two of them controls
asserted to fail (the (0, 1) estimate's cosine to the offset term; the beta-1 run's proxy rise): the offset's
collapse (three); the reference sampling mostly wrong answers, the offset term longer and setting the direction
(three); what copes with the offset (three); GRPO's invariance (four); the worse reward model gamed and the KL
penalty limiting it (five); the policy writing r_phi's exploits (one); the mixed-digit search (two); the length
bias in the gradient (six, in a loop over wrong and right answers); length and correctness uncorrelated within
groups (two). All 31 of those claims run here, each with a control computed beside it (the two asserted controls are
their checks' controls now, and fail in every draw). The results the lesson prints with their range over five
seeds are recorded, not checked.

Redrawn whole after a reader's findings (issue 46, F9 and F12): every control is a measurement where the claim is
false. The whitening's is PPO not whitened (its own (0, 1) and (5, 6) runs); the penalty's gold gap, a second
unpenalised run; the exploit ratio, the beta-1 policy, counted on samples r_phi was not fitted to (the reference's
rate on r_phi's own training samples is lower than on fresh ones, since r_phi fitted them: it had inflated the ratio);
"mostly wrong", the same prompts answered greedily. The bounds of the new checks were set from their spread.

Redrawn whole again (issue 46, a reader's 07-4 and 07-6): the default task's critic and group-mean measures have as
control the same two measures at the spread world's reference (an algebraic prediction before); "length does not go
with correctness" is measured on 4096 groups (one batch of 128 measured it to about 0.03, the threshold itself), its
bound is `grpo-edu regimes`' own threshold for no dependence, and its control is the same reference and prompts with
room for one filler.
"""

from __future__ import annotations

from course.checks import Measured, check, printed

NB = "07_where_each_idea_pays"


def _cos(a, b) -> float:
    return float(a @ b / (a.norm() * b.norm()))


# ------------------------------------------------------------------ 1. a reward with an offset


@check(
    NB,
    claim="An offset wrecks REINFORCE: with rewards (5, 6) its held-out accuracy after 20 steps is under 0.15, "
    "over 0.24 below the (0, 1) run's",
    control="the (0, 1) run itself; for the gap, the batch-mean baseline's (5, 6) run against its (0, 1) run "
    "(an offset it removes)",
)
def offset_collapse(ns):
    acc = ns["acc"]
    bm = acc["batch mean (5, 6)"] - acc["batch mean (0, 1)"]
    return [
        Measured("REINFORCE (5, 6): accuracy", acc["REINFORCE (5, 6)"], "<", 0.15, acc["REINFORCE (0, 1)"]),
        Measured("(0, 1) minus (5, 6)", acc["REINFORCE (0, 1)"] - acc["REINFORCE (5, 6)"], ">", 0.24, -bm),
    ]


@check(
    NB,
    claim="At temperature 1 the reference samples mostly wrong answers: under 0.2 of 512 are right",
    control="the same 512 prompts answered greedily (temperature 0)",
)
def reference_mostly_wrong(ns):
    return Measured("share right", float(ns["right"].mean()), "<", 0.2, float(ns["right_greedy"].mean()))


@printed(
    NB,
    claim="The offset term is longer than the (0, 1) estimate",
    why="longer at each of shifts 0-4 (x2.0 to x6.1), but the ratio's spread (log scale) puts three deviations "
    "below the mean under 1; its control, mean(R) times the offset term over the same estimate, was 0.28 to 0.57",
)
def offset_term_longer(ns):
    g01, g_off, right = ns["g01"], ns["g_off"], ns["right"]
    control = float(right.mean() * g_off.norm() / g01.norm())
    return Measured("|offset term| / |(0, 1) estimate|", float(g_off.norm() / g01.norm()), ">", 1.0, control, "log")


@check(
    NB,
    claim="... and five of it set the (5, 6) direction: its cosine to the offset term is above 0.95",
    control="the (0, 1) estimate's own cosines",
)
def offset_sets_direction(ns):
    g01, g_off, g56 = ns["g01"], ns["g_off"], ns["g56"]
    return Measured("(5, 6): cosine to the offset term", _cos(g56, g_off), ">", 0.95, _cos(g01, g_off))


@printed(
    NB,
    claim="The (5, 6) estimate's cosine to the offset term minus its cosine to the (0, 1) estimate",
    why="+0.45 to +1.06 at shifts 0-4: three deviations below the mean is under 0",
)
def offset_over_estimate(ns):
    g01, g_off, g56 = ns["g01"], ns["g_off"], ns["g56"]
    return Measured(
        "cosine to the offset term - cosine to the (0, 1) estimate", _cos(g56, g_off) - _cos(g56, g01), ">", 0.0
    )


@check(
    NB,
    exact=True,
    claim="A batch-mean baseline removes an offset exactly: R - mean(R) is the same float for (0, 1) and (5, 6), "
    "so the two runs end at the same accuracy to the digit",
    control="REINFORCE's (5, 6) and (0, 1) runs",
)
def batch_mean_removes_offset(ns):
    acc = ns["acc"]
    return Measured(
        "|batch mean (5, 6) - batch mean (0, 1)|",
        abs(acc["batch mean (5, 6)"] - acc["batch mean (0, 1)"]),
        "<",
        1e-12,
        abs(acc["REINFORCE (5, 6)"] - acc["REINFORCE (0, 1)"]),
    )


@check(
    NB,
    claim="A critic must learn the offset first: with a warm-up the (5, 6) run ends over 0.13 above the cold critic's",
    control="the cold critic against REINFORCE (5, 6) (no warm-up: no better than no baseline)",
)
def what_copes(ns):
    acc = ns["acc"]
    return Measured(
        "critic (5, 6): warm-up minus cold",
        acc["critic (5, 6), warm-up"] - acc["critic (5, 6), cold"],
        ">",
        0.13,
        acc["critic (5, 6), cold"] - acc["REINFORCE (5, 6)"],
    )


@printed(
    NB,
    claim="PPO's whitening removes what the cold critic leaves of the offset: what the offset costs PPO whitened, "
    "its (0, 1) run's accuracy minus its (5, 6) run's",
    control="the same two runs not whitened (the mechanism off)",
    why="-0.058 to +0.114 at shifts 0-4, and not whitened +0.216 to +0.346: apart at each shift, but three "
    "deviations above the whitened mean (+0.218) reach the not-whitened cost of shift 4, so no bound both holds "
    "and fails its control",
)
def whitening_removes_offset(ns):
    acc = ns["acc"]
    return Measured(
        "PPO whitened: (0, 1) minus (5, 6)",
        acc["PPO (0, 1)"] - acc["PPO (5, 6)"],
        "<",
        0.2,
        acc["PPO (0, 1), not whitened"] - acc["PPO (5, 6), not whitened"],
    )


@check(
    NB,
    exact=True,
    claim="GRPO's advantage is invariant to an affine change of the reward, up to eps: (5, 6) gives the same "
    "advantages bit for bit, (-1, 1) within 1e-2; at scale 1e-4 eps dominates the std and they shrink (over 0.5)",
    control="the scale 1e-4 (for the invariances); the shift of 5 (for the shrinking)",
)
def grpo_affine_invariance(ns):
    gap = ns["gap"]
    return [
        Measured("(5, 6): max |A' - A|", gap["(5, 6)"], "<", 1e-12, gap["(0, 1e-4)"]),
        Measured("(-1, 1): max |A' - A|", gap["(-1, 1)"], "<", 1e-2, gap["(0, 1e-4)"]),
        Measured("(0, 1e-4): max |A' - A|", gap["(0, 1e-4)"], ">", 0.5, gap["(5, 6)"]),
    ]


@check(
    NB,
    exact=True,
    claim="The same advantages make the same run: GRPO with (5, 6) ends at GRPO (0, 1)'s accuracy to the digit",
    control="REINFORCE's (5, 6) and (0, 1) runs",
)
def grpo_same_run(ns):
    acc = ns["acc"]
    return Measured(
        "|GRPO (5, 6) - GRPO (0, 1)|",
        abs(acc["GRPO (5, 6)"] - acc["GRPO (0, 1)"]),
        "<",
        1e-12,
        abs(acc["REINFORCE (5, 6)"] - acc["REINFORCE (0, 1)"]),
    )


# ------------------------------------------------------------------ 2. a reward that can be gamed


@check(
    NB,
    claim="Against the worse r_phi, GRPO without a penalty ends the gold accuracy over 0.25 below the reference's",
    control="the same worse r_phi with beta = 1",
)
def worse_rphi_gamed(ns):
    runs, start = ns["runs"], ns["start"]

    def rise(run):
        return run["h"].series("reward")[-10:].mean() - run["h"].series("reward")[0]

    bad, held = runs["8192 labels, beta 0"], runs["8192 labels, beta 1"]
    return Measured(
        "gold accuracy at the end - the reference's",
        bad["h"].eval_series()[-1] - start,
        "<",
        -0.25,
        held["h"].eval_series()[-1] - start,
    )


@printed(
    NB,
    claim="Against the worse r_phi, GRPO without a penalty raises the proxy reward: its last 10 steps minus its first",
    why="+0.13 to +0.37 at shifts 0-4 against the beta-1 run's +0.015 to +0.041: three deviations below the mean "
    "is under 0",
)
def worse_rphi_proxy_rises(ns):
    h = ns["runs"]["8192 labels, beta 0"]["h"]
    return Measured(
        "proxy reward: last 10 steps - first", h.series("reward")[-10:].mean() - h.series("reward")[0], ">", 0.065
    )


@check(
    NB,
    claim="... and its KL to the reference ends the largest of the three runs",
    control="the beta-1 run's KL over the larger of the other two",
)
def kl_bad_largest(ns):
    kl = ns["kl_end"]
    bad, good, held = kl["8192 labels, beta 0"], kl["16384 labels, beta 0"], kl["8192 labels, beta 1"]
    return Measured("its KL over the next largest", bad / max(good, held), ">", 1.0, held / max(bad, good), "log")


@check(
    NB,
    claim="With beta = 1 the worse r_phi moves the policy least: the smallest KL of the three (below the better "
    "r_phi's unpenalised run)",
    control="the unpenalised worse run's KL over the better one's",
)
def kl_penalty_limits(ns):
    kl = ns["kl_end"]
    good = kl["16384 labels, beta 0"]
    return Measured(
        "beta 1: its KL over the better r_phi's",
        kl["8192 labels, beta 1"] / good,
        "<",
        1.0,
        kl["8192 labels, beta 0"] / good,
        "log",
    )


@check(
    NB,
    claim="With beta = 1 the worse r_phi does much less harm: the gold accuracy ends over 0.24 above the "
    "unpenalised run's",
    control="the penalty off: a second unpenalised run (another seed) against the first",
)
def penalty_keeps_gold(ns):
    g_bad, g_held, g_again = ns["g_bad"], ns["g_held"], ns["g_again"]
    return Measured("gold at the end: beta 1 - beta 0", g_held[-1] - g_bad[-1], ">", 0.24, g_again[-1] - g_bad[-1])


@printed(
    NB,
    claim="The unpenalised policy writes the wrong answers r_phi rates right more often than the reference, on "
    "samples r_phi was not trained on: its share over the reference's",
    control="the policy trained against the same r_phi with beta = 1",
    why="x3.2 to x19.4 at shifts 0-4, and the beta-1 policy x1.08 to x1.21: apart at each shift, but on the log "
    "scale three deviations below the unpenalised mean is x0.69, under the beta-1 policy's",
)
def policy_writes_exploits(ns):
    rate = ns["rate"]
    return Measured(
        "unpenalised / reference",
        rate["policy"] / rate["reference"],
        ">",
        2.0,
        rate["beta 1"] / rate["reference"],
        "log",
    )


# ------------------------------------------------------------------ 3. prompts whose difficulty varies


def _spread_world(ns) -> dict:
    """The two measures of `uniform_task_nothing_to_learn` at the spread world's reference (notebook 08's world:
    SFT on the easy part of the task, so prompts' difficulty varies), on the same task, exactly as
    `regimes.run_mixed_digits` measures them: a critic fitted for 40 steps, then 128 prompts x G."""
    import torch

    from grpo_edu import get_preset, make_algorithm, reference_policy, sample_batch
    from grpo_edu.measure.common import rngs
    from grpo_edu.measure.variance import fit_critic

    preset, seed = ns["preset"], ns["SEED"]
    reference = reference_policy(get_preset(preset.name, world="spread"), progress=False)
    task, G = ns["task"], make_algorithm("grpo").config.group_size
    ev = fit_critic(reference, task, 40, seed=seed, progress=False)[1]["explained_variance"]
    with torch.no_grad():
        _, scores, _ = sample_batch(reference, task, 128, G, *rngs(seed + 5, preset.device))
    g = scores.sum(1).double().view(-1, G)
    loo = (g.sum(1, keepdim=True) - g) / (G - 1)
    return {"ev": ev, "var_ratio": float((g - loo).var() / (g - g.mean()).var())}


@check(
    NB,
    claim="At the default reference the critic explains almost nothing (under 0.0165 of the reward), and the "
    "leave-one-out group mean (RLOO's) leaves not much less variance than the batch mean (ratio above 0.9)",
    control="the same two measures at the spread world's reference on the same task (notebook 08's world, where "
    "prompts' difficulty varies)",
)
def uniform_task_nothing_to_learn(ns):
    u, spread = ns["diff"]["setups"]["uniform"], _spread_world(ns)
    return [
        Measured("uniform: explained variance", u["ev"][0], "<", 0.0165, spread["ev"]),
        Measured("uniform: Var(R - b_loo) / Var(R - b_batch)", u["var_ratio"][0], ">", 0.9, spread["var_ratio"]),
    ]


# ------------------------------------------------------------------ 4. a free answer length


@check(
    NB,
    claim="The length bias, measured: sequence_mean pushes a group's longest answer under 0.8 of its shortest's "
    "per token, wrong or right",
    control="token_mean's push ratio",
)
def sequence_mean_bias(ns):
    push = ns["fl"]["push"]
    return [
        Measured(f"sequence_mean, {p}", push["sequence_mean"][p][0], "<", 0.8, push["token_mean"][p][0])
        for p in ("wrong", "right")
    ]


@check(
    NB,
    exact=True,
    claim="token_mean and constant weigh every token the same: the push ratio is 1 (within 1e-4), wrong or right",
    control="sequence_mean's push ratio",
)
def no_bias_elsewhere(ns):
    push = ns["fl"]["push"]
    return [
        Measured(f"|{m}, {p} - 1|", abs(push[m][p][0] - 1), "<", 1e-4, abs(push["sequence_mean"][p][0] - 1))
        for p in ("wrong", "right")
        for m in ("token_mean", "constant")
    ]


@check(
    NB,
    claim="Within a group, whether an answer is right does not go with its length at the reference: |correlation| "
    "on the large batch under 0.03 (`grpo-edu regimes` reads at most 0.03 as no dependence, above 0.1 as one)",
    control="the same reference and prompts with room for one filler (filler_budget=1), where long answers are "
    "truncated and wrong",
)
def length_independent_of_correctness(ns):
    c = ns["len_corr"]
    return Measured(
        "|correlation| at the reference, large batch",
        abs(c["at the reference"]),
        "<",
        0.03,
        abs(c["with room for one filler"]),
    )


@printed(
    NB,
    claim="Within a group, |correlation| of length and correctness at the reference with room for one filler",
    why="the control of length_independent_of_correctness, printed in the lesson with its range",
)
def length_correlated_under_budget(ns):
    return Measured(
        "|correlation| with room for one filler, large batch", abs(ns["len_corr"]["with room for one filler"]), ">", 0.1
    )


@printed(
    NB,
    claim="Within a group, |correlation| of length and correctness after 40 steps of sequence_mean (128 groups)",
    why="0.003 to 0.103 at shifts 0-4 on one batch of 128 groups: on both sides of `grpo-edu regimes`' 0.03, so no "
    "bound both holds and fails a control",
)
def length_corr_after_training(ns):
    return Measured("|correlation| after sequence_mean", abs(ns["fl"]["corr"]["sequence_mean"][0]), "<", 0.1)


@printed(
    NB,
    claim="(-1, 1) is no cure: REINFORCE's accuracy with (-1, 1) minus with (0, 1)",
    why="-0.29 to -0.10 at shifts 0-4, lower each time, but three deviations above the mean is above 0",
)
def minus_one_one_slower(ns):
    acc = ns["acc"]
    return Measured("(-1, 1) minus (0, 1)", acc["REINFORCE (-1, 1)"] - acc["REINFORCE (0, 1)"], "<", 0.0)


# ------------------------------------------------------------------ printed, not checked


@printed(
    NB,
    claim="What the offset costs PPO not whitened: its (0, 1) run's accuracy minus its (5, 6) run's",
    why="the control of whitening_removes_offset, printed in the lesson with its range",
)
def whitening_off_offset_cost(ns):
    acc = ns["acc"]
    return Measured(
        "PPO not whitened: (0, 1) minus (5, 6)",
        acc["PPO (0, 1), not whitened"] - acc["PPO (5, 6), not whitened"],
        ">",
        0.0,
    )


@printed(
    NB,
    claim="The policy trained against the worse r_phi with beta = 1: its share of the wrong answers r_phi rates right "
    "over the reference's",
    why="the control of policy_writes_exploits, printed in the lesson with its range",
)
def penalised_exploits(ns):
    rate = ns["rate"]
    return Measured("beta 1 / reference", rate["beta 1"] / rate["reference"], ">", 1.0, scale="log")


@printed(
    NB,
    claim="(-1, 1): the estimate's cosine to the (0, 1) estimate",
    why="by how much minus one offset term turns the estimate moves with the batch: -0.07 to +0.76 at shifts 0-4",
)
def minus_one_one_turns(ns):
    return Measured("(-1, 1): cosine to the (0, 1) estimate", _cos(ns["g11"], ns["g01"]), "<", 0.9)


@printed(
    NB,
    claim="Each r_phi's validation accuracy minus answering 'always wrong', and the larger's over the smaller's",
    why="the signs held at shifts 0-4 (16384 labels +0.024 to +0.114, 8192 labels -0.039 to -0.010), each under "
    "three deviations from 0; before this registry 8192 labels beat 'always wrong' at shifts 8 and 11",
)
def reward_model_margins(ns):
    rms = ns["rms"]
    margin = {n: rms[n][1]["val_accuracy"] - rms[n][1]["always_wrong"] for n in rms}
    return [
        Measured("16384 labels", margin[16384], ">", 0.0),
        Measured("8192 labels", margin[8192], "<", 0.0),
        Measured("16384 over 8192", rms[16384][1]["val_accuracy"] - rms[8192][1]["val_accuracy"], ">", 0.0),
    ]


@printed(
    NB,
    claim="Against the better r_phi the gold accuracy ends above the reference's",
    why="-0.24 to +0.27 at shifts 0-4: either sign",
)
def better_rphi_gain(ns):
    return Measured("16384 labels, beta 0", ns["g_good"][-1] - ns["start"], ">", 0.0)


@printed(
    NB,
    claim="The unpenalised worse r_phi's KL at the end over the better one's",
    why="3.5 to 10.9 times at shifts 0-4; that it ends the largest is checked (kl_bad_largest)",
)
def kl_bad_over_good(ns):
    kl = ns["kl_end"]
    return Measured("worse over better", kl["8192 labels, beta 0"] / kl["16384 labels, beta 0"], ">", 1.0)


@printed(
    NB,
    claim="The proxy reward's rise at the untrained reference: 10 fresh batches minus a first",
    why="it fails the worse r_phi's rule (a rise over 0.065) at every shift so far, but by under three deviations "
    "(-0.010 to +0.046 at shifts 0-4); the beta-1 run is the check's control",
)
def reference_proxy_rise(ns):
    return Measured("the reference", float(ns["p_ref"]), "<", 0.065)


@printed(
    NB,
    claim="The critic's explained variance from the mixed task's own reference",
    why="+0.026 to +0.095 at shifts 0-4: too near 0.03 for a bound",
)
def mixed_own_ev(ns):
    return Measured("mixed, own reference", ns["diff"]["setups"]["mixed, own reference"]["ev"][0], ">", 0.03)


@printed(
    NB,
    claim="After 40 steps, sequence_mean's gap (fillers of wrong answers minus right ones) minus constant's",
    why="it takes either sign with the seed: -0.018 to +0.142 at shifts 0-4",
)
def length_gap_difference(ns):
    fl = ns["fl"]
    return Measured("sequence_mean minus constant", fl["gap"]["sequence_mean"][0] - fl["gap"]["constant"][0], ">", 0.0)
