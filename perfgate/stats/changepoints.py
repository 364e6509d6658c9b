"""History analysis: where did a series' level move, and stay moved?

The input is one number per run (a run's centre), oldest first; the output, the change
points: each the first run of a new level, with the level before and after, the size of the
move and how sure the test is. ``perfgate detect`` and the nightly history analysis both call
:func:`detect_change_points`.

Assumptions, in plain words:

* Between change points the runs are draws from one distribution. No shape is assumed
  (neither normal nor log-normal): the search uses only the ranks of the values, so a 10x
  outlier weighs no more than a run that is merely the slowest, and heavy-tailed noise does
  not fake a change. Neighbouring runs may move together (a load cycle, a runner kept for
  several runs): such noise wanders without any commit's doing, and every test allows for
  it (serial dependence, below). A periodic load is therefore not a change point.
* A change point is a shift of *level* (median) that persists. A change of spread alone (the
  machine got noisier, same median) is not one: rank tests barely react to it, and a gate
  judges levels. A slow drift is not one either: a gradual ramp is no commit's doing (it is
  reported once, as a drift, by :mod:`perfgate.stats.drift`).
* Persistence: a new level must hold for at least ``min_segment`` runs (and the old one must
  have held as long). A single-run spike, or a blip shorter than ``min_segment`` runs, is
  never a change point. The price: a change in the last ``min_segment - 1`` runs cannot be
  reported yet; it appears once ``min_segment`` runs exist from the change on (with the
  default 5: the run that changed and 4 more). Nothing is reported in the first
  ``min_segment`` runs either.
* Size: the medians of the segments on either side must differ by at least
  ``min_effect_pct`` percent (a perf gate does not care about a 0.3% shift), and the few runs
  on either side (``LOCAL_WINDOW``) must move the same way by at least ``LOCAL_FRACTION`` of
  it, so a split is not justified only by runs far away from it.

The method, deterministic throughout:

1. Search: seeded binary segmentation (Kovacs et al. 2023) with a rank CUSUM. For an
   interval of n runs, the standardised Mann-Whitney statistic of every split (first k runs
   against the rest) comes at once from cumulative rank sums; the strongest split at least
   ``min_segment`` runs from both ends of each seeded interval (the whole series, then
   layers of halving length overlapping by half, down to ``2 * min_segment + 2`` runs) is a
   candidate if significant at the relaxed level ``SPLIT_ALPHA_FACTOR * alpha``; candidates
   are kept strongest first, each at least ``min_segment`` runs from those kept before. The
   short intervals show a regression reverted after 6 runs as plainly as a step (on the
   whole series it hardly moves a cumulative sum: plain binary segmentation found 3-5% of
   them); the relaxed level lets a change hidden by a second one in the same segment be
   proposed (Otava's weak change points). Ranks say *whether* a segment splits;
   *where* is then refined within ``REFINE_RADIUS`` runs by the least-absolute-deviation
   fit of two medians on log values, which keeps the distance between the levels that ranks
   discard and is still insensitive to spikes.
2. Merge: each proposed point is judged against its neighbours (the segment from the point
   before it to the point after it); the weakest point that fails the significance ``alpha``,
   the size rule or the local rule is dropped and its neighbours judged again, until all pass.
3. Drift: consecutive points moving the same way, with the segment around them, are compared
   with one straight ramp between two levels (any width above ``ABRUPT_WIDTH`` runs), and
   with such a ramp beside one of the points, by least squares on log values, outliers left
   out; when the ramp wins by the Bayesian information criterion (steps: two parameters
   each; ramp: four; ramp and step: six), the least significant of the points it replaces is
   dropped and the merge goes on. A ramp cut into small steps is thus recognised as one
   drift, and a real step inside a creep stays while the creep's staircase around it goes.
   The step beside a ramp must pass the merge's rules on what the ramp alone leaves, within
   ``LOCAL_WINDOW`` runs of it (a ramp that is not quite straight leaves a smooth bow that a
   step could patch; a bow has no local jump).
   The ramp is fitted on a coarse grid and then run by run around the best of it: on the
   coarse grid alone a 100-run ramp fell between two widths and fitted worse than the
   staircase on a quiet series, and a +35% ramp came out as nine change points. Drifts are
   not change points; :mod:`perfgate.stats.drift` reports them (the newest runs against
   those a long horizon ago, beyond the change points found here).
4. Each surviving point's location is refined once more between its final neighbours (kept
   only if every point still passes every rule).

The p-value of a change point is the chance that a segment with no change at all (bounded by
its neighbouring change points or the series ends) would show a split this strong *anywhere*
in it: the point's standardised rank CUSUM, compared with the tail of the *maximum* over all
admissible splits, by the Siegmund-James approximation for the maximum of a standardised
Brownian bridge with the discreteness correction. Checked by simulation on independent runs:
close to nominal from 100 to 1,000 runs (at 0.01: 0.6-1.0%), conservative for short segments
(20 runs: 0.35%). Two corrections widen it:

* Serial dependence: the statistic is divided by the square root of ``(1 + rho) / (1 -
  rho)``, rho the lag-1 autocorrelation of the ranks of the runs around a running median
  (:func:`serial_inflation`; the long-run variance of an AR(1) series, as the drift test
  uses). A running median follows steps, not a load cycle or a sticky runner, so steps leave
  rho near 0 and wandering noise does not. Measured around a plain running median, a short
  real level (a 6-run regression) looks like wandering noise; measured around the search's
  candidates, wandering noise looks like levels: the search uses the first, the merge the
  geometric mean of both. rho is capped at ``MAX_RHO``: ranks saturate once two levels
  separate, so a larger correction would hide a 20% step in a 3% cycle.
* The segment: its bounds were found by searching the whole series, one of about ``n / m``
  segments of its length m; the p-value is multiplied by ``sqrt(n / m)``, between none (a
  segment fixed in advance) and Bonferroni over disjoint segments (which cost a third of the
  6-run reverts).

It is analytic, so results are deterministic; a 1,000-run series takes a few tens of
milliseconds (each layer of seeded intervals is ranked at once).
``confidence`` is ``1 - p_value``: the probability that a change-free segment would *not*
produce a split this strong. The size, local and drift rules are filters on top; they do not
enter the p-value, and no correction is made across the points of one series.

Defaults were chosen on simulated histories (``bench/history_sim.py``, ``TUNING_SEED``), not
on the seed the bench reports; ``SERIAL_HALF_WINDOW``, ``MAX_RHO`` and the two corrections
above on ``bench/detection_shapes.py`` (seed 20261205; seed 7 scores the same).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from perfgate.errors import UsageError
from perfgate.models import ChangePoint
from perfgate.stats.summary import median

MIN_EFFECT_PCT = 1.5
"""Smallest move between the medians of neighbouring segments reported, in percent."""
ALPHA = 0.01
"""Largest p-value of a reported change point (scan-adjusted, per segment)."""
MIN_SEGMENT = 5
"""Runs a new level must hold (and the old one must have held): the persistence rule."""
SPLIT_ALPHA_FACTOR = 10.0
"""The search proposes splits at ``alpha`` times this; the merge applies ``alpha`` itself."""
LOCAL_WINDOW = 15
"""Runs on each side of a change point over which its local jump is measured."""
LOCAL_FRACTION = 0.5
"""The local jump must be at least this share of ``min_effect_pct``, in the same direction."""
ABRUPT_WIDTH = 2
"""A transition over at most this many runs is a step; a wider one is a drift."""
LOCATE_SLACK = 5
"""Runs a step or ramp may sit away from the split the rank search found."""
REFINE_RADIUS = 10
"""Runs around the rank search's best split within which its location is refined."""
DRIFT_BIC_WEIGHT = 1.0
"""Weight of the information-criterion penalty in the steps-against-ramp comparison."""
MAD_TO_SD = 1.4826
OUTLIER_MADS = 4.0
"""Runs further than this many robust deviations from the step fit are left out of the
steps-against-ramp comparison."""
SERIAL_HALF_WINDOW = 20
"""Half-width of the running median around which the runs' serial dependence is measured."""
MAX_RHO = 0.8
"""Largest lag-1 autocorrelation used to widen the rank statistic's variance."""
SEED_DECAY = 0.5
"""Each layer of the search's seeded intervals is this share of the layer before as long."""


