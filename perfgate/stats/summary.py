"""Summary statistics of one measurement's samples."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from perfgate.models import Summary


def mad(values: Sequence[float] | np.ndarray) -> float:
    """Median absolute deviation (unscaled)."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return 0.0
    return float(np.median(np.abs(arr - np.median(arr))))


def summarize(repeats: Sequence[Sequence[float]]) -> Summary:
    """Summarise samples grouped by repeat; ``centre`` is the median of the repeat medians.

    Raises:
        ValueError: no samples, or a sample that is not a finite number.
    """
    groups = [np.asarray(rep, dtype=float) for rep in repeats if len(rep) > 0]
    if not groups:
        raise ValueError("no samples to summarise")
    flat = np.concatenate(groups)
    if not np.all(np.isfinite(flat)):
        raise ValueError("samples must be finite numbers")
    p10, p90, p99 = np.percentile(flat, [10, 90, 99])
    centre = float(np.median([np.median(g) for g in groups]))
    return Summary(
        n=int(flat.size),
        centre=centre,
        median=float(np.median(flat)),
        mean=float(np.mean(flat)),
        mad=mad(flat),
        p10=float(p10),
        p90=float(p90),
        p99=float(p99),
        minimum=float(np.min(flat)),
        maximum=float(np.max(flat)),
    )


def repeat_centres(repeats: Sequence[Sequence[float]]) -> tuple[float, ...]:
    return tuple(float(np.median(rep)) for rep in repeats if len(rep) > 0)
