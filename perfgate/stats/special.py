"""The special functions the gate's statistics need, in plain Python (``math``, and numpy only
to take and return arrays), so that a gate imports no scipy: importing ``scipy.special`` costs
more than a tenth of a second, a large share of a gate's wall time.

Names and argument orders follow ``scipy.special`` (``stdtr(df, t)``, ``chdtri(df, p)``...),
and so do the edge cases the callers can meet: nan in gives nan out, a probability at 0 or 1
gives an infinite quantile, ``df = inf`` is the normal distribution. Each function takes
floats, or numpy arrays (broadcast against each other, evaluated element by element).

Methods, all accurate to a few units in the last place over the ranges perfgate uses
(``tests/test_special.py`` holds them against scipy on dense grids):

* ``ndtr`` from ``math.erfc``; ``ndtri`` from the Abramowitz-Stegun 26.2.23 start refined by
  Halley steps, the residual taken on ``erf`` near the median and on ``erfc`` in the tails,
  so both keep full relative precision; ``ndtri(1 - p) == -ndtri(p)`` exactly.
* The regularised incomplete beta by its continued fraction (Abramowitz-Stegun 26.5.8,
  evaluated by the modified Lentz method), with the usual switch to ``1 - x`` where it
  converges faster; ``x`` and ``1 - x`` are passed separately, each exact, and the factor
  ``x^a (1-x)^b / B(a, b)`` is formed from Stirling's series so that large degrees of
  freedom lose no digits. ``stdtr`` and ``fdtrc`` are incomplete betas.
* The regularised incomplete gamma by its series below ``x = a + 1`` and its continued
  fraction above; ``chdtri`` inverts it.
* Quantiles (``stdtrit``, ``chdtri``): a good start (Hill's algorithm 396 for Student's t,
  Wilson-Hilferty for the chi-square), then Newton steps on ``log(F(s) / p)`` in ``log s``,
  inside a bracket that only shrinks; cached, since a gate asks the same few many times.
* ``nctdtr`` (noncentral t): the Poisson-weighted sum of incomplete betas (Lenth's AS 243),
  summed outwards from the largest weight by the incomplete beta's recurrences in ``a``, so
  a large noncentrality neither underflows the first weight nor needs hundreds of terms.
* ``digamma`` and ``polygamma(1 or 2, x)``: upward recurrence to ``x >= 12``, then the
  asymptotic series in Bernoulli numbers; the reflection formula for ``x < 0``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import overload

import numpy as np
import numpy.typing as npt

__all__ = [
    "chdtri",
    "digamma",
    "fdtrc",
    "gammainc",
    "gammaincc",
    "nctdtr",
    "ndtr",
    "ndtri",
    "polygamma",
    "stdtr",
    "stdtrit",
]

Array = npt.NDArray[np.float64]

_EPS = 2.220446049250313e-16
_TINY = 1e-300
_SQRT_HALF = 0.7071067811865476
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_LN_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_LN_SQRT_PI = 0.5 * math.log(math.pi)
_MAX_TERMS = 100_000
"""A bound on the terms of any series or continued fraction: each converges in far fewer."""

# Bernoulli numbers B_2, B_4, ..., B_20.
_BERNOULLI = (
    1.0 / 6.0,
    -1.0 / 30.0,
    1.0 / 42.0,
    -1.0 / 30.0,
    5.0 / 66.0,
    -691.0 / 2730.0,
    7.0 / 6.0,
    -3617.0 / 510.0,
    43867.0 / 798.0,
    -174611.0 / 330.0,
)
# Stirling's series for log Gamma: B_2k / (2k (2k - 1)), k = 1..8.
_STIRLING = tuple(b / ((2 * k + 2) * (2 * k + 1)) for k, b in enumerate(_BERNOULLI[:8]))
# Asymptotic series of digamma, trigamma, tetragamma: B_2k / 2k, B_2k, (2k + 1) B_2k.
_DIGAMMA = tuple(b / (2 * k + 2) for k, b in enumerate(_BERNOULLI))
_TRIGAMMA = _BERNOULLI
_TETRAGAMMA = tuple((2 * k + 3) * b for k, b in enumerate(_BERNOULLI))
_ASYMPTOTIC_FROM = 12.0
"""The polygamma functions use their asymptotic series from here on (upward recurrence
below): the ten terms kept are then below 1e-17 relative."""


def _poly(coefficients: tuple[float, ...], w: float) -> float:
    """sum(c_k w^k, k = 0..) by Horner's rule."""
    acc = 0.0
    for c in reversed(coefficients):
        acc = acc * w + c
    return acc


