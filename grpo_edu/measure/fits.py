"""Three curves from the RL literature, fitted by least squares: the first two are linear in their two
parameters, the third (ScaleRL's) is a sigmoid in log compute.

Cui et al. 2025 (the entropy mechanism of RL for reasoning models): over a run, the reward R
and the policy's entropy H trade as

    R = -a exp(H) + b                    (a, b: least squares on the columns [-exp(H), 1])

so the reward a run can reach once its entropy is spent (H -> 0) is b - a. Fit on the early
steps, `CuiFit.predict` the reward from the later steps' entropy, `CuiFit.error` the mean
absolute error of that prediction.

Gao, Schulman and Hilton 2022 (scaling laws for reward-model over-optimisation), best-of-n and
RL: with d = sqrt(KL(pi || pi_ref)) the gold reward moves as

    gold - gold_0 = d (alpha - beta log d)   (alpha, beta: least squares on [d, -d log d])

with d log d = 0 at d = 0. For beta > 0 it rises, peaks at d* = exp(alpha / beta - 1) with
gold - gold_0 = beta d* there, then falls; for beta <= 0 the fitted curve has no interior peak
(`GaoFit.peak` says so instead of returning a number).

Khatri et al. 2025 (ScaleRL, the art of scaling RL compute for LLMs): the reward against the compute C
spent follows

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

with A the ceiling (C -> infinity), R0 the start, B the steepness and C_mid the compute at which half of
the gain A - R0 is reached. Fitted on the early part of a run it predicts the rest; most design choices
moved B and C_mid, few moved A. `fit_compute_law` is least squares over (R0, A, B, C_mid), or over
(A, B, C_mid) with R0 given; ``a_bounds`` keeps A in a range (for a pass rate, [R0, 1], as ScaleRL's fits do:
a ceiling above 1 is no pass rate, and a free A runs off to it when a run ends before its curve bends over).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["ComputeLawFit", "CuiFit", "GaoFit", "compute_law", "cui_fit", "fit_compute_law", "gao_fit"]

KL_TOLERANCE = 1e-6  # an exact KL this far below 0 is float rounding of 0; below that the input is wrong


def _vectors(x, y, names: tuple[str, str], at_least: int) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=float).reshape(-1), np.asarray(y, dtype=float).reshape(-1)
    if len(x) != len(y):
        raise ValueError(f"{names[0]} and {names[1]} must have the same length, got {len(x)} and {len(y)}")
    if len(x) < at_least:
        raise ValueError(f"a fit of two parameters needs at least {at_least} points, got {len(x)}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError(f"{names[0]} and {names[1]} must be finite numbers")
    return x, y


def _least_squares(columns: np.ndarray, y: np.ndarray, what: str) -> np.ndarray:
    coef, _, rank, _ = np.linalg.lstsq(columns, y, rcond=None)
    if rank < columns.shape[1]:
        raise ValueError(f"{what}: the points do not determine both parameters (they sit at one value)")
    return coef


@dataclass(frozen=True)
class CuiFit:
    """R = -a exp(H) + b, fitted on ``n`` points; ``mae`` is its mean absolute error on them."""

    a: float
    b: float
    n: int
    mae: float

    @property
    def ceiling(self) -> float:
        """The predicted reward when the entropy is spent (H = 0): b - a."""
        return self.b - self.a

    def predict(self, entropy) -> np.ndarray:
        """The fitted reward at each entropy."""
        return -self.a * np.exp(np.asarray(entropy, dtype=float)) + self.b

    def error(self, entropy, reward) -> float:
        """Mean absolute error of the prediction on (entropy, reward) points, e.g. the later steps."""
        h, r = _vectors(entropy, reward, ("entropy", "reward"), 1)
        return float(np.mean(np.abs(self.predict(h) - r)))


def cui_fit(entropy, reward) -> CuiFit:
    """Least squares of ``reward`` on ``-exp(entropy)`` and a constant (Cui et al. 2025).

    ``entropy`` and ``reward``: one value per step (or per evaluation) of the part of the run to fit,
    e.g. its first 50 steps. At least 3 points, at two entropies or more."""
    h, r = _vectors(entropy, reward, ("entropy", "reward"), 3)
    a, b = _least_squares(np.stack([-np.exp(h), np.ones_like(h)], axis=1), r, "cui_fit")
    fit = CuiFit(float(a), float(b), len(h), 0.0)
    return CuiFit(fit.a, fit.b, fit.n, fit.error(h, r))


@dataclass(frozen=True)
class GaoFit:
    """gold - start = d (alpha - beta log d), d = sqrt(KL), fitted on ``n`` points (``d_range``: the
    smallest and largest d > 0 among them); ``rmse``: root mean squared error of the gold on them."""

    alpha: float
    beta: float
    start: float
    n: int
    rmse: float
    d_range: tuple[float, float]

    @property
    def has_peak(self) -> bool:
        """Whether the fitted curve rises, then falls (beta > 0)."""
        return self.beta > 0

    def place(self, d: float) -> str:
        """Where ``d`` sits against the measured d: "inside", "below" or "beyond" them."""
        lo, hi = self.d_range
        return "inside" if lo <= d <= hi else "below" if d < lo else "beyond"

    @property
    def d_star(self) -> float | None:
        """The d of the fitted peak, exp(alpha / beta - 1); None when beta <= 0 (no interior peak)."""
        if self.beta <= 0:
            return None
        return math.exp(min(self.alpha / self.beta - 1, 700.0))  # exp(700) ~ 1e304: "no peak in sight"

    @property
    def kl_star(self) -> float | None:
        """The KL of the fitted peak, d*^2 (None without a peak)."""
        return None if self.d_star is None else self.d_star**2

    @property
    def gain_star(self) -> float | None:
        """gold - start at the fitted peak: beta d* (None without a peak)."""
        return None if self.d_star is None else self.beta * self.d_star

    @property
    def peak(self) -> str:
        """Where the fitted curve peaks, in words, and whether the points reach that far."""
        lo, hi = self.d_range
        if self.beta == 0:
            turn = "falls" if self.alpha < 0 else "rises" if self.alpha > 0 else "stays flat"
            return f"no interior peak (beta = 0): the fitted gold {turn} in proportion to d"
        if self.d_star is None:
            low = math.exp(min(self.alpha / self.beta - 1, 700.0))  # the stationary point is a minimum
            if low > 1e3 * hi:
                return (
                    f"no interior peak (beta = {self.beta:.3g} < 0): the fitted gold falls over every measured d "
                    f"(its minimum, at d = {low:.3g}, is far beyond them)"
                )
            return (
                f"no interior peak (beta = {self.beta:.3g} < 0): the fitted curve is lowest at d = {low:.3g} "
                f"(gold {self.start + self.beta * low:.3f}, {self.beta * low:+.3f} on the start), {self.place(low)} the measured d "
                f"({lo:.3g} to {hi:.3g}), and rises without bound after it"
            )
        return (
            f"peak at d* = {self.d_star:.3g} (KL {self.kl_star:.3g}), gold {self.start + self.gain_star:.3f} "
            f"({self.gain_star:+.3f} on the start), {self.place(self.d_star)} the measured d ({lo:.3g} to {hi:.3g})"
        )

    def predict(self, kl) -> np.ndarray:
        """The fitted gold at each KL."""
        d = np.sqrt(np.clip(np.asarray(kl, dtype=float), 0.0, None))
        return self.start + d * (self.alpha - self.beta * _log0(d))

    def residuals(self, kl, gold) -> np.ndarray:
        """gold - the fitted gold at each KL: above 0, a point beats the fitted frontier."""
        k, g = _vectors(kl, gold, ("kl", "gold"), 1)
        return g - self.predict(_check_kl(k))


def _log0(d: np.ndarray) -> np.ndarray:
    """log d where d > 0, and 0 where d = 0 (so that d log d -> 0 there)."""
    return np.log(np.where(d > 0, d, 1.0))


def _check_kl(kl: np.ndarray) -> np.ndarray:
    if (kl < -KL_TOLERANCE).any():
        raise ValueError(f"a KL cannot be negative, got {float(kl.min()):.3g} (an exact KL is >= 0)")
    return np.clip(kl, 0.0, None)


def gao_fit(kl, gold, start: float | None = None) -> GaoFit:
    """Least squares of ``gold - start`` on d and -d log d, d = sqrt(``kl``) (Gao et al. 2022).

    ``kl``: KL(pi || pi_ref) of each point (a checkpoint of a run), ``gold``: its gold reward;
    ``start``: the reference's gold, by default the gold of the points at KL 0 (the runs' step 0),
    an error if there is none. At least 2 points with KL > 0 at two different KLs."""
    k, g = _vectors(kl, gold, ("kl", "gold"), 2)
    k = _check_kl(k)
    if start is None:
        if not (k == 0).any():
            raise ValueError("gao_fit: no point at KL 0 to take the start from; pass start= (the reference's gold)")
        start = float(g[k == 0].mean())
    d = np.sqrt(k)
    if (d > 0).sum() < 2:
        raise ValueError(f"gao_fit needs at least 2 points with KL > 0, got {int((d > 0).sum())}")
    alpha, beta = _least_squares(np.stack([d, -d * _log0(d)], axis=1), g - start, "gao_fit")
    if abs(beta) < 1e-12 * max(1.0, abs(alpha)):  # rounding of a curve linear in d: beta is 0, not a far peak
        beta = 0.0
    fit = GaoFit(float(alpha), float(beta), float(start), len(d), 0.0, (float(d[d > 0].min()), float(d.max())))
    rmse = float(np.sqrt(np.mean(fit.residuals(k, g) ** 2)))
    return GaoFit(fit.alpha, fit.beta, fit.start, fit.n, rmse, fit.d_range)


def compute_law(compute, r0: float, a: float, b: float, c_mid: float) -> np.ndarray:
    """R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) at each compute C > 0, as
    s = 1 / (1 + exp(B (log C_mid - log C))), R = R0 + (A - R0) s (no overflow for any C)."""
    s = _sigmoid(b * (math.log(c_mid) - np.log(np.asarray(compute, dtype=float))))
    return r0 + (a - r0) * s


def _sigmoid(u: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(u)), stable for large |u|."""
    return np.exp(-np.logaddexp(0.0, u))


