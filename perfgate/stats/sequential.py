"""Confirmation (``run --confirm N``): extra repeats that can only add detections, at the
false-alarm rate of not confirming.

Why the rule before this one lost power: it spent alpha over the looks (O'Brien-Fleming
type), handed the original run's share on and let the last look decide. Extra repeats run in
the same CI job and share its job factor, so they shrink only the process part of the run's
noise while the level shrank for every look: under job-level noise, true 10% slowdowns
flagged by the plain gate 73% of the time were flagged 61-67% of the time after confirming.

The model. The original run (n0 repeats) is look 0; the confirmation is one more look, at
the run with all n = n0 + N repeats. Under no change, on each look's own noise scale,

    X_i = (log median of the run's first n_i repeats - log baseline median) / sd_i,
    sd_i^2 = job + process * v(n_i) + baseline,

with ``job`` the run-to-run variance all repeats of one job share (counted once),
``process`` the variance of one repeat around its job, ``v(n)`` the variance of the median
of n unit values and ``baseline`` that of the window's median, all on the ratio (log) scale.
This is how ``compare_candidates`` scales a run with its own repeat count (compare.py, noise
components), so a look judged there is a test of X_i. X1 contains X0's job and baseline
terms, and corr(X0, X1) = sd1 / sd0 = rho (:func:`look_correlation`: both SDs from compare's
own estimates, :func:`perfgate.stats.compare.change_sd`, so a time and its throughput get
one rho; 1 when job noise dominates, lower the more the process part counts).

The rule, per noisy metric of a gate of m:

1. One critical value ``c`` for both looks, with P(X0 > c or X1 > c) = q on the regression
   side, q = ALPHA / 2m: what the plain gate spends on a lone test (Benjamini-Hochberg asks
   p <= ALPHA / m of it). Both looks are judged at the level of ``c`` (:func:`look_level`);
   a benchmark's looks at the lowest level of its metrics (repeats extend them all).
2. Look 0 decides what it can: a benchmark with a regression at look 0 keeps it and is not
   confirmed; one with an inconclusive metric gets the N repeats, and the run with all of
   them is judged at the same level (:func:`needs_confirming`). So confirming never turns a
   look-0 regression into a pass, and can only add detections.
3. No confirmation where it cannot gain: when the extra repeats would cut every metric's
   prediction variance by less than MIN_VARIANCE_CUT (1 - rho^2; job noise dominates: rerun
   in a fresh job, or measure A/B), or the window cannot split job from process noise. Look
   0 then keeps ALPHA: the gate is the plain one. A metric without a rho in a benchmark that
   is confirmed gets ALPHA / 2 for each look (Bonferroni, valid at any correlation).

False alarms. A metric with no change is called a regression only if X0 > c or X1 > c, so
with probability at most q: look 0's share P(X0 > c) plus the confirmation's share
P(X0 <= c, X1 > c) add up to ALPHA (:func:`false_alarm_shares`), whatever the effect size
of the other metrics. Confirming only the inconclusive benchmarks only removes events from
that union. A benchmark left unconfirmed is gated at ALPHA later; that adds nothing: a
metric significant at ALPHA but not at ``c``, with at least the minimum effect, is
inconclusive at ``c``, so its benchmark is confirmed. Calibrating at the lone test's level is
the strict end: the tighter the threshold, the less two correlated looks overlap.

Power. At rho = 1 the two looks are one test and ``c`` is the plain gate's. Below it, the
union of both looks at the common ``c`` rejects at least as often as look 0 alone at the
plain threshold, at every effect size (bivariate normal; e.g. rho 0.94, m 20: 73% -> 79%,
50% -> 57%), because the final look has the smaller noise. ``bench/confirm.py`` measures
false alarms and power through ``compare_candidates`` with simulated job + process noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from perfgate.models import Comparison, RunPoint, Verdict
from perfgate.stats.compare import change_sd
from perfgate.stats.decide import ALPHA, deciding, second_look

MIN_VARIANCE_CUT = 0.02
"""Confirm only when the extra repeats cut the run's prediction variance by this share."""
MIN_RUNS = 3
"""Baseline runs with at least two repeats needed to split job from process noise."""


def look_correlation(
    baseline: Sequence[RunPoint], *, initial_repeats: int, extra_repeats: int
) -> float | None:
    """corr(X0, X1) = sd1 / sd0 of the module docstring, from the baseline window: each
    look's SD as the comparison will judge it (:func:`perfgate.stats.compare.change_sd`:
    compare's noise components on the ratio scale, its F test and pooling), so the looks'
    correlation and their tests come from one noise model.

    ``None`` when the window cannot split job from process noise (fewer than MIN_RUNS runs
    with two repeats or more) or shows no noise at all.
    """
    if initial_repeats < 1 or extra_repeats < 1:
        raise ValueError("initial and extra repeats must be at least 1")
    if sum(1 for p in baseline if len(p.repeat_centres) >= 2) < MIN_RUNS:
        return None
    sd0 = change_sd(baseline, repeats=initial_repeats)
    sd1 = change_sd(baseline, repeats=initial_repeats + extra_repeats)
    if not sd0 > 0:
        return None
    return min(sd1 / sd0, 1.0)


