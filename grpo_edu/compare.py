"""The main job: all four algorithms from the same reference, side by side, measured.

`run_comparison` trains REINFORCE, REINFORCE with a baseline, PPO with a critic and GRPO
from the same SFT reference with the same budget (the same number of sampled completions
by default, or the same training wall time), then measures at the reference policy the
relative variance of each method's gradient estimate, the peak memory of one training
step and the passes per update. `write_report` prints one table and saves the figures
(PNG) and the numbers (JSON). `grpo-edu compare` is this module from the command line.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch

from . import diagnostics
from .algorithms import make_algorithm
from .presets import get_preset, make_task, setup_torch
from .sft import reference_policy
from .train import History, train

ORDER = ("reinforce", "baseline", "ppo", "grpo")
LABELS = {"reinforce": "REINFORCE", "baseline": "REINFORCE + critic baseline",
          "ppo": "PPO + critic", "grpo": "GRPO"}
# the gradient estimator each algorithm applies (diagnostics.gradient_variance names)
ESTIMATOR_OF = {"reinforce": "raw", "baseline": "critic", "ppo": "gae", "grpo": "group_norm"}


def run_comparison(preset="cpu", seed: int = 0, budget: str = "samples", steps: int | None = None,
                   seconds: float | None = None, algorithms=ORDER, variance_batches: int = 8,
                   critic_steps: int = 150, measure: bool = True, progress: bool = True, configs: dict | None = None) -> dict:
    """Train each algorithm from one reference with one budget; measure variance and memory.

    budget="samples": every algorithm sees ``steps * sequences_per_step`` completions.
    budget="seconds": every algorithm trains for ``seconds`` of wall time (evaluation
    excluded). ``configs`` maps an algorithm name to config overrides.
    """
    if budget not in ("samples", "seconds"):
        raise ValueError(f"budget must be 'samples' or 'seconds', got {budget!r}")
    unknown = [a for a in algorithms if a not in ORDER]
    if unknown:
        raise ValueError(f"unknown algorithms {unknown}; choose from {list(ORDER)}")
    preset = get_preset(preset) if isinstance(preset, str) else preset
    setup_torch(preset, seed)
    task = make_task(preset)
    t0 = time.perf_counter()
    reference, ref_info = reference_policy(preset, task=task, progress=progress, return_info=True)
    steps = steps or preset.steps
    n_samples = steps * preset.sequences_per_step
    if budget == "seconds" and seconds is None:
        raise ValueError("budget='seconds' needs seconds=")
    out = {"preset": preset.name, "device": preset.device, "seed": seed, "budget": budget,
           "samples_budget": n_samples if budget == "samples" else None,
           "seconds_budget": seconds if budget == "seconds" else None,
           "sequences_per_step": preset.sequences_per_step,
           "reference": {"accuracy": ref_info["accuracy"], "loaded": ref_info["loaded"]},
           "torch": torch.__version__, "threads": torch.get_num_threads(), "algorithms": {}}
    histories = {}
    for name in algorithms:
        algo = make_algorithm(name, **(configs or {}).get(name, {}))
        kw = dict(samples=n_samples) if budget == "samples" else dict(seconds=seconds)
        h = train(algo, task=task, reference=reference, preset=preset, seed=seed, progress=progress,
                  name=LABELS[name], **kw)
        histories[name] = h
        out["algorithms"][name] = {
            "label": LABELS[name],
            "initial_accuracy": h.initial_accuracy,
            "final_accuracy": h.final_accuracy,
            "steps": len(h.steps),
            "samples": h.steps[-1]["samples"] if h.steps else 0,
            "train_seconds": h.steps[-1]["seconds"] if h.steps else 0.0,
            "seconds_per_step": (h.steps[-1]["seconds"] / len(h.steps)) if h.steps else math.nan,
            "steps_to_90": h.first_reaching(0.9, "step"),
            "seconds_to_90": h.first_reaching(0.9, "seconds"),
            "samples_to_90": h.first_reaching(0.9, "samples"),
            "updates_per_step": algo.config.epochs * algo.config.minibatches,
            "history": h.to_dict(),
        }
    if measure:
        _measure(out, preset, task, reference, seed, variance_batches, progress, algorithms, critic_steps)
    out["total_seconds"] = time.perf_counter() - t0
    out["_histories"] = histories
    return out


def _measure(out, preset, task, reference, seed, variance_batches, progress, algorithms, critic_steps):
    """Variance of each method's estimator in the layout that method trains with (REINFORCE,
    baseline, PPO: prompts x 1; GRPO: prompts x G), one critic shared by both layouts; and
    the memory of one step."""
    est = [ESTIMATOR_OF[a] for a in algorithms]
    critic = None
    if {"critic", "gae"} & set(est):
        critic, fit = diagnostics.fit_critic(reference, task, steps=critic_steps, seed=seed + 1,
                                             progress=progress)
    kw = dict(n_batches=variance_batches, prompts_per_batch=preset.prompts_per_step,
              group_size=preset.group_size, seed=seed, progress=progress, critic=critic)
    var = diagnostics.gradient_variance(
        reference, task, estimators=tuple(dict.fromkeys(est + ["batch_mean", "group_mean"])), **kw)
    if critic is not None:
        var["_meta"]["critic_explained_variance"] = fit["explained_variance"]
    out["gradient_variance"] = var  # all estimators on the same prompts x G batches
    solo = [e for e in est if e not in diagnostics.GROUP_ESTIMATORS]
    var_distinct = (diagnostics.gradient_variance(reference, task, estimators=tuple(solo), layout="distinct", **kw)
                    if solo else {})
    out["gradient_variance_distinct"] = var_distinct  # the same number of sequences, prompts x 1
    own = {e: (var_distinct if e in var_distinct else var)[e] for e in est}
    mem = {a: diagnostics.step_memory(a, preset=preset, batch_size=preset.sequences_per_step,
                                      seed=seed) for a in algorithms}
    out["memory"] = mem
    grpo_peak = mem["grpo"]["measured_peak_step"] if "grpo" in mem else math.nan
    for a in algorithms:
        row = out["algorithms"][a]
        row["relative_variance"] = own[ESTIMATOR_OF[a]]["relative_variance"]
        row["mean_cosine"] = own[ESTIMATOR_OF[a]]["mean_cosine"]
        row["peak_step_memory_mb"] = mem[a]["measured_peak_step"] / 1e6
        row["peak_with_rollout_mb"] = (mem[a]["measured_peak_with_rollout"] or math.nan) / 1e6
        row["memory_ratio_to_grpo"] = mem[a]["measured_peak_step"] / grpo_peak
        row["analytic_mb"] = mem[a]["analytic_total"] / 1e6


def format_table(result: dict) -> str:
    """One plain-text table of the comparison (the README quotes it)."""
    cols = [("method", 28), ("acc start", 9), ("acc end", 8), ("steps", 6), ("train s", 8),
            ("s to 90%", 9), ("steps to 90%", 12), ("rel. var", 9), ("peak MB", 8),
            ("x GRPO", 7), ("upd/step", 8)]
    lines = ["  ".join(f"{c:>{w}}" if i else f"{c:<{w}}" for i, (c, w) in enumerate(cols))]
    fmt = lambda v, spec: "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)  # noqa: E731
    for r in result["algorithms"].values():
        vals = [r["label"], fmt(r["initial_accuracy"], ".4f"), fmt(r["final_accuracy"], ".4f"),
                str(r["steps"]), fmt(r["train_seconds"], ".1f"), fmt(r["seconds_to_90"], ".1f"),
                fmt(r["steps_to_90"], "d"), fmt(r.get("relative_variance"), ".3f"),
                fmt(r.get("peak_step_memory_mb"), ".1f"), fmt(r.get("memory_ratio_to_grpo"), ".2f"),
                str(r["updates_per_step"])]
        lines.append("  ".join(f"{v:>{w}}" if i else f"{v:<{w}}" for i, (v, (_, w)) in enumerate(zip(vals, cols))))
    b = result["budget"]
    lines.append(f"budget: {result['samples_budget']} sampled completions each" if b == "samples"
                 else f"budget: {result['seconds_budget']} s of training each")
    return "\n".join(lines)


def write_report(result: dict, out_dir) -> dict:
    """Save ``comparison.json`` and the figures in ``out_dir``; return their paths."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from . import plots

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    hist = [History.from_dict(r["history"]) for r in result["algorithms"].values()]
    for x in ("samples", "seconds"):
        fig = plots.plot_learning_curves(hist, x=x)
        paths[f"curves_{x}"] = out_dir / f"learning_curves_{x}.png"
        fig.savefig(paths[f"curves_{x}"], dpi=120, bbox_inches="tight")
        plt.close(fig)
    if "gradient_variance" in result:
        fig = plots.plot_variance(result["gradient_variance"])
        paths["variance"] = out_dir / "gradient_variance.png"
        fig.savefig(paths["variance"], dpi=120, bbox_inches="tight")
        plt.close(fig)
        fig = plots.plot_memory(list(result["memory"].values()))
        paths["memory"] = out_dir / "memory.png"
        fig.savefig(paths["memory"], dpi=120, bbox_inches="tight")
        plt.close(fig)
    clean = {k: v for k, v in result.items() if not k.startswith("_")}
    paths["json"] = out_dir / "comparison.json"
    paths["json"].write_text(json.dumps(clean, indent=1, default=str))
    paths["table"] = out_dir / "comparison.txt"
    paths["table"].write_text(format_table(result) + "\n")
    return {k: str(v) for k, v in paths.items()}


