"""Checks of notebooks/10_long_runs_and_overoptimisation_3_compute_law.ipynb (week 10, part 3: ScaleRL's
compute-performance law on one GRPO run, and the stored study of the knobs).

A new notebook, written with the registry: its lesson held no assert lines. The law's midpoint is checked
exactly; the run's rise and the law's fit on the whole run are checked on the live run, each with a
comparison where the claim is false (the fit's control: the law fitted to the same run with its evaluations
shuffled over its computes, a curve with no trend in compute); the prediction of the second half from the
first (its ratio to the naive one crossed 1 at two of the five seeds while A was unbounded) and how far each
of the first half's parameters sits from the whole run's are printed results. The stored study's numbers are the same on every draw and are not checked
here (its verdicts are pinned in tests/regime_verdicts.json by tests/test_compute_law_study.py).
"""

from __future__ import annotations

import numpy as np

from course.checks import Measured, check, printed

NB = "10_long_runs_and_overoptimisation_3_compute_law"


@check(
    NB,
    exact=True,
    claim="At C = C_mid the law gives half the gain, R0 + (A - R0) / 2, for any B",
    control="the law at C = C_mid / 10, where the gain is not half",
)
def law_midpoint(ns):
    law = ns["compute_law"]
    r0, a, b, c_mid = ns["r0"], ns["a"], ns["b"], ns["c_mid"]
    control = abs(law([c_mid / 10], r0, a, b, c_mid)[0] - (r0 + a) / 2)
    return Measured("|R(C_mid) - (R0 + A) / 2|", ns["mid_gap"], "<", 1e-12, control)


def _second_pass_rate(ns) -> float:
    """The untrained reference's sampled pass rate on a second draw of the evaluation's sampling: the
    difference from R0 is what a run that learns nothing shows."""
    from grpo_edu import evaluate

    return float(evaluate(ns["reference"], ns["task"], temperature=1.0, seed=ns["SEED"] + 777))


@check(
    NB,
    claim="GRPO raises the sampled held-out pass rate over 240 steps (the law has a gain to fit)",
    control="the untrained reference evaluated again with other samples, minus R0",
)
def pass_rate_rises(ns):
    R = ns["R"]
    gain = float(R[-3:].mean() - R[0])
    return Measured("mean pass rate of the last 3 evaluations minus R0", gain, ">", 0.1, _second_pass_rate(ns) - R[0])


def _shuffled_fit_rmse(ns) -> float:
    """The law fitted (as the lesson fits it) to the same run with its evaluations after step 0 shuffled over
    the computes (a fixed permutation): the same values, no order in compute; its rmse."""
    run = ns["run"]
    rates = np.asarray(run["pass_rate"], dtype=float)
    rates[1:] = rates[1:][np.random.default_rng(0).permutation(len(rates) - 1)]
    return ns["law_study"].fit_run({**run, "pass_rate": rates.tolist()})["rmse"]


@check(
    NB,
    claim="The law follows the whole run: its rmse on the run's evaluations is small",
    control="the law fitted to the same run with its evaluations shuffled over the computes: its rmse",
)
def law_fits_whole_run(ns):
    return Measured("rmse of the law fitted on the whole run", ns["full"]["rmse"], "<", 0.045, _shuffled_fit_rmse(ns))


@printed(
    NB,
    claim="Fitted on the first half of a run's compute, the law predicts the second half better than "
    "'it stays where it is'",
    control="'nothing more is learned' (the second half predicted at R0), over the same naive error",
    why="an extrapolation's error against the naive one's: it crossed 1 at two of five calibration shifts while "
    "the fit left A unbounded (the first half's ceiling ran far above 1); the lesson reads its range over the seeds",
)
def law_beats_staying_put(ns):
    half = ns["half"]
    return Measured(
        "the law's error on the second half over the naive one's",
        half["error"] / half["naive"],
        "<",
        1.0,
        ns["start_error"] / half["naive"],
        "log",
    )


@printed(
    NB,
    claim="Each parameter fitted on the first half against the whole run's: A's difference, and the log ratios "
    "of the gain A - R0, of B and of C_mid",
    why="an extrapolation's error with no side the lesson predicts: the lesson compares their sizes over the seeds",
)
def ceiling_from_half(ns):
    return [
        Measured("A from the first half minus A from the whole run", ns["da"], ">", -1.0),
        Measured(
            "|log ratio|, first half over whole run, of the gain A - R0",
            ns["half_vs_full"]["the gain A - R0"],
            ">",
            -1.0,
        ),
        Measured("|log ratio|, first half over whole run, of B", ns["half_vs_full"]["B"], ">", -1.0),
        Measured("|log ratio|, first half over whole run, of C_mid", ns["half_vs_full"]["C_mid"], ">", -1.0),
    ]
