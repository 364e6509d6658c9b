"""Use case ``perfgate report --html DIR``: gather a static history site from the store.

The site is rendered by :mod:`perfgate.reporters.html` (pure) from what this module reads:
per benchmark, the last ``limit`` runs on the base branch and the other branches' runs
beside them, the latest run judged against the runs before it (:func:`perfgate.app.compare`,
exactly as ``perfgate compare --branch main --against main``), its baseline window's noise
band (:func:`perfgate.stats.band.prediction_band`), each series' change points as ``history
analyze`` finds them, with their alerts' triage, and the full records of the runs that get a
page (the latest on the base branch, then the latest of the most recent other branches),
each with every finding on it (:func:`perfgate.app.advise.findings_for`).

Every verdict is shown with the comparison that decides it
(:func:`perfgate.reporters.html.headline_comparison`: on a CPU run the step's CPU time, on an
accelerator its device time; never the wall time shown beside them). A run's budget
comparisons are kept apart from its verdict: a breach is shown first, in its own words, and
the verdict is that of the rest (a P99 over its budget that has not moved is still
``unchanged``). The run pages' rank-pair matrices judge each pair as the advisor's rules do.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import cache, partial
from pathlib import Path

from perfgate.advisor.cluster import pair_utilisation
from perfgate.app.advise import findings_for
from perfgate.app.files import write_atomic
from perfgate.app.gate import check_base_branch, compare
from perfgate.app.history import judged_as, select_benchmarks, series_changes, with_triage
from perfgate.config import Config
from perfgate.errors import UsageError
from perfgate.models import (
    Comparison,
    DetectedChange,
    GateResult,
    RunPoint,
    RunRecord,
    Verdict,
    WorkChange,
)
from perfgate.reporters.html import (
    PLOTLY_JS,
    BenchmarkView,
    BranchVerdict,
    IndexRow,
    MetricView,
    SiteView,
    headline_comparison,
    index_row,
    need_plotly,
    plotly_js,
    render_benchmark_pages,
    render_index,
)
from perfgate.reporters.series import trend_values
from perfgate.stats import decide
from perfgate.stats.band import centre_intervals, prediction_band
from perfgate.store import SqlStore

OTHER_BRANCH_PAGES = 3
"""Other branches (most recent first) whose latest run of a benchmark gets a page."""


def latest_verdicts(
    config: Config, store: SqlStore, branch: str, names: Sequence[str]
) -> GateResult:
    """Each named benchmark's latest run on ``branch`` judged against the runs before it,
    in one gate (``perfgate compare --branch B --against B``)."""
    if not names:
        return GateResult(branch, branch, Verdict.NO_BASELINE, comparisons=())
    return compare(config, store, branch=branch, against=branch, benchmarks=names)


def branch_verdicts(
    config: Config, store: SqlStore, branch: str, base: str
) -> tuple[Comparison, ...]:
    """The latest run of each benchmark on ``branch`` judged against ``base``'s window, in
    one gate, exactly as a PR's gate judges it (``perfgate compare --branch B --against
    BASE``, its false discovery rate adjusted over all of the branch's benchmarks); none
    when ``base`` has no runs at all."""
    try:
        return compare(config, store, branch=branch, against=base).comparisons
    except UsageError:
        return ()


def _against_history(c: Comparison) -> bool:
    """A comparison against stored history: not an A/B pair's, not a budget's."""
    return c.method == "history" and not decide.is_budget(c)


def _newest_branches(others: Sequence[RunPoint], n: int) -> list[str]:
    """The ``n`` other branches with the most recent runs, newest first."""
    newest = sorted(others, key=lambda p: (p.started_at, p.run_id), reverse=True)
    return list(dict.fromkeys(p.branch for p in newest))[:n]


def gather_site(
    config: Config,
    store: SqlStore,
    *,
    branch: str | None = None,
    benchmarks: Sequence[str] = (),
    limit: int = 1000,
    now: datetime | None = None,
    comparisons: Sequence[Comparison] | None = None,
    work_changes: Sequence[WorkChange] = (),
) -> SiteView:
    """Everything the site shows, read from ``store``; ``branch``: the base branch (None: the
    configured one); ``comparisons`` and ``work_changes``: :func:`latest_verdicts`' where the
    caller has them over every benchmark (so FDR adjusts over them all). UsageError when
    there is nothing to show."""
    base = branch or config.base_branch
    if branch is not None:  # a mistyped --branch would draw a page of "no run"
        check_base_branch(config, store, branch)
    names = select_benchmarks(config, store, benchmarks)
    on_base = set(store.benchmarks(project=config.project, branch=base))
    if comparisons is None:
        latest = latest_verdicts(config, store, base, [n for n in names if n in on_base])
        comparisons, work_changes = latest.comparisons, latest.work_changes
    work_of = {w.benchmark: w for w in work_changes}
    # budgets apart: judged on the run alone, shown first, never part of the verdict
    judged = {(c.benchmark, c.metric): c for c in comparisons if _against_history(c)}
    budgets = [c for c in comparisons if decide.is_budget(c)]

    views: list[BenchmarkView] = []
    found: list[DetectedChange] = []
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
        policy = judged_as(config, base_points)
        found += series_changes(name, base_points, branch=base, policy=policy)
    changes = with_triage(config, store, found)
    judged_on = cache(partial(branch_verdicts, config, store, base=base))
    for name in names:
        base_points, others = points_of[name]
        newest = _newest_branches(others, OTHER_BRANCH_PAGES)
        theirs_judged = {
            b: [c for c in judged_on(b) if c.benchmark == name] if name in on_base else []
            for b in newest
        }
        metrics: dict[str, tuple[list[RunPoint], list[RunPoint]]] = {}
        for side, points in enumerate((base_points, others)):
            for p in points:
                metrics.setdefault(p.metric, ([], []))[side].append(p)
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
                    branch_comparisons=tuple(
                        c
                        for b in newest
                        for c in theirs_judged[b]
                        if c.metric == metric and _against_history(c)
                    ),
                )
            )
        comparisons = [c for (b, _), c in judged.items() if b == name]
        view = BenchmarkView(
            name=name,
            metrics=tuple(views_of_metrics),
            verdict=decide.overall_verdict(comparisons) if comparisons else None,
            runs=_paged_runs(config, store, name, base, newest),
            budgets=tuple(c for c in budgets if c.benchmark == name),
            work=work_of.get(name),
        )
        views.append(replace(view, branches=_branch_views(view, base, theirs_judged)))
    return SiteView(
        project=config.project,
        branch=base,
        generated_at=now or datetime.now(timezone.utc),
        benchmarks=tuple(views),
        # the run pages' rank-pair matrices judge a pair as the advisor's rules do
        utilisation=partial(pair_utilisation, thresholds=config.advisor),
    )


def _branch_views(
    view: BenchmarkView, base: str, judged: Mapping[str, Sequence[Comparison]]
) -> tuple[BranchVerdict, ...]:
    """The other branches' rows of a benchmark, newest first, from their paged runs."""
    out = []
    for run in view.runs:
        b = run.git.branch
        if b == base or b not in judged:
            continue
        theirs = [c for c in judged[b] if c.current_run_id == run.id]
        mine = [c for c in theirs if not decide.is_budget(c)]
        out.append(
            BranchVerdict(
                branch=b,
                run_id=run.id,
                verdict=decide.overall_verdict(mine) if mine else None,
                # the headline: the metric that decides the verdict, not the wall time
                comparison=headline_comparison(mine),
                budgets=tuple(c for c in theirs if decide.is_budget(c)),
            )
        )
    return tuple(out)