# -- grpo-edu bench -------------------------------------------------------------------------
def generation_speed(policy, task, n_prompts: int = 64, group_size: int = 8, repeats: int = 5,
                     seed: int = 0) -> dict:
    """Tokens per second of batched sampling with and without the KV cache, measured side
    by side (alternating, median of ``repeats``) on the same prompts and seeds."""
    from .rollout import generate

    prompts = task.encode_prompts(task.sample(n_prompts, seed))
    times = {True: [], False: []}
    tokens = 0
    for r in range(repeats + 1):
        for cached in (True, False):
            g = torch.Generator(device=next(policy.parameters()).device).manual_seed(seed + r)
            t0 = time.perf_counter()
            ro = generate(policy, prompts, group_size=group_size, max_new_tokens=task.max_answer_length,
                          generator=g, use_cache=cached)
            if ro.mask.is_cuda:
                torch.cuda.synchronize()
            if r:  # the first round warms up
                times[cached].append(time.perf_counter() - t0)
            tokens = ro.batch_size * ro.completion_ids.shape[1]
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    return {"batch": n_prompts * group_size, "tokens_per_call": tokens,
            "cached_tokens_per_s": tokens / med[True], "uncached_tokens_per_s": tokens / med[False],
            "speedup": med[False] / med[True]}


