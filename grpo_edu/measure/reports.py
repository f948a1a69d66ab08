"""The text tables and figure files of the measurements (what the CLI prints and writes)."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

from ..train import History
from .common import reach, spread


def _fmt(v, spec) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def format_table(result: dict) -> str:
    """The comparison as a table with a legend (the README quotes it)."""
    n, target = len(result["seeds"]), result.get("target", 0.9)
    pct = f"{target:.0%}"
    cols = [
        ("method", 27),
        ("acc start", 9),
        ("acc end" + (" (mean [min, max])" if n > 1 else ""), 26 if n > 1 else 8),
        (f"steps to {pct}", 12),
        (f"compl. to {pct}", 15),
        (f"s to {pct}", 11),
        ("s/step", 7),
        ("rel. var", 9),
        ("peak MB", 8),
        ("x GRPO", 7),
        ("upd/step", 8),
    ]
    lines = ["  ".join(f"{c:>{w}}" if i else f"{c:<{w}}" for i, (c, w) in enumerate(cols))]
    for r in result["algorithms"].values():
        vals = [
            r["label"],
            _fmt(r["initial_accuracy"], ".4f"),
            spread(r["final_accuracy"]),
            reach(r["steps_to_target"]),
            reach(r["samples_to_target"], ","),
            reach(r["seconds_to_target"], ".1f"),
            _fmt(r["seconds_per_step"], ".3f"),
            _fmt(r.get("relative_variance_corrected"), ".3f"),
            _fmt(r.get("peak_step_memory_mb"), ".1f"),
            _fmt(r.get("memory_ratio_to_grpo"), ".2f"),
            str(r["updates_per_step"]),
        ]
        lines.append("  ".join(f"{v:>{w}}" if i else f"{v:<{w}}" for i, (v, (_, w)) in enumerate(zip(vals, cols))))
    b = result["budget"]
    budget = (
        f"{result['samples_budget']:,} sampled completions each ({result['samples_budget'] // result['sequences_per_step']} "
        f"steps of {result['sequences_per_step']})"
        if b == "samples"
        else f"{result['seconds_budget']} s of training each"
    )
    seeds = f"{n} RL seeds {result['seeds']}" if n > 1 else f"seed {result['seeds'][0]}"
    lines += [
        f"budget: {budget}; {seeds}, all from one reference ({result['reference']['accuracy']:.4f} held-out)",
        f"acc: greedy held-out accuracy at the start and after the budget. to {pct}: the first evaluation "
        f"(every 10 steps) at >= {pct}, min-max over seeds ((k/n): only k seeds got there; never: none did).",
        "s: training wall time, evaluation excluded. rel. var: tr Cov(g) / |mean g|^2 of the method's gradient "
        "estimate at the reference, bias-corrected (see measure.variance), in the layout the method trains with.",
        "peak MB: measured peak memory of one training step; x GRPO: that peak over GRPO's; "
        "upd/step: optimizer updates per sampled batch (epochs x minibatches).",
    ]
    if "wins" in result:
        lines.append(format_wins(result))
    if result.get("claims"):
        lines.append(format_claims(result["claims"]))
    return "\n".join(lines)


def format_claims(claims: list[dict]) -> str:
    """claim -> measurement -> verdict, one line each (verdict first, so it scans)."""
    lines = ["claims of the derivation, tested here (holds / fails here / depends: the seeds disagree):"]
    lines += [f"  [{c['verdict']:>10}] {c['claim']}: {c['measurement']}" for c in claims]
    return "\n".join(lines)


def format_wins(result: dict) -> str:
    """Which rung is best on which measure, one line each."""
    lines = ["where each rung wins (the worst seed counts):"]
    labels = {a: r["label"] for a, r in result["algorithms"].items()}
    specs = {
        "completions to target": ",",
        "seconds to target": ".1f",
        "seconds per step": ".3f",
        "peak step memory (MB)": ".1f",
        "final accuracy (worst seed)": ".4f",
    }
    for what, w in result["wins"].items():
        vals = ", ".join(
            f"{labels[a]} {_fmt(v, specs[what]) if v is not None else 'never'}" for a, v in w["values"].items()
        )
        name = what.replace("target", f"{result.get('target', 0.9):.0%}")
        lines.append(f"  {name:<28} {labels.get(w['winner'], '-'):<28} ({vals})")
    return "\n".join(lines)


def method_variance(result: dict) -> dict:
    """{"REINFORCE (512x1)": stats, ...}: each method's estimator in the layout it trains with."""
    from .compare import own_variance

    out = {}
    for a, r in result["algorithms"].items():
        layout, stats = own_variance(result, a)
        out[textwrap.fill(r["label"], 14) + f"\n({layout})"] = stats
    return out


