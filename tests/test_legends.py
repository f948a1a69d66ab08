"""No legend of the course's figures sits on what the figure plots.

Each figure function of `grpo_edu.figures` is built on small synthetic data (the data of
tests/test_plots.py), drawn, and every legend's box on the canvas (``get_window_extent``) is checked
against the plotted data in display coordinates: the vertices of every visible line, with each
segment sampled every 2 px (a legend over the middle of a straight segment covers the line too), and
the points of every scatter. A point counts where its axes draw it (inside the axes box). Control: a
figure with its legend forced onto its curve fails the check.
"""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from test_plots import fake_comparison, fake_history  # noqa: E402

from envs.maze import MazeEnv  # noqa: E402
from grpo_edu import functional as Fn  # noqa: E402
from grpo_edu.demos.maze_pg import train_maze  # noqa: E402
from grpo_edu.figures import plots  # noqa: E402

STEP_PX = 2.0


def _display_points(ax, artist) -> np.ndarray:
    """The artist's data as display coordinates (N x 2), segments of a line sampled every STEP_PX."""
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
        n = max(1, int(np.ceil(np.hypot(*(b - a)) / STEP_PX)))
        dense.append(a + (b - a) * (np.arange(1, n + 1)[:, None] / n))
    return np.concatenate(dense)


def _inside(box, pts: np.ndarray) -> np.ndarray:
    """Which display points (N x 2) lie in the box (its edges included)."""
    if not len(pts):
        return np.zeros(0, bool)
    return (pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1) & (pts[:, 1] >= box.y0) & (pts[:, 1] <= box.y1)


def legends_on_data(fig: Figure) -> list[str]:
    """Each legend that covers plotted data: '<where>: N points of <label>' (empty: none does)."""
    canvas = FigureCanvasAgg(fig)  # a Figure made without pyplot has no renderer of its own
    canvas.draw()
    renderer = canvas.get_renderer()
    legends = [(f"legend of '{ax.get_title()}'", ax.get_legend()) for ax in fig.axes if ax.get_legend()]
    legends += [("figure legend", lg) for lg in fig.legends]
    problems = []
    for where, legend in legends:
        if not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            if not ax.get_visible():
                continue
            for artist in [*ax.lines, *[c for c in ax.collections if isinstance(c, PathCollection)]]:
                if not artist.get_visible() or artist in legend.legend_handles:
                    continue
                pts = _display_points(ax, artist)
                hits = int(_inside(box, pts[_inside(ax.bbox, pts)]).sum())
                if hits:
                    problems.append(f"{where}: {hits} points of '{artist.get_label()}' in '{ax.get_title()}'")
    return problems


def _figures():
    env = MazeEnv()
    r = torch.tensor([1.0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1])
    logits = torch.randn(500, 1, 8, generator=torch.Generator().manual_seed(0))
    ref = logits + 0.3 * torch.randn(500, 1, 8, generator=torch.Generator().manual_seed(1))
    tok = torch.distributions.Categorical(logits=logits).sample()
    lp, rlp = Fn.token_logprobs(logits, tok), Fn.token_logprobs(ref, tok)
    kl = {k: Fn.kl_estimate(lp, rlp, k) for k in ("k1", "k2", "k3")}
    seeds = {"ppo": [fake_history("ppo", i) for i in range(3)], "grpo": fake_history("grpo")}
    sweep = [{"params": p, "batch_size": b, "ratio_measured": 1.2, "ratio_analytic": 1.3}
             for p in (1e5, 1e6, 1e7) for b in (64, 512)]  # fmt: skip
    variants = {f"v{i}": [fake_history("grpo", i + 1)] for i in range(3)}
    return {
        "learning_curves/samples": lambda: plots.plot_learning_curves(
            [fake_history("reinforce"), fake_history("grpo", 1)], x="samples"
        ),
        "learning_curves/seeds": lambda: plots.plot_learning_curves(seeds, x="step", band="std"),
        "metrics": lambda: plots.plot_metrics(
            {"reinforce": fake_history("reinforce", with_clip=False), "grpo": fake_history("grpo")},
            keys=("reward", "kl", "entropy", "clip_ratio"),
        ),
        "variance/grouped": lambda: plots.plot_variance(
            {
                "A": {"raw": {"relative_variance": 0.5}, "group": {"relative_variance": 0.7}},
                "B": {"raw": {"relative_variance": 0.4}, "group": {"relative_variance": 0.6}},
            }  # fmt: skip
        ),
        "comparison_variance": lambda: plots.plot_comparison_variance(fake_comparison()),
        "comparison_memory": lambda: plots.plot_comparison_memory(fake_comparison()),
        "memory_ratio": lambda: plots.plot_memory_ratio(sweep),
        "variants_grid": lambda: plots.plot_variants_grid([fake_history("grpo")], variants, x="step"),
        "clip_function": lambda: plots.plot_clip_function(eps_low=0.2, eps_high=0.28),
        "kl_estimators": lambda: plots.plot_kl_estimators(
            kl, Fn.exact_kl(logits, ref).mean().item(), Fn.exact_kl(logits, ref, "ref||pi").mean().item()
        ),
        "maze": lambda: plots.plot_maze(env, history=train_maze(env, steps=20, seed=0, progress=False)),
        "group_advantages": lambda: plots.plot_group_advantages(r, 4, Fn.group_advantages(r, 4)[0]),
    }


FIGURES = _figures()


@pytest.mark.parametrize("name", list(FIGURES))
def test_no_legend_sits_on_the_data(name):
    fig = FIGURES[name]()
    problems = legends_on_data(fig)
    assert not problems, "\n".join(problems)


def test_a_legend_forced_onto_a_curve_fails_the_check():
    """Control: the legend moved onto the middle of a rising line is caught; in a corner the curve
    leaves empty it is not."""
    fig = Figure(figsize=(5, 3.5))
    ax = fig.add_subplot()
    x = np.linspace(0, 1, 50)
    ax.plot(x, x, label="a rising line with a long label")
    ax.legend(loc="center")
    assert any("a rising line" in p for p in legends_on_data(fig))
    ax.legend(loc="lower right")
    assert legends_on_data(fig) == []
    # a straight segment between two far points: the legend over its middle is caught too
    fig = Figure(figsize=(5, 3.5))
    ax = fig.add_subplot()
    ax.plot([0, 1], [0.5, 0.5], label="two points")
    ax.set_ylim(0, 1)
    ax.legend(loc="center")
    assert legends_on_data(fig)
