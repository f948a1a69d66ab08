"""The figure of notebook 11: each silent bug's signature, one row per bug, one column per metric.

Every panel draws the healthy run in gray and the bugged run in colour, from the same reference and
seeds (the runs of `grpo_edu.demos.silent_bugs.signatures`); a column shares its y axis, so a row
reads as the bug's fingerprint: the panels where the colour leaves the gray are the metrics it moves.
Each column is 1.55 inches wide: ten metrics make a figure 16.7 inches wide, too wide for a page's
column at a readable scale, so a notebook draws the metrics in two figures of five.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from ..demos.silent_bugs import METRICS
from .plots import _band
from .plotstyle import PALETTE, set_alt, styled

SHORT = {  # a column's title: the metric as the run logs it, shortened to fit
    "accuracy": "held-out accuracy",
    "reward": "reward",
    "kl": "kl",
    "entropy": "entropy",
    "clip_ratio": "clip_ratio",
    "ratio_std": "ratio spread (std)",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "advantage_abs_mean": "mean |advantage|",
    "advantage_abs_max": "max |advantage|",
    "grad_norm": "grad_norm",
    "completion_length": "completion_length",
    "truncated_frac": "truncated_frac",
}
SYMLOG = {"kl": 1e-2, "grad_norm": 1.0, "ratio_std": 1e-2}  # metric -> linthresh: these span decades


def _curve(h, key):
    if key == "accuracy":
        return np.array([e["step"] for e in h.evals], float), h.eval_series("accuracy")
    return h.series("step"), h.series(key)


@styled
def plot_signatures(runs: Mapping[str, Sequence], metrics: Sequence[str] = METRICS) -> Figure:
    """Rows: each bug of ``runs`` (name -> list of Histories, one per seed; "healthy" among them),
    columns: ``metrics`` (per-step metrics, or "accuracy": the held-out evaluations). Each panel: the
    healthy run in gray, the bug in colour (several seeds: mean and min-max band)."""
    if "healthy" not in runs or len(runs) < 2:
        raise ValueError(f"runs must hold 'healthy' and at least one bug, got {list(runs)}")
    metrics = list(metrics)
    if not metrics:
        raise ValueError("metrics must name at least one metric")
    bugs = [n for n in runs if n != "healthy"]
    width, height = 1.55 * len(metrics) + 1.2, 1.0 * len(bugs) + 1.3
    fig = Figure(figsize=(width, height))  # a fixed layout: constrained layout takes long on 100 panels
    axes = fig.subplots(len(bugs), len(metrics), squeeze=False, sharey="col")  # x shared by hand: 100 siblings are slow
    fig.subplots_adjust(left=1.1 / width, right=1 - 0.1 / width, top=1 - 0.55 / height, bottom=0.75 / height,
                        wspace=0.5, hspace=0.3)  # fmt: skip
    last_step = max(h.steps[-1]["step"] for hs in runs.values() for h in hs if h.steps)
    for r, name in enumerate(bugs):
        for c, key in enumerate(metrics):
            ax = axes[r, c]
            _band(ax, [_curve(h, key) for h in runs["healthy"]], "healthy", "gray", lw=1.0)
            _band(ax, [_curve(h, key) for h in runs[name]], "bugged", PALETTE[5], lw=1.2)
            ax.set_xlim(0, last_step)
            ax.tick_params(labelbottom=r == len(bugs) - 1)
            if key in SYMLOG:
                ax.set_yscale("symlog", linthresh=SYMLOG[key])
            ax.tick_params(labelsize=6, length=2, pad=1)
            if r == 0:
                ax.set_title(SHORT.get(key, key), fontsize=7)
            if c == 0:
                ax.set_ylabel(name.replace("_", "\n", 1), fontsize=7, rotation=0, ha="right", va="center")
            if r == len(bugs) - 1:
                ax.set_xlabel("RL step", fontsize=7)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    labels = [lab.replace("bugged", "the row's bug") for lab in labels]
    fig.legend(handles, labels, loc="lower center", ncols=2, fontsize=8, frameon=False)
    seeds = sorted({len(hs) for hs in runs.values()})
    logged = [SHORT.get(k, k) for k in metrics if k in SYMLOG]
    fig.suptitle(
        f"Each bug (orange) against the healthy run (gray), same reference and seeds "
        f"({'/'.join(map(str, seeds))} per curve)" + (f"; {', '.join(logged)} on a symlog scale" if logged else ""),
        fontsize=9,
    )
    set_alt(fig, f"A grid of small line charts: one row per silent bug ({', '.join(bugs)}), one column per "
                 f"metric ({', '.join(metrics)}), each panel the bugged run in orange over the healthy run in gray "
                 "against the RL step.")  # fmt: skip
    return fig
