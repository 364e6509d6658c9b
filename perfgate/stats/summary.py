"""Summary statistics of one measurement's samples."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from perfgate.models import Summary
from perfgate.stats.steady import block_bootstrap_se, steady_start


def median(values: Sequence[float] | np.ndarray) -> float:
    """The median of the values (all of them, flattened), exactly as ``np.median`` gives it:
    the middle value, or the mean of the two middle ones; NaN when there are none or one is
    NaN. A gate takes hundreds of medians of a few dozen values each, where ``np.median``'s
    own overhead is most of the cost (and its first call imports ``numpy.ma``)."""
    ordered = np.sort(np.asarray(values, dtype=float), axis=None)
    n = ordered.size
    if n == 0 or ordered[-1] != ordered[-1]:  # NaN sorts last
        return math.nan
    half = n // 2
    if n % 2:
        return float(ordered[half])
    return float((ordered[half - 1] + ordered[half]) / 2.0)


def nanmedian(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """The median along ``axis`` of the values that are not NaN, exactly as
    ``np.nanmedian`` gives it (NaN where there are none): the gate takes it over each job's
    benchmarks, once per benchmark left out, where ``np.nanmedian``'s masked-array path on
    small arrays costs more than the rest of the job factor."""
    ordered = np.sort(values, axis=axis)  # NaN sorts last
    n = np.expand_dims(np.sum(~np.isnan(values), axis=axis), axis)
    low = np.take_along_axis(ordered, np.maximum((n - 1) // 2, 0), axis)
    high = np.take_along_axis(ordered, np.maximum(n // 2, 0), axis)
    with np.errstate(invalid="ignore"):
        out = np.where(n > 0, (low + high) / 2.0, np.nan)
    return np.squeeze(out, axis=axis)


def quantile(values: Sequence[float] | np.ndarray, q: float) -> float:
    """The ``q`` quantile of the values (flattened), exactly as ``np.quantile`` gives it with
    its default (linear) method: the sorted values at ``(n - 1) * q`` interpolated as numpy
    interpolates them; NaN when one is NaN. ``np.quantile``'s first call imports ``numpy.ma``
    (about 20 ms), which a gate would pay for one quantile of a few values.

    Raises:
        ValueError: no values, or ``q`` outside [0, 1].
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q!r} is outside [0, 1]")
    ordered = np.sort(np.asarray(values, dtype=float), axis=None).tolist()
    n = len(ordered)
    if n == 0:
        raise ValueError("no values to take a quantile of")
    if ordered[-1] != ordered[-1]:  # NaN sorts last
        return math.nan
    virtual = (n - 1) * q
    if virtual >= n - 1:
        below = above = n - 1
        gamma = virtual + 1.0  # numpy's index of the last value is -1
    else:
        below = math.floor(virtual)
        above = below + 1
        gamma = virtual - below
    a, b = ordered[below], ordered[above]
    diff = b - a
    # numpy's lerp: from the nearer end, so that a weight of 1 gives b exactly
    return float(b - diff * (1.0 - gamma)) if gamma >= 0.5 else float(a + diff * gamma)


def mad(values: Sequence[float] | np.ndarray) -> float:
    """Median absolute deviation (unscaled)."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return 0.0
    return median(np.abs(arr - median(arr)))


def summarize(repeats: Sequence[Sequence[float]], *, steady: bool = False) -> Summary:
    """Summarise samples grouped by repeat; ``centre`` is the median of the repeat medians.

    With ``steady=True`` (series of steps) each repeat's warm-up transient is found and left
    out of every statistic, and the centre gets a block-bootstrap standard error.

    Raises:
        ValueError: no samples, or a sample that is not a finite number.
    """
    raw = [np.asarray(rep, dtype=float) for rep in repeats if len(rep) > 0]
    if not raw:
        raise ValueError("no samples to summarise")
    if not all(np.all(np.isfinite(g)) for g in raw):
        raise ValueError("samples must be finite numbers")
    starts = [steady_start(g) if steady else 0 for g in raw]
    groups = [g[s:] for g, s in zip(raw, starts, strict=True)]
    flat = np.concatenate(groups)
    p10, p90, p99 = np.percentile(flat, [10, 90, 99])
    centres = tuple(float(np.median(g)) for g in groups)
    centre_se = None
    if steady:
        ses = [block_bootstrap_se(g) for g in groups]
        finite = [x for x in ses if np.isfinite(x)]
        if finite:
            centre_se = float(np.sqrt(np.mean(np.square(finite)) / len(groups)))
    return Summary(
        n=int(flat.size),
        centre=float(np.median(centres)),
        median=float(np.median(flat)),
        mean=float(np.mean(flat)),
        mad=mad(flat),
        p10=float(p10),
        p90=float(p90),
        p99=float(p99),
        minimum=float(np.min(flat)),
        maximum=float(np.max(flat)),
        repeat_centres=centres,
        dropped=int(sum(starts)),
        centre_se=centre_se,
    )


def repeat_centres(repeats: Sequence[Sequence[float]]) -> tuple[float, ...]:
    return tuple(float(np.median(rep)) for rep in repeats if len(rep) > 0)
