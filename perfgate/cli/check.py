"""``perfgate check``: run the suite, gate, and settle what is inconclusive, in one CI step."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from perfgate.cli.base import _config, _open_store, _progress_fn, cli
from perfgate.cli.gate import (
    CiOutputs,
    _ci_output_options,
    _parse_fail_on,
    _report_options,
    delivery_options,
    report_result,
)
from perfgate.cli.run import measure_options, measured_specs
from perfgate.errors import ExitCode


@cli.command()
@measure_options
@click.option(
    "--mode",
    type=click.Choice(["history", "ab"]),
    default="history",
    show_default=True,
    help="history: judge the head against the base branch's stored runs. ab: measure the "
    "PR's merge-base in this job too, in alternating pairs with the head (runner noise "
    "cancels; no stored history needed); the base branch's runs stay beside it.",
)
@click.option(
    "--ab-ref",
    metavar="REF",
    help="ab mode's base commit (default: the merge-base of HEAD with the CI's base commit, "
    "else with origin/BASE, else with BASE).",
)
@click.option(
    "--budget",
    default="10m",
    show_default=True,
    metavar="TIME|N",
    help="What re-measuring inconclusive benchmarks may spend: a time (600s, 10m, 1h) or a "
    "number of extra repeats (in ab mode, extra pairs each open benchmark may get).",
)
@click.option("--against", help="Base branch whose history is the baseline (default: base_branch).")
@click.option(
    "--base-sha",
    metavar="SHA",
    help="The base-branch commit this branch is measured on top of (default: the CI's).",
)
@click.option(
    "--fail-on",
    metavar="VERDICTS",
    help="Comma-separated verdicts that fail the gate (default: the suite's fail_on, else "
    "regression,over_budget). Budgets are judged on every run; they never trigger "
    "re-measuring.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the gate's versioned JSON.")
@_report_options
@_ci_output_options
def check(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    workloads: tuple[str, ...],
    benchmarks: tuple[str, ...],
    params: tuple[str, ...],
    device: str | None,
    repeats: int | None,
    warmup: int | None,
    measured: int | None,
    profiled: int | None,
    branch: str | None,
    commit: str | None,
    base_branch: str | None,
    host_label: str | None,
    trace_dir: Path,
    timeout: float | None,
    mode: str,
    ab_ref: str | None,
    budget: str,
    against: str | None,
    base_sha: str | None,
    fail_on: str | None,
    as_json: bool,
    comment: bool,
    comment_mode: str,
    forge: str | None,
    forge_url: str | None,
    repo: str | None,
    pr_number: int | None,
    sha: str | None,
    report_dir: Path | None,
    status: bool | None,
    summary: bool | None,
    testbed: str | None,
    report_url: str | None,
    junit: Path | None,
    gitlab_metrics: Path | None,
    annotations: bool | None,
) -> None:
    """Run the suite, gate it, and re-measure (in fresh processes) only the benchmarks left
    inconclusive, until each is decided or the budget is spent; then report like 'gate' and
    exit with its code (1 on a regression).

    Re-measuring keeps the plain gate's false-alarm rate. In history mode the first gate and
    the re-measured one are two looks at a common level, and a regression at the first (at
    that level) stands. In ab mode each open benchmark gets more pairs at looks whose levels
    (alpha spending) add up to at most alpha, and stops at the first look that decides it;
    the report says the pairs each spent and why it stopped. Re-measuring never spends past
    --budget.
    What stays inconclusive is reported with why and what would settle it. On the base
    branch its regressions are recorded as alerts, as 'gate' records them.

    \b
    Example:
        perfgate check --suite perfgate.toml --against main               # history mode
        perfgate check --suite perfgate.toml --mode ab --comment          # a PR job
        perfgate check --workload mlp --branch feat --against main --budget 4
    """
    from perfgate import app
    from perfgate.app.context import detect_base_sha, open_git_history
    from perfgate.app.record import check_writable

    config = _config(suite, db_url, project, host_label=host_label)
    plan = app.parse_budget(budget)
    if fail_on is not None:
        _parse_fail_on(fail_on)  # a typo fails now, not after the suite ran
    specs = measured_specs(
        config,
        workloads=workloads,
        benchmarks=benchmarks,
        params=params,
        device=device,
        repeats=repeats,
        warmup=warmup,
        measured=measured,
        profiled=profiled,
        timeout_s=timeout,
    )
    git = app.detect_git_context(
        os.environ, Path.cwd(), branch=branch, commit=commit, base_branch=base_branch
    )
    history = open_git_history(Path.cwd())
    base = detect_base_sha(os.environ, base_sha=base_sha, git=history)
    suite_dir = (suite or Path("perfgate.toml")).resolve().parent
    base_branch_name = against or git.base_branch or config.base_branch
    if mode == "ab":  # a base that cannot be measured stops before the store is opened
        from perfgate.app.check import resolve_ab_ref

        ab_ref = resolve_ab_ref(
            history, ab_ref=ab_ref or "", base_sha=base, against=base_branch_name
        )
    with _open_store(config.database_url) as store:
        check_writable(store, specs, trace_dir)
        outcome = app.run_check(
            config,
            specs,
            store,
            mode=mode,
            budget=plan,
            git=git,
            ci=app.detect_ci_context(os.environ),
            against=base_branch_name,
            trace_root=trace_dir,
            repo=suite_dir,
            sys_path=[str(suite_dir), str(Path.cwd())],
            base_sha=base,
            history=history,
            ab_ref=ab_ref or "",
            progress=_progress_fn(),
            warn=lambda line: click.echo(f"perfgate: warning: {line}", err=True),
        )
    from perfgate.app.check import remeasured_line

    click.echo(f"perfgate: {remeasured_line(outcome)}", err=True)
    delivery = delivery_options(
        suite,
        comment=comment,
        comment_mode=comment_mode,
        forge=forge,
        forge_url=forge_url,
        repo=repo,
        pr_number=pr_number,
        sha=sha,
        report_dir=report_dir,
        status=status,
        summary=summary,
        testbed=testbed,
        report_url=report_url,
    )
    outputs = CiOutputs(junit, gitlab_metrics, annotations)
    failed = report_result(
        config, outcome.result, as_json, delivery, fail_on, git.branch, outputs, commit=git.commit
    )
    if failed:
        sys.exit(int(ExitCode.REGRESSION))
