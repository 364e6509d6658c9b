"""``perfgate compare``, ``gate`` and ``comment``: judge runs and say so where people look."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from perfgate import app
from perfgate.app.gate_job import CiOutputs, GateOutcome, GateRequest, parse_fail_on
from perfgate.cli.base import (
    PathType,
    StoreFlags,
    cli,
    echo_command,
    echo_report,
    grouped,
    options,
    store_options,
    warn_line,
)
from perfgate.errors import ExitCode

if TYPE_CHECKING:
    from perfgate.app.deliver import DeliveryOptions


_gate_common = options(
    store_options,
    grouped(
        "judged",
        dict,
        click.option("--branch", help="Branch whose latest runs are judged (default: git)."),
        click.option(
            "--against", help="Base branch whose history is the baseline (default: base_branch)."
        ),
        click.option(
            "--base-sha",
            metavar="SHA",
            help="The base-branch commit this branch is measured on top of: the baseline is the "
            "base branch's runs up to the merge-base with it (default: the CI's base commit, "
            "GitHub's pull_request.base.sha or GitLab's CI_MERGE_REQUEST_DIFF_BASE_SHA; else "
            "the git history; else the latest runs).",
        ),
        click.option("--benchmark", "benchmarks", multiple=True, help="Only these."),
    ),
    click.option("--json", "as_json", is_flag=True, help="Print versioned JSON."),
    click.option(
        "--verbose",
        is_flag=True,
        help="Under each comparison of the text report, also its statistics (p-values, FDR, "
        "alpha, minimum effect, detectable change, method) and its reason whole (--json always "
        "has them).",
    ),
)
"""The options of ``compare`` and ``gate``: the store, the runs judged (``judged``: the
:class:`~perfgate.app.gate_job.GateRequest` fields they give) and the output."""


_report_options = options(
    click.option(
        "--comment",
        is_flag=True,
        help="Post the report as one PR/MR comment (updated in place on later runs) and "
        "set a commit status. A posting failure is a warning: the exit code stays the "
        "verdict's.",
    ),
    click.option(
        "--comment-mode",
        type=click.Choice(["always", "change", "regression"]),
        default="always",
        show_default=True,
        help="When to post a new comment: always, on any change (regression, improvement, "
        "inconclusive), or only on a regression; a breached budget counts in both. An "
        "existing comment is always updated.",
    ),
    click.option(
        "--forge",
        metavar="FORGE",
        help="Where to post: github, gitlab or gitcode (the forge registry decides; default: "
        "detected from the CI's variables).",
    ),
    click.option(
        "--forge-url",
        metavar="URL",
        help="API base URL, for GitHub Enterprise, self-managed GitLab or GitCode "
        "(default: GITHUB_API_URL / CI_API_V4_URL / GITCODE_API_URL).",
    ),
    click.option(
        "--repo",
        help="GitHub/GitCode owner/name or GitLab project id (default: GITHUB_REPOSITORY / "
        "CI_PROJECT_ID / GITCODE_REPOSITORY).",
    ),
    click.option(
        "--pr",
        "pr_number",
        type=click.IntRange(min=1),
        help="PR/MR number (default: the CI event's, CI_MERGE_REQUEST_IID, GITCODE_PR_NUMBER).",
    ),
    click.option(
        "--sha",
        help="Commit for the status (default: the PR head, GITHUB_SHA, CI_COMMIT_SHA, "
        "GITCODE_SHA).",
    ),
    click.option(
        "--report-dir",
        type=PathType(file_okay=False),
        help="Write report.md and target.json here (fork PRs: post them from a privileged "
        "job with 'perfgate comment --from DIR').",
    ),
    click.option(
        "--status/--no-status",
        default=None,
        help="Set a commit status perfgate/PROJECT (default: with --comment).",
    ),
    click.option(
        "--summary/--no-summary",
        default=None,
        help="Append the report to $GITHUB_STEP_SUMMARY when set (default: with --comment "
        "or --report-dir).",
    ),
    click.option(
        "--testbed",
        help="Testbed label in the comment's marker: one comment per project, suite and "
        "testbed (default: the host label, else the device).",
    ),
    click.option(
        "--report-url",
        metavar="URL",
        envvar="PERFGATE_REPORT_URL",
        help="Where the HTML history report ('perfgate report --html') is published: "
        "the comment links to it (env PERFGATE_REPORT_URL).",
    ),
)
"""The gate's reporting flags (PR/MR comment, status, job summary, report directory)."""


