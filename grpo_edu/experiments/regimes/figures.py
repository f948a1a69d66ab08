"""One figure per regime, in the course's style (grpo_edu.figures.plotstyle): the numbers come from the runners.

`regime_figure(name, res)` builds the Figure (title, labels, accuracy in percent, runs listed
top to bottom in the order the verb prints them, alt text); `plot_regime` saves it as a PNG.
A regime module may define its own ``figure(res)``; it is used when this file has none.
"""

from __future__ import annotations

import importlib

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from ...figures.plotstyle import PALETTE, STYLE, save, set_alt

PERCENT = PercentFormatter(xmax=1.0, decimals=0)


def _new(size=(7.5, 4.2)):
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.subplots()


def _offset(res):
    fig, ax = _new((7.5, 4.8))
    names = list(res["accuracy"])
    for i, k in enumerate(names):
        ax.scatter(res["accuracy"][k], [i] * len(res["accuracy"][k]), color=PALETTE[0], zorder=3)
    ax.axvline(res["start"], color="grey", ls="--", label="the reference")
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()  # the first run on top, as the verb prints them
    ax.xaxis.set_major_formatter(PERCENT)
    ax.set_xlabel(f"held-out accuracy after {res['steps']} steps (one dot per seed)")
    ax.set_title("an offset in the reward: who survives it")
    ax.legend(loc="upper left")
    return set_alt(fig, "Held-out accuracy of each algorithm and reward scale after the same number of steps, "
                   "one dot per seed, with the reference's accuracy as a dashed line.")  # fmt: skip


def _reward_model(res):
    fig, ax = _new()
    for i, (k, runs) in enumerate(res["curves"].items()):
        for j, c in enumerate(runs):
            ax.plot(c["kl"], c["gold"], "o-", color=PALETTE[i % len(PALETTE)], alpha=0.8, label=k if j == 0 else None)
    ax.yaxis.set_major_formatter(PERCENT)
    ax.set_xlabel("KL(pi || pi_ref) per completion (nats)")
    ax.set_ylabel("gold (exact) held-out accuracy")
    ax.set_title("RL against a learned reward: gold accuracy as the policy drifts")
    ax.legend()
    return set_alt(fig, "Gold accuracy against the KL to the reference, one line per beta and seed, "
                   "measured every 10 steps.")  # fmt: skip


def _difficulty(res):
    fig, ax = _new()
    cls = res["setups"]["mixed, own reference"]["by_class"]
    keys = sorted(cls)
    for j, what in enumerate(("all right", "all wrong")):
        share = [cls[k][what] / cls[k]["groups"] for k in keys]
        ax.bar(np.arange(len(keys)) + 0.4 * j, share, 0.4, label=what, color=PALETTE[j])
    ax.set_xticks(np.arange(len(keys)) + 0.2, keys)
    ax.yaxis.set_major_formatter(PERCENT)
    ax.set_ylabel("groups of 8 whose rewards tie")
    ax.set_title("mixed operand lengths, at the reference trained on them")
    ax.legend()
    return set_alt(fig, "Share of groups whose eight rewards are all right or all wrong, by operand lengths.")


def _long_run(res):
    fig, ax = _new()
    for i, (k, runs) in enumerate(res["curves"].items()):
        for j, c in enumerate(runs):
            steps = range(1, len(c["entropy"]) + 1)
            ax.plot(steps, c["entropy"], color=PALETTE[i], alpha=0.8, label=k if j == 0 else None)
    ax.set_xlabel("RL step")
    ax.set_ylabel("mean token entropy of the policy (nats)")
    ax.set_title("GRPO over a long run: symmetric clip vs clip-higher (one line per seed)")
    ax.legend()
    return set_alt(fig, "Token entropy of the policy over the RL steps, one line per seed, "
                   "for the symmetric clip and for clip-higher.")  # fmt: skip


def _free_length(res):
    fig, ax = _new()
    for i, (m, by) in enumerate(res["by_length"].items()):
        ax.plot(list(by), list(by.values()), "o-", label=m, color=PALETTE[i])
    ax.set_xlabel("completion length |o| (tokens, <eos> included)")
    ax.set_ylabel("weight per token, relative to token_mean's")
    ax.set_title("the weight each aggregation gives each token of a completion")
    ax.legend()
    return set_alt(fig, "Weight per token against completion length for the three loss aggregations.")


FIGURES = {
    "offset": _offset,
    "reward_model": _reward_model,
    "difficulty": _difficulty,
    "long_run": _long_run,
    "free_length": _free_length,
}


def regime_figure(name: str, res: dict) -> Figure:
    """The figure of regime ``name`` from its result ``res`` (the dict its runner returned)."""
    with mpl.rc_context(STYLE):
        module = importlib.import_module(f"{__package__}.{name}")
        draw = getattr(module, "figure", None) or FIGURES.get(name)
        if draw is None:
            raise ValueError(f"regime {name!r} has no figure")
        fig = draw(res)
        fig.canvas.draw()  # lay out in the style's context
        return fig


def plot_regime(name: str, res: dict, path) -> str:
    """Save the figure of regime ``name`` to ``path`` (a PNG with its alt text); returns the path."""
    save(regime_figure(name, res), path)
    return str(path)