@dataclass(frozen=True)
class _Split:
    index: int
    z: float
    p_value: float


_ERFC = np.frompyfunc(math.erfc, 1, 1)


def _ndtr(x: np.ndarray) -> np.ndarray:
    """The standard normal CDF at each x (the standard library's erfc: scipy.special's
    import would be most of ``perfgate detect``'s start-up)."""
    out: np.ndarray = 0.5 * np.asarray(_ERFC(-x / math.sqrt(2.0)), dtype=float)
    return out


def _nu(x: np.ndarray) -> np.ndarray:
    """Siegmund's overshoot correction for a Gaussian random walk crossing a boundary."""
    half = x / 2.0
    cdf = _ndtr(half)
    pdf = np.exp(-0.5 * half * half) / math.sqrt(2.0 * math.pi)
    out: np.ndarray = (2.0 / x) * (cdf - 0.5) / (half * cdf + pdf)
    return out


def _scan_p_value(z: float, n: int, lo: int, hi: int) -> float:
    """P(max |Z_k| over lo <= k <= hi >= z) for a change-free segment of n points.

    Siegmund-James approximation for the standardised two-sample CUSUM, two-sided, with the
    discreteness correction; never above the Bonferroni bound or 1.
    """
    if not math.isfinite(z):
        return 0.0
    if z <= 0.0:
        return 1.0
    k = np.arange(lo, hi + 1, dtype=float)
    w = n / (k * (n - k))
    density = z * math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    approx = density * float(np.sum(_nu(z * np.sqrt(w)) * w))
    bonferroni = (hi - lo + 1) * math.erfc(z / math.sqrt(2.0))
    return float(min(1.0, approx, bonferroni))


