"""The figures the notebooks show. Data in, a matplotlib ``Figure`` out.

Every function builds its figure without pyplot (no global figure registry, no
``plt.show()``): in a notebook, end the cell with the figure (or ``display(fig)``); in a
script, ``fig.savefig("x.png")``. The style lives in `STYLE` and is applied inside each
function only (an rc context), so importing this module changes nothing globally.
One colour per algorithm (`color_for`) across all figures.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from .concept_plots import (  # the figures of equations, so every figure is grpo_edu.plots.<name>
    clipped_objective,
    plot_clip_function,
    plot_group_advantages,
    plot_kl_estimators,
    plot_maze,
)
from .plotstyle import (
    ALGO_COLORS,
    MB,
    MEMORY_COLORS,
    MEMORY_PARTS,
    METRIC_LABELS,
    PALETTE,
    STYLE,
    X_LABELS,
    _new,
    _styled,
    color_for,
)


def _runs(histories) -> list[tuple[str, list]]:
    """History | [History] | {name: History | [History]} -> [(name, [History, ...])]."""
    if hasattr(histories, "evals"):
        return [(histories.name or "run", [histories])]
    if isinstance(histories, Mapping):
        return [(str(k), list(v) if isinstance(v, (list, tuple)) else [v]) for k, v in histories.items()]
    if isinstance(histories, Sequence) and histories:
        return [(h.name or f"run {i}", [h]) for i, h in enumerate(histories)]
    raise ValueError(f"histories must be a History, a list or a dict of them, got {histories!r}")


def _check_x(x: str, allowed=("samples", "seconds", "step")) -> None:
    if x not in allowed:
        raise ValueError(f"x must be one of {allowed}, got {x!r}")


def _smooth(y: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average that ignores NaN and shrinks its window at the ends."""
    ok = ~np.isnan(y)
    window = max(1, min(int(window), len(y)))  # np.convolve "same" returns max(len, window) values
    k = np.ones(window)
    num = np.convolve(np.where(ok, y, 0.0), k, mode="same")
    den = np.convolve(ok.astype(float), k, mode="same")
    return np.where(den > 0, num / np.maximum(den, 1), np.nan)


def _band(ax, curves: list[tuple[np.ndarray, np.ndarray]], label, color, band="minmax", **kw):
    """One run: a line. Several: the mean on a common x grid and a min-max (or +-std) band."""
    if len(curves) == 1:
        ax.plot(*curves[0], label=label, color=color, **kw)
        return
    xs = [c[0] for c in curves]
    if all(len(x) == len(xs[0]) and np.allclose(x, xs[0]) for x in xs):
        grid = xs[0]
    else:
        grid = np.linspace(min(x.min() for x in xs), max(x.max() for x in xs), 100)
    ys = np.stack([np.interp(grid, x, y) for x, y in curves])
    mean = np.nanmean(ys, 0)
    if band == "std":
        lo, hi = mean - np.nanstd(ys, 0), mean + np.nanstd(ys, 0)
    else:
        lo, hi = np.nanmin(ys, 0), np.nanmax(ys, 0)
    what = "mean ± std" if band == "std" else "mean, min-max"
    ax.plot(grid, mean, label=f"{label} ({what} of {len(curves)})", color=color, **kw)
    ax.fill_between(grid, lo, hi, color=color, alpha=0.2, lw=0)


# ----------------------------------------------------------------- training curves


@_styled
def plot_learning_curves(histories, x: str = "samples", ax=None, target: float | None = 0.9,
                         band: str = "minmax") -> Figure:  # fmt: skip
    """Held-out (greedy) accuracy against ``x`` ("samples", "seconds" or "step").

    ``histories``: a `History`, a list of them, or a dict name -> History or name -> list
    of Histories (several seeds: the mean with a "minmax" or "std" ``band``).
    ``target``: a dashed line at that accuracy (None for none).
    """
    _check_x(x)
    fig, (ax,) = _new() if ax is None else (ax.figure, (ax,))
    for i, (name, runs) in enumerate(_runs(histories)):
        curves = [(np.array([e[x] for e in h.evals], float), h.eval_series("accuracy")) for h in runs]
        _band(ax, curves, name, color_for(name, i), band, marker="o", ms=3)
    if target is not None:
        ax.axhline(target, color="gray", ls="--", lw=1, label=f"target {target:.0%}")
    ax.set(xlabel=X_LABELS[x], ylabel="held-out accuracy (greedy)", ylim=(0, 1.02),
           title=f"Held-out accuracy vs {X_LABELS[x].split(' (')[0]}")  # fmt: skip
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.legend(loc="lower right")
    return fig


