"""The policy-lag regime: the papers' headline claims about a stale sampler, tested at toy scale (notebook 13).

GRPO with its sampler k optimizer updates behind the learner (`grpo_edu.studies.policy_lag`: one run per
lag x ``off_policy_correction`` x seed, from one reference, for the same steps) gives, per run, its greedy
held-out accuracy every few steps. Each paper's claim is stated as the paper makes it, scoped to what is
measured here, and tested by the one two-sided rule (`grpo_edu.measure.verdicts`), per seed (the same seed
trains both runs of a pair):

- PipelineRL (Piché et al. 2025): with in-flight weight updates the lag stays small, and a small lag costs
  little per update against on-policy learning: the mean held-out accuracy over the run's evaluations (the
  area under its learning curve, per optimizer update) with the sampler ``small`` updates behind, against lag 0;
- plain GRPO (``"none"``: the loss built as if the learner had sampled) collapses at the largest lag: ends
  below its start;
- AReaL (Fu et al. 2025): PPO's clip measured against the sampler (``"ppo_clip"``) degrades as the lag
  grows, and the decoupled objective (the clip against pi_prox, times pi_prox / pi_behav) keeps learning at
  the lags where it degrades: ``"decoupled"`` above ``"ppo_clip"`` at lags ``mid`` and ``large``;
- M2PO (Zheng et al. 2025): trains with data 256 updates stale and matches on-policy: its final accuracy
  at lag ``large`` within 0.02 of plain GRPO's without a lag;
- IcePop (two-sided masking of pi_prox / pi_behav outside [0.5, 5]) and truncated IS (that weight capped at
  3; Yao et al. 2025): each learns faster than ignoring the lag at lag ``large``;
- where plain GRPO breaks: per seed, the smallest lag of the grid at which its run never reads ``target``
  (90%) held-out greedy accuracy in its steps, and, per correction, whether it moves that lag up the grid.

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
    """The smallest lag of the result's grid at which ``correction``'s run of ``seed`` never reads ``target``;
    None: it reads it at every lag."""
    for lag in sorted({r["lag"] for r in res["rows"]}):
        row = _row(res, lag, correction, seed)
        if row is not None and reach(row, target) is None:
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

    start = per_seed(res, 0, "none", lambda r: r["start"])
    on = acc(0, "none")
    out = []
    e = _diff(acc(small, "none"), on)
    out.append(claim(
        f"PipelineRL: a small lag costs little per update against on-policy (plain GRPO, the sampler {small} updates "
        "behind)",
        f"{area}: lag {small} {_sp(acc(small, 'none'))} vs lag 0 {_sp(on)} "
        f"({rule(-0.02, -0.05, 'lag minus lag 0', n)})",
        verdict(e, -0.02, -0.05),
    ))  # fmt: skip
    e = _diff(start, final(large, "none"))
    out.append(claim(
        f"plain GRPO collapses with the sampler {large} updates behind (ends below its start)",
        f"final accuracy at lag {large} {_sp(final(large, 'none'))} vs start {_sp(start)} "
        f"({rule(0.0, 0.0, 'start minus final', n)})",
        verdict(e),
    ))  # fmt: skip
    e = _diff(on, acc(mid, "ppo_clip"))
    out.append(claim(
        f"AReaL: PPO's clip measured against the sampler degrades with the sampler {mid} updates behind",
        f"{area}: lag 0 {_sp(on)} vs ppo_clip at lag {mid} {_sp(acc(mid, 'ppo_clip'))} "
        f"({rule(0.02, 0.0, 'lag 0 minus ppo_clip', n)})",
        verdict(e, 0.02, 0.0),
    ))  # fmt: skip
    for lag in (mid, large):
        e = _diff(acc(lag, "decoupled"), acc(lag, "ppo_clip"))
        out.append(claim(
            f"AReaL: the decoupled objective keeps learning where the clip against the sampler degrades (lag {lag})",
            f"{area} at lag {lag}: decoupled {_sp(acc(lag, 'decoupled'))} vs ppo_clip "
            f"{_sp(acc(lag, 'ppo_clip'))} ({rule(0.01, 0.0, 'decoupled minus ppo_clip', n)})",
            verdict(e, 0.01, 0.0),
        ))  # fmt: skip
    e = _diff(final(large, "m2po"), final(0, "none"))
    out.append(claim(
        f"M2PO: trains with data {large} updates stale and matches on-policy (final accuracy within 0.02)",
        f"final accuracy: m2po at lag {large} {_sp(final(large, 'm2po'))} vs plain GRPO at lag 0 "
        f"{_sp(final(0, 'none'))} ({rule(-0.02, -0.05, 'm2po minus lag 0', n)})",
        verdict(e, -0.02, -0.05),
    ))  # fmt: skip
    for c, what in (("icepop", "IcePop's two-sided mask of pi_prox/pi_behav"), ("tis", "truncated IS")):
        e = _diff(acc(large, c), acc(large, "none"))
        out.append(claim(
            f"{what} learns faster than ignoring the lag (the sampler {large} updates behind)",
            f"{area} at lag {large}: {c} {_sp(acc(large, c))} vs none {_sp(acc(large, 'none'))} "
            f"({rule(0.01, 0.0, f'{c} minus none', n)})",
            verdict(e, 0.01, 0.0),
        ))  # fmt: skip
    base = [breaking_lag(res, "none", s, target) for s in seeds_of(res)]
    for c in MOVERS:
        moved = [breaking_lag(res, c, s, target) for s in seeds_of(res)]
        e = [_index(res, a) - _index(res, b) for a, b in zip(moved, base, strict=True)]
        out.append(claim(
            f"{c} moves up the lag at which GRPO stops reaching {target:.0%} in {updates} updates",
            f"the smallest lag never reaching {target:.0%}, per seed: {c} {_lags(moved)} vs none {_lags(base)} "
            f"({rule(0.0, 0.0, 'grid steps moved', n)})",
            verdict(e),
        ))  # fmt: skip
    return out


def breaks(res: dict, target: float = TARGET) -> dict:
    """correction -> the smallest lag never reaching ``target``, per seed (None: reached at every lag)."""
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


__all__ = ["claims", "breaks", "breaking_lag", "reach", "mean_accuracy", "run_policy_lag", "figure", "LAGS"]