def run_bench(preset="cpu", seed: int = 0, algorithms=ORDER, n_steps: int = 5, progress: bool = True) -> dict:
    preset = get_preset(preset) if isinstance(preset, str) else preset
    setup_torch(preset, seed)
    task = make_task(preset)
    reference = reference_policy(preset, task=task, progress=progress)
    gen = generation_speed(reference, task, preset.prompts_per_step, preset.group_size, seed=seed)
    rows = {}
    for a in algorithms:
        cost = diagnostics.step_cost(a, preset=preset, reference=reference, n_steps=n_steps, seed=seed)
        mem = diagnostics.step_memory(a, preset=preset, batch_size=preset.sequences_per_step, seed=seed)
        rows[a] = {"seconds_per_step": cost["seconds_per_step"], "generation_seconds": cost["generation_seconds"],
                   "update_seconds": cost["update_seconds"], "updates_per_step": cost["updates_per_step"],
                   "passes_per_update": cost["passes_per_update"],
                   "peak_step_mb": mem["measured_peak_step"] / 1e6,
                   "peak_with_rollout_mb": (mem["measured_peak_with_rollout"] or math.nan) / 1e6,
                   "analytic_mb": mem["analytic_total"] / 1e6, "memory_method": mem["method"]}
    dev = torch.cuda.get_device_name() if preset.device.startswith("cuda") else _cpu_name()
    return {"preset": preset.name, "device": dev, "threads": torch.get_num_threads(),
            "torch": torch.__version__, "generation": gen, "algorithms": rows}


def _cpu_name() -> str:
    import os
    import platform

    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} vCPU)"
    except OSError:
        pass
    return f"{platform.processor() or 'CPU'} ({os.cpu_count()} vCPU)"


