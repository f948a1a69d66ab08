"""The long-run regime: GRPO for many steps, symmetric clip vs clip-higher (DAPO): does the entropy collapse?"""

from __future__ import annotations

import numpy as np

from ...algorithms import make_algorithm
from ...train import train
from ...warmstart.presets import resolve_preset
from .common import above, bar, claim, rule, spread, task_of, verdict


def sweep(reference, preset, settings, seeds, steps, record, label, progress, probe=None) -> dict:
    """GRPO for ``steps`` steps per seed and per setting (name -> GRPO's knobs), in seed order:
    ``curves[name][seed index] = record(history, callback)``, the callback a fresh ``probe(reference)``
    per run (None: no callback). The long-run regimes' one loop."""
    preset = resolve_preset(preset)
    task = task_of(preset)
    curves = {k: [] for k in settings}
    progress_bar = bar(len(settings) * len(seeds), label, progress)
    for seed in seeds:
        for name, cfg in settings.items():
            callback = None if probe is None else probe(reference)
            algo = make_algorithm("grpo", **cfg)
            h = train(algo, task, reference, preset=preset, steps=steps, seed=seed, progress=False, name=name,
                      callback=callback)  # fmt: skip
            curves[name].append(record(h, callback))
            progress_bar.update(1)
    progress_bar.close()
    return curves


def run_long_run(reference, preset="cpu", seeds=(0, 1), steps=200, eps_high=0.28, progress=True) -> dict:
    """GRPO for ``steps`` steps with the symmetric clip (eps_high = eps_low = 0.2) and with
    clip-higher (``eps_high``, DAPO), per seed: the token entropy of the policy on its sampled
    answers (the loss's logged ``entropy``), the mean reward of that batch and the share of tokens
    held at the upper clip (``clip_high``: rho > 1 + eps_high with A > 0), every step, and the
    held-out accuracy every ``preset.eval_every`` steps (``curves[name][seed index]``).

    DAPO's argument: with a symmetric clip a token of probability 0.01 may only rise to 0.012
    in one update (rho <= 1 + eps), while a likely token is free to become certain, so the
    exploring tokens are held back and the entropy collapses; a larger eps_high lets them rise."""
    settings = {"clip 0.2": {}, f"clip-higher {eps_high}": {"eps_high": eps_high}}

    def record(h, _):
        return {
            "entropy": [round(float(x), 5) for x in h.series("entropy")],
            "reward": [round(float(x), 5) for x in h.series("reward")],
            "clip_high": [round(float(x), 6) for x in h.series("clip_high")],
            "eval_step": [e["step"] for e in h.evals],
            "accuracy": [e["accuracy"] for e in h.evals],
        }

    curves = sweep(reference, preset, settings, seeds, steps, record, "long run", progress)
    w = max(1, steps // 10)
    base, high = settings

    def mean(c, part):
        return float(np.mean(c["entropy"][:w] if part == "first" else c["entropy"][-w:]))

    first, last = [mean(c, "first") for c in curves[base]], [mean(c, "last") for c in curves[base]]
    last_high = [mean(c, "last") for c in curves[high]]
    final, final_high = [c["accuracy"][-1] for c in curves[base]], [c["accuracy"][-1] for c in curves[high]]
    n = len(seeds)
    claims = [
        claim(
            "over a long run the entropy of the policy collapses (the problem clip-higher addresses)",
            f"mean token entropy, first vs last {w} of {steps} steps, {base}: "
            + ", ".join(f"{a:.3f} -> {b:.3f}" for a, b in zip(first, last, strict=True))
            + f" ({rule(0.5, 0.2, '1 - last / first', n)})",
            verdict([1 - b / a for a, b in zip(first, last, strict=True)], 0.5, 0.2),
        ),
        claim(
            "clip-higher keeps the entropy higher than the symmetric clip (DAPO)",
            f"mean token entropy over the last {w} steps: {high} {spread(last_high, '.3f')} vs {base} "
            f"{spread(last, '.3f')} ({rule(0.0, 0.0, 'the difference', n)})",
            above(last_high, last, pair=True),
        ),
        claim(
            "clip-higher costs no accuracy",
            f"held-out accuracy after {steps} steps: {high} {spread(final_high)} vs {base} {spread(final)} "
            f"({rule(-0.01, -0.02, 'clip-higher minus symmetric', n)})",
            above(final_high, final, -0.01, -0.02, pair=True),
        ),
    ]
    return {"steps": steps, "window": w, "curves": curves, "claims": claims}


def figure(res):
    """The regime's figure: the policy's token entropy over the steps, one line per seed and clip."""
    from ...figures.plotstyle import PALETTE, set_alt
    from .figures import new_figure

    fig, ax = new_figure()
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
