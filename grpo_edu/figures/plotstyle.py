"""The look shared by every figure: style, colours, labels and the small helpers.

`grpo_edu.figures.plots` (the figures of measurements) and `grpo_edu.figures.concept_plots` (the figures of
equations) both import from here; neither imports the other's internals.
"""

from __future__ import annotations

import functools
import sys

import matplotlib as mpl
import numpy as np
import torch
from matplotlib.figure import Figure

STYLE = {
    "figure.dpi": 100, "savefig.dpi": 120, "savefig.bbox": "tight",
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
    "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
    "legend.frameon": False, "lines.linewidth": 1.8,
}  # fmt: skip
# Okabe-Ito: distinguishable with colour-blindness
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
ALGO_COLORS = {"grpo": "#0072B2", "ppo": "#D55E00", "baseline": "#009E73", "reinforce": "#E69F00"}
X_LABELS = {
    "samples": "generated completions (samples)",
    "seconds": "training wall time (s, evaluation excluded; noisy on a shared machine)",
    "step": "RL step", "episodes": "episodes played",
}  # fmt: skip
METRIC_LABELS = {
    "reward": "mean reward (per completion)", "reward_std": "reward std (per batch)",
    "kl": "KL to reference (nats/token)", "entropy": "entropy (nats/token)",
    "clip_ratio": "clipped tokens (fraction)", "grad_norm": "gradient norm (L2, pre-clip)",
    "frac_reward_zero_std": "groups with equal rewards (fraction)",
    "completion_length": "completion length (tokens)", "value_loss": "critic loss (MSE/2)",
    "relative_variance": "relative variance of the gradient\n(lower is better)",
    "mean_cosine": "mean cosine to the mean gradient\n(higher is better)",
    "relative_variance_corrected": "relative variance of the gradient\n(bias-corrected; lower is better)",
    "total_variance": "total variance tr Cov(g)\n(lower is better)",
}  # fmt: skip
METRIC_TITLES = {  # a panel's title, in words (the formula goes in the figure's footnote)
    "relative_variance": "noise of the gradient: relative variance",
    "relative_variance_corrected": "noise of the gradient: relative variance (bias-corrected)",
    "mean_cosine": "agreement of one batch's gradient with the mean gradient",
    "total_variance": "total variance of one batch's gradient",
}
VARIANCE_FORMULA = {  # the footnote of a figure that plots these keys
    "relative_variance": "relative variance = tr Cov(g) / |mean g|^2 over K batch gradients g",
    "relative_variance_corrected": (
        "relative variance = tr Cov(g) / |E g|^2, with |E g|^2 estimated without bias as |mean g|^2 - tr Cov(g) / K "
        "over K batch gradients g (lower: fewer batches for the same precision)"
    ),
}
MEMORY_PARTS = (
    "policy_params", "policy_grads", "optimizer_state", "reference_params",
    "critic_params", "critic_grads", "critic_optimizer_state", "activations",
)  # fmt: skip
MEMORY_COLORS = (  # policy: blues, frozen reference: gray, critic: oranges, activations: green
    "#08519c", "#3182bd", "#9ecae1", "#969696", "#a63603", "#e6550d", "#fdae6b", "#74c476",
)  # fmt: skip
MB = 1e6  # bytes per MB on the axes


def styled(fn):
    """Run ``fn`` inside the module's rc context (no global side effect)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with mpl.rc_context(STYLE):
            return fn(*args, **kwargs)

    return wrapper


def color_for(name: str, i: int = 0) -> str:
    """The colour of an algorithm (by name: grpo, ppo, baseline, reinforce), else the i-th."""
    low = str(name).lower()
    for key in ("grpo", "ppo", "baseline", "reinforce"):
        if key in low:
            return ALGO_COLORS[key]
    return PALETTE[i % len(PALETTE)]


def new_figure(ncols=1, nrows=1, size=(6.4, 4.0), **kw):
    """``(Figure, flat array of axes)``: a constrained-layout figure of ``nrows x ncols`` panels."""
    fig = Figure(figsize=size, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes.ravel()


def to_numpy(x) -> np.ndarray:
    """A float numpy array of a tensor (detached, on the CPU) or of anything array-like."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().float().numpy()
    return np.asarray(x, dtype=float)