@_styled
def plot_metrics(histories, keys: Sequence[str] = ("reward", "kl", "entropy", "clip_ratio"),
                 x: str = "step", smooth: int = 1, band: str = "minmax") -> Figure:  # fmt: skip
    """Small multiples: one panel per per-step metric in ``keys``, one line per run
    (``histories`` as in `plot_learning_curves`). ``smooth``: moving-average window in steps.
    A run that did not record a metric (e.g. REINFORCE has no clip_ratio) is left out there.
    """
    _check_x(x)
    keys = [keys] if isinstance(keys, str) else list(keys)
    ncols = min(len(keys), 2 if len(keys) == 4 else 3)
    nrows = -(-len(keys) // ncols)
    fig, axes = _new(ncols, nrows, size=(4.2 * ncols, 3.0 * nrows), sharex=True)
    runs = _runs(histories)
    for ax, key in zip(axes, keys, strict=False):
        for i, (name, hs) in enumerate(runs):
            curves = []
            for h in hs:
                y = h.series(key)
                if len(y) == 0 or np.all(np.isnan(y)):
                    continue
                if smooth > 1:
                    y = _smooth(y, smooth)
                curves.append((h.series(x), y))
            if curves:
                _band(ax, curves, name, color_for(name, i), band)
        if not ax.lines:
            ax.text(0.5, 0.5, "not recorded", transform=ax.transAxes, ha="center", color="gray")
        ax.set(title=key, ylabel=METRIC_LABELS.get(key, key.replace("_", " ")))
        ax.set_xlabel(X_LABELS[x])
        ax.tick_params(labelbottom=True)
    for ax in axes[len(keys) :]:
        ax.set_visible(False)
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if labels:
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 4))
    fig.suptitle("Training metrics per step" + (f" (moving average of {smooth})" if smooth > 1 else ""))
    return fig


# -------------------------------------------------------------- measurement figures


@_styled
def plot_variance(results: Mapping, key: str | Sequence[str] = "relative_variance", xlabel: str = "gradient estimator",
                  title: str = "Gradient estimators at a fixed policy") -> Figure:  # fmt: skip
    """Bars per gradient estimator of ``key`` (or one panel per key of a list).

    ``results``: name -> {"relative_variance": ..., "mean_cosine": ...}, or snapshot ->
    such a dict (grouped bars, one colour per snapshot). Names starting with "_" are
    metadata and are skipped. Say the layout (prompts x answers) in ``title`` or the names.
    """
    keys = [key] if isinstance(key, str) else list(key)
    items = {k: v for k, v in results.items() if not str(k).startswith("_")}
    if not items:
        raise ValueError("results must hold at least one estimator (keys not starting with '_')")
    grouped = all(
        isinstance(v, Mapping) and v and all(isinstance(w, Mapping) for k, w in v.items()
                                             if not str(k).startswith("_"))
        for v in items.values()
    )  # fmt: skip
    snapshots = {str(s): {k: v for k, v in r.items() if not str(k).startswith("_")}
                 for s, r in items.items()} if grouped else {"": items}  # fmt: skip
    names = list(dict.fromkeys(n for r in snapshots.values() for n in r))
    panel = max(4.5, (0.7 + 0.35 * len(snapshots)) * len(names) + 1.5)
    fig, axes = _new(len(keys), 1, size=(panel * len(keys), 4.0))
    width = 0.8 / len(snapshots)
    for ax, k in zip(axes, keys, strict=True):
        for j, (snap, res) in enumerate(snapshots.items()):
            vals = [float(res[n][k]) if n in res and k in res[n] else np.nan for n in names]
            vals = [v if np.isfinite(v) else np.nan for v in vals]  # inf: no detectable signal (corrected ratio)
            pos = np.arange(len(names)) + (j - (len(snapshots) - 1) / 2) * width
            colors = PALETTE[j % len(PALETTE)] if grouped else PALETTE[4]
            bars = ax.bar(pos, vals, width * 0.95, color=colors, label=snap or None)
            ax.bar_label(bars, fmt="%.2f", fontsize=8, padding=2)
        tilt = len(names) > 3 and not any("\n" in n for n in names)
        ax.set_xticks(np.arange(len(names)), names, rotation=20 if tilt else 0, ha="right" if tilt else "center")
        ax.set(xlabel=xlabel, ylabel=METRIC_LABELS.get(k, k.replace("_", " ")), title=k.replace("_", " "))
        ax.margins(y=0.15)
        if grouped:
            ax.legend(title="snapshot", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title)
    return fig


def _measured(row: Mapping):
    for k in ("measured_peak", "measured_peak_step", "peak_measured", "measured", "peak_bytes", "peak"):
        if row.get(k) is not None:
            return float(row[k])
    return None