def _scan_p_values(z: np.ndarray, n: int, lo: int, hi: int) -> np.ndarray:
    """:func:`_scan_p_value` of every z at once (one segment length n)."""
    out = np.ones(z.size)
    out[~np.isfinite(z)] = 0.0
    pos = np.isfinite(z) & (z > 0.0)
    if bool(np.any(pos)):
        zp = z[pos]
        k = np.arange(lo, hi + 1, dtype=float)
        w = n / (k * (n - k))
        density = zp * np.exp(-0.5 * zp * zp) / math.sqrt(2.0 * math.pi)
        approx = density * np.sum(_nu(zp[:, None] * np.sqrt(w)[None, :]) * w[None, :], axis=1)
        bonferroni = (hi - lo + 1) * 2.0 * _ndtr(-zp)
        out[pos] = np.minimum(1.0, np.minimum(approx, bonferroni))
    return out


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of x, ties given their average rank."""
    n = x.size
    order = np.argsort(x, kind="stable")
    ordered = x[order]
    # Start and end (exclusive) of each run of equal values in sorted order.
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    ends = np.append(starts[1:], n)
    average = (starts + ends + 1) / 2.0
    ranks = np.empty(n)
    ranks[order] = np.repeat(average, ends - starts)
    return ranks


def _rank_cusum(x: np.ndarray) -> np.ndarray:
    """|Z_k| for k = 1..n-1: the standardised Mann-Whitney statistic of x[:k] against x[k:].

    Ties get average ranks and the tie-corrected variance. All zeros when x is constant.
    """
    n = x.size
    centred = average_ranks(x) - (n + 1) / 2.0
    var_rank = float(np.mean(centred * centred))
    if var_rank <= 0.0:
        return np.zeros(n - 1)
    sums = np.cumsum(centred)[:-1]
    k = np.arange(1, n, dtype=float)
    out: np.ndarray = np.abs(sums) / np.sqrt(k * (n - k) / (n - 1) * var_rank)
    return out


def serial_inflation(
    y: np.ndarray, cuts: Sequence[int] = (), half: int = SERIAL_HALF_WINDOW
) -> float:
    """How much serial dependence widens a sum of the runs' ranks: ``(1 + rho) / (1 - rho)``,
    rho the lag-1 autocorrelation of the ranks of y around its running median (``2 * half
    + 1`` runs, not reaching across ``cuts``), clipped to [0, MAX_RHO].

    A running median follows a step (and a ramp) within a run or two, so steps leave the
    residuals independent; what it does not follow is noise that wanders: a load cycle, a
    runner kept for several runs, a slow wobble. Neighbouring runs that move together are
    worth fewer independent runs, so the rank statistic's variance is widened as for an AR(1)
    series (the long-run variance), as the drift test does. A level held for fewer runs than
    the window (a regression reverted after 6 runs) is not followed, so the search's proposed
    change points bound the window: a level they propose is not taken for wandering noise.
    """
    n = y.size
    if n < 3:
        return 1.0
    half = min(half, n // 4)  # a window over most of a short series follows no level at all
    bounds = [0, *cuts, n]
    level = np.empty(n)
    for a, b in zip(bounds, bounds[1:], strict=False):
        # Full windows at once; near the segment's ends, the window is cut there.
        inner = range(a + half, b - half) if b - a > 2 * half else range(0)
        if inner:
            windows = np.lib.stride_tricks.sliding_window_view(y[a:b], 2 * half + 1)
            level[inner.start : inner.stop] = np.median(windows, axis=1)
        for i in (*range(a, min(b, a + half)), *range(max(b - half, a + half), b)):
            level[i] = median(y[max(a, i - half) : min(b, i + half + 1)])
    ranks = average_ranks(y - level)
    ranks -= ranks.mean()
    denom = float(np.dot(ranks, ranks))
    if denom <= 0.0:
        return 1.0
    # shrunk by its sampling variance (1/n for independent runs), as a James-Stein estimate:
    # a short series' chance correlation would widen every test it enters, a long series'
    # real one stays nearly whole
    rho = float(np.dot(ranks[1:], ranks[:-1]) / denom)
    rho = min(MAX_RHO, max(0.0, rho - 1.0 / (n * rho) if rho > 0 else 0.0))
    return (1.0 + rho) / (1.0 - rho)


def _rank_cusums(w: np.ndarray) -> np.ndarray:
    """:func:`_rank_cusum` of every row of w (intervals of one length) at once."""
    c, m = w.shape
    order = np.argsort(w, axis=1, kind="stable")
    ordered = np.take_along_axis(w, order, axis=1)
    idx = np.broadcast_to(np.arange(m), (c, m))
    first = np.ones((c, m), dtype=bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    last = np.ones((c, m), dtype=bool)
    last[:, :-1] = first[:, 1:]
    # Each sorted position's run of equal values: its first and last position.
    start = np.maximum.accumulate(np.where(first, idx, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, idx, m - 1)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty((c, m))
    np.put_along_axis(ranks, order, (start + end) / 2.0 + 1.0, axis=1)
    centred = ranks - (m + 1) / 2.0
    var_rank = np.mean(centred * centred, axis=1)
    sums = np.cumsum(centred, axis=1)[:, :-1]
    k = np.arange(1, m, dtype=float)
    out = np.zeros((c, m - 1))
    ok = var_rank > 0.0
    out[ok] = np.abs(sums[ok]) / np.sqrt(np.outer(var_rank[ok], k * (m - k) / (m - 1)))
    return out


def _best_split(x: np.ndarray, min_segment: int, inflation: float = 1.0) -> _Split | None:
    """The strongest split of x leaving at least min_segment points on each side (its
    statistic divided by the square root of ``inflation``, see :func:`serial_inflation`)."""
    n = x.size
    if n < 2 * min_segment:
        return None
    z = _rank_cusum(x)[min_segment - 1 : n - min_segment]
    j = int(np.argmax(z))
    z_max = float(z[j]) / math.sqrt(inflation)
    return _Split(min_segment + j, z_max, _scan_p_value(z_max, n, min_segment, n - min_segment))


def _split_at(x: np.ndarray, k: int, min_segment: int, inflation: float = 1.0) -> _Split:
    """The split of x at k, with its scan-adjusted p-value over x."""
    n = x.size
    z = float(_rank_cusum(x)[k - 1]) / math.sqrt(inflation)
    return _Split(k, z, _scan_p_value(z, n, min_segment, n - min_segment))


def _pct(before: float, after: float) -> float:
    if before == 0.0:
        return 0.0 if after == 0.0 else math.copysign(math.inf, after)
    return (after - before) / abs(before) * 100.0


def _log_or_raw(x: np.ndarray) -> np.ndarray:
    """Log values when all are positive (relative changes become shifts), else the values."""
    out: np.ndarray = np.log(x) if bool(np.all(x > 0.0)) else x.astype(float)
    return out


def _refine(y: np.ndarray, k: int, min_segment: int) -> int:
    """The split of y near k (within REFINE_RADIUS) that two medians fit best (least L1).

    Ranks find *whether* a segment splits, robustly; but they discard how far apart the two
    levels are, so their best split can sit a run or two off. The L1 fit on (log) values
    keeps that information and is still insensitive to spikes. The two levels are the
    medians of the runs left and right of the search window (at least ``min_segment`` each);
    the fit is redone around a moved split, at most three times.
    """
    n = y.size
    for _ in range(3):
        lo = max(min_segment, k - REFINE_RADIUS)
        hi = min(n - min_segment, k + REFINE_RADIUS)
        left, right = median(y[:lo]), median(y[hi:])
        window = y[lo:hi]
        # cost(j) for j = lo..hi: runs of the window before j fitted by the left level, the
        # rest by the right one (runs outside the window cost the same for every j).
        to_left = np.concatenate(([0.0], np.cumsum(np.abs(window - left))))
        to_right = np.concatenate(([0.0], np.cumsum(np.abs(window - right)[::-1])))[::-1]
        best = lo + int(np.argmin(to_left + to_right))
        if best == k:
            break
        k = best
    return k


def _seeded_intervals(n: int, min_segment: int) -> list[tuple[int, np.ndarray]]:
    """Seeded intervals (Kovacs et al. 2023), as layers (length, starts): the whole series,
    then intervals each ``SEED_DECAY`` times as long as the layer before, overlapping by
    half, down to ``2 * min_segment + 2`` runs. Deterministic, O(n log n) runs in all."""
    out = [(n, np.zeros(1, dtype=int))]
    shortest = 2 * min_segment + 2
    length = n * SEED_DECAY
    while length >= shortest:
        size = math.ceil(length)
        count = math.ceil(2.0 * (n - size) / size) + 1
        starts = np.linspace(0, n - size, count) if count > 1 else np.zeros(1)
        out.append((size, np.unique(np.rint(starts).astype(int))))
        length *= SEED_DECAY
    return out


def _segment_search(x: np.ndarray, min_segment: int, alpha: float, inflation: float) -> list[int]:
    """Seeded binary segmentation: the strongest split of every seeded interval, kept
    strongest first when significant at alpha and at least min_segment runs from every
    split kept before it.

    Plain binary segmentation looks at the whole series first, where a regression reverted
    after 6 runs hardly moves a cumulative sum; a short interval around it shows it as
    plainly as a step. Which of the splits are change points is the merge's business.
    """
    y = _log_or_raw(x)
    candidates: list[tuple[float, int]] = []
    for size, starts in _seeded_intervals(x.size, min_segment):
        if size < 2 * min_segment:
            continue
        # Every interval of the layer at once: the same as _best_split on each.
        z = _rank_cusums(x[starts[:, None] + np.arange(size)])[
            :, min_segment - 1 : size - min_segment
        ]
        j = np.argmax(z, axis=1)
        z_max = z[np.arange(starts.size), j] / math.sqrt(inflation)
        p = _scan_p_values(z_max, size, min_segment, size - min_segment)
        for a, split, p_value in zip(
            starts.tolist(), (min_segment + j).tolist(), p.tolist(), strict=True
        ):
            if p_value < alpha:
                candidates.append((p_value, a + _refine(y[a : a + size], split, min_segment)))
    found: list[int] = []
    for _, k in sorted(candidates):
        if min_segment <= k <= x.size - min_segment and all(
            abs(k - f) >= min_segment for f in found
        ):
            found.append(k)
    return sorted(found)


@dataclass(frozen=True)
class _Judged:
    index: int
    p_value: float
    change_pct: float
    local_pct: float
    before: float
    after: float


def _ramp_widths(n: int) -> list[int]:
    """Widths of the gradual transitions tried: geometric from ABRUPT_WIDTH + 1 to 2n."""
    widths, w = [], float(ABRUPT_WIDTH + 1)
    while w < 2 * n:
        widths.append(int(w))
        w = max(w * 1.5, w + 1.0)
    return sorted(set(widths))


def _ramp_sse(
    t: np.ndarray, y: np.ndarray, start: np.ndarray, width: np.ndarray, step_at: int | None = None
) -> np.ndarray:
    """Sum of squares of y (at increasing times t) left by each ramp (start, width).

    The ramp is ``g(t) = clip((t - start) / width, 0, 1)`` with its two levels fitted by
    least squares, and with ``step_at`` (an index into t) one abrupt step there as well: the
    ramp is then fitted to y and g net of each side's own mean. Every candidate is scored at
    once from prefix sums, in time independent of the segment's length. Candidates whose
    ramp does not vary over t (on either side's own) score as no ramp.
    """
    zero = np.zeros(1)
    c0 = np.arange(t.size + 1, dtype=float)
    c1 = np.concatenate((zero, np.cumsum(t)))
    c2 = np.concatenate((zero, np.cumsum(t * t)))
    y0 = np.concatenate((zero, np.cumsum(y)))
    y1 = np.concatenate((zero, np.cumsum(t * y)))
    yy = np.concatenate((zero, np.cumsum(y * y)))
    rise_lo = np.searchsorted(t, start, side="right")  # t <= start: g = 0
    rise_hi = np.searchsorted(t, start + width, side="left")  # t >= start + w: g = 1
    sides = [(0, t.size)] if step_at is None else [(0, step_at), (step_at, t.size)]
    syy = sgg = sgy = np.zeros(1)
    for i0, i1 in sides:
        lo, hi = np.clip(rise_lo, i0, i1), np.clip(rise_hi, i0, i1)
        m0, m1, m2 = c0[hi] - c0[lo], c1[hi] - c1[lo], c2[hi] - c2[lo]
        my0, my1 = y0[hi] - y0[lo], y1[hi] - y1[lo]
        tail0, taily = i1 - hi, y0[i1] - y0[hi]
        sg = (m1 - start * m0) / width + tail0
        count, sy = float(i1 - i0), float(y0[i1] - y0[i0])
        syy = syy + float(yy[i1] - yy[i0]) - sy * sy / count
        sgg = sgg + (m2 - 2.0 * start * m1 + start * start * m0) / (width * width) + tail0
        sgg = sgg - sg * sg / count
        sgy = sgy + (my1 - start * my0) / width + taily - sg * sy / count
    ok = sgg > 1e-9 * t.size
    out: np.ndarray = np.full(start.size, float(syy[0]))
    out[ok] = syy[0] - sgy[ok] ** 2 / sgg[ok]
    return out


@dataclass(frozen=True)
class Ramp:
    """The best single ramp between two levels: its sum of squares, start and width (runs)."""

    sse: float
    start: float
    width: float


def best_ramp(
    t: np.ndarray,
    y: np.ndarray,
    widths: Sequence[int],
    first: int,
    last: int,
    step_at: int | None = None,
) -> Ramp:
    """The ramp between two levels (one of about ``widths`` runs wide) that fits y best
    (beside one abrupt step at index ``step_at``, when given: :func:`_ramp_sse`).

    ``y`` is centred, at increasing times ``t``. The ramp must overlap
    [first - LOCATE_SLACK, last + LOCATE_SLACK]; it may run past either end of the segment
    (a straight line is a ramp wider than the segment). A coarse grid (starts every
    width / 8 runs, widths geometric) finds the neighbourhood; a fine one (every run, widths
    within the coarse grid's spacing) the ramp itself. Without the fine pass a ramp that
    falls between two grid points fits worse than the noise by more than its own effect on
    a quiet series, and a long ramp is then kept as a staircase of steps.
    """
    starts_list, widths_list = [], []
    for w in widths:
        stride = max(1, w // 8)
        grid = np.arange(first - w - LOCATE_SLACK, last + LOCATE_SLACK + 1, stride, dtype=float)
        starts_list.append(grid)
        widths_list.append(np.full(grid.size, float(w)))
    if not starts_list:
        return Ramp(float(np.dot(y, y)), float(first), float(ABRUPT_WIDTH + 1))
    start = np.concatenate(starts_list)
    width = np.concatenate(widths_list)
    sse = _ramp_sse(t, y, start, width, step_at)
    j = int(np.argmin(sse))
    s0, w0 = float(start[j]), float(width[j])
    # Fine pass: every run within two coarse strides of the start, every width within the
    # coarse spacing (never below the narrowest width asked for).
    stride = max(1, int(w0) // 8)
    lo_w, hi_w = max(float(min(widths)), w0 / 1.5), min(float(max(widths)), w0 * 1.5)
    w_step = max(1.0, (hi_w - lo_w) / 40.0)
    fine_w = np.arange(lo_w, hi_w + w_step / 2, w_step)
    fine_s = np.arange(s0 - 2 * stride, s0 + 2 * stride + 1, 1.0)
    ss, ww = np.meshgrid(fine_s, fine_w)
    ss, ww = ss.ravel(), ww.ravel()
    overlap = (ss + ww >= first - LOCATE_SLACK) & (ss <= last + LOCATE_SLACK)
    ss, ww = ss[overlap], ww[overlap]
    fine = _ramp_sse(t, y, ss, ww, step_at)
    k = int(np.argmin(fine)) if fine.size else -1
    if k >= 0 and fine[k] < sse[j]:
        return Ramp(float(fine[k]), float(ss[k]), float(ww[k]))
    return Ramp(float(sse[j]), s0, w0)


def _drift_droppable(x: np.ndarray, steps: Sequence[int], test: _StepTest) -> tuple[int, ...]:
    """Which of ``steps`` (change points of the segment x) a drift explains: those one
    gradual ramp takes over, by the models' Bayesian information criteria.

    Three models of the segment: steps (flat levels between the given change points, 2m + 1
    parameters: levels and locations), one ramp (two flat levels joined by one linear ramp
    wider than ABRUPT_WIDTH runs, anywhere around the steps: 4) and one ramp beside one of
    the steps (6). All are fitted by least squares on log values (on the values themselves
    if any is not positive), leaving out runs more than OUTLIER_MADS robust deviations off
    the step fit so that spikes decide nothing; ``DRIFT_BIC_WEIGHT`` scales the parameter
    penalty. Where the steps fit best, none (``()``); where the ramp does, all of them; where
    the ramp beside step ``s`` does, all but ``s``. The step beside the ramp must also pass
    the merge's rules on what the ramp alone leaves near it (``test``): chosen where the
    search found a split, it would otherwise patch a ramp's bow often enough to leave a point
    in one ramp in three. So a ramp cut into small steps is one drift, and a real step inside
    a creep stays one step while the creep's staircase around it goes (with the ramp alone
    to replace them, the staircase stayed: a +20% creep over 160 runs with a 10% step in it
    gave about six change points).
    """
    y = _log_or_raw(x)
    n = y.size
    level = None if bool(np.all(x > 0.0)) else abs(median(x))  # None: y is logs
    bounds = [0, *steps, n]
    piece = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    medians = np.array([median(y[bounds[i] : bounds[i + 1]]) for i in range(len(steps) + 1)])
    resid = y - medians[piece]
    # Twice: outliers are first the runs far off the step fit, then those far off the model
    # that fitted best (off a step fit, a ramp's own runs look far and a spike does not).
    for _ in range(2):
        spread = MAD_TO_SD * median(np.abs(resid - median(resid)))
        keep = np.abs(resid) <= OUTLIER_MADS * spread if spread > 0.0 else np.ones(n, dtype=bool)
        found = _best_of_models(y, piece, keep, steps, partial(test.holds, level=level))
        if found is None or not np.all(np.isfinite(found[2])):
            return ()
        score, kept, resid = found
    if score >= 0.0:
        return ()
    return tuple(i for i in range(len(steps)) if i not in kept)


def _best_of_models(
    y_all: np.ndarray,
    piece_all: np.ndarray,
    keep: np.ndarray,
    steps: Sequence[int],
    holds: Callable[[np.ndarray, int], bool],
) -> tuple[float, tuple[int, ...], np.ndarray] | None:
    """:func:`_drift_droppable`'s models fitted to the ``keep`` runs: the best one's
    criterion less the steps model's (< 0: it fits better), the steps it keeps (all for the
    steps model itself, none for the ramp, one beside the ramp) and its residuals over every
    run; None when the runs are too few to tell. ``holds``: whether a step stands out from
    the ramp alone's residuals (:meth:`_StepTest.holds`)."""
    t_all = np.arange(y_all.size, dtype=float)
    t, piece = t_all[keep], piece_all[keep]
    counts = np.bincount(piece, minlength=len(steps) + 1)
    if t.size - 2 * len(steps) - 1 < 3 or np.any(counts == 0):
        return None
    y = y_all[keep] - float(np.mean(y_all[keep]))
    means = np.bincount(piece, weights=y) / counts
    step_sse = float(np.sum((y - means[piece]) ** 2))
    if len(steps) == 1:
        # A step found by the rank scan may sit a run or two off: let it move, and be a
        # transition of up to ABRUPT_WIDTH runs, before it is compared with a drift.
        abrupt = range(1, ABRUPT_WIDTH + 1)
        step_sse = min(step_sse, best_ramp(t, y, abrupt, steps[0], steps[0]).sse)
    if step_sse <= 0.0:
        return None
    widths = _ramp_widths(y_all.size)
    penalty = DRIFT_BIC_WEIGHT * math.log(y_all.size)

    def criterion(sse: float, parameters: int) -> float:
        """Bayesian information criterion less the steps model's (each its own variance)."""
        fit = float(y.size) * math.log(max(sse, 1e-300) / step_sse)
        return fit + penalty * (parameters - 2 * len(steps) - 1)

    # (criterion less the steps model's, steps kept, the ramp, its step's index into t)
    best: tuple[float, tuple[int, ...], Ramp | None, int | None] = (
        0.0,
        tuple(range(len(steps))),
        None,
        None,
    )
    ramp = best_ramp(t, y, widths, steps[0], steps[-1])
    score = criterion(ramp.sse, 4)
    if score < best[0]:
        best = (score, (), ramp, None)
    # a step beside a ramp must stand out from what the ramp alone leaves
    left = y_all - _fit(y_all, keep, piece_all, ramp, None)
    for s, step in enumerate(steps):
        if not holds(left, step):
            continue
        # the ramp takes over the other steps (with none: it may lie anywhere)
        others = [k for k in steps if k != step] or [0, y_all.size - 1]
        beside = best_ramp(t, y, widths, others[0], others[-1], int(np.searchsorted(t, step)))
        score = criterion(beside.sse, 6)
        if score < best[0]:
            best = (score, (s,), beside, steps[s])
    score, kept, found, step_at = best
    return score, kept, y_all - _fit(y_all, keep, piece_all, found, step_at)


