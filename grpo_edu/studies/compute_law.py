"""The compute-performance law on the course's runs (Khatri et al. 2025, ScaleRL): which knobs move the
ceiling A, which the efficiency B and C_mid, and does the law fitted on a run's first part predict the rest?

ScaleRL fits, to each run's validation pass rate R against its training compute C,

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)          (`grpo_edu.measure.fits.fit_compute_law`)

Their R is the mean pass rate (16 samples a prompt) on a held-out set from the training distribution; their
C is GPU-hours; they fit on the part of a run after its first, noisy ~1.5k GPU-hours up to a budget (50k of
100k GPU-hours for their longest run) and extrapolate. Their finding: most design choices (loss aggregation,
advantage normalisation, curriculum, the off-policy algorithm) move B and C_mid, few move A.

Here, per arm (the default GRPO and one knob changed) and seed, GRPO from the cached reference:

- R: the sampled pass rate (temperature 1, as RL samples) on the task's 500 held-out problems, one answer
  each, every ``eval_every`` steps; each evaluation draws with the same seed in every arm (common random
  numbers), so the arms differ by their policies, not by the evaluation's sampling.
- C: the completion tokens generated (every sampled completion, the groups dynamic sampling drops
  included: each step's mean completion length times the completions it generated, as the speedrun counts
  them). Not FLOPs: every arm has the same model, epochs and minibatches, so each trained token costs the
  same update in every arm and the FLOPs would rescale C by a common factor (moving every C_mid alike);
  tokens are what changes between arms (dynamic sampling's extra generations; the answers' lengths).
- R0: the reference's pass rate at step 0 (given, not fitted); A, B, C_mid fitted on the evaluations after
  step 0 (the whole run for the knobs' effects, the first ``fit_share`` of its compute for the prediction),
  A held in [R0, 1] (``A_BOUNDS``: a pass rate's ceiling; a free A ran to 1.04 on a whole run and 1.52 on a
  first half whose curve had not bent over).
- the naive prediction: "it stays where it is", the mean R of the last 3 fitted evaluations for every later
  one; each run's prediction error (mean absolute) against it.

The claims (verdicts by `grpo_edu.measure.verdicts`, paired by seed): per knob, "it moves A" (the paired
difference, signed as its mean, above ``A_MARGIN`` on every seed; at or below ``A_NULL`` on every seed:
fails here), "it moves B", "it moves C_mid" (the same on log ratios), and "the law fitted on the first part
predicts the rest better than staying put".

    python -m grpo_edu.studies.compute_law                    # the study the notebook loads (12 min, 1 thread)
    python -m grpo_edu.studies.compute_law --steps 40 --seeds 0 --arms default,"beta 0" --out /tmp/x.json
    python -m grpo_edu.studies.compute_law --refit                 # the stored runs fitted again (seconds)
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from ..algorithms import make_algorithm
from ..evaluation import evaluate
from ..measure.fits import fit_compute_law
from ..measure.verdicts import paired, rule, verdict
from ..train import train
from ..warmstart.presets import get_preset, make_task, resolve_preset, setup_torch
from ..warmstart.reference import reference_policy

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "course" / "data" / "compute_law.json"

ARMS = {
    "default": {},
    "sequence mean": {"loss_type": "sequence_mean"},
    "no std scaling": {"scale_rewards": "none"},
    "clip-higher 0.28": {"eps_high": 0.28},
    "group size 16": {"group_size": 16},
    "dynamic sampling": {"dynamic_sampling": True},
    "no KL (beta 0)": {"beta": 0.0},
}
"""Each arm: the default GRPOConfig with one knob changed (the knob the course teaches under that name)."""

A_MARGIN, A_NULL = 0.02, 0.01  # ScaleRL's error margin on A over independent runs is about 0.02
LOG_MARGIN, LOG_NULL = math.log(1.25), math.log(1.1)  # B, C_mid: moved by 25%, or by at most 10%
NAIVE_LAST = 3  # "it stays where it is": the mean of the last 3 fitted evaluations
A_BOUNDS = "[R0, 1]"  # the fitted ceiling of a pass rate: from its start to 1


def _sampled_pass_rate(policy, task, seed: int) -> float:
    return float(evaluate(policy, task, temperature=1.0, seed=seed))


def one_run(algo_config: dict, task, reference, preset, seed: int, steps: int, eval_every: int) -> dict:
    """One GRPO run: the sampled held-out pass rate at step 0 and every ``eval_every`` steps, with the
    completion tokens generated up to each (``tokens``), the greedy accuracy beside it."""
    out = {"seed": seed, "step": [], "tokens": [], "pass_rate": [], "greedy": []}

    def on_evaluate(ev):
        steps_so_far = ev.history.steps
        prev = [0] + [s["samples"] for s in steps_so_far]
        tokens = sum(s["completion_length"] * (s["samples"] - prev[i]) for i, s in enumerate(steps_so_far))
        out["step"].append(ev.step)
        out["tokens"].append(round(float(tokens), 1))
        out["pass_rate"].append(_sampled_pass_rate(ev.policy, task, 10_000 + 1_000 * seed + ev.step))
        out["greedy"].append(ev.accuracy)

    algo = make_algorithm("grpo", **algo_config)
    train(algo, task, reference, preset=preset, steps=steps, seed=seed, eval_every=eval_every, progress=False,
          on_evaluate=on_evaluate)  # fmt: skip
    return out


def fit_run(run: dict, share: float = 1.0) -> dict:
    """The law fitted (R0 given: the step-0 pass rate) on the evaluations after step 0 whose compute is at
    most ``share`` of the run's; with ``share`` < 1 also its prediction of the later evaluations and the
    naive one's (mean absolute errors)."""
    c, r = np.asarray(run["tokens"], dtype=float), np.asarray(run["pass_rate"], dtype=float)
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share}")
    if len(c) < 5 or c[0] != 0:
        raise ValueError("a run needs its step-0 evaluation and at least 4 more")
    first = (c > 0) & (c <= share * c[-1] + 1e-9)
    fit = fit_compute_law(c[first], r[first], r0=float(r[0]), a_bounds=(float(r[0]), 1.0))
    res = {"a": fit.a, "b": fit.b, "c_mid": fit.c_mid, "r0": fit.r0, "rmse": fit.rmse, "n": fit.n}
    if share < 1:
        later = c > share * c[-1] + 1e-9
        if not later.any():
            raise ValueError("no evaluation after the fitted part to predict")
        naive = float(np.mean(r[first][-NAIVE_LAST:]))
        res["error"] = fit.error(c[later], r[later])
        res["naive"] = float(np.mean(np.abs(r[later] - naive)))
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in res.items()}


