"""perfgate.stats.special against scipy.special (still a dependency, for the parts of perfgate
off the gate path) on dense grids, tails and edge cases included, and against closed forms
and identities where scipy itself loses digits.

Tolerances are relative unless said otherwise; each states what the implementation reaches
(the largest error seen on these grids, rounded up) and why it is not 1e-15 where it is not.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special as sp

from perfgate.stats import special

EPS = np.finfo(float).eps
DFS = np.array([1, 1.5, 2, 2.5, 3, 4, 5, 7, 10, 13.3, 20, 30, 50, 100, 300, 1e3, 1e4, 1e5, 1e6])


def rel_err(ours: np.ndarray, ref: np.ndarray) -> np.ndarray:
    ours, ref = np.broadcast_arrays(np.asarray(ours, float), np.asarray(ref, float))
    out = np.zeros(ours.shape)
    differ = ours != ref
    with np.errstate(divide="ignore", invalid="ignore"):  # 0 against nonzero: inf, fails
        out[differ] = np.abs(ours[differ] - ref[differ]) / np.abs(ref[differ])
    return out


def assert_close(ours: np.ndarray, ref: np.ndarray, rtol: float) -> None:
    ours = np.asarray(ours, float)
    assert ours.shape == np.shape(ref)
    assert np.array_equal(np.isnan(ours), np.isnan(ref))
    err = rel_err(np.nan_to_num(ours), np.nan_to_num(np.asarray(ref, float)))
    worst = int(np.argmax(err))
    assert err.ravel()[worst] <= rtol, (
        f"rel error {err.ravel()[worst]:.3g} at index {worst}: "
        f"{ours.ravel()[worst]!r} vs {np.asarray(ref).ravel()[worst]!r}"
    )


# --- normal ------------------------------------------------------------------------------


def test_ndtr_matches_scipy_into_both_tails() -> None:
    x = np.concatenate(
        [-np.logspace(-300, math.log10(37.5), 3000), np.logspace(-300, math.log10(8.5), 1500)]
    )  # down to ndtr = 5e-308: below, scipy rounds the subnormal results to 0
    # Reached: 5e-14, in the far lower tail: erfc(-x / sqrt 2) amplifies the rounding of
    # its argument by about x^2 there, in scipy's value as in ours.
    assert_close(special.ndtr(x), sp.ndtr(x), 1e-13)
    assert special.ndtr(0.0) == 0.5
    assert special.ndtr(-math.inf) == 0.0 and special.ndtr(math.inf) == 1.0
    assert math.isnan(special.ndtr(math.nan))


def test_ndtri_matches_scipy_and_inverts_ndtr() -> None:
    p = np.concatenate(
        [
            np.logspace(-300, math.log10(0.5), 4000),
            1 - np.logspace(-16, math.log10(0.5), 2000),
            0.5 + np.logspace(-16, -1, 200),
            np.linspace(0.001, 0.999, 999),
        ]
    )
    x = special.ndtri(p)
    assert_close(x, sp.ndtri(p), 2e-15)  # reached: 8e-16
    # ndtr(ndtri(p)) == p up to the rounding of x, which ndtr amplifies by x phi(x) / p
    # (about x^2 in the tails): one ulp of x is all the error there is.
    amplify = 1.0 + np.abs(x) * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi) / np.minimum(p, 1 - p)
    err = np.abs(special.ndtr(x) - p) / np.minimum(p, 1 - p)
    assert np.all(err <= 4 * EPS * amplify)
    central = (p > 0.05) & (p < 0.95)
    # 1.05e-15 reached: one rounding of ndtr's own (erfc and its argument x / sqrt 2)
    assert np.max(err[central]) <= 1.5e-15


def test_ndtri_is_exactly_antisymmetric_and_handles_its_edges() -> None:
    p = np.concatenate([np.linspace(0.5, 1.0, 1001)[1:-1], 1 - np.logspace(-16, -1, 300)])
    assert np.array_equal(special.ndtri(1.0 - p), -special.ndtri(p))  # 1 - p exact here
    assert special.ndtri(0.5) == 0.0
    assert special.ndtri(0.0) == -math.inf and special.ndtri(1.0) == math.inf
    for bad in (math.nan, -0.1, 1.1):
        assert math.isnan(special.ndtri(bad))


# --- Student's t -------------------------------------------------------------------------


def _log_t_times_pdf(df: float, t: np.ndarray) -> np.ndarray:
    """log(|t| pdf(t)) for Student's t, for |t| up to 1e300 (t^2 would overflow)."""
    u = np.abs(t)
    huge = u > 1e150
    log_kernel = np.empty_like(u)  # log(1 + t^2 / df)
    log_kernel[huge] = 2.0 * np.log(u[huge]) - math.log(df)
    log_kernel[~huge] = np.log1p(u[~huge] ** 2 / df)
    const = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    with np.errstate(divide="ignore"):  # t = 0: log 0 = -inf, a slope of 0
        return np.asarray(np.log(u) + const - (df + 1) / 2 * log_kernel)


