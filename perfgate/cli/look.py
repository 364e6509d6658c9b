"""``perfgate report``, ``export`` and ``advise``: look at runs and profiles."""

from __future__ import annotations

from pathlib import Path

import click

from perfgate.app import stored
from perfgate.cli.base import PathType, StoreFlags, cli, echo_report, store_options
from perfgate.cli.run import advisor_timeout_option


@cli.command("report")
@store_options
@click.option(
    "--html",
    "html_dir",
    required=True,
    type=PathType(file_okay=False),
    help="Directory to write the static site into (index.html, plotly.min.js, pages).",
)
@click.option("--branch", help="Base branch whose history is drawn (default: base_branch).")
@click.option("--benchmark", "benchmarks", multiple=True, help="Only these benchmarks.")
@click.option(
    "--limit", type=click.IntRange(min=10), default=1000, show_default=True, help="Runs per series."
)
@click.option(
    "--jobs",
    type=click.IntRange(min=0),
    default=0,
    help="Worker processes (default 0: one per CPU, at most 8; 1: none).",
)
def report_command(
    store: StoreFlags,
    html_dir: Path,
    branch: str | None,
    benchmarks: tuple[str, ...],
    limit: int,
    jobs: int,
) -> None:
    """Write a static HTML history report: no server, no internet, works from file://.

    An overview of every benchmark (latest verdict, trend), per benchmark the history of
    each metric (noise band, change points with their commit ranges, PR runs apart) and
    the profile of its latest runs (top ops, step breakdown, memory, per-rank communication,
    findings). Publish the directory as a CI artifact or on Pages; pass its URL to
    'gate --report-url' to link it from the PR comment.

    \b
    Example:
        perfgate report --html out/perf-report
    """
    written = stored.write_report_site(
        store.config(), html_dir, branch=branch, benchmarks=benchmarks, limit=limit, jobs=jobs
    )
    click.echo(str(written.index))
    click.echo(
        f"perfgate: {written.files} files, {written.bytes / 1e6:.1f} MB in {html_dir}", err=True
    )


@cli.group("export")
def export_group() -> None:
    """Export stored history to TensorBoard or Prometheus (needs perfgate[export]).

    \b
    Example:
        perfgate export tensorboard tb-logs/ && tensorboard --logdir tb-logs/
        perfgate export prometheus --push-gateway http://pushgateway:9091 --job nightly
    """


@export_group.command("tensorboard")
@store_options
@click.argument("logdir", type=PathType(file_okay=False))
@click.option("--benchmark", "benchmarks", multiple=True, help="Only these benchmarks.")
@click.option(
    "--branch", help="Only this branch (default: every branch, one TensorBoard run each)."
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Runs per benchmark.",
)
@click.option(
    "--profiles/--no-profiles",
    default=True,
    show_default=True,
    help="Also export each profiled run's top ops and step breakdown.",
)
def export_tensorboard(
    store: StoreFlags,
    logdir: Path,
    benchmarks: tuple[str, ...],
    branch: str | None,
    limit: int,
    profiles: bool,
) -> None:
    """Write TensorBoard event files: a scalar per metric per run (step = run order), and
    the top ops' times and the step breakdown of profiled runs, in LOGDIR/BENCHMARK/BRANCH.

    \b
    Example:
        perfgate export tensorboard tb-logs/ --benchmark mlp
    """
    done = stored.write_tensorboard(
        store.config(), logdir, benchmarks=benchmarks, branch=branch, limit=limit, profiles=profiles
    )
    for path in done.files:
        click.echo(str(path))
    files = f"{len(done.files)} event file{'s' if len(done.files) != 1 else ''}"
    click.echo(f"perfgate: {done.scalars} scalars in {files}", err=True)


@export_group.command("prometheus")
@store_options
@click.option("--branch", help="Branch whose latest values are exported (default: base_branch).")
@click.option("--benchmark", "benchmarks", multiple=True, help="Only these benchmarks.")
@click.option(
    "--push-gateway",
    metavar="URL",
    help="Push to this Pushgateway (PUT /metrics/job/JOB) instead of printing. Exits 3 if "
    "that fails.",
)
@click.option("--job", default="perfgate", show_default=True, help="Pushgateway job name.")
def export_prometheus(
    store: StoreFlags,
    branch: str | None,
    benchmarks: tuple[str, ...],
    push_gateway: str | None,
    job: str,
) -> None:
    """Print the latest value of every series in the Prometheus exposition format, or push
    it to a Pushgateway: gauges in base units (perfgate_step_time_seconds,
    perfgate_peak_memory_bytes, perfgate_aicore_util_ratio, ...) labelled project,
    benchmark, metric, rank, testbed (in words), testbed_key, device and branch.

    \b
    Example:
        perfgate export prometheus > perfgate.prom
        perfgate export prometheus --push-gateway http://pushgateway:9091 --job nightly
    """
    from perfgate.reporters.prometheus import render_prometheus

    done = stored.export_prometheus(
        store.config(), branch=branch, benchmarks=benchmarks, push_gateway=push_gateway, job=job
    )
    if done.pushed_to is not None:
        click.echo(
            f"perfgate: pushed {len(done.values)} values to {done.pushed_to} (job {job})", err=True
        )
    else:
        click.echo(render_prometheus(done.values), nl=False)


@cli.command("advise")
@store_options
@click.argument("target")
@click.option(
    "--no-advisor", is_flag=True, help="Do not run msprof-analyze on an Ascend profile path."
)
@advisor_timeout_option
@click.option(
    "--device-memory-gib",
    type=click.FloatRange(min=0.0, min_open=True),
    help="Device memory capacity in GiB, for the out-of-memory rule.",
)
@click.option("--json", "as_json", is_flag=True, help="Print versioned JSON.")
def advise_command(
    store: StoreFlags,
    target: str,
    no_advisor: bool,
    advisor_timeout_s: float,
    device_memory_gib: float | None,
    as_json: bool,
) -> None:
    """Say what a profile shows is slow and what to do about it (never fails).

    TARGET is a profile path (anything 'ingest' reads) or the id (or a 6+ character
    prefix) of a stored run. Thresholds come from the suite's [advisor] table.

    \b
    Example:
        perfgate advise ./prof/rank0_ascend_pt --no-advisor
        perfgate advise 3f9c2a1b --json
    """
    from perfgate.reporters.render import advise_to_dict, render_advise_text

    advice = stored.advise_target(
        store.config(),
        target,
        msprof=not no_advisor,
        msprof_timeout_s=advisor_timeout_s,
        device_memory_gib=device_memory_gib,
    )
    if as_json and advice.advisor_problem:
        click.echo(f"perfgate: warning: {advice.advisor_problem}", err=True)
    echo_report(advice, as_json, advise_to_dict, render_advise_text)