def _signed(effects: list[float]) -> list[float]:
    """The paired effects, signed as their mean (a knob may move a parameter up or down)."""
    s = 1.0 if np.mean(effects) >= 0 else -1.0
    return [s * e for e in effects]


def _fmt(xs, f=".3f") -> str:
    return " ".join(format(x, f) for x in xs)


def claims_of(fits: dict, predictions: dict, base: str = "default") -> list[dict]:
    """The verdicts: per knob, A, B and C_mid moved (paired by seed, two-sided); then the prediction."""
    out = []
    n = len(fits[base])
    for arm in fits:
        if arm == base:
            continue
        d_a = paired([f["a"] for f in fits[arm]], [f["a"] for f in fits[base]])
        d_b = [math.log(x["b"] / y["b"]) for x, y in zip(fits[arm], fits[base], strict=True)]
        d_m = [math.log(x["c_mid"] / y["c_mid"]) for x, y in zip(fits[arm], fits[base], strict=True)]
        for what, eff, m, nl, f in (
            ("the ceiling A", d_a, A_MARGIN, A_NULL, "+.3f"),
            ("the steepness B", d_b, LOG_MARGIN, LOG_NULL, "+.2f"),
            ("the midpoint C_mid", d_m, LOG_MARGIN, LOG_NULL, "+.2f"),
        ):
            unit = "difference" if what.endswith("A") else "log ratio"
            out.append(
                {
                    "claim": f"{arm} moves {what} of the compute law against the default",
                    "measurement": f"{arm} vs {base}, {unit} per seed: {_fmt(eff, f)} "
                    f"({rule(round(m, 3), round(nl, 3), f'the {unit}, signed as its mean', n)})",
                    "verdict": verdict(_signed(eff), m, nl),
                }
            )
    gains = [1 - p["error"] / p["naive"] if p["naive"] > 0 else 0.0 for runs in predictions.values() for p in runs]
    out.append(
        {
            "claim": "fitted on the first part of a run, the law predicts the rest better than 'it stays where it is'",
            "measurement": f"1 - fit error / naive error, each of the {len(gains)} runs: {_fmt(gains, '+.2f')} "
            "(holds: > 0 on every run; fails here: <= 0 on every run)",
            "verdict": verdict(gains, 0.0, 0.0),
        }
    )
    return out