def _t_grid() -> tuple[np.ndarray, np.ndarray]:
    t = np.concatenate([-np.logspace(-3, 3, 400), np.logspace(-3, 3, 400), [0.0]])
    return np.meshgrid(DFS, t)


def test_stdtr_matches_scipy() -> None:
    df, t = _t_grid()
    ref = sp.stdtr(df, t)
    # scipy rounds subnormal results to 0; and df = 1 is left to the closed form below:
    # scipy's own stdtr loses digits there near t = 0 (3e-14 at t = 1e-3, 4e-11 at 1.2e-6,
    # 5e-9 at 7e-9, against 50-digit arithmetic, where ours is exact to 1e-16)
    keep = (ref > 1e-300) & (df != 1.0)
    ours = special.stdtr(df, t)
    # One ulp of t moves the CDF by |t| pdf(t) / F ulps (t^2, up to 1300, far out in a
    # near-normal tail): scipy's value and ours each carry about that much rounding (both
    # 1e-13 off at df = 1000, t = -31, against 50-digit arithmetic), and agree within it.
    tail = np.minimum(ref, 1.0 - ref)
    amplify = np.ones_like(ref)
    with np.errstate(divide="ignore", over="ignore"):  # a CDF of 1: no bound
        for i, d in enumerate(DFS):
            amplify[:, i] += np.exp(_log_t_times_pdf(float(d), t[:, i]) - np.log(tail[:, i]))
    # Beyond that ours reaches 24 eps (5e-15) times it: where the fraction gives the larger
    # tail directly and the smaller is 1 minus it, the factor x^a y^b / B(a, b) (exact to
    # about 1e-15: Stirling's corrections below 10 come from math.lgamma) is amplified by
    # their ratio, up to 5 here (2e-14 at df = 13.3, t = -1.6, against 50-digit arithmetic).
    err = rel_err(ours, ref)
    assert np.all(err[keep] <= 64 * EPS * amplify[keep])


def test_stdtr_matches_the_closed_forms_for_1_and_2_degrees_of_freedom() -> None:
    u = np.logspace(-12, 100, 2000)
    cauchy_tail = np.arctan(1.0 / u) / math.pi  # P(T < -u), df = 1
    root = np.sqrt(2.0 + u * u)
    df2_tail = 1.0 / (root * (root + u))  # P(T < -u), df = 2, without cancellation
    assert_close(special.stdtr(1.0, -u), cauchy_tail, 1e-14)  # reached: 2e-15
    assert_close(special.stdtr(2.0, -u), df2_tail, 1e-14)
    assert_close(special.stdtr(1.0, u), 1.0 - cauchy_tail, 1e-15)
    # a t below 1e-6: 0.5 + t / pi to first order
    assert special.stdtr(1.0, 1e-9) == pytest.approx(0.5 + 1e-9 / math.pi, rel=1e-16)


