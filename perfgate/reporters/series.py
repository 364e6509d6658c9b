"""The trend series of one (benchmark, metric): one definition for every place that draws it.

The PR comment's trend column (:func:`perfgate.reporters.markdown.sparkline`) and the HTML
report's overview sparklines both draw :func:`trend_values`: the values of the comparison's
baseline window, oldest first, then the judged run's value. A reader who sees a trend in
one sees the same runs in the other.
"""

from __future__ import annotations

from collections.abc import Sequence

from perfgate.models import Comparison, RunPoint


def trend_values(points: Sequence[RunPoint], comparison: Comparison) -> list[float]:
    """The centres of ``points`` in the comparison's window and of its metric (in their order,
    oldest first), then the current run's centre when it has one."""
    ids = set(comparison.baseline_run_ids)
    values = [p.centre for p in points if p.metric == comparison.metric and p.run_id in ids]
    if comparison.current_centre is not None:
        values.append(comparison.current_centre)
    return values
