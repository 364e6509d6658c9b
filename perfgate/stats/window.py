"""The baseline window: which of a series' stored runs a new run is judged against.

Pure: the caller reads the runs (newest ``cap``, comparable fingerprint, not excluded, since
the benchmark's latest baseline reset) and the change points' triage; this module says which
of them count. Assumption: a change point that persisted (see :mod:`perfgate.stats.changepoints`)
is an accepted change of level, so the window starts after the last one; a change point whose
alert was triaged ``invalid`` is not a change and cuts nothing. A gate scans its benchmarks'
series net of the job factor they share (:func:`net_centres`): a runner pool or a turbo state
that moved every benchmark of a job at once is the job's, judged apart, and cuts no window.

For a PR the caller reads only the base branch's runs at or before the PR's merge-base run, so
what landed on the base branch after the fork point is never the PR's; :func:`moved_since`
says whether those later runs moved beyond the minimum effect (a plain median ratio, a note
for the reader and never a verdict).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from perfgate.models import Fingerprint, MetricPolicy, RunPoint
from perfgate.stats.changepoints import MAD_TO_SD, MIN_SEGMENT, detect_change_points

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


def net_centres(
    centres: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]],
    *,
    deterministic: Callable[[str], bool],
) -> dict[str, dict[str, list[tuple[str, float]]]]:
    """Per benchmark, per metric, the ``(run id, centre)`` series of a gate's benchmarks net
    of the job factor they share (:func:`perfgate.stats.compare.net_of_job`), for
    :func:`runs_since_last_change`: a level shift of the whole job (a runner pool, a turbo
    state) is the job's, not a change of each benchmark, and cuts no window; the gate
    judges the job apart. The series are aligned from the newest (one CI job a place);
    deterministic metrics, which no change point cuts, stand as they are."""
    from perfgate.stats.compare import net_of_job

    out = {b: {m: list(series) for m, series in per.items()} for b, per in centres.items()}
    for metric in sorted({m for per in centres.values() for m in per if not deterministic(m)}):
        names = [b for b, per in centres.items() if metric in per]
        netted = net_of_job([[c for _, c in centres[b][metric]] for b in names])
        for name, values in zip(names, netted, strict=True):
            ids = [run_id for run_id, _ in centres[name][metric]]
            out[name][metric] = list(zip(ids, values, strict=True))
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


MOVED_MIN_RUNS = 3
"""Base-branch runs after the merge-base needed before :func:`moved_since` says the branch
moved: one run can be a spike, two can be a noisy pair."""
MOVED_NOISE_FACTOR = 2.5
"""And the move must exceed this many standard errors of the newer runs' median (from the
window's robust spread), so an unchanged but noisy branch is not said to have moved."""


def moved_since(
    window: Sequence[RunPoint], newer: Sequence[RunPoint], policy: MetricPolicy
) -> float | None:
    """The change (%) of the median centre of ``newer`` (one metric's base-branch runs after
    the merge-base) against the median of ``window`` (the same metric's baseline window),
    when there are at least ``MOVED_MIN_RUNS`` newer runs and the change is at least the
    metric's minimum effect; else ``None``."""
    if len(newer) < MOVED_MIN_RUNS or not window:
        return None
    before = statistics.median(p.centre for p in window)
    after = statistics.median(p.centre for p in newer)
    if before == 0:
        return None
    change = 100.0 * (after / before - 1.0)
    if change == 0 or abs(change) < policy.min_effect_pct_at(before):
        return None
    centres = [p.centre for p in window]
    spread = MAD_TO_SD * statistics.median(abs(c - before) for c in centres) / abs(before)
    noise = MOVED_NOISE_FACTOR * 1.25 * 100.0 * spread / math.sqrt(len(newer))
    if abs(change) < noise:
        return None
    return change