def test_stdtr_edge_cases() -> None:
    assert special.stdtr(3.0, 0.0) == 0.5
    assert special.stdtr(3.0, -math.inf) == 0.0 and special.stdtr(3.0, math.inf) == 1.0
    assert special.stdtr(math.inf, 1.0) == special.ndtr(1.0)
    assert special.stdtr(1e12, -2.0) == pytest.approx(special.ndtr(-2.0), rel=1e-11)
    for df, t in ((0.0, 1.0), (-1.0, 1.0), (math.nan, 1.0), (3.0, math.nan)):
        assert math.isnan(special.stdtr(df, t))
    # beyond t = 1e150 (t^2 overflows): the tail's leading term, 1 / (pi t) for df = 1
    assert special.stdtr(1.0, -1e200) == pytest.approx(1e-200 / math.pi, rel=1e-13)


def test_stdtr_is_symmetric() -> None:
    df, t = _t_grid()
    assert np.all(np.abs(special.stdtr(df, t) + special.stdtr(df, -t) - 1.0) <= 2 * EPS)


def test_stdtrit_matches_scipy_away_from_the_median() -> None:
    q = np.concatenate([np.logspace(-30, math.log10(0.4), 300), 1 - np.logspace(-15, -1, 200)])
    df, p = np.meshgrid(DFS, q)
    # Reached: 2e-14. Within 0.1 of p = 0.5 scipy's stdtrit loses digits (1.8e-11 at
    # df = 4, p = 0.499, checked against 50-digit arithmetic; 2e-13 at p = 0.49): the
    # closed forms and the round trip below hold the centre instead.
    assert_close(special.stdtrit(df, p), sp.stdtrit(df, p), 5e-14)


def test_stdtrit_matches_the_closed_forms_near_the_median_too() -> None:
    p = np.concatenate([np.linspace(0.001, 0.999, 999), 0.5 + np.logspace(-15, -2, 100)])
    # df = 1: tan(pi (p - 1/2)), written so that the reference loses no digits: p - 1/2 is
    # exact in the middle, and the tails are -cot(pi p) and cot(pi (1 - p))
    cauchy = np.where(
        p < 0.25,
        -1.0 / np.tan(math.pi * p),
        np.where(p > 0.75, 1.0 / np.tan(math.pi * (1.0 - p)), np.tan(math.pi * (p - 0.5))),
    )
    assert_close(special.stdtrit(1.0, p), cauchy, 1e-14)
    df2 = (2 * p - 1) / np.sqrt(2 * p * (1 - p))
    assert_close(special.stdtrit(2.0, p), df2, 1e-14)  # reached: 2e-15


def test_stdtrit_inverts_stdtr() -> None:
    q = np.concatenate(
        [np.logspace(-300, math.log10(0.4999), 600), 1 - np.logspace(-16, -0.31, 300)]
    )
    for df in DFS:
        t = special.stdtrit(np.full_like(q, df), q)
        back = special.stdtr(np.full_like(q, df), t)
        # one ulp of t moves the CDF by |t| pdf(t) / min(p, 1 - p) ulps (about df in the
        # far tails, t^2 near the normal): the round trip is exact up to that
        amplify = 1.0 + np.exp(_log_t_times_pdf(df, t) - np.log(np.minimum(q, 1 - q)))
        err = np.abs(back - q) / np.minimum(q, 1 - q)
        # (64 eps: stdtr's own error, see test_stdtr_matches_scipy)
        assert np.all(err <= 64 * EPS * amplify), df


def test_stdtrit_symmetry_arrays_and_edges() -> None:
    p = np.linspace(0.5, 1.0, 501)[1:-1]
    for df in (1.0, 3.0, 7.5, 1e6):
        assert np.array_equal(special.stdtrit(df, 1.0 - p), -special.stdtrit(df, p))
    df = np.arange(1.0, 40.0)
    expected = np.asarray([special.stdtrit(float(d), 0.975) for d in df])
    assert np.array_equal(special.stdtrit(df, 0.975), expected)
    assert special.stdtrit(10.0, 0.5) == 0.0
    assert special.stdtrit(10.0, 0.0) == -math.inf and special.stdtrit(10.0, 1.0) == math.inf
    assert special.stdtrit(math.inf, 0.975) == special.ndtri(0.975)
    for df_, p_ in ((0.0, 0.3), (3.0, 1.5), (3.0, -0.5), (math.nan, 0.3), (3.0, math.nan)):
        assert math.isnan(special.stdtrit(df_, p_))


