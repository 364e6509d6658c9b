"""History: stored series, their change points and their drifts (creeping changes)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.config import Config
from perfgate.errors import UsageError
from perfgate.metrics import not_deciding
from perfgate.models import Alert, ChangePoint, DetectedChange, Drift, MetricPolicy, RunPoint
from perfgate.parsers.series import read_series_csv
from perfgate.stats.decide import MIN_BASELINE_RUNS

if TYPE_CHECKING:
    from perfgate.store import SqlStore


def select_benchmarks(
    config: Config, store: SqlStore, benchmarks: Sequence[str], branch: str | None = None
) -> list[str]:
    """The benchmarks a report or an export shows: ``benchmarks`` (each must have runs on
    ``branch``, default: any), else all."""
    names = store.benchmarks(project=config.project, branch=branch)
    where = f"{f' on branch {branch!r}' if branch else ''} in project {config.project!r}"
    missing = sorted(set(benchmarks) - set(names))
    if missing:
        raise UsageError(f"no runs of {', '.join(missing)}{where}")
    names = [n for n in names if n in set(benchmarks)] if benchmarks else names
    if not names:
        raise UsageError(f"no runs{where}: record one with 'perfgate run'")
    return names


def noisy_series(points: Sequence[RunPoint]) -> list[tuple[tuple[str, str], list[RunPoint]]]:
    """``points`` split into one series per noisy (metric, fingerprint key), sorted."""
    series: dict[tuple[str, str], list[RunPoint]] = {}
    for p in points:
        if not p.deterministic:
            series.setdefault((p.metric, p.fingerprint_key), []).append(p)
    return sorted(series.items())


def series_changes(
    benchmark: str,
    points: Sequence[RunPoint],
    *,
    branch: str,
    policy: Callable[[str], MetricPolicy],
) -> list[DetectedChange]:
    """Change points of one benchmark's stored points on ``branch`` (oldest first, as
    :meth:`SqlStore.history` returns them): one series per noisy metric and environment,
    each judged in its ``policy``'s direction (:func:`judged_as`)."""
    # here, not at the top: listing the history (`perfgate history`) needs no statistics
    from perfgate.stats.changepoints import detect_change_points

    found: list[DetectedChange] = []
    for (metric, key), runs in noisy_series(points):
        for cp in detect_change_points([r.centre for r in runs]):
            if not math.isfinite(cp.change_pct):
                continue  # from a level of 0 (a share that was 0): no relative size to report
            before, after = runs[cp.index - 1], runs[cp.index]
            found.append(
                DetectedChange(
                    benchmark=benchmark,
                    metric=metric,
                    unit=after.unit,
                    direction=policy(metric).direction,
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


def judged_as(config: Config, points: Sequence[RunPoint]) -> Callable[[str], MetricPolicy]:
    """The policy of each metric of ``points``: the suite's or the catalogue's, else the way
    its runs were recorded (a metrics file says which way is better)."""
    recorded = {p.metric: p.direction for p in points}
    return lambda metric: config.policy(metric, recorded.get(metric))


def series_drifts(
    benchmark: str,
    points: Sequence[RunPoint],
    *,
    branch: str,
    policy: Callable[[str], MetricPolicy],
    changes: Sequence[DetectedChange] = (),
) -> list[DetectedChange]:
    """The drift of each noisy series of ``points`` (oldest first): its newest runs against
    those a long horizon ago (:func:`perfgate.stats.drift.compare_horizon`), beyond the
    change points ``changes`` found in it. Each is a :class:`DetectedChange` with ``drift``
    set, its commit range the runs the move happened over, ``first_run_after`` the newest
    run, significant on its own (:func:`analyze_history` corrects over the family)."""
    from perfgate.stats.drift import compare_horizon  # only the nightly analysis

    found: list[DetectedChange] = []
    for (metric, key), runs in noisy_series(points):
        ids = {r.run_id: i for i, r in enumerate(runs)}
        steps = [
            ids[c.first_run_after]
            for c in changes
            if c.drift is None
            and c.metric == metric
            and c.fingerprint_key == key
            and c.first_run_after in ids
        ]
        newest = runs[-1].started_at
        ages = [(newest - r.started_at).total_seconds() / 86400.0 for r in runs]
        rule = policy(metric)
        drift = compare_horizon(
            [r.centre for r in runs],
            ages_days=ages,
            steps=steps,
            min_effect_pct=rule.min_effect_pct_at(statistics.median(r.centre for r in runs)),
        )
        if drift is None:
            continue
        first = runs[drift.start]
        found.append(
            DetectedChange(
                benchmark=benchmark,
                metric=metric,
                unit=runs[-1].unit,
                direction=rule.direction,
                branch=branch,
                fingerprint_key=key,
                point=ChangePoint(
                    *(drift.start, drift.before, drift.after),
                    *(drift.change_pct, drift.p_value, drift.confidence),
                ),
                last_run_before=runs[drift.baseline_last].run_id,
                first_run_after=runs[-1].run_id,
                commit_before=runs[max(drift.start - 1, 0)].commit or first.commit,
                commit_after=runs[drift.end].commit,
                runs_in_series=len(runs),
                drift=drift,
            )
        )
    return found


def _usable(series: dict[str, list[RunPoint]], newest: str, metric: str) -> bool:
    """Whether ``metric`` would be usable in a gate of run ``newest`` against the runs before
    it in ``series`` (one environment's, by metric), as the gate asks it."""
    runs = series.get(metric, [])
    walls = len(series.get("step_time_ms", ())) - 1
    measured = any(p.run_id == newest for p in runs)
    return measured and len(runs) - 1 >= min(MIN_BASELINE_RUNS, walls)


def shown_series(
    points: Sequence[RunPoint], device_kinds: Mapping[str, str]
) -> frozenset[tuple[str, str]]:
    """The (metric, fingerprint key) series of ``points`` that a gate shows but does not
    decide on (:func:`perfgate.metrics.not_deciding`: a wall time where the CPU or device
    time decides, a memory share beside its peak in bytes), asked as the gate asks it of the
    newest run of each environment (``device_kinds``: by key) against the runs before it,
    so that a contended runner's wall time opens no alert where the CPU time decides."""
    runs: dict[str, dict[str, list[RunPoint]]] = {}
    for p in points:
        runs.setdefault(p.fingerprint_key, {}).setdefault(p.metric, []).append(p)
    out: set[tuple[str, str]] = set()
    for key, series in runs.items():
        newest = max((p for ps in series.values() for p in ps), key=lambda p: p.started_at)
        usable = partial(_usable, series, newest.run_id)
        kind = device_kinds.get(key, "")
        out.update((m, key) for m in not_deciding(kind, usable) if m in series)
    return frozenset(out)


def _drift_alert(alerts: Sequence[Alert], d: DetectedChange) -> Alert | None:
    """The alert a drift found again keeps: the newest drift alert of its series, the same
    way (a regression's alert does not swallow a later improvement), not triaged fixed (a
    drift fixed and back is a new one); ``alerts`` come newest first."""
    key = (d.verdict, d.metric, d.fingerprint_key, d.branch)
    same = (a for a in alerts if (a.verdict, a.metric, a.fingerprint_key, a.branch) == key)
    return next((a for a in same if a.source == "drift" and a.status != "fixed"), None)


def analyze_history(
    config: Config,
    store: SqlStore,
    *,
    branch: str,
    benchmark: str | None = None,
    limit: int = 1000,
    record: bool = True,
    now: datetime | None = None,
    note: Callable[[str], None] | None = None,
) -> list[DetectedChange]:
    """Change points and drifts of every deciding noisy series on ``branch`` (one per
    benchmark, metric and environment; :func:`shown_series` are left out, with one ``note``
    per benchmark), oldest first; a benchmark's drifts after its change points, those that
    stay significant in its family (Benjamini-Hochberg, as a gate corrects over its metrics:
    :func:`perfgate.stats.drift.kept_in_family`).

    Each is recorded as an alert (once: found again, it keeps its alert and triage state)
    unless ``record`` is false, and carries its triage state; those triaged ``invalid`` are
    left out. A change point's alert is keyed on the first run after it; a drift, whose
    newest block moves every night, on the newest run when it was first found, and found
    again it keeps its series' open drift alert (:func:`_drift_alert`)."""
    from perfgate.stats.drift import MIN_RUNS, kept_in_family

    # a misspelt --branch or --benchmark is refused, as by gate, report and export: a nightly
    # 'history analyze --branch mian --alert' said "no change points" every night
    names = select_benchmarks(config, store, [benchmark] if benchmark else [], branch)
    found: list[DetectedChange] = []
    for name in names:
        points = store.history(project=config.project, benchmark=name, branch=branch, limit=limit)
        environments = store.fingerprints(project=config.project, benchmark=name, branch=branch)
        shown = shown_series(points, {key: fp.device_kind for key, fp in environments.items()})
        if shown:
            points = [p for p in points if (p.metric, p.fingerprint_key) not in shown]
            if note is not None:
                metrics = ", ".join(sorted({metric for metric, _ in shown}))
                note(
                    f"{name}: {metrics} not analysed (shown, not deciding: its gate decides on "
                    "the CPU or device time, and on the peak memory in bytes)"
                )
        policy = judged_as(config, points)
        changes = series_changes(name, points, branch=branch, policy=policy)
        drifts = series_drifts(name, points, branch=branch, policy=policy, changes=changes)
        # One family per benchmark, as one gate is: its series' drifts, BH-corrected over
        # every series long enough for series_drifts to test.
        tested = sum(1 for _, runs in noisy_series(points) if len(runs) >= MIN_RUNS)
        kept = kept_in_family([d.point.p_value for d in drifts], tested)
        drifts = [d for d, keep in zip(drifts, kept, strict=True) if keep]
        known = store.alerts(project=config.project, benchmark=name) if drifts else []
        for i, d in enumerate(drifts):
            if (alert := _drift_alert(known, d)) is not None:
                drifts[i] = replace(d, first_run_after=alert.run_id)
        found += [*changes, *drifts]
    if record and found:
        from perfgate.app.triage import record_alerts  # the store's team side, only to write

        record_alerts(config, store, changes=found, now=now)
    return with_triage(config, store, found)


def with_triage(
    config: Config, store: SqlStore, found: Sequence[DetectedChange]
) -> list[DetectedChange]:
    """``found`` with each one's alert triage state; those triaged ``invalid`` (not real
    changes) left out."""
    statuses: dict[tuple[str, str], str] = {}
    for name in sorted({c.benchmark for c in found}):
        statuses.update(store.alert_statuses(project=config.project, benchmark=name))
    triaged = [replace(c, triage=statuses.get((c.first_run_after, c.metric))) for c in found]
    return [c for c in triaged if c.triage != "invalid"]


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
    points = stored_points(config, store, benchmark=benchmark, branch=branch, limit=limit)
    return [p for p in points if p.metric == metric]


def stored_points(
    config: Config, store: SqlStore, *, benchmark: str | None, branch: str | None, limit: int
) -> list[RunPoint]:
    """The last ``limit`` runs' values of every metric, oldest first, for one or all
    benchmarks."""
    names = [benchmark] if benchmark else store.benchmarks(project=config.project, branch=branch)
    return [
        p
        for name in names
        for p in store.history(project=config.project, benchmark=name, branch=branch, limit=limit)
    ]


def detect_series(path: Path) -> tuple[list[float], list[ChangePoint], Drift | None]:
    """``perfgate detect``: the values of a series file, their change points and the drift
    beyond them, found by the same code as ``history analyze`` (no timestamps: the drift's
    horizon is in runs). A ramp is one drift with its span, not a staircase of steps. The
    runs they name (a change point's ``index``, a drift's ``start`` and ``end``) are named
    by the file's index column."""
    from perfgate.stats.changepoints import detect_change_points
    from perfgate.stats.drift import compare_horizon

    indexes, values = read_series_csv(path)
    found = detect_change_points(values)
    drift = compare_horizon(values, steps=[p.index for p in found])
    if drift is not None:
        drift = replace(drift, start=indexes[drift.start], end=indexes[drift.end])
    return values, [replace(p, index=indexes[p.index]) for p in found], drift
