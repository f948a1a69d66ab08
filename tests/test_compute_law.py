"""ScaleRL's R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B): by hand, recovered from exact points (a property),
from noisy ones within a stated tolerance over seeds, fitted on the first part of a run it predicts the rest
better than "it stays where it is" once the fitted part passes C_mid (and not always before it), A held in
its bounds (the best fit there), bad input."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_edu.measure.fits import compute_law, fit_compute_law

C = np.geomspace(1.0, 1000.0, 30)  # the synthetic run: 30 computes, log-spaced over three decades
TRUE = dict(r0=0.1, a=0.8, b=1.3, c_mid=40.0)
Y = compute_law(C, **TRUE)


def noisy(seed: int, sd: float = 0.01) -> np.ndarray:
    return Y + np.random.default_rng(seed).normal(0.0, sd, len(Y))


def test_law_by_hand():
    # at C = C_mid half the gain: (0.1 + 0.8) / 2; B = 1, C = 3 C_mid: 1 / (1 + 1/3) = 3/4 of it; the ends R0, A
    assert compute_law([40.0], 0.1, 0.8, 1.0, 40.0) == pytest.approx([0.45])
    assert compute_law([120.0], 0.1, 0.8, 1.0, 40.0) == pytest.approx([0.1 + 0.7 * 0.75])
    assert compute_law([1e-30, 1e30], 0.1, 0.8, 2.0, 40.0) == pytest.approx([0.1, 0.8])


def test_recovers_known_parameters_from_exact_points():
    for r0 in (None, 0.1):
        fit = fit_compute_law(C, Y, r0=r0)
        assert fit.r0_fitted is (r0 is None) and fit.n == 30 and fit.rmse < 1e-9
        for got, want in ((fit.a, 0.8), (fit.b, 1.3), (fit.c_mid, 40.0), (fit.r0, 0.1)):
            assert got == pytest.approx(want, rel=1e-3)


@settings(max_examples=20, deadline=None)
@given(
    st.floats(0.3, 1.0),
    st.floats(0.0, 0.2),
    st.floats(0.5, 3.0),
    st.floats(10.0, 300.0),
    st.sampled_from([None, "given"]),
)
def test_exact_points_give_back_their_parameters(a, r0, b, c_mid, given_r0):
    c = np.geomspace(1.0, 1e4, 25)
    fit = fit_compute_law(c, compute_law(c, r0, a, b, c_mid), r0=None if given_r0 is None else r0)
    assert fit.a == pytest.approx(a, rel=1e-3) and fit.b == pytest.approx(b, rel=1e-3)
    assert fit.c_mid == pytest.approx(c_mid, rel=1e-3) and fit.r0 == pytest.approx(r0, abs=1e-3)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_noisy_points_within_tolerance(seed):
    # reward noise sd 0.01 (gain 0.7): on 150 seeds the largest errors were 0.016 (A), 8% (B), 7% (C_mid)
    # with R0 given and 0.017 (A, R0) with R0 fitted; the tolerances are about twice those
    y = noisy(seed)
    fit = fit_compute_law(C, y, r0=0.1)
    assert abs(fit.a - 0.8) < 0.03 and abs(fit.b / 1.3 - 1) < 0.15 and abs(math.log(fit.c_mid / 40.0)) < 0.15
    free = fit_compute_law(C, y)
    assert abs(free.a - 0.8) < 0.03 and abs(free.r0 - 0.1) < 0.03
    assert 0.005 < fit.rmse < 0.02  # the fit leaves the noise, not more, not less


def naive_error(k: int, y: np.ndarray) -> float:
    """ "It stays where it is": the last fitted reward predicts every later one."""
    return float(np.mean(np.abs(Y[k:] - y[k - 1])))


def test_exact_early_points_predict_the_rest():
    k = 12  # up to C = 13.7, before C_mid = 40: the exact law is still identified
    fit = fit_compute_law(C[:k], Y[:k])
    assert fit.error(C[k:], Y[k:]) < 1e-6 and naive_error(k, Y) > 0.3


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_noisy_fit_past_the_midpoint_beats_staying_put(seed):
    # fitted up to C = 92 (past C_mid): on 100 seeds the error was at most 0.47 of the naive one's
    k, y = 20, noisy(seed)
    assert fit_compute_law(C[:k], y[:k], r0=0.1).error(C[k:], Y[k:]) < 0.75 * naive_error(k, y)


def test_noisy_fit_before_the_midpoint_can_lose_to_staying_put():
    # fitted up to C = 13.7 only: on some seeds the extrapolated sigmoid is worse than the naive prediction
    k = 12
    ratios = [
        fit_compute_law(C[:k], noisy(s)[:k], r0=0.1).error(C[k:], Y[k:]) / naive_error(k, noisy(s)) for s in range(20)
    ]
    assert min(ratios) < 1 < max(ratios)


def test_bounded_ceiling_is_the_best_fit_on_its_bound():
    # points of a law whose ceiling is 1.3, seen only before it bends over (C <= C_mid): free, the fit finds
    # 1.3 back (the control); bounded to [R0, 1] it puts A on 1 and refits B, C_mid there, better than keeping
    # the true B, C_mid with A = 1, and no worse than any (B, C_mid) on a grid with A = 1
    c = np.geomspace(1.0, 40.0, 20)
    y = compute_law(c, 0.1, 1.3, 1.3, 40.0)
    assert fit_compute_law(c, y, r0=0.1).a == pytest.approx(1.3, rel=1e-3)
    fit = fit_compute_law(c, y, r0=0.1, a_bounds=(0.1, 1.0))
    assert fit.a == 1.0 and fit.rmse > 1e-4

    def rmse(b, c_mid):
        return float(np.sqrt(np.mean((compute_law(c, 0.1, 1.0, b, c_mid) - y) ** 2)))

    assert fit.rmse < rmse(1.3, 40.0) / 2
    grid = min(rmse(b, m) for b in np.geomspace(0.5, 3.0, 15) for m in np.geomspace(5.0, 200.0, 15))
    assert fit.rmse <= grid + 1e-12
    # inside its bounds, the bound changes nothing (exact points of A = 0.8)
    inside = fit_compute_law(C, Y, r0=0.1, a_bounds=(0.1, 1.0))
    assert inside.a == pytest.approx(0.8, rel=1e-6) and inside.rmse < 1e-9
    # R0 fitted too: A still held, R0 near its value
    free_r0 = fit_compute_law(c, y, a_bounds=(0.0, 1.0))
    assert free_r0.a == 1.0 and abs(free_r0.r0 - 0.1) < 0.05


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="a_bounds must be"):
        fit_compute_law(C, Y, a_bounds=(1.0, 0.5))
    with pytest.raises(ValueError, match="at least 5 points"):
        fit_compute_law(C[:4], Y[:4])
    with pytest.raises(ValueError, match="at least 4 points"):
        fit_compute_law(C[:3], Y[:3], r0=0.1)
    with pytest.raises(ValueError, match="compute must be > 0"):
        fit_compute_law(np.r_[0.0, C[1:]], Y)
    with pytest.raises(ValueError, match="same length"):
        fit_compute_law(C, Y[:-1])
    with pytest.raises(ValueError, match="3 different computes"):
        fit_compute_law([1.0, 1.0, 2.0, 2.0, 2.0], [0.1, 0.1, 0.2, 0.2, 0.2])
    with pytest.raises(ValueError, match="finite"):
        fit_compute_law(C, np.r_[np.nan, Y[1:]])
    with pytest.raises(ValueError, match="compute must be > 0"):
        fit_compute_law(C, Y).predict([-1.0])
