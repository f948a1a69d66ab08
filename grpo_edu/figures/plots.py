"""The figures the notebooks show. Data in, a matplotlib ``Figure`` out.

Every function builds its figure without pyplot (no global figure registry, no
``plt.show()``): in a notebook, end the cell with ``show(fig, alt="what it shows")``; in a
script, ``save(fig, "x.png")``. Both first move any legend that covers the data (`clear_legends`). The style lives in `STYLE` and is applied inside each
function only (an rc context), so importing this module changes nothing globally.
One colour per algorithm (`color_for`) across all figures.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from ..measure.token_view import TOKEN_VIEW, token_view_values  # the numbers of plot_token_view
from .concept_plots import (  # the figures of equations, so every figure is grpo_edu.figures.plots.<name>
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
    METRIC_TITLES,
    PALETTE,
    STYLE,
    VARIANCE_FORMULA,
    X_LABELS,
    alt_text,
    clear_legends,
    color_for,
    legends_on_data,
    new_figure,
    save,
    set_alt,
    show,
    styled,
    to_numpy,
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
    """One run: a line through its points. Several on the same x (e.g. steps): the mean
    through those points and a min-max (or +-std) band. Several on different x (e.g.
    seconds): each run thin through its own points, up to its last one, and the mean and
    band only over the x range where every run has data (interpolated between points)."""
    if len(curves) == 1:
        ax.plot(*curves[0], label=label, color=color, **kw)
        return
    xs = [c[0] for c in curves]
    same_x = all(len(x) == len(xs[0]) and np.allclose(x, xs[0]) for x in xs)
    if same_x:
        grid, line_kw, note = xs[0], kw, ""
    else:
        for x, y in curves:
            ax.plot(x, y, color=color, lw=0.8, alpha=0.45, **{k: v for k, v in kw.items() if k != "lw"})
        lo_x, hi_x = max(x.min() for x in xs), min(x.max() for x in xs)
        grid = np.unique(np.concatenate([x[(x >= lo_x) & (x <= hi_x)] for x in xs] + [[lo_x, hi_x]]))
        line_kw = {k: v for k, v in kw.items() if k not in ("marker", "ms", "markersize")}
        note = "; thin lines: each seed"
    ys = np.stack([np.interp(grid, x, y) for x, y in curves])
    mean = np.nanmean(ys, 0)
    if band == "std":
        lo, hi = mean - np.nanstd(ys, 0), mean + np.nanstd(ys, 0)
    else:
        lo, hi = np.nanmin(ys, 0), np.nanmax(ys, 0)
    what = "mean ± std" if band == "std" else "mean, min-max"
    ax.plot(grid, mean, label=f"{label} ({what} of {len(curves)}{note})", color=color, **line_kw)
    ax.fill_between(grid, lo, hi, color=color, alpha=0.2, lw=0)


def _accuracy_limits(values, target=None) -> tuple[float, float]:
    """y limits that fit the data: from 0.1 below the lowest value (rounded down to a tenth,
    not below 0) to 1.02 (or a tenth above the highest value, rounded up)."""
    v = np.asarray([x for x in values if np.isfinite(x)] + ([target] if target is not None else []), float)
    if not len(v):
        return 0.0, 1.02
    lo = max(0.0, np.floor((v.min() - 0.05) * 10) / 10)
    hi = min(1.02, np.ceil((v.max() + 0.05) * 10) / 10)
    return float(lo), float(max(hi, lo + 0.1))


# ----------------------------------------------------------------- training curves


@styled
def plot_learning_curves(histories, x: str = "samples", ax=None, target: float | None = 0.9,
                         band: str = "minmax") -> Figure:  # fmt: skip
    """Held-out (greedy) accuracy against ``x`` ("samples", "seconds" or "step").

    ``histories``: a `History`, a list of them, or a dict name -> History or name -> list
    of Histories (several seeds: the mean with a "minmax" or "std" ``band``).
    ``target``: a dashed line at that accuracy (None for none). The y-axis fits the data;
    with one run per curve the legend says so (no band: the spread over seeds is unknown).
    """
    _check_x(x)
    created = ax is None
    fig, (ax,) = new_figure() if created else (ax.figure, (ax,))
    runs_by_name = _runs(histories)
    values = []
    for i, (name, runs) in enumerate(runs_by_name):
        curves = [(np.array([e[x] for e in h.evals], float), h.eval_series("accuracy")) for h in runs]
        values += [float(v) for _, y in curves for v in y]
        _band(ax, curves, name, color_for(name, i), band, marker="o", ms=3)
    if target is not None:
        ax.axhline(target, color="gray", ls="--", lw=1, label=f"target {target:.0%}")
    ax.set(xlabel=X_LABELS[x], ylabel="held-out accuracy (greedy)", ylim=_accuracy_limits(values, target),
           title=f"Held-out accuracy vs {X_LABELS[x].split(' (')[0]}")  # fmt: skip
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    one_seed = all(len(runs) == 1 for _, runs in runs_by_name)
    ax.legend(loc="lower right", title="one seed per curve: no spread shown" if one_seed else None)
    if created:
        names = ", ".join(name for name, _ in runs_by_name)
        seeds = "one seed each" if one_seed else "the mean over seeds with a band from the lowest to the highest seed"
        set_alt(fig, f"Line chart of held-out greedy accuracy against {X_LABELS[x].split(' (')[0]} for {names}; "
                     f"{seeds}" + (f"; a dashed line marks the {target:.0%} target." if target is not None else "."))  # fmt: skip
    return fig


@styled
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
    fig, axes = new_figure(ncols, nrows, size=(4.2 * ncols, 3.0 * nrows), sharex=True)
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
    set_alt(fig, f"Line charts, one panel per training metric ({', '.join(keys)}), against {X_LABELS[x].split(' (')[0]}, "
                 f"one line per run ({', '.join(name for name, _ in runs)})"
                 + (f", smoothed over {smooth} steps." if smooth > 1 else "."))  # fmt: skip
    return fig


# -------------------------------------------------------------- measurement figures


@styled
def plot_variance(results: Mapping, key: str | Sequence[str] = "relative_variance", xlabel: str = "gradient estimator",
                  title: str = "Gradient estimators at a fixed policy", note: str | None = None) -> Figure:  # fmt: skip
    """Bars per gradient estimator of ``key`` (or one panel per key of a list).

    ``results``: name -> {"relative_variance": ..., "mean_cosine": ...}, or snapshot ->
    such a dict (grouped bars, one colour per snapshot). Names starting with "_" are
    metadata and are skipped. Say the layout (prompts x answers) in ``title`` or the names;
    compare bars of one layout only (`plot_comparison_variance` draws one panel per layout).
    ``note``: a line under the panels (the formula of a relative variance is added).
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
    fig, axes = new_figure(len(keys), 1, size=(panel * len(keys), 4.0))
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
        ax.set(xlabel=xlabel, ylabel=METRIC_LABELS.get(k, k.replace("_", " ")),
               title=METRIC_TITLES.get(k, k.replace("_", " ")))  # fmt: skip
        ax.margins(y=0.15)
        if grouped:
            ax.legend(title="snapshot", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title)
    _footnote(fig, [note] + [VARIANCE_FORMULA.get(k) for k in keys])
    what = " and ".join(METRIC_TITLES.get(k, k.replace("_", " ")) for k in keys)
    set_alt(fig, f"Bar chart: {what} of each gradient estimator ({', '.join(n.replace(chr(10), ' ') for n in names)})"
                 + (f", one bar per snapshot ({', '.join(snapshots)})" if grouped else "") + f". {title}.")  # fmt: skip
    return fig