# --- vectorising ------------------------------------------------------------------------


def _elementwise(fn: Callable[..., float], *args: float | Array) -> float | Array:
    """``fn`` of floats; of arrays (or a mix), element by element after broadcasting."""
    if not any(isinstance(a, np.ndarray) for a in args):
        return fn(*(float(a) for a in args))
    arrays = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in args))
    columns = [a.ravel().tolist() for a in arrays]
    out = np.fromiter(map(fn, *columns), dtype=float, count=arrays[0].size)
    return out.reshape(arrays[0].shape)


# --- normal -----------------------------------------------------------------------------


def _ndtr(x: float) -> float:
    return 0.5 * math.erfc(-x * _SQRT_HALF)


def _ndtri_lower(q: float) -> float:
    """The normal quantile of 0 < q <= 0.5."""
    if q == 0.5:
        return 0.0
    if q > 0.4:
        x = (q - 0.5) * _SQRT_2PI
    else:  # Abramowitz-Stegun 26.2.23 (absolute error below 4.5e-4)
        t = math.sqrt(-2.0 * math.log(q))
        num = 2.515517 + t * (0.802853 + t * 0.010328)
        den = 1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))
        x = num / den - t
    central = q > 0.2
    for _ in range(10):
        # ndtr(x) - q: on erf near the median (q - 0.5 is exact there), else on erfc
        r = 0.5 * math.erf(x * _SQRT_HALF) - (q - 0.5) if central else _ndtr(x) - q
        pdf = math.exp(-0.5 * x * x) / _SQRT_2PI
        if pdf == 0.0:
            break
        u = r / pdf
        step = u / (1.0 + 0.5 * x * u)  # Halley: f''/f' = -x
        x -= step
        if abs(step) <= 4.0 * _EPS * abs(x):
            break
    return x


def _ndtri(p: float) -> float:
    if not 0.0 <= p <= 1.0:  # nan included
        return math.nan
    if p == 0.0:
        return -math.inf
    if p == 1.0:
        return math.inf
    if p > 0.5:
        return -_ndtri_lower(1.0 - p)  # 1 - p is exact for p >= 0.5
    return _ndtri_lower(p)


@overload
def ndtr(x: float) -> float: ...
@overload
def ndtr(x: Array) -> Array: ...
def ndtr(x: float | Array) -> float | Array:
    """The standard normal CDF."""
    return _elementwise(_ndtr, x)


@overload
def ndtri(p: float) -> float: ...
@overload
def ndtri(p: Array) -> Array: ...
def ndtri(p: float | Array) -> float | Array:
    """The standard normal quantile (inverse of :func:`ndtr`)."""
    return _elementwise(_ndtri, p)


# --- gamma and beta functions -----------------------------------------------------------


def _stirling_error(z: float) -> float:
    """log Gamma(z) - ((z - 1/2) log z - z + log sqrt(2 pi)), for z > 0."""
    if z >= 10.0:
        return _poly(_STIRLING, 1.0 / (z * z)) / z
    return math.lgamma(z) - (z - 0.5) * math.log(z) + z - _LN_SQRT_2PI


def _power_of_ratio(a: float, r: float, u: float) -> tuple[float, float]:
    """(r^a, a log r) where r = 1 + u / a: near r = 1 by log1p of u (known to more digits
    than r - 1), elsewhere by pow, exact to an ulp where exp(a log r) would carry the
    rounding of a log r, eps |a log r|, into a tail probability. The power is nan where
    pow under- or overflows: the caller then uses the log."""
    if 0.5 < r < 2.0:
        log_power = a * math.log1p(u / a)
        return math.exp(log_power), log_power
    log_power = a * math.log(r)
    try:
        power = r**a
    except OverflowError:
        return math.nan, log_power
    return (power if 0.0 < power < math.inf else math.nan), log_power


