"""The baseline window: which of a series' stored runs a new run is judged against.

Pure: the caller reads the runs (newest ``cap``, comparable fingerprint, not excluded, since
the benchmark's latest baseline reset) and the change points' triage; this module says which
of them count. Assumption: a change point that persisted (see :mod:`perfgate.stats.changepoints`)
is an accepted change of level, so the window starts after the last one; a change point whose
alert was triaged ``invalid`` is not a change and cuts nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from perfgate.models import Fingerprint, RunPoint
from perfgate.stats.changepoints import MIN_SEGMENT, detect_change_points

HISTORY_SCAN_RUNS = 100
"""Runs of history scanned for change points before the baseline window is cut."""


@dataclass(frozen=True)
class Window:
    """A run's baseline: per metric, the comparable runs' points, oldest first; or, when
    there are none, the fingerprints of the other testbeds that do have runs."""

    points: Mapping[str, tuple[RunPoint, ...]]
    others: Mapping[str, Fingerprint]


def runs_since_last_change(
    centres: Mapping[str, Sequence[tuple[str, float]]],
    *,
    deterministic: Callable[[str], bool],
    invalid: Collection[tuple[str, str]] = frozenset(),
) -> dict[str, set[str]]:
    """Per noisy metric, the ids of the runs after the last change point of its series
    (``centres``: per metric, ``(run id, centre)`` oldest first). A change point whose
    ``(first run after, metric)`` is in ``invalid`` does not cut. Metrics with no change
    point (and deterministic ones) are left out: their whole window counts."""
    out: dict[str, set[str]] = {}
    for metric, series in centres.items():
        if deterministic(metric) or len(series) < 2 * MIN_SEGMENT:
            continue
        points = [
            cp
            for cp in detect_change_points([c for _, c in series])
            if (series[cp.index][0], metric) not in invalid
        ]
        if points:
            out[metric] = {run_id for run_id, _ in series[points[-1].index :]}
    return out


def cut_window(
    points: Sequence[RunPoint],
    since: Mapping[str, Collection[str]],
    others: Mapping[str, Fingerprint] | None = None,
) -> Window:
    """The window: ``points`` grouped per metric (order kept), each metric's cut to the runs
    in ``since`` where it has an entry."""
    by_metric: dict[str, list[RunPoint]] = {}
    for p in points:
        allowed = since.get(p.metric)
        if allowed is None or p.run_id in allowed:
            by_metric.setdefault(p.metric, []).append(p)
    return Window({m: tuple(ps) for m, ps in by_metric.items()}, dict(others or {}))