def _footnote(fig, lines, width: int = 140) -> None:
    """Lines of text under a figure (None and duplicates skipped), each wrapped to ``width``."""
    lines = list(dict.fromkeys(line for line in lines if line))
    if lines:
        text = "\n".join(textwrap.fill(line, width) for line in lines)
        fig.text(0.01, -0.01, text, ha="left", va="top", fontsize=8.5, color="dimgray")


_ESTIMATOR_WORDS = {  # estimator -> (its advantage, in words; the method that trains with it, if any)
    "raw": ("A = R", "reinforce"),
    "critic": ("A = R - V(s)", "baseline"),
    "gae": ("A = GAE(V),\nγ = λ = 1", None),  # "\n": where a tick label may break (not inside an equation)
    "ppo": ("A = GAE(V),\nγ = λ = 1,\nwhitened", "ppo"),  # PPO's own: the GAE whitened over the batch
    "batch_mean": ("A = R - batch mean", None),
    "group_mean": ("A = R - group mean", None),
    "group_loo": ("A = R - mean of\nthe others (RLOO)", None),
    "group_norm": ("A = (R - group mean)\n/ group std", "grpo"),
    "optimal": ("A = R - b*", None),
}


@styled
def plot_comparison_variance(result: Mapping, key: str = "relative_variance_corrected") -> Figure:
    """The gradient noise of `measure.run_comparison`'s result, one panel per batch layout:
    distinct prompts x 1 answer, and prompts x G answers (every estimator measured there,
    REINFORCE's too), so that no bar stands beside one of another layout. A method's own
    layout is drawn solid, an estimator in a layout its method does not train with hatched.
    Equal bars (the unwhitened GAE's and the critic baseline's, when both are measured) are explained under the
    panels."""
    algos = result.get("algorithms", {})
    label = {a: str(r.get("label", a)) for a, r in algos.items()}
    layouts = []  # (title, stats by estimator, grouped)
    for field, grouped in (("gradient_variance_distinct", False), ("gradient_variance", True)):
        var = result.get(field) or {}
        meta = var.get("_meta", {})
        stats = {e: v for e, v in var.items() if not str(e).startswith("_") and key in v}
        if stats:
            n, g = meta.get("prompts_per_batch", "?"), meta.get("group_size", "?") if grouped else 1
            layouts.append((f"{n} prompts x {g} answer{'s' if g != 1 else ''} per batch", stats, grouped))
    if not layouts:
        raise ValueError(f"result holds no gradient variance with {key!r} (run_comparison(..., measure=True))")
    own_grouped = {"grpo"}  # GRPO trains on prompts x G; REINFORCE, the baseline and PPO on distinct prompts
    fig, axes = new_figure(len(layouts), 1, size=(1.25 * sum(len(s) for _, s, _ in layouts) + 3.0, 4.4), sharey=True,
                     width_ratios=[len(s) for _, s, _ in layouts])  # fmt: skip
    equal = []
    for ax, (title, stats, grouped) in zip(axes, layouts, strict=True):
        names, vals, own = [], [], []
        for e, v in stats.items():
            words, method = _ESTIMATOR_WORDS.get(e, (e, None))
            who = label.get(method, "") if method in algos else ""
            words = "\n".join(textwrap.fill(line, 20) for line in words.split("\n"))
            names.append(textwrap.fill(who, 16) + "\n" + words if who else words)
            vals.append(float(v[key]) if np.isfinite(float(v[key])) else np.nan)
            own.append(method in algos and (method in own_grouped) == grouped)
        pos = np.arange(len(names))
        for i, (v, mine) in enumerate(zip(vals, own, strict=True)):
            e = list(stats)[i]
            _, method = _ESTIMATOR_WORDS.get(e, (e, None))
            c = color_for(method or e, i) if method else "#9a9a9a"
            bar = ax.bar(
                pos[i], v, 0.7, color=c if mine else "white", edgecolor=c, hatch=None if mine else "//", lw=1.5
            )
            ax.bar_label(bar, fmt="%.2f", fontsize=8.5, padding=2)
        ax.set_xticks(pos, names, fontsize=8)
        ax.set(title=title, xlim=(-0.6, max(len(names), 2) - 0.4), xlabel="advantage (the method that uses it)",
               ylabel=METRIC_LABELS.get(key, key.replace("_", " ")))  # fmt: skip
        ax.tick_params(labelleft=True)  # the y axis is shared; each panel still shows its values and its label
        ax.margins(y=0.3)  # room for the legend above the bars
        if "critic" in stats and "gae" in stats and np.isclose(stats["critic"][key], stats["gae"][key], rtol=1e-9):
            equal.append(title)
    handles = [mpl.patches.Patch(facecolor="gray", edgecolor="gray", label="the layout this method trains with"),
               mpl.patches.Patch(facecolor="white", edgecolor="gray", hatch="//",
                                 label="the same estimator in the other layout, or one no method here trains with")]  # fmt: skip
    axes[-1].legend(handles=handles, loc="upper left", fontsize=8.5)
    what = {
        "relative_variance_corrected": " (relative variance, bias-corrected)",
        "relative_variance": " (relative variance)",
    }
    fig.suptitle(
        f"Noise of each gradient estimator at the reference policy{what.get(key, ': ' + key)}, one panel per batch layout"
    )
    notes = []
    if equal:
        notes.append("A = GAE(V) and A = R - V(s) have equal bars: with γ = λ = 1 GAE's advantage is R - V(s), the "
                     "critic baseline's estimator with the same critic; PPO trains with it whitened over the batch "
                     "(its own bar), and clipping and batch reuse act only after the first update.")  # fmt: skip
    notes.append("Compare bars within a panel: the same number of answers spread over fewer prompts is noisier "
                 "(compare REINFORCE's A = R in both panels).")  # fmt: skip
    _footnote(fig, notes + [VARIANCE_FORMULA.get(key)])
    set_alt(fig, f"Bar charts in {len(layouts)} panels, one per batch layout ({'; '.join(t for t, _, _ in layouts)}): "
                 f"{METRIC_TITLES.get(key, key)} of each gradient estimator at the reference policy, solid where the "
                 "method trains in that layout, hatched otherwise; lower is less noisy.")  # fmt: skip
    return fig


