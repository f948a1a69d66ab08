"""What a sampler k updates behind costs GRPO, and what each correction pays back (notebook 13).

GRPO with ``policy_lag`` k (the rollouts sampled by the learner's weights k optimizer updates ago, a
deterministic ring: `grpo_edu.algorithms.off_policy`) and each ``off_policy_correction``, from the
same reference, for the same number of steps; per run:

- the greedy held-out accuracy against optimizer updates (every ``eval_every`` steps) and at the end;
- what the loss threw away once the ring is full (the steps whose sampler is k updates behind), as
  shares of the completion tokens: ``clipped`` (the eps clip's zero-gradient tokens, `clip_ratio`),
  ``dropped`` (weight 0: AReaL's cap, IcePop's band, M2PO's mask) and ``truncated`` (TIS's w = C);
- the spread of the objective's ratio (``ratio_std``, against pi_behav for "ppo_clip" and "m2po",
  against the learner at the step's start otherwise) and M2PO's second moment ``m2``.

At lag 0 the rollout's log-probs are the learner's and every weight is exactly 1, so "ppo_clip",
"decoupled", "icepop" and "tis" are the same update as "none" (tests/test_off_policy.py): lag 0 is run
once for them, as "none"; "m2po" opens the clip even at lag 0 and is run apart. Every number is
MEASURED. Run it from the shell (``len(_runs(lags, corrections))`` runs a seed; the progress bar
prints the seconds each run takes on your machine):

    python -m grpo_edu.studies.policy_lag --lags 0,2,8,32 --seeds 0,1,2 --steps 30

The study of notebook 13's section 6 (lags to 256, 100 steps: 400 optimizer updates; one process per seed,
then merged; the papers' claims on it are `grpo_edu.studies.regimes.policy_lag`'s), kept in
tests/data/policy_lag/study.json:

    python -m grpo_edu.studies.policy_lag --lags 0,8,32,64,128,256 --seeds 0 --steps 100 --eval_every 10 --json s0.json
    python -m grpo_edu.studies.policy_lag --lags 0,8,32,64,128,256 --seeds 2 --steps 100 --eval_every 10 --json s2.json
    python -m grpo_edu.studies.policy_lag --merge s0.json s2.json --json tests/data/policy_lag/study.json
    python -m grpo_edu.studies.regimes.policy_lag tests/data/policy_lag/study.json   # the claims on it

The kept study's training seeds are 0 and 2 (no reason beyond the two processes that were run; seed 1 is not
in it). `grpo-edu regimes --only policy_lag` runs the same grid on seeds 0 and 1 (the preset's seed and the
next), so its seed 1 is a draw the kept study does not hold, as is the notebook's exercise.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from ..algorithms.off_policy import CORRECTIONS

ORDER = ("none", "ppo_clip", "decoupled", "icepop", "tis", "m2po")  # the knob's values, in the notebook's order
SAME_AT_LAG_0 = ("ppo_clip", "decoupled", "icepop", "tis")  # identical to "none" when the learner samples


def _runs(lags, corrections):
    """The distinct (lag, correction) runs: at lag 0 the corrections of SAME_AT_LAG_0 are "none"'s run."""
    out = []
    for lag in lags:
        for c in corrections:
            key = (lag, "none" if lag == 0 and c in SAME_AT_LAG_0 else c)
            if key not in out:
                out.append(key)
    return out


def _mean(steps, key) -> float:
    vals = [s[key] for s in steps if key in s]
    return float(np.mean(vals)) if vals else 0.0


def _row(h, lag: int, correction: str, seed: int, updates_per_step: int) -> dict:
    full = [s for s in h.steps if s.get("staleness", 0.0) == lag] or h.steps  # the sampler k updates behind
    dropped = {"decoupled": "off_policy_dropped_frac", "icepop": "off_policy_dropped_frac", "m2po": "m2po_dropped_frac"}
    return {
        "lag": lag,
        "correction": correction,
        "seed": seed,
        "start": h.initial_accuracy,
        "final": h.final_accuracy,
        "updates": [e["step"] * updates_per_step for e in h.evals],
        "accuracy": [e["accuracy"] for e in h.evals],
        "clipped": _mean(full, "clip_ratio"),
        "dropped": _mean(full, dropped[correction]) if correction in dropped else 0.0,
        "truncated": _mean(full, "off_policy_is_clipped_frac") if correction == "tis" else 0.0,
        "ratio_std": _mean(full, "ratio_std"),
        "m2": _mean(full, "m2po_m2"),
        "seconds": h.steps[-1]["seconds"] if h.steps else 0.0,
    }