def _fit(
    y: np.ndarray, keep: np.ndarray, piece: np.ndarray, ramp: Ramp | None, step_at: int | None
) -> np.ndarray:
    """A model of y fitted by least squares on the ``keep`` runs, its values over every run:
    flat levels between the steps (``piece``: each run's level), or two levels joined by
    ``ramp`` and, with ``step_at``, a step there."""
    t = np.arange(y.size, dtype=float)
    if ramp is None:
        columns = [(piece == i).astype(float) for i in range(int(piece.max()) + 1)]
    else:
        columns = [np.ones_like(t), np.clip((t - ramp.start) / ramp.width, 0.0, 1.0)]
        if step_at is not None:
            columns.append((t >= step_at).astype(float))
    design = np.column_stack(columns)
    beta = np.linalg.lstsq(design[keep], y[keep], rcond=None)[0]
    fitted: np.ndarray = design @ beta
    return fitted


@dataclass(frozen=True)
class _StepTest:
    """The merge's rules for a change point, asked of a step beside a ramp on what the ramp
    alone leaves of the segment (the residuals), within ``LOCAL_WINDOW`` runs on either
    side: the split there significant at ``alpha`` (scan-adjusted over those runs, the
    serial ``inflation`` applied) and a jump of at least ``LOCAL_FRACTION`` of
    ``min_effect_pct``. A ramp that is not quite straight (a creep by a constant factor a
    run is a curve in log values) leaves a bow; a bow has no local jump, a step has."""

    min_segment: int
    inflation: float
    alpha: float
    min_effect_pct: float

    def holds(self, left: np.ndarray, step: int, *, level: float | None) -> bool:
        """``level``: None where ``left`` is of log values, else the segment's level (the
        values' median) the jump is a share of."""
        w = min(LOCAL_WINDOW, step, left.size - step)
        if w < self.min_segment:
            return False
        window = left[step - w : step + w]
        if _split_at(window, w, self.min_segment, self.inflation).p_value >= self.alpha:
            return False
        moved = median(window[w:]) - median(window[:w])
        jump = math.expm1(moved) * 100.0 if level is None else _pct(level, level + moved)
        return abs(jump) >= LOCAL_FRACTION * self.min_effect_pct


