"""The policy-lag regime: the papers' claims about a stale sampler, and the course's own questions, tested at toy
scale (notebook 13).

GRPO with its sampler k optimizer updates behind the learner (`grpo_edu.studies.policy_lag`: one run per
lag x ``off_policy_correction`` x seed, from one reference, for the same steps) gives, per run, its greedy
held-out accuracy every few steps. Most claims compare the mean of a run's held-out accuracies over its
evaluations (the area under its learning curve, per optimizer update), by the one two-sided rule
(`grpo_edu.measure.verdicts`), per seed (the same seed trains both runs of a pair). Each paper's claim is
stated as the paper makes it, scoped to what is measured here; a question no paper asks is labelled the
course's:

- PipelineRL (Piché et al. 2025) claims about 2x faster learning in wall-clock time, its in-flight weight
  updates keeping the data nearly on-policy; its loss is REINFORCE with truncated importance weights. Measured
  per update: with the lag small (``small``) and truncated IS (``"tis"``, the nearest correction here), the
  curve mean less than 0.02 below lag 0's. The course's question beside it: does ignoring the same lag
  (``"none"``) cost less than that?
- AReaL (Fu et al. 2025): PPO's clip measured against the sampler (``"ppo_clip"``) degrades as staleness grows,
  and with the decoupled objective (the clip against pi_prox, times pi_prox / pi_behav) stale data costs little
  against synchronous training: ``"ppo_clip"`` below lag 0 at lag ``mid``; ``"decoupled"`` less than 0.02
  below lag 0 at lags ``mid`` and ``large``.
- M2PO (Zheng et al. 2025): standard GRPO (its ratio against the sampler: ``"ppo_clip"``) degrades with data
  256 updates stale, and M2PO matches on-policy with it: ``"m2po"`` at lag ``large`` less than 0.02 below lag 0.
  Here the sampler is 256 behind only for the updates after the first 256 (the ring fills from the
  reference), which the claim's label says.
- IcePop (two-sided masking of pi_prox / pi_behav outside [0.5, 5]) and truncated IS (that weight capped at
  3; Yao et al. 2025) were made for two engines' mismatch on the same weights, not for a lag: whether they
  learn more per update than ignoring the lag at lag ``large`` (the curve mean more than 0.01 above) is the
  course's question.
- where plain GRPO falls short (the course's question): per seed, the smallest lag of the grid at which its
  run's best evaluation stays more than two binomial standard errors below ``target`` (90%; on 500 problems
  0.027), and, per correction, whether it moves that lag up the grid. A best reading within two standard
  errors of 90% is not counted as short.

`claims(res)` computes them from a `policy_lag.run` result (so a stored study's verdicts are recomputed
from its rows); `run_policy_lag` runs the study and adds them.
"""

from __future__ import annotations

import numpy as np

from ..policy_lag import ORDER, SAME_AT_LAG_0
from ..policy_lag import run as run_study
from .common import claim, rule, spread, verdict

SMALL, MID, LARGE = 8, 32, 256  # a pipeline at max_staleness 2 (GRPO steps of 4 updates); AReaL's range; M2PO's
LAGS = (0, SMALL, MID, 64, 128, LARGE)
TARGET = 0.9
EVAL_SIZE = 500  # problems per held-out evaluation (the cpu preset's Task.eval_size); a result may carry its own
MOVERS = ("ppo_clip", "decoupled", "icepop", "tis", "m2po")  # the corrections that may move plain GRPO's break


def _row(res: dict, lag: int, correction: str, seed: int) -> dict | None:
    c = "none" if lag == 0 and correction in SAME_AT_LAG_0 else correction
    rows = [r for r in res["rows"] if r["lag"] == lag and r["correction"] == c and r["seed"] == seed]
    return rows[0] if rows else None


def seeds_of(res: dict) -> list[int]:
    return sorted({r["seed"] for r in res["rows"]})


def reach(row: dict, target: float = TARGET):
    """The optimizer updates at which ``row``'s greedy held-out accuracy first reads >= ``target``; None: never."""
    return next((u for u, a in zip(row["updates"], row["accuracy"], strict=True) if a >= target), None)


def margin(target: float = TARGET, n: int = EVAL_SIZE) -> float:
    """Two binomial standard errors of one evaluation of ``n`` problems at accuracy ``target``."""
    return 2.0 * float(np.sqrt(target * (1.0 - target) / n))


def short(row: dict, target: float = TARGET, n: int = EVAL_SIZE) -> bool:
    """Whether ``row``'s best evaluation stays more than `margin` below ``target``: short of it beyond one
    evaluation's noise (a best reading within the margin is not short)."""
    return max(row["accuracy"]) < target - margin(target, n)