def _beta_front(a: float, b: float, x: float, y: float) -> float:
    """x^a y^b / B(a, b) for 0 < x, y and x + y = 1, by Stirling's series: no digits lost to
    cancelling log Gammas when a or b is large, nor to x^a when x is near 1 (taken from y).
    Exact to about 1e-15 relative (the Stirling corrections of arguments below 10 come from
    math.lgamma, to about 2e-15 absolute)."""
    c = a + b
    u = b * x - a * y  # = a (x c / a - 1) = -b (y c / b - 1)
    p1, log1 = _power_of_ratio(a, x * c / a, u)
    p2, log2 = _power_of_ratio(b, y * c / b, -u)
    log_rest = _stirling_error(c) - _stirling_error(a) - _stirling_error(b)
    rest = math.exp(log_rest) * math.sqrt(a / c * b / (2.0 * math.pi))
    front = p1 * p2 * rest
    if 0.0 < front < math.inf:  # nan included
        return front
    return math.exp(log1 + log2 + log_rest + 0.5 * math.log(a / c * b / (2.0 * math.pi)))


def _beta_fraction(a: float, b: float, x: float, y: float) -> float:
    """The continued fraction f of I_x(a, b) = front / f (DiDonato and Morris, ACM TOMS 18,
    1992, eq. 2.13: the even part of Abramowitz-Stegun 26.5.8), by the modified Lentz method.

    Written with y = 1 - x apart, it never forms 1 - x: for large a and x near 1 (Student's t
    with many degrees of freedom) the plain fraction loses as many digits as 1 - x has
    leading zeros. Converges fast for x < (a + 1) / (a + b + 2).
    """
    lean = a * y - b * x  # a y - b x, exact to its rounding
    f = a * (lean + 1.0) / (a + 1.0)
    f = f if abs(f) > _TINY else _TINY
    c, d = f, 0.0
    for m in range(1, _MAX_TERMS):
        k = a + 2.0 * m - 1.0
        alpha = (a + m - 1.0) * (a + b + m - 1.0) * m * (b - m) * x * x / (k * k)
        beta = m + m * (b - m) * x / k + (a + m) * (lean + 1.0 + m * (1.0 + y)) / (k + 2.0)
        d = beta + alpha * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = beta + alpha / c
        c = c if abs(c) > _TINY else _TINY
        delta = c * d
        f *= delta
        if abs(delta - 1.0) <= 2.0 * _EPS:
            break
    return f


def _ibeta(a: float, b: float, x: float, y: float) -> tuple[float, float, float]:
    """(I_x(a, b), I_y(b, a) = 1 - I_x(a, b), x^a y^b / B(a, b)) for a, b > 0, x, y >= 0 with
    x + y = 1 (each passed exactly). The one of the first two that the continued fraction
    gives directly has full relative precision, the other is 1 minus it."""
    if x <= 0.0:
        return 0.0, 1.0, 0.0
    if y <= 0.0:
        return 1.0, 0.0, 0.0
    front = _beta_front(a, b, x, y)
    if x * (a + b + 2.0) < a + 1.0:
        direct = front / _beta_fraction(a, b, x, y)
        return direct, 1.0 - direct, front
    direct = front / _beta_fraction(b, a, y, x)
    return 1.0 - direct, direct, front


def _gamma_front(a: float, x: float) -> float:
    """x^a e^-x / Gamma(a) for a, x > 0, by Stirling's series (exact near x = a)."""
    d = (x - a) / a
    lead = a * (math.log1p(d) - d) if -0.5 < d < 1.0 else a * math.log(x / a) + a - x
    return math.exp(lead - _stirling_error(a)) * math.sqrt(a / (2.0 * math.pi))