# ------------------------------------------------------------------------ alt text
_ALT = "_grpo_edu_alt"  # the attribute of a Figure that holds its alt text


def set_alt(fig: Figure, text: str) -> Figure:
    """Attach ``text`` to ``fig`` as its alt text (a sentence saying what the figure shows,
    for a reader who cannot see it) and return ``fig``. Every figure of `grpo_edu.figures.plots`
    carries one; `show` displays it, `save` writes it into the PNG."""
    text = " ".join(str(text).split())
    if not text:
        raise ValueError("alt text must not be empty: say what the figure shows")
    setattr(fig, _ALT, text)
    return fig


def alt_text(fig: Figure) -> str | None:
    """The alt text `set_alt` attached to ``fig`` (None if none)."""
    return getattr(fig, _ALT, None)


def show(fig: Figure, alt: str | None = None) -> None:
    """Display ``fig`` in a notebook with alt text, then close it.

    ``alt``: what the figure shows, in words, for a reader who cannot see it (default: the
    text the plotting function attached, see `set_alt`); keep measured numbers out of it
    (the notebooks' checks compare it between runs). The output holds the PNG with the
    text in its metadata (``{"image/png": {"alt": ...}}``), the same image as an HTML
    ``<img alt="...">`` (what nbconvert's HTML export and JupyterLab show) and the text as
    plain text; the metadata also says how many legends still cover data once `clear_legends` has
    run (``"legends_on_data"``, 0 unless a legend fits nowhere), so a committed figure can be checked. End a cell with ``show(fig, alt="...")`` rather than with ``fig``: a bare
    figure has no alt text. Returns None, so the figure is shown once.
    """
    import base64
    import html

    from IPython.core.pylabtools import print_figure  # the renderer of %matplotlib inline
    from IPython.display import display

    text = alt if alt is not None else alt_text(fig)
    if text is None or not str(text).strip():
        raise ValueError("alt: say what the figure shows (this figure has no alt text attached)")
    text = alt_text(set_alt(fig, text))
    clear_legends(fig)  # no legend on the data, whoever drew the figure
    png = base64.b64encode(print_figure(fig, "png")).decode("ascii")
    on_data = len(legends_on_data(fig))  # measured on the figure as drawn: kept with the PNG, checked by tests
    bundle = {
        "image/png": png,
        "text/html": f'<img src="data:image/png;base64,{png}" alt="{html.escape(text)}">',
        "text/plain": f"[figure] {text}",
    }
    display(bundle, raw=True, metadata={"image/png": {"alt": text, "legends_on_data": on_data}})
    close(fig)


# ------------------------------------------------------------------------ legends off the data
LEGEND_SPOTS = ("upper left", "upper right", "lower right", "lower left", "center right", "center left",
                "upper center", "lower center")  # fmt: skip
_STEP_PX = 2.0  # a line's segments are sampled every 2 px: a legend over a straight segment covers it too


def _display_points(artist) -> np.ndarray:
    """The artist's data in display coordinates (N x 2); a drawn line's segments sampled every 2 px."""
    from matplotlib.collections import PathCollection

    if isinstance(artist, PathCollection):
        offsets = np.asarray(artist.get_offsets(), float)
        return artist.get_offset_transform().transform(offsets) if len(offsets) else np.empty((0, 2))
    xy = np.asarray(artist.get_xydata(), float)
    pts = artist.get_transform().transform(xy) if len(xy) else np.empty((0, 2))
    pts = pts[np.isfinite(pts).all(axis=1)]
    if artist.get_linestyle() in ("None", "", " ", "none") or len(pts) < 2:
        return pts
    dense = [pts[:1]]
    for a, b in zip(pts[:-1], pts[1:], strict=True):
        n = max(1, int(np.ceil(np.hypot(*(b - a)) / _STEP_PX)))
        dense.append(a + (b - a) * (np.arange(1, n + 1)[:, None] / n))
    return np.concatenate(dense)


