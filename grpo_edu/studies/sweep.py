"""`grpo-edu sweep`: is the comparison fair? Final accuracy per algorithm x learning rate x seed."""

from __future__ import annotations

from ..algorithms import make_algorithm
from ..measure.compare import ORDER
from ..train import train
from ..warmstart.presets import make_task, resolve_preset, setup_torch
from ..warmstart.reference import reference_policy


def run_sweep(
    preset="cpu", lrs=(1e-4, 3e-4, 1e-3), seeds=(0, 1), steps: int = 40, algorithms=ORDER, progress: bool = True
) -> dict:
    """Final held-out accuracy for each algorithm x learning rate x seed at one sample budget.

    A fair comparison tunes each method's learning rate: report the best lr per method and
    the spread over seeds at that lr (the table `format_sweep` prints)."""
    preset = resolve_preset(preset)
    setup_torch(preset, 0)
    task = make_task(preset)
    reference = reference_policy(preset, task=task, progress=progress)
    rows = []
    for a in algorithms:
        for lr in lrs:
            for seed in seeds:
                algo = make_algorithm(a, lr=lr)
                h = train(
                    algo, task, reference, preset=preset, steps=steps, seed=seed, progress=progress, eval_every=steps
                )
                rows.append(
                    {
                        "algorithm": a,
                        "lr": lr,
                        "seed": seed,
                        "final_accuracy": h.final_accuracy,
                        "initial_accuracy": h.initial_accuracy,
                        "train_seconds": h.steps[-1]["seconds"] if h.steps else 0.0,
                    }
                )
    return {"preset": preset.name, "steps": steps, "sequences_per_step": preset.sequences_per_step, "rows": rows}


def best_learning_rates(sweep: dict) -> dict:
    """``{algorithm: (best lr, mean final accuracy, min, max)}`` over seeds."""
    out = {}
    for a in dict.fromkeys(r["algorithm"] for r in sweep["rows"]):
        by_lr = {}
        for r in sweep["rows"]:
            if r["algorithm"] == a:
                by_lr.setdefault(r["lr"], []).append(r["final_accuracy"])
        lr, accs = max(by_lr.items(), key=lambda kv: sum(kv[1]) / len(kv[1]))
        out[a] = (lr, sum(accs) / len(accs), min(accs), max(accs))
    return out
