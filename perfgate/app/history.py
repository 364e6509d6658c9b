"""History: stored series and their change points."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.config import Config
from perfgate.models import (
    ChangePoint,
    DetectedChange,
    Direction,
    RunPoint,
)
from perfgate.parsers.series import read_series_csv
from perfgate.stats.changepoints import detect_change_points

if TYPE_CHECKING:
    from perfgate.store import SqlStore


def series_changes(
    benchmark: str,
    points: Sequence[RunPoint],
    *,
    branch: str,
    direction: Callable[[str], Direction] | None = None,
) -> list[DetectedChange]:
    """Change points of one benchmark's stored points on ``branch`` (oldest first, as
    :meth:`SqlStore.history` returns them): one series per noisy metric and environment."""
    series: dict[tuple[str, str], list[RunPoint]] = {}
    for p in points:
        if not p.deterministic:
            series.setdefault((p.metric, p.fingerprint_key), []).append(p)
    found: list[DetectedChange] = []
    for (metric, key), runs in sorted(series.items()):
        for cp in detect_change_points([r.centre for r in runs]):
            before, after = runs[cp.index - 1], runs[cp.index]
            found.append(
                DetectedChange(
                    benchmark=benchmark,
                    metric=metric,
                    unit=after.unit,
                    direction=after.direction if direction is None else direction(metric),
                    branch=branch,
                    fingerprint_key=key,
                    point=cp,
                    last_run_before=before.run_id,
                    first_run_after=after.run_id,
                    commit_before=before.commit,
                    commit_after=after.commit,
                    runs_in_series=len(runs),
                )
            )
    return found


def analyze_history(
    config: Config,
    store: SqlStore,
    *,
    branch: str,
    benchmark: str | None = None,
    limit: int = 1000,
    record: bool = True,
    now: datetime | None = None,
) -> list[DetectedChange]:
    """Change points of every noisy metric's series on ``branch`` (one series per
    benchmark, metric and environment), oldest first.

    Each is recorded as an alert (once: a change found again keeps its alert and triage
    state) unless ``record`` is false, and carries its alert's triage state; change points
    triaged ``invalid`` (not real changes) are left out."""
    names = [benchmark] if benchmark else store.benchmarks(project=config.project, branch=branch)
    found: list[DetectedChange] = []
    for name in names:
        points = store.history(project=config.project, benchmark=name, branch=branch, limit=limit)
        found.extend(
            series_changes(
                name, points, branch=branch, direction=lambda m: config.policy(m).direction
            )
        )
    if record and found:
        from perfgate.app.triage import record_alerts  # the store's team side, only to write

        record_alerts(config, store, changes=found, now=now)
    return with_triage(config, store, found)


def with_triage(
    config: Config, store: SqlStore, found: Sequence[DetectedChange]
) -> list[DetectedChange]:
    """``found`` with each change point's alert triage state; those triaged ``invalid``
    (not real changes) left out."""
    statuses: dict[tuple[str, str], str] = {}
    for name in sorted({c.benchmark for c in found}):
        statuses.update(store.alert_statuses(project=config.project, benchmark=name))
    out = []
    for c in found:
        status = statuses.get((c.first_run_after, c.metric))
        if status != "invalid":
            out.append(replace(c, triage=status))
    return out


def metric_history(
    config: Config,
    store: SqlStore,
    *,
    benchmark: str | None,
    branch: str | None,
    metric: str,
    limit: int,
) -> list[RunPoint]:
    """The last ``limit`` runs' values of ``metric``, oldest first, for one or all benchmarks."""
    names = [benchmark] if benchmark else store.benchmarks(project=config.project, branch=branch)
    points: list[RunPoint] = []
    for name in names:
        points.extend(
            p
            for p in store.history(
                project=config.project, benchmark=name, branch=branch, limit=limit
            )
            if p.metric == metric
        )
    return points


def detect_series(path: Path) -> tuple[list[float], list[ChangePoint]]:
    """``perfgate detect``: the values of a series file and their change points, found by the
    same detector as ``history analyze``."""
    values = read_series_csv(path)
    return values, detect_change_points(values)
