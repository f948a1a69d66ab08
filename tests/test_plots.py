"""Every figure builds on small synthetic data, with labelled axes and legends."""

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from envs.maze import MazeEnv  # noqa: E402
from grpo_edu import functional as Fn  # noqa: E402
from grpo_edu.demos.maze_pg import TabularPolicy, train_maze  # noqa: E402
from grpo_edu.figures import plots  # noqa: E402
from grpo_edu.train import History  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def fake_history(name, seed=0, steps=20, with_clip=True):
    rng = np.random.default_rng(seed)
    h = History(name)
    for s in range(1, steps + 1):
        rec = {"step": s, "samples": 64 * s, "seconds": 0.1 * s + 0.01 * seed,
               "reward": s / steps, "kl": 0.01 * s, "entropy": 1.0 / s, "grad_norm": rng.random()}  # fmt: skip
        if with_clip:
            rec["clip_ratio"] = 0.1 * rng.random()
        h.steps.append(rec)
        if s % 5 == 0:
            h.evals.append({"step": s, "samples": 64 * s, "seconds": 0.1 * s + 0.01 * seed,
                            "accuracy": min(1.0, s / steps + 0.05 * rng.random())})  # fmt: skip
    return h


def labelled(fig, legend=True):
    """Every visible axis has an x and a y label; some legend exists if asked."""
    assert isinstance(fig, Figure)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert axes
    for ax in axes:
        assert ax.get_xlabel() and ax.get_ylabel(), ax.get_title()
    if legend:
        assert fig.legends or any(ax.get_legend() is not None for ax in axes)
    fig.savefig(io.BytesIO(), format="png", dpi=40)  # it renders (layout, mathtext)
    return axes


def test_style_is_not_global():
    before = dict(matplotlib.rcParams)
    plots.plot_clip_function()
    assert dict(matplotlib.rcParams) == before


@pytest.mark.parametrize("x", ["samples", "seconds", "step"])
def test_learning_curves(x):
    hs = [fake_history("reinforce"), fake_history("grpo", 1)]
    (ax,) = labelled(plots.plot_learning_curves(hs, x=x))
    labels = ax.get_legend_handles_labels()[1]
    assert "reinforce" in labels and "grpo" in labels and "target 90%" in labels
    np.testing.assert_allclose(ax.lines[0].get_ydata(), hs[0].eval_series("accuracy"))


def test_learning_curves_several_seeds_and_given_axis():
    seeds = {"ppo": [fake_history("ppo", i) for i in range(3)], "grpo": fake_history("grpo")}
    fig = Figure()
    ax = fig.add_subplot()
    out = plots.plot_learning_curves(seeds, x="step", ax=ax, target=None, band="std")
    assert out is fig
    labels = ax.get_legend_handles_labels()[1]
    assert "ppo (mean ± std of 3)" in labels and "grpo" in labels
    assert len(ax.collections) == 1  # one band, for the run with several seeds
    assert ax.get_legend().get_title().get_text() == ""  # not every curve is one seed
    mean = next(line for line in ax.lines if line.get_label().startswith("ppo"))
    runs = np.stack([h.eval_series("accuracy") for h in seeds["ppo"]])
    np.testing.assert_allclose(mean.get_xdata(), [5, 10, 15, 20])  # the evaluations, no interpolated grid
    np.testing.assert_allclose(mean.get_ydata(), runs.mean(0))
    with pytest.raises(ValueError, match="x"):
        plots.plot_learning_curves(seeds, x="epochs")


def test_learning_curves_on_different_x_stop_where_the_data_stops():
    # seconds differ per seed: each seed drawn through its own evaluations up to its last one, the mean and
    # the band only where every seed has data
    seeds = [fake_history("ppo", 0, steps=20), fake_history("ppo", 1, steps=15), fake_history("ppo", 2, steps=10)]
    for k, h in enumerate(seeds):
        for e in h.evals:
            e["seconds"] = e["step"] * (0.1 + 0.02 * k)
    (ax,) = labelled(plots.plot_learning_curves({"ppo": seeds}, x="seconds", target=None))
    thin = [line for line in ax.lines if line.get_label().startswith("_")]
    assert len(thin) == 3
    for line, h in zip(thin, seeds, strict=True):  # the real evaluation points, nothing after the last
        np.testing.assert_allclose(line.get_xdata(), [e["seconds"] for e in h.evals])
        assert line.get_marker() == "o"
    (mean,) = [line for line in ax.lines if not line.get_label().startswith("_")]
    assert mean.get_label() == "ppo (mean, min-max of 3; thin lines: each seed)"
    x = mean.get_xdata()
    assert x.min() == pytest.approx(5 * 0.14) and x.max() == pytest.approx(10 * 0.14)  # all three have data there
    assert mean.get_marker() in ("None", "", None)  # markers only on measured points
    (band,) = ax.collections
    vertices = band.get_paths()[0].vertices[:, 0]
    assert vertices.min() >= x.min() - 1e-9 and vertices.max() <= x.max() + 1e-9