@dataclass(frozen=True)
class ComputeLawFit:
    """R(C) = r0 + (a - r0) / (1 + (c_mid / C)^b), fitted on ``n`` points (``r0_fitted``: whether r0 was a
    parameter or given); ``rmse``: root mean squared error of the reward on them."""

    a: float
    b: float
    c_mid: float
    r0: float
    r0_fitted: bool
    n: int
    rmse: float

    def predict(self, compute) -> np.ndarray:
        """The fitted reward at each compute."""
        return compute_law(_positive(np.asarray(compute, dtype=float).reshape(-1)), self.r0, self.a, self.b, self.c_mid)

    def error(self, compute, reward) -> float:
        """Mean absolute error of the prediction on (compute, reward) points, e.g. the later part of the run."""
        c, r = _vectors(compute, reward, ("compute", "reward"), 1)
        return float(np.mean(np.abs(self.predict(c) - r)))


def _positive(c: np.ndarray) -> np.ndarray:
    if not (c > 0).all():
        raise ValueError(f"compute must be > 0 (the law is in C_mid / C), got {float(c.min()):.3g}")
    return c


def _law_parts(x: np.ndarray, theta: np.ndarray, r0: float | None):
    """The law and its Jacobian in theta = (A, log B, log C_mid[, R0]) at x = log C."""
    a, log_b, m = theta[:3]
    r0_ = theta[3] if r0 is None else r0
    b = math.exp(log_b)
    s = _sigmoid(b * (m - x))
    ds = -s * (1 - s)  # d s / d u, u = B (m - x)
    columns = [s, (a - r0_) * ds * b * (m - x), (a - r0_) * ds * b]  # d/dA, d/dlog B, d/dm
    if r0 is None:
        columns.append(1 - s)
    return r0_ + (a - r0_) * s, np.stack(columns, axis=1)