# --- F and chi-square --------------------------------------------------------------------


def test_fdtrc_matches_scipy() -> None:
    d1 = np.array([1, 2, 3, 5, 9, 20, 60, 200, 1000.0])
    d2 = np.array([1, 2, 4, 7, 15, 40, 120, 500, 3000.0])
    f = np.concatenate([np.logspace(-8, 4, 150), [0.0, 1.0]])
    a, b, x = np.meshgrid(d1, d2, f)
    ref = sp.fdtrc(a, b, x)
    ours = special.fdtrc(a, b, x)
    # Reached: 5e-13, and that is scipy's: at (9, 3000, 117) scipy is 3.5e-13 off and ours
    # 1.2e-13 (the factor x^a y^b / B(a, b) is exact to about (a x + b y) ulps), against
    # 50-digit arithmetic. Below 1e-200 scipy itself is far off (6% at 7.7e-284 for
    # (60, 500, 153)): not compared there.
    keep = ref > 1e-200
    assert_close(ours[keep], ref[keep], 1e-12)


def test_fdtrc_is_the_t_distribution_for_one_numerator_degree_of_freedom() -> None:
    t = np.logspace(-3, 3, 300)
    for df in (1.0, 4.0, 30.0, 1e5):
        # P(F(1, df) > t^2) = P(|T| > t)
        assert_close(special.fdtrc(1.0, df, t * t), 2.0 * special.stdtr(df, -t), 1e-13)


def test_fdtrc_edges() -> None:
    assert special.fdtrc(3.0, 5.0, 0.0) == 1.0
    assert special.fdtrc(3.0, 5.0, math.inf) == 0.0
    for args in ((3.0, 5.0, -1.0), (0.0, 5.0, 1.0), (3.0, math.inf, 1.0), (3.0, 5.0, math.nan)):
        assert math.isnan(special.fdtrc(*args))


def test_chdtri_matches_scipy_and_the_closed_forms() -> None:
    k = np.array([1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 40, 77, 100, 300, 1000, 1e4, 1e5])
    q = np.concatenate([np.logspace(-30, -0.31, 100), 1 - np.logspace(-14, -0.31, 80), [0.5]])
    df, p = np.meshgrid(k, q)
    assert_close(special.chdtri(df, p), sp.chdtri(df, p), 5e-14)  # reached: 2e-14
    p = np.concatenate([np.logspace(-300, -0.01, 500), 1 - np.logspace(-16, -0.31, 200)])
    assert_close(special.chdtri(2.0, p), -2.0 * np.log(p), 1e-14)  # Q = exp(-x / 2)
    # chi-square with 1 df is Z^2: P(Z^2 > x) = 2 Phi(-sqrt x)
    assert_close(special.chdtri(1.0, p), special.ndtri(p / 2.0) ** 2, 1e-13)


def test_chdtri_edges_and_the_median_the_gate_asks_for() -> None:
    assert special.chdtri(1.0, 0.5) == pytest.approx(0.454936423119572694, rel=1e-15)
    assert special.chdtri(3.0, 0.0) == math.inf and special.chdtri(3.0, 1.0) == 0.0
    for args in ((0.0, 0.5), (math.inf, 0.5), (3.0, 1.5), (3.0, math.nan)):
        assert math.isnan(special.chdtri(*args))


def test_incomplete_gamma_matches_scipy() -> None:
    a = np.array([0.5, 1, 2.5, 7, 20, 100, 1e3, 1e5])
    x = np.concatenate([np.logspace(-6, 5.5, 200), [0.0]])
    aa, xx = np.meshgrid(a, x)
    lower, upper = sp.gammainc(aa, xx), sp.gammaincc(aa, xx)
    # each compared where it is the smaller tail (the other is 1 minus it) and above 1e-250;
    # reached: 1.1e-12 (a = 1e5, x = 5e4: one ulp of x moves P by about |x - a| ulps, so
    # scipy's value and ours each carry errors of that order)
    keep_lower = (lower <= 0.5) & (lower > 1e-250)
    keep_upper = (upper <= 0.5) & (upper > 1e-250)
    assert_close(special.gammainc(aa, xx)[keep_lower], lower[keep_lower], 3e-12)
    assert_close(special.gammaincc(aa, xx)[keep_upper], upper[keep_upper], 3e-12)