def run_compute_law(reference, preset="cpu", arms=None, seeds=(0, 1, 2), steps=240, eval_every=10,
                    fit_share=0.5, progress=True, on_run=None) -> dict:  # fmt: skip
    """Every arm x seed trained, fitted on the whole run and on its first ``fit_share`` of compute; the
    claims (``on_run(runs)``, if given, after each run: e.g. to keep what is done). Returns a JSON-able dict (``runs``, ``fits``, ``predictions``, ``claims``, ``config``)."""
    from .regimes.common import bar

    preset = resolve_preset(preset)
    arms = ARMS if arms is None else arms
    if "default" not in arms:
        raise ValueError("arms must include 'default' (every knob is compared with it)")
    if steps // eval_every < 8:
        raise ValueError(
            f"steps / eval_every must be >= 8 (4 evaluations to fit on each part), got {steps}/{eval_every}"
        )
    task = make_task(preset)
    runs, fits, predictions = {a: [] for a in arms}, {a: [] for a in arms}, {a: [] for a in arms}
    b = bar(len(arms) * len(seeds), "compute law", progress)
    t0 = time.perf_counter()
    for seed in seeds:
        for arm, cfg in arms.items():
            run = one_run(cfg, task, reference, preset, seed, steps, eval_every)
            runs[arm].append(run)
            fits[arm].append(fit_run(run))
            predictions[arm].append(fit_run(run, fit_share))
            b.update(1)
            if on_run is not None:
                on_run(runs)
    b.close()
    config = {"preset": preset.name, "seeds": list(seeds), "steps": steps, "eval_every": eval_every,
              "fit_share": fit_share, "a_bounds": A_BOUNDS, "sequences_per_step": preset.sequences_per_step,
              "arms": {a: dict(c) for a, c in arms.items()}, "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
    return {"config": config, "runs": runs, "fits": fits, "predictions": predictions,
            "claims": claims_of(fits, predictions)}  # fmt: skip


def refit(res: dict) -> dict:
    """The stored study with its fits, predictions and claims computed again from its runs (e.g. after a
    change of the fit): no run is trained again."""
    runs, share = res["runs"], res["config"]["fit_share"]
    fits = {a: [fit_run(r) for r in rs] for a, rs in runs.items()}
    predictions = {a: [fit_run(r, share) for r in rs] for a, rs in runs.items()}
    config = {**res["config"], "a_bounds": A_BOUNDS}
    return {**res, "config": config, "fits": fits, "predictions": predictions, "claims": claims_of(fits, predictions)}


def table(res: dict) -> list[dict]:
    """One row per arm: A, B, C_mid (mean and range over seeds) and the prediction's error against the naive one."""
    rows = []
    for arm, fs in res["fits"].items():
        row = {"arm": arm}
        for k in ("a", "b", "c_mid"):
            v = [f[k] for f in fs]
            row[k] = (float(np.mean(v)), min(v), max(v))
        p = res["predictions"][arm]
        row["error"], row["naive"] = [x["error"] for x in p], [x["naive"] for x in p]
        rows.append(row)
    return rows


def format_table(res: dict) -> str:
    lines = [f"{'arm':18s} {'A mean [min, max]':>22s} {'B mean [min, max]':>20s} {'C_mid (k tokens)':>22s} "
             f"{'fit / naive error':>18s}"]  # fmt: skip
    for r in table(res):
        a, b, m = r["a"], r["b"], [x / 1e3 for x in r["c_mid"]]
        ratio = _fmt([e / n if n > 0 else float("nan") for e, n in zip(r["error"], r["naive"], strict=True)], ".2f")
        lines.append(
            f"{r['arm']:18s} {a[0]:6.3f} [{a[1]:.3f}, {a[2]:.3f}] {b[0]:5.2f} [{b[1]:.2f}, {b[2]:.2f}]"
            f" {m[0]:6.0f} [{m[1]:.0f}, {m[2]:.0f}] {ratio:>18s}"
        )
    return "\n".join(lines)


def load(path: Path | str = RESULT) -> dict:
    """The stored study (what ``python -m grpo_edu.studies.compute_law`` wrote)."""
    return json.loads(Path(path).read_text())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m grpo_edu.studies.compute_law",
        description="ScaleRL's compute law on long GRPO runs: each knob against the default, over seeds; "
        "A, B, C_mid per arm, the fit on the first part scored against 'it stays where it is'.",
    )
    p.add_argument("--steps", type=int, default=240, help="RL steps per run (default 240)")
    p.add_argument("--eval-every", type=int, default=10, help="steps between evaluations (default 10)")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated arms, of: {', '.join(ARMS)}")
    p.add_argument("--fit-share", type=float, default=0.5, help="share of a run's compute fitted (default 0.5)")
    p.add_argument("--out", default=str(RESULT), help="where the JSON result goes (default: the stored one)")
    p.add_argument("--refit", action="store_true", help="fit the stored runs again (no training) and write --out")
    args = p.parse_args(argv)
    if args.refit:
        res = refit(load())
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
        print(format_table(res))
        for c in res["claims"]:
            print(f"[{c['verdict']:>10s}] {c['claim']}\n             {c['measurement']}")
        return 0
    names = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in names if a not in ARMS]
    if unknown:
        p.error(f"unknown arms: {', '.join(unknown)} (known: {', '.join(ARMS)})")
    seeds = tuple(int(s) for s in args.seeds.split(","))
    preset = get_preset("cpu")
    setup_torch(preset, 0)
    reference = reference_policy(preset, progress=False)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    res = run_compute_law(reference, preset, {a: ARMS[a] for a in names}, seeds, args.steps, args.eval_every,
                          args.fit_share, on_run=lambda runs: partial.write_text(json.dumps(runs) + "\n"))  # fmt: skip
    partial.unlink(missing_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(format_table(res))
    for c in res["claims"]:
        print(f"[{c['verdict']:>10s}] {c['claim']}\n             {c['measurement']}")
    print(f"{res['config']['seconds']:.0f} s; written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