def test_learning_curves_y_axis_and_one_seed_note():
    high = fake_history("grpo")
    for e in high.evals:
        e["accuracy"] = 0.5 + 0.4 * e["step"] / 20  # 0.6 .. 0.9
    fig = plots.plot_learning_curves({"grpo": high}, x="seconds", target=0.9)
    (ax,) = fig.axes
    lo, hi = ax.get_ylim()
    assert lo == pytest.approx(0.5) and hi == pytest.approx(1.0)  # a tenth below the lowest point, not 0
    assert ax.get_legend().get_title().get_text() == "one seed per curve: no spread shown"
    assert not ax.collections  # no band from one seed
    assert "noisy on a shared machine" in ax.get_xlabel()
    assert "one seed each" in plots.alt_text(fig)
    low = fake_history("grpo")
    for e in low.evals:
        e["accuracy"] = 0.02
    assert plots.plot_learning_curves(low, target=None).axes[0].get_ylim()[0] == 0.0  # never below 0


def test_metrics_small_multiples():
    hs = {"reinforce": fake_history("reinforce", with_clip=False), "grpo": fake_history("grpo")}
    keys = ("reward", "kl", "entropy", "clip_ratio", "frac_reward_zero_std")
    fig = plots.plot_metrics(hs, keys=keys, smooth=3)
    axes = labelled(fig)
    assert [ax.get_title() for ax in axes] == list(keys)
    assert len(axes[3].lines) == 1  # REINFORCE recorded no clip_ratio
    assert not axes[4].lines  # nobody recorded it: "not recorded"
    labelled(plots.plot_metrics(fake_history("grpo"), keys="reward"))


def test_variance_bars_single_and_grouped():
    res = {"_meta": {"K": 8}, "raw": {"relative_variance": 0.5, "mean_cosine": 0.8},
           "group": {"relative_variance": 0.7, "mean_cosine": 0.7}}  # fmt: skip
    (ax,) = labelled(plots.plot_variance(res), legend=False)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["raw", "group"]
    assert [p.get_height() for p in ax.patches] == [0.5, 0.7]
    fig = plots.plot_variance({"A": res, "B": res}, key=("relative_variance", "mean_cosine"))
    axes = labelled(fig)
    assert len(axes) == 2 and len(axes[0].patches) == 4


def test_memory_figures():
    P = 1e6
    rows = [{"algorithm": "GRPO", "policy_params": 4 * P, "policy_grads": 4 * P,
             "optimizer_state": 8 * P, "reference_params": 4 * P, "activations": 10 * P,
             "measured_peak": 25 * P},
            {"algorithm": "PPO", "policy_params": 4 * P, "policy_grads": 4 * P,
             "optimizer_state": 8 * P, "reference_params": 4 * P, "critic_params": 4 * P,
             "critic_grads": 4 * P, "critic_optimizer_state": 8 * P, "activations": 10 * P,
             "measured_peak": 40 * P}]  # fmt: skip
    nested = [
        {"algorithm": "GRPO", "breakdown": {"policy_params": 4 * P, "activations": P}, "measured_peak_step": 6 * P}
    ]  # diagnostics.step_memory's layout
    ax, _ = labelled(plots.plot_memory(nested))
    assert ax.lines[0].get_ydata()[0] == pytest.approx(6.0)
    ax, table = labelled(plots.plot_memory(rows))
    assert "MB" in ax.get_ylabel()
    # the table: one row per part, one column per algorithm, one decimal ("-": the part is absent)
    cells = [t.get_text() for t in table.texts]
    assert cells[:2] == ["4.0", "4.0"] and cells.count("-") == 3  # GRPO has no critic parts
    assert [t.get_text() for t in table.get_yticklabels()][-1] == "activations"
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["analytic 30.0 MB\nmeasured 25.0 MB", "analytic 46.0 MB\nmeasured 40.0 MB"]
    tops = [p.get_y() + p.get_height() for p in ax.patches]
    assert max(tops) == pytest.approx(46.0)  # PPO: 46e6 bytes stacked = 46 MB
    marker = next(line for line in ax.lines if line.get_label() == "measured peak")
    np.testing.assert_allclose(marker.get_ydata(), [25.0, 40.0])
    sweep = [{"params": p, "batch_size": b, "ratio_measured": 1.2, "ratio_analytic": 1.3}
             for p in (1e5, 1e6, 1e7) for b in (64, 512)]  # fmt: skip
    (ax,) = labelled(plots.plot_memory_ratio(sweep))
    assert ax.get_xscale() == "log"
    assert plots._mb(0.04) == "<0.1" and plots._mb(0.0) == "-" and plots._mb(52.93) == "52.9"