def delivery_options(suite: Path | None, **flags: Any) -> DeliveryOptions:
    """The delivery :func:`_report_options`' flags ask for (``gate`` and ``check``): the
    flags by their parameter names (``comment``, ``comment_mode``, ``forge``, ...)."""
    return app.delivery_for(str(suite) if suite is not None else "", **flags)


_ci_output_options = grouped(
    "outputs",
    CiOutputs,
    click.option(
        "--junit",
        "junit",
        metavar="FILE",
        type=PathType(dir_okay=False),
        help="Also write the gate as JUnit XML (one testsuite per benchmark, one testcase "
        "per deciding comparison; failures for the verdicts that fail the gate, skipped for "
        "no_baseline / incomparable), for GitLab's reports:junit or Jenkins.",
    ),
    click.option(
        "--gitlab-metrics",
        "gitlab_metrics",
        metavar="FILE",
        type=PathType(dir_okay=False),
        help="Also write a GitLab metrics report (artifacts:reports:metrics): each "
        "deciding metric's current value, in base units, shown beside the target "
        "branch's in the merge request.",
    ),
    click.option(
        "--annotations/--no-annotations",
        default=None,
        help="Print GitHub workflow commands (::error for a verdict that fails the gate, "
        "::warning for an inconclusive one), shown as annotations on the run (default: "
        "when GITHUB_ACTIONS=true). On stdout; on stderr with --json, so stdout stays JSON.",
    ),
)
"""The flags of :class:`~perfgate.app.gate_job.CiOutputs`."""


def show_outcome(outcome: GateOutcome, *, as_json: bool, verbose: bool = False) -> None:
    """Print a gate's outcome: what could not be done first, then the report (text, or JSON
    with ``as_json``), its annotations (on stderr with ``as_json``, so stdout stays JSON),
    the files written and what delivering it did, one line each on stderr."""
    from perfgate.reporters.render import gate_to_dict, render_json, render_text

    for line in outcome.warnings:
        warn_line(line)
    if as_json:
        click.echo(render_json(gate_to_dict(outcome.result, failed=outcome.failed)), nl=False)
    else:
        click.echo(render_text(outcome.result, verbose=verbose), nl=False)
    for line in outcome.ci.annotations:
        echo_command(line, err=as_json)
    for path in outcome.ci.written:
        click.echo(f"perfgate: wrote {path}", err=True)
    for line in outcome.ci.warnings:
        warn_line(line)
    if outcome.delivery is not None:
        for line in outcome.delivery.done:
            click.echo(f"perfgate: {line}", err=True)
        for line in outcome.delivery.warnings:
            warn_line(line)


@cli.command()
@_gate_common
@click.option(
    "--across",
    nargs=2,
    metavar="A B",
    help="Instead: the same benchmarks on two environments side by side (fingerprint keys "
    "or prefixes, device:cpu / device:cuda / device:npu, model:TEXT): ratios B / A and top "
    "ops; a report, never a gate. --branch narrows both sides to one branch.",
)
def compare(
    store: StoreFlags,
    judged: dict[str, Any],
    as_json: bool,
    verbose: bool,
    across: tuple[str, str] | None,
) -> None:
    """Report how the latest runs on a branch compare with a base branch (never fails).

    \b
    Example:
        perfgate compare --branch feat --against main
        perfgate compare --across device:cuda device:npu   # GPU vs NPU, a report
    """
    config = store.config()
    if across:
        from perfgate.reporters.render import across_to_dict, render_across_text

        report = app.compare_environments(
            config, across[0], across[1], branch=judged["branch"], benchmarks=judged["benchmarks"]
        )
        echo_report(report, as_json, across_to_dict, render_across_text)
        return
    request = GateRequest(config, **judged, alerts=False, outputs=CiOutputs(annotations=False))
    show_outcome(app.run_gate(request), as_json=as_json, verbose=verbose)


_gate_policy_options = options(
    click.option(
        "--fail-on",
        metavar="VERDICTS",
        help="Comma-separated verdicts that fail the gate, e.g. regression,inconclusive "
        "(default: the suite's fail_on, else regression,over_budget: a breached [budgets] "
        "limit).",
    ),
    click.option(
        "--baseline-file",
        type=PathType(exists=True),
        help="Judge against baseline JSON files ('perfgate baseline export'; a directory or "
        "one file) instead of the store's history: no shared database needed.",
    ),
)
"""``gate``'s policy flags: what fails it, and what it is judged against."""


