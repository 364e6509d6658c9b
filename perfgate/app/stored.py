"""The use cases over the stored history and the team's workflow, one per command
(``history``, ``noise``, ``report``, ``export``, ``advise``, ``db``, ``alerts``, ``baseline``,
``runs``): each opens the config's store (read-only commands never create one: a mistyped
SQLite path is an error, not a new, empty store), does the command's whole job with the use
case that owns it and returns what the command renders. Nothing here prints.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.errors import PerfgateError, ReportError, UsageError, shown_url

if TYPE_CHECKING:
    from perfgate.app.baselines import ImportResult
    from perfgate.app.export import TensorBoardExport
    from perfgate.app.site import SiteWritten
    from perfgate.config import Config
    from perfgate.models import (
        Advice,
        Alert,
        BaselineReset,
        DetectedChange,
        NoiseRow,
        PrunePlan,
        RunPoint,
        RunRecord,
        TriageEvent,
    )
    from perfgate.reporters.prometheus import LatestValue
    from perfgate.store import SqlStore
    from perfgate.store.sql import StoreStatus


def _store(config: Config, *, create: bool = False) -> SqlStore:
    from perfgate.store import open_store

    return open_store(config.database_url, create=create)


@contextmanager
def _writing(where: Path) -> Iterator[None]:
    """Output that cannot be written under ``where`` (not a directory, no permission, disk
    full): a :class:`~perfgate.errors.ReportError` (exit 3), not an internal error."""
    try:
        yield
    except OSError as exc:
        raise ReportError(f"cannot write {exc.filename or where}: {exc.strerror or exc}") from None


def _actor(by: str | None, env: Mapping[str, str] | None) -> str:
    """``by``, else the CI's user (:func:`perfgate.app.context.default_actor`)."""
    from perfgate.app.context import default_actor

    return by or default_actor(os.environ if env is None else env)


# --- history, analyze, noise -----------------------------------------------------------------


def show_history(
    config: Config, *, benchmark: str | None, branch: str | None, metric: str, limit: int
) -> list[RunPoint]:
    """``perfgate history``: :func:`perfgate.app.history.metric_history` (empty where
    nothing is stored; UsageError where runs are stored and none has ``metric``)."""
    from perfgate.app.history import stored_points

    with _store(config) as store:
        points = stored_points(config, store, benchmark=benchmark, branch=branch, limit=limit)
    mine = [p for p in points if p.metric == metric]
    if mine or not points:
        return mine
    where = f"{f' of {benchmark}' if benchmark else ''}{f' on {branch}' if branch else ''}"
    has = ", ".join(sorted({p.metric for p in points}))
    raise UsageError(f"no run{where} has {metric}; their metrics: {has} (pass --metric)")


@dataclass(frozen=True)
class AnalyzeRequest:
    """What ``history analyze`` is asked: the series of ``branch`` (None: the config's base
    branch), one ``benchmark`` or all, the last ``limit`` runs each; with ``alert``, report
    what is new on the project's tracking issue (``forge``, ``forge_url``, ``repo`` None:
    from the CI's variables in ``env``, None: ``os.environ``)."""

    config: Config
    branch: str | None = None
    benchmark: str | None = None
    limit: int = 1000
    alert: bool = False
    forge: str | None = None
    forge_url: str | None = None
    repo: str | None = None
    env: Mapping[str, str] | None = None


@dataclass(frozen=True)
class AnalyzeOutcome:
    """What ``history analyze`` found (``changes``) and what alerting did: ``alerted``, one
    line, or ``alert_failed``, why it could not (the command reports the changes first,
    then fails with it)."""

    changes: tuple[DetectedChange, ...]
    alerted: str | None = None
    alert_failed: PerfgateError | None = None