def fake_comparison(critic=0.45, gae=None, ppo=0.44):
    """compare's result as it is now: PPO's own estimator ("ppo", its GAE whitened); ``gae``: the unwhitened
    GAE measured too (the critic baseline's at gamma = lambda = 1)."""
    stats = lambda v: {"relative_variance_corrected": v, "relative_variance": v}  # noqa: E731
    algos = {a: {"label": label, "histories": [{"config": cfg}]} for a, label, cfg in (
        ("reinforce", "REINFORCE", {"minibatches": 1, "group_size": 1}),
        ("baseline", "REINFORCE + critic baseline", {"minibatches": 1, "group_size": 1}),
        ("ppo", "PPO + critic", {"minibatches": 2, "group_size": 1}),
        ("grpo", "GRPO", {"minibatches": 2, "group_size": 8, "share_prompts": True}))}  # fmt: skip
    P = 1e6
    mem = {a: {"batch_size": 512, "measured_peak_step": 20 * P,
               "breakdown": {"policy_params": P, "critic_params": 0.4 * P if a in ("baseline", "ppo") else 0.0,
                             "activations": 15 * P}} for a in algos}  # fmt: skip
    extra = lambda d: {"gae": stats(gae + d)} if gae is not None else {}  # noqa: E731
    return {
        "algorithms": algos,
        "memory": mem,
        "gradient_variance_distinct": {"_meta": {"prompts_per_batch": 512, "group_size": 8},
                                       "raw": stats(0.36), "critic": stats(critic), "ppo": stats(ppo), **extra(0.0)},
        "gradient_variance": {"_meta": {"prompts_per_batch": 64, "group_size": 8}, "raw": stats(0.65),
                              "critic": stats(critic + 0.1), "ppo": stats(ppo + 0.1), **extra(0.1),
                              "group_norm": stats(1.19)},
    }  # fmt: skip


def test_comparison_variance_one_panel_per_layout():
    fig = plots.plot_comparison_variance(fake_comparison())
    distinct, grouped = labelled(fig)
    assert distinct.get_title() == "512 prompts x 1 answer per batch"
    assert grouped.get_title() == "64 prompts x 8 answers per batch"
    assert [p.get_height() for p in distinct.patches] == [0.36, 0.45, 0.44]
    assert [p.get_height() for p in grouped.patches] == pytest.approx([0.65, 0.55, 0.54, 1.19])
    # solid in the layout the method trains with, hatched in the other one
    assert [bool(p.get_hatch()) for p in distinct.patches] == [False, False, False]
    assert [bool(p.get_hatch()) for p in grouped.patches] == [True, True, True, False]
    assert distinct.get_xticklabels()[2].get_text() == "PPO + critic\nA = GAE(V),\nγ = λ = 1,\nwhitened"
    notes = lambda **k: " ".join(t.get_text() for t in plots.plot_comparison_variance(  # noqa: E731
        fake_comparison(**k)).texts).replace("\n", " ")  # fmt: skip
    assert "A = GAE(V) and A = R - V(s) have equal bars" in notes(gae=0.45)  # the unwhitened GAE measured too
    assert "equal bars" not in notes()  # PPO's own bar, 0.44, is not the critic baseline's, 0.45: no note
    assert "relative_variance" not in fig.get_suptitle() + distinct.get_ylabel()  # no internal key names
    assert "equal bars" not in " ".join(t.get_text() for t in plots.plot_comparison_variance(
        fake_comparison(gae=0.5)).texts)  # fmt: skip
    with pytest.raises(ValueError, match="gradient variance"):
        plots.plot_comparison_variance({"algorithms": {}})


