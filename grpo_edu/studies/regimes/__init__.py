"""Where each idea of the derivation pays (grpo-edu regimes): the regimes the default task removes.

The default task (0/1 rewards, uniform 2-digit addition, an exact checker) makes several of
the derivation's claims fail (`grpo-edu compare`). Each regime turns one mechanism back on
with a task or reward knob, trains through the public API, and tests the claims again; one
module each, its runner and its figure:

    offset        rewards (c, c+1) and (-1, +1): a baseline, a critic's warm-up, whitening, GRPO's group norm
    reward_model  RL against a learned r_phi (grpo_edu.demos.reward_model): over-optimisation, what beta buys
    difficulty    easy and hard prompts (world="spread" vs the default): EV_max, tied groups, pass@k
    long_run      GRPO for many steps with and without clip-higher: does the entropy collapse (DAPO)?
    long_run_entropy  the same long run with Clip-Cov and KL-Cov: does -Cov(log pi, A) predict each step's entropy change?
    free_length   filler tokens after the answer: the length is the policy's; Dr. GRPO's length bias
    thinking      a scratchpad that can make the answer right: R1-Zero's length curve, by difficulty
    spurious_rewards  a reward that ignores correctness (random, incorrect label): does it raise accuracy, via the clip?
    negative_samples  only the wrong answers (NSR), only the right ones (PSR), W-REINFORCE, as Zhu et al. and group-centred
    razor         subtraction taught by SFT and by GRPO to one accuracy: addition's drop against the KL (RL's Razor)
    policy_lag    a sampler up to 256 updates behind: PipelineRL's, AReaL's, M2PO's, IcePop's and TIS's claims

Beside them, what they share: common.py (the claim's form, a preset's task with knobs, a progress
bar) and figures.py (the pieces their figures have in common).

Every runner returns a dict with "claims" (``{"claim", "measurement", "verdict"}``, the form
`measure.format_claims` prints; verdicts by the one two-sided rule of `grpo_edu.measure.verdicts`)
and the numbers behind them; each module's ``figure(res)`` draws it (`plot_regime`). `TABLE` names
each regime's functions: no name is looked up at run time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from ...measure.reports import wrap
from ...warmstart.presets import resolve_preset
from . import (
    difficulty,
    free_length,
    long_run,
    long_run_entropy,
    negative_samples,
    offset,
    policy_lag,
    razor,
    reward_model,
    spurious_rewards,
    thinking,
)
from .difficulty import run_difficulty, run_mixed_digits
from .free_length import free_length_setup, length_push, long_over_short, run_free_length, token_weight
from .long_run import run_long_run
from .long_run_entropy import run_long_run_entropy
from .offset import affine_gap, run_offset, with_critic_warmup
from .reward_model import KLMonitor, gao_claims, run_overoptimisation, run_reward_model
from .thinking import run_thinking


@dataclass(frozen=True)
class Regime:
    """One row of the table: the functions that run and draw a regime, and what it is."""

    run: Callable
    """``run(reference, preset, seeds=..., progress=...) -> dict`` with "claims" and the numbers behind them."""
    figure: Callable
    """``figure(result) -> matplotlib Figure``: the regime's own figure, from what ``run`` returned."""
    description: str
    """What the regime sets up (the line the verb prints above its claims)."""
    notebook: str
    """The notebook (and section) that explains a claim that does not hold."""


# name -> its Regime: the functions themselves, no names to look up. A new regime is a module with a
# runner and a ``figure(res)``, imported above, and one row here.
TABLE = {
    "offset": Regime(
        offset.run_offset, offset.figure, "rewards (0, 1), (5, 6), (-1, 1), same reference, same steps",
        "07 section 1",
    ),
    "reward_model": Regime(
        reward_model.run_reward_model, reward_model.figure,
        "GRPO against sigmoid(r_phi), a small learned reward model; gold = the exact checker", "07 section 2",
    ),
    "difficulty": Regime(
        difficulty.run_difficulty, difficulty.figure,
        "world='spread' (a reference taught only operands < 60: easy and hard prompts) vs the default world",
        "08",
    ),
    "long_run": Regime(
        long_run.run_long_run, long_run.figure,
        "GRPO for 200 steps, symmetric clip (0.2) vs clip-higher (eps_high 0.28), the policy's entropy", "10 section 1",
    ),
    "long_run_entropy": Regime(
        long_run_entropy.run_long_run_entropy, long_run_entropy.figure,
        "GRPO for 200 steps: clip 0.2, clip-higher 0.28, Clip-Cov, KL-Cov (fractions 0.02); -Cov(log pi, A) "
        "against each step's entropy change", "10 part 2",
    ),
    "free_length": Regime(
        free_length.run_free_length, free_length.figure,
        "ArithmeticTask(filler=4): up to 4 '=' after the answer, only the answer checked; own reference",
        "07 section 4",
    ),
    "thinking": Regime(
        thinking.run_thinking, thinking.figure,
        "envs.ScratchpadTask: a scratchpad before the answer can make it right; R1-Zero's length curve", "09",
    ),
    "spurious_rewards": Regime(
        spurious_rewards.run_spurious, spurious_rewards.figure,
        "GRPO (beta 0) on the true, a random and an incorrect-label reward; one update per batch, several, no clip; "
        "both worlds",
        "12 section 1",
    ),
    "negative_samples": Regime(
        negative_samples.run_negative_samples, negative_samples.figure,
        "world='spread', beta 0: GRPO; NSR, PSR, W-REINFORCE (0.1) as Zhu et al. (A = +-1, no baseline) and group-centred",
        "12 section 2",
    ),
    "razor": Regime(
        razor.run_razor, razor.figure,
        "subtraction taught by SFT and by GRPO (beta 0) to one accuracy, several lrs: addition's drop vs the KL",
        "12 part 2",
    ),
    "policy_lag": Regime(
        policy_lag.run_policy_lag, policy_lag.figure,
        "GRPO with its sampler k optimizer updates behind (k = 0 to 256), each off_policy_correction, 100 steps",
        "13",
    ),
}  # fmt: skip
REGIMES = tuple(TABLE)
DESCRIPTIONS = {k: v.description for k, v in TABLE.items()}
NOTEBOOKS = {k: v.notebook for k, v in TABLE.items()}