def analyze(
    request: AnalyzeRequest, *, note: Callable[[str], None] | None = None
) -> AnalyzeOutcome:
    """``perfgate history analyze``: :func:`perfgate.app.history.analyze_history` (which
    records the changes as alerts), then, with ``request.alert``, the tracking issue
    (:func:`perfgate.app.deliver.alert_changes`). ``note``: lines about what was left out."""
    from perfgate.app.history import analyze_history

    config = request.config
    branch = request.branch or config.base_branch
    with _store(config) as store:
        changes = analyze_history(
            config,
            store,
            branch=branch,
            benchmark=request.benchmark,
            limit=request.limit,
            note=note,
        )
    if not request.alert:
        return AnalyzeOutcome(tuple(changes))
    from perfgate.app import deliver

    env = os.environ if request.env is None else request.env
    where = deliver.TargetOverrides(
        forge=request.forge, api_url=request.forge_url, repo=request.repo
    )
    try:
        reporter = deliver.make_reporter(deliver.resolve_target(env, where), env)
        done = deliver.alert_changes(config.project, branch, changes, reporter)
    except PerfgateError as exc:
        return AnalyzeOutcome(tuple(changes), alert_failed=exc)
    return AnalyzeOutcome(tuple(changes), alerted=done)


def noise_report(config: Config, *, branch: str | None) -> list[NoiseRow]:
    """``perfgate noise``: :func:`perfgate.app.gate.noise` on ``branch`` (None: the base
    branch)."""
    from perfgate.app.gate import noise

    with _store(config) as store:
        return noise(config, store, branch=branch or config.base_branch)


# --- report, export, advise ------------------------------------------------------------------


def write_report_site(
    config: Config,
    html_dir: Path,
    *,
    branch: str | None,
    benchmarks: Sequence[str],
    limit: int,
    jobs: int,
) -> SiteWritten:
    """``perfgate report --html``: :func:`perfgate.app.site.build_site` with ``jobs``
    workers (0: :func:`~perfgate.app.site.default_jobs`); ReportError where it cannot write."""
    from perfgate.app.site import build_site, default_jobs

    with _store(config) as store, _writing(html_dir):
        return build_site(
            config,
            store,
            html_dir,
            branch=branch,
            benchmarks=benchmarks,
            limit=limit,
            jobs=jobs or default_jobs(),
            url=config.database_url,
        )


def write_tensorboard(
    config: Config,
    logdir: Path,
    *,
    benchmarks: Sequence[str],
    branch: str | None,
    limit: int,
    profiles: bool,
) -> TensorBoardExport:
    """``perfgate export tensorboard``: :func:`perfgate.app.export.export_tensorboard`;
    ReportError where ``logdir`` cannot be written."""
    from perfgate.app.export import export_tensorboard

    with _store(config) as store, _writing(logdir):
        return export_tensorboard(
            config,
            store,
            logdir,
            benchmarks=benchmarks,
            branch=branch,
            limit=limit,
            profiles=profiles,
        )


@dataclass(frozen=True)
class PrometheusExport:
    """What ``export prometheus`` read (``values``) and, when it pushed them, where
    (``pushed_to``: the Pushgateway's URL without its secrets)."""

    values: tuple[LatestValue, ...]
    pushed_to: str | None = None


def export_prometheus(
    config: Config,
    *,
    branch: str | None,
    benchmarks: Sequence[str],
    push_gateway: str | None = None,
    job: str = "perfgate",
) -> PrometheusExport:
    """``perfgate export prometheus``: the latest value of every series
    (:func:`perfgate.app.export.latest_values`), pushed to ``push_gateway`` as ``job`` when
    given (ReportError where the push failed)."""
    from perfgate.app.export import latest_values
    from perfgate.exporters.prometheus import push_prometheus

    with _store(config) as store:
        values = tuple(latest_values(config, store, branch=branch, benchmarks=benchmarks))
    if not push_gateway:
        return PrometheusExport(values)
    push_prometheus(list(values), push_gateway, job=job)
    return PrometheusExport(values, pushed_to=shown_url(push_gateway))


def advise_target(
    config: Config,
    target: str,
    *,
    msprof: bool = True,
    msprof_timeout_s: float = 300.0,
    device_memory_gib: float | None = None,
) -> Advice:
    """``perfgate advise``: a profile at the path ``target``
    (:func:`perfgate.app.advise.advise_path`, thresholds from the config), else the stored
    run with that id or prefix (:func:`~perfgate.app.advise.advise_run`)."""
    from perfgate.app.advise import advise_path, advise_run

    capacity = None if device_memory_gib is None else int(device_memory_gib * (1 << 30))
    if Path(target).exists():
        return advise_path(
            Path(target),
            thresholds=config.advisor,
            msprof=msprof,
            msprof_timeout_s=msprof_timeout_s,
            device_memory_bytes=capacity,
        )
    with _store(config) as store:
        return advise_run(config, store, target, device_memory_bytes=capacity)


