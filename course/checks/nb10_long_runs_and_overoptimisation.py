"""Checks of notebooks/10_long_runs_and_overoptimisation.ipynb (entropy over a long run; Cui's and Gao's curves).

Before this registry the notebook held 9 assert statements: the entropy collapses under each clip (1, in a
loop over the clips) and the untrained reference's does not (1); every run ends above the reference by 0.2
(1); clip-higher holds back fewer tokens at the upper clip (1); each early Cui fit predicts the rest better
than "it stays where it was" (1) and the curve fitted to the whole run is close while a constant reward is
not (1); the largest r_phi beats the next one by 0.01 (1) and "always wrong" by 0.03 (1); against the
largest r_phi, beta 0.3 lies above the unpenalised curve (1). They run here as 6 asserted checks and 2
printed results (the reference's entropy is now the control of the collapse), each with its control; four
of them had none or only one that could not fail (the reference's gain of 0 aside): clip-higher's share
against the symmetric clip's two runs, the early fit against the same fit with its entropies shuffled, the
largest r_phi against one from as many labels at another seed and against an untrained r_phi. Two became
printed at calibration (shifts 0-4): the early fit's lead over "it stays where it was" (under 1 on every
run, but 1 lies 2.9 sd from the mean on two runs) and beta 0.3 above the curve (one draw at +0.52 widens
the spread until no bound both sits 3 sd below the mean and fails the unseen run, up to +0.07). Bounds
moved at calibration: runs_learn 0.2 -> 0.05 (one run ended at +0.214), cui_fits_whole_run 0.06 -> 0.07,
clip_higher_holds_fewer 0.8 -> 0.9, largest_rphi_beats_always_wrong 0.03 -> 0.01. The results its comments
called printed are recorded as printed results. After a reader's audit (R4), shifts 0-4 were
redrawn as calibration: clip_higher_holds_fewer is asserted against a change of seed alone (the symmetric clip's
two runs, the smaller share over the larger; the larger over the smaller, >= 1 by construction, could not pass),
its bound 0.8 set with the earlier draws of shifts 0-4, 21 and 22 in view (the ratio 0.47 to 0.65, that control
0.888 to 0.984), so shifts 21 and 22 were seen when it was set; cui_fits_whole_run is now smooth_trade_whole_run,
its claim what its rule tests and its control the same curve fitted to the entropies shuffled (it was a constant
reward). After a second audit (R-E) runs_learn became printed (its control was a typed 0: no run with the learning
signal removed was run), and shifts 23 (native) and 24 (default kernel), which no bound has seen, were drawn as
held out: 5 asserted checks and 13 printed results.
"""

from __future__ import annotations

import numpy as np

from course.checks import Measured, check, printed

NB = "10_long_runs_and_overoptimisation"
CLIPS = ("clip 0.2", "clip-higher 0.28")


def _runs(ns):
    """(clip, run index, curve) for the four runs of section 1."""
    return [(k, s, c) for k in CLIPS for s, c in enumerate(ns["long"]["curves"][k])]


# ------------------------------------------------------------------ section 1: a long run


@check(
    NB,
    claim="Over 200 steps the entropy collapses under both clips: on every run the last 20 steps keep less than "
    "half of the first 20's",
    control="the untrained reference on two fresh batches (the second's entropy over the first's)",
)
def entropy_collapses(ns):
    W, ref_h = ns["W"], ns["ref_h"]
    return [
        Measured(f"{k}, run {s + 1}: entropy, last {W} steps over the first {W}",
                 np.mean(c["entropy"][-W:]) / np.mean(c["entropy"][:W]), "<", 0.5, ref_h[1] / ref_h[0], "log")
        for k, s, c in _runs(ns)
    ]  # fmt: skip


@printed(
    NB,
    claim="Every run learns: its final greedy held-out accuracy minus the reference's is above 0.05",
    why="no real control was computed: a run with the learning signal removed (each batch's rewards permuted) was "
    "not run here, and the reference's gain over itself, 0, is a typed constant, not a measurement",
)
def runs_learn(ns):
    return [
        Measured(f"{k}, run {s + 1}: final accuracy minus the reference's", c["accuracy"][-1] - ns["start"], ">", 0.05)
        for k, s, c in _runs(ns)
    ]  # fmt: skip