def _igamma(a: float, x: float) -> tuple[float, float, float]:
    """(P(a, x), Q(a, x) = 1 - P, x^a e^-x / Gamma(a)) for a > 0, x >= 0: the series below
    x = a + 1 gives P, the continued fraction above gives Q, each to full precision."""
    if x <= 0.0:
        return 0.0, 1.0, 0.0
    if math.isinf(x):
        return 1.0, 0.0, 0.0
    front = _gamma_front(a, x)
    if x < a + 1.0:
        total, term, n = 1.0, 1.0, a
        for _ in range(_MAX_TERMS):
            n += 1.0
            term *= x / n
            total += term
            if term <= _EPS * total:
                break
        lower = front * total / a
        return lower, 1.0 - lower, front
    # Legendre's continued fraction for Q, modified Lentz
    b = x + 1.0 - a
    c = 1.0 / _TINY
    d = 1.0 / b
    h = d
    for i in range(1, _MAX_TERMS):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = b + an / c
        c = c if abs(c) > _TINY else _TINY
        delta = c * d
        h *= delta
        if abs(delta - 1.0) <= 2.0 * _EPS:
            break
    upper = front * h
    return 1.0 - upper, upper, front


def _gammainc(a: float, x: float) -> float:
    if math.isnan(a) or math.isnan(x) or a <= 0.0 or x < 0.0:
        return math.nan
    return _igamma(a, x)[0]


def _gammaincc(a: float, x: float) -> float:
    if math.isnan(a) or math.isnan(x) or a <= 0.0 or x < 0.0:
        return math.nan
    return _igamma(a, x)[1]


@overload
def gammainc(a: float, x: float) -> float: ...
@overload
def gammainc(a: Array, x: float | Array) -> Array: ...
@overload
def gammainc(a: float | Array, x: Array) -> Array: ...
def gammainc(a: float | Array, x: float | Array) -> float | Array:
    """The regularised lower incomplete gamma function P(a, x)."""
    return _elementwise(_gammainc, a, x)