# --- db, alerts, baseline, runs --------------------------------------------------------------


def db_status(config: Config) -> StoreStatus:
    """``perfgate db status``: the store's revision, engine and run count; reads only."""
    from perfgate.store.sql import store_status

    return store_status(config.database_url)


def db_upgrade(config: Config) -> tuple[StoreStatus, StoreStatus]:
    """``perfgate db upgrade``: the store created or migrated; its status before and after."""
    from perfgate.store.sql import upgrade_store

    return upgrade_store(config.database_url)


def prune_store(
    config: Config, *, keep_days: int | None, keep_runs: int | None, dry_run: bool
) -> PrunePlan:
    """``perfgate db prune``: :func:`perfgate.app.triage.prune`."""
    from perfgate.app.triage import prune

    with _store(config) as store:
        return prune(config, store, keep_days=keep_days, keep_runs=keep_runs, dry_run=dry_run)


def alerts_of(
    config: Config, *, statuses: Sequence[str] = (), every: bool = False, benchmark: str | None
) -> list[Alert]:
    """``perfgate alerts list``: :func:`perfgate.app.triage.list_alerts`."""
    from perfgate.app.triage import list_alerts

    with _store(config) as store:
        return list_alerts(config, store, statuses=statuses, every=every, benchmark=benchmark)


def triage(
    config: Config,
    alert_id: int,
    *,
    action: str,
    by: str | None,
    reason: str,
    state: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Alert:
    """``perfgate alerts ack / ignore / fixed``: :func:`perfgate.app.triage.triage_alert`
    by ``by`` (None: the CI's user, from ``env``)."""
    from perfgate.app.triage import triage_alert

    with _store(config) as store:
        return triage_alert(
            config, store, alert_id, action=action, by=_actor(by, env), reason=reason, state=state
        )


def trail(config: Config) -> list[TriageEvent]:
    """``perfgate alerts trail``: who triaged, reset or excluded what, when and why (newest
    first)."""
    with _store(config) as store:
        return list(store.triage_events(project=config.project))


def reset(
    config: Config,
    *,
    benchmark: str,
    commit: str,
    branch: str | None,
    by: str | None,
    reason: str,
    env: Mapping[str, str] | None = None,
) -> BaselineReset:
    """``perfgate baseline reset``: :func:`perfgate.app.triage.reset_baseline` by ``by``
    (None: the CI's user)."""
    from perfgate.app.triage import reset_baseline

    with _store(config) as store:
        by = _actor(by, env)
        return reset_baseline(
            config, store, benchmark=benchmark, commit=commit, branch=branch, by=by, reason=reason
        )


def export_baseline_files(
    config: Config, out_dir: Path, *, branch: str | None, benchmarks: Sequence[str]
) -> list[Path]:
    """``perfgate baseline export``: :func:`perfgate.app.baselines.export_baselines` of
    ``branch`` (None: the base branch); ReportError where ``out_dir`` cannot be written."""
    from perfgate.app.baselines import export_baselines

    with _store(config) as store, _writing(out_dir):
        return export_baselines(
            config, store, out_dir, branch=branch or config.base_branch, benchmarks=benchmarks
        )


def import_baseline_files(config: Config, directory: Path) -> ImportResult:
    """``perfgate baseline import``: :func:`perfgate.app.baselines.import_baselines` (the
    store is created when missing)."""
    from perfgate.app.baselines import import_baselines

    with _store(config, create=True) as store:
        return import_baselines(store, directory)


def exclude(
    config: Config,
    run_id: str,
    *,
    by: str | None,
    reason: str,
    env: Mapping[str, str] | None = None,
) -> RunRecord:
    """``perfgate runs exclude``: leave a run (its id or a 6+ character prefix) out of every
    history and window, by ``by`` (None: the CI's user)."""
    if not reason.strip():
        raise UsageError("runs exclude needs a --reason (why: it is shown in the trail)")
    now = datetime.now(timezone.utc)
    with _store(config) as store:
        return store.exclude_run(
            run_id, project=config.project, by=_actor(by, env), reason=reason, now=now
        )