def _paged_runs(
    config: Config, store: SqlStore, name: str, base: str, newest: Sequence[str]
) -> tuple[RunRecord, ...]:
    """The latest run of ``name`` on ``base`` and on each of the ``newest`` branches."""
    runs = {b: store.latest_run(project=config.project, benchmark=name, branch=b) for b in newest}
    runs = {base: store.latest_run(project=config.project, benchmark=name, branch=base), **runs}
    # The page lists every finding; those the base branch's latest run had are known.
    return tuple(
        replace(run, findings=findings_for(config, run, None if b == base else runs[base]))
        for b, run in runs.items()
        if run is not None
    )


@dataclass(frozen=True)
class SiteWritten:
    """What :func:`write_site` wrote: its entry page, the number of files and their bytes."""

    index: Path
    files: int
    bytes: int


_PAGE = re.compile(r"^[A-Za-z0-9._-]*-[0-9a-f]{8}\.html$")
"""The name of a page perfgate writes under ``benchmarks/`` and ``runs/`` (see ``slug``)."""


def _remove_stale(directory: Path, keep: set[str]) -> None:
    """Delete the pages an earlier report wrote that this one did not; nothing else is
    touched (``--html .`` must not wipe a project's own ``benchmarks/``)."""
    for sub in ("benchmarks", "runs"):
        old = directory / sub
        if old.is_dir():
            for page in old.iterdir():
                rel = f"{sub}/{page.name}"
                if rel not in keep and _PAGE.match(page.name) and page.is_file():
                    page.unlink()


