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
from grpo_edu import plots  # noqa: E402
from grpo_edu.maze_pg import TabularPolicy, train_maze  # noqa: E402
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
    out = plots.plot_learning_curves(seeds, x="seconds", ax=ax, target=None, band="std")
    assert out is fig
    labels = ax.get_legend_handles_labels()[1]
    assert any(lab.startswith("ppo (mean ± std of 3)") for lab in labels)
    assert len(ax.collections) == 1  # one band, for the run with several seeds
    with pytest.raises(ValueError, match="x"):
        plots.plot_learning_curves(seeds, x="epochs")


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
    (ax,) = labelled(plots.plot_memory(nested))
    assert ax.lines[0].get_ydata()[0] == pytest.approx(6.0)
    (ax,) = labelled(plots.plot_memory(rows))
    assert "MB" in ax.get_ylabel()
    tops = [p.get_y() + p.get_height() for p in ax.patches]
    assert max(tops) == pytest.approx(46.0)  # PPO: 46e6 bytes stacked = 46 MB
    marker = next(line for line in ax.lines if line.get_label() == "measured peak")
    np.testing.assert_allclose(marker.get_ydata(), [25.0, 40.0])
    sweep = [{"params": p, "batch_size": b, "ratio_measured": 1.2, "ratio_analytic": 1.3}
             for p in (1e5, 1e6, 1e7) for b in (64, 512)]  # fmt: skip
    (ax,) = labelled(plots.plot_memory_ratio(sweep))
    assert ax.get_xscale() == "log"


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
    from grpo_edu.plots import _smooth

    y = np.array([1.0, 2.0, 3.0])
    assert _smooth(y, 10).shape == (3,)
    np.testing.assert_allclose(_smooth(y, 1), y)
