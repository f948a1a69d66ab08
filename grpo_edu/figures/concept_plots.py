"""Figures of the equations themselves: the clip function, the KL estimators, the maze,
group advantages. Same style as `grpo_edu.figures.plots` (which re-exports all of them); the style
comes from `grpo_edu.figures.plotstyle`."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib as mpl
import numpy as np
import torch
from matplotlib.figure import Figure

from .. import functional as Fn
from .plotstyle import PALETTE, color_for, new_figure, set_alt, styled, to_numpy

# ----------------------------------------------------------------- equations, drawn


def clipped_objective(rho, advantage: float, eps_low: float = 0.2,
                      eps_high: float | None = None) -> np.ndarray:  # fmt: skip
    """``min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A)``, computed as minus
    ``Fn.clipped_surrogate_loss`` (the library's function, not a copy)."""
    rho = torch.as_tensor(np.atleast_1d(to_numpy(rho)), dtype=torch.float64)
    logp = torch.log(rho)[None]
    adv = torch.full_like(logp, float(advantage))
    loss, _ = Fn.clipped_surrogate_loss(logp, torch.zeros_like(logp), adv, eps_low, eps_high)
    return (-loss[0]).numpy()


@styled
def plot_clip_function(eps_low: float = 0.2, eps_high: float | None = None,
                       rho_max: float = 2.0) -> Figure:  # fmt: skip
    """PPO's clipped objective against the ratio rho = pi_theta / pi_old, for A = +1 and
    A = -1, with the regions where its gradient is zero shaded (those tokens stop learning)."""
    eps_high_ = eps_low if eps_high is None else eps_high
    fig, axes = new_figure(2, 1, size=(10.0, 4.0))
    rho = torch.linspace(0.02, rho_max, 500, dtype=torch.float64)
    for ax, A in zip(axes, (1.0, -1.0), strict=True):
        logp = torch.log(rho)[None].requires_grad_(True)
        loss, _ = Fn.clipped_surrogate_loss(logp, torch.zeros_like(logp), torch.full_like(logp, A),
                                            eps_low, eps_high)  # fmt: skip
        (-loss).sum().backward()
        obj, grad = (-loss[0]).detach().numpy(), logp.grad[0].numpy()
        r = rho.numpy()
        ax.plot(r, r * A, ":", color="gray", label=r"unclipped $\rho A$")
        ax.plot(
            r,
            obj,
            color=PALETTE[0],
            lw=2.5,
            label=r"$\min(\rho A,\ \mathrm{clip}(\rho, 1-\epsilon_{low}, 1+\epsilon_{high}) A)$",
        )
        ax.fill_between(
            r,
            0,
            1,
            where=grad == 0,
            transform=ax.get_xaxis_transform(),
            color=PALETTE[5],
            alpha=0.15,
            lw=0,
            label="zero gradient (clipped)",
        )
        for v, text in ((1 - eps_low, "1 − ε_low"), (1 + eps_high_, "1 + ε_high")):
            ax.axvline(v, color="gray", lw=0.8, ls="--")
            ax.text(
                v,
                0.03,
                f"{text} = {v:g} ",
                transform=ax.get_xaxis_transform(),
                rotation=90,
                va="bottom",
                ha="right",
                fontsize=8,
                color="dimgray",
            )
        ax.set(xlabel=r"probability ratio $\rho = \pi_\theta(a|s)\ /\ \pi_{old}(a|s)$",
               ylabel="objective (to maximise)", xlim=(0, rho_max),
               title=f"A = {A:+g}: " + ("good action, pushed up to 1+ε" if A > 0 else
                                        "bad action, pushed down to 1-ε"))  # fmt: skip
    # one legend for both panels, below them: inside a panel it covered the ε guide lines
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=3, fontsize=8)
    fig.suptitle(f"Clipped surrogate, ε_low = {eps_low:g}, ε_high = {eps_high_:g}")
    set_alt(fig, f"Two line charts of PPO's clipped objective against the probability ratio rho, for advantage +1 "
                 f"(flat above 1 + {eps_high_:g}) and -1 (flat below 1 - {eps_low:g}), beside the unclipped rho times A; "
                 "the shaded ranges, where the objective is flat, give no gradient.")  # fmt: skip
    return fig


