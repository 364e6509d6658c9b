"""``perfgate check``: run the suite, gate, and settle what is inconclusive, in one CI step."""

from __future__ import annotations

import sys
from typing import Any

import click

from perfgate import app
from perfgate.app.check_job import CheckRequest
from perfgate.app.gate_job import CiOutputs, parse_fail_on
from perfgate.cli.base import StoreFlags, cli, warn_line
from perfgate.cli.gate import _ci_output_options, _report_options, delivery_options, show_outcome
from perfgate.cli.progress import progress_for_command
from perfgate.cli.run import MeasureFlags, measure_options
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
    store: StoreFlags,
    host_label: str | None,
    measure: MeasureFlags,
    mode: str,
    ab_ref: str | None,
    budget: str,
    against: str | None,
    base_sha: str | None,
    fail_on: str | None,
    as_json: bool,
    outputs: CiOutputs,
    **report: Any,
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
    request = CheckRequest(
        config=store.config(host_label=host_label),
        budget=app.parse_budget(budget),
        fail_on=None if fail_on is None else parse_fail_on(fail_on),  # before the suite runs
        measure=measure(),
        suite=store.suite,
        mode=mode,
        ab_ref=ab_ref,
        against=against,
        base_sha=base_sha,
        delivery=delivery_options(store.suite, **report),  # the flags of _report_options
        outputs=outputs,
    )
    outcome = app.run_check_job(request, progress=progress_for_command(), warn=warn_line)
    click.echo(f"perfgate: {outcome.remeasured}", err=True)
    show_outcome(outcome.gate, as_json=as_json)
    if outcome.failed:
        sys.exit(int(ExitCode.REGRESSION))