def test_comparison_memory_says_how_each_step_runs():
    ax, _ = labelled(plots.plot_comparison_memory(fake_comparison()))
    ticks = [t.get_text().replace("\n", " ") for t in ax.get_xticklabels()]
    assert "whole batch (512) per update" in ticks[0]
    assert "2 minibatches of 256" in ticks[2]
    assert "each prompt run once for its 8 answers" in ticks[3]
    with pytest.raises(ValueError, match="memory"):
        plots.plot_comparison_memory({"algorithms": {}})


def test_every_figure_has_alt_text_and_show_displays_it(monkeypatch):
    env = MazeEnv()
    r = torch.tensor([1.0, 0, 0, 1])
    figs = [
        plots.plot_learning_curves(fake_history("grpo")),
        plots.plot_metrics(fake_history("grpo"), keys="reward"),
        plots.plot_variance({"raw": {"relative_variance": 0.5}}),
        plots.plot_comparison_variance(fake_comparison()),
        plots.plot_comparison_memory(fake_comparison()),
        plots.plot_memory_ratio([{"params": 1e5, "batch_size": 64, "ratio_measured": 1.2}]),
        plots.plot_clip_function(),
        plots.plot_kl_estimators({"k1": np.array([0.1, 0.2])}, 0.1, 0.1),
        plots.plot_maze(env),
        plots.plot_group_advantages(r, 2, Fn.group_advantages(r, 2)[0]),
    ]
    for fig in figs:
        assert len(plots.alt_text(fig) or "") > 40, fig
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append((obj, kw)))
    plots.show(figs[0], alt="  a line\n chart  ")
    ((bundle, kw),) = shown
    # the alt text, and how many legends sit on the data (tests/test_legends.py reads it back)
    assert kw["raw"] and kw["metadata"] == {"image/png": {"alt": "a line chart", "legends_on_data": 0}}
    assert bundle["text/plain"] == "[figure] a line chart"
    assert bundle["text/html"].startswith('<img src="data:image/png;base64,' + bundle["image/png"][:20])
    assert bundle["text/html"].endswith('alt="a line chart">')
    plots.show(figs[1])  # the figure's own alt text
    assert shown[1][1]["metadata"]["image/png"]["alt"] == plots.alt_text(figs[1])
    with pytest.raises(ValueError, match="alt"):
        plots.show(Figure())
    with pytest.raises(ValueError, match="alt"):
        plots.set_alt(Figure(), "  ")


def test_save_writes_the_alt_text_into_the_png(tmp_path):
    from PIL import Image

    fig = plots.set_alt(plots.plot_metrics(fake_history("grpo"), keys="reward"), "reward per step")
    plots.save(fig, tmp_path / "m.png")
    assert Image.open(tmp_path / "m.png").info["Description"] == "reward per step"


@pytest.mark.parametrize(
    "A, rho, expected", [(1, 1.5, 1.2), (1, 0.5, 0.5), (-1, 0.5, -0.8), (-1, 1.5, -1.5),
                         (1, 1.0, 1.0), (-1, 1.1, -1.1), (1, 0.9, 0.9)],
)  # fmt: skip
def test_clip_objective_values(A, rho, expected):
    assert plots.clipped_objective(rho, A, eps_low=0.2)[0] == pytest.approx(expected)


def test_clip_function_figure():
    fig = plots.plot_clip_function(eps_low=0.2, eps_high=0.28)
    axes = labelled(fig)
    assert len(axes) == 2
    for ax, A in zip(axes, (1, -1), strict=True):
        curve = next(line for line in ax.lines if line.get_label().startswith("$\\min"))
        rho, obj = curve.get_xdata(), curve.get_ydata()
        expected = {1: {0.5: 0.5, 1.5: 1.28, 1.1: 1.1}, -1: {0.5: -0.8, 1.5: -1.5, 1.1: -1.1}}
        for r, want in expected[A].items():
            assert np.interp(r, rho, obj) == pytest.approx(want, abs=1e-2)
        assert len(ax.collections) == 1  # the shaded zero-gradient region


