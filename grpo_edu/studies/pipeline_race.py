"""Wall time to 90%: the synchronous loop on one thread, on two, and the two-process pipeline, side by side.

For each seed, one after the other in one process (so the machine's load falls on all alike): GRPO
with its default config from the cached reference of the cpu preset's default world, evaluated every 10
steps on the 500 held-out problems (the speedrun's rules), until greedy accuracy first reads 0.90 (at most
400 steps). The clock is train()'s: wall time of the steps, evaluations excluded; the pipeline's is its
learner's, waiting for the generator included (`grpo_edu.studies.pipeline`). Beside it: the steps taken, the
accuracy read at the stop, the whole run's wall time (evaluations and the child's start included) and, for
the pipeline, its batches' mean lag and where its two processes' time went.

The pipeline runs once per lag bound K (``max_staleness``, weight versions) and ``off_policy_correction``.
K = 0 is the control: two processes, but the generator waits for every update, so each batch is the
synchronous loop's (no lag); against it, K > 0 shows what the lag costs, and against the synchronous loop
on one thread, K = 0 shows what the split into two processes costs or gains by itself.

    python -m grpo_edu.studies.pipeline_race                   # seeds 0, 1, 2; K = 0, 1, 2, 4; ppo_clip
    python -m grpo_edu.studies.pipeline_race --seeds 0 --max_staleness 2 --corrections decoupled --json race.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

import numpy as np
import torch

from ..algorithms import make_algorithm
from ..train import train
from ..warmstart.presets import get_preset, make_task, setup_torch
from ..warmstart.reference import reference_policy
from .pipeline import train_pipeline
from .speedrun import machine

TARGET, MAX_STEPS = 0.9, 400  # the speedrun's target and budget (204,800 completions of 512 a step)
SYNC = {"sync, 1 thread": 1, "sync, 2 threads": 2}  # the synchronous loop's variants: name -> torch threads


def variants(corrections, max_staleness=(1,)) -> dict:
    """name -> (torch threads, the pipeline's off_policy_correction or None: the synchronous loop, its K)."""
    two = {f"two processes K={k}, {c}": (1, c, k) for k in max_staleness for c in corrections}
    return {**{name: (t, None, 0) for name, t in SYNC.items()}, **two}


def _one(variant: str, preset, task, reference, seed: int, max_staleness, corrections) -> dict:
    threads, correction, k = variants(corrections, max_staleness)[variant]
    torch.set_num_threads(threads)
    kw = dict(preset=preset, seed=seed, steps=MAX_STEPS, target_accuracy=TARGET, eval_every=10, progress=False)
    t0 = time.perf_counter()
    if correction is not None:  # two processes, one thread each
        algo = make_algorithm("grpo", off_policy_correction=correction)
        h = train_pipeline(algo, task, reference, max_staleness=k, threads=1, **kw)
    else:
        h = train(make_algorithm("grpo"), task, reference, **kw)
    wall = time.perf_counter() - t0
    out = {
        "variant": variant,
        "seed": seed,
        "seconds": h.first_reaching(TARGET, "seconds") or math.inf,  # never: infinite, as the speedrun's rule
        "steps": len(h.steps),
        "accuracy": h.final_accuracy,
        "wall": wall,
        "step_seconds": float(np.median(np.diff([0.0] + list(h.series("seconds"))))),
    }
    if correction is not None:
        out.update(lag=float(np.mean(h.series("lag"))), lag_max=int(max(h.series("lag"))), start=h.config["pipeline_start_seconds"],
                   generate=float(np.median(h.series("generate_seconds"))),
                   wait=float(np.median(h.series("wait_seconds"))))  # fmt: skip
    return out


def race(seeds=(0, 1, 2), max_staleness=(0, 1, 2, 4), corrections=("ppo_clip",), progress: bool = False) -> dict:
    """Each seed's runs (in `variants`' order: one after the other, so the machine's load falls on all alike),
    the machine, and the medians over the seeds. The pipeline runs once per lag bound K of ``max_staleness``
    (an int or a sequence of them) and ``off_policy_correction``:
    "ppo_clip", the ratio against the log-probs that came with the batch (the synchronous loop's own loss;
    with no lag every correction is), no extra forward for the learner; "none", the ratio against the
    learner's own log-probs at the step's start (the lag ignored), one extra forward."""
    max_staleness = [max_staleness] if isinstance(max_staleness, int) else list(max_staleness)
    preset = get_preset("cpu")
    setup_torch(preset, preset.seed)
    task = make_task(preset)
    reference = reference_policy(preset, task=task, progress=progress)
    torch.set_num_threads(1)
    train(make_algorithm("grpo"), task, reference, preset=preset, steps=1, eval_every=1, progress=False)  # warm-up
    names = list(variants(corrections, max_staleness))
    runs = [_one(v, preset, task, reference, preset.seed + s, max_staleness, corrections) for s in seeds for v in names]
    torch.set_num_threads(1)
    median = medians(runs)
    return {"machine": {**machine(), "cores": os.cpu_count()}, "max_staleness": max_staleness,
            "corrections": list(corrections), "seeds": list(seeds), "runs": runs, "median": median}  # fmt: skip


def medians(runs) -> dict:
    """variant -> the median over its seeds of each of its numbers (in the runs' order of variants)."""
    keys = ("seconds", "steps", "accuracy", "wall", "step_seconds")
    names = list(dict.fromkeys(r["variant"] for r in runs))
    return {v: {k: statistics.median(r[k] for r in runs if r["variant"] == v) for k in keys} for v in names}


def format_race(res: dict) -> str:
    m = res["machine"]
    lines = [
        f"GRPO (default config) from the cpu preset's reference to {TARGET:.0%} held-out greedy accuracy, evaluated "
        f"every 10 steps; seeds {', '.join(map(str, res['seeds']))}; the pipeline at each max_staleness K "
        f"({', '.join(map(str, _ks(res['max_staleness'])))}) with the off_policy_correction named",
        f"machine: {m['cpu']}, {m['cores']} cores, ATen kernel {m['kernel']}, torch {m['torch']}",
        f"{'variant':31s} {'seed':>4s} {'s to 90%':>9s} {'steps':>5s} {'accuracy':>8s} {'s/step':>7s} {'wall s':>7s}",
    ]
    for r in res["runs"]:
        extra = ""
        if "lag" in r:
            extra = (f"  lag {r['lag']:.2f} (max {r.get('lag_max', '?')}), start {r['start']:.1f} s, generate {r['generate'] * 1e3:.0f} ms, "
                     f"learner waits {r['wait'] * 1e3:.0f} ms")  # fmt: skip
        lines.append(f"{r['variant']:31s} {r['seed']:4d} {r['seconds']:9.1f} {r['steps']:5d} {r['accuracy']:8.3f} "
                     f"{r['step_seconds']:7.3f} {r['wall']:7.1f}{extra}")  # fmt: skip
    base = res["median"]["sync, 1 thread"]["seconds"]
    lines.append("median over the seeds (ratio: the variant's seconds to 90% / the synchronous loop's on 1 thread; "
                 "vs K=0: / the two processes' at K=0 with the same correction)")  # fmt: skip
    for v, med in res["median"].items():
        control = res["median"].get(_at_zero(v))
        vs = f", vs K=0 {med['seconds'] / control['seconds']:.2f}" if control and _at_zero(v) != v else ""
        lines.append(f"{v:31s} {med['seconds']:9.1f} s to 90%, {med['steps']:.0f} steps, accuracy {med['accuracy']:.3f}, "
                     f"{med['step_seconds']:.3f} s a step, ratio {med['seconds'] / base:.2f}{vs}")  # fmt: skip
    return "\n".join(lines)


def _at_zero(variant: str) -> str | None:
    """The K=0 control of a two-process variant ("two processes K=2, none" -> "two processes K=0, none")."""
    head, k, rest = variant.partition(" K=")
    return f"{head} K=0,{rest.partition(',')[2]}" if k else None


def _ks(k) -> list:
    return [k] if isinstance(k, int) else list(k)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m grpo_edu.studies.pipeline_race", description=__doc__.split("\n")[0])
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (added to the preset's)")
    p.add_argument(
        "--max_staleness", default="0,1,2,4", help="the pipeline's lag bounds K (weight versions), one run each"
    )
    p.add_argument("--corrections", default="ppo_clip", help="the pipeline's off_policy_correction, one run each")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the numbers to this file")
    args = p.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        p.error(f"--seeds takes comma-separated integers, got {args.seeds!r}")
    try:
        ks = [int(k) for k in args.max_staleness.split(",")]
    except ValueError:
        p.error(f"--max_staleness takes comma-separated integers, got {args.max_staleness!r}")
    if any(k < 0 for k in ks):
        p.error(f"--max_staleness must be >= 0, got {args.max_staleness}")
    corrections = [c.strip() for c in args.corrections.split(",")]
    try:
        for c in corrections:
            make_algorithm("grpo", off_policy_correction=c)
    except ValueError as exc:
        p.error(str(exc))
    res = race(seeds, ks, corrections)
    print(format_race(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
