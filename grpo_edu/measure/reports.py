"""The comparison as text: its tables, where each rung wins, the claims (what `grpo-edu compare`
prints and notebook 05 shows); what dominates its memory."""

from __future__ import annotations

import math
import textwrap

from .common import reach, spread
from .compare import own_variance


def _fmt(v, spec) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


WIDTH = 118  # every line fits a 120-column terminal and notebook 05's HTML


def wrap(text: str, indent: str = "", first: str = "") -> str:
    return textwrap.fill(text, WIDTH, initial_indent=first, subsequent_indent=indent, break_on_hyphens=False)


def _table(cols, rows) -> list[str]:
    """Aligned columns: ``cols`` = [(header, width)], the first left-aligned."""

    def line(cells):
        return "  ".join(f"{c:>{w}}" if i else f"{c:<{w}}" for i, (c, (_, w)) in enumerate(zip(cells, cols)))

    return [line([c for c, _ in cols])] + [line(r) for r in rows]


def format_table(result: dict) -> str:
    """The comparison as two tables (learning; cost at the reference), the legend that fits
    the run (one seed or several), where each rung wins and the claims (course/site/measurements.md quotes it)."""
    n, pct = len(result["seeds"]), f"{result.get('target', 0.9):.0%}"
    algos = result["algorithms"]
    learn = [
        ("method", 10), ("acc start", 9), ("acc end" + (" mean [min, max]" if n > 1 else ""), 24 if n > 1 else 8),
        (f"steps to {pct}", 12), (f"compl. to {pct}", 15), (f"s to {pct}", 11), ("s/step", 6), ("upd/step", 8),
    ]  # fmt: skip
    lines = _table(learn, [
        [a, _fmt(r["initial_accuracy"], ".4f"), spread(r["final_accuracy"]), reach(r["steps_to_target"]),
         reach(r["samples_to_target"], ","), reach(r["seconds_to_target"], ".1f"), _fmt(r["seconds_per_step"], ".3f"),
         str(r["updates_per_step"])]
        for a, r in algos.items()
    ])  # fmt: skip
    if any("peak_step_memory_mb" in r for r in algos.values()):
        lines.append("")
        cost = [
            ("method", 10), ("layout", 7), ("rel. var", 8), ("rows/update", 11), ("peak MB", 7),
            ("peak MB, own prompt per row", 27), ("critic MB", 9),
        ]  # fmt: skip
        lines += _table(cost, [
            [a, own_variance(result, a)[0], _fmt(r.get("relative_variance_corrected"), ".3f"),
             str(r.get("rows_per_update", "-")), _fmt(r.get("peak_step_memory_mb"), ".1f"),
             _fmt(r.get("peak_step_memory_unshared_mb"), ".1f"), _fmt(r.get("critic_mb"), ".1f")]
            for a, r in algos.items()
        ])  # fmt: skip
    b = result["budget"]
    budget = (
        f"{result['samples_budget']:,} sampled completions each ({result['samples_budget'] // result['sequences_per_step']} "
        f"steps of {result['sequences_per_step']})"
        if b == "samples"
        else f"{result['seconds_budget']} s of training each"
    )
    seeds = f"{n} RL seeds {result['seeds']}" if n > 1 else f"one RL seed ({result['seeds'][0]})"
    over = ", min-max over seeds ((k/n): only k seeds got there; never: none did)" if n > 1 else " (never: not reached)"
    legend = [
        "methods: " + "; ".join(f"{a} = {r['label']}" for a, r in algos.items()),
        f"budget: {budget}; {seeds}, all from one reference ({result['reference']['accuracy']:.4f} held-out)",
        f"acc: greedy held-out accuracy at the start and after the budget. to {pct}: the first evaluation (every 10 steps)"
        f" at >= {pct}{over}. s: training wall time, evaluation excluded (noisy on a shared machine).",
    ]
    if len(lines) > len(algos) + 1:
        legend.append(
            "Measured at the reference: rel. var = tr Cov(g) / |mean g|^2 of the method's gradient estimate, "
            "bias-corrected, in the layout it trains with (prompts x completions per prompt; PPO's is its own: GAE with "
            "the critic, lambda = 1, whitened over the batch's tokens as PPO trains). peak MB = measured peak of one training step as the "
            "method trains: its rows per update (batch / minibatches: REINFORCE and the baseline update on the whole "
            "batch, so their activations are larger) and, for GRPO, each prompt run once for its G rows. "
            "'own prompt per row' = the same step with every row running its own copy of its prompt (the same for "
            "one completion per prompt): PPO vs GRPO there is the critic alone. critic MB = the critic's "
            "parameters, gradients and Adam state."
        )
    if n < 2:
        legend.append(
            "One seed: a comparison between two rungs is printed as [  one seed] (no verdict); "
            "--seeds 3 gives the spread that decides it."
        )
    lines += [wrap(t, "  ") for t in legend]
    if "wins" in result:
        lines.append(format_wins(result))
    if result.get("claims"):
        lines.append(format_claims(result["claims"], n))
    return "\n".join(lines)