def test_kl_estimators():
    logits = torch.randn(500, 1, 8, generator=torch.Generator().manual_seed(0))
    ref = logits + 0.3 * torch.randn(500, 1, 8, generator=torch.Generator().manual_seed(1))
    tok = torch.distributions.Categorical(logits=logits).sample()
    lp, rlp = Fn.token_logprobs(logits, tok), Fn.token_logprobs(ref, tok)
    samples = {k: Fn.kl_estimate(lp, rlp, k) for k in ("k1", "k2", "k3")}
    samples["k3"] = samples["k3"].numpy()  # numpy arrays too
    fwd, rev = Fn.exact_kl(logits, ref).mean().item(), Fn.exact_kl(logits, ref, "ref||pi").mean().item()
    axes = labelled(plots.plot_kl_estimators(samples, fwd, rev))
    assert len(axes) == 3
    xs = [line.get_xdata()[0] for line in axes[1].lines]
    assert xs == pytest.approx([samples["k2"].mean().item(), fwd, rev])


def test_maze_figures():
    env = MazeEnv()
    fig = plots.plot_maze(env)
    (ax,) = labelled(fig, legend=False)
    h = train_maze(env, steps=20, seed=0, progress=False)
    axes = labelled(plots.plot_maze(env, history=h))
    assert len(axes) == 2 and "Greedy path" in axes[0].get_title()
    axes = labelled(plots.plot_maze(env, TabularPolicy(25, 4), history={"a": h, "b": h}))
    assert "never reaches" in axes[0].get_title()  # the untrained policy bumps the border


def test_group_advantages():
    r = torch.tensor([1.0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1])
    adv, _ = Fn.group_advantages(r, 4)
    axes = labelled(plots.plot_group_advantages(r, 4, adv))
    assert len(axes) == 2
    dots = [c for c in axes[1].collections if c.get_label().startswith("A")]
    shown = np.sort(np.concatenate([c.get_offsets()[:, 1] for c in dots]))
    np.testing.assert_allclose(shown, np.sort(adv.numpy()), atol=1e-6)  # every A_i, once
    with pytest.raises(ValueError, match="group_size"):
        plots.plot_group_advantages(r, 5, adv)


def test_smoothing_window_longer_than_the_run():
    from grpo_edu.figures.plots import _smooth

    y = np.array([1.0, 2.0, 3.0])
    assert _smooth(y, 10).shape == (3,)
    np.testing.assert_allclose(_smooth(y, 1), y)


def test_comparison_figures_read_panel_by_panel():
    """gradient_variance.png: the right panel carries the same y-label and tick values as the left
    (not "(the same scale)"), and a tick label breaks between equations, never inside one;
    memory.png: one stack per owner (policy with its reference, critic, activations), so that the
    legend does not mix the critic's parts with the policy's and no part is a sliver of its own."""
    distinct, grouped = plots.plot_comparison_variance(fake_comparison()).axes
    assert grouped.get_ylabel() == distinct.get_ylabel() == plots.METRIC_LABELS["relative_variance_corrected"]
    assert grouped.yaxis.get_tick_params()["labelleft"]
    ticks = [t.get_text() for t in distinct.get_xticklabels() + grouped.get_xticklabels()]
    assert "PPO + critic\nA = GAE(V),\nγ = λ = 1,\nwhitened" in ticks
    assert "GRPO\nA = (R - group mean)\n/ group std" in ticks
    assert not any(line.startswith(("=", "λ")) or line.endswith("=") for t in ticks for line in t.split("\n"))
    fig = plots.plot_comparison_memory(fake_comparison())
    ax = fig.axes[0]
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "activations", "critic: weights, gradients, Adam state",
        "policy and frozen reference: weights, gradients, Adam state", "measured peak"]  # fmt: skip
    stacks = {c.get_label(): [p.get_height() for p in c] for c in ax.containers}
    assert stacks["critic: weights, gradients, Adam state"] == pytest.approx([0.0, 0.4, 0.4, 0.0])
    assert stacks["activations"] == pytest.approx([15.0] * 4)
    P = 1e6  # without a critic anywhere, no critic stack (and no legend entry for it)
    fig = plots.plot_memory([{"algorithm": "GRPO", "policy_params": P, "reference_params": P, "activations": P}])
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "activations", "policy and frozen reference: weights, gradients, Adam state"]  # fmt: skip