def run(
    preset="cpu",
    lags=(0, 2, 8, 32),
    corrections=ORDER,
    seeds=(0,),
    steps: int = 30,
    eval_every: int | None = 5,
    reference=None,
    task=None,
    progress: bool = True,
) -> dict:
    """GRPO at each lag x correction x seed (train seed; the reference is the preset's), ``steps`` steps each.

    ``reference``/``task``: the preset's, if given (a notebook that has them); else built (the cached
    reference). ``eval_every`` None: only the start and the end. Returns ``{"preset", "steps",
    "updates_per_step", "rows": [one dict per run, `_row`'s keys]}``."""
    lags, corrections, seeds = list(lags), list(corrections), list(seeds)
    if not lags or any(isinstance(k, bool) or not isinstance(k, int) or k < 0 for k in lags):
        raise ValueError(f"lags must be non-negative integers (optimizer updates), got {lags}")
    bad = [c for c in corrections if c not in CORRECTIONS]
    if not corrections or bad:
        raise ValueError(f"unknown correction(s) {bad}: choose from {list(CORRECTIONS)}")
    if not seeds or any(isinstance(s, bool) or not isinstance(s, int) for s in seeds):
        raise ValueError(f"seeds must be integers, got {seeds}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    from ..algorithms import make_algorithm
    from ..progress import progress_bar as tqdm
    from ..train import train
    from ..warmstart.presets import make_task, resolve_preset, setup_torch
    from ..warmstart.reference import reference_policy

    preset = resolve_preset(preset)
    setup_torch(preset)
    task = task if task is not None else make_task(preset)
    reference = reference if reference is not None else reference_policy(preset, task=task, progress=False)
    runs = _runs(lags, corrections)
    rows, per_step = [], None
    with tqdm(total=len(runs) * len(seeds), desc="policy lag", disable=not progress) as pbar:
        for seed in seeds:
            for lag, c in runs:
                algo = make_algorithm("grpo", policy_lag=lag, off_policy_correction=c)
                per_step = algo.config.epochs * algo.config.minibatches
                h = train(algo, task, reference, preset=preset, steps=steps, seed=seed, progress=False,
                          eval_every=eval_every or steps)  # fmt: skip
                rows.append(_row(h, lag, c, seed, per_step))
                pbar.update(1)
    return {"preset": preset.name, "steps": steps, "updates_per_step": per_step, "rows": rows}


def merge(results) -> dict:
    """One result from several runs of `run` over other seeds (the same preset, steps and updates per step):
    their rows, in order. A run split over processes (one seed each) is the same study as one run of all."""
    results = list(results)
    if not results:
        raise ValueError("merge needs at least one result of policy_lag.run")
    keys = ("preset", "steps", "updates_per_step")
    first = {k: results[0][k] for k in keys}
    for r in results[1:]:
        if {k: r[k] for k in keys} != first:
            raise ValueError(f"merge: results differ in {[k for k in keys if r[k] != first[k]]} ({first} vs {r})")
    seen = [(r["lag"], r["correction"], r["seed"]) for res in results for r in res["rows"]]
    if len(seen) != len(set(seen)):
        raise ValueError("merge: a run (lag, correction, seed) appears twice")
    return {**first, "rows": [r for res in results for r in res["rows"]]}


def final(res: dict, lag: int, correction: str) -> list[float]:
    """The final accuracies of one lag x correction over the seeds (lag 0: "none"'s run where they are the same)."""
    c = "none" if lag == 0 and correction in SAME_AT_LAG_0 else correction
    return [r["final"] for r in res["rows"] if r["lag"] == lag and r["correction"] == c]


def table(res: dict, key: str = "final") -> dict:
    """``{correction: {lag: mean of key over seeds}}`` (lag 0 of SAME_AT_LAG_0: "none"'s run)."""
    lags = sorted({r["lag"] for r in res["rows"]})
    out = {}
    for c in dict.fromkeys(r["correction"] for r in res["rows"]):
        out[c] = {}
        for lag in lags:
            cc = "none" if lag == 0 and c in SAME_AT_LAG_0 else c
            vals = [r[key] for r in res["rows"] if r["lag"] == lag and r["correction"] == cc]
            if vals:
                out[c][lag] = float(np.mean(vals))
    return out


def stall_lag(res: dict, correction: str = "none"):
    """The smallest lag at which ``correction``'s mean final accuracy is not above the mean start (None: none)."""
    start = float(np.mean([r["start"] for r in res["rows"]]))
    for lag, acc in sorted(table(res)[correction].items()):
        if acc <= start:
            return lag
    return None


def report(res: dict) -> str:
    """The table the command prints: mean final accuracy (and [min, max] over seeds) per lag x correction,
    then the shares of tokens each correction clipped, dropped or truncated, and the ratio's spread."""
    rows = res["rows"]
    lags = sorted({r["lag"] for r in rows})
    seeds = sorted({r["seed"] for r in rows})
    start = [r["start"] for r in rows]
    lines = [
        f"{res['preset']} preset, {res['steps']} steps ({res['updates_per_step']} optimizer updates each), "
        f"seeds {seeds}; start {np.mean(start):.3f}",
        "final greedy held-out accuracy, mean [min, max] over seeds, per lag (optimizer updates):",
        "  correction  " + "".join(f"{'lag ' + str(k):>22}" for k in lags),
    ]
    for c in dict.fromkeys(r["correction"] for r in rows):
        cells = []
        for lag in lags:
            v = final(res, lag, c)
            cells.append(f"{np.mean(v):.3f} [{min(v):.3f}, {max(v):.3f}]" if v else "")
        lines.append(f"  {c:<11} " + "".join(f"{x:>22}" for x in cells))
    lines.append(
        "shares of the completion tokens once the sampler is k behind (clipped / dropped / truncated), ratio std:"
    )
    for key in ("clipped", "dropped", "truncated", "ratio_std"):
        t = table(res, key)
        for c, by_lag in t.items():
            if any(v > 0 for v in by_lag.values()):
                lines.append(f"  {key:<9} {c:<10} " + "  ".join(f"lag {k}: {v:.3f}" for k, v in by_lag.items()))
    lag = stall_lag(res)
    lines.append(f"plain GRPO ('none') ends no higher than it started from lag {lag}" if lag is not None
                 else f"plain GRPO ('none') ends above its start at every lag up to {lags[-1]}")  # fmt: skip
    return "\n".join(lines)


def _curve(res: dict, lag: int, correction: str):
    c = "none" if lag == 0 and correction in SAME_AT_LAG_0 else correction
    rows = [r for r in res["rows"] if r["lag"] == lag and r["correction"] == c]
    if not rows:
        return None
    return np.array(rows[0]["updates"], float), np.mean([r["accuracy"] for r in rows], axis=0)


def plot_lag(res: dict):
    """The figure of notebook 13. Left: the final greedy held-out accuracy against the lag (a symlog axis, so
    that 0 has a place), one line per correction, the start dashed. Right: the accuracy against optimizer
    updates at the largest lag, one line per correction (several seeds: their mean)."""
    from matplotlib.figure import Figure

    from ..figures.plotstyle import PALETTE, set_alt

    rows = res.get("rows") or []
    if not rows:
        raise ValueError("res must hold the rows of a policy_lag.run")
    lags = sorted({r["lag"] for r in rows})
    corrections = [c for c in ORDER if any(r["correction"] == c for r in rows)]
    fig = Figure(figsize=(11.0, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    start = float(np.mean([r["start"] for r in rows]))
    for i, c in enumerate(corrections):
        xs = [k for k in lags if final(res, k, c)]
        left.plot(xs, [float(np.mean(final(res, k, c))) for k in xs], "o-", color=PALETTE[i], label=c, lw=1.5, ms=4)
        curve = _curve(res, lags[-1], c)
        if curve is not None:
            right.plot(*curve, color=PALETTE[i], label=c, lw=1.5)
    for ax in (left, right):
        ax.axhline(start, color="gray", ls="--", lw=1, label="start (the reference)")
        ax.set_ylabel("greedy held-out accuracy")
    left.set_xscale("symlog", linthresh=1)
    left.set_xticks(lags, [str(k) for k in lags])
    left.set_xlabel("policy lag k (optimizer updates the sampler is behind)")
    left.set_title(f"after {res['steps']} steps, per correction", fontsize=10)
    right.set_xlabel("optimizer updates")
    right.set_title(f"the sampler {lags[-1]} updates behind", fontsize=10)
    left.legend(fontsize=8, loc="lower left")
    seeds = sorted({r["seed"] for r in rows})
    fig.suptitle(f"GRPO with a lagging sampler ({res['preset']} preset, seed{'s' if len(seeds) > 1 else ''} "
                 f"{', '.join(map(str, seeds))})", fontsize=11)  # fmt: skip
    set_alt(fig, f"Two line charts. Left: final greedy held-out accuracy against the policy lag ({', '.join(map(str, lags))} "
                 f"optimizer updates), one line per correction ({', '.join(corrections)}), a dashed line at the start. "
                 f"Right: accuracy against optimizer updates at lag {lags[-1]}, one line per correction.")  # fmt: skip
    return fig


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes integers separated by commas (e.g. 0,2,8), got {text!r}") from None


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lags", type=_ints, default=[0, 2, 8, 32])
    p.add_argument("--corrections", default=",".join(ORDER))
    p.add_argument("--seeds", type=_ints, default=[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--eval_every", type=int, default=5)
    p.add_argument("--json", default=None, help="write the result here")
    p.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                   help="run nothing: merge these results (one per seed) and report them")  # fmt: skip
    a = p.parse_args(argv)
    if a.merge:
        res = merge(json.loads(open(f).read()) for f in a.merge)
    else:
        res = run("cpu", a.lags, a.corrections.split(","), a.seeds, a.steps, a.eval_every)
    print(report(res))
    print("the papers' claims on these rows: python -m grpo_edu.studies.regimes.policy_lag RESULT.json")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
