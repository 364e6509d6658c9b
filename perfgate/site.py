"""Use case ``perfgate report --html DIR``: gather a static history site from the store.

The site is rendered by :mod:`perfgate.reporters.html` (pure) from what this module reads:
per benchmark, the last ``limit`` runs on the base branch and the other branches' runs
beside them, the latest run judged against the runs before it (:func:`perfgate.app.compare`,
exactly as ``perfgate compare --branch main --against main``), its baseline window's noise
band (:func:`perfgate.stats.band.prediction_band`), the change points of each series
(:func:`perfgate.app.series_changes`, as ``history analyze`` finds them, with their alerts'
triage) and the full records of the runs that get a page (the latest on the base branch,
then the latest of the most recent other branches).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from perfgate import app
from perfgate.config import Config
from perfgate.errors import UsageError
from perfgate.models import Comparison, RunPoint, RunRecord
from perfgate.reporters.html import (
    PLOTLY_JS,
    BenchmarkView,
    MetricView,
    SiteView,
    plotly_js,
    render_site,
)
from perfgate.reporters.series import trend_values
from perfgate.stats.band import centre_intervals, prediction_band
from perfgate.store import SqlStore

OTHER_BRANCH_PAGES = 3
"""Other branches (most recent first) whose latest run of a benchmark gets a page."""


def gather_site(
    config: Config,
    store: SqlStore,
    *,
    branch: str | None = None,
    benchmarks: Sequence[str] = (),
    limit: int = 1000,
    other_branch_pages: int = OTHER_BRANCH_PAGES,
    now: datetime | None = None,
) -> SiteView:
    """Everything the site shows, read from ``store``; ``branch`` is the base branch
    (default: the configured one). Raises UsageError when there is nothing to show."""
    base = branch or config.base_branch
    names = store.benchmarks(project=config.project)
    if benchmarks:
        missing = sorted(set(benchmarks) - set(names))
        if missing:
            raise UsageError(f"no runs of {', '.join(missing)} in project {config.project!r}")
        names = [n for n in names if n in set(benchmarks)]
    if not names:
        raise UsageError(f"no runs in project {config.project!r}: record one with 'perfgate run'")
    on_base = set(store.benchmarks(project=config.project, branch=base))
    judged: dict[tuple[str, str], Comparison] = {}
    if on_base & set(names):
        result = app.compare(
            config, store, branch=base, against=base, benchmarks=sorted(on_base & set(names))
        )
        for c in result.comparisons:
            if c.method == "history":
                judged[(c.benchmark, c.metric)] = c

    views: list[BenchmarkView] = []
    found: list[app.DetectedChange] = []
    points_of: dict[str, tuple[list[RunPoint], list[RunPoint]]] = {}
    for name in names:
        base_points = (
            store.history(project=config.project, benchmark=name, branch=base, limit=limit)
            if name in on_base
            else []
        )
        # other branches' runs since the first base-branch run shown (base runs left out of
        # the read: they are in hand already)
        others = [
            p
            for p in store.history(
                project=config.project,
                benchmark=name,
                branch=None,
                since=base_points[0].started_at if base_points else None,
                exclude_run_ids=tuple(dict.fromkeys(p.run_id for p in base_points)),
                limit=limit,
            )
            if p.branch != base
        ]
        points_of[name] = (base_points, others)
        found.extend(app.series_changes(name, base_points, branch=base))
    changes = app.with_triage(config, store, found)

    for name in names:
        base_points, others = points_of[name]
        metrics: dict[str, tuple[list[RunPoint], list[RunPoint]]] = {}
        for p in base_points:
            metrics.setdefault(p.metric, ([], []))[0].append(p)
        for p in others:
            metrics.setdefault(p.metric, ([], []))[1].append(p)
        views_of_metrics = []
        for metric, (mine, theirs) in metrics.items():
            comparison = judged.get((name, metric))
            window: tuple[str, ...] = comparison.baseline_run_ids if comparison else ()
            ids = set(window)
            band = prediction_band([p for p in mine if p.run_id in ids]) if ids else None
            sample = mine[-1] if mine else theirs[-1]
            views_of_metrics.append(
                MetricView(
                    metric=metric,
                    unit=sample.unit,
                    direction=sample.direction,
                    base=tuple(mine),
                    others=tuple(theirs),
                    base_ci=tuple(centre_intervals(mine)),
                    other_ci=tuple(centre_intervals(theirs)),
                    changes=tuple(c for c in changes if c.benchmark == name and c.metric == metric),
                    band=band,
                    window_run_ids=window,
                    comparison=comparison,
                    trend=tuple(trend_values(mine, comparison)) if comparison else (),
                )
            )
        comparisons = [c for (b, _), c in judged.items() if b == name]
        views.append(
            BenchmarkView(
                name=name,
                metrics=tuple(views_of_metrics),
                verdict=app.overall_verdict(comparisons) if comparisons else None,
                runs=_paged_runs(config, store, name, base, others, other_branch_pages),
            )
        )
    return SiteView(
        project=config.project,
        branch=base,
        generated_at=now or datetime.now(timezone.utc),
        benchmarks=tuple(views),
    )


def _paged_runs(
    config: Config,
    store: SqlStore,
    name: str,
    base: str,
    others: Sequence[RunPoint],
    n_other: int,
) -> tuple[RunRecord, ...]:
    runs: list[RunRecord] = []
    branches = [base]
    recent = sorted(others, key=lambda p: (p.started_at, p.run_id), reverse=True)
    for p in recent:
        if len(branches) > n_other:
            break
        if p.branch not in branches:
            branches.append(p.branch)
    for b in branches:
        run = store.latest_run(project=config.project, benchmark=name, branch=b)
        if run is not None:
            runs.append(run)
    return tuple(runs)


@dataclass(frozen=True)
class SiteWritten:
    """What :func:`write_site` wrote: its entry page, the number of files and their bytes."""

    index: Path
    files: int
    bytes: int


def write_site(directory: Path, site: SiteView) -> SiteWritten:
    """Render ``site`` into ``directory`` (created if needed; perfgate's pages in it are
    replaced), with ``plotly.min.js`` copied beside ``index.html``."""
    directory.mkdir(parents=True, exist_ok=True)
    pages = render_site(site)
    for sub in ("benchmarks", "runs"):
        old = directory / sub
        if old.is_dir():
            shutil.rmtree(old)
    total = 0
    for rel, text in pages.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        path.write_bytes(data)
        total += len(data)
    js = plotly_js()
    (directory / PLOTLY_JS).write_bytes(js)
    return SiteWritten(directory / "index.html", len(pages) + 1, total + len(js))


def build_site(
    config: Config,
    store: SqlStore,
    directory: Path,
    *,
    branch: str | None = None,
    benchmarks: Sequence[str] = (),
    limit: int = 1000,
    now: datetime | None = None,
) -> SiteWritten:
    """Gather and write the site: ``perfgate report --html DIR``."""
    site = gather_site(config, store, branch=branch, benchmarks=benchmarks, limit=limit, now=now)
    return write_site(directory, site)