def _inside(box, pts: np.ndarray) -> np.ndarray:
    if not len(pts):
        return np.zeros(0, bool)
    return (pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1) & (pts[:, 1] >= box.y0) & (pts[:, 1] <= box.y1)


def _legends(fig: Figure) -> list:
    out = [(f"legend of '{ax.get_title()}'", ax, ax.get_legend()) for ax in fig.axes if ax.get_legend()]
    return [*out, *[("figure legend", None, lg) for lg in fig.legends]]


def _hits(fig: Figure, legend, renderer) -> list[str]:
    """'N points of <label> in <title>' for each drawn line or scatter (its points inside its own axes)
    that ``legend``'s box covers."""
    from matplotlib.collections import PathCollection

    box, found = legend.get_window_extent(renderer), []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for artist in [*ax.lines, *[c for c in ax.collections if isinstance(c, PathCollection)]]:
            if not artist.get_visible() or artist in legend.legend_handles:
                continue
            pts = _display_points(artist)
            n = int(_inside(box, pts[_inside(ax.bbox, pts)]).sum())
            if n:
                found.append(f"{n} points of '{artist.get_label()}' in '{ax.get_title()}'")
    return found


def _renderer(fig: Figure):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()  # a Figure made without pyplot has no renderer of its own
    return canvas.get_renderer()


def legends_on_data(fig: Figure) -> list[str]:
    """Each visible legend that covers plotted data, as '<where>: N points of <label> in <title>'
    (empty: none does). The data: the vertices of every visible line, its segments sampled every
    2 px, and the points of every scatter, where their axes draw them."""
    renderer = _renderer(fig)
    return [f"{where}: {hit}" for where, _, lg in _legends(fig) if lg.get_visible() for hit in _hits(fig, lg, renderer)]


def clear_legends(fig: Figure) -> list[str]:
    """Move each axes legend that covers plotted data to the first of `LEGEND_SPOTS` inside its axes
    where it covers none, else just outside the axes' right edge; returns what moved, in words.
    `show` and `save` call it, so no figure of the course (a library function's, a regime's or one
    drawn in a notebook cell) is shown with its legend on its data. A figure legend is left as drawn."""
    moved = []
    for where, ax, legend in _legends(fig):
        if ax is None or not legend.get_visible() or not _hits(fig, legend, _renderer(fig)):
            continue
        for spot in LEGEND_SPOTS:
            legend.set_loc(spot)
            if not _hits(fig, legend, _renderer(fig)):
                moved.append(f"{where} -> {spot}")
                break
        else:
            legend.set_bbox_to_anchor((1.02, 1.0), transform=ax.transAxes)
            legend.set_loc("upper left")
            moved.append(f"{where} -> outside, right")
    return moved


def save(fig: Figure, path, alt: str | None = None, dpi: int = 120) -> None:
    """``fig.savefig(path)`` with its alt text (``alt`` or the attached one) written into the
    PNG as its "Description" (a tEXt chunk image viewers and screen readers can read), then close it."""
    text = alt if alt is not None else alt_text(fig)
    metadata = {"Description": " ".join(text.split())} if text else None
    clear_legends(fig)
    fig.savefig(path, dpi=dpi, bbox_inches="tight", metadata=metadata)
    close(fig)


def close(fig: Figure) -> None:
    """Release ``fig``: pyplot's registry forgets it if pyplot made it (a `Figure` built
    without pyplot, as every figure here is, needs nothing)."""
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close(fig)