def _judge(x: np.ndarray, a: int, k: int, b: int, min_segment: int, inflation: float) -> _Judged:
    """Statistics of the change point k between its neighbours a and b."""
    split = _split_at(x[a:b], k - a, min_segment, inflation)
    # a..b is one of about n / (b - a) segments of its length the search could have bounded
    # (see the module docstring).
    p_value = min(1.0, split.p_value * math.sqrt(x.size / (b - a)))
    before = median(x[a:k])
    after = median(x[k:b])
    w = min(k - a, b - k, LOCAL_WINDOW)
    local_before = median(x[k - w : k])
    local_after = median(x[k : k + w])
    return _Judged(
        index=k,
        p_value=p_value,
        change_pct=_pct(before, after),
        local_pct=_pct(local_before, local_after),
        before=before,
        after=after,
    )


def _judge_all(
    x: np.ndarray,
    cps: Sequence[int],
    min_segment: int,
    cache: dict[tuple[int, int, int], _Judged],
    inflation: float,
) -> list[_Judged]:
    """Every change point judged between its neighbours (``cache`` keeps earlier verdicts)."""
    bounds = [0, *cps, x.size]
    out = []
    for a, k, b in zip(bounds, bounds[1:], bounds[2:], strict=False):
        if (a, k, b) not in cache:
            cache[(a, k, b)] = _judge(x, a, k, b, min_segment, inflation)
        out.append(cache[(a, k, b)])
    return out