def _measured(row: Mapping):
    for k in ("measured_peak", "measured_peak_step", "peak_measured", "measured", "peak_bytes", "peak"):
        if row.get(k) is not None:
            return float(row[k])
    return None


def _mb(x: float) -> str:
    """Megabytes, one decimal everywhere (a part under 0.05 MB reads "<0.1", none "-")."""
    return "-" if not x else ("<0.1" if x < 0.05 else f"{x:.1f}")


_MEMORY_GROUPS = (  # the bars' stacks (whose memory it is), bottom up; the table itemises each part
    ("policy and frozen reference: weights, gradients, Adam state",
     ("policy_params", "policy_grads", "optimizer_state", "reference_params"), "#3182bd"),
    ("critic: weights, gradients, Adam state", ("critic_params", "critic_grads", "critic_optimizer_state"), "#e6550d"),
    ("activations", ("activations",), "#74c476"),
)  # fmt: skip


@styled
def plot_memory(rows, note: str | None = None) -> Figure:
    """The memory of one training step per algorithm, in two panels. Left: stacked bars of
    the analytic memory by whose it is (the policy's with its frozen reference, the critic's,
    the activations: `_MEMORY_GROUPS` of `MEMORY_PARTS`, bytes), with the measured peak
    ("measured_peak" or "measured_peak_step") as a marker and both totals written above.
    Right: the same parts as a table (a row per part, a column per algorithm, MB in each
    cell, shaded on a log scale), so that the small parts (the critic's) read as well as the
    activations. ``rows``: list of dicts with "algorithm" (or "name") and the parts, flat or
    under "breakdown" (as `measure.step_memory` returns them), or a dict name -> such a dict;
    a row's "layout" (how its step runs: whole batch, minibatches, shared prompts) is
    written under its name, since the activations depend on it more than on the algorithm.
    ``note``: a line of text under the panels (e.g. what dominates at this size).
    """
    if isinstance(rows, Mapping):
        rows = [{"algorithm": k, **v} for k, v in rows.items()]
    rows = [{**r, **r.get("breakdown", {})} for r in rows]  # measure.step_memory's nesting
    if not rows:
        raise ValueError("rows must hold at least one algorithm")
    names = [str(r.get("algorithm", r.get("name", f"row {i}"))) for i, r in enumerate(rows)]
    ticks = [textwrap.fill(n, 16) + (f"\n{textwrap.fill(str(r['layout']), 18)}" if r.get("layout") else "")
             for n, r in zip(names, rows, strict=True)]  # fmt: skip
    parts = [p for p in MEMORY_PARTS if any(r.get(p) for r in rows)]
    widths = (max(5.0, 1.5 * len(rows) + 2.0), 0.9 * len(rows) + 2.6)
    fig, (ax, tab) = new_figure(2, 1, size=(sum(widths), 5.2), width_ratios=widths)
    bottom = np.zeros(len(rows))
    pos = np.arange(len(rows))
    grouped = {q for _, group, _ in _MEMORY_GROUPS for q in group}
    others = [(p.replace("_", " "), (p,), c) for p, c in zip(MEMORY_PARTS, MEMORY_COLORS, strict=True)
              if p not in grouped]  # a part no group names keeps a stack of its own  # fmt: skip
    for label, group, color in (*_MEMORY_GROUPS, *others):
        vals = np.array([sum(float(r.get(p) or 0.0) for p in group) for r in rows]) / MB
        if vals.any():  # one stack per owner: a few readable bands, not a sliver per part
            ax.bar(pos, vals, 0.6, bottom=bottom, label=label, color=color)
            bottom += vals
    measured = [_measured(r) for r in rows]
    for i, total in enumerate(bottom):  # both totals, above the bar and the marker
        top = max(total, (measured[i] or 0.0) / MB)
        text = f"analytic {_mb(total)} MB" + (f"\nmeasured {_mb(measured[i] / MB)} MB" if measured[i] else "")
        ax.annotate(text, (i, top), ha="center", va="bottom", fontsize=8, xytext=(0, 6), textcoords="offset points")
    if any(m is not None for m in measured):
        ys = [np.nan if m is None else m / MB for m in measured]
        ax.plot(pos, ys, "D", color="black", ms=7, label="measured peak", zorder=3)
    ax.set_xticks(pos, ticks, fontsize=8)
    ax.set(xlabel="algorithm (how its step runs)", ylabel="memory of one training step (MB)",
           title="Memory of one training step: analytic parts, measured peak")  # fmt: skip
    ax.margins(y=0.22)
    handles, labels = ax.get_legend_handles_labels()  # top of the stack first
    fig.legend(handles[::-1], labels[::-1], loc="outside upper center", ncols=min(len(labels), 4), fontsize=8,
               title="bars: whose memory it is (the table on the right itemises each part)", title_fontsize=8)  # fmt: skip
    table = np.array([[float(r.get(p) or 0.0) / MB for r in rows] for p in parts])
    shade = np.log10(np.where(table > 0, table, np.nan))
    lo, hi = np.nanmin(shade) - 1.0, np.nanmax(shade) + 0.3
    tab.imshow(shade, cmap="Blues", aspect="auto", vmin=lo, vmax=hi)
    for (j, i), v in np.ndenumerate(table):
        dark = v > 0 and (shade[j, i] - lo) / (hi - lo) > 0.65  # white text on the darkest cells
        tab.text(i, j, _mb(v), ha="center", va="center", fontsize=8.5, color="white" if dark else "black")
    tab.set_xticks(pos, [textwrap.fill(n, 12) for n in names], fontsize=8)
    tab.set_yticks(np.arange(len(parts)), [p.replace("_", " ") for p in parts], fontsize=8.5)
    tab.tick_params(length=0)
    tab.grid(False)
    tab.set(title="By part (MB; shade: log scale)", xlabel="algorithm", ylabel="part of the step's memory")
    _footnote(fig, [note], width=150)
    set_alt(fig, f"Memory of one training step for {', '.join(names)}: stacked bars of the analytic memory by part "
                 "with the measured peak as a diamond, and a table of the same parts in megabytes, one column per "
                 "algorithm; each bar is labelled with how its step runs (whole batch or minibatches).")  # fmt: skip
    return fig