@_styled
def plot_memory(rows, note: str | None = None) -> Figure:
    """Stacked bars: the analytic memory of one training step per algorithm, by part
    (`MEMORY_PARTS`, bytes), with the measured peak ("measured_peak" or
    "measured_peak_step") as a marker. ``rows``: list of dicts with "algorithm" (or
    "name") and the parts, flat or under "breakdown" (as `measure.step_memory`
    returns them), or a dict name -> such a dict. ``note``: a line of text under the bars
    (e.g. what dominates at this size).
    """
    if isinstance(rows, Mapping):
        rows = [{"algorithm": k, **v} for k, v in rows.items()]
    rows = [{**r, **r.get("breakdown", {})} for r in rows]  # measure.step_memory's nesting
    if not rows:
        raise ValueError("rows must hold at least one algorithm")
    names = [str(r.get("algorithm", r.get("name", f"row {i}"))) for i, r in enumerate(rows)]
    parts = [p for p in MEMORY_PARTS if any(r.get(p) for r in rows)]
    fig, (ax,) = _new(size=(max(5.0, 1.3 * len(rows) + 3.5), 4.5))
    bottom = np.zeros(len(rows))
    colors = dict(zip(MEMORY_PARTS, MEMORY_COLORS, strict=True))
    for p in parts:
        vals = np.array([float(r.get(p) or 0.0) for r in rows]) / MB
        ax.bar(names, vals, 0.6, bottom=bottom, label=p.replace("_", " "), color=colors[p])
        bottom += vals
    measured = [_measured(r) for r in rows]
    for i, total in enumerate(bottom):  # the analytic total, above the bar and the marker
        top = max(total, (measured[i] or 0.0) / MB)
        ax.annotate(f"analytic {total:.4g} MB", (i, top), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 8), textcoords="offset points")  # fmt: skip
    if any(m is not None for m in measured):
        ys = [np.nan if m is None else m / MB for m in measured]
        ax.plot(names, ys, "D", color="black", ms=7, label="measured peak", zorder=3)
    ax.set(xlabel="algorithm", ylabel="memory of one training step (MB)",
           title="Memory: analytic breakdown vs measured peak")  # fmt: skip
    ax.margins(y=0.12)
    handles, labels = ax.get_legend_handles_labels()  # top of the stack first
    ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if note:
        fig.text(0.01, -0.02, textwrap.fill(note, 130), ha="left", va="top", fontsize=8.5)
    return fig


def _num_then_str(v):
    return (0, float(v), "") if isinstance(v, (int, float)) else (1, 0.0, str(v))


@_styled
def plot_memory_ratio(sweep_rows, limit: float | None = 1.8) -> Figure:
    """PPO / GRPO peak-memory ratio against the parameter count (log x), measured
    (markers) and analytic (dashed), one colour per batch size. ``limit``: the
    parameter-dominated ratio (36P / 20P = 1.8 in fp32 with Adam) as a gray line."""
    rows = list(sweep_rows)
    if not rows:
        raise ValueError("sweep_rows must not be empty")
    fig, (ax,) = _new(size=(6.4, 4.2))
    for i, b in enumerate(sorted({r.get("batch_size") for r in rows}, key=_num_then_str)):
        rs = sorted((r for r in rows if r.get("batch_size") == b), key=lambda r: r["params"])
        p = [r["params"] for r in rs]
        c = PALETTE[i % len(PALETTE)]
        if any(r.get("ratio_measured") is not None for r in rs):
            ax.plot(p, [r.get("ratio_measured", np.nan) for r in rs], "o-", color=c,
                    label=f"measured, batch {b}")  # fmt: skip
        if any(r.get("ratio_analytic") is not None for r in rs):
            ax.plot(p, [r.get("ratio_analytic", np.nan) for r in rs], "--", color=c,
                    label=f"analytic, batch {b}", alpha=0.8)  # fmt: skip
    ax.axhline(1.0, color="gray", lw=1)
    if limit is not None:
        ax.axhline(limit, color="gray", ls=":", lw=1.2, label=f"parameter-dominated limit {limit:g}x")
    ax.set_xscale("log")
    ax.set(xlabel="policy parameters (count, log scale)", ylabel="PPO / GRPO peak memory (ratio)",
           title="How much more memory PPO's critic costs")  # fmt: skip
    ax.legend(loc="best")
    return fig


__all__ = [
    "ALGO_COLORS", "MB", "MEMORY_COLORS", "MEMORY_PARTS", "METRIC_LABELS", "PALETTE", "STYLE", "X_LABELS",
    "clipped_objective", "color_for", "plot_clip_function", "plot_group_advantages", "plot_kl_estimators",
    "plot_learning_curves", "plot_maze", "plot_memory", "plot_memory_ratio", "plot_metrics", "plot_variance",
]  # fmt: skip
