"""Creeping regressions: a series' recent level against its level a long horizon ago.

A change point is a jump between neighbouring runs. A regression that creeps in (8% over 160
runs is 0.05% a run, far below run-to-run noise) has no jump to find, and the gate, whose
baseline window slides along with it, never sees it either. So history analysis also asks
the plain question a team asks: is main slower now than it was a month ago?

Assumptions, in plain words:

* Two blocks of runs are compared: the newest ``BLOCK_RUNS`` runs, and ``BLOCK_RUNS`` runs
  ending at the horizon. The horizon is ``HORIZON_RUNS`` runs or ``HORIZON_DAYS`` days before
  the newest run, whichever is nearer (a nightly job reaches 30 days after 30 runs, a job on
  every commit reaches 200 runs in days); when the history is shorter, its oldest runs.
  At least ``BLOCK_RUNS`` runs must lie between the two blocks (else it is a step, the change
  point search's business), so a series needs ``3 * BLOCK_RUNS`` runs.
* Change points are not drift. Each change point found between the blocks is divided out
  (by the Hodges-Lehmann shift between up to ``LOCAL_RUNS`` runs on either side of it)
  before the blocks are compared, so a step is reported once, as a change point, and a
  drift that a step hides in part is still measured.
* No shape of the noise is assumed: the test uses only the ranks of the runs (Mann-Whitney,
  two-sided), so a 10x spike weighs no more than the slowest ordinary run. Runs need not be
  independent: neighbouring runs that move together (a runner pool, a warm cache) carry less
  evidence than their count, so the variance of the rank statistic is inflated by
  ``(1 + rho) / (1 - rho)``, rho the lag-1 rank autocorrelation of the series around its
  centred running median (clipped to [0, 0.9]), which follows a creep and leaves it out.
* A jump divided out is an estimate, and its error moves the new block as a drift would: a
  load cycle's phase on either side of a step, or a few slow runs there, faked a drift in
  one series in four (bench/drift_shapes.py, cycle+step). Measured on ``w`` runs a side as
  the drift is on ``BLOCK_RUNS``, it has ``BLOCK_RUNS / w`` times the drift's variance. So
  when jumps were divided out the shift must also stand out against the shifts between
  neighbouring blocks of ``BLOCK_RUNS`` runs over the whole series (their spread, by the
  median absolute deviation, is how far two blocks move apart with no change, cycles and
  tails included), that spread widened by ``sqrt(1 + sum(BLOCK_RUNS / w))``; Student's t,
  one degree of freedom fewer than those shifts (under 4 blocks, the rank statistic's
  variance is widened by the same factor instead). Ranks alone cannot do it: two blocks of
  10 runs that do not overlap at all give their smallest p-value, whether 2% or 50% apart.
  The larger of the two p-values is the drift's.
* Size: the Hodges-Lehmann shift of the log values (the median of every recent-minus-old
  difference), in percent. A drift is reported when it is at least ``min_effect_pct`` and its
  p-value is below ``alpha``. ``confidence`` is ``1 - p_value``.
* Where: one ramp between two levels (as the change-point search fits it) placed between the
  blocks names the runs the move happened over; a creep over the whole span names all of it.

Pure: numbers in, a :class:`~perfgate.models.Drift` or None out; deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from perfgate.errors import UsageError
from perfgate.models import Drift
from perfgate.stats.changepoints import ABRUPT_WIDTH, MAD_TO_SD, average_ranks, best_ramp
from perfgate.stats.fdr import benjamini_hochberg
from perfgate.stats.summary import mad

BLOCK_RUNS = 10
"""Runs in each of the two compared blocks (the newest, and those at the horizon)."""
HORIZON_RUNS = 200
"""The horizon in runs: the old block ends this many runs before the newest run..."""
HORIZON_DAYS = 30.0
"""...or this many days before it, whichever is nearer."""
LOCAL_RUNS = 10
"""Runs on either side of a change point whose medians give the step divided out."""
ALPHA = 0.01
"""Largest p-value of a reported drift."""
MIN_EFFECT_PCT = 1.5
"""Smallest drift reported, in percent, unless the metric's minimum effect says otherwise."""
MAX_RHO = 0.9
MIN_RUNS = 3 * BLOCK_RUNS
"""Runs a series needs before its drift is tested (two blocks and one between them)."""


def kept_in_family(p_values: Sequence[float], tested: int, alpha: float = ALPHA) -> list[bool]:
    """Which of the drifts found (their p-values, each already below ``alpha``) a nightly
    analysis reports, when ``tested`` series were tested in it: those whose
    Benjamini-Hochberg adjusted p-value over the whole family is still below ``alpha``.

    Without it a benchmark's 20 noisy series (its metrics and ranks) would report a false
    drift at alpha 0.01 on up to one night in five (1 - 0.99^20). The series tested but not
    found (too small a change, or not significant) count as p = 1: their true p-values are
    unknown here, and 1 is the conservative stand-in (it can only raise the others'
    adjusted values).

    The family is one benchmark's series (:func:`perfgate.app.history.analyze_history`), not
    the whole suite's: the rank test's normal approximation cannot go below p ~ 1.6e-4 with
    two blocks of 10 runs, so over a family of more than ~60 series even a clean 8% creep
    could never be reported.
    """
    if not p_values:
        return []
    padded = [*p_values, *([1.0] * max(0, tested - len(p_values)))]
    adjusted = benjamini_hochberg(padded)
    return [a < alpha for a in adjusted[: len(p_values)]]