@overload
def gammaincc(a: float, x: float) -> float: ...
@overload
def gammaincc(a: Array, x: float | Array) -> Array: ...
@overload
def gammaincc(a: float | Array, x: Array) -> Array: ...
def gammaincc(a: float | Array, x: float | Array) -> float | Array:
    """The regularised upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return _elementwise(_gammaincc, a, x)


# --- root finding -----------------------------------------------------------------------


def _solve_log(fn: Callable[[float], tuple[float, float]], s: float) -> float:
    """The root s > 0 of a decreasing residual, by Newton's method in ``log s``.

    ``fn(s)`` returns (R, dR/dlog s) with R of the form log(F(s) / target): nearly linear in
    log s in a power-law or normal tail, so a few steps from a good start reach the last
    digit. Every evaluation shrinks a bracket; a step that would leave it bisects instead.
    """
    lo, hi = 0.0, math.inf
    for _ in range(200):
        r, slope = fn(s)
        if r == 0.0:
            return s
        if r > 0.0:
            lo = s
        else:
            hi = s
        if math.isinf(r):  # the CDF underflowed: far beyond the root, on r's side
            step = -50.0 if r > 0.0 else 50.0
        else:
            step = r / slope if slope < 0.0 and math.isfinite(slope) else math.nan
        if abs(step) <= 1e-10:
            return s * math.exp(-step)
        new = s * math.exp(-min(max(step, -50.0), 50.0))  # nan stays nan
        if not lo < new < hi:
            if hi == math.inf:
                new = 1e10 * max(s, lo, 1.0)
            elif lo == 0.0:
                new = 1e-10 * min(s, hi)
            else:
                new = math.sqrt(lo * hi)
        if hi < math.inf and hi - lo <= 4.0 * _EPS * hi:
            return new
        s = new
    return s


def _log_ratio(num: float, den: float, front: float) -> tuple[float, float]:
    """(log(num / den), -front / num) for :func:`_solve_log`: +-inf where num or den
    underflowed to 0 (the step then points the right way, by at most e^50)."""
    if num <= 0.0 or den <= 0.0:
        return (-math.inf if num <= 0.0 else math.inf), math.nan
    return math.log(num / den), -front / num


# --- Student's t ------------------------------------------------------------------------


def _t_parts(df: float, s: float) -> tuple[float, float, float]:
    """(P(T < -s), P(-s < T < 0), s times the density at s) for 0 <= s < inf."""
    a = 0.5 * df
    if s > 1e150:  # s^2 overflows: the leading term of the tail, exact to 1e-300
        log_beta = math.lgamma(a) + _LN_SQRT_PI - math.lgamma(a + 0.5)
        try:  # (df / s^2)^a by pow where it neither under- nor overflows
            front = df**a * s**-df * math.exp(-log_beta)
        except OverflowError:
            front = 0.0
        if not 0.0 < front < math.inf:
            front = math.exp(a * (math.log(df) - 2.0 * math.log(s)) - log_beta)
        tail = 0.5 * front / a
        return tail, 0.5 - tail, front
    s2 = s * s
    if s2 > df:
        r = df / s2
        x, y = r / (1.0 + r), 1.0 / (1.0 + r)
    else:
        r = s2 / df
        x, y = 1.0 / (1.0 + r), r / (1.0 + r)
    i, j, front = _ibeta(a, 0.5, x, y)
    return 0.5 * i, 0.5 * j, front  # d I_x / d log s = -2 front


def _stdtr(df: float, t: float) -> float:
    if math.isnan(df) or math.isnan(t) or df <= 0.0:
        return math.nan
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    if math.isinf(df):
        return _ndtr(t)
    tail, centre, _ = _t_parts(df, abs(t))
    return tail if t < 0.0 else 0.5 + centre


def _t_start(df: float, q: float) -> float:
    """A start for s with P(T < -s) = q <= 0.5: exact for df 1 and 2, else Hill's algorithm
    396 (Comm. ACM 13, 1970), good to about 1e-5 relative."""
    if df == 1.0:
        return 1.0 / math.tan(math.pi * q)
    if df == 2.0:
        return (1.0 - 2.0 * q) / math.sqrt(2.0 * q * (1.0 - q))
    if df < 1.0:
        return 1.0
    two_sided = 2.0 * q
    a = 1.0 / (df - 0.5)
    b = 48.0 / (a * a)
    c = ((20700.0 * a / b - 98.0) * a - 16.0) * a + 96.36
    d = ((94.5 / (b + c) - 3.0) / b + 1.0) * math.sqrt(a * math.pi / 2.0) * df
    y = (d * two_sided) ** (2.0 / df)
    if y > 0.05 + a:  # an expansion about the normal quantile
        x = _ndtri_lower(q)
        y = x * x
        if df < 5.0:
            c += 0.3 * (df - 4.5) * (x + 0.6)
        c = (((0.05 * d * x - 5.0) * x - 7.0) * x - 2.0) * x + b + c
        y = (((((0.4 * y + 6.3) * y + 36.0) * y + 94.5) / c - y - 3.0) / b + 1.0) * x
        y = math.expm1(a * y * y)
    elif y > 0.0:  # the far tail
        inner = ((df + 6.0) / (df * y) - 0.089 * d - 0.822) * (df + 2.0) * 3.0
        y = ((1.0 / inner + 0.5 / (df + 4.0)) * y - 1.0) * (df + 1.0) / (df + 2.0) + 1.0 / y
    start = math.sqrt(df * y) if y > 0.0 else math.nan
    return start if math.isfinite(start) and start > 0.0 else 1.0


@lru_cache(maxsize=4096)
def _t_quantile(df: float, q: float) -> float:
    """s > 0 with P(T < -s) = q, for 0 < q < 0.5 and finite df > 0."""
    central = q >= 0.25
    half = 0.5 - q  # exact for q >= 0.25

    def residual(s: float) -> tuple[float, float]:
        tail, centre, front = _t_parts(df, s)
        if central:  # log(P(-s < T < 0) / (1/2 - q)), increasing: negated
            r, slope = _log_ratio(centre, half, front)
            return -r, slope
        return _log_ratio(tail, q, front)

    return _solve_log(residual, _t_start(df, q))


def _stdtrit(df: float, p: float) -> float:
    if math.isnan(df) or df <= 0.0 or not 0.0 <= p <= 1.0:
        return math.nan
    if p == 0.0:
        return -math.inf
    if p == 1.0:
        return math.inf
    if p == 0.5:
        return 0.0
    if math.isinf(df):
        return _ndtri(p)
    if p < 0.5:
        return -_t_quantile(df, p)
    return _t_quantile(df, 1.0 - p)  # exact: symmetric to the last bit


@overload
def stdtr(df: float, t: float) -> float: ...
@overload
def stdtr(df: Array, t: float | Array) -> Array: ...
@overload
def stdtr(df: float | Array, t: Array) -> Array: ...
def stdtr(df: float | Array, t: float | Array) -> float | Array:
    """Student's t CDF with ``df`` (> 0, not necessarily whole, inf: normal) degrees of
    freedom, at ``t``."""
    return _elementwise(_stdtr, df, t)


@overload
def stdtrit(df: float, p: float) -> float: ...
@overload
def stdtrit(df: Array, p: float | Array) -> Array: ...
@overload
def stdtrit(df: float | Array, p: Array) -> Array: ...
def stdtrit(df: float | Array, p: float | Array) -> float | Array:
    """Student's t quantile: ``t`` with ``stdtr(df, t) == p``."""
    return _elementwise(_stdtrit, df, p)