def format_bench(b: dict) -> str:
    g = b["generation"]
    lines = [f"device: {b['device']}, torch {b['torch']}, {b['threads']} thread(s), preset {b['preset']}",
             f"generation, {g['batch']} sequences: KV cache {g['cached_tokens_per_s']:,.0f} tok/s, "
             f"recompute prefix {g['uncached_tokens_per_s']:,.0f} tok/s, speedup {g['speedup']:.2f}x",
             f"{'method':<10} {'s/step':>7} {'gen s':>7} {'update s':>8} {'upd/step':>8} "
             f"{'fwd+bwd per update (policy/ref/critic)':>40} {'peak MB':>8} {'w/ rollout':>10}"]
    for a, r in b["algorithms"].items():
        p = r["passes_per_update"]
        passes = (f"{p['policy_forward']:.0f}+{p['policy_backward']:.0f} / {p['reference_forward']:.2f}+0 / "
                  f"{p['critic_forward']:.0f}+{p['critic_backward']:.0f}")
        lines.append(f"{a:<10} {r['seconds_per_step']:>7.3f} {r['generation_seconds']:>7.3f} "
                     f"{r['update_seconds']:>8.3f} {r['updates_per_step']:>8} {passes:>40} "
                     f"{r['peak_step_mb']:>8.1f} {r['peak_with_rollout_mb']:>10.1f}")
    return "\n".join(lines)


# -- grpo-edu sweep: learning rate x seed, the fairness check of the comparison ------------------
def run_sweep(preset="cpu", lrs=(1e-4, 3e-4, 1e-3), seeds=(0, 1), steps: int = 40,
              algorithms=ORDER, progress: bool = True) -> dict:
    """Final held-out accuracy for each algorithm x learning rate x seed at one sample budget.

    A fair comparison tunes each method's learning rate: report the best lr per method and
    the spread over seeds at that lr (the table `format_sweep` prints)."""
    preset = get_preset(preset) if isinstance(preset, str) else preset
    setup_torch(preset, 0)
    task = make_task(preset)
    reference = reference_policy(preset, task=task, progress=progress)
    rows = []
    for a in algorithms:
        for lr in lrs:
            for seed in seeds:
                h = train(make_algorithm(a, lr=lr), task=task, reference=reference, preset=preset,
                          steps=steps, seed=seed, progress=progress, eval_every=steps)
                rows.append({"algorithm": a, "lr": lr, "seed": seed, "final_accuracy": h.final_accuracy,
                             "initial_accuracy": h.initial_accuracy,
                             "train_seconds": h.steps[-1]["seconds"] if h.steps else 0.0})
    return {"preset": preset.name, "steps": steps, "sequences_per_step": preset.sequences_per_step,
            "rows": rows}


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


def format_sweep(sweep: dict) -> str:
    lrs = sorted({r["lr"] for r in sweep["rows"]})
    lines = [f"final held-out accuracy after {sweep['steps']} steps x {sweep['sequences_per_step']} "
             f"completions (mean over seeds, [min, max])",
             f"{'method':<10}" + "".join(f"{'lr ' + format(lr, 'g'):>22}" for lr in lrs)]
    for a in dict.fromkeys(r["algorithm"] for r in sweep["rows"]):
        cells = []
        for lr in lrs:
            accs = [r["final_accuracy"] for r in sweep["rows"] if r["algorithm"] == a and r["lr"] == lr]
            cells.append(f"{sum(accs) / len(accs):.3f} [{min(accs):.3f}, {max(accs):.3f}]")
        lines.append(f"{a:<10}" + "".join(f"{c:>22}" for c in cells))
    best = best_learning_rates(sweep)
    lines.append("best lr: " + ", ".join(f"{a} {v[0]:g} ({v[1]:.3f})" for a, v in best.items()))
    return "\n".join(lines)


