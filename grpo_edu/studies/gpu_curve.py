"""The gpu preset's learning curve: its reference (SFT) and then GRPO at its real sizes, kept.

    python -m grpo_edu.studies.gpu_curve --out runs/gpu-curve            # CUDA when there
    python -m grpo_edu.studies.gpu_curve --device cpu --steps 40 --out runs/gpu-curve-cpu

What it writes under ``--out`` (the run folder of ``grpo-edu train --out DIR``, plus two files):
    sft.json      the reference's SFT curve (greedy held-out accuracy every 10 steps), its steps and seconds
    config.toml, metrics.jsonl, evals.jsonl, policy.pt   the GRPO run (warmstart.run_dir.RunLog), a line per step
    summary.json  the curve in one place: SFT and RL evaluations, the median RL step time, peak memory
                  (the process's peak resident set on a CPU; torch.cuda.max_memory_allocated on a GPU)

``summarize(out)`` rebuilds summary.json from whatever a run left, so a run stopped early (a CPU run
given less time than it needs) still reports the steps it took. The numbers of the one run recorded
so far are in README's "On a GPU" section, with the machine they ran on; the H200 run's files are kept
in tests/data/gpu_curve_h200/ (``--summarize --out`` that folder prints its block of the measurements page).
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import statistics
import time
from pathlib import Path

import torch

from ..algorithms import ALGORITHMS
from ..warmstart.presets import get_preset, make_task
from ..warmstart.reference import reference_policy, train_from_preset
from ..warmstart.run_dir import RunLog


def _peak_memory_mb(device: str) -> float:
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def summarize(out) -> dict:
    """summary.json from the files a (possibly unfinished) run left under ``out``."""
    out = Path(out)
    sft = json.loads((out / "sft.json").read_text())
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = [json.loads(line) for line in (out / "evals.jsonl").read_text().splitlines() if line.strip()]
    secs = [s["seconds"] for s in steps if "seconds" in s]
    summary = {
        "device": sft["device"],
        "threads": sft["threads"],
        "sft": {k: sft[k] for k in ("steps", "seconds", "accuracy", "curve")},
        "rl_steps": len(steps),
        "rl_evals": [{k: e[k] for k in ("step", "samples", "seconds", "accuracy")} for e in evals],
        "rl_step_seconds_median": statistics.median(secs) if secs else None,
        "rl_reward": [round(s["reward"], 4) for s in steps],
        "rl_kl": [round(s["kl"], 4) for s in steps],
        "rl_grad_norm": [round(s["grad_norm"], 2) for s in steps],
        "peak_memory_mb": max(sft["peak_memory_mb"], *(s.get("peak_memory_mb", 0.0) for s in steps)),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def format_summary(s: dict) -> str:
    """What the run measured, as the measurements page quotes it."""
    sft, med = s["sft"], s["rl_step_seconds_median"]
    lines = [
        f"device {s['device']} ({s['threads']} thread(s)); peak memory {s['peak_memory_mb']:,.0f} MB",
        f"reference (SFT): {sft['steps']} steps in {sft['seconds']:.0f} s, greedy held-out accuracy {sft['accuracy']:.3f}",
        "  SFT step  " + " ".join(f"{int(x):>5d}" for x in sft["curve"]["step"][-8:]),
        "  accuracy  " + " ".join(f"{a:5.3f}" for a in sft["curve"]["accuracy"][-8:]),
        f"GRPO: {s['rl_steps']} steps, median {med:.{1 if med >= 1 else 3}f} s a step (512 prompts x 8)",
        f"{'step':>6} {'completions':>12} {'seconds':>9} {'held-out accuracy':>18}",
    ]
    lines += [
        f"{e['step']:>6d} {e['samples']:>12,d} {e['seconds']:>9.0f} {e['accuracy']:>18.3f}" for e in s["rl_evals"]
    ]
    shown = [t for t in (1, 2, 3, 5) if t <= s["rl_steps"]] + list(range(10, s["rl_steps"] + 1, 10))
    lines.append("  RL step  " + " ".join(f"{t:>5d}" for t in shown))
    lines.append("  reward   " + " ".join(f"{s['rl_reward'][t - 1]:5.3f}" for t in shown) + "   (sampled at T = 1)")
    lines.append("  kl       " + " ".join(f"{s['rl_kl'][t - 1]:5.3f}" for t in shown) + "   (k3, per token)")
    g = s["rl_grad_norm"]
    top = max(range(len(g)), key=g.__getitem__)
    lines.append(f"grad_norm before clipping (a step's mean over its updates): step 1 {g[0]:.1f}, "
                 f"median {statistics.median(g):.1f}, largest {g[top]:.1f} at step {top + 1}")  # fmt: skip
    return "\n".join(lines)


class _Timed(RunLog):
    """RunLog that adds each step's wall seconds and the peak memory so far to its metrics line."""

    def __init__(self, *a, device: str, **kw):
        super().__init__(*a, **kw)
        self.device, self.t = device, time.perf_counter()

    def __call__(self, info) -> None:
        now = time.perf_counter()
        info.metrics.update(seconds=round(now - self.t, 3), peak_memory_mb=round(_peak_memory_mb(self.device), 1))
        self.t = now
        super().__call__(info)
        self.t = time.perf_counter()  # the evaluation and the writing are not the step's


def run(out, preset: str = "gpu", device: str | None = None, steps: int = 100, seed: int = 0) -> dict:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    p = get_preset(preset, device=device)
    if p.device == "cpu":
        torch.set_num_threads(1)  # one thread is fastest for these sizes on a CPU (presets.py)
    task = make_task(p)
    t0 = time.perf_counter()
    reference, info = reference_policy(p, task=task, return_info=True, progress=True)
    h = info.get("history") or {}
    sft = {
        "device": p.device,
        "threads": torch.get_num_threads(),
        "steps": info.get("steps"),
        "seconds": info.get("seconds", time.perf_counter() - t0),
        "accuracy": info.get("accuracy"),
        "curve": {"step": h.get("step", []), "accuracy": h.get("accuracy", [])},
        "peak_memory_mb": _peak_memory_mb(p.device),
    }
    (out / "sft.json").write_text(json.dumps(sft, indent=1) + "\n")
    print(f"reference: {sft['steps']} SFT steps, {sft['seconds']:.0f} s, held-out accuracy {sft['accuracy']}")
    algo = ALGORITHMS["grpo"]()  # GRPOConfig's defaults: group_size 8, so 512 prompts x 8 a step
    run_info = dict(algo="grpo", preset=p.name, world=p.world, seed=seed, steps=steps)
    log = _Timed(out, run_info, algo.config.to_dict(), "gpu_curve: the gpu preset's GRPO run", device=p.device)
    policy = copy.deepcopy(reference)
    hist = train_from_preset(algo, task, reference, policy, preset=p, steps=steps, progress=True, callback=log)
    log.close(hist, policy, task)
    return summarize(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m grpo_edu.studies.gpu_curve", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder the run is kept in")
    ap.add_argument("--preset", default="gpu", choices=("cpu", "gpu"))
    ap.add_argument("--device", default=None, help="cpu or cuda (default: the preset's)")
    ap.add_argument("--steps", type=int, default=100, help="GRPO steps")
    ap.add_argument("--summarize", action="store_true", help="only rebuild summary.json from --out")
    a = ap.parse_args(argv)
    if a.steps < 1:
        ap.error(f"--steps must be >= 1, got {a.steps}")
    res = summarize(a.out) if a.summarize else run(a.out, a.preset, a.device, a.steps)
    print(format_summary(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
