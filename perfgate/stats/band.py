"""Intervals for plots: the noise band of a baseline window and one run's centre interval.

Both use the decision procedure's own estimates (see :mod:`perfgate.stats.compare`), so a
report draws the band the gate judges against rather than a look-alike:

* :func:`prediction_band` is where the next run's centre is expected to fall if nothing
  changed: the window's median ± t · scale · sqrt(1 + (pi/2) / k), with the scale the larger
  of the between-run spread (SD of the runs within 5 MADs of the median) and the within-run
  spread (pooled repeat centres), floored at 0.2% of the median. A gate additionally widens
  this for a current run that is noisy itself; a plot of the window cannot know that.
* :func:`centre_interval` is the 95% interval of one run's centre from its repeats:
  t(0.975, r - 1) · s / sqrt(r) over its r repeat centres, or 1.96 · its block-bootstrap
  standard error when it ran a single repeat; ``None`` when neither is known.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import special

from perfgate.models import Band, RunPoint
from perfgate.stats.compare import (
    MEDIAN_VARIANCE_FACTOR,
    SCALE_FLOOR,
    _trimmed_scale,
    _within_run_scale,
)

BAND_LEVEL = 0.95


def prediction_band(points: Sequence[RunPoint], level: float = BAND_LEVEL) -> Band | None:
    """The ``level`` prediction band of a baseline window's points; None under 2 runs."""
    if len(points) < 2:
        return None
    centres = np.asarray([p.centre for p in points], dtype=float)
    k = centres.size
    centre = float(np.median(centres))
    s_between, dof_between = _trimmed_scale(centres, centre)
    s_repeat, dof_within, mean_repeats = _within_run_scale(points)
    s_within = s_repeat / math.sqrt(mean_repeats)
    scale, dof = (s_between, dof_between) if s_between >= s_within else (s_within, dof_within)
    scale = max(scale, SCALE_FLOOR * abs(centre))
    half = float(special.stdtrit(max(dof, 1), 0.5 + level / 2.0)) * scale
    half *= math.sqrt(1.0 + MEDIAN_VARIANCE_FACTOR / k)
    return Band(centre=centre, low=centre - half, high=centre + half, runs=k, level=level)


def centre_interval(point: RunPoint) -> float | None:
    """Half-width of the 95% interval of one run's centre (see the module docstring)."""
    reps = point.repeat_centres
    if len(reps) >= 2:
        sd = float(np.std(np.asarray(reps, dtype=float), ddof=1))
        return float(special.stdtrit(len(reps) - 1, 0.975)) * sd / math.sqrt(len(reps))
    if point.centre_se is not None and math.isfinite(point.centre_se):
        return 1.96 * point.centre_se
    return None


def centre_intervals(points: Sequence[RunPoint]) -> list[float | None]:
    """:func:`centre_interval` of many points at once (vectorised by repeat count)."""
    out: list[float | None] = [None] * len(points)
    groups: dict[int, list[int]] = {}
    for i, p in enumerate(points):
        n = len(p.repeat_centres)
        if n >= 2:
            groups.setdefault(n, []).append(i)
        elif p.centre_se is not None and math.isfinite(p.centre_se):
            out[i] = 1.96 * p.centre_se
    for n, idx in groups.items():
        reps = np.asarray([points[i].repeat_centres for i in idx], dtype=float)
        half = np.std(reps, axis=1, ddof=1) * (float(special.stdtrit(n - 1, 0.975)) / math.sqrt(n))
        for i, h in zip(idx, half.tolist(), strict=True):
            out[i] = h
    return out