def mean_accuracy(row: dict) -> float:
    """The mean of the run's held-out accuracies over its evaluations (start included): its learning curve's
    area per update, the same schedule for every run."""
    return float(np.mean(row["accuracy"]))


def per_seed(res: dict, lag: int, correction: str, fn) -> list:
    """``fn(row)`` of one lag x correction, one value per seed (None where that run was not made)."""
    out = []
    for s in seeds_of(res):
        row = _row(res, lag, correction, s)
        out.append(fn(row) if row is not None else None)
    return out


def breaking_lag(res: dict, correction: str, seed: int, target: float = TARGET):
    """The smallest lag of the result's grid at which ``correction``'s run of ``seed`` falls `short` of
    ``target``; None: short at no lag."""
    n = res.get("eval_size", EVAL_SIZE)
    for lag in sorted({r["lag"] for r in res["rows"]}):
        row = _row(res, lag, correction, seed)
        if row is not None and short(row, target, n):
            return lag
    return None


def _index(res: dict, lag) -> int:
    """A lag's place in the grid (never breaking: one past the largest), so that moves count grid steps."""
    grid = sorted({r["lag"] for r in res["rows"]})
    return len(grid) if lag is None else grid.index(lag)


def _diff(a: list, b: list) -> list:
    return [None if x is None or y is None else x - y for x, y in zip(a, b, strict=True)]


def _sp(values) -> str:
    """``mean [min, max]`` over the seeds to 3 decimals; "not run" where no run was made."""
    return spread(values, ".3f") if any(v is not None for v in values) else "not run"


def _lags(values) -> str:
    return ", ".join("never" if v is None else str(v) for v in values)


def claims(res: dict, small: int = SMALL, mid: int = MID, large: int = LARGE, target: float = TARGET) -> list[dict]:
    """The regime's claims from a `grpo_edu.studies.policy_lag.run` result (rows of several lags, corrections
    and seeds; a claim whose runs are missing reads ``depends``: nothing measured)."""
    n = len(seeds_of(res))
    updates = res["steps"] * res["updates_per_step"]
    area = f"mean held-out accuracy over the evaluations of {updates} updates"

    def acc(lag, c):
        return per_seed(res, lag, c, mean_accuracy)

    def final(lag, c):
        return per_seed(res, lag, c, lambda r: r["final"])

    on, fin0 = acc(0, "none"), final(0, "none")
    near = rule(-0.02, -0.05, "lag minus lag 0", n)
    out = []
    e = _diff(acc(small, "tis"), on)
    out.append(claim(
        f"PipelineRL: with a small lag and truncated importance weights (its loss's correction; here tis), learning "
        f"per update falls less than 0.02 below on-policy in mean held-out accuracy over the run (the sampler "
        f"{small} updates behind)",
        f"{area}: tis at lag {small} {_sp(acc(small, 'tis'))} vs lag 0 {_sp(on)} ({near})",
        verdict(e, -0.02, -0.05),
    ))  # fmt: skip
    e = _diff(acc(small, "none"), on)
    out.append(claim(
        f"the course's question: ignoring a small lag (none, the sampler {small} updates behind) costs less than "
        "0.02 of mean held-out accuracy over the run against on-policy",
        f"{area}: lag {small} {_sp(acc(small, 'none'))} vs lag 0 {_sp(on)} ({near}); final accuracy: lag {small} "
        f"{_sp(final(small, 'none'))} vs lag 0 {_sp(fin0)}",
        verdict(e, -0.02, -0.05),
    ))  # fmt: skip
    e = _diff(on, acc(mid, "ppo_clip"))
    out.append(claim(
        f"AReaL: PPO's clip measured against the sampler degrades with the sampler {mid} updates behind",
        f"{area}: lag 0 {_sp(on)} vs ppo_clip at lag {mid} {_sp(acc(mid, 'ppo_clip'))} "
        f"({rule(0.02, 0.0, 'lag 0 minus ppo_clip', n)})",
        verdict(e, 0.02, 0.0),
    ))  # fmt: skip
    for lag in (mid, large):
        e = _diff(acc(lag, "decoupled"), on)
        out.append(claim(
            f"AReaL: with the decoupled objective, data {lag} updates stale costs less than 0.02 of mean held-out "
            "accuracy over the run against on-policy",
            f"{area}: decoupled at lag {lag} {_sp(acc(lag, 'decoupled'))} vs lag 0 {_sp(on)} ({near}); at the "
            f"same lag ppo_clip {_sp(acc(lag, 'ppo_clip'))}, none {_sp(acc(lag, 'none'))}",
            verdict(e, -0.02, -0.05),
        ))  # fmt: skip
    stale = (
        f"here the last {updates - large} of {updates} updates"
        if updates > large
        else f"here none of the {updates} updates"
    )
    e = _diff(on, acc(large, "ppo_clip"))
    out.append(claim(
        f"M2PO: standard GRPO (its ratio against the sampler: ppo_clip) degrades with data {large} updates stale "
        f"({stale})",
        f"{area}: lag 0 {_sp(on)} vs ppo_clip at lag {large} {_sp(acc(large, 'ppo_clip'))} "
        f"({rule(0.02, 0.0, 'lag 0 minus ppo_clip', n)})",
        verdict(e, 0.02, 0.0),
    ))  # fmt: skip
    e = _diff(acc(large, "m2po"), on)
    out.append(claim(
        f"M2PO: with data {large} updates stale ({stale}) it matches on-policy (its mean held-out accuracy over the run "
        "less than 0.02 below)",
        f"{area}: m2po at lag {large} {_sp(acc(large, 'm2po'))} vs plain GRPO at lag 0 {_sp(on)} ({near}); "
        f"final accuracy {_sp(final(large, 'm2po'))} vs {_sp(fin0)}",
        verdict(e, -0.02, -0.05),
    ))  # fmt: skip
    for c, what in (("icepop", "IcePop's two-sided mask"), ("tis", "truncated IS")):
        e = _diff(acc(large, c), acc(large, "none"))
        out.append(claim(
            f"the course's question: {what}, made for two engines' mismatch, applied to the lag learns more per update "
            f"than ignoring it (its curve mean more than 0.01 above; the sampler {large} updates behind)",
            f"{area} at lag {large}: {c} {_sp(acc(large, c))} vs none {_sp(acc(large, 'none'))} "
            f"({rule(0.01, 0.0, f'{c} minus none', n)})",
            verdict(e, 0.01, 0.0),
        ))  # fmt: skip
    base = [breaking_lag(res, "none", s, target) for s in seeds_of(res)]
    for c in MOVERS:
        moved = [breaking_lag(res, c, s, target) for s in seeds_of(res)]
        e = [_index(res, a) - _index(res, b) for a, b in zip(moved, base, strict=True)]
        out.append(claim(
            f"the course's question: {c} moves up the lag at which GRPO falls short of {target:.0%} in {updates} "
            "updates",
            f"the smallest lag whose best evaluation is below {target:.0%} by more than two standard errors "
            f"({margin(target, res.get('eval_size', EVAL_SIZE)):.3f}), per seed: {c} {_lags(moved)} vs none "
            f"{_lags(base)} "
            f"({rule(0.0, 0.0, 'grid steps moved', n)})",
            verdict(e),
        ))  # fmt: skip
    return out