def _horizon_end(n: int, ages_days: Sequence[float] | None) -> int:
    """Index of the last run of the old block."""
    newest = n - 1
    by_runs = newest - HORIZON_RUNS
    by_days = -1
    if ages_days is not None:
        old_enough = [i for i in range(n) if ages_days[i] >= HORIZON_DAYS]
        by_days = max(old_enough) if old_enough else -1
    end = max(by_runs, by_days)  # the nearer of the two horizons
    latest_allowed = n - 2 * BLOCK_RUNS - 1  # leave BLOCK_RUNS runs between the blocks
    return min(max(end, BLOCK_RUNS - 1), latest_allowed)


def _divide_out_steps(
    y: np.ndarray, steps: Sequence[int], lo: int, hi: int
) -> tuple[np.ndarray, float]:
    """Log values with every change point in (lo, hi] removed: later runs shifted back by
    the jump across it, the Hodges-Lehmann shift between up to LOCAL_RUNS runs on either
    side; and the jumps' share of the drift's variance, ``sum(BLOCK_RUNS / w)`` over them
    (see the module's assumptions)."""
    out = y.copy()
    share = 0.0
    bounds = [0, *sorted(steps), y.size]
    for a, k, b in zip(bounds, bounds[1:], bounds[2:], strict=False):
        if not lo < k <= hi:
            continue
        w = max(1, min(LOCAL_RUNS, k - a, b - k))
        out[k:] -= _hodges_lehmann(y[k - w : k], y[k : k + w])
        share += BLOCK_RUNS / w
    return out, share


def _residuals(y: np.ndarray) -> np.ndarray:
    """y around its running median, centred on each run: ``2 * BLOCK_RUNS + 1`` runs,
    narrowed near the ends to as many runs on either side as there are.

    A centred median follows a ramp exactly, so a creep is taken out with the level; a
    window cut short at one end lags it, and the runs at both ends of a clean creep then sat
    on one side of their level together, which read as serial dependence (rho near 0.9) and
    hid every large, clean creep.
    """
    n = y.size
    half = np.minimum(BLOCK_RUNS, np.minimum(np.arange(n), np.arange(n)[::-1]))
    level = np.array([np.median(y[i - h : i + h + 1]) for i, h in enumerate(half)])
    out: np.ndarray = y - level
    return out


def _lag1_rank_autocorrelation(resid: np.ndarray) -> float:
    """Lag-1 autocorrelation of the ranks of the residuals: how much neighbouring runs move
    together once the level is taken out."""
    ranks = average_ranks(resid)  # ties share their average rank
    ranks -= ranks.mean()
    denom = float(np.dot(ranks, ranks))
    if denom <= 0.0:
        return 0.0
    return float(np.dot(ranks[1:], ranks[:-1]) / denom)


def _hodges_lehmann(old: np.ndarray, new: np.ndarray) -> float:
    """The median of every new-minus-old difference."""
    return float(np.median(new[:, None] - old[None, :]))


def _t_two_sided(t: float, dof: int) -> float:
    """P(|T| >= t) for Student's t with a whole number of degrees of freedom, in closed form
    (Abramowitz and Stegun 26.7.3-4): ``perfgate detect`` does not load scipy."""
    theta = math.atan(t / math.sqrt(dof))
    c2 = math.cos(theta) ** 2
    term = total = 1.0 if dof % 2 == 0 else math.cos(theta)
    for k in range(2 if dof % 2 == 0 else 3, dof - 1, 2):
        term *= c2 * (k - 1) / k
        total += term
    if dof % 2 == 0:
        inside = math.sin(theta) * total
    else:
        inside = 2.0 / math.pi * (theta + (math.sin(theta) * total if dof > 1 else 0.0))
    return min(1.0, max(0.0, 1.0 - inside))


def _shift_test(shift: float, y: np.ndarray, jumps_share: float) -> float | None:
    """Two-sided p-value of ``shift``, a Hodges-Lehmann shift between two blocks of
    ``BLOCK_RUNS`` runs with jumps divided out of it (their share of its variance
    ``jumps_share``), against the shifts between neighbouring blocks of y: y cut into
    blocks of ``BLOCK_RUNS`` runs from its newest run back, the spread of the shifts from
    each block to the next (their median absolute deviation, as a standard deviation: the
    median shift, a creep's, taken out) is how far two blocks move apart with no change at
    all, whatever the noise's shape and its cycles; Student's t with one degree of freedom
    fewer than the shifts. None when y has fewer than four blocks."""
    start = y.size % BLOCK_RUNS
    blocks = y[start:].reshape(-1, BLOCK_RUNS)
    if blocks.shape[0] < 4:
        return None
    shifts = np.array([_hodges_lehmann(a, b) for a, b in zip(blocks, blocks[1:], strict=False)])
    spread = MAD_TO_SD * mad(shifts)
    scale = spread * math.sqrt(1.0 + jumps_share)
    if scale <= 0.0:
        return 0.0 if shift else 1.0
    return _t_two_sided(abs(shift) / scale, shifts.size - 1)


