"""The text tables of the experiments (what `grpo-edu bench`, `sweep`, `variance` and
`ablate` print; course/site/measurements.md quotes them) and the files `grpo-edu compare` writes."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..measure.common import reach, spread
from ..measure.reports import format_table, memory_note
from ..train import History


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
    from ..studies.sweep import best_learning_rates

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


def write_report(result: dict, out_dir) -> dict:
    """Save ``comparison.json`` and the figures in ``out_dir``; return their paths."""
    import matplotlib

    matplotlib.use("Agg", force=False)

    from ..figures import plots

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    hist = {r["label"]: [History.from_dict(h) for h in r["histories"]] for r in result["algorithms"].values()}
    for x in ("samples", "seconds"):
        paths[f"curves_{x}"] = out_dir / f"learning_curves_{x}.png"
        plots.save(plots.plot_learning_curves(hist, x=x), paths[f"curves_{x}"])  # with its alt text
    if "memory" in result:
        paths["variance"] = out_dir / "gradient_variance.png"
        plots.save(plots.plot_comparison_variance(result), paths["variance"])  # one panel per batch layout
        paths["memory"] = out_dir / "memory.png"
        plots.save(plots.plot_comparison_memory(result, note=memory_note(result)), paths["memory"])
    if result.get("memory_sweep"):
        paths["memory_ratio"] = out_dir / "memory_ratio.png"
        plots.save(plots.plot_memory_ratio(result["memory_sweep"]), paths["memory_ratio"])
    clean = {k: v for k, v in result.items() if not k.startswith("_")}
    paths["json"] = out_dir / "comparison.json"
    paths["json"].write_text(json.dumps(clean, indent=1, default=str))
    paths["table"] = out_dir / "comparison.txt"
    paths["table"].write_text(format_table(result) + "\n")
    return {k: str(v) for k, v in paths.items()}


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


def format_samples(res: dict) -> str:
    """What `grpo-edu sample` prints: each prompt, the policy's answer, the expected one, right or
    wrong, and the accuracy; when the task writes answers reversed, the first line says so with the
    first row as the example (21+38=59 is written 95)."""
    info = res["info"]
    steps = f"{info['steps']} RL step" + ("" if info["steps"] == 1 else "s")
    lines = [f"policy {res['path']} ({info['algo']}, {steps})"]
    if res.get("reversed") and res["rows"]:  # on the first line: the rows start on the third
        r = res["rows"][0]
        lines[0] += f"; answers least-significant digit first: {r['prompt']}{r['value']} is written {r['expected']}"
    lines.append(f"{'prompt':<12} {'answer':<8} {'expected':<8} right?")
    lines += [
        f"{r['prompt']:<12} {r['answer']:<8} {r['expected']:<8} {'right' if r['right'] else 'wrong'}"
        for r in res["rows"]
    ]
    how = "greedy" if res["temperature"] == 0 else f"sampled at temperature {res['temperature']:g}"
    k = sum(r["right"] for r in res["rows"])
    lines.append(
        f"accuracy {k}/{len(res['rows'])} = {res['accuracy']:.3f} ({how}, held-out problems, seed {res['seed']})"
    )
    return "\n".join(lines)
