"""Sequential confirmation: extra repeats folded in one at a time, without inflating the
false-alarm rate.

A gate that says ``inconclusive`` (or a regression someone wants confirmed) can buy more
repeats. Looking at the data after every extra repeat and stopping at the first
significant look would, uncorrected, raise the false-alarm rate with every look. perfgate
spends its alpha over the looks with the Lan–DeMets O'Brien–Fleming-type spending function

    alpha(t) = 2 * (1 - Phi(z_{1-alpha/2} / sqrt(t))),   t = repeats so far / most repeats,

and tests look i at the increment alpha(t_i) - alpha(t_{i-1}) (the look at the original run,
t_0, rejects nothing, so its share is handed on). The increments add up to alpha, so by the
union bound the chance of any false alarm over all looks is at most alpha, whatever the
correlation between looks. Early looks get very little alpha: stopping early needs strong
evidence, and the last look gets most of it.
"""

from __future__ import annotations

from scipy import special

from perfgate.stats.decide import ALPHA


def _phi(x: float) -> float:
    return float(special.ndtr(x))


def spent(t: float, alpha: float = ALPHA) -> float:
    """Cumulative alpha spent at information fraction ``t`` (0 < t <= 1)."""
    if t <= 0:
        return 0.0
    z = float(special.ndtri(1.0 - alpha / 2.0))
    return 2.0 * (1.0 - _phi(z / min(t, 1.0) ** 0.5))


def look_alpha(
    look: int, *, initial_repeats: int, extra_repeats: int, alpha: float = ALPHA
) -> float:
    """The significance level of look ``look`` (1-based: after ``look`` extra repeats)."""
    if not 1 <= look <= extra_repeats:
        raise ValueError(f"look must be in 1..{extra_repeats}, got {look}")
    total = initial_repeats + extra_repeats
    t_now = (initial_repeats + look) / total
    t_before = 0.0 if look == 1 else (initial_repeats + look - 1) / total
    return spent(t_now, alpha) - spent(t_before, alpha)
