"""History analysis: where did a series' level move, and stay moved?

The input is one number per run (a run's centre), oldest first. The output is a list of
change points, each the first run of a new regime, with the level before and after, the size
of the move and how sure the test is.

Assumptions, in plain words:

* Between change points the runs are independent draws from one distribution: the order of
  the runs inside a regime carries no information. No shape is assumed (not normal, not
  log-normal): the test uses only the ranks of the values, so a 10x outlier weighs no more
  than a run that is merely the slowest, and heavy-tailed noise does not fake a change.
* A change point is a shift of *level* (median) that persists. A change of spread alone
  (the machine got noisier, same median) is not a change point: rank tests barely react to
  it, and a gate does not care about it. A slow drift is not a change point either: a split is
  kept only when the level also jumps *locally*, across the few runs on either side of it.
* A change must hold for at least ``min_segment`` runs on each side (the persistence rule).
  A single-run spike, or a blip shorter than ``min_segment``, is never a change point. The
  price: a change in the last ``min_segment - 1`` runs of a series cannot be reported yet; it
  is reported once ``min_segment`` runs exist after it (with the default, 5 runs after the
  change, that run included). Likewise nothing is reported in the first ``min_segment`` runs.
* A change must be at least ``min_effect_pct`` percent between the medians of the segments on
  either side (a perf gate does not care about a 0.3% shift) and significant at ``alpha``.

The method: binary segmentation with a rank CUSUM (the standardised Mann-Whitney statistic
of every split of a segment, computed at once from cumulative rank sums), then a merge pass
that removes, one by one, the weakest change point that fails the significance, size or
locality rule, recomputing its neighbours each time (the weak-to-strong structure of Otava's
E-divisive, with a rank statistic in place of energy distance and a t-test). The split search
uses a relaxed level (``SPLIT_ALPHA_FACTOR`` times ``alpha``) so that a change hidden by a
second one in the same segment is still proposed; the merge pass applies ``alpha`` itself.

The p-value of a change point is the chance that a segment with no change at all (its
neighbouring change points or the series ends as bounds) would show a split this strong
*anywhere* in it: the maximum of the standardised rank CUSUM is compared with the
Siegmund-James tail approximation for the maximum of a standardised Brownian bridge, with
the discreteness correction (checked by simulation: calibrated within about 10% from 20 to
1,000 points). It is analytic, so results are deterministic and the search is fast (a
1,000-point series takes milliseconds). ``confidence`` is ``1 - p_value``: the probability
that a change-free segment would *not* produce a split this strong.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import special, stats

from perfgate.errors import ParseError

MIN_EFFECT_PCT = 1.5
"""Smallest move between segment medians reported, in percent."""
ALPHA = 0.01
"""Largest p-value of a reported change point (scan-adjusted, per segment)."""
MIN_SEGMENT = 5
"""Runs a new level must hold (and the old one must have held) to count: the persistence rule."""
SPLIT_ALPHA_FACTOR = 10.0
"""The split search proposes candidates at ``alpha`` times this; the merge pass applies alpha."""
LOCAL_WINDOW = 15
"""Runs on each side of a change point over which its local jump is measured."""
LOCAL_FRACTION = 0.5
"""The local jump must be at least this share of ``min_effect_pct``, in the same direction."""
MAD_TO_SD = 1.4826
OUTLIER_MADS = 4.0
DRIFT_BIC_WEIGHT = 1.0
DRIFT_GAIN = 0.0
ABRUPT_WIDTH = 2
LOCATE_SLACK = 5


@dataclass(frozen=True)
class ChangePoint:
    """One change of level in a series.

    ``index`` is the first run of the new regime: ``values[index]`` is after the change, so
    the change lies between the runs ``index - 1`` and ``index`` (their commits bound it).
    ``before``/``after`` are the medians of the segments on either side (bounded by the
    neighbouring change points or the series ends); ``change_pct`` is
    ``(after - before) / |before| * 100`` (infinite when ``before`` is 0). ``p_value`` and
    ``confidence`` are described in the module docstring.
    """

    index: int
    before: float
    after: float
    change_pct: float
    p_value: float
    confidence: float


@dataclass(frozen=True)
class _Split:
    index: int
    z: float
    p_value: float


def _nu(x: np.ndarray) -> np.ndarray:
    """Siegmund's overshoot correction for a Gaussian random walk crossing a boundary."""
    half = x / 2.0
    cdf = special.ndtr(half)
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
    bonferroni = (hi - lo + 1) * 2.0 * float(special.ndtr(-z))
    return float(min(1.0, approx, bonferroni))


