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
    alt_text,
    color_for,
    save,
    set_alt,
    show,
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


# ----------------------------------------------------------------- variants against the seed band


@_styled
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
    fig, axes = _new(ncols, nrows, size=(3.1 * ncols, 2.5 * nrows + 0.6), sharex=True, sharey=True)

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
    each = f"one run each ({', '.join(map(str, sizes))} seeds)" if sizes != [1] else "one run each (one seed)"
    band = f"{len(base)} seeds, min-max" if len(base) > 1 else "one seed"
    fig.suptitle(f"Each variant ({each}, orange) against the {default_name} (gray: {band}, {lo:.3f}-{hi:.3f} final)",
                 fontsize=10)  # fmt: skip
    return fig


# ----------------------------------------------------------------- one batch, token by token

TOKEN_VIEW = ("advantage", "ratio", "clipped", "entropy")  # what plot_token_view colours, in panel order


def token_view_values(logp, old_logp, advantages, logits, mask, eps_low: float = 0.2,
                      eps_high: float | None = None) -> dict:  # fmt: skip
    """The four numbers of `plot_token_view` per completion token, from `grpo_edu.functional`:

        advantage  A_{i,t}: the advantage of the token's completion (``advantages`` [B] or [B, T])
        ratio      rho_{i,t} = pi_theta(a_t | s_t) / pi_old(a_t | s_t) = exp(logp - old_logp)
        clipped    1.0 where `Fn.clipped_surrogate_loss` gives the token no gradient although
                   A != 0 (rho outside [1 - eps_low, 1 + eps_high] on the side A pushes), else 0.0
        entropy    H_t = `Fn.entropy(logits)` (nats), of pi_theta at the token's position

    logp, old_logp, mask: [B, T]; logits: [B, T, V] of pi_theta. Returns name -> [B, T] float
    tensors (detached), NaN where mask is 0.
    """
    import torch  # local: the figures above need neither torch nor the functional core

    from . import functional as Fn

    if logp.dim() != 2:
        raise ValueError(f"logp must be [B, T], got shape {list(logp.shape)}")
    for name, t in (("old_logp", old_logp), ("mask", mask)):
        if t.shape != logp.shape:
            raise ValueError(f"{name} must have logp's shape {list(logp.shape)}, got {list(t.shape)}")
    if logits.dim() != 3 or tuple(logits.shape[:2]) != tuple(logp.shape):
        raise ValueError(f"logits must be [B, T, V] with [B, T] = {list(logp.shape)}, got {list(logits.shape)}")
    if advantages.shape not in (logp.shape[:1], logp.shape):
        raise ValueError(f"advantages must be [B] or [B, T] = {list(logp.shape)}, got {list(advantages.shape)}")
    lp = logp.detach().double().requires_grad_(True)
    adv = advantages.detach().double()
    adv = (adv[:, None] if adv.dim() == 1 else adv).expand_as(lp)
    loss, _ = Fn.clipped_surrogate_loss(lp, old_logp.detach().double(), adv, eps_low, eps_high, mask=mask)
    (grad,) = torch.autograd.grad(loss.sum(), lp)  # d L_t / d log pi_t = -rho_t A_t, or 0 where clipped
    values = {
        "advantage": adv.detach(),
        "ratio": torch.exp(lp.detach() - old_logp.detach().double()),
        "clipped": ((grad == 0) & (adv != 0)).double(),
        "entropy": Fn.entropy(logits.detach().double()),
    }
    off = mask.detach().to(torch.float64) == 0
    return {k: v.masked_fill(off, float("nan")).float() for k, v in values.items()}


def _safe_log(x):  # the ratio's colour scale: log, with no warning at 0 (the colour bar's edge)
    return np.log(np.clip(x, 1e-12, None))


def _token_strings(ids, vocab) -> list[list[str]]:
    names = {"<eos>": "eos", "<pad>": "", "<bos>": "bos"}
    return [[names.get(vocab[i], vocab[i]) for i in row] for row in ids]


@_styled
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

    from .plotstyle import _np

    ids, mask, G = rollout.completion_ids, _np(rollout.mask), int(rollout.group_size)
    B, T = mask.shape
    missing = [k for k in TOKEN_VIEW if k not in values]
    if missing:
        raise ValueError(f"values must hold {TOKEN_VIEW} (from token_view_values), missing {missing}")
    for k in TOKEN_VIEW:
        if tuple(np.shape(_np(values[k]))) != (B, T):
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
    r = None if rewards is None else _np(rewards).ravel()
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
        data = _np(values[key])[rows, :t_max]
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
    "alt_text", "save", "set_alt", "show",
    "clipped_objective", "color_for", "plot_clip_function", "plot_group_advantages", "plot_kl_estimators",
    "plot_learning_curves", "plot_maze", "plot_memory", "plot_memory_ratio", "plot_metrics", "plot_variance",
    "TOKEN_VIEW", "plot_token_view", "plot_variants_grid", "token_view_values",
]  # fmt: skip