@styled
def plot_kl_estimators(samples: Mapping, exact_forward: float, exact_reverse: float,
                       bins: int = 60) -> Figure:  # fmt: skip
    """Histograms of per-token KL estimator samples (e.g. {"k1": ..., "k2": ..., "k3": ...}),
    each with its sample mean, against the exact KL(pi||ref) (what k1 and k3 estimate
    without bias) and KL(ref||pi). The x range is the 0.5-99.5% quantiles of all samples."""
    if not samples:
        raise ValueError("samples must hold at least one estimator")
    data = {k: to_numpy(v).ravel() for k, v in samples.items()}
    allv = np.concatenate(list(data.values()))
    lo, hi = np.quantile(allv, [0.005, 0.995])
    lo, hi = min(lo, exact_forward, exact_reverse, 0.0), max(hi, exact_forward, exact_reverse)
    pad = 0.05 * (hi - lo or 1.0)
    fig, axes = new_figure(len(data), 1, size=(3.6 * len(data) + 0.6, 3.6), sharex=True)
    for i, (ax, (name, v)) in enumerate(zip(axes, data.items(), strict=True)):
        ax.hist(v, bins=np.linspace(lo - pad, hi + pad, bins), color=PALETTE[i], alpha=0.7)
        ax.axvline(v.mean(), color=PALETTE[i], lw=2.2, label="sample mean of the estimator")
        ax.axvline(exact_forward, color="black", ls="--", lw=1.3, label=f"exact KL(π‖ref) = {exact_forward:.4f}")
        ax.axvline(exact_reverse, color="gray", ls=":", lw=1.5, label=f"exact KL(ref‖π) = {exact_reverse:.4f}")
        ax.set(xlabel="estimate per token (nats)", ylabel="count (tokens)",
               title=f"{name}: mean {v.mean():.4f}, std {v.std():.4f}")  # fmt: skip
    handles, labels = axes[0].get_legend_handles_labels()
    handles[0] = mpl.lines.Line2D([], [], color="dimgray", lw=2.2)  # each panel's own colour
    fig.legend(handles, labels, loc="outside lower center", ncols=3)
    fig.suptitle(f"Sampled KL estimators vs the exact KL ({len(allv) // len(data)} tokens each)")
    set_alt(fig, f"Histograms of per-token samples of the KL estimators {', '.join(data)}, one panel each, with each "
                 "estimator's sample mean as a solid line, the exact KL(pi || ref) dashed and the exact KL(ref || pi) dotted.")  # fmt: skip
    return fig


# ------------------------------------------------------------------------- the maze


def _maze_histories(history):
    if history is None:
        return []
    if "length" in history:
        return [(history.get("config", {}).get("algorithm", "run"), history)]
    return list(history.items())


@styled
def plot_maze(env, policy=None, history=None) -> Figure:
    """The maze (walls, S, G), the greedy action in every free cell and the greedy path
    from S (bold arrows), for ``policy`` (default: ``history["policy"]``); and, with a
    `grpo_edu.demos.maze_pg.train_maze` history (or a dict name -> history), the mean episode
    length per step against the shortest path. Long because a figure is a list of drawing
    calls, one panel after the other; no step in it is logic worth its own name."""
    from envs.maze import DELTAS

    from ..demos.maze_pg import greedy_path

    runs = _maze_histories(history)
    if policy is None and len(runs) == 1:
        policy = runs[0][1].get("policy")
    H, W = env.height, env.width
    fig, axes = new_figure(2 if runs else 1, 1, size=(10.5 if runs else 4.6, 4.4))
    ax = axes[0]
    grid = np.zeros((H, W))
    for s in env.walls:
        grid[env.position(s)] = 1
    ax.imshow(grid, cmap=mpl.colors.ListedColormap(["#f4f4f4", "#404040"]), vmin=0, vmax=1)
    for s, text, c in ((env.start, "S", PALETTE[2]), (env.goal, "G", PALETTE[1])):
        r, col = env.position(s)
        ax.add_patch(mpl.patches.Rectangle((col - 0.5, r - 0.5), 1, 1, color=c, alpha=0.5))
        ax.text(col - 0.42, r - 0.42, text, ha="left", va="top", fontsize=13, weight="bold")
    title = "Maze: start S, goal G"
    if policy is not None:
        path = greedy_path(env, policy)
        free = [s for s in range(env.n_states) if s not in env.walls and s != env.goal
                and s not in path]  # fmt: skip
        d = np.array([DELTAS[policy.greedy(s)] for s in free], float)  # (d_row, d_col)
        rc = np.array([env.position(s) for s in free], float)
        ax.quiver(
            rc[:, 1],
            rc[:, 0],
            d[:, 1],
            d[:, 0],
            angles="xy",
            scale_units="xy",
            scale=1 / 0.35,
            pivot="middle",
            color="gray",
            alpha=0.6,
            width=0.008,
        )
        for a, b in zip(path[:-1], path[1:], strict=True):
            (r0, c0), (r1, c1) = env.position(a), env.position(b)
            ax.annotate(
                "",
                (c1, r1),
                (c0, r0),
                arrowprops=dict(arrowstyle="-|>", color=PALETTE[5], lw=2.5, shrinkA=6, shrinkB=6),
            )
        reached = path[-1] == env.goal
        title = (
            f"Greedy path: {len(path) - 1} steps (shortest {env.shortest_path_length()})"
            if reached
            else "Greedy path never reaches G (stuck at ×)"
        )
        if not reached:
            r, c = env.position(path[-1])
            ax.plot(c, r, "x", color=PALETTE[5], ms=14, mew=3)
    ax.set(xticks=range(W), yticks=range(H), xlabel="column", ylabel="row", title=title)
    ax.grid(False)
    if runs:
        ax = axes[1]
        shortest = env.shortest_path_length()
        ax.axhline(shortest, color="black", ls=":", lw=1.2, label=f"shortest path ({shortest})")
        for i, (name, h) in enumerate(runs):
            c = color_for(name, i)
            ax.plot(h["step"], h["length"], color=c, label=f"{name}: mean episode length")
            ax.plot(
                h["step"],
                h["greedy_length"],
                "--",
                color=c,
                lw=1.5,
                label=f"{name}: greedy path length (gap: never reaches G)",
            )
        n = runs[0][1].get("config", {}).get("episodes_per_step")
        ax.set(
            xlabel="training step" + (f" ({n} episodes each)" if n else ""),
            ylim=(0, None),
            ylabel="episode length (steps)",
            title="Learning the maze: shorter is better",
        )
        ax.legend(loc="upper right", fontsize=8)
    set_alt(fig, f"Grid of the {H} x {W} maze with walls in dark gray, start S and goal G"
                 + (", the greedy action of the policy as a gray arrow in every free cell and its greedy path from S "
                    "as bold arrows" if policy is not None else "")
                 + (f"; beside it, line charts of the mean episode length and the greedy path length per training "
                    f"step for {', '.join(str(n) for n, _ in runs)}, against the shortest path" if runs else "") + ".")  # fmt: skip
    return fig


