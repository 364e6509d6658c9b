"""``perfgate history`` (and ``analyze``), ``detect`` and ``noise``: the stored series."""

from __future__ import annotations

from pathlib import Path

import click

from perfgate.app import stored
from perfgate.cli.base import PathType, StoreFlags, cli, echo_report, store_options


@cli.group(invoke_without_command=True)
@store_options
@click.option("--benchmark", help="One benchmark (default: all).")
@click.option("--branch", help="One branch (default: all).")
@click.option("--metric", default="step_time_ms", show_default=True, help="Metric to list.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Runs per benchmark."
)
@click.option("--json", "as_json", is_flag=True, help="Print versioned JSON.")
@click.pass_context
def history(
    ctx: click.Context,
    store: StoreFlags,
    benchmark: str | None,
    branch: str | None,
    metric: str,
    limit: int,
    as_json: bool,
) -> None:
    """List the stored runs of a metric, oldest first ('history analyze' finds change points).

    \b
    Example:
        perfgate history --benchmark mlp --branch main
        perfgate history analyze --branch main --json
    """
    if ctx.invoked_subcommand is not None:
        return
    from perfgate.reporters.render import history_to_dict, render_history_text

    points = stored.show_history(
        store.config(), benchmark=benchmark, branch=branch, metric=metric, limit=limit
    )
    echo_report(points, as_json, history_to_dict, render_history_text)


@history.command("analyze")
@store_options
@click.option("--benchmark", help="One benchmark (default: all).")
@click.option("--branch", help="Branch to analyse (default: base_branch).")
@click.option(
    "--limit", type=click.IntRange(min=10), default=1000, show_default=True, help="Runs per series."
)
@click.option("--json", "as_json", is_flag=True, help="Print versioned JSON.")
@click.option(
    "--alert",
    is_flag=True,
    help="Report change points and drifts not reported before on the project's tracking issue "
    "(labelled perfgate; opened when missing, updated in place). Exits 3 if that fails.",
)
@click.option(
    "--forge",
    metavar="FORGE",
    help="Where to alert: github, gitlab or gitcode (the forge registry decides; default: "
    "detected from the CI's variables).",
)
@click.option(
    "--forge-url", metavar="URL", help="API base URL (GitHub Enterprise, GitLab, GitCode)."
)
@click.option("--repo", help="GitHub/GitCode owner/name or GitLab project id (default: from CI).")
def history_analyze(
    store: StoreFlags,
    benchmark: str | None,
    branch: str | None,
    limit: int,
    as_json: bool,
    alert: bool,
    forge: str | None,
    forge_url: str | None,
    repo: str | None,
) -> None:
    """Find change points and drifts in every stored series, each with its commit range.

    A change point is a shift of level that persisted for at least 5 runs; the gate's
    baseline window starts at the last one, so an accepted change stops being compared
    against the level before it. A drift is a creeping change no single run shows: the
    newest 10 runs against 10 runs 200 runs or 30 days before (whichever is nearer; the
    oldest, in a shorter history), beyond the change points between them, reported when it
    is at least the metric's minimum effect and significant (a rank test). A ramp is one
    drift, not a staircase of change points. Only the series that decide a gate are
    analysed: a wall time where the CPU or device time decides is left out (one note).

    \b
    Example:
        perfgate history analyze --branch main --benchmark mlp
        perfgate history analyze --alert          # nightly, on the base branch
    """
    from perfgate.reporters.render import changes_to_dict, render_changes_text

    request = stored.AnalyzeRequest(
        store.config(), branch, benchmark, limit, alert, forge, forge_url, repo
    )
    outcome = stored.analyze(request, note=lambda line: click.echo(f"perfgate: {line}", err=True))
    changes = list(outcome.changes)
    echo_report(changes, as_json, changes_to_dict, render_changes_text)
    if outcome.alert_failed is not None:
        raise outcome.alert_failed
    if outcome.alerted is not None:
        click.echo(f"perfgate: {outcome.alerted}", err=True)


@cli.command()
@click.argument("series", type=PathType(dir_okay=False))
@click.option(
    "--direction",
    type=click.Choice(["lower", "higher"]),
    default="lower",
    show_default=True,
    help="Which way is better, to label each change a regression or an improvement.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def detect(series: Path, direction: str, as_json: bool) -> None:
    """Find change points in a series file (CSV 'index,value', oldest run first).

    Uses exactly the code of 'history analyze', so the detector can be scored on any
    labelled data. A ramp is reported once, as a drift with the runs it moved over.

    \b
    Example:
        perfgate detect step_times.csv --json
    """
    from perfgate import app
    from perfgate.models import Direction
    from perfgate.reporters.render import change_points_to_json, render_json

    values, points, drift = app.detect_series(series)
    data = change_points_to_json(points, Direction(direction), drift)
    details = data["details"]
    assert isinstance(details, list)
    if as_json:
        click.echo(render_json(data), nl=False)
    else:
        if not points:
            click.echo(f"no change points in {len(values)} values")
        for item, cp in zip(details, points, strict=True):
            click.echo(
                f"index {cp.index}: {cp.before:.4g} -> {cp.after:.4g} ({cp.change_pct:+.1f}%, "
                f"{item['verdict']}, confidence {cp.confidence:.3f})"
            )
        moved = data["drift"]
        if drift is not None and isinstance(moved, dict):
            click.echo(
                f"drift over runs {drift.start}-{drift.end}: {drift.before:.4g} -> "
                f"{drift.after:.4g} ({drift.change_pct:+.1f}%, {moved['verdict']}, "
                f"confidence {drift.confidence:.3f})"
            )


@cli.command()
@store_options
@click.option("--branch", help="Branch whose history is measured (default: base_branch).")
@click.option("--json", "as_json", is_flag=True, help="Print versioned JSON.")
def noise(store: StoreFlags, branch: str | None, as_json: bool) -> None:
    """List how small a change each benchmark can detect, and which are too noisy to gate.

    \b
    Example:
        perfgate noise --branch main
    """
    from perfgate.reporters.render import noise_to_dict, render_noise_text

    rows = stored.noise_report(store.config(), branch=branch)
    echo_report(rows, as_json, noise_to_dict, render_noise_text)
