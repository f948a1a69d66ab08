"""Cui et al.'s R = -a exp(H) + b and Gao et al.'s gold - gold_0 = d (alpha - beta log d): by hand,
recovered from exact data, a property (the fit is exact on data from the model), bad input."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from grpo_edu.measure.fits import cui_fit, gao_fit


def test_cui_fit_by_hand():
    # exp(H) = 1, 2, 3 and R = 1, 0, 0: the slope of R on x = exp(H) is Sxy / Sxx = -1 / 2 (x mean 2,
    # R mean 1/3), so a = 1/2, b = 1/3 + 2 a = 4/3; fitted 5/6, 1/3, -1/6; residuals 1/6, -1/3, 1/6
    fit = cui_fit(np.log([1.0, 2.0, 3.0]), [1.0, 0.0, 0.0])
    assert fit.a == pytest.approx(0.5) and fit.b == pytest.approx(4 / 3) and fit.n == 3
    assert fit.ceiling == pytest.approx(4 / 3 - 0.5)
    assert fit.predict(np.log([1.0, 2.0, 3.0])) == pytest.approx([5 / 6, 1 / 3, -1 / 6])
    assert fit.mae == pytest.approx(2 / 9)
    assert fit.error([0.0], [0.0]) == pytest.approx(5 / 6)  # one later point, predicted 5/6, measured 0


def test_cui_fit_recovers_known_parameters():
    h = np.linspace(0.1, 1.2, 40)
    fit = cui_fit(h[:10], -0.3 * np.exp(h[:10]) + 1.1)  # fit on the first quarter ...
    assert fit.a == pytest.approx(0.3) and fit.b == pytest.approx(1.1) and fit.mae < 1e-12
    assert fit.error(h[10:], -0.3 * np.exp(h[10:]) + 1.1) < 1e-12  # ... predicts the rest exactly


def test_gao_fit_by_hand():
    # KL 0, 1, e^2: d = 0, 1, e; d log d = 0, 0, e. gold - 0.5 = 0, 0.5, e (0.5 - 0.25): the second point
    # gives alpha = 0.5, the third alpha - beta = 0.25, so beta = 0.25; d* = exp(0.5 / 0.25 - 1) = e,
    # KL* = e^2, gold there 0.5 + beta d* = 0.5 + e / 4
    e = math.e
    fit = gao_fit([0.0, 1.0, e**2], [0.5, 1.0, 0.5 + 0.25 * e])
    assert fit.start == 0.5 and fit.n == 3 and fit.d_range == (1.0, pytest.approx(e))
    assert fit.alpha == pytest.approx(0.5) and fit.beta == pytest.approx(0.25) and fit.has_peak
    assert fit.d_star == pytest.approx(e) and fit.kl_star == pytest.approx(e**2)
    assert fit.gain_star == pytest.approx(e / 4) and fit.rmse < 1e-12
    assert "peak at d* = 2.72" in fit.peak and "inside the measured d" in fit.peak
    assert fit.predict([4.0]) == pytest.approx([0.5 + 2 * (0.5 - 0.25 * math.log(2))])
    assert fit.residuals([1.0, 1.0], [1.25, 0.75]) == pytest.approx([0.25, -0.25])  # gold - fitted 1.0


def test_gao_fit_recovers_known_parameters_and_start():
    kl = np.linspace(0.0, 6.0, 25)
    d = np.sqrt(kl)
    gold = 0.544 + d * (0.4 - 0.3 * np.log(np.where(d > 0, d, 1.0)))
    fit = gao_fit(kl, gold)  # start: the gold at KL 0
    assert fit.start == pytest.approx(0.544)
    assert fit.alpha == pytest.approx(0.4) and fit.beta == pytest.approx(0.3)
    assert fit.d_star == pytest.approx(math.exp(0.4 / 0.3 - 1))
    assert gao_fit(kl[1:], gold[1:], start=0.544).alpha == pytest.approx(0.4)  # start given, no KL-0 point


@pytest.mark.parametrize(
    "alpha,beta,words",
    [(0.1, 0.0, "rises in proportion"), (-0.2, 0.0, "falls in proportion"), (-0.5, -0.2, "lowest at d")],
)
def test_gao_fit_without_a_peak_says_so(alpha, beta, words):
    kl = np.array([0.0, 0.25, 1.0, 4.0, 9.0])
    d = np.sqrt(kl)
    fit = gao_fit(kl, 0.5 + d * (alpha - beta * np.log(np.where(d > 0, d, 1.0))))
    assert not fit.has_peak and fit.d_star is None and fit.kl_star is None and fit.gain_star is None
    assert "no interior peak" in fit.peak and words in fit.peak
    if beta < 0:  # the stationary point is a minimum at exp(alpha / beta - 1) = exp(1.5)
        assert f"{math.exp(1.5):.3g}" in fit.peak


def test_a_minimum_far_beyond_the_points_reads_as_a_fall():
    kl = np.array([0.0, 0.25, 1.0, 4.0])
    d = np.sqrt(kl)
    fit = gao_fit(kl, 0.5 + d * (-0.3 + 0.001 * np.log(np.where(d > 0, d, 1.0))))  # minimum at exp(299)
    assert "falls over every measured d" in fit.peak and "far beyond" in fit.peak


@settings(max_examples=60, deadline=None)
@given(
    alpha=st.floats(-2, 2),
    beta=st.floats(-2, 2),
    start=st.floats(0, 1),
    kl=st.lists(st.floats(0.01, 9.0), min_size=3, max_size=12),
)
def test_gao_fit_is_exact_on_data_from_the_model(alpha, beta, start, kl):
    kl = np.array(kl)
    d = np.sqrt(kl)
    assume(np.ptp(d) > 0.05)  # two distinct d at least: both columns are determined
    gold = start + d * (alpha - beta * np.log(d))
    fit = gao_fit(kl, gold, start=start)
    assert np.allclose(fit.predict(kl), gold, atol=1e-8) and fit.rmse < 1e-8


@settings(max_examples=60, deadline=None)
@given(a=st.floats(-2, 2), b=st.floats(-2, 2), h=st.lists(st.floats(0.0, 2.0), min_size=3, max_size=12))
def test_cui_fit_is_exact_on_data_from_the_model(a, b, h):
    h = np.array(h)
    assume(np.ptp(h) > 0.05)
    fit = cui_fit(h, -a * np.exp(h) + b)
    assert np.allclose(fit.predict(h), -a * np.exp(h) + b, atol=1e-8) and fit.mae < 1e-8


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: cui_fit([0.1, 0.2, 0.3], [1.0, 2.0]), "same length"),
        (lambda: cui_fit([0.1, 0.2], [1.0, 2.0]), "at least 3 points"),
        (lambda: cui_fit([0.3, 0.3, 0.3], [1.0, 2.0, 3.0]), "do not determine"),
        (lambda: cui_fit([0.1, float("nan"), 0.3], [1.0, 2.0, 3.0]), "finite"),
        (lambda: gao_fit([0.0, 1.0, 2.0], [0.5, 0.6]), "same length"),
        (lambda: gao_fit([0.0, 1.0], [0.5, 0.6]), "at least 2 points with KL > 0"),
        (lambda: gao_fit([0.0, -0.5, 2.0], [0.5, 0.6, 0.7]), "cannot be negative"),
        (lambda: gao_fit([1.0, 2.0, 3.0], [0.5, 0.6, 0.7]), "pass start="),
        (lambda: gao_fit([0.0, 2.0, 2.0], [0.5, 0.6, 0.7]), "do not determine"),
        (lambda: gao_fit([0.0], [0.5]), "at least 2 points"),
    ],
)
def test_bad_input_is_a_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_float_rounding_of_a_zero_kl_is_zero():
    fit = gao_fit([-1e-9, 1.0, 4.0], [0.5, 0.7, 0.8])
    assert fit.start == 0.5 and np.isfinite(fit.predict([-1e-9])).all()
