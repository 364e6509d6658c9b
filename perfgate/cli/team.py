"""``perfgate db``, ``alerts``, ``baseline`` and ``runs``: the team store's workflow."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from perfgate.app import stored
from perfgate.cli.base import (
    PathType,
    StoreFlags,
    _by_option,
    _echo_json,
    cli,
    options,
    store_options,
)


@cli.group()
def db() -> None:
    """Inspect, upgrade and prune the store (SQLite file or PostgreSQL).

    \b
    Example:
        perfgate db status --json
        PERFGATE_DATABASE_URL=postgresql://perf@db/perf perfgate db upgrade
        perfgate db prune --keep-days 365 --dry-run
    """


@db.command("status")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def db_status(store: StoreFlags, as_json: bool) -> None:
    """Show the store's schema revision, this perfgate's head, the engine and the run count.

    Reads only: an empty or older database is reported, not created or upgraded.
    """
    status = stored.db_status(store.config())
    if as_json:
        _echo_json({"store": status.to_dict()})
        return
    notes = {
        "empty": "no perfgate schema yet ('perfgate db upgrade' creates it)",
        "behind": "older than this perfgate ('perfgate db upgrade' migrates it)",
        "current": "up to date",
        "newer": "written by a newer perfgate: upgrade perfgate to use it",
    }
    click.echo(f"store:    {status.url}")
    click.echo(f"engine:   {status.engine}")
    click.echo(f"revision: {status.revision or '-'} ({notes[status.state]})")
    click.echo(f"head:     {status.head}")
    click.echo(f"runs:     {'-' if status.runs is None else status.runs}")


@db.command("upgrade")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def db_upgrade(store: StoreFlags, as_json: bool) -> None:
    """Create the store or migrate it to this perfgate's schema (one transaction: a failed
    migration leaves the database as it was; a newer schema is refused untouched)."""
    before, after = stored.db_upgrade(store.config())
    if as_json:
        _echo_json({"before": before.to_dict(), "after": after.to_dict()})
        return
    if before.revision == after.revision:
        click.echo(f"{after.url}: already at revision {after.revision}")
    else:
        click.echo(f"{after.url}: {before.revision or 'empty'} -> {after.revision}")


@db.command("prune")
@store_options
@click.option("--keep-days", type=click.IntRange(min=1), help="Delete runs older than N days.")
@click.option(
    "--keep-runs",
    type=click.IntRange(min=1),
    help="Keep the newest N runs of each benchmark, branch and testbed.",
)
@click.option("--dry-run", is_flag=True, help="Only say what would be deleted.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def db_prune(
    store: StoreFlags, keep_days: int | None, keep_runs: int | None, dry_run: bool, as_json: bool
) -> None:
    """Delete old runs with their measurements, profiles and findings.

    Never deleted: the newest baseline_window runs of each benchmark / branch / testbed,
    the runs around a recorded change point, an open alert's run, a baseline reset's run.
    """
    plan = stored.prune_store(
        store.config(), keep_days=keep_days, keep_runs=keep_runs, dry_run=dry_run
    )
    if as_json:
        _echo_json(
            {
                "dry_run": plan.dry_run,
                "candidates": plan.candidates,
                "protected": plan.protected,
                "protected_by": dict(sorted(plan.reasons.items())),
                "deleted" if not plan.dry_run else "would_delete": list(plan.deleted_run_ids),
            }
        )
        return
    verb = "would delete" if dry_run else "deleted"
    for run_id in plan.deleted_run_ids:
        click.echo(f"{verb} run {run_id}")
    kept = ", ".join(f"{n} {why}" for why, n in sorted(plan.reasons.items()))
    click.echo(
        f"{verb} {len(plan.deleted_run_ids)} of {plan.candidates} old runs"
        + (f"; kept {plan.protected} ({kept})" if plan.protected else "")
    )


@cli.group()
def alerts() -> None:
    """List and triage alerts (gate regressions on the base branch, history change points).

    \b
    Example:
        perfgate alerts list
        perfgate alerts ack 12 --reason "looking into it"
        perfgate alerts ignore 13 --as invalid --reason "noisy runner"
    """


@alerts.command("list")
@store_options
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(["untriaged", "acknowledged", "invalid", "wontfix", "fixed"]),
    help="Only these states (default: untriaged and acknowledged).",
)
@click.option("--all", "show_all", is_flag=True, help="Every state.")
@click.option("--benchmark", help="One benchmark.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def alerts_list(
    store: StoreFlags,
    statuses: tuple[str, ...],
    show_all: bool,
    benchmark: str | None,
    as_json: bool,
) -> None:
    """List alerts, newest first."""
    found = stored.alerts_of(store.config(), statuses=statuses, every=show_all, benchmark=benchmark)
    if as_json:
        _echo_json({"alerts": [a.to_dict() for a in found]})
        return
    if not found:
        click.echo("no alerts")
    for a in found:
        change = "" if a.change_pct is None else f" {a.change_pct:+.1f}%"
        commits = f"{(a.commit_before or '?')[:10]}..{a.commit_after[:10]}"
        click.echo(
            f"#{a.id} [{a.status}] {a.benchmark} {a.metric} {a.verdict.value}{change} "
            f"({a.source}, {a.branch}, {commits}, run {a.run_id[:12]})"
        )


def _triage_command(action: str, help: str, *extra: Callable[[Any], Any]) -> None:
    """``alerts ACTION ALERT_ID``: move the alert to the state ``action`` (or ``--as``) names."""

    def triage(
        store: StoreFlags, alert_id: int, by: str | None, reason: str, state: str | None = None
    ) -> None:
        alert = stored.triage(
            store.config(), alert_id, action=action, by=by, reason=reason, state=state
        )
        click.echo(f"alert #{alert.id} ({alert.benchmark} {alert.metric}) is now {alert.status}")

    decorators: tuple[Callable[[Any], Any], ...] = (
        store_options,
        click.argument("alert_id", type=int),
        *extra,
        _by_option,
    )
    alerts.command(action, help=help)(options(*decorators)(triage))


_triage_command("ack", "Acknowledge an alert: the change is real and someone is on it.")
_triage_command(
    "ignore",
    "Close an alert as invalid (noise, infrastructure) or wontfix (accepted change).",
    click.option(
        "--as",
        "state",
        type=click.Choice(["invalid", "wontfix"]),
        required=True,
        help="invalid: not a real change (no longer cuts baseline windows); wontfix: accepted.",
    ),
)
_triage_command("fixed", "Close an alert as fixed.")


@alerts.command("trail")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def alerts_trail(store: StoreFlags, as_json: bool) -> None:
    """Show who triaged, reset or excluded what, when and why (newest first)."""
    events = stored.trail(store.config())
    if as_json:
        _echo_json({"events": [e.to_dict() for e in events]})
        return
    if not events:
        click.echo("no triage actions")
    for e in events:
        what = f"alert #{e.alert_id}" if e.alert_id is not None else (e.benchmark or "")
        if e.run_id and e.alert_id is None:
            what += f" run {e.run_id[:12]}"
        state = f" -> {e.state}" if e.state else ""
        click.echo(
            f"{e.at.isoformat(timespec='seconds')} {e.by}: {e.action} {what}{state}: {e.reason}"
        )


@cli.group()
def baseline() -> None:
    """Reset a benchmark's baseline, and keep baselines as code (export / import JSON).

    \b
    Example:
        perfgate baseline reset resnet --at 3f9c2a1 --reason "new data loader, accepted"
        perfgate baseline export --out baselines/
        perfgate baseline import baselines/
    """


@baseline.command("reset")
@store_options
@click.argument("benchmark")
@click.option("--at", "commit", required=True, help="Commit (or 7+ char prefix) of the change.")
@click.option(
    "--branch",
    help="The branch whose window is reset: COMMIT must have a run there (default: base_branch).",
)
@_by_option
def baseline_reset(
    store: StoreFlags, benchmark: str, commit: str, branch: str | None, by: str | None, reason: str
) -> None:
    """Accept a change: BENCHMARK's baseline window starts at the first run of COMMIT."""
    reset = stored.reset(
        store.config(), benchmark=benchmark, commit=commit, branch=branch, by=by, reason=reason
    )
    click.echo(
        f"baseline of {benchmark} now starts at run {reset.run_id[:12]} "
        f"(commit {reset.commit[:12]}, {reset.starts_at.isoformat(timespec='seconds')})"
    )