# -- grpo-edu variance: does a baseline lower the variance, and when? ---------------------------
def run_variance_study(preset="cpu", targets=(0.5, 0.75, 0.9), n_batches: int = 16, seed: int = 0,
                       mixed_digits=(1, 2), max_steps: int = 400, critic_steps: int = 100,
                       progress: bool = True) -> dict:
    """Relative gradient variance of each estimator at several policy snapshots.

    Snapshots: the reference, then REINFORCE-trained policies first reaching each accuracy
    in ``targets``; at each, both layouts (64 prompts x 8 samples, 512 distinct prompts x
    1) and the score norms of right vs wrong answers with the optimal baseline b*. With
    ``mixed_digits``, also at the reference of a task whose operands have mixed lengths
    (prompts of different difficulty: where a per-prompt baseline should matter most).
    """
    import copy

    from envs import ArithmeticTask

    preset = get_preset(preset) if isinstance(preset, str) else preset
    setup_torch(preset, seed)
    task = make_task(preset)
    reference = reference_policy(preset, task=task, progress=progress)

    def measure(policy, tsk, label, acc):
        row = {"label": label, "accuracy": acc}
        for layout in ("group", "distinct"):
            row[layout] = diagnostics.gradient_variance(
                policy, tsk, n_batches=n_batches, prompts_per_batch=preset.prompts_per_step,
                group_size=preset.group_size, layout=layout, seed=seed, progress=progress,
                critic_steps=critic_steps)
        row["score_norms"] = {k: v for k, v in diagnostics.score_norms(policy, tsk, seed=seed).items()
                              if not hasattr(v, "__len__")}
        return row

    from .evaluation import evaluate

    rows = [measure(reference, task, "reference", evaluate(reference, task))]
    policy = copy.deepcopy(reference)
    algo = make_algorithm("reinforce")
    for target in targets:
        h = train(algo, task=task, reference=reference, policy=policy, preset=preset, steps=max_steps,
                  target_accuracy=target, seed=seed, progress=progress, eval_every=5)
        rows.append(measure(policy, task, f"REINFORCE to {target:.0%}", h.final_accuracy))
        algo = make_algorithm("reinforce")  # fresh optimizer state; the policy carries on
        seed += 1
    if mixed_digits:
        mixed = ArithmeticTask(**{**preset.task, "mixed_digits": tuple(mixed_digits)})
        ref_m = reference_policy(task=mixed, model_config=preset.model, sft_config=preset.sft,
                                 device=preset.device, progress=progress)
        rows.append(measure(ref_m, mixed, f"mixed digits {tuple(mixed_digits)} reference",
                            evaluate(ref_m, mixed)))
    return {"preset": preset.name, "n_batches": n_batches, "prompts": preset.prompts_per_step,
            "group_size": preset.group_size, "rows": rows}


def format_variance_study(study: dict) -> str:
    est = ("raw", "batch_mean", "critic", "optimal", "group_mean", "group_norm")
    P, G = study["prompts"], study["group_size"]
    lines = [f"relative variance tr(Cov)/|mean g|^2 of the gradient estimate, K={study['n_batches']} "
             f"batches of {P * G} sequences: {P}x{G} = {P} prompts x {G} samples, {P * G}x1 = distinct prompts",
             f"{'snapshot':<34}{'acc':>6}{'layout':>8}" + "".join(f"{e:>11}" for e in est)
             + f"{'b*':>8}{'mean R':>8}{'|s|2 ok/wrong':>15}"]
    for r in study["rows"]:
        sn = r["score_norms"]
        for layout, tag in (("group", f"{P}x{G}"), ("distinct", f"{P * G}x1")):
            res = r[layout]
            cells = "".join(f"{res[e]['relative_variance']:>11.3f}" if e in res else f"{'-':>11}" for e in est)
            tail = (f"{sn['b_star']:>8.3f}{sn['mean_reward']:>8.3f}"
                    f"{sn['score_norm2_correct'] / max(sn['score_norm2_wrong'], 1e-12):>15.2f}"
                    if layout == "group" else "")
            lines.append(f"{r['label']:<34}{r['accuracy']:>6.3f}{tag:>8}{cells}{tail}")
    return "\n".join(lines)


def format_memory_sweep(rows) -> str:
    """The PPO/GRPO peak step memory from activation-dominated to parameter-dominated."""
    lines = ["PPO (policy + critic + reference) vs GRPO (policy + reference), one training step, fp32",
             f"{'model':<12}{'params':>12}{'batch':>7}{'PPO MB':>9}{'GRPO MB':>9}{'ratio':>7}"
             f"{'analytic':>9}"]
    for r in rows:
        lines.append(f"{'d' + str(r['d_model']) + ' L' + str(r['n_layers']):<12}{r['params']:>12,}"
                     f"{r['batch_size']:>7}{r['ppo_measured'] / 1e6:>9.1f}{r['grpo_measured'] / 1e6:>9.1f}"
                     f"{r['ratio_measured']:>7.2f}{r['ratio_analytic']:>9.2f}")
    lines.append("limit when parameters dominate: (16P policy + 4P reference + 16P critic) / 20P = 1.8")
    return "\n".join(lines)
