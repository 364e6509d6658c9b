"""The team workflow: alerts, triage and retention."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

from perfgate.config import Config
from perfgate.errors import StoreError, UsageError
from perfgate.models import (
    Alert,
    BaselineReset,
    Comparison,
    DetectedChange,
    GateResult,
    NewAlert,
    PrunePlan,
    RunRecord,
)
from perfgate.stats.decide import alerts_raised
from perfgate.store import SqlStore


def gate_alerts(config: Config, result: GateResult) -> tuple[Comparison, ...]:
    """The comparisons of ``result`` that raise an alert: on the base branch, its deciding
    regressions (:func:`perfgate.stats.decide.alerts_raised`)."""
    return alerts_raised(result.comparisons, on_base_branch=result.branch == config.base_branch)


def record_alerts(
    config: Config,
    store: SqlStore,
    *,
    changes: Sequence[DetectedChange] = (),
    result: GateResult | None = None,
    now: datetime | None = None,
) -> list[Alert]:
    """Record as untriaged alerts the change points and drifts of a history analysis and,
    for a gate on the base branch, its regressions; an alert already recorded for the same
    run and metric keeps its state (a drift's run is the one its alert is keyed on). Runs
    not in the store (a gate that judged an unsaved run) get no alert. Returns the alerts
    created now."""
    found: list[NewAlert] = [
        NewAlert(
            project=config.project,
            benchmark=c.benchmark,
            metric=c.metric,
            run_id=c.first_run_after,
            branch=c.branch,
            fingerprint_key=c.fingerprint_key,
            verdict=c.verdict,
            source="history" if c.drift is None else "drift",
            commit_after=c.commit_after,
            change_pct=c.point.change_pct,
            previous_run_id=c.last_run_before,
            commit_before=c.commit_before,
        )
        for c in changes
    ]
    if result is not None:
        runs: dict[str, RunRecord | None] = {}
        for c in gate_alerts(config, result):
            if c.current_run_id not in runs:
                try:
                    runs[c.current_run_id] = store.get_run(c.current_run_id)
                except StoreError:
                    runs[c.current_run_id] = None
            run = runs[c.current_run_id]
            if run is None:
                continue
            found.append(
                NewAlert(
                    project=config.project,
                    benchmark=c.benchmark,
                    metric=c.metric,
                    run_id=run.id,
                    branch=run.git.branch,
                    fingerprint_key=run.fingerprint.key(),
                    verdict=c.verdict,
                    source="gate",
                    commit_after=run.git.commit,
                    change_pct=c.change_pct,
                    previous_run_id=c.baseline_run_ids[-1] if c.baseline_run_ids else None,
                    commit_before=c.baseline_commits[-1] if c.baseline_commits else None,
                )
            )
    if not found:
        return []
    return store.record_alerts(found, now=now or datetime.now(timezone.utc))


TRIAGE_ACTIONS = {"ack": "acknowledged", "fixed": "fixed", "reopen": "untriaged"}
"""``perfgate alerts`` actions and the state each moves an alert to."""

IGNORE_STATES = ("invalid", "wontfix")


def triage_alert(
    config: Config,
    store: SqlStore,
    alert_id: int,
    *,
    action: str,
    by: str,
    reason: str,
    state: str | None = None,
    now: datetime | None = None,
) -> Alert:
    """``ack`` / ``fixed`` / ``reopen`` an alert, or ``ignore`` it as ``invalid`` (not a
    real change: it no longer cuts baseline windows and history analysis drops it) or
    ``wontfix`` (real, accepted)."""
    if action == "ignore":
        if state not in IGNORE_STATES:
            raise UsageError(f"ignore needs --as {' or '.join(IGNORE_STATES)}")
        target = state
    elif action in TRIAGE_ACTIONS:
        target = TRIAGE_ACTIONS[action]
    else:
        raise UsageError(f"unknown triage action {action!r}")
    if not by.strip():
        raise UsageError("a triage action needs --by (who)")
    if not reason.strip():
        raise UsageError(f"alerts {action} needs a --reason (why: it is shown in the trail)")
    return store.triage_alert(
        alert_id,
        project=config.project,
        state=target,
        action=action,
        by=by,
        reason=reason,
        now=now or datetime.now(timezone.utc),
    )


def prune(
    config: Config,
    store: SqlStore,
    *,
    keep_days: int | None,
    keep_runs: int | None,
    dry_run: bool,
    now: datetime | None = None,
) -> PrunePlan:
    """Retention: see :meth:`SqlStore.prune`; the protected window is the config's."""
    if (keep_days is None) == (keep_runs is None):
        raise UsageError("prune needs exactly one of --keep-days N or --keep-runs N")
    if (keep_days is not None and keep_days < 1) or (keep_runs is not None and keep_runs < 1):
        raise UsageError("--keep-days and --keep-runs must be at least 1")
    return store.prune(
        project=config.project,
        baseline_window=config.baseline_window,
        now=now or datetime.now(timezone.utc),
        keep_days=keep_days,
        keep_runs=keep_runs,
        dry_run=dry_run,
    )


def list_alerts(
    config: Config,
    store: SqlStore,
    *,
    statuses: Sequence[str] = (),
    every: bool = False,
    benchmark: str | None = None,
) -> list[Alert]:
    """Alerts newest first: those in ``statuses`` (default: untriaged and acknowledged), or
    ``every`` one."""
    wanted = () if every else (tuple(statuses) or ("untriaged", "acknowledged"))
    return list(store.alerts(project=config.project, status=wanted, benchmark=benchmark))


def reset_baseline(
    config: Config,
    store: SqlStore,
    *,
    benchmark: str,
    commit: str,
    branch: str | None,
    by: str,
    reason: str,
    now: datetime | None = None,
) -> BaselineReset:
    """Accept a change: ``benchmark``'s baseline window starts at the first run of
    ``commit`` on ``branch`` (None: the base branch, whose window the gate reads; a commit
    of another branch would empty it).

    Raises:
        UsageError: a blank ``reason``; the store's, where ``commit`` has no run of
            ``benchmark`` on the branch.
    """
    if not reason.strip():
        raise UsageError("baseline reset needs a --reason (why the change is accepted)")
    return store.reset_baseline(
        project=config.project,
        benchmark=benchmark,
        commit=commit,
        branch=branch or config.base_branch,
        by=by,
        reason=reason,
        now=now or datetime.now(timezone.utc),
    )