@baseline.command("export")
@store_options
@click.option(
    "--out",
    "out_dir",
    type=PathType(file_okay=False),
    default=Path("baselines"),
    show_default=True,
    help="Directory for the JSON files.",
)
@click.option("--branch", help="Branch whose windows are exported (default: base_branch).")
@click.option("--benchmark", "benchmarks", multiple=True, help="Only these benchmarks.")
def baseline_export(
    store: StoreFlags, out_dir: Path, branch: str | None, benchmarks: tuple[str, ...]
) -> None:
    """Write each benchmark's baseline window as versioned JSON, one file per testbed."""
    written = stored.export_baseline_files(
        store.config(), out_dir, branch=branch, benchmarks=benchmarks
    )
    for path in written:
        click.echo(f"wrote {path}")
    if not written:
        click.echo("no baseline windows to export")


@baseline.command("import")
@store_options
@click.argument("directory", type=PathType(exists=True))
def baseline_import(store: StoreFlags, directory: Path) -> None:
    """Load baseline JSON files into the store (runs marked imported; idempotent)."""
    done = stored.import_baseline_files(store.config(), directory)
    click.echo(
        f"imported {done.added} runs from {done.files} files ({done.already_stored} already stored)"
    )


@cli.group("runs")
def runs_group() -> None:
    """Act on stored runs.

    \b
    Example:
        perfgate runs exclude 3f9c2a1b --reason "runner was throttled"
    """


@runs_group.command("exclude")
@store_options
@click.argument("run_id")
@_by_option
def runs_exclude(store: StoreFlags, run_id: str, by: str | None, reason: str) -> None:
    """Leave a run out of every history and baseline window (its id or a 6+ char prefix)."""
    run = stored.exclude(store.config(), run_id, by=by, reason=reason)
    click.echo(f"excluded run {run.id} ({run.benchmark} on {run.git.branch})")