def _rank_cusum(x: np.ndarray) -> np.ndarray:
    """|Z_k| for k = 1..n-1: the standardised Mann-Whitney statistic of x[:k] against x[k:].

    Ties get average ranks and the tie-corrected variance. All zeros when x is constant.
    """
    n = x.size
    centred = stats.rankdata(x) - (n + 1) / 2.0
    var_rank = float(np.mean(centred * centred))
    if var_rank <= 0.0:
        return np.zeros(n - 1)
    sums = np.cumsum(centred)[:-1]
    k = np.arange(1, n, dtype=float)
    out: np.ndarray = np.abs(sums) / np.sqrt(k * (n - k) / (n - 1) * var_rank)
    return out


def _best_split(x: np.ndarray, min_segment: int) -> _Split | None:
    """The strongest split of x leaving at least min_segment points on each side."""
    n = x.size
    if n < 2 * min_segment:
        return None
    z = _rank_cusum(x)[min_segment - 1 : n - min_segment]
    j = int(np.argmax(z))
    z_max = float(z[j])
    return _Split(min_segment + j, z_max, _scan_p_value(z_max, n, min_segment, n - min_segment))


def _split_at(x: np.ndarray, k: int, min_segment: int) -> _Split:
    """The split of x at k, with its scan-adjusted p-value over x."""
    n = x.size
    z = float(_rank_cusum(x)[k - 1])
    return _Split(k, z, _scan_p_value(z, n, min_segment, n - min_segment))


def _pct(before: float, after: float) -> float:
    if before == 0.0:
        return 0.0 if after == 0.0 else math.copysign(math.inf, after)
    return (after - before) / abs(before) * 100.0


def _segment_search(x: np.ndarray, min_segment: int, alpha: float) -> list[int]:
    """Binary segmentation: every split significant at alpha, recursively."""
    found: list[int] = []
    stack = [(0, x.size)]
    while stack:
        a, b = stack.pop()
        split = _best_split(x[a:b], min_segment)
        if split is None or split.p_value >= alpha:
            continue
        k = a + split.index
        found.append(k)
        stack.append((a, k))
        stack.append((k, b))
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