@check(
    NB,
    claim="Clip-higher holds back fewer tokens at the upper clip than the symmetric clip, on each seed, by more than "
    "a change of seed does: the mean share over the 200 steps, clip-higher's over the symmetric clip's on the same "
    "seed, is under 0.8",
    control="a change of seed alone, the clip the same: the symmetric clip's two runs, the smaller share over the "
    "larger",
)
def clip_higher_holds_fewer(ns):
    share = {k: [float(np.mean(c["clip_high"])) for c in ns["long"]["curves"][k]] for k in CLIPS}
    base = share[CLIPS[0]]
    control = min(base) / max(base)
    return [
        Measured(f"run {s + 1}: share held at the upper clip, clip-higher over clip 0.2", h / b, "<", 0.8, control,
                 "log")
        for s, (h, b) in enumerate(zip(share[CLIPS[1]], base, strict=True))
    ]  # fmt: skip


# ------------------------------------------------------------------ section 2: Cui et al.'s curve


@printed(
    NB,
    claim="Fitted on the first 50 steps, Cui et al.'s curve predicts the reward of steps 51-200 better than "
    "'it stays where it was' (the mean absolute errors' ratio), on every run",
    control="the same fit with the first 50 steps' entropies shuffled (no trade of reward for entropy to learn)",
    why="under 1 on every run at shifts 0-4 (0.46 to 0.72; the shuffled fit 1.17 to 1.43), but the claim's bound "
    "of 1 lies only 2.9 sd from the mean on two runs, and a bound of 0.8 is under 2 sd",
)
def early_fit_beats_flat(ns):
    from grpo_edu.measure.fits import cui_fit

    EARLY, cui, SEED = ns["EARLY"], ns["cui"], ns["SEED"]
    out = []
    for k, s, c in _runs(ns):
        h, r = np.array(c["entropy"]), np.array(c["reward"])
        shuffled = np.random.default_rng(SEED + 31 + s).permutation(h[:EARLY])
        control = cui_fit(shuffled, r[:EARLY]).error(h[EARLY:], r[EARLY:]) / cui[k, s]["flat"]
        out.append(Measured(f"{k}, run {s + 1}: early fit's error over 'stays where it was'",
                            cui[k, s]["error"] / cui[k, s]["flat"], "<", 1.0, control, "log"))  # fmt: skip
    return out


@check(
    NB,
    claim="Along a run the reward and the entropy move together smoothly: fitted to all 200 steps, the "
    "two-parameter curve R = -a exp(H) + b misses the batch reward by under 0.07 on average. Shuffling breaks the "
    "time order, so this does not separate a trade of reward for entropy from a common trend over training (any "
    "series that trends with the step would pass), nor the exponential form from others (a straight line in H fits "
    "as closely, line_as_close)",
    control="the same curve fitted to the run's entropies in shuffled order (the time order broken)",
)
def smooth_trade_whole_run(ns):
    full, shuffled = ns["full"], ns["shuffled_all"]
    return [
        Measured(f"{k}, run {s + 1}: the curve fitted to the whole run, mean absolute error", full[k, s].mae, "<",
                 0.07, shuffled[k, s])
        for k, s, _ in _runs(ns)
    ]  # fmt: skip


# ------------------------------------------------------------------ section 3: Gao et al.'s curve


@check(
    NB,
    claim="A larger label set made a better r_phi: the 32768-label r_phi's held-out accuracy over the 16384-label one's",
    control="an r_phi from as many labels (32768) at another seed, over the notebook's",
)
def larger_rphi_better(ns):
    from grpo_edu.demos.reward_model import RewardModelConfig, train_reward_model

    acc = ns["acc"]
    _, other = train_reward_model(
        ns["reference"], ns["task"], RewardModelConfig(n_labels=32768, seed=ns["SEED"] + 1), False
    )
    return Measured("r_phi's held-out accuracy, 32768 labels minus 16384", acc[2] - acc[1], ">", 0.01,
                    other["val_accuracy"] - acc[2])  # fmt: skip


@check(
    NB,
    claim="The 32768-label r_phi beats answering 'always wrong' on its held-out labels",
    control="an untrained r_phi of the same shape, on 4096 labelled samples of the reference",
)
def largest_rphi_beats_always_wrong(ns):
    import torch

    from grpo_edu.demos.reward_model import RewardModel, label_samples

    reference, task, SEED = ns["reference"], ns["task"], ns["SEED"]
    data = label_samples(reference, task, 4096, SEED + 41)
    torch.manual_seed(SEED + 41)
    rm = RewardModel(task.prompt_length, task.max_answer_length, task.tokenizer.vocab_size)
    with torch.no_grad():
        guess = (rm(data["prompt_ids"], data["completion_ids"], data["mask"]) > 0).float()
    y = data["labels"]
    control = float((guess == y).float().mean() - (y == 0).float().mean())
    acc, wrong = ns["acc"], ns["wrong"]
    return Measured("32768 labels: r_phi's accuracy minus 'always wrong'", acc[2] - wrong[2], ">", 0.01, control)


