"""What every regime shares: the claim's form, the task of a preset with knobs, a progress bar.

A claim is ``{"claim", "measurement", "verdict"}`` (the form `measure.format_claims` prints); its
verdict comes from `grpo_edu.measure.verdicts` (one two-sided rule for compare and the regimes),
and its measurement text ends with the rule it was tested by (`verdicts.rule`).
"""

from __future__ import annotations

from ...measure.common import rngs, spread
from ...measure.verdicts import above, paired, rule, unpaired, verdict
from ...warmstart.presets import resolve_preset

__all__ = ["claim", "task_of", "bar", "rngs", "spread", "verdict", "above", "paired", "unpaired", "rule"]


def claim(text: str, measurement: str, verdict: str) -> dict:
    """One claim of a regime, in the form `measure.format_claims` prints."""
    return {"claim": text, "measurement": measurement, "verdict": verdict}


def bar(total: int, desc: str, progress: bool):
    """A tqdm progress bar over a regime's runs (off when ``progress`` is False)."""
    from ...progress import progress_bar as tqdm

    return tqdm(total=total, desc=desc, disable=not progress, leave=False)


def task_of(preset, **knobs):
    """The preset's `ArithmeticTask`, with ``knobs`` (reward_values, filler, ...) on top."""
    from envs import ArithmeticTask

    return ArithmeticTask(**{**resolve_preset(preset).task, **knobs})