def _weakest_failing(judged: Sequence[_Judged], alpha: float, min_effect_pct: float) -> int | None:
    """Position of the change point to drop first (None when all pass the per-point rules).

    Not significant goes first (largest p-value), then too small (smallest change), then no
    local jump in the same direction (smallest local jump).
    """
    local_needed = LOCAL_FRACTION * min_effect_pct
    worst: tuple[tuple[int, float], int] | None = None
    for i, j in enumerate(judged):
        if j.p_value >= alpha:
            badness = (2, j.p_value)
        elif abs(j.change_pct) < min_effect_pct:
            badness = (1, -abs(j.change_pct))
        elif j.local_pct * j.change_pct <= 0.0 or abs(j.local_pct) < local_needed:
            badness = (0, -abs(j.local_pct))
        else:
            continue
        if worst is None or badness > worst[0]:
            worst = (badness, i)
    return None if worst is None else worst[1]


def _drifting(
    x: np.ndarray,
    judged: Sequence[_Judged],
    cache: dict[tuple[int, ...], tuple[int, ...]],
    test: _StepTest,
) -> int | None:
    """Position of the change point to drop as part of a drift (None when none is).

    Consecutive change points moving the same way form a group, bounded by the change
    points around it (or the series ends). Of the group's points a drift explains
    (:func:`_drift_droppable`), the least significant is dropped (of all such groups, the
    one with the largest p-value).
    """
    n, i = len(judged), 0
    worst: tuple[float, int] | None = None
    while i < n:
        j = i
        while j + 1 < n and judged[j + 1].change_pct * judged[i].change_pct > 0.0:
            j += 1
        a = judged[i - 1].index if i > 0 else 0
        b = judged[j + 1].index if j + 1 < n else x.size
        steps = [judged[m].index - a for m in range(i, j + 1)]
        key = (a, b, *steps)
        if key not in cache:
            cache[key] = _drift_droppable(x[a:b], steps, test)
        if cache[key]:
            m = max((i + q for q in cache[key]), key=lambda q: judged[q].p_value)
            if worst is None or judged[m].p_value > worst[0]:
                worst = (judged[m].p_value, m)
        i = j + 1
    return None if worst is None else worst[1]