# --- F and chi-square -------------------------------------------------------------------


def _fdtrc(d1: float, d2: float, f: float) -> float:
    if not (0.0 < d1 < math.inf and 0.0 < d2 < math.inf) or math.isnan(f) or f < 0.0:
        return math.nan
    if f == math.inf:
        return 0.0
    scaled = d1 * f
    if scaled > d2:
        r = d2 / scaled
        x, y = r / (1.0 + r), 1.0 / (1.0 + r)
    else:
        r = scaled / d2
        x, y = 1.0 / (1.0 + r), r / (1.0 + r)
    return _ibeta(0.5 * d2, 0.5 * d1, x, y)[0]


@overload
def fdtrc(d1: float, d2: float, f: float) -> float: ...
@overload
def fdtrc(d1: Array, d2: float | Array, f: float | Array) -> Array: ...
@overload
def fdtrc(d1: float | Array, d2: Array, f: float | Array) -> Array: ...
@overload
def fdtrc(d1: float | Array, d2: float | Array, f: Array) -> Array: ...
def fdtrc(d1: float | Array, d2: float | Array, f: float | Array) -> float | Array:
    """The F distribution's survival function P(F > f) with (d1, d2) degrees of freedom."""
    return _elementwise(_fdtrc, d1, d2, f)


def _chi2_start(df: float, p: float) -> float:
    """A start for g = x / 2 with Q(df / 2, g) = p: Wilson-Hilferty, or the lower tail's
    leading term P(a, g) ~ g^a / Gamma(a + 1) where that gives nonsense (small df, p near 1)."""
    a = 0.5 * df
    w = 2.0 / (9.0 * df)
    z = -_ndtri(p)
    cube = 1.0 - w + z * math.sqrt(w)
    if cube > 0.0:
        g = 0.5 * df * cube**3
        if g > 0.1 * a or p < 0.5:
            return g
    lower = 1.0 - p
    return math.exp((math.log(lower) + math.lgamma(a + 1.0)) / a)


@lru_cache(maxsize=1024)
def _chi2_quantile(df: float, p: float) -> float:
    a = 0.5 * df
    upper_target = p <= 0.5
    lower = 1.0 - p  # exact for p >= 0.5

    def residual(g: float) -> tuple[float, float]:
        low, up, front = _igamma(a, g)
        if upper_target:  # log(Q / p)
            return _log_ratio(up, p, front)
        r, slope = _log_ratio(low, lower, front)  # log(P / (1 - p)), increasing: negated
        return -r, slope

    return 2.0 * _solve_log(residual, _chi2_start(df, p))


def _chdtri(df: float, p: float) -> float:
    if not 0.0 < df < math.inf or not 0.0 <= p <= 1.0:
        return math.nan
    if p == 0.0:
        return math.inf
    if p == 1.0:
        return 0.0
    return _chi2_quantile(df, p)