def _rank_test(old: np.ndarray, new: np.ndarray, inflation: float) -> float:
    """Two-sided Mann-Whitney p-value (normal approximation, tie-corrected), its variance
    multiplied by ``inflation``."""
    m, k = old.size, new.size
    both = np.concatenate((old, new))
    ranks = average_ranks(both)
    u = float(ranks[m:].sum()) - k * (k + 1) / 2.0
    total = m + k
    _, counts = np.unique(both, return_counts=True)
    ties = float(np.sum(counts**3 - counts))
    var = m * k / 12.0 * ((total + 1) - ties / (total * (total - 1)))
    if var <= 0.0:
        return 1.0
    z = (u - m * k / 2.0) / math.sqrt(var * inflation)
    return min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))


def compare_horizon(
    values: Sequence[float],
    *,
    ages_days: Sequence[float] | None = None,
    steps: Sequence[int] = (),
    min_effect_pct: float = MIN_EFFECT_PCT,
    alpha: float = ALPHA,
) -> Drift | None:
    """The drift between the newest runs of ``values`` (oldest first) and those a long
    horizon ago, or None when it is smaller than ``min_effect_pct`` or not significant at
    ``alpha`` (or the series is shorter than ``3 * BLOCK_RUNS`` runs).

    ``ages_days`` (optional, one per value) is each run's age in days relative to the newest;
    ``steps`` are the change points found in the series (their indexes), divided out first.
    Values must be finite; positive values are compared on the log scale (ratios), others as
    they are.
    """
    if not 0.0 < alpha < 1.0:
        raise UsageError("alpha must be between 0 and 1")
    if min_effect_pct < 0.0:
        raise UsageError("min_effect_pct must not be negative")
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or not np.all(np.isfinite(x)):
        raise UsageError("values must be a flat sequence of finite numbers")
    if ages_days is not None and len(ages_days) != x.size:
        raise UsageError("ages_days must have one age per value")
    n = x.size
    if n < MIN_RUNS:
        return None
    positive = bool(np.all(x > 0.0))
    y = np.log(x) if positive else x.copy()

    old_last = _horizon_end(n, ages_days)
    old_first = old_last - BLOCK_RUNS + 1
    new_first = n - BLOCK_RUNS
    adjusted, jumps_share = _divide_out_steps(y, steps, old_first, n - 1)
    old, new = adjusted[old_first : old_last + 1], adjusted[new_first:]

    shift = _hodges_lehmann(old, new)
    before = float(np.median(old))
    after = before + shift
    if positive:
        change_pct = math.expm1(shift) * 100.0
        before, after = math.exp(before), math.exp(after)
    else:
        change_pct = (after - before) / abs(before) * 100.0 if before else math.inf
    if not math.isfinite(change_pct):
        return None  # from a level of 0 a change has no relative size
    if not abs(change_pct) >= min_effect_pct:
        return None
    resid = _residuals(adjusted)
    rho = min(MAX_RHO, max(0.0, _lag1_rank_autocorrelation(resid)))
    serial = (1.0 + rho) / (1.0 - rho)
    p_value = _rank_test(old, new, serial)
    if jumps_share:
        by_shifts = _shift_test(shift, adjusted, jumps_share)
        if by_shifts is None:
            by_shifts = _rank_test(old, new, serial * (1.0 + jumps_share))
        p_value = max(p_value, by_shifts)
    if p_value >= alpha:
        return None

    # Where: the best single ramp over the span from the old block to the newest run.
    span = adjusted[old_first:]
    t = np.arange(span.size, dtype=float)
    widths = sorted({max(ABRUPT_WIDTH + 1, int(w)) for w in np.geomspace(1, 2 * span.size, 24)})
    ramp = best_ramp(t, span - float(np.mean(span)), widths, 0, span.size - 1)
    # g = 0 up to ramp.start and 1 from ramp.start + ramp.width on: the first run that moved
    # and the first at the new level, kept after the old block.
    start = min(max(old_first + math.floor(ramp.start) + 1, old_last + 1), n - 1)
    end = min(max(old_first + math.ceil(ramp.start + ramp.width), start), n - 1)
    return Drift(
        baseline_first=old_first,
        baseline_last=old_last,
        recent_first=new_first,
        recent_last=n - 1,
        start=start,
        end=end,
        before=before,
        after=after,
        change_pct=change_pct,
        p_value=p_value,
        confidence=1.0 - p_value,
        horizon_runs=n - 1 - old_last,
        horizon_days=None if ages_days is None else float(ages_days[old_last]),
        steps_removed=sum(1 for k in steps if old_first < k <= n - 1),
    )