def _row(name: str) -> Regime:
    if name not in TABLE:
        raise ValueError(f"unknown regime {name!r}; choose from {list(REGIMES)}")
    return TABLE[name]


def runner(name: str):
    """The function that runs regime ``name`` (its row's ``run``)."""
    return _row(name).run


def check_names(only) -> tuple:
    """``only`` as a tuple of known regime names, or a ValueError naming the unknown ones."""
    only = tuple(only)
    unknown = [r for r in only if r not in TABLE]
    if unknown:
        raise ValueError(f"unknown regimes {unknown}; choose from {list(REGIMES)}")
    if not only:
        raise ValueError(f"no regime given; choose from {list(REGIMES)}")
    return only


def run_regimes(preset="cpu", only=REGIMES, seeds=2, out=None, progress=True, reference=None) -> dict:
    """Each regime of ``only`` over ``seeds`` seeds (the preset's seed, +1, ...): its claims,
    its wall time (``"seconds"``), and a figure ``<out>/regime_<name>.png`` when ``out`` is given
    (its path in ``"figure"``)."""
    from pathlib import Path

    from ...warmstart.reference import reference_policy

    only = check_names(only)
    preset = resolve_preset(preset)
    reference = reference if reference is not None else reference_policy(preset, progress=progress)
    out = Path(out) if out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in only:
        t0 = time.perf_counter()
        results[name] = runner(name)(reference, preset, seeds=tuple(preset.seed + k for k in range(seeds)),
                                     progress=progress)  # fmt: skip
        results[name]["seconds"] = time.perf_counter() - t0
        results[name]["seeds"] = seeds
        if out:
            results[name]["figure"] = plot_regime(name, results[name], out / f"regime_{name}.png")
    return results


LEGEND = (
    "How to read it: a value is one seed, or `mean [min, max]` over seeds; each claim ends with the rule its "
    "verdict applies (holds: the effect beyond its margin on every seed; fails here: absent or reversed on every "
    "seed; depends: anything else). A' is the advantage after the reward is changed, A before."
)


def format_regimes(results: dict, seconds: bool = False) -> str:
    """Per regime, its claims in the form `grpo-edu compare` prints them, the notebook that
    explains a claim that fails, the figure's file; the wall times when ``seconds``."""
    lines = [wrap(LEGEND, "  ")]
    for name, res in results.items():
        n = res.get("seeds")
        count = f", {n} seed{'s' if n != 1 else ''}" if n else ""
        lines.append(f"regime {name} ({DESCRIPTIONS.get(name, name)}{count}):")
        lines += [
            wrap(f"{c['claim']}: {c['measurement']}", " " * 15, f"  [{c['verdict']:>10}] ") for c in res["claims"]
        ]
        if any(c["verdict"] != "holds" for c in res["claims"]) and name in NOTEBOOKS:
            lines.append(f"    why a claim does not hold here: notebook {NOTEBOOKS[name]}")
        for e in res.get("examples", []):
            lines.append(f"    r_phi {e['proxy']:.3f} for {e['prompt']}{e['completion']} (right: {e['answer']})")
        if res.get("figure"):
            lines.append(f"    figure: {res['figure']}")
        if seconds and "seconds" in res:
            lines.append(f"    took {res['seconds']:.0f} s")
    if seconds and results:
        lines.append(f"total: {sum(r.get('seconds', 0.0) for r in results.values()):.0f} s")
    return "\n".join(lines)


def regime_figure(name: str, res: dict):
    """The figure of regime ``name`` from its result ``res`` (the dict its runner returned), drawn by
    the regime's own ``figure`` in the course's style (title, labels, alt text)."""
    import matplotlib as mpl

    from ...figures.plotstyle import STYLE

    with mpl.rc_context(STYLE):
        fig = _row(name).figure(res)
        fig.canvas.draw()  # lay out in the style's context
        return fig


def plot_regime(name: str, res: dict, path) -> str:
    """Save the figure of regime ``name`` to ``path`` (a PNG with its alt text); returns the path."""
    from ...figures.plotstyle import save

    save(regime_figure(name, res), path)
    return str(path)


__all__ = [
    "REGIMES", "DESCRIPTIONS", "NOTEBOOKS", "Regime", "TABLE", "runner", "check_names", "run_regimes",
    "format_regimes", "plot_regime", "regime_figure",
    # each regime's runner and the helpers the notebooks and tests call
    "run_offset", "affine_gap", "with_critic_warmup", "run_reward_model", "run_overoptimisation", "KLMonitor",
    "gao_claims", "run_difficulty", "run_mixed_digits", "run_long_run", "run_long_run_entropy", "run_free_length", "free_length_setup",
    "length_push", "long_over_short", "token_weight", "run_thinking",
]  # fmt: skip
