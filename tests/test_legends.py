"""No legend of the course's figures sits on what the figure plots.

Two layers. `plots.show` and `plots.save`, which every figure of the notebooks and of the regimes goes
through (the last tests check that), move a legend off the data (`clear_legends`); and each figure
function of `grpo_edu.figures` is built on small synthetic data (the data of
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
from matplotlib.figure import Figure  # noqa: E402
from test_plots import fake_comparison, fake_history  # noqa: E402

from envs.maze import MazeEnv  # noqa: E402
from grpo_edu import functional as Fn  # noqa: E402
from grpo_edu.demos.maze_pg import train_maze  # noqa: E402
from grpo_edu.figures import plots  # noqa: E402
from grpo_edu.figures.plotstyle import clear_legends, legends_on_data  # noqa: E402


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


def _line_with_legend_on_it(loc="center"):
    fig = Figure(figsize=(5, 3.5))
    ax = fig.add_subplot()
    x = np.linspace(0, 1, 50)
    ax.plot(x, x, label="a rising line with a long label")
    ax.plot(x, 1 - x, label="a falling line")
    ax.legend(loc=loc)
    return fig


def test_clear_legends_moves_a_legend_off_the_data():
    fig = _line_with_legend_on_it()
    assert legends_on_data(fig), "control: the legend starts on both lines"
    moved = clear_legends(fig)
    assert len(moved) == 1 and legends_on_data(fig) == []
    assert clear_legends(fig) == []  # a legend already clear stays where it is
    # no spot inside is free (the axes filled with points): it goes outside, to the right
    fig = Figure(figsize=(4, 3))
    ax = fig.add_subplot()
    g = np.linspace(0, 1, 40)
    xx, yy = np.meshgrid(g, g)
    ax.scatter(xx.ravel(), yy.ravel(), s=2, label="points everywhere")
    ax.legend(loc="center")
    assert legends_on_data(fig)
    assert clear_legends(fig) == ["legend of '' -> outside, right"] and legends_on_data(fig) == []


def test_show_and_save_clear_the_legend(tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append(a))
    fig = _line_with_legend_on_it()
    plots.show(fig, alt="two crossing lines")
    assert shown and legends_on_data(fig) == []
    fig = _line_with_legend_on_it()
    plots.save(fig, tmp_path / "x.png", alt="two crossing lines")
    assert (tmp_path / "x.png").stat().st_size > 0 and legends_on_data(fig) == []


def _committed_figures_not_cleared(paths) -> list[str]:
    """Each PNG output of the notebooks at ``paths`` that show() did not draw with its legends off the
    data: no alt text (a bare ``fig`` skips `clear_legends`), no ``legends_on_data`` count (drawn
    before show() measured it), or a count above 0."""
    import json

    bad = []
    for path in paths:
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            for out in cell.get("outputs", []):
                if "image/png" not in out.get("data", {}):
                    continue
                meta = out.get("metadata", {}).get("image/png", {})
                if not meta.get("alt") or meta.get("legends_on_data") != 0:
                    bad.append(
                        f"{path.name} cell {i} ({'no alt' if not meta.get('alt') else meta.get('legends_on_data')})"
                    )
    return bad


def test_every_committed_notebook_figure_has_its_legends_off_the_data():
    """Every figure committed in a notebook went through plots.show, which cleared its legends and
    counted those still on the data on the figure as drawn: 0 for each."""
    from pathlib import Path

    paths = sorted(Path(__file__).resolve().parents[1].glob("notebooks/*.ipynb"))
    bad = _committed_figures_not_cleared(paths)
    assert not bad, f"figures shown without plots.show's cleared legends (re-execute the notebook): {bad}"


def test_the_committed_figure_check_fails_a_bare_or_covered_figure(tmp_path, monkeypatch):
    """Control: a notebook output without show()'s metadata, or with a legend left on the data, fails it."""
    import json

    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append(k["metadata"]))
    plots.show(_line_with_legend_on_it(), alt="two crossing lines")
    assert shown == [{"image/png": {"alt": "two crossing lines", "legends_on_data": 0}}]
    png = {"output_type": "display_data", "data": {"image/png": "x"}}
    cells = [{"cell_type": "code", "outputs": [dict(png, metadata=m)]} for m in
             ({}, {"image/png": {"alt": "a"}}, {"image/png": {"alt": "a", "legends_on_data": 1}}, shown[0])]  # fmt: skip
    (tmp_path / "n.ipynb").write_text(json.dumps({"cells": cells}))
    assert _committed_figures_not_cleared([tmp_path / "n.ipynb"]) == [
        "n.ipynb cell 0 (no alt)",
        "n.ipynb cell 1 (None)",
        "n.ipynb cell 2 (1)",
    ]
