"""Wall time to 90%: the synchronous loop on one thread, on two, and the two-process pipeline, side by side.

For each seed, one after the other in one process (so the machine's load falls on the three alike): GRPO
with its default config from the cached reference of the cpu preset's default world, evaluated every 10
steps on the 500 held-out problems (the speedrun's rules), until greedy accuracy first reads 0.90 (at most
400 steps). The clock is train()'s: wall time of the steps, evaluations excluded; the pipeline's is its
learner's, waiting for the generator included (`grpo_edu.studies.pipeline`). Beside it: the steps taken, the
accuracy read at the stop, the whole run's wall time (evaluations and the child's start included) and, for
the pipeline, its batches' mean lag and where its two processes' time went.

    python -m grpo_edu.studies.pipeline_race                   # seeds 0, 1, 2; K = 1; ppo_clip and none
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


def variants(corrections) -> dict:
    """name -> (torch threads, the pipeline's off_policy_correction or None: the synchronous loop)."""
    two = {f"two processes, {c}": (1, c) for c in corrections}
    return {**{name: (t, None) for name, t in SYNC.items()}, **two}


def _one(variant: str, preset, task, reference, seed: int, max_staleness: int, corrections) -> dict:
    threads, correction = variants(corrections)[variant]
    torch.set_num_threads(threads)
    kw = dict(preset=preset, seed=seed, steps=MAX_STEPS, target_accuracy=TARGET, eval_every=10, progress=False)
    t0 = time.perf_counter()
    if correction is not None:  # two processes, one thread each
        algo = make_algorithm("grpo", off_policy_correction=correction)
        h = train_pipeline(algo, task, reference, max_staleness=max_staleness, threads=1, **kw)
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
        out.update(lag=float(np.mean(h.series("lag"))), start=h.config["pipeline_start_seconds"],
                   generate=float(np.median(h.series("generate_seconds"))),
                   wait=float(np.median(h.series("wait_seconds"))))  # fmt: skip
    return out


def race(seeds=(0, 1, 2), max_staleness: int = 1, corrections=("ppo_clip", "none"), progress: bool = False) -> dict:
    """Each seed's runs (in `variants`' order: one after the other, so the machine's load falls on all alike),
    the machine, and the medians over the seeds. The pipeline runs once per ``off_policy_correction``:
    "ppo_clip", the ratio against the log-probs that came with the batch (the synchronous loop's own loss;
    with no lag every correction is), no extra forward for the learner; "none", the ratio against the
    learner's own log-probs at the step's start (the lag ignored), one extra forward."""
    preset = get_preset("cpu")
    setup_torch(preset, preset.seed)
    task = make_task(preset)
    reference = reference_policy(preset, task=task, progress=progress)
    torch.set_num_threads(1)
    train(make_algorithm("grpo"), task, reference, preset=preset, steps=1, eval_every=1, progress=False)  # warm-up
    names = list(variants(corrections))
    runs = [_one(v, preset, task, reference, preset.seed + s, max_staleness, corrections) for s in seeds for v in names]
    torch.set_num_threads(1)
    keys = ("seconds", "steps", "accuracy", "wall", "step_seconds")
    median = {v: {k: statistics.median(r[k] for r in runs if r["variant"] == v) for k in keys} for v in names}
    return {"machine": {**machine(), "cores": os.cpu_count()}, "max_staleness": max_staleness,
            "corrections": list(corrections), "seeds": list(seeds), "runs": runs, "median": median}  # fmt: skip


def format_race(res: dict) -> str:
    m = res["machine"]
    lines = [
        f"GRPO (default config) from the cpu preset's reference to {TARGET:.0%} held-out greedy accuracy, evaluated "
        f"every 10 steps; seeds {', '.join(map(str, res['seeds']))}; the pipeline's max_staleness "
        f"{res['max_staleness']}, with each off_policy_correction named",
        f"machine: {m['cpu']}, {m['cores']} cores, ATen kernel {m['kernel']}, torch {m['torch']}",
        f"{'variant':26s} {'seed':>4s} {'s to 90%':>9s} {'steps':>5s} {'accuracy':>8s} {'s/step':>7s} {'wall s':>7s}",
    ]
    for r in res["runs"]:
        extra = ""
        if "lag" in r:
            extra = (f"  lag {r['lag']:.2f}, start {r['start']:.1f} s, generate {r['generate'] * 1e3:.0f} ms, "
                     f"learner waits {r['wait'] * 1e3:.0f} ms")  # fmt: skip
        lines.append(f"{r['variant']:26s} {r['seed']:4d} {r['seconds']:9.1f} {r['steps']:5d} {r['accuracy']:8.3f} "
                     f"{r['step_seconds']:7.3f} {r['wall']:7.1f}{extra}")  # fmt: skip
    base = res["median"]["sync, 1 thread"]["seconds"]
    lines.append("median over the seeds (ratio: the variant's seconds to 90% / the synchronous loop's on 1 thread):")
    for v, med in res["median"].items():
        lines.append(f"{v:26s} {med['seconds']:9.1f} s to 90%, {med['steps']:.0f} steps, accuracy {med['accuracy']:.3f}, "
                     f"{med['step_seconds']:.3f} s a step, ratio {med['seconds'] / base:.2f}")  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m grpo_edu.studies.pipeline_race", description=__doc__.split("\n")[0])
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (added to the preset's)")
    p.add_argument("--max_staleness", type=int, default=1, help="the pipeline's lag bound K (weight versions)")
    p.add_argument("--corrections", default="ppo_clip,none", help="the pipeline's off_policy_correction, one run each")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the numbers to this file")
    args = p.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        p.error(f"--seeds takes comma-separated integers, got {args.seeds!r}")
    if args.max_staleness < 0:
        p.error(f"--max_staleness must be >= 0, got {args.max_staleness}")
    corrections = [c.strip() for c in args.corrections.split(",")]
    try:
        for c in corrections:
            make_algorithm("grpo", off_policy_correction=c)
    except ValueError as exc:
        p.error(str(exc))
    res = race(seeds, args.max_staleness, corrections)
    print(format_race(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