@overload
def chdtri(df: float, p: float) -> float: ...
@overload
def chdtri(df: Array, p: float | Array) -> Array: ...
@overload
def chdtri(df: float | Array, p: Array) -> Array: ...
def chdtri(df: float | Array, p: float | Array) -> float | Array:
    """The inverse of the chi-square survival function: ``x`` with P(X > x) = p."""
    return _elementwise(_chdtri, df, p)


# --- noncentral t -----------------------------------------------------------------------


def _nct_upper_sum(df: float, nc: float, t: float) -> float:
    """P(T <= t) for the noncentral t with t > 0 (Lenth, AS 243):

    Phi(-nc) + 1/2 sum_j [P_j I_x(j + 1/2, df / 2) + sign(nc) W_j I_x(j + 1, df / 2)], with
    x = t^2 / (t^2 + df), mu = nc^2 / 2, P_j = e^-mu mu^j / j! and
    W_j = e^-mu mu^(j + 1/2) / Gamma(j + 3/2): summed from the largest weights outwards.
    """
    b = 0.5 * df
    t2 = t * t
    if t2 > df:
        r = df / t2
        x, y = 1.0 / (1.0 + r), r / (1.0 + r)
    else:
        r = t2 / df
        x, y = r / (1.0 + r), 1.0 / (1.0 + r)
    mu = 0.5 * nc * nc
    sign = 1.0 if nc >= 0.0 else -1.0
    j0 = int(mu)
    if mu > 0.0:
        log_mu = math.log(mu)
        p0 = math.exp(-mu + j0 * log_mu - math.lgamma(j0 + 1.0))
        w0 = math.exp(-mu + (j0 + 0.5) * log_mu - math.lgamma(j0 + 1.5))
    else:
        p0, w0 = 1.0, 0.0
    ia0, _, fa0 = _ibeta(j0 + 0.5, b, x, y)
    ib0, _, fb0 = _ibeta(j0 + 1.0, b, x, y)
    total = p0 * ia0 + sign * w0 * ib0
    # upwards: I_x(a + 1, b) = I_x(a, b) - front(a) / a, front(a + 1) = front(a) x (a + b) / a
    # (The clamps are spelt as conditionals, not max() and min(): the same values, and the
    # power search of perfgate.stats.paired runs these loops tens of thousands of times.)
    pj, wj, ia, ib, fa, fb = p0, w0, ia0, ib0, fa0, fb0
    for j in range(j0, j0 + _MAX_TERMS):
        a, c = j + 0.5, j + 1.0
        ia -= fa / a
        if ia < 0.0:
            ia = 0.0
        fa *= x * (a + b) / a
        ib -= fb / c
        if ib < 0.0:
            ib = 0.0
        fb *= x * (c + b) / c
        pj *= mu / c
        wj *= mu / (j + 1.5)
        total += pj * ia + sign * wj * ib
        ratio = mu / (j + 2.0)
        if ratio < 1.0 and (pj + wj) * (ib if ib > ia else ia) * ratio / (1.0 - ratio) <= 1e-17:
            break
    # downwards: I_x(a - 1, b) = I_x(a, b) + front(a - 1) / (a - 1)
    pj, wj, ia, ib, fa, fb = p0, w0, ia0, ib0, fa0, fb0
    for j in range(j0 - 1, -1, -1):
        a, c = j + 0.5, j + 1.0
        fa *= a / (x * (a + b))
        ia += fa / a
        if ia > 1.0:
            ia = 1.0
        fb *= c / (x * (c + b))
        ib += fb / c
        if ib > 1.0:
            ib = 1.0
        pj *= c / mu
        wj *= (j + 1.5) / mu
        total += pj * ia + sign * wj * ib
        ratio = a / mu
        if (pj + wj) * ratio / (1.0 - ratio) <= 1e-17:
            break
    return min(max(_ndtr(-nc) + 0.5 * total, 0.0), 1.0)


def _nctdtr(df: float, nc: float, t: float) -> float:
    if math.isnan(df) or math.isnan(nc) or math.isnan(t) or df <= 0.0 or math.isinf(nc):
        return math.nan
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    if math.isinf(df):
        return _ndtr(t - nc)
    if t * t == 0.0:  # x = t^2 / (t^2 + df) is 0
        return _ndtr(-nc)
    if t > 0.0:
        return _nct_upper_sum(df, nc, t)
    return 1.0 - _nct_upper_sum(df, -nc, -t)


