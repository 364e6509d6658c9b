"""The command line: parse options, call one function of :mod:`perfgate.app`, render, exit.

The only module that imports click, and the one place where errors become exit codes
(``0`` pass, ``1`` regression, ``2`` usage or configuration, ``3`` infrastructure,
``4`` internal error).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click

from perfgate import __version__
from perfgate.errors import ConfigError, ExitCode, PerfgateError, ReportError
from perfgate.models import BenchmarkSpec, ParamValue, Verdict

F = TypeVar("F", bound=Callable[..., Any])


class _Group(click.Group):
    """Maps perfgate's errors to one line on stderr and the exit-code table."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PerfgateError as exc:
            click.echo(f"perfgate: error: {exc}", err=True)
            ctx.exit(int(exc.exit_code))
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:  # a bug in perfgate: say so, distinctly from a regression
            click.echo(f"perfgate: internal error: {type(exc).__name__}: {exc}", err=True)
            if os.environ.get("PERFGATE_DEBUG"):
                traceback.print_exc()
            ctx.exit(int(ExitCode.INTERNAL))


def store_options(func: F) -> F:
    """Options every command that reads the store shares."""
    options = [
        click.option(
            "--db",
            "db_url",
            metavar="URL",
            help="Store URL (default sqlite:///.perfgate/perfgate.db; env PERFGATE_DATABASE_URL).",
        ),
        click.option(
            "--suite",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Suite file (default ./perfgate.toml or [tool.perfgate] in ./pyproject.toml).",
        ),
        click.option("--project", help="Project name (env PERFGATE_PROJECT)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _config(suite: Path | None, db_url: str | None, project: str | None, **kw: Any) -> Any:
    from perfgate.config import load_config

    if suite is not None and not suite.is_file():
        raise ConfigError(f"{suite}: suite file not found")
    return load_config(suite, database_url=db_url, project=project, **kw)


def _open_store(url: str, *, create: bool = True) -> Any:
    """The store at ``url``; commands that only read pass ``create=False``, so that a
    mistyped SQLite path is an error rather than a new, empty store."""
    from perfgate.store import open_store

    return open_store(url, create=create)


@contextmanager
def _writing(where: Path) -> Iterator[None]:
    """Output that cannot be written under ``where`` (not a directory, no permission, disk
    full): one line and exit 3, not an internal error."""
    try:
        yield
    except OSError as exc:
        raise ReportError(f"cannot write {exc.filename or where}: {exc.strerror or exc}") from None


def parse_param(text: str) -> tuple[str, ParamValue]:
    """``key=value`` with the value read as bool, int, float or string, in that order."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"--param {text!r}: expected KEY=VALUE")
    value: ParamValue
    if raw.lower() in ("true", "false"):
        value = raw.lower() == "true"
    else:
        try:
            value = int(raw)
        except ValueError:
            try:
                value = float(raw)
            except ValueError:
                value = raw
    return key.strip(), value


def _progress_fn() -> Callable[[str], None] | None:
    if os.environ.get("CI") or not sys.stderr.isatty():
        return None
    return lambda line: click.echo(f"  … {line}", err=True)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perfgate")
def cli() -> None:
    """perfgate: a CI performance-regression gate for deep-learning training and inference.

    \b
    Typical use:
        perfgate run --workload mlp --branch main      # record a baseline run
        perfgate gate --branch feat --against main     # exit 1 on a regression
    """


@cli.command()
@store_options
@click.option(
    "--workload", "workloads", multiple=True, help="Built-in workload (mlp, cnn, transformer)."
)
@click.option("--benchmark", "benchmarks", multiple=True, help="Run only these suite benchmarks.")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="Workload parameter.")
@click.option("--device", type=click.Choice(["cpu", "cuda", "npu"]), help="Device to run on.")
@click.option("--repeats", type=click.IntRange(min=1), help="Worker processes per benchmark.")
@click.option("--warmup", type=click.IntRange(min=0), help="Warm-up steps per repeat.")
@click.option("--measured", type=click.IntRange(min=2), help="Timed steps per repeat.")
@click.option("--profiled", type=click.IntRange(min=0), help="Profiled steps (first repeat).")
@click.option("--branch", help="Branch to record under (default: from CI or git).")
@click.option("--commit", help="Commit to record (default: from CI or git).")
@click.option("--base-branch", help="The branch this one targets (default: from CI).")
@click.option("--host-label", help="Label of the runner class, part of the fingerprint.")
@click.option(
    "--trace-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".perfgate/traces"),
    show_default=True,
    help="Where profiled windows are written.",
)
@click.option(
    "--ab",
    "ab_ref",
    metavar="REF",
    help="Also measure commit REF (e.g. the merge-base), alternating its repeats with the "
    "head's in pairs; the gate then compares the pairs.",
)
@click.option(
    "--confirm",
    "confirm",
    type=click.IntRange(min=1),
    metavar="N",
    help="Instead of a new run: give the latest run of each benchmark judged inconclusive or "
    "a regression up to N more repeats, one at a time (alpha spending), and record the result.",
)
@click.option("--against", help="Base branch for --confirm (default: base_branch).")
@click.option(
    "--nproc",
    type=click.IntRange(min=1),
    help="Ranks per node: run each repeat as a torchrun job (gloo on CPU, nccl on CUDA, "
    "hccl on NPU), one rank per device.",
)
@click.option("--nnodes", type=click.IntRange(min=1), help="Nodes of a multi-node torchrun job.")
@click.option("--node-rank", type=click.IntRange(min=0), help="This node's rank (multi-node jobs).")
@click.option(
    "--rdzv-endpoint",
    metavar="HOST:PORT",
    help="c10d rendezvous endpoint, the same on every node (default: a free local port).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the recorded runs as JSON.")
def run(
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
    ab_ref: str | None,
    confirm: int | None,
    against: str | None,
    nproc: int | None,
    nnodes: int | None,
    node_rank: int | None,
    rdzv_endpoint: str | None,
    as_json: bool,
) -> None:
    """Run benchmarks and record one run each in the store.

    \b
    Example:
        perfgate run --workload mlp --repeats 3 --branch main
        perfgate run --suite perfgate.toml --benchmark resnet
        perfgate run --suite perfgate.toml --ab origin/main   # paired A/B in one job
        perfgate run --workload mlp --confirm 5              # settle an inconclusive gate
        perfgate run --workload ddp_mlp --nproc 8            # one torchrun job per repeat
    """
    from perfgate import app
    from perfgate.reporters.render import render_json, render_runs_text, runs_to_dict
    from perfgate.runner.distributed import LaunchOptions
    from perfgate.workloads import BUILTIN, BUILTIN_KINDS

    config = _config(suite, db_url, project, host_label=host_label)
    overrides: dict[str, Any] = {
        k: v
        for k, v in {
            "device": device,
            "repeats": repeats,
            "warmup": warmup,
            "measured": measured,
            "profiled": profiled,
            "nproc": nproc,
            "nnodes": nnodes,
        }.items()
        if v is not None
    }
    launch = LaunchOptions(nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint)
    extra = dict(parse_param(p) for p in params)
    specs: list[BenchmarkSpec] = []
    for name in workloads:
        if name not in BUILTIN:
            raise ConfigError(f"--workload {name!r}: unknown (built-in: {', '.join(BUILTIN)})")
        kind = BUILTIN_KINDS.get(name, "training")
        specs.append(BenchmarkSpec(name=name, workload=name, kind=kind, **config.defaults))
    if not workloads:
        specs = list(config.benchmarks)
        if benchmarks:
            unknown = sorted(set(benchmarks) - {s.name for s in specs})
            if unknown:
                raise ConfigError(f"--benchmark {', '.join(unknown)}: not in the suite")
            specs = [s for s in specs if s.name in set(benchmarks)]
    for s in specs:
        if s.workload is not None and s.workload not in BUILTIN:
            raise ConfigError(
                f"benchmark {s.name}: unknown workload {s.workload!r} "
                f"(built-in: {', '.join(BUILTIN)})"
            )
    specs = [replace(s, params={**s.params, **extra}, **overrides) for s in specs]
    git = app.detect_git_context(
        os.environ, Path.cwd(), branch=branch, commit=commit, base_branch=base_branch
    )
    with _open_store(config.database_url) as store:
        suite_dir = (suite or Path("perfgate.toml")).resolve().parent
        if confirm is not None:
            if not git.branch:
                raise ConfigError("cannot tell the branch: pass --branch")
            confirmations = app.confirm_and_record(
                config,
                specs,
                store,
                branch=git.branch,
                against=against or git.base_branch or config.base_branch,
                extra=confirm,
                sys_path=[str(suite_dir), str(Path.cwd())],
                progress=_progress_fn(),
            )
            records = [c.folded for c in confirmations if c.folded is not None]
            for c in confirmations:
                click.echo(f"{c.benchmark}: {c.note}", err=True)
        elif ab_ref is not None:
            pairs = app.run_ab_and_record(
                config,
                specs,
                store,
                ref=ab_ref,
                repo=suite_dir,
                suite_dir=_relative_to_repo(suite_dir),
                git=git,
                ci=app.detect_ci_context(os.environ),
                trace_root=trace_dir,
                progress=_progress_fn(),
            )
            records = [r for pair in pairs for r in pair]
        else:
            records = app.run_and_record(
                config,
                specs,
                store,
                git=git,
                ci=app.detect_ci_context(os.environ),
                trace_root=trace_dir,
                sys_path=[str(suite_dir), str(Path.cwd())],
                progress=_progress_fn(),
                warn=lambda line: click.echo(f"perfgate: warning: {line}", err=True),
                launch=launch,
            )
    if as_json:
        click.echo(render_json(runs_to_dict(records)), nl=False)
    else:
        click.echo(render_runs_text(records), nl=False)
        for r in records:
            click.echo(f"recorded run {r.id} ({r.benchmark} on {r.git.branch})")


@cli.command()
@store_options
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--benchmark", required=True, help="Benchmark name to record the run under.")
@click.option("--branch", help="Branch the run belongs to (default: CI variables, then git).")
@click.option("--commit", help="Commit measured (default: CI variables, then git).")
@click.option("--base-branch", help="Branch the change targets (default: CI variables).")
@click.option("--host-label", help="Runner class label kept in the fingerprint.")
@click.option(
    "--step-times",
    type=click.Path(dir_okay=False, path_type=Path),
    help="File with one step time (ms) per line; taken over the profile's step times.",
)
@click.option(
    "--no-advisor", is_flag=True, help="Do not run msprof-analyze's advisor on an Ascend profile."
)
@click.option(
    "--advisor-timeout",
    type=click.FloatRange(min=1.0),
    default=300.0,
    show_default=True,
    help="Seconds msprof-analyze may take before it is stopped.",
)
@click.option("--json", "as_json", is_flag=True, help="Print versioned JSON.")
def ingest(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    path: Path,
    benchmark: str,
    branch: str | None,
    commit: str | None,
    base_branch: str | None,
    host_label: str | None,
    step_times: Path | None,
    no_advisor: bool,
    advisor_timeout: float,
    as_json: bool,
) -> None:
    """Record a run from a profile your own script wrote.

    PATH is a torch_npu *_ascend_pt directory (text or db export), a parent directory of
    one per rank, a torch.profiler *.pt.trace.json[.gz] file, or a directory of them.

    \b
    Example:
        perfgate ingest ./prof/rank0_ascend_pt --benchmark llama-dp --json
        perfgate ingest ./prof --benchmark llama-dp --step-times steps.txt
    """
    from perfgate import app
    from perfgate.ingest import ingest_and_record
    from perfgate.reporters.render import ingest_to_dict, render_ingest_text, render_json

    config = _config(suite, db_url, project, host_label=host_label)
    git = app.detect_git_context(
        os.environ, Path.cwd(), branch=branch, commit=commit, base_branch=base_branch
    )
    with _open_store(config.database_url) as store:
        result = ingest_and_record(
            config,
            store,
            path,
            benchmark=benchmark,
            git=git,
            ci=app.detect_ci_context(os.environ),
            step_times_file=step_times,
            advisor=not no_advisor,
            advisor_timeout_s=advisor_timeout,
        )
    if as_json:
        if result.advisor_problem:
            click.echo(f"perfgate: warning: {result.advisor_problem}", err=True)
        click.echo(render_json(ingest_to_dict(result)), nl=False)
    else:
        click.echo(render_ingest_text(result), nl=False)


def _relative_to_repo(directory: Path) -> Path:
    from perfgate.runner.ab import repo_root

    top = repo_root(directory)
    if top is None:
        raise ConfigError(f"--ab needs a git checkout; {directory} is not inside one")
    return directory.relative_to(top)


def _gate_common(func: F) -> F:
    func = click.option("--json", "as_json", is_flag=True, help="Print versioned JSON.")(func)
    func = click.option("--benchmark", "benchmarks", multiple=True, help="Only these.")(func)
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
) -> tuple[Any, Any]:
    """The gate's result: against the store's history, or against baseline files (the runs
    judged still come from the store); ``alerts`` records a base-branch gate's regressions
    as untriaged alerts."""
    from perfgate import app

    config = _config(suite, db_url, project)
    git = app.detect_git_context(os.environ, Path.cwd(), branch=branch)
    if not git.branch:
        raise ConfigError("cannot tell the branch: pass --branch or run inside a git checkout")
    with _open_store(config.database_url, create=False) as store:
        if baseline_file is not None:
            from perfgate.baselines import gate_from_baseline_files

            records = app.latest_runs(config, store, branch=git.branch, benchmarks=benchmarks)
            result = gate_from_baseline_files(config, records, baseline_file)
        else:
            result = app.compare(
                config,
                store,
                branch=git.branch,
                against=against or git.base_branch or config.base_branch,
                benchmarks=benchmarks,
            )
            if alerts:
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
            "inconclusive), or only on a regression. An existing comment is always updated.",
        ),
        click.option(
            "--forge",
            type=click.Choice(["github", "gitlab"]),
            help="Where to post (default: from GITHUB_ACTIONS / GITLAB_CI).",
        ),
        click.option(
            "--forge-url",
            metavar="URL",
            help="API base URL, for GitHub Enterprise or self-managed GitLab "
            "(default: GITHUB_API_URL / CI_API_V4_URL).",
        ),
        click.option(
            "--repo",
            help="GitHub owner/name or GitLab project id (default: GITHUB_REPOSITORY / "
            "CI_PROJECT_ID).",
        ),
        click.option(
            "--pr",
            "pr_number",
            type=click.IntRange(min=1),
            help="PR/MR number (default: the CI event's, CI_MERGE_REQUEST_IID).",
        ),
        click.option(
            "--sha", help="Commit for the status (default: the PR head, GITHUB_SHA, CI_COMMIT_SHA)."
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


def _parse_fail_on(text: str) -> frozenset[Verdict]:
    """``--fail-on regression,inconclusive``: the verdicts that fail the gate."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    try:
        return frozenset(Verdict(x) for x in names)
    except ValueError:
        known = ", ".join(v.value for v in Verdict)
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
) -> bool:
    """Compare, print the report, deliver it where asked, and say whether the gate's policy
    fails it. Delivery problems are warnings on stderr; they never change the verdict."""
    from perfgate import app
    from perfgate.reporters.render import gate_to_dict, render_json, render_text

    config, result = _compare(
        suite,
        db_url,
        project,
        branch,
        against,
        benchmarks,
        baseline_file=baseline_file,
        alerts=delivery is not None,
    )
    if fail_on is not None:
        config = replace(config, fail_on=_parse_fail_on(fail_on))
    failed: bool = app.gate_failed(config, result)
    if as_json:
        click.echo(render_json(gate_to_dict(result, failed=failed)), nl=False)
    else:
        click.echo(render_text(result), nl=False)
    if delivery is not None and delivery.wanted:
        from perfgate import report

        git = app.detect_git_context(os.environ, Path.cwd(), branch=branch)
        with _open_store(config.database_url) as store:
            done = report.deliver_gate(
                config,
                store,
                result,
                failed=failed,
                env=os.environ,
                options=delivery,
                commit=git.commit,
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
        from perfgate.across import compare_across
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
    _compare_and_report(suite, db_url, project, branch, against, benchmarks, as_json)


@cli.command()
@_gate_common
@click.option(
    "--fail-on",
    metavar="VERDICTS",
    help="Comma-separated verdicts that fail the gate, e.g. regression,inconclusive "
    "(default: the suite's fail_on, else regression).",
)
@click.option(
    "--baseline-file",
    type=click.Path(exists=True, path_type=Path),
    help="Judge against baseline JSON files ('perfgate baseline export'; a directory or "
    "one file) instead of the store's history: no shared database needed.",
)
@_report_options
def gate(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    branch: str | None,
    against: str | None,
    benchmarks: tuple[str, ...],
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
    """
    from perfgate.report import DeliveryOptions, TargetOverrides
    from perfgate.reporters.markdown import CommentMode

    delivery = DeliveryOptions(
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
@click.option("--forge", type=click.Choice(["github", "gitlab"]), help="Override the target's.")
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
@click.option("--status/--no-status", default=True, show_default=True, help="Set the status.")
def comment(
    from_dir: Path,
    forge: str | None,
    forge_url: str | None,
    repo: str | None,
    pr_number: int | None,
    sha: str | None,
    expect_sha: str | None,
    status: bool,
) -> None:
    """Post a report that 'gate --report-dir' wrote, from a job allowed to (fork PRs).

    Exits 3 when the forge refuses or cannot be reached.

    \b
    Example:
        perfgate comment --from out/ --expect-sha "$HEAD_SHA"
    """
    from perfgate.report import TargetOverrides, post_report_dir

    delivery = post_report_dir(
        from_dir,
        os.environ,
        TargetOverrides(forge=forge, api_url=forge_url, repo=repo, number=pr_number, sha=sha),
        status=status,
        expect_sha=expect_sha,
    )
    for line in delivery.done:
        click.echo(f"perfgate: {line}", err=True)


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
    suite: Path | None,
    db_url: str | None,
    project: str | None,
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
    from perfgate import app
    from perfgate.reporters.render import history_to_dict, render_history_text, render_json

    config = _config(suite, db_url, project)
    with _open_store(config.database_url, create=False) as store:
        points = app.history(
            config, store, benchmark=benchmark, branch=branch, metric=metric, limit=limit
        )
    if as_json:
        click.echo(render_json(history_to_dict(points)), nl=False)
    else:
        click.echo(render_history_text(points), nl=False)


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
    help="Report change points not reported before on the project's tracking issue "
    "(labelled perfgate; opened when missing, updated in place). Exits 3 if that fails.",
)
@click.option(
    "--forge",
    type=click.Choice(["github", "gitlab"]),
    help="Where to alert (default: from GITHUB_ACTIONS / GITLAB_CI).",
)
@click.option("--forge-url", metavar="URL", help="API base URL (GitHub Enterprise, GitLab).")
@click.option("--repo", help="GitHub owner/name or GitLab project id (default: from CI).")
def history_analyze(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    benchmark: str | None,
    branch: str | None,
    limit: int,
    as_json: bool,
    alert: bool,
    forge: str | None,
    forge_url: str | None,
    repo: str | None,
) -> None:
    """Find change points in every stored series, each with the commits it lies between.

    A change point is a shift of level that persisted for at least 5 runs; the gate's
    baseline window starts at the last one, so an accepted change stops being compared
    against the level before it.

    \b
    Example:
        perfgate history analyze --branch main --benchmark mlp
        perfgate history analyze --alert          # nightly, on the base branch
    """
    from perfgate import app
    from perfgate.reporters.render import changes_to_dict, render_changes_text, render_json

    config = _config(suite, db_url, project)
    analysed = branch or config.base_branch
    with _open_store(config.database_url, create=False) as store:
        changes = app.analyze_history(
            config, store, branch=analysed, benchmark=benchmark, limit=limit
        )
    if as_json:
        click.echo(render_json(changes_to_dict(changes)), nl=False)
    else:
        click.echo(render_changes_text(changes), nl=False)
    if alert:
        from perfgate import report

        target = report.resolve_target(
            os.environ, report.TargetOverrides(forge=forge, api_url=forge_url, repo=repo)
        )
        reporter = report.make_reporter(target, os.environ)
        done = report.alert_changes(config.project, analysed, changes, reporter)
        click.echo(f"perfgate: {done}", err=True)


@cli.command("report")
@store_options
@click.option(
    "--html",
    "html_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
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
    suite: Path | None,
    db_url: str | None,
    project: str | None,
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
    from perfgate.site import build_site, default_jobs

    config = _config(suite, db_url, project)
    with _open_store(config.database_url, create=False) as store:
        with _writing(html_dir):
            written = build_site(
                config,
                store,
                html_dir,
                branch=branch,
                benchmarks=benchmarks,
                limit=limit,
                jobs=jobs or default_jobs(),
                url=config.database_url,
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
@click.argument("logdir", type=click.Path(file_okay=False, path_type=Path))
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
    suite: Path | None,
    db_url: str | None,
    project: str | None,
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
    from perfgate import export

    config = _config(suite, db_url, project)
    with _open_store(config.database_url, create=False) as store:
        with _writing(logdir):
            done = export.export_tensorboard(
                config,
                store,
                logdir,
                benchmarks=benchmarks,
                branch=branch,
                limit=limit,
                profiles=profiles,
            )
    for path in done.files:
        click.echo(str(path))
    click.echo(f"perfgate: {done.scalars} scalars in {len(done.files)} event files", err=True)


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
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    branch: str | None,
    benchmarks: tuple[str, ...],
    push_gateway: str | None,
    job: str,
) -> None:
    """Print the latest value of every series in the Prometheus exposition format, or push
    it to a Pushgateway (gauges perfgate_step_time_milliseconds, perfgate_peak_memory_bytes,
    ... labelled project, benchmark, metric, testbed, branch).

    \b
    Example:
        perfgate export prometheus > perfgate.prom
        perfgate export prometheus --push-gateway http://pushgateway:9091 --job nightly
    """
    from perfgate import export
    from perfgate.reporters.prometheus import push_prometheus, render_prometheus

    config = _config(suite, db_url, project)
    with _open_store(config.database_url, create=False) as store:
        values = export.latest_values(config, store, branch=branch, benchmarks=benchmarks)
    if push_gateway:
        push_prometheus(values, push_gateway, job=job)
        click.echo(f"perfgate: pushed {len(values)} values to {push_gateway} (job {job})", err=True)
    else:
        click.echo(render_prometheus(values), nl=False)


@cli.command()
@click.argument("series", type=click.Path(dir_okay=False, path_type=Path))
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
    labelled data.

    \b
    Example:
        perfgate detect step_times.csv --json
    """
    from perfgate.reporters.render import render_json
    from perfgate.stats.changepoints import (
        change_points_to_json,
        detect_change_points,
        read_series_csv,
    )

    values = read_series_csv(series)
    points = detect_change_points(values)
    data = change_points_to_json(points)
    details = data["details"]
    assert isinstance(details, list)
    better_lower = direction == "lower"
    for item, cp in zip(details, points, strict=True):
        worse = cp.change_pct > 0 if better_lower else cp.change_pct < 0
        item["verdict"] = "regression" if worse else "improvement"
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


@cli.command()
@store_options
@click.option("--branch", help="Branch whose history is measured (default: base_branch).")
@click.option("--json", "as_json", is_flag=True, help="Print versioned JSON.")
def noise(
    suite: Path | None, db_url: str | None, project: str | None, branch: str | None, as_json: bool
) -> None:
    """List how small a change each benchmark can detect, and which are too noisy to gate.

    \b
    Example:
        perfgate noise --branch main
    """
    from perfgate import app
    from perfgate.reporters.render import noise_to_dict, render_json, render_noise_text

    config = _config(suite, db_url, project)
    with _open_store(config.database_url, create=False) as store:
        rows = app.noise(config, store, branch=branch or config.base_branch)
    if as_json:
        click.echo(render_json(noise_to_dict(rows)), nl=False)
    else:
        click.echo(render_noise_text(rows), nl=False)


@cli.command("advise")
@store_options
@click.argument("target")
@click.option(
    "--no-advisor", is_flag=True, help="Do not run msprof-analyze on an Ascend profile path."
)
@click.option(
    "--advisor-timeout",
    type=click.FloatRange(min=1.0),
    default=300.0,
    show_default=True,
    help="Seconds msprof-analyze may take before it is stopped.",
)
@click.option(
    "--device-memory-gib",
    type=click.FloatRange(min=0.0, min_open=True),
    help="Device memory capacity in GiB, for the out-of-memory rule.",
)
@click.option("--json", "as_json", is_flag=True, help="Print versioned JSON.")
def advise_command(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    target: str,
    no_advisor: bool,
    advisor_timeout: float,
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
    from perfgate.advise import advise_path, advise_run
    from perfgate.reporters.render import advise_to_dict, render_advise_text, render_json

    config = _config(suite, db_url, project)
    capacity = None if device_memory_gib is None else int(device_memory_gib * (1 << 30))
    if Path(target).exists():
        advice = advise_path(
            Path(target),
            thresholds=config.advisor,
            msprof=not no_advisor,
            msprof_timeout_s=advisor_timeout,
            device_memory_bytes=capacity,
        )
    else:
        with _open_store(config.database_url, create=False) as store:
            advice = advise_run(config, store, target, device_memory_bytes=capacity)
    if as_json:
        if advice.advisor_problem:
            click.echo(f"perfgate: warning: {advice.advisor_problem}", err=True)
        click.echo(render_json(advise_to_dict(advice)), nl=False)
    else:
        click.echo(render_advise_text(advice), nl=False)


# --- team store: db, alerts, baseline, runs -------------------------------------------------


def _echo_json(data: dict[str, Any]) -> None:
    import json

    click.echo(json.dumps({"format_version": 1, **data}, indent=2, allow_nan=False))


def _by_option(func: F) -> F:
    func = click.option(
        "--reason", required=True, help="Why (recorded with the action; shown in the trail)."
    )(func)
    return click.option(
        "--by",
        help="Who (default: GITLAB_USER_LOGIN, GITHUB_ACTOR or USER).",
    )(func)


def _actor(by: str | None) -> str:
    from perfgate import app

    return by or app.default_actor(os.environ)


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
def db_status(suite: Path | None, db_url: str | None, project: str | None, as_json: bool) -> None:
    """Show the store's schema revision, this perfgate's head, the engine and the run count.

    Reads only: an empty or older database is reported, not created or upgraded.
    """
    from perfgate.store.sql import store_status

    config = _config(suite, db_url, project)
    status = store_status(config.database_url)
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
def db_upgrade(suite: Path | None, db_url: str | None, project: str | None, as_json: bool) -> None:
    """Create the store or migrate it to this perfgate's schema (one transaction: a failed
    migration leaves the database as it was; a newer schema is refused untouched)."""
    from perfgate.store.sql import upgrade_store

    config = _config(suite, db_url, project)
    before, after = upgrade_store(config.database_url)
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
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    keep_days: int | None,
    keep_runs: int | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Delete old runs with their measurements, profiles and findings.

    Never deleted: the newest baseline_window runs of each benchmark / branch / testbed,
    the runs around a recorded change point, an open alert's run, a baseline reset's run.
    """
    from perfgate import app

    config = _config(suite, db_url, project)
    with _open_store(config.database_url) as store:
        plan = app.prune(config, store, keep_days=keep_days, keep_runs=keep_runs, dry_run=dry_run)
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
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    statuses: tuple[str, ...],
    show_all: bool,
    benchmark: str | None,
    as_json: bool,
) -> None:
    """List alerts, newest first."""
    config = _config(suite, db_url, project)
    wanted = () if show_all else (statuses or ("untriaged", "acknowledged"))
    with _open_store(config.database_url, create=False) as store:
        found = store.alerts(project=config.project, status=wanted, benchmark=benchmark)
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


def _triage(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    alert_id: int,
    action: str,
    by: str | None,
    reason: str,
    state: str | None = None,
) -> None:
    from perfgate import app

    config = _config(suite, db_url, project)
    with _open_store(config.database_url) as store:
        alert = app.triage_alert(
            config, store, alert_id, action=action, by=_actor(by), reason=reason, state=state
        )
    click.echo(f"alert #{alert.id} ({alert.benchmark} {alert.metric}) is now {alert.status}")


@alerts.command("ack")
@store_options
@click.argument("alert_id", type=int)
@_by_option
def alerts_ack(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    alert_id: int,
    by: str | None,
    reason: str,
) -> None:
    """Acknowledge an alert: the change is real and someone is on it."""
    _triage(suite, db_url, project, alert_id, "ack", by, reason)


@alerts.command("ignore")
@store_options
@click.argument("alert_id", type=int)
@click.option(
    "--as",
    "state",
    type=click.Choice(["invalid", "wontfix"]),
    required=True,
    help="invalid: not a real change (no longer cuts baseline windows); wontfix: accepted.",
)
@_by_option
def alerts_ignore(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    alert_id: int,
    state: str,
    by: str | None,
    reason: str,
) -> None:
    """Close an alert as invalid (noise, infrastructure) or wontfix (accepted change)."""
    _triage(suite, db_url, project, alert_id, "ignore", by, reason, state)


@alerts.command("fixed")
@store_options
@click.argument("alert_id", type=int)
@_by_option
def alerts_fixed(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    alert_id: int,
    by: str | None,
    reason: str,
) -> None:
    """Close an alert as fixed."""
    _triage(suite, db_url, project, alert_id, "fixed", by, reason)


@alerts.command("trail")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def alerts_trail(
    suite: Path | None, db_url: str | None, project: str | None, as_json: bool
) -> None:
    """Show who triaged, reset or excluded what, when and why (newest first)."""
    config = _config(suite, db_url, project)
    with _open_store(config.database_url, create=False) as store:
        events = store.triage_events(project=config.project)
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
@click.option("--branch", help="Find the commit's first run on this branch only.")
@_by_option
def baseline_reset(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    benchmark: str,
    commit: str,
    branch: str | None,
    by: str | None,
    reason: str,
) -> None:
    """Accept a change: BENCHMARK's baseline window starts at the first run of COMMIT."""
    from datetime import datetime, timezone

    config = _config(suite, db_url, project)
    with _open_store(config.database_url) as store:
        reset = store.reset_baseline(
            project=config.project,
            benchmark=benchmark,
            commit=commit,
            branch=branch,
            by=_actor(by),
            reason=reason,
            now=datetime.now(timezone.utc),
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
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("baselines"),
    show_default=True,
    help="Directory for the JSON files.",
)
@click.option("--branch", help="Branch whose windows are exported (default: base_branch).")
@click.option("--benchmark", "benchmarks", multiple=True, help="Only these benchmarks.")
def baseline_export(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    out_dir: Path,
    branch: str | None,
    benchmarks: tuple[str, ...],
) -> None:
    """Write each benchmark's baseline window as versioned JSON, one file per testbed."""
    from perfgate.baselines import export_baselines

    config = _config(suite, db_url, project)
    with _open_store(config.database_url, create=False) as store:
        with _writing(out_dir):
            written = export_baselines(
                config, store, out_dir, branch=branch or config.base_branch, benchmarks=benchmarks
            )
    for path in written:
        click.echo(f"wrote {path}")
    if not written:
        click.echo("no baseline windows to export")


@baseline.command("import")
@store_options
@click.argument("directory", type=click.Path(exists=True, path_type=Path))
def baseline_import(
    suite: Path | None, db_url: str | None, project: str | None, directory: Path
) -> None:
    """Load baseline JSON files into the store (runs marked imported; idempotent)."""
    from perfgate.baselines import import_baselines

    config = _config(suite, db_url, project)
    with _open_store(config.database_url) as store:
        done = import_baselines(store, directory)
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
def runs_exclude(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    run_id: str,
    by: str | None,
    reason: str,
) -> None:
    """Leave a run out of every history and baseline window (its id or a 6+ char prefix)."""
    from datetime import datetime, timezone

    config = _config(suite, db_url, project)
    with _open_store(config.database_url) as store:
        run = store.exclude_run(
            run_id, by=_actor(by), reason=reason, now=datetime.now(timezone.utc)
        )
    click.echo(f"excluded run {run.id} ({run.benchmark} on {run.git.branch})")


def main() -> None:
    cli(prog_name="perfgate")