# where a claim of `grpo-edu compare` that does not hold is explained (the start of its text -> the notebook)
EXPLAINED = {
    "every rung learns": "notebook 05, section 2",
    "reusing each batch": "notebook 05, sections 2 and 3 (in the spread world: the KL leash and GRPO's clip)",
    "a learned critic (PPO) beats": (
        "notebook 05, section 2; what carries PPO's lead (the layout, not the critic): `python -m "
        "grpo_edu.studies.gap_ablation`; where a critic's credit pays: notebook 08, part 2"
    ),
    "GRPO reaches the target in less wall time": "notebook 05, section 6",
    "dropping the critic saves memory": "notebook 03, section 6, and notebook 05, section 5",
    "GRPO's G completions per prompt": "notebook 05, section 5",
    "a baseline lowers the variance": (
        "notebook 02, section 2, and 02_baseline_variance, section 2; in the spread world: notebook 05, section 4; "
        "the advantage's falls: notebook 08"
    ),
    "the critic learns to predict": (
        "02_baseline_variance, section 1; V(s_0)'s ceiling: notebook 08, part 1; V(s_t) token by token: notebook 08, "
        "part 2"
    ),
    "the group baseline gives GRPO": "notebook 05, section 4, and notebook 08",
}


def explained_in(claim: str) -> str | None:
    """The notebook that explains a claim of compare's when it does not hold (None if none is named)."""
    return next((where for start, where in EXPLAINED.items() if claim.startswith(start)), None)


def format_claims(claims: list[dict], seeds: int = 2) -> str:
    """claim -> measurement -> verdict, verdict first so it scans, wrapped to fit 120 columns; under
    a claim that does not hold, the notebook that explains why (`EXPLAINED`)."""
    legend = "holds / fails here / depends: the seeds disagree" if seeds > 1 else "holds / fails here / one seed"
    lines = [f"claims of the derivation, tested here ({legend}):"]
    for c in claims:
        lines.append(wrap(f"{c['claim']}: {c['measurement']}", " " * 15, f"  [{c['verdict']:>10}] "))
        where = explained_in(c["claim"]) if c["verdict"] != "holds" else None
        if where:
            lines.append(wrap(where, " " * 20, " " * 15 + "why: "))
    return "\n".join(lines)


def format_wins(result: dict) -> str:
    """Which rung is best on which measure, one line each (wrapped)."""
    n = len(result.get("seeds", [0, 1]))
    lines = ["where each rung wins (the worst seed counts):" if n > 1 else "best on this one seed (not a ranking):"]
    specs = {
        "completions to target": ",",
        "seconds to target": ".1f",
        "seconds per step": ".3f",
        "peak step memory (MB)": ".1f",
        "final accuracy (worst seed)": ".4f",
    }
    for what, w in result["wins"].items():
        vals = ", ".join(f"{a} {_fmt(v, specs[what]) if v is not None else 'never'}" for a, v in w["values"].items())
        name = what.replace("target", f"{result.get('target', 0.9):.0%}")
        if n < 2:
            name = name.replace(" (worst seed)", "")
        lines.append(wrap(f"{name:<28} {w['winner'] or '-':<10} ({vals})", " " * 41, "  "))
    return "\n".join(lines)


def method_variance(result: dict) -> dict:
    """{"REINFORCE (512x1)": stats, ...}: each method's estimator in the layout it trains with."""
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
        "the baseline update on the whole batch, PPO and GRPO on minibatches, and GRPO runs each prompt once for "
        f"its G completions), and the critic's parameters, gradients and Adam state are {critic / total:.1%} of it. "
        "When parameters dominate the ratio PPO/GRPO tends to (16P + 4P + 16P) / (16P + 4P) = 1.8: grpo-edu bench "
        "--memory-sweep measures it."
    )
