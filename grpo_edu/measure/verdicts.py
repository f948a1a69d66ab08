"""Two-sided verdicts: the one rule `grpo-edu compare` and `grpo-edu regimes` print.

A claim predicts an effect with a sign (this run is higher, that variance lower, ...). Its
measurement gives one effect per seed, e_s, with the sign the claim predicts, and the claim
states a margin m (how large the effect must be to count) and a null level n <= m (at or
below it the effect is absent or reversed):

    [holds]       e_s > m   on every seed
    [fails here]  e_s <= n  on every seed
    [   depends]  anything else: the seeds disagree, or the effect sits between n and m

With n < m there is a band where an effect is seen but too small to count: a claim that lands
there is neither confirmed nor refuted, and says so. Two runs per seed (paired: the same seed
trains both) give e_s = a_s - b_s; two sets of runs that are not paired give every pair's
difference, so holds means min(a) - max(b) > m and fails here max(a) - min(b) <= n.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

VERDICTS = ("holds", "fails here", "depends")


def verdict(effects: Sequence[float], margin: float = 0.0, null: float = 0.0) -> str:
    """``holds`` if every effect > ``margin``, ``fails here`` if every effect <= ``null``, else
    ``depends``. ``effects`` has one value per seed (or per pair), signed as the claim predicts."""
    vals = [float(e) for e in effects if e is not None]
    if null > margin:
        raise ValueError(f"verdict: null ({null}) must not exceed margin ({margin})")
    if not vals or any(math.isnan(v) for v in vals):
        return "depends"  # nothing measured (or NaN): no verdict either way
    if min(vals) > margin:
        return "holds"
    return "fails here" if max(vals) <= null else "depends"


def paired(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """Per seed a_s - b_s (the same seed trained both)."""
    return [x - y for x, y in zip(a, b, strict=True)]


def unpaired(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """Every difference a_i - b_j: its min is min(a) - max(b), its max max(a) - min(b)."""
    return [x - y for x in a for y in b]


def above(a, b, margin: float = 0.0, null: float = 0.0, pair: bool = False) -> str:
    """The claim "a is above b by more than ``margin``": `verdict` of a - b (per seed if ``pair``)."""
    return verdict(paired(a, b) if pair else unpaired(a, b), margin, null)


def on_seeds(seeds: int | None = None) -> str:
    """Over what a rule is tested, in words: "every seed" (``seeds`` None: the count is not
    given), "each of n seeds", or "its one measurement" (``seeds`` 1: a single value, e.g. one
    reward model or one batch, where "every seed" would claim more than was measured)."""
    if seeds is None:
        return "every seed"
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"seeds must be a positive integer or None, got {seeds!r}")
    return f"each of {seeds} seeds" if seeds > 1 else "its one measurement"


def rule(margin: float, null: float = 0.0, what: str = "the effect", seeds: int | None = None) -> str:
    """The rule in words, for a claim's measurement text: what holds and what fails here test
    (over `on_seeds`: pass ``seeds=1`` for a claim with one measurement)."""
    on = on_seeds(seeds)
    if margin == null:
        return f"holds: {what} > {margin:g} on {on}; fails here: <= {null:g} on {on}"
    return f"holds: {what} > {margin:g} on {on}; fails here: <= {null:g} on {on}; between: depends"
