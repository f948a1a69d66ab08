"""The figure of the critic's value per token: EV_t against the completion position, one panel per
world, with the prompt-level ceiling EV_max beside it (the numbers come from `measure.credit`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .plotstyle import PALETTE, set_alt, styled


@styled
def plot_ev_by_position(
    results: Mapping[str, Mapping], ev_max: Mapping[str, float], steps: int | None = None
) -> Figure:
    """EV_t = 1 - Var(R - V(s_t)) / Var(R) at each completion position, one panel per world.

    ``results``: world -> `measure.credit.critic_by_position` (``"ev"``, and ``"oracle_ev"`` where
    the task has one target token per position: drawn dashed, what the prefix reveals);
    ``ev_max``: world -> Var_q(p) / Var(R), the ceiling of V(s_0) and of every baseline that sees
    only the prompt (dotted); ``steps``: the critic's fit steps, for the legend."""
    worlds = list(results)
    if not worlds:
        raise ValueError("plot_ev_by_position needs at least one world")
    fig = Figure(figsize=(3.2 * len(worlds) + 0.6, 3.9), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(worlds), sharey=True))
    for i, (ax, w) in enumerate(zip(axes, worlds, strict=True)):
        r, c = results[w], PALETTE[i % len(PALETTE)]
        ev = np.asarray(r["ev"], dtype=float)
        t = np.arange(ev.size)
        ax.plot(t, ev, "o-", ms=4, color=c)
        if "oracle_ev" in r:
            ax.plot(t, np.asarray(r["oracle_ev"], dtype=float), "s--", ms=3, color=c, alpha=0.6)
        if w in ev_max:
            ax.axhline(ev_max[w], color=c, ls=":", lw=1.5)
        ax.axhline(0.0, color="grey", lw=0.6)
        ax.set_title(f"{w} world")
        ax.set_xlabel("completion position t")
        ax.set_xticks(t)
    axes[0].set_ylabel("EV_t = 1 - Var(R - V(s_t)) / Var(R)")
    learned = "learned critic V(s_t)" + (f", {steps} fit steps" if steps else "")
    handles = [
        Line2D([], [], color="dimgrey", marker="o", ms=4, label=learned),
        Line2D(
            [],
            [],
            color="dimgrey",
            marker="s",
            ms=3,
            ls="--",
            alpha=0.6,
            label="exact P(R=1 | s_t): what the prefix reveals",
        ),  # fmt: skip
        Line2D([], [], color="dimgrey", ls=":", lw=1.5, label="EV_max: the prompt's ceiling (bounds t = 0)"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=8)
    set_alt(
        fig,
        "One panel per world: the explained variance of the reward by the critic's value at each completion "
        "position, with a dotted horizontal line at the prompt-level ceiling EV_max and, where the task has one "
        "target token per position, a dashed line for the exact probability of success given the prefix.",
    )
    return fig