def breaks(res: dict, target: float = TARGET) -> dict:
    """correction -> the smallest lag at which its run falls `short` of ``target``, per seed (None: at no lag)."""
    present = [c for c in ORDER if any(r["correction"] == c for r in res["rows"])]
    return {c: [breaking_lag(res, c, s, target) for s in seeds_of(res)] for c in present}


def run_policy_lag(reference, preset="cpu", seeds=(0, 1), lags=LAGS, steps=100, eval_every=10, task=None,
                   progress=True) -> dict:  # fmt: skip
    """`grpo_edu.studies.policy_lag.run` over ``lags`` x every correction x ``seeds`` for ``steps`` steps
    (100: 400 optimizer updates, so the largest lag, 256, is passed), its rows and the claims on them."""
    res = run_study(preset, lags=lags, seeds=tuple(seeds), steps=steps, eval_every=eval_every,
                    reference=reference, task=task, progress=progress)  # fmt: skip
    return {**res, "claims": claims(res), "breaks": breaks(res)}


def figure(res):
    """The regime's figure: `grpo_edu.studies.policy_lag.plot_lag` (final accuracy against the lag, one line
    per correction; the learning curves at the largest lag)."""
    from ..policy_lag import plot_lag

    return plot_lag(res)


def main(argv=None) -> list[dict]:
    """Print the claims on kept study results (``python -m grpo_edu.studies.regimes.policy_lag RESULT.json ...``,
    one file per seed or one merged): the regime sits above the study, so the study's command leaves this to it."""
    import argparse
    import json

    from ...measure.reports import wrap
    from ..policy_lag import merge

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("results", nargs="+", metavar="JSON", help="grpo_edu.studies.policy_lag results (--json)")
    a = p.parse_args(argv)
    res = merge(json.loads(open(f).read()) for f in a.results)
    out = claims(res)
    print("the papers' claims at this scale (grpo_edu.studies.regimes.policy_lag; each claim's rule after it):")
    for c in out:
        print(wrap(f"{c['claim']}: {c['measurement']}", " " * 15, f"  [{c['verdict']:>10}] "))
    return out


__all__ = [
    "claims",
    "breaks",
    "breaking_lag",
    "reach",
    "short",
    "margin",
    "mean_accuracy",
    "run_policy_lag",
    "figure",
    "LAGS",
]


if __name__ == "__main__":
    main()
