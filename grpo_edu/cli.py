"""The ``grpo-edu`` command.

    grpo-edu compare [--preset cpu|gpu|auto] [--seed 0] [--out out/compare] [--budget samples|seconds]
    grpo-edu bench   [--preset ...]            generation tokens/s, step time, memory per algorithm
    grpo-edu sweep   [--lrs 1e-4,3e-4,1e-3]    learning rate x seed per algorithm (fairness check)
    grpo-edu variance [--batches 16]           gradient variance per estimator at several snapshots
    grpo-edu reference [--preset ...]          build (or load) the SFT reference, print its accuracy
    grpo-edu train --algo grpo [--steps N]     one training run, prints the learning curve
"""

from __future__ import annotations

import argparse
import json
import sys


def _common(p):
    p.add_argument("--preset", default="auto", help="cpu | gpu | auto (gpu when CUDA is available)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="grpo-edu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="train all four algorithms side by side and measure them")
    _common(c)
    c.add_argument("--out", default="out/compare", help="folder for the PNG figures and JSON numbers")
    c.add_argument("--budget", choices=["samples", "seconds"], default="samples",
                   help="same number of sampled completions (default) or same training wall time")
    c.add_argument("--steps", type=int, default=None, help="steps of the samples budget (default: preset)")
    c.add_argument("--seconds", type=float, default=30.0, help="seconds per algorithm for --budget seconds")
    c.add_argument("--variance-batches", type=int, default=8, help="K batches for the gradient variance")
    b = sub.add_parser("bench", help="generation speed, step time and memory per algorithm")
    _common(b)
    b.add_argument("--json", default=None, help="also write the numbers to this file")
    b.add_argument("--memory-sweep", action="store_true",
                   help="also the PPO/GRPO peak-memory ratio from a small to a 25M-parameter model")
    w = sub.add_parser("sweep", help="learning rate x seed for each algorithm (is the comparison fair?)")
    _common(w)
    w.add_argument("--steps", type=int, default=40)
    w.add_argument("--lrs", default="1e-4,3e-4,1e-3", help="comma-separated learning rates")
    w.add_argument("--seeds", default="0,1", help="comma-separated seeds")
    w.add_argument("--json", default=None, help="also write the numbers to this file")
    v = sub.add_parser("variance", help="gradient variance of each estimator at several policy snapshots")
    _common(v)
    v.add_argument("--batches", type=int, default=16, help="K independent batches per snapshot")
    v.add_argument("--json", default=None, help="also write the numbers to this file")
    r = sub.add_parser("reference", help="build or load the SFT reference policy")
    _common(r)
    r.add_argument("--retrain", action="store_true")
    t = sub.add_parser("train", help="one training run from the reference")
    _common(t)
    t.add_argument("--algo", default="grpo", choices=["reinforce", "baseline", "ppo", "grpo"])
    t.add_argument("--steps", type=int, default=None)
    args = parser.parse_args(argv)

    import torch

    from .presets import get_preset, make_task, setup_torch

    try:
        preset = get_preset(args.preset)
    except ValueError as exc:
        parser.error(str(exc))
    setup_torch(preset, args.seed)
    progress = not args.quiet
    if args.cmd == "reference":
        from .sft import reference_policy

        _, info = reference_policy(preset, progress=progress, retrain=args.retrain, return_info=True)
        how = "loaded from" if info["loaded"] else f"trained in {info['seconds']:.1f} s, saved to"
        print(f"reference policy ({preset.name} preset, {info['steps']} SFT steps) {how} {info['path']}")
        print(f"held-out greedy accuracy: {info['accuracy']:.4f}")
    elif args.cmd == "train":
        from .algorithms import make_algorithm
        from .train import train

        h = train(make_algorithm(args.algo), preset=preset, task=make_task(preset), steps=args.steps,
                  seed=args.seed, progress=progress)
        for e in h.evals:
            print(f"step {e['step']:4d}  samples {e['samples']:7d}  {e['seconds']:6.1f} s  accuracy {e['accuracy']:.4f}")
    elif args.cmd == "compare":
        from .compare import format_table, run_comparison, write_report

        res = run_comparison(preset, seed=args.seed, budget=args.budget, steps=args.steps,
                             seconds=args.seconds if args.budget == "seconds" else None,
                             variance_batches=args.variance_batches, progress=progress)
        paths = write_report(res, args.out)
        print(format_table(res))
        print(f"reference accuracy {res['reference']['accuracy']:.4f}; total {res['total_seconds']:.0f} s "
              f"on {preset.device} ({torch.get_num_threads()} thread(s))")
        print("wrote " + ", ".join(sorted(paths.values())))
    elif args.cmd == "sweep":
        from .compare import format_sweep, run_sweep

        try:
            lrs = [float(x) for x in args.lrs.split(",")]
            seeds = [int(x) for x in args.seeds.split(",")]
        except ValueError:
            parser.error(f"--lrs and --seeds must be comma-separated numbers, got {args.lrs!r}, {args.seeds!r}")
        res = run_sweep(preset, lrs=lrs, seeds=seeds, steps=args.steps, progress=progress)
        print(format_sweep(res))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1)
    elif args.cmd == "variance":
        from .compare import format_variance_study, run_variance_study

        res = run_variance_study(preset, n_batches=args.batches, seed=args.seed, progress=progress)
        print(format_variance_study(res))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1, default=float)
    elif args.cmd == "bench":
        from .compare import format_bench, run_bench

        res = run_bench(preset, seed=args.seed, progress=progress)
        print(format_bench(res))
        if args.memory_sweep:
            from .compare import format_memory_sweep
            from .diagnostics import memory_sweep

            res["memory_sweep"] = memory_sweep(preset=preset, progress=progress)
            print(format_memory_sweep(res["memory_sweep"]))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