def _linear_part(x: np.ndarray, y: np.ndarray, b: float, m: float, r0: float | None) -> tuple[float, float]:
    """For fixed B, C_mid the law is linear in (R0, A): R = R0 (1 - s) + A s. Least squares for them."""
    s = _sigmoid(b * (m - x))
    if r0 is not None:
        return float(np.dot(s, y - r0 * (1 - s)) / max(np.dot(s, s), 1e-300)), r0
    (r0_, a), *_ = np.linalg.lstsq(np.stack([1 - s, s], axis=1), y, rcond=None)
    return float(a), float(r0_)


def _levenberg_marquardt(x, y, theta, sse, r0, free, lo, hi):
    """Levenberg-Marquardt on the ``free`` coordinates of theta, A (theta[0]) projected into [lo, hi]."""
    theta, lam = theta.copy(), 1e-3
    for _ in range(500):
        pred, jac = _law_parts(x, theta, r0)
        jac = jac[:, free]
        jtj, jtr = jac.T @ jac, jac.T @ (y - pred)
        step = np.zeros_like(theta)
        step[free] = np.linalg.solve(jtj + lam * np.diag(np.diag(jtj) + 1e-12), jtr)
        trial = theta + step
        trial[0] = min(max(trial[0], lo), hi)
        trial_sse = float(np.sum((y - _law_parts(x, trial, r0)[0]) ** 2))
        if trial_sse < sse:
            done = sse - trial_sse <= 1e-15 * max(sse, 1e-300) or np.abs(trial - theta).max() < 1e-12
            theta, sse, lam = trial, trial_sse, max(lam / 10, 1e-12)
            if done:
                break
        else:
            lam *= 10
            if lam > 1e12:
                break
    return theta, sse