def memory_note(result: dict) -> str:
    """What dominates the memory at this size, COMPUTED from the measured breakdown."""
    mem = result["memory"]
    if "ppo" not in mem:
        return ""
    b = mem["ppo"]["breakdown"]
    critic = b["critic_params"] + b["critic_grads"] + b["critic_optimizer_state"]
    total = sum(b.values())
    return (
        f"At this size activations dominate ({b['activations'] / total:.0%} of PPO's analytic step; REINFORCE and "
        f"the baseline update on the whole batch, PPO and GRPO on minibatches, and GRPO runs each prompt once for "
        f"its G completions), and the critic's parameters, "
        f"gradients and Adam state are {critic / total:.1%} of it. When parameters dominate the ratio PPO/GRPO "
        f"tends to (16P + 4P + 16P) / (16P + 4P) = 1.8: grpo-edu bench --memory-sweep measures it."
    )


def write_report(result: dict, out_dir) -> dict:
    """Save ``comparison.json`` and the figures in ``out_dir``; return their paths."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from .. import plots

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    hist = {r["label"]: [History.from_dict(h) for h in r["histories"]] for r in result["algorithms"].values()}
    for x in ("samples", "seconds"):
        fig = plots.plot_learning_curves(hist, x=x)
        paths[f"curves_{x}"] = out_dir / f"learning_curves_{x}.png"
        fig.savefig(paths[f"curves_{x}"], dpi=120, bbox_inches="tight")
        plt.close(fig)
    if "memory" in result:
        fig = plots.plot_variance(
            method_variance(result),
            key="relative_variance_corrected",
            xlabel="method (layout)",
            title="Each method's gradient estimate at the reference, in the layout it trains with",
        )
        paths["variance"] = out_dir / "gradient_variance.png"
        fig.savefig(paths["variance"], dpi=120, bbox_inches="tight")
        plt.close(fig)
        rows = [{**m, "algorithm": result["algorithms"][a]["label"]} for a, m in result["memory"].items()]
        fig = plots.plot_memory(rows, note=memory_note(result))
        paths["memory"] = out_dir / "memory.png"
        fig.savefig(paths["memory"], dpi=120, bbox_inches="tight")
        plt.close(fig)
    if result.get("memory_sweep"):
        fig = plots.plot_memory_ratio(result["memory_sweep"])
        paths["memory_ratio"] = out_dir / "memory_ratio.png"
        fig.savefig(paths["memory_ratio"], dpi=120, bbox_inches="tight")
        plt.close(fig)
    clean = {k: v for k, v in result.items() if not k.startswith("_")}
    paths["json"] = out_dir / "comparison.json"
    paths["json"].write_text(json.dumps(clean, indent=1, default=str))
    paths["table"] = out_dir / "comparison.txt"
    paths["table"].write_text(format_table(result) + "\n")
    return {k: str(v) for k, v in paths.items()}


def format_bench(b: dict) -> str:
    g = b["generation"]
    lines = [
        f"device: {b['device']}, torch {b['torch']}, {b['threads']} thread(s), preset {b['preset']}",
        f"generation, {g['batch']} sequences: recompute prefix {g['uncached_tokens_per_s']:,.0f} tok/s, "
        f"KV cache {g['cached_tokens_per_s']:,.0f} tok/s ({g['speedup']:.2f}x), + each prompt once "
        f"{g['shared_tokens_per_s']:,.0f} tok/s ({g['share_speedup']:.2f}x more)",
        f"{'method':<10} {'s/step':>7} {'gen s':>7} {'update s':>8} {'upd/step':>8} "
        f"{'fwd+bwd per update (policy/ref/critic)':>40} {'peak MB':>8} {'w/ rollout':>10}",
    ]
    for a, r in b["algorithms"].items():
        p = r["passes_per_update"]
        passes = (
            f"{p['policy_forward']:.0f}+{p['policy_backward']:.0f} / {p['reference_forward']:.2f}+0 / "
            f"{p['critic_forward']:.0f}+{p['critic_backward']:.0f}"
        )
        lines.append(
            f"{a:<10} {r['seconds_per_step']:>7.3f} {r['generation_seconds']:>7.3f} "
            f"{r['update_seconds']:>8.3f} {r['updates_per_step']:>8} {passes:>40} "
            f"{r['peak_step_mb']:>8.1f} {r['peak_with_rollout_mb']:>10.1f}"
        )
    return "\n".join(lines)


def format_sweep(sweep: dict) -> str:
    lrs = sorted({r["lr"] for r in sweep["rows"]})
    lines = [
        f"final held-out accuracy after {sweep['steps']} steps x {sweep['sequences_per_step']} "
        f"completions (mean over seeds, [min, max])",
        f"{'method':<10}" + "".join(f"{'lr ' + format(lr, 'g'):>22}" for lr in lrs),
    ]
    for a in dict.fromkeys(r["algorithm"] for r in sweep["rows"]):
        cells = []
        for lr in lrs:
            accs = [r["final_accuracy"] for r in sweep["rows"] if r["algorithm"] == a and r["lr"] == lr]
            cells.append(f"{sum(accs) / len(accs):.3f} [{min(accs):.3f}, {max(accs):.3f}]")
        lines.append(f"{a:<10}" + "".join(f"{c:>22}" for c in cells))
    from .sweep import best_learning_rates

    best = best_learning_rates(sweep)
    lines.append("best lr: " + ", ".join(f"{a} {v[0]:g} ({v[1]:.3f})" for a, v in best.items()))
    return "\n".join(lines)


def format_variance_study(study: dict) -> str:
    est = ("raw", "batch_mean", "critic", "optimal", "group_mean", "group_loo", "group_norm")
    P, G = study["prompts"], study["group_size"]
    lines = [
        f"relative variance tr(Cov)/|mean g|^2 of the gradient estimate, K={study['n_batches']} "
        f"batches of {P * G} sequences: {P}x{G} = {P} prompts x {G} samples, {P * G}x1 = distinct prompts",
        f"{'snapshot':<34}{'acc':>6}{'layout':>8}"
        + "".join(f"{e:>11}" for e in est)
        + f"{'b*':>8}{'mean R':>8}{'|s|2 ok/wrong':>15}",
    ]
    for r in study["rows"]:
        sn = r["score_norms"]
        for layout, tag in (("group", f"{P}x{G}"), ("distinct", f"{P * G}x1")):
            res = r[layout]
            cells = "".join(f"{res[e]['relative_variance']:>11.3f}" if e in res else f"{'-':>11}" for e in est)
            tail = (
                f"{sn['b_star']:>8.3f}{sn['mean_reward']:>8.3f}"
                f"{sn['score_norm2_correct'] / max(sn['score_norm2_wrong'], 1e-12):>15.2f}"
                if layout == "group"
                else ""
            )
            lines.append(f"{r['label']:<34}{r['accuracy']:>6.3f}{tag:>8}{cells}{tail}")
    return "\n".join(lines)


def format_memory_sweep(rows) -> str:
    """The PPO/GRPO peak step memory from activation-dominated to parameter-dominated."""
    lines = [
        "PPO (policy + critic + reference) vs GRPO (policy + reference), one training step, fp32",
        f"{'model':<12}{'params':>12}{'batch':>7}{'PPO MB':>9}{'GRPO MB':>9}{'ratio':>7}{'analytic':>9}",
    ]
    for r in rows:
        lines.append(
            f"{'d' + str(r['d_model']) + ' L' + str(r['n_layers']):<12}{r['params']:>12,}"
            f"{r['batch_size']:>7}{r['ppo_measured'] / 1e6:>9.1f}{r['grpo_measured'] / 1e6:>9.1f}"
            f"{r['ratio_measured']:>7.2f}{r['ratio_analytic']:>9.2f}"
        )
    lines.append("limit when parameters dominate: (16P policy + 4P reference + 16P critic) / 20P = 1.8")
    return "\n".join(lines)


def format_ablation(result: dict) -> str:
    """The table: reference accuracy and each algorithm's accuracy after ``steps`` steps as
    mean [min, max] over seeds, and how many seeds reached 90% (and at which steps)."""
    algos, n = result["algorithms"], len(result["seeds"])
    head = f"{'row':<22}{'reference':>22}" + "".join(
        f"{a + ' @' + str(result['steps']):>24}{'seeds >= 90%, at step':>24}" for a in algos
    )
    lines = [
        f"held-out greedy accuracy, mean [min, max] over {n} seeds (each: SFT + RL), "
        f"{result['steps']} steps x {result['sequences_per_step']} completions, preset {result['preset']}",
        head,
    ]
    for row in result["rows"]:
        runs = row["runs"]
        cells = f"{row['name']:<22}{spread([r['reference_accuracy'] for r in runs], '.3f'):>22}"
        for a in algos:
            cells += f"{spread([r[a]['final_accuracy'] for r in runs], '.3f'):>24}"
            hit = [r[a]["steps_to_90"] for r in runs if r[a]["steps_to_90"] is not None]
            cells += f"{f'{len(hit)}/{n}, {reach(hit)}' if hit else f'0/{n}':>24}"
        lines.append(cells)
    lines.append("rows: " + "; ".join(f"{r['name']} = {r['what']}" for r in result["rows"]))
    if not math.isnan(result.get("seconds", math.nan)):
        lines.append(f"total {result['seconds']:.0f} s")
    return "\n".join(lines)