@cli.command()
@_gate_common
@_gate_policy_options
@_report_options
@_ci_output_options
def gate(
    store: StoreFlags,
    judged: dict[str, Any],
    as_json: bool,
    verbose: bool,
    fail_on: str | None,
    baseline_file: Path | None,
    outputs: CiOutputs,
    **report: Any,
) -> None:
    """Compare like 'compare', and exit 1 when a verdict the policy fails on is found.

    With --comment it also posts the report to the PR/MR (one comment, updated in place),
    sets a commit status and writes the job summary; tokens come from GITHUB_TOKEN,
    GITLAB_TOKEN or CI_JOB_TOKEN.

    \b
    Example:
        perfgate gate --branch feat --against main --json
        perfgate gate --against main --comment --comment-mode change   # in CI
        perfgate gate --against main --report-dir out/                 # fork PRs
        perfgate gate --junit perfgate-junit.xml --gitlab-metrics metrics.txt
    """
    request = GateRequest(
        store.config(),
        **judged,
        baseline_file=baseline_file,
        fail_on=None if fail_on is None else parse_fail_on(fail_on),
        delivery=delivery_options(store.suite, **report),  # the flags of _report_options
        outputs=outputs,
    )
    outcome = app.run_gate(request)
    show_outcome(outcome, as_json=as_json, verbose=verbose)
    if outcome.failed:
        sys.exit(int(ExitCode.REGRESSION))


_comment_from_options = options(
    click.option(
        "--from",
        "from_dir",
        required=True,
        type=PathType(file_okay=False),
        help="The directory 'gate --report-dir' wrote (report.md, target.json).",
    ),
    click.option("--forge", metavar="FORGE", help="Override the target's."),
    click.option("--forge-url", metavar="URL", help="Override the target's API base URL."),
    click.option("--repo", help="Override the repository / project (use the trusted one)."),
    click.option(
        "--pr", "pr_number", type=click.IntRange(min=1), help="Override the PR/MR number."
    ),
    click.option("--sha", help="Override the commit for the status."),
    click.option(
        "--expect-sha",
        metavar="SHA",
        help="The trusted head commit (e.g. github.event.workflow_run.head_sha): refuse a report "
        "made for another commit, or a PR whose head is not this commit.",
    ),
    click.option(
        "--conclusion",
        metavar="CONCLUSION",
        help="How the fork's job ended (github.event.workflow_run.conclusion: success, failure, "
        "cancelled, ...): the status's state. Required with --status; the report directory's own "
        "state is never trusted.",
    ),
    click.option(
        "--status/--no-status",
        default=True,
        show_default=True,
        help="Set the status 'perfgate (fork PR)' (needs --conclusion).",
    ),
)
"""``comment``'s flags: the report directory, overrides of its target, what to trust."""


@cli.command()
@_comment_from_options
def comment(
    from_dir: Path,
    forge: str | None,
    forge_url: str | None,
    repo: str | None,
    pr_number: int | None,
    sha: str | None,
    expect_sha: str | None,
    conclusion: str | None,
    status: bool,
) -> None:
    """Post a report that 'gate --report-dir' wrote, from a job allowed to (fork PRs).

    The directory comes from an unprivileged job, so it is checked field by field, its
    Markdown is sanitised (no raw HTML, images or off-forge links) and the status is
    perfgate's own 'perfgate (fork PR)' with the state from --conclusion.
    Exits 2 on a malformed directory or a job without a token, 3 when the forge refuses
    or cannot be reached.

    \b
    Example:
        perfgate comment --from out/ --expect-sha "$HEAD_SHA" --conclusion "$CONCLUSION"
    """
    from perfgate.app.deliver import TargetOverrides, post_report_dir

    delivery = post_report_dir(
        from_dir,
        os.environ,
        TargetOverrides(forge=forge, api_url=forge_url, repo=repo, number=pr_number, sha=sha),
        status=status,
        conclusion=conclusion,
        expect_sha=expect_sha,
    )
    for line in delivery.done:
        click.echo(f"perfgate: {line}", err=True)