def _tail(z: float) -> float:
    from scipy import special  # here, not above: 0.2 s of import (test_import_cost.py)

    return float(special.ndtr(-z))


def _both_above(c0: float, c1: float, rho: float) -> float:
    """P(X0 > c0 and X1 > c1) for standard normals with correlation ``rho`` (0 <= rho < 1)."""
    from scipy import integrate  # here: only a confirmation needs it (0.4 s of imports)

    s = math.sqrt(1.0 - rho * rho)

    def density(x: float) -> float:
        return math.exp(-x * x / 2.0) / math.sqrt(2.0 * math.pi) * _tail((c1 - rho * x) / s)

    value, _ = integrate.quad(density, c0, math.inf, epsabs=1e-14, epsrel=1e-10)
    return float(value)


def _union(c0: float, c1: float, rho: float) -> float:
    """P(X0 > c0 or X1 > c1)."""
    if rho >= 1.0:
        return _tail(min(c0, c1))
    return _tail(c0) + _tail(c1) - _both_above(c0, c1, rho)


def _lone_level(alpha: float, tests: int) -> float:
    """One-sided tail a lone change must reach in a gate of ``tests`` metrics at ``alpha``."""
    return alpha / (2.0 * max(tests, 1))


def pairs_correlation(initial: int, extra: int) -> float:
    """corr(X0, X1) for a paired A/B test extended by ``extra`` pairs: the looks' statistics
    are means of independent pair ratios, so rho = sqrt(n0 / n) (``check --mode ab``)."""
    return math.sqrt(initial / (initial + extra))


def look_level(rho: float | None, *, tests: int, alpha: float = ALPHA) -> float:
    """The level both looks of one metric are judged at: the common critical value ``c``
    with P(X0 > c or X1 > c) = q, as a level of ``compare_candidates``. Unknown ``rho``:
    alpha / 2 (Bonferroni: two looks at alpha / 2 stay within alpha at any correlation)."""
    if rho is None:
        return alpha / 2.0
    if rho >= 1.0:
        return alpha  # the two looks are one test
    from scipy import optimize, special  # here: only a confirmation needs them

    q = _lone_level(alpha, tests)
    low = float(special.ndtri(1.0 - q))
    c = float(optimize.brentq(lambda z: _union(z, z, rho) - q, low, low + 2.0, xtol=1e-12))
    return alpha * _tail(c) / q


@dataclass(frozen=True)
class ConfirmPlan:
    """How ``run --confirm`` treats one benchmark: whether to confirm it and at what level
    both looks are judged (``alpha``; ALPHA when it is not confirmed, ``reason`` says why)."""

    confirm: bool
    alpha: float
    rho: float | None
    reason: str = ""


def plan(rhos: Sequence[float | None], *, tests: int, alpha: float = ALPHA) -> ConfirmPlan:
    """The plan for a benchmark whose noisy metrics have look correlations ``rhos``, in a
    gate of ``tests`` noisy metrics.

    Extra repeats extend every metric of a run, so both looks are judged at the lowest of the
    metrics' levels: every metric's union stays within its own budget.
    """
    known = [r for r in rhos if r is not None]
    if not rhos:
        return ConfirmPlan(False, alpha, None, "no metric with a history to compare")
    if not known:
        return ConfirmPlan(
            False,
            alpha,
            None,
            "the baseline cannot tell process from job noise (fewer than "
            f"{MIN_RUNS} runs of two repeats or more)",
        )
    rho = min(known)
    if 1.0 - rho * rho < MIN_VARIANCE_CUT:
        return ConfirmPlan(
            False,
            alpha,
            rho,
            "job-level noise dominates: more repeats in this job would cut the noise by "
            f"{1.0 - rho * rho:.1%} only; rerun in a fresh job or measure with --ab",
        )
    level = min(look_level(r, tests=tests, alpha=alpha) for r in rhos)
    return ConfirmPlan(True, level, rho)


def false_alarm_shares(
    level: float, rho: float | None, *, tests: int, alpha: float = ALPHA
) -> tuple[float, float]:
    """(look 0's share, the confirmation's share) of the false-alarm budget ``alpha`` for
    both looks at ``level`` with look correlation ``rho`` (``None``: the union bound):
    P(X0 > c) and P(X0 <= c, X1 > c), scaled by alpha / q. For a level from
    :func:`look_level` they add up to ``alpha``."""
    from scipy import special

    q = _lone_level(alpha, tests)
    c = float(special.ndtri(1.0 - _lone_level(level, tests)))
    first = _tail(c)
    rest = first if rho is None else _union(c, c, rho) - first
    return alpha * first / q, alpha * rest / q


def needs_confirming(look0: Sequence[Comparison], *, method: str = "history") -> str:
    """Why a benchmark judged ``look0`` (its comparisons at the plan's level) is not
    confirmed, or '' when it is: a regression at look 0 stands (confirming can only add
    detections), and only an inconclusive comparison (``history``, or ``paired`` for more
    A/B pairs) has anything to gain."""
    if second_look(look0, method=method, regression_stands=True):
        return ""
    mine = deciding(look0)
    if any(c.verdict is Verdict.REGRESSION and c.method == method for c in mine):
        return "regression at look 0 stands (confirming only adds detections)"
    return "nothing to confirm"