@printed(
    NB,
    claim="Against the largest r_phi the beta = 0.3 run lies above the unpenalised runs' curve at its own KL "
    "(its mean gold minus the curve)",
    control="an unpenalised run the curve was not fitted to (another RL seed, the same r_phi)",
    why="above the curve at every shift 0-4 (+0.27 to +0.52), and above the unseen run (-0.17 to +0.07), but the "
    "+0.52 of shift 2 widens the spread until a bound 3 sd below the mean (about 0) no longer fails the unseen run",
)
def penalty_above_curve(ns):
    means = {(n, b): f["mean"] for n, fr in ns["over"]["frontier"].items() for b, f in fr.items()}
    return Measured("32768 labels, beta 0.3: mean gold minus the beta-0 curve", means[32768, 0.3], ">", 0.135,
                    ns["unseen_res"])  # fmt: skip


# ------------------------------------------------------------------ printed, not checked


@printed(
    NB,
    claim="The untrained reference's entropy on two fresh batches: the second's over the first's",
    why="the control of entropy_collapses, quoted by the lesson with its spread",
)
def reference_entropy_steady(ns):
    return Measured("the reference: entropy, second batch over the first", ns["ref_h"][1] / ns["ref_h"][0], ">", 0.5)


@printed(
    NB,
    claim="Clip-higher minus the symmetric clip, per seed: the entropy of the last 20 steps, and the final accuracy",
    why="no run here moves the entropy much, so a bound such as 'by less than 0.05 nats' has no control that fails "
    "it; the accuracy gap changes sign over shifts 0-4 (-0.20 to +0.03), and a seed's two runs of one clip "
    "differ by as much",
)
def clip_higher_gaps(ns):
    last, acc_end, W = ns["last"], ns["acc_end"], ns["W"]
    base, high = CLIPS
    out = []
    for s in (0, 1):
        out.append(Measured(f"run {s + 1}: entropy of the last {W} steps, clip-higher minus clip 0.2",
                            last[high][s] - last[base][s], ">", 0.0))  # fmt: skip
        out.append(Measured(f"run {s + 1}: final accuracy, clip-higher minus clip 0.2",
                            acc_end[high][s] - acc_end[base][s], ">", -0.05))  # fmt: skip
    return out


@printed(
    NB,
    claim="Under the symmetric clip the upper clip holds back few tokens (the mean share over the 200 steps)",
    why="no run here has a clip that binds more, to show a bound failing",
)
def upper_clip_share(ns):
    return [
        Measured(f"clip 0.2, run {s + 1}: share held at the upper clip", float(np.mean(c["clip_high"])), "<", 0.02)
        for s, c in enumerate(ns["long"]["curves"][CLIPS[0]])
    ]


@printed(
    NB,
    claim="Fitted on the first 50 steps the curve misses the rest of the run by more than 0.1 on average, and puts "
    "its ceiling b - a below the reward the run reached (the mean of its last 20 steps)",
    why="a draw, not a rule, with no control that a rule could fail: the error on steps 51-200 was 0.15 to 0.29 "
    "and b - a below the reward reached at all seven recorded draws (shifts 0-4, 21, 22); a run at shift 8 before "
    "this registry was reported to miss by only 0.03 to 0.04, of which no record was kept",
)
def early_fit_extrapolates(ns):
    out = []
    for k, s, c in _runs(ns):
        fit = ns["cui"][k, s]
        out.append(Measured(f"{k}, run {s + 1}: early fit's error on steps 51-200", fit["error"], ">", 0.1))
        reached = float(np.mean(c["reward"][-ns["W"] :]))
        out.append(
            Measured(f"{k}, run {s + 1}: b - a minus the reward reached", fit["fit"].ceiling - reached, "<", 0.0)
        )
    return out


@printed(
    NB,
    claim="A straight line R = c0 + c1 H follows the whole run at least as closely as the exponential: the "
    "curve's mean absolute error minus the line's",
    why="a description of the runs' shape (a smooth trade, not the exponential in particular), with no setting "
    "that would fail a rule",
)
def line_as_close(ns):
    return [
        Measured(f"{k}, run {s + 1}: the curve's error minus the line's", ns["full"][k, s].mae - ns["line"][k, s], ">",
                 0.0)
        for k, s, _ in _runs(ns)
    ]  # fmt: skip


