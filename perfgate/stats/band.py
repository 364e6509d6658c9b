"""Intervals for plots: the noise band of a baseline window and one run's centre interval.

Both use the decision procedure's own estimates (see :mod:`perfgate.stats.compare`), so a
report draws the band the gate judges against rather than a look-alike:

* :func:`prediction_band` is where the next run's centre is expected to fall if nothing
  changed: the gate's own evidence for a run like the window's last one, taken at the
  window's median (on the ratio scale, so the band is asymmetric around the median: it
  never reaches 0). A gate judged alone (no other metrics lend it a prior) and a current run
  that is noisy itself can differ; a plot of the window cannot know those.
* :func:`centre_intervals` gives the 95% interval of each run's centre from its repeats:
  t(0.975, r - 1) · s / sqrt(r) over its r repeat centres, or 1.96 · its block-bootstrap
  standard error when it ran a single repeat; ``None`` when neither is known.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from perfgate.models import Band, MetricPolicy, RunPoint
from perfgate.stats.compare import Candidate, gate_evidence

BAND_LEVEL = 0.95


def prediction_band(points: Sequence[RunPoint], level: float = BAND_LEVEL) -> Band | None:
    """The ``level`` prediction band of a baseline window's points; None under 2 runs."""
    if len(points) < 2:
        return None
    k = len(points)
    centre = float(np.median([p.centre for p in points]))
    last = points[-1]
    ratio = centre / last.centre if last.centre else 1.0
    probe = replace(
        last,
        centre=centre,
        repeat_centres=tuple(x * ratio for x in last.repeat_centres),
    )
    policy = MetricPolicy(direction=last.direction, min_effect_pct=0.0)
    (ev,) = gate_evidence([Candidate(current=probe, baseline=tuple(points), policy=policy)])
    half = ev.quantile(0.5 + level / 2.0) * ev.sd
    if ev.log:
        low, high = centre * math.exp(-half), centre * math.exp(half)
    else:
        scale = abs(centre) or 1.0
        low, high = centre - half * scale, centre + half * scale
    return Band(centre=centre, low=low, high=high, runs=k, level=level)


def centre_intervals(points: Sequence[RunPoint]) -> list[float | None]:
    """Half-width of the 95% interval of each point's centre (see the module docstring),
    vectorised by repeat count."""
    from scipy import special  # here, not above: 0.2 s of import (test_import_cost.py)

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
