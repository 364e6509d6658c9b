"""``perfgate compare``, ``gate`` and ``comment``: judge runs and say so where people look."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from perfgate.cli.base import (
    F,
    _config,
    _open_store,
    cli,
    echo_command,
    store_options,
)
from perfgate.errors import ConfigError, ExitCode
from perfgate.models import Verdict


def _gate_common(func: F) -> F:
    func = click.option("--json", "as_json", is_flag=True, help="Print versioned JSON.")(func)
    func = click.option("--benchmark", "benchmarks", multiple=True, help="Only these.")(func)
    func = click.option(
        "--base-sha",
        metavar="SHA",
        help="The base-branch commit this branch is measured on top of: the baseline is the "
        "base branch's runs up to the merge-base with it (default: the CI's base commit, "
        "GitHub's pull_request.base.sha or GitLab's CI_MERGE_REQUEST_DIFF_BASE_SHA; else "
        "the git history; else the latest runs).",
    )(func)
    func = click.option(
        "--against", help="Base branch whose history is the baseline (default: base_branch)."
    )(func)
    func = click.option("--branch", help="Branch whose latest runs are judged (default: git).")(
        func
    )
    return store_options(func)


def _compare(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    branch: str | None,
    against: str | None,
    benchmarks: tuple[str, ...],
    *,
    baseline_file: Path | None = None,
    alerts: bool = False,
    base_sha: str | None = None,
) -> tuple[Any, Any]:
    """The gate's result: against the store's history, or against baseline files (the runs
    judged still come from the store); ``alerts`` records a base-branch gate's regressions
    as untriaged alerts. A branch other than the base is judged against the base branch's
    runs up to its merge-base (``base_sha``, the CI's base commit or the git history)."""
    from perfgate import app
    from perfgate.app.context import detect_pr_base

    config = _config(suite, db_url, project)
    git = app.detect_git_context(os.environ, Path.cwd(), branch=branch)
    base = detect_pr_base(os.environ, Path.cwd(), base_sha=base_sha)
    if not git.branch:
        raise ConfigError("cannot tell the branch: pass --branch or run inside a git checkout")
    with _open_store(config.database_url, create=False) as store:
        if baseline_file is not None:
            from perfgate.app.baselines import gate_from_baseline_files

            records = app.latest_runs(config, store, branch=git.branch, benchmarks=benchmarks)
            result = gate_from_baseline_files(config, records, baseline_file)
        else:
            result = app.compare(
                config,
                store,
                branch=git.branch,
                against=against or git.base_branch or config.base_branch,
                benchmarks=benchmarks,
                base_sha=base.sha,
                git=base.git,
            )
            if alerts and store.read_only:
                regressed = any(
                    c.verdict == Verdict.REGRESSION for c in app.deciding(result.comparisons)
                )
                if regressed and result.branch == config.base_branch:
                    click.echo(
                        f"perfgate: warning: store {store.url} is read-only: this gate's "
                        "regressions are not recorded as alerts",
                        err=True,
                    )
            elif alerts:
                app.record_alerts(config, store, result=result)
    return config, result


def _report_options(func: F) -> F:
    """The gate's reporting flags (PR/MR comment, status, job summary, report directory)."""
    options = [
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
            type=click.Path(file_okay=False, path_type=Path),
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
    ]
    for option in reversed(options):
        func = option(func)
    return func


def delivery_options(
    suite: Path | None,
    *,
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
) -> Any:
    """The delivery of :func:`_report_options`' flags (``gate`` and ``check``)."""
    from perfgate.app.deliver import DeliveryOptions, TargetOverrides
    from perfgate.reporters.markdown import CommentMode

    return DeliveryOptions(
        comment=comment,
        mode=CommentMode(comment_mode),
        target=TargetOverrides(
            forge=forge, api_url=forge_url, repo=repo, number=pr_number, sha=sha
        ),
        report_dir=report_dir,
        status=status,
        summary=summary,
        testbed=testbed or "",
        suite_path=str(suite) if suite is not None else "",
        report_url=report_url or "",
    )


@dataclass(frozen=True)
class CiOutputs:
    """Where a gate also reports in the CI's own formats (``gate`` and ``check``)."""

    junit: Path | None = None
    gitlab_metrics: Path | None = None
    annotations: bool | None = None
    """None: when ``GITHUB_ACTIONS=true``."""


def _ci_output_options(func: F) -> F:
    """The flags of :class:`CiOutputs`."""
    options = [
        click.option(
            "--junit",
            "junit",
            metavar="FILE",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Also write the gate as JUnit XML (one testsuite per benchmark, one testcase "
            "per deciding comparison; failures for the verdicts that fail the gate, skipped for "
            "no_baseline / incomparable), for GitLab's reports:junit or Jenkins.",
        ),
        click.option(
            "--gitlab-metrics",
            "gitlab_metrics",
            metavar="FILE",
            type=click.Path(dir_okay=False, path_type=Path),
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
    ]
    for option in reversed(options):
        func = option(func)
    return func


def write_ci_outputs(config: Any, result: Any, outputs: CiOutputs, *, as_json: bool) -> None:
    """The annotations, JUnit XML and GitLab metrics report of a gate. A file that cannot be
    written is a warning: like the PR comment, it never changes the verdict's exit code."""
    from perfgate.app.files import write_atomic
    from perfgate.reporters.annotations import annotations_wanted, github_annotations

    if annotations_wanted(os.environ, outputs.annotations):
        for line in github_annotations(result, config.fail_on):
            echo_command(line, err=as_json)
    files: list[tuple[Path, Any]] = []
    if outputs.junit is not None:
        from perfgate.reporters.junit import render_junit

        files.append((outputs.junit, render_junit(result, config.fail_on)))
    if outputs.gitlab_metrics is not None:
        from perfgate.reporters.prometheus import render_gitlab_metrics

        files.append((outputs.gitlab_metrics, render_gitlab_metrics(result)))
    for path, data in files:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data)
        except OSError as exc:
            why = exc.strerror or str(exc)
            click.echo(f"perfgate: warning: cannot write {path}: {why}", err=True)
        else:
            click.echo(f"perfgate: wrote {path}", err=True)


def _parse_fail_on(text: str) -> frozenset[Verdict]:
    """``--fail-on regression,inconclusive``: the verdicts that fail the gate."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    known = ", ".join(v.value for v in Verdict)
    if not names:
        # An empty list would fail on nothing: the gate silently switched off.
        raise ConfigError(f"--fail-on: empty ({text!r}); give at least one verdict from {known}")
    try:
        return frozenset(Verdict(x) for x in names)
    except ValueError:
        raise ConfigError(f"--fail-on {text!r}: expected verdicts from {known}") from None


def _compare_and_report(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    branch: str | None,
    against: str | None,
    benchmarks: tuple[str, ...],
    as_json: bool,
    delivery: Any = None,
    fail_on: str | None = None,
    baseline_file: Path | None = None,
    base_sha: str | None = None,
    outputs: CiOutputs | None = None,
) -> bool:
    """Compare, print the report, deliver it where asked, and say whether the gate's policy
    fails it. Delivery problems are warnings on stderr; they never change the verdict."""

    config, result = _compare(
        suite,
        db_url,
        project,
        branch,
        against,
        benchmarks,
        baseline_file=baseline_file,
        alerts=delivery is not None,
        base_sha=base_sha,
    )
    return report_result(config, result, as_json, delivery, fail_on, branch, outputs)


def report_result(
    config: Any,
    result: Any,
    as_json: bool,
    delivery: Any,
    fail_on: str | None,
    branch: str | None,
    outputs: CiOutputs | None = None,
    commit: str | None = None,
) -> bool:
    """Print a gate's result, write its CI outputs (``outputs``), deliver it where asked,
    and say whether the policy (the config's ``fail_on`` or ``--fail-on``) fails it:
    ``gate``'s and ``check``'s output. ``commit``: the one the report names when the judged
    runs do not share one (``check`` passes its ``--commit``; None: detected)."""
    from perfgate import app
    from perfgate.reporters.render import gate_to_dict, render_json, render_text

    if fail_on is not None:
        config = replace(config, fail_on=_parse_fail_on(fail_on))
    failed: bool = app.gate_failed(config, result)
    if as_json:
        click.echo(render_json(gate_to_dict(result, failed=failed)), nl=False)
    else:
        click.echo(render_text(result), nl=False)
    if outputs is not None:
        write_ci_outputs(config, result, outputs, as_json=as_json)
    if delivery is not None and delivery.wanted:
        from perfgate.app import deliver as report

        if commit is None:
            commit = app.detect_git_context(os.environ, Path.cwd(), branch=branch).commit
        with _open_store(config.database_url) as store:
            done = report.deliver_gate(
                config,
                store,
                result,
                failed=failed,
                env=os.environ,
                options=delivery,
                commit=commit,
                job_url=app.detect_ci_context(os.environ).job_url,
            )
        for line in done.done:
            click.echo(f"perfgate: {line}", err=True)
        for line in done.warnings:
            click.echo(f"perfgate: warning: {line}", err=True)
    return failed


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
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    branch: str | None,
    against: str | None,
    benchmarks: tuple[str, ...],
    base_sha: str | None,
    as_json: bool,
    across: tuple[str, str] | None,
) -> None:
    """Report how the latest runs on a branch compare with a base branch (never fails).

    \b
    Example:
        perfgate compare --branch feat --against main
        perfgate compare --across device:cuda device:npu   # GPU vs NPU, a report
    """
    if across:
        from perfgate.app.across import compare_across
        from perfgate.reporters.render import across_to_dict, render_across_text, render_json

        config = _config(suite, db_url, project)
        with _open_store(config.database_url, create=False) as store:
            report = compare_across(
                config, store, across[0], across[1], branch=branch, benchmarks=benchmarks
            )
        if as_json:
            click.echo(render_json(across_to_dict(report)), nl=False)
        else:
            click.echo(render_across_text(report), nl=False)
        return
    _compare_and_report(
        suite, db_url, project, branch, against, benchmarks, as_json, base_sha=base_sha
    )


@cli.command()
@_gate_common
@click.option(
    "--fail-on",
    metavar="VERDICTS",
    help="Comma-separated verdicts that fail the gate, e.g. regression,inconclusive "
    "(default: the suite's fail_on, else regression,over_budget: a breached [budgets] "
    "limit).",
)
@click.option(
    "--baseline-file",
    type=click.Path(exists=True, path_type=Path),
    help="Judge against baseline JSON files ('perfgate baseline export'; a directory or "
    "one file) instead of the store's history: no shared database needed.",
)
@_report_options
@_ci_output_options
def gate(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    branch: str | None,
    against: str | None,
    benchmarks: tuple[str, ...],
    base_sha: str | None,
    as_json: bool,
    fail_on: str | None,
    baseline_file: Path | None,
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
    failed = _compare_and_report(
        suite,
        db_url,
        project,
        branch,
        against,
        benchmarks,
        as_json,
        delivery,
        fail_on,
        baseline_file,
        base_sha=base_sha,
        outputs=CiOutputs(junit, gitlab_metrics, annotations),
    )
    if failed:
        sys.exit(int(ExitCode.REGRESSION))


@cli.command()
@click.option(
    "--from",
    "from_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The directory 'gate --report-dir' wrote (report.md, target.json).",
)
@click.option("--forge", metavar="FORGE", help="Override the target's.")
@click.option("--forge-url", metavar="URL", help="Override the target's API base URL.")
@click.option("--repo", help="Override the repository / project (use the trusted one).")
@click.option("--pr", "pr_number", type=click.IntRange(min=1), help="Override the PR/MR number.")
@click.option("--sha", help="Override the commit for the status.")
@click.option(
    "--expect-sha",
    metavar="SHA",
    help="The trusted head commit (e.g. github.event.workflow_run.head_sha): refuse a report "
    "made for another commit, or a PR whose head is not this commit.",
)
@click.option(
    "--conclusion",
    metavar="CONCLUSION",
    help="How the fork's job ended (github.event.workflow_run.conclusion: success, failure, "
    "cancelled, ...): the status's state. Required with --status; the report directory's own "
    "state is never trusted.",
)
@click.option(
    "--status/--no-status",
    default=True,
    show_default=True,
    help="Set the status 'perfgate (fork PR)' (needs --conclusion).",
)
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
    Exits 2 on a malformed directory, 3 when the forge refuses or cannot be reached.

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