def _best_ramp_sse(
    t: np.ndarray, y: np.ndarray, widths: Sequence[int], first: int, last: int
) -> float:
    """Least sum of squares of y (centred, at increasing times t) on one ramp between levels.

    The ramp ``g(t) = clip((t - start) / w, 0, 1)``, of one of ``widths`` runs, must overlap
    [first - LOCATE_SLACK, last + LOCATE_SLACK]; it may run past either end of the segment
    (a straight line is a ramp wider than the segment). Every (start, width) is scored at
    once from prefix sums, in time independent of the segment's length.
    """
    syy = float(np.dot(y, y))
    starts_list, widths_list = [], []
    for w in widths:
        stride = max(1, w // 8)
        grid = np.arange(first - w - LOCATE_SLACK, last + LOCATE_SLACK + 1, stride, dtype=float)
        starts_list.append(grid)
        widths_list.append(np.full(grid.size, float(w)))
    if not starts_list:
        return syy
    start = np.concatenate(starts_list)
    width = np.concatenate(widths_list)
    zero = np.zeros(1)
    c0 = np.arange(t.size + 1, dtype=float)
    c1 = np.concatenate((zero, np.cumsum(t)))
    c2 = np.concatenate((zero, np.cumsum(t * t)))
    y0 = np.concatenate((zero, np.cumsum(y)))
    y1 = np.concatenate((zero, np.cumsum(t * y)))
    lo = np.searchsorted(t, start, side="right")  # t <= start: g = 0
    hi = np.searchsorted(t, start + width, side="left")  # t >= start + w: g = 1
    m0, m1, m2 = c0[hi] - c0[lo], c1[hi] - c1[lo], c2[hi] - c2[lo]
    my0, my1 = y0[hi] - y0[lo], y1[hi] - y1[lo]
    tail0, taily = t.size - hi, y0[-1] - y0[hi]
    sg = (m1 - start * m0) / width + tail0
    sgg = (m2 - 2.0 * start * m1 + start * start * m0) / (width * width) + tail0
    sgy = (my1 - start * my0) / width + taily
    sgg_c = sgg - sg * sg / t.size
    sgy_c = sgy - sg * y0[-1] / t.size
    ok = sgg_c > 1e-9 * t.size
    if not ok.any():
        return syy
    return float(np.min(syy - sgy_c[ok] ** 2 / sgg_c[ok]))


def _drift_gain(x: np.ndarray, steps: Sequence[int]) -> float:
    """How much better one gradual ramp explains the segment x than steps at ``steps``.

    The step model is flat levels between the given change points; the drift model two flat
    levels joined by one linear ramp wider than ABRUPT_WIDTH runs, placed anywhere around
    the steps. Both are fitted by least squares on log values (on the values themselves if
    any is not positive), leaving out runs more than OUTLIER_MADS robust deviations off the
    step fit so that spikes decide nothing. The result is the drop in the sum of squares in
    units of the residual variance (a chi-square-like number, a few units at most when the
    steps are real), plus STEP_PENALTY for each step beyond the first, so that a ramp cut
    into several small steps is recognised as one drift.
    """
    y = np.log(x) if bool(np.all(x > 0.0)) else x.astype(float)
    n = y.size
    bounds = [0, *steps, n]
    piece = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    medians = np.array([np.median(y[bounds[i] : bounds[i + 1]]) for i in range(len(steps) + 1)])
    resid = y - medians[piece]
    spread = MAD_TO_SD * float(np.median(np.abs(resid - np.median(resid))))
    keep = np.abs(resid) <= OUTLIER_MADS * spread if spread > 0.0 else np.ones(n, dtype=bool)
    t = np.arange(n, dtype=float)[keep]
    y = y[keep] - float(np.mean(y[keep]))
    piece = piece[keep]
    dof = y.size - 2 * len(steps) - 1
    if dof < 3:
        return 0.0
    counts = np.bincount(piece, minlength=len(steps) + 1)
    if np.any(counts == 0):
        return 0.0
    means = np.bincount(piece, weights=y) / counts
    step_sse = float(np.sum((y - means[piece]) ** 2))
    if len(steps) == 1:
        # A step found by the rank scan may sit a run or two off: let it move, and be a
        # transition of up to ABRUPT_WIDTH runs, before it is compared with a drift.
        abrupt = range(1, ABRUPT_WIDTH + 1)
        step_sse = min(step_sse, _best_ramp_sse(t, y, abrupt, steps[0], steps[0]))
    ramp_sse = _best_ramp_sse(t, y, _ramp_widths(n), steps[0], steps[-1])
    variance = step_sse / dof
    if variance <= 0.0:
        return 0.0
    # Bayesian information criterion: the steps model has 2m + 1 parameters (levels and
    # locations), the drift model 4 (two levels, start, width).
    penalty = DRIFT_BIC_WEIGHT * math.log(n) * (2 * len(steps) - 3)
    return (step_sse - ramp_sse) / variance + penalty


def _judge(x: np.ndarray, a: int, k: int, b: int, min_segment: int) -> _Judged:
    """Statistics of the change point k between its neighbours a and b."""
    split = _split_at(x[a:b], k - a, min_segment)
    before = float(np.median(x[a:k]))
    after = float(np.median(x[k:b]))
    w = min(k - a, b - k, LOCAL_WINDOW)
    local_before = float(np.median(x[k - w : k]))
    local_after = float(np.median(x[k : k + w]))
    return _Judged(
        index=k,
        p_value=split.p_value,
        change_pct=_pct(before, after),
        local_pct=_pct(local_before, local_after),
        before=before,
        after=after,
    )


def _judge_all(x: np.ndarray, cps: Sequence[int], min_segment: int) -> list[_Judged]:
    bounds = [0, *cps, x.size]
    return [
        _judge(x, bounds[i], bounds[i + 1], bounds[i + 2], min_segment) for i in range(len(cps))
    ]


def _weakest_failing(
    judged: Sequence[_Judged], alpha: float, min_effect_pct: float
) -> int | None:
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


def _drifting(x: np.ndarray, judged: Sequence[_Judged]) -> int | None:
    """Position of the change point to drop as part of a drift (None when none is).

    Consecutive change points moving the same way form a group, bounded by the change
    points around it (or the series ends). When one ramp explains the group's segment
    better than its steps by more than DRIFT_GAIN, its least significant point is dropped.
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
        if _drift_gain(x[a:b], steps) > DRIFT_GAIN:
            m = max(range(i, j + 1), key=lambda q: judged[q].p_value)
            if worst is None or judged[m].p_value > worst[0]:
                worst = (judged[m].p_value, m)
        i = j + 1
    return None if worst is None else worst[1]


def _relocate(x: np.ndarray, cps: list[int], min_segment: int) -> list[int]:
    """Move each change point to the best split between its neighbours (one pass)."""
    out = list(cps)
    for i in range(len(out)):
        a = out[i - 1] if i > 0 else 0
        b = out[i + 1] if i + 1 < len(out) else x.size
        split = _best_split(x[a:b], min_segment)
        if split is not None:
            out[i] = a + split.index
    return out


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
        raise ValueError("min_segment must be at least 2")
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be between 0 and 1")
    if min_effect_pct < 0.0:
        raise ValueError("min_effect_pct must not be negative")
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError("values must be a flat sequence")
    if not np.all(np.isfinite(x)):
        raise ValueError("values must be finite")
    if x.size < 2 * min_segment:
        return []

    cps = _segment_search(x, min_segment, min(0.5, alpha * SPLIT_ALPHA_FACTOR))
    judged = _judge_all(x, cps, min_segment)
    while judged:
        drop = _weakest_failing(judged, alpha, min_effect_pct)
        if drop is None:
            drop = _drifting(x, judged)
        if drop is None:
            break
        del cps[drop]
        judged = _judge_all(x, cps, min_segment)
    # Once weaker neighbours are gone, a change point may sit better elsewhere between the
    # ones left; move it there only if it still passes every rule.
    moved = _relocate(x, cps, min_segment)
    if moved != cps:
        moved_judged = _judge_all(x, moved, min_segment)
        if _weakest_failing(moved_judged, alpha, min_effect_pct) is None and (
            _drifting(x, moved_judged) is None
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


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def change_points_to_json(points: Sequence[ChangePoint]) -> dict[str, object]:
    """The object ``perfgate detect --json`` prints (non-finite numbers become null)."""
    return {
        "change_points": [p.index for p in points],
        "details": [
            {
                "index": p.index,
                "before": _finite_or_none(p.before),
                "after": _finite_or_none(p.after),
                "change_pct": _finite_or_none(p.change_pct),
                "p_value": p.p_value,
                "confidence": p.confidence,
            }
            for p in points
        ],
    }


def read_series_csv(path: str | Path) -> list[float]:
    """Values of a series file: CSV with header ``index,value``, one row per run, oldest first.

    ``index`` must be an integer, strictly increasing; ``value`` a finite number. Blank lines
    are skipped. Change points are reported as 0-based row positions (the same as the index
    column when it counts 0, 1, 2, ...). Raises ParseError naming the file and line.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ParseError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ParseError(f"{p}: cannot be read ({exc.__class__.__name__})") from None
    rows = csv.reader(text.splitlines())
    values: list[float] = []
    previous: int | None = None
    header_seen = False
    for line_no, row in enumerate(rows, start=1):
        if not row or all(not cell.strip() for cell in row):
            continue
        cells = [cell.strip() for cell in row]
        if not header_seen:
            if [c.lower() for c in cells] != ["index", "value"]:
                raise ParseError(
                    f"{p}:{line_no}: header must be 'index,value', got {','.join(cells)!r}"
                )
            header_seen = True
            continue
        if len(cells) != 2:
            raise ParseError(f"{p}:{line_no}: expected 2 fields (index,value), got {len(cells)}")
        raw_index, raw_value = cells
        try:
            index = int(raw_index)
        except ValueError:
            raise ParseError(f"{p}:{line_no}: index {raw_index!r} is not an integer") from None
        try:
            value = float(raw_value)
        except ValueError:
            raise ParseError(f"{p}:{line_no}: value {raw_value!r} is not a number") from None
        if not math.isfinite(value):
            raise ParseError(f"{p}:{line_no}: value {raw_value!r} is not finite")
        if previous is not None and index <= previous:
            raise ParseError(
                f"{p}:{line_no}: index {index} is not greater than the previous index {previous}"
            )
        previous = index
        values.append(value)
    if not header_seen:
        raise ParseError(f"{p}:1: header must be 'index,value', but the file is empty")
    if not values:
        raise ParseError(f"{p}: no runs after the header (the series is empty)")
    return values