@styled
def plot_group_advantages(rewards, group_size: int, advantages) -> Figure:
    """GRPO's group-relative advantage, group by group: the rewards r_i of each group's
    samples (top) and their advantages A_i (bottom). A group whose rewards are all equal
    (shaded) carries no signal: its advantages are all 0."""
    r, a = to_numpy(rewards).ravel(), to_numpy(advantages).ravel()
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}")
    if len(r) != len(a) or len(r) % group_size:
        raise ValueError(f"rewards and advantages must have the same length, a multiple of "
                         f"group_size={group_size}; got {len(r)} and {len(a)}")  # fmt: skip
    n = len(r) // group_size
    x = np.repeat(np.arange(n), group_size) + np.tile(np.linspace(-0.25, 0.25, group_size), n)
    fig, (top, bot) = new_figure(1, 2, size=(max(6.0, 0.55 * n + 2.5), 5.0), sharex=True)
    equal = np.ptp(r.reshape(n, group_size), axis=1) == 0
    for ax in (top, bot):
        for g in np.flatnonzero(equal):
            ax.axvspan(
                g - 0.45,
                g + 0.45,
                color="gray",
                alpha=0.15,
                lw=0,
                label="all rewards equal: A = 0" if g == np.flatnonzero(equal)[0] else None,
            )
    top.scatter(x, r, color=PALETTE[0], s=25, zorder=3, label="reward $r_i$ of a sample")
    means = r.reshape(n, group_size).mean(1)
    top.hlines(means, np.arange(n) - 0.35, np.arange(n) + 0.35, color="black", lw=1.5, label="group mean")
    bot.axhline(0, color="black", lw=0.8)
    for sel, c, lab in (
        (a > 0, PALETTE[2], "A > 0: made more likely"),
        (a < 0, PALETTE[5], "A < 0: made less likely"),
        (a == 0, "gray", "A = 0"),
    ):
        bot.scatter(x[sel], a[sel], color=c, s=25, zorder=3, label=lab)
    top.set(ylabel="reward $r_i$", title=f"Rewards and group advantages ({n} groups of {group_size})")
    bot.set(ylabel="advantage $A_i$ (std units)", xlabel="group (prompt)")
    top.set_xlabel("group (prompt)")
    top.tick_params(labelbottom=True)
    bot.set_xticks(np.arange(n))
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    pairs = [(h, t) for h, t in zip(*bot.get_legend_handles_labels(), strict=True)
             if not t.startswith("all rewards")]  # fmt: skip
    bot.legend(*zip(*pairs, strict=True), loc="upper left", bbox_to_anchor=(1.01, 1.0))
    set_alt(fig, f"Two dot charts over {n} groups of {group_size} samples: top, each sample's reward with its group's "
                 "mean as a black line; bottom, each sample's advantage, green above zero, red below, gray at zero; "
                 "groups whose rewards are all equal are shaded and have all advantages zero.")  # fmt: skip
    return fig