def fit_compute_law(
    compute, reward, r0: float | None = None, a_bounds: tuple[float, float] | None = None
) -> ComputeLawFit:
    """Least squares of ``reward`` on R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) (Khatri et al. 2025).

    ``compute``: the compute spent at each point (> 0: GPU-hours, tokens, steps), ``reward``: the reward
    measured there; ``r0``: the start, given (e.g. the reference's reward) or None to fit it too;
    ``a_bounds``: (lowest, highest) A allowed, e.g. (R0, 1) for a pass rate; None: A is free. At least
    one point more than the parameters (5 with R0 fitted, 4 without), at 3 computes or more.

    Deterministic: a grid over (B, C_mid) with (A, R0) solved exactly at each node (A clipped into its
    bounds), then Levenberg-Marquardt from the best node in (A, log B, log C_mid[, R0]); if A ends on a
    bound, the other parameters are fitted again with A held there."""
    c, y = _vectors(compute, reward, ("compute", "reward"), 4 if r0 is not None else 5)
    lo, hi = (-math.inf, math.inf) if a_bounds is None else (float(a_bounds[0]), float(a_bounds[1]))
    if not lo <= hi or math.isnan(lo) or math.isnan(hi):
        raise ValueError(f"a_bounds must be (lowest, highest) with lowest <= highest, got {a_bounds}")
    x = np.log(_positive(c))
    if len(np.unique(x)) < 3:
        raise ValueError("fit_compute_law needs points at 3 different computes or more")
    span = float(x.max() - x.min())
    best = None
    for b in np.geomspace(0.05, 20.0, 25):
        for m in np.linspace(x.min() - span, x.max() + 2 * span, 61):
            a, r0_ = _linear_part(x, y, float(b), float(m), r0)
            if not lo <= a <= hi:  # the SSE is a convex quadratic in A: its best A in the bounds is the clipped one
                a = min(max(a, lo), hi)
                if r0 is None:
                    s = _sigmoid(float(b) * (m - x))
                    r0_ = float(np.dot(1 - s, y - a * s) / max(np.dot(1 - s, 1 - s), 1e-300))
            sse = float(np.sum((compute_law(c, r0_, a, float(b), math.exp(m)) - y) ** 2))
            if best is None or sse < best[0]:
                best = (sse, np.array([a, math.log(b), m] + ([r0_] if r0 is None else [])))
    sse, theta = best
    free = np.ones(len(theta), dtype=bool)
    theta, sse = _levenberg_marquardt(x, y, theta, sse, r0, free, lo, hi)
    if theta[0] in (lo, hi):  # on a bound: the rest fitted with A held there
        free[0] = False
        theta, sse = _levenberg_marquardt(x, y, theta, sse, r0, free, lo, hi)
    a, log_b, m = (float(t) for t in theta[:3])
    r0_ = float(theta[3]) if r0 is None else float(r0)
    return ComputeLawFit(a, math.exp(log_b), math.exp(m), r0_, r0 is None, len(c), math.sqrt(sse / len(c)))