@printed(
    NB,
    claim="The 16384-label r_phi over the 8192-label one, and each against answering 'always wrong'",
    why="the signs held at shifts 0-4 before this registry by under three deviations (16384 over 8192: +0.02 to "
    "+0.17, sd 0.054; 16384 over always wrong +0.02 to +0.13, sd 0.039), and the smallest beat always wrong at "
    "held-out shifts 8 and 11",
)
def smaller_rphi_margins(ns):
    acc, wrong = ns["acc"], ns["wrong"]
    return [
        Measured("r_phi's held-out accuracy, 16384 labels minus 8192", acc[1] - acc[0], ">", 0.0),
        Measured("16384 labels: r_phi's accuracy minus 'always wrong'", acc[1] - wrong[1], ">", 0.0),
        Measured("8192 labels: r_phi's accuracy minus 'always wrong'", acc[0] - wrong[0], "<", 0.0),
    ]


@printed(
    NB,
    claim="Against the smallest r_phi the unpenalised gold falls: its accuracy at step 60 minus the reference's",
    why="it fell at all seven recorded draws (shifts 0-4, 21, 22: by 0.51 to 0.62) and from each of the eight "
    "references of the seed study (the measurements page), but a run at seed shift 6 on an avx2 machine before "
    "this registry was reported to rise, of which no record was kept; and a fall has no control here that a rule "
    "could fail",
)
def smallest_rphi_gold_falls(ns):
    gold = ns["gold0"][8192]
    return Measured("8192 labels, beta 0: gold at step 60 minus the start", gold[-1] - ns["start"], "<", 0.0)


@printed(
    NB,
    claim="Against the two larger r_phi the unpenalised gold first dips (its lowest in the first 20 steps minus the "
    "start), then rises (step 60 minus its lowest; minus the start)",
    why="how deep it dips moves with the seed (less than 0.05 at one held-out shift before this registry); the "
    "rise failed a bound of 0.2 at held-out shift 7 on an AVX2 machine; at shifts 0-4 the 16384-label run rose "
    "0.04 to 0.39 from its lowest and ended -0.31 to +0.24 from the start",
)
def larger_rphi_dip_and_rise(ns):
    start, out = ns["start"], []
    for n in (16384, 32768):
        g = ns["gold0"][n]
        out.append(Measured(f"{n} labels, beta 0: lowest gold in the first 20 steps minus the start",
                            g[:5].min() - start, "<", 0.0))  # fmt: skip
        out.append(Measured(f"{n} labels, beta 0: gold at step 60 minus its lowest", g[-1] - g.min(), ">", 0.2))
        out.append(Measured(f"{n} labels, beta 0: gold at step 60 minus the start", g[-1] - start, ">", 0.0))
    return out


@printed(
    NB,
    claim="Gao et al.'s curve fitted to the unpenalised runs: its beta per size (an interior peak iff beta > 0)",
    why="at shifts 0-4 the smallest and the largest size's beta was negative on every draw, the middle size's "
    "+0.99 at shift 4; before this registry the smallest had a peak at held-out shift 8 (default kernel, +0.044)",
)
def fitted_beta(ns):
    return [Measured(f"{n} labels: the fitted beta", ns["over"]["fits"][n].beta, "<", 0.0) for n in ns["SIZES"]]


@printed(
    NB,
    claim="Each penalised run's mean gold minus the unpenalised curve at its own KL, and the unseen unpenalised run's",
    why="'no penalised run lies below the curve by more than a few hundredths' is a bound an unpenalised run "
    "passes too; the unseen run is the control of penalty_above_curve",
)
def frontier_means(ns):
    out = [
        Measured(f"{n} labels, beta {b:g}: mean gold minus the beta-0 curve", f["mean"], ">", -0.05)
        for n, fr in ns["over"]["frontier"].items()
        for b, f in fr.items()
    ]
    out.append(
        Measured("32768 labels, beta 0, another RL seed: mean gold minus the curve", ns["unseen_res"], "<", 0.135)
    )
    out.append(
        Measured(
            "the lowest penalised run: mean gold minus the beta-0 curve",
            min(f["mean"] for fr in ns["over"]["frontier"].values() for f in fr.values()),
            ">",
            -0.05,
        )
    )
    return out