@overload
def nctdtr(df: float, nc: float, t: float) -> float: ...
@overload
def nctdtr(df: Array, nc: float | Array, t: float | Array) -> Array: ...
@overload
def nctdtr(df: float | Array, nc: Array, t: float | Array) -> Array: ...
@overload
def nctdtr(df: float | Array, nc: float | Array, t: Array) -> Array: ...
def nctdtr(df: float | Array, nc: float | Array, t: float | Array) -> float | Array:
    """The noncentral t CDF with ``df`` degrees of freedom and noncentrality ``nc`` at ``t``.

    Accurate in absolute terms (about 1e-15 for |nc| below 10, 1e-13 up to 40), as a power
    calculation needs; a probability far below that carries no relative accuracy.
    """
    return _elementwise(_nctdtr, df, nc, t)


# --- polygamma --------------------------------------------------------------------------


def _cot_pi(x: float) -> float:
    r = x - math.floor(x)  # cot(pi x) has period 1
    return math.cos(math.pi * r) / math.sin(math.pi * r)


def _digamma(x: float) -> float:
    if math.isnan(x):
        return math.nan
    if x <= 0.0:
        if x == 0.0:
            return -math.inf
        if x == math.floor(x):
            return math.nan
        return _digamma(1.0 - x) - math.pi * _cot_pi(x)
    acc = 0.0
    while x < _ASYMPTOTIC_FROM:
        acc -= 1.0 / x
        x += 1.0
    if math.isinf(x):
        return math.inf
    w = 1.0 / (x * x)
    return acc + math.log(x) - 0.5 / x - w * _poly(_DIGAMMA, w)


def _trigamma(x: float) -> float:
    if math.isnan(x):
        return math.nan
    if x <= 0.0:
        if x == math.floor(x):
            return math.inf
        sin = math.sin(math.pi * (x - math.floor(x)))
        return math.pi * math.pi / (sin * sin) - _trigamma(1.0 - x)
    acc = 0.0
    while x < _ASYMPTOTIC_FROM:
        acc += 1.0 / (x * x)
        x += 1.0
    w = 1.0 / (x * x)
    return acc + (1.0 + (0.5 + _poly(_TRIGAMMA, w) / x) / x) / x


def _tetragamma(x: float) -> float:
    if math.isnan(x):
        return math.nan
    if x <= 0.0:
        if x == math.floor(x):
            return -math.inf if x == 0.0 else math.nan
        r = x - math.floor(x)
        sin = math.sin(math.pi * r)
        reflected = 2.0 * math.pi**3 * math.cos(math.pi * r) / sin**3
        return _tetragamma(1.0 - x) - reflected
    acc = 0.0
    while x < _ASYMPTOTIC_FROM:
        acc -= 2.0 / (x * x * x)
        x += 1.0
    w = 1.0 / (x * x)
    return acc - (1.0 + (1.0 + _poly(_TETRAGAMMA, w) / x) / x) / (x * x)


@overload
def digamma(x: float) -> float: ...
@overload
def digamma(x: Array) -> Array: ...
def digamma(x: float | Array) -> float | Array:
    """The digamma function psi(x) = d/dx log Gamma(x)."""
    return _elementwise(_digamma, x)


_POLYGAMMA: dict[int, Callable[[float], float]] = {0: _digamma, 1: _trigamma, 2: _tetragamma}


@overload
def polygamma(n: int, x: float) -> float: ...
@overload
def polygamma(n: int, x: Array) -> Array: ...
def polygamma(n: int, x: float | Array) -> float | Array:
    """The n-th derivative of :func:`digamma`, for n = 0, 1, 2.

    Raises:
        ValueError: another order.
    """
    fn = _POLYGAMMA.get(n)
    if fn is None:
        raise ValueError(f"polygamma of order {n} is not implemented (0, 1 and 2 are)")
    return _elementwise(fn, x)