# --- noncentral t ------------------------------------------------------------------------


def test_nctdtr_matches_scipy() -> None:
    df = np.array([1, 2, 3, 4, 6, 10, 19, 50, 200, 999.0])
    nc = np.array([-5, -1, 0, 0.5, 1, 2.8, 4, 7, 12, 25, 40])
    t = np.array([-10, -3, -1, -0.1, 0.1, 0.5, 1, 2, 2.5, 3, 5, 10, 30, 100.0])
    d, n, x = np.meshgrid(df, nc, t)
    ref = sp.nctdtr(d, n, x)
    keep = np.isfinite(ref)  # scipy gives nan for some far-tail corners
    ours = special.nctdtr(d, n, x)
    # Absolute error: the Poisson-weighted sum of incomplete betas carries about one ulp
    # per term, and a large noncentrality takes a few hundred terms (reached: 4.2e-13, at
    # nc = 40; 1e-15 for the noncentralities of a sample-size search, below 10).
    assert np.max(np.abs(ours[keep] - ref[keep])) <= 1e-12
    small = keep & (np.abs(n) < 10)
    assert np.max(np.abs(ours[small] - ref[small])) <= 1e-14


def test_nctdtr_reduces_to_the_central_t_and_the_normal() -> None:
    t = np.linspace(-8, 8, 161)
    for df in (1.0, 3.0, 25.0):
        assert np.max(np.abs(special.nctdtr(df, 0.0, t) - special.stdtr(df, t))) <= 4 * EPS
    assert special.nctdtr(math.inf, 1.5, 2.0) == special.ndtr(0.5)
    assert special.nctdtr(5.0, 2.0, 0.0) == special.ndtr(-2.0)
    assert special.nctdtr(5.0, 2.0, math.inf) == 1.0 and special.nctdtr(5.0, 2.0, -math.inf) == 0.0
    assert math.isnan(special.nctdtr(0.0, 1.0, 1.0)) and math.isnan(
        special.nctdtr(5.0, math.nan, 1.0)
    )


# --- polygamma ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2])
def test_polygamma_matches_scipy(n: int) -> None:
    x = np.concatenate(
        [np.logspace(-8, 8, 2000), -np.linspace(0.05, 20.05, 301), np.arange(1, 400) / 2.0]
    )
    ours, ref = special.polygamma(n, x), sp.polygamma(n, x)
    if n == 0:
        # Near its root (1.4616...) digamma's absolute error, 1e-15 (the upward recurrence
        # cancels to it), is large against the value: there the error is held absolutely.
        near = np.abs(ref) < 0.1
        assert np.max(np.abs(ours[near] - ref[near])) <= 2e-15
        ours, ref = ours[~near], ref[~near]
    assert_close(ours, ref, 2e-14)  # reached: 1e-14 (reflection for x < 0)
    assert np.array_equal(special.digamma(x[:5]), special.polygamma(0, x[:5]))


def test_polygamma_known_values_and_edges() -> None:
    euler_gamma = 0.5772156649015329
    assert special.digamma(1.0) == pytest.approx(-euler_gamma, rel=2e-16)
    assert special.polygamma(1, 1.0) == pytest.approx(math.pi**2 / 6.0, rel=2e-16)
    assert special.polygamma(2, 1.0) == pytest.approx(-2.0 * 1.2020569031595943, rel=2e-16)
    assert special.digamma(0.5) == pytest.approx(-euler_gamma - 2 * math.log(2), rel=2e-16)
    assert special.digamma(0.0) == -math.inf and math.isnan(special.digamma(-2.0))
    assert special.polygamma(1, 0.0) == math.inf
    assert all(math.isnan(special.polygamma(n, math.nan)) for n in (0, 1, 2))
    with pytest.raises(ValueError, match="order 3"):
        special.polygamma(3, 1.0)