def _write_pages(directory: Path, site: SiteView) -> tuple[list[IndexRow], int, list[str]]:
    """Write the pages of ``site``'s benchmarks (each replaced atomically: a page that cannot
    be written keeps its previous content); their overview rows, their bytes and names."""
    size = 0
    written: list[str] = []
    for b in site.benchmarks:
        for rel, text in render_benchmark_pages(b, site).items():
            path = directory / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            size += write_atomic(path, text, durable=False)
            written.append(rel)
    return [index_row(b, site.branch) for b in site.benchmarks], size, written


def _finish(
    directory: Path, site: SiteView, rows: Sequence[IndexRow], size: int, written: list[str]
) -> SiteWritten:
    size += write_atomic(directory / PLOTLY_JS, plotly_js(), durable=False)
    size += write_atomic(directory / "index.html", render_index(site, rows), durable=False)
    _remove_stale(directory, set(written))
    return SiteWritten(directory / "index.html", len(written) + 2, size)


def write_site(directory: Path, site: SiteView) -> SiteWritten:
    """Render ``site`` into ``directory`` (created if needed), with ``plotly.min.js`` beside
    ``index.html``: an earlier report's pages are replaced one by one, and the stale ones
    deleted only once the whole new site is written."""
    directory.mkdir(parents=True, exist_ok=True)
    return _finish(directory, site, *_write_pages(directory, site))


def _build_chunk(
    config: Config,
    url: str,
    directory: Path,
    branch: str | None,
    limit: int,
    now: datetime,
    chunk: tuple[tuple[str, ...], tuple[Comparison, ...], tuple[WorkChange, ...]],
) -> tuple[list[IndexRow], int, list[str]]:
    """In a worker process: gather and write the pages of some benchmarks (``chunk``: their
    names, comparisons and work changes); their overview rows, bytes and pages."""
    from perfgate.store import open_store

    names, comparisons, work_changes = chunk
    with open_store(url) as store:
        site = gather_site(
            config,
            store,
            branch=branch,
            benchmarks=names,
            limit=limit,
            now=now,
            comparisons=comparisons,
            work_changes=work_changes,
        )
    return _write_pages(directory, site)


PARALLEL_MIN_BENCHMARKS = 16


def default_jobs() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def build_site(
    config: Config,
    store: SqlStore,
    directory: Path,
    *,
    branch: str | None = None,
    benchmarks: Sequence[str] = (),
    limit: int = 1000,
    now: datetime | None = None,
    jobs: int = 1,
    url: str | None = None,
) -> SiteWritten:
    """Gather and write the site: ``perfgate report --html DIR``.

    With ``jobs`` > 1 and ``url`` (the store's URL, to reopen in each worker; not an
    in-memory SQLite) benchmarks are gathered and rendered by that many processes; the
    pages are the same as a single process writes.

    Raises:
        MissingExtra: plotly (``perfgate[export]``) is not installed; nothing is written.
    """
    need_plotly()
    now = now or datetime.now(timezone.utc)
    names = select_benchmarks(config, store, benchmarks)
    in_memory = url is None or url in ("sqlite://", "sqlite:///:memory:")
    if jobs <= 1 or in_memory or url is None or len(names) < PARALLEL_MIN_BENCHMARKS:
        site = gather_site(config, store, branch=branch, benchmarks=names, limit=limit, now=now)
        return write_site(directory, site)
    directory.mkdir(parents=True, exist_ok=True)
    base = branch or config.base_branch
    on_base = set(store.benchmarks(project=config.project, branch=base))
    judged = latest_verdicts(config, store, base, [x for x in names if x in on_base])
    n = min(jobs * 2, len(names))
    chunks = []
    for i in range(n):
        mine = set(names[i::n])
        picked = tuple(c for c in judged.comparisons if c.benchmark in mine)
        work = tuple(w for w in judged.work_changes if w.benchmark in mine)
        chunks.append((tuple(names[i::n]), picked, work))
    # fork (no re-import in each worker) where it is safe: POSIX and no other threads
    fork = "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
    context = multiprocessing.get_context("fork" if fork else "spawn")
    build = partial(_build_chunk, config, url, directory, branch, limit, now)
    with ProcessPoolExecutor(max_workers=min(jobs, n), mp_context=context) as pool:
        done = list(pool.map(build, chunks))
    rows = [row for got, _, _ in done for row in got]
    written = [page for _, _, pages in done for page in pages]
    site = SiteView(config.project, base, now, ())
    return _finish(directory, site, rows, sum(size for _, size, _ in done), written)