@styled
def plot_comparison_memory(result: Mapping, note: str | None = None) -> Figure:
    """`plot_memory` of `measure.run_comparison`'s result, each bar labelled with how its
    step runs (the update's batch: whole or in minibatches; GRPO's prompts run once per
    group), read from each algorithm's config: at this size the activations, which that
    layout sets, are most of the memory, so a taller bar is not a costlier algorithm."""
    rows = []
    for a, m in result.get("memory", {}).items():
        row = result["algorithms"][a]
        hist = (row.get("histories") or [{}])[0]
        cfg = hist.get("config", {}) if isinstance(hist, Mapping) else getattr(hist, "config", {})
        batch, mbs = m.get("batch_size"), int(row.get("minibatches") or cfg.get("minibatches", 1) or 1)
        layout = f"whole batch ({batch}) per update" if mbs == 1 else f"{mbs} minibatches of {batch // mbs}"
        if int(cfg.get("group_size", 1) or 1) > 1 and cfg.get("share_prompts", True):  # rollout's default: shared
            layout += f", each prompt run once for its {cfg['group_size']} answers"
        rows.append({**m, "algorithm": row.get("label", a), "layout": layout})
    if not rows:
        raise ValueError("result holds no memory measurement (run_comparison(..., measure=True))")
    return plot_memory(rows, note=note)