def detect_change_points(
    values: Sequence[float],
    *,
    min_effect_pct: float = MIN_EFFECT_PCT,
    alpha: float = ALPHA,
    min_segment: int = MIN_SEGMENT,
) -> list[ChangePoint]:
    """Change points of a series of run centres, oldest first, in index order.

    ``values`` must be finite. ``min_effect_pct`` is the smallest move between the medians
    of neighbouring segments reported; ``alpha`` the largest scan-adjusted p-value;
    ``min_segment`` (at least 2) the persistence rule: runs each regime must hold, so a change
    in the last ``min_segment - 1`` runs is not reported until enough runs exist after it.
    Deterministic: the same input always gives the same output.
    """
    if min_segment < 2:
        raise UsageError("min_segment must be at least 2")
    if not 0.0 < alpha < 1.0:
        raise UsageError("alpha must be between 0 and 1")
    if min_effect_pct < 0.0:
        raise UsageError("min_effect_pct must not be negative")
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise UsageError("values must be a flat sequence")
    if not np.all(np.isfinite(x)):
        raise UsageError("values must be finite")
    if x.size < 2 * min_segment:
        return []

    # Serial dependence (see serial_inflation): measured around a running median, it takes a
    # short real level (a 6-run regression) for wandering noise; measured around the search's
    # proposals, it takes wandering noise (a runner kept for 10 runs) for levels. The search
    # uses the first; the merge, which decides, the geometric mean of both.
    y = _log_or_raw(x)
    plain = serial_inflation(y)
    cps = _segment_search(x, min_segment, min(0.5, alpha * SPLIT_ALPHA_FACTOR), plain)
    inflation = math.sqrt(plain * serial_inflation(y, cps))
    judge_cache: dict[tuple[int, int, int], _Judged] = {}
    drift_cache: dict[tuple[int, ...], tuple[int, ...]] = {}
    judged = _judge_all(x, cps, min_segment, judge_cache, inflation)
    test = _StepTest(min_segment, inflation, alpha, min_effect_pct)
    while judged:
        drop = _weakest_failing(judged, alpha, min_effect_pct)
        if drop is None:
            drop = _drifting(x, judged, drift_cache, test)
        if drop is None:
            break
        del cps[drop]
        judged = _judge_all(x, cps, min_segment, judge_cache, inflation)
    # Each point's location, refined once more between its final neighbours; kept only if
    # every point still passes every rule.
    bounds = [0, *cps, x.size]
    moved = [
        a + _refine(y[a:b], k - a, min_segment)
        for a, k, b in zip(bounds, bounds[1:], bounds[2:], strict=False)
    ]
    # Each point moves between its *old* neighbours, so two neighbours can move towards
    # each other until they are closer than min_segment, meet or cross (a 3% load cycle
    # did: an empty segment, then an IndexError). Such a move is not taken.
    gaps = np.diff([0, *moved, x.size])
    if moved != cps and bool(np.all(gaps >= min_segment)):
        moved_judged = _judge_all(x, moved, min_segment, judge_cache, inflation)
        if _weakest_failing(moved_judged, alpha, min_effect_pct) is None and (
            _drifting(x, moved_judged, drift_cache, test) is None
        ):
            judged = moved_judged
    return [
        ChangePoint(
            index=j.index,
            before=j.before,
            after=j.after,
            change_pct=j.change_pct,
            p_value=j.p_value,
            confidence=1.0 - j.p_value,
        )
        for j in judged
    ]