def _num_then_str(v):
    return (0, float(v), "") if isinstance(v, (int, float)) else (1, 0.0, str(v))


@styled
def plot_memory_ratio(sweep_rows, limit: float | None = 1.8) -> Figure:
    """PPO / GRPO peak-memory ratio against the parameter count (log x), measured
    (markers) and analytic (dashed), one colour per batch size. ``limit``: the
    parameter-dominated ratio (36P / 20P = 1.8 in fp32 with Adam) as a gray line."""
    rows = list(sweep_rows)
    if not rows:
        raise ValueError("sweep_rows must not be empty")
    fig, (ax,) = new_figure(size=(6.4, 4.2))
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
    fig.legend(loc="outside lower center", ncols=2, fontsize=8)  # below the axes: "best" sat on the limit line
    set_alt(fig, "Line chart of the PPO / GRPO peak-memory ratio against the policy's parameter count on a log "
                 "scale, measured and analytic, one colour per batch size"
                 + (f", with a dotted line at the parameter-dominated limit {limit:g}x." if limit is not None else "."))  # fmt: skip
    return fig


# ----------------------------------------------------------------- variants against the seed band


@styled
def plot_variants_grid(default, variants: Mapping, x: str = "step", ncols: int = 4, reference: float | None = None,
                       default_name: str = "default") -> Figure:  # fmt: skip
    """Small multiples: one panel per variant, each against the same gray band of ``default``.

    ``default``: a `History` or a list of them (several seeds: their min-max band and mean).
    ``variants``: name -> History (one run) or list of Histories (a band of its own).
    Each panel's title names the variant and its final accuracy; the figure's title says how
    many runs each curve is (one run is one seed: read it against the gray band, not alone).
    ``reference``: a dotted line at that accuracy (e.g. the reference policy's).
    """
    _check_x(x)
    if isinstance(ncols, bool) or not isinstance(ncols, int) or ncols < 1:
        raise ValueError(f"ncols must be a positive int, got {ncols!r}")
    runs = _runs(variants) if isinstance(variants, Mapping) else None
    if not runs:
        raise ValueError(f"variants must be a non-empty dict name -> History or [History], got {variants!r}")
    (_, base), ncols = _runs({default_name: default})[0], min(ncols, len(runs))
    nrows = -(-len(runs) // ncols)
    fig, axes = new_figure(ncols, nrows, size=(3.1 * ncols, 2.5 * nrows + 0.6), sharex=True, sharey=True)

    def curves(hs):
        return [(np.array([e[x] for e in h.evals], float), h.eval_series("accuracy")) for h in hs]

    lo, hi = min(h.final_accuracy for h in base), max(h.final_accuracy for h in base)
    for ax, (name, hs) in zip(axes, runs, strict=False):
        _band(ax, curves(base), default_name, "gray", lw=1.2)
        _band(ax, curves(hs), name, PALETTE[5], marker="o", ms=2.5, lw=1.5)
        if reference is not None:
            ax.axhline(reference, color="gray", ls=":", lw=1)
        final = float(np.mean([h.final_accuracy for h in hs]))
        where = "inside" if lo <= final <= hi else ("above" if final > hi else "below")
        ax.set_title(f"{name}\nfinal {final:.3f}: {where} the band", fontsize=9)
        ax.set(xlabel=X_LABELS[x], ylabel="held-out accuracy")
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.tick_params(labelbottom=True, labelleft=True)
    for ax in axes[len(runs) :]:
        ax.set_visible(False)
    sizes = sorted({len(hs) for _, hs in runs})
    each = "one run (one seed) each" if sizes == [1] else f"{'/'.join(map(str, sizes))} runs (seeds) each"
    band = f"{len(base)} seeds, min to max" if len(base) > 1 else "one seed"
    dotted = "; dotted: the reference" if reference is not None else ""
    fig.suptitle(f"Each variant in orange, {each}, against the {default_name} in gray ({band}; final "
                 f"{lo:.3f}-{hi:.3f}){dotted}", fontsize=10)  # fmt: skip
    return fig


# ----------------------------------------------------------------- one batch, token by token
# (its numbers, `token_view_values`, are computed in grpo_edu.measure.token_view)


def _safe_log(x):  # the ratio's colour scale: log, with no warning at 0 (the colour bar's edge)
    return np.log(np.clip(x, 1e-12, None))


def _token_strings(ids, vocab) -> list[list[str]]:
    names = {"<eos>": "eos", "<pad>": "", "<bos>": "bos"}
    return [[names.get(vocab[i], vocab[i]) for i in row] for row in ids]


@styled
def plot_token_view(rollout, values: Mapping, tokenizer, groups: Sequence[int] = (0, 1, 2),
                    rewards=None, eps_low: float = 0.2, eps_high: float | None = None) -> Figure:  # fmt: skip
    """Every completion token of a few groups of one batch, written in its cell and coloured
    by its advantage, its ratio rho, whether it was clipped, and its entropy (one panel each,
    with a colour bar; white cells are padding).

    ``rollout``: the batch (`Rollout`: completion_ids, mask, prompt_ids, group_size);
    ``values``: `token_view_values` of it (name -> [B, T]); ``tokenizer``: to write the tokens;
    ``groups``: which groups (prompts) to show; ``rewards``: optional [B] rewards, written
    beside each row. The ratio's colour bar marks the clip range [1 - eps_low, 1 + eps_high].
    """
    import matplotlib as mpl  # colour maps and norms only; no pyplot

    ids, mask, G = rollout.completion_ids, to_numpy(rollout.mask), int(rollout.group_size)
    B, T = mask.shape
    missing = [k for k in TOKEN_VIEW if k not in values]
    if missing:
        raise ValueError(f"values must hold {TOKEN_VIEW} (from token_view_values), missing {missing}")
    for k in TOKEN_VIEW:
        if tuple(np.shape(to_numpy(values[k]))) != (B, T):
            raise ValueError(
                f"values[{k!r}] must be [B, T] = {[B, T]} like the rollout, got {list(np.shape(values[k]))}"
            )
    groups = [groups] if isinstance(groups, int) else list(groups)
    n_groups = B // G
    if not groups or any(isinstance(g, bool) or not isinstance(g, (int, np.integer)) or not 0 <= g < n_groups
                         for g in groups):  # fmt: skip
        raise ValueError(f"groups must be group indices in [0, {n_groups}), got {groups!r}")
    rows = np.concatenate([np.arange(g * G, (g + 1) * G) for g in groups])
    keep = mask[rows].any(0)
    t_max = int(np.flatnonzero(keep).max()) + 1 if keep.any() else 1
    tokens = _token_strings(ids[rows, :t_max].tolist(), tokenizer.vocab)
    eps_high = eps_low if eps_high is None else eps_high
    r = None if rewards is None else to_numpy(rewards).ravel()
    if r is not None and len(r) != B:
        raise ValueError(f"rewards must have one value per row of the rollout ({B}), got {len(r)}")

    panels = {
        "advantage": ("advantage $A_i$", "RdBu", None),
        "ratio": ("ratio $\\rho_t = \\pi_\\theta / \\pi_{old}$", "PuOr_r", None),
        "clipped": ("clipped (no gradient)", mpl.colors.ListedColormap(["#f0f0f0", "#D55E00"]), (0.0, 1.0)),
        "entropy": ("entropy $H_t$ (nats)", "viridis", None),
    }
    width = 0.42 * t_max + 1.1
    fig = Figure(figsize=(4 * width + 2.4, 0.24 * len(rows) + 1.9), layout="constrained")
    axes = fig.subplots(1, 4, sharey=True)
    for ax, key in zip(axes, TOKEN_VIEW, strict=True):
        title, cmap, lim = panels[key]
        data = to_numpy(values[key])[rows, :t_max]
        finite = data[np.isfinite(data)]
        if key == "advantage":
            m = max(float(np.abs(finite).max()) if finite.size else 1.0, 1e-6)
            norm = mpl.colors.Normalize(-m, m)
        elif key == "ratio":  # a log scale centred at rho = 1: rho and 1/rho get the same shade
            edges = np.log([1.0 - eps_low, 1.0 + eps_high])
            m = 1.05 * max(float(np.abs(np.log(finite)).max()) if finite.size else 0.0, *np.abs(edges))
            norm = mpl.colors.FuncNorm((_safe_log, np.exp), vmin=float(np.exp(-m)), vmax=float(np.exp(m)))
        elif lim is not None:
            norm = mpl.colors.Normalize(*lim)
        else:
            norm = mpl.colors.Normalize(0.0, max(float(finite.max()) if finite.size else 1.0, 1e-6))
        cmap = mpl.colormaps[cmap] if isinstance(cmap, str) else cmap
        cmap = cmap.with_extremes(bad="white")
        im = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
        for i, row in enumerate(tokens):
            for t, s in enumerate(row):
                v = data[i, t]
                if not np.isfinite(v):
                    continue
                rgba = cmap(norm(v))
                dark = 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2] < 0.5
                ax.text(t, i, s, ha="center", va="center", fontsize=7 if len(s) > 1 else 9,
                        color="white" if dark else "black")  # fmt: skip
        for k in range(1, len(groups)):
            ax.axhline(k * G - 0.5, color="black", lw=1.2)
        ax.set_xticks(range(t_max), [str(t + 1) for t in range(t_max)])
        ax.set(title=title, xlabel="completion token $t$")
        ax.grid(False)
        bar = fig.colorbar(im, ax=ax, shrink=0.8, pad=0.02, aspect=30)
        if key == "clipped":
            bar.set_ticks([0.25, 0.75], labels=["no", "yes"])
        if key == "ratio":
            ticks = [v for v in (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0) if norm.vmin <= v <= norm.vmax]
            bar.set_ticks(ticks, labels=[f"{v:g}" for v in ticks])
            for edge in (1.0 - eps_low, 1.0 + eps_high):
                bar.ax.axhline(edge, color="black", lw=1.2)
            bar.set_label("log scale; black lines: the clip range", fontsize=8)
    prompts = [tokenizer.decode(p) for p in rollout.prompt_ids[rows].tolist()]
    labels = []
    for i, row in enumerate(rows):
        head = f"{prompts[i]}  " if i % G == 0 else ""
        tail = f"  r={r[row]:g}" if r is not None else ""
        labels.append(f"{head}#{i % G}{tail}")
    axes[0].set_yticks(range(len(rows)), labels, fontsize=8)
    axes[0].set_ylabel("completion (group's prompt at its first row)")
    fig.suptitle(f"One batch, token by token: {len(groups)} groups of G = {G} completions "
                 f"(clip range [{1 - eps_low:g}, {1 + eps_high:g}])")  # fmt: skip
    return fig


__all__ = [
    "ALGO_COLORS", "MB", "MEMORY_COLORS", "MEMORY_PARTS", "METRIC_LABELS", "PALETTE", "STYLE", "X_LABELS",
    "alt_text", "clear_legends", "legends_on_data", "save", "set_alt", "show",
    "clipped_objective", "color_for", "plot_clip_function", "plot_group_advantages", "plot_kl_estimators",
    "plot_learning_curves", "plot_maze", "plot_memory", "plot_memory_ratio", "plot_metrics", "plot_variance",
    "TOKEN_VIEW", "plot_token_view", "plot_variants_grid", "token_view_values",
]  # fmt: skip
