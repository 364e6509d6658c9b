"""The command line: parse options, call one function of :mod:`perfgate.app`, render, exit.

The only module that imports click, and the one place where errors become exit codes
(``0`` pass, ``1`` regression, ``2`` usage or configuration, ``3`` infrastructure,
``4`` internal error).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click

from perfgate import __version__
from perfgate.errors import ConfigError, ExitCode, PerfgateError
from perfgate.models import BenchmarkSpec, ParamValue

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


def _open_store(url: str) -> Any:
    from perfgate.store import open_store

    return open_store(url)


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
    as_json: bool,
) -> None:
    """Run benchmarks and record one run each in the store.

    \b
    Example:
        perfgate run --workload mlp --repeats 3 --branch main
        perfgate run --suite perfgate.toml --benchmark resnet
        perfgate run --suite perfgate.toml --ab origin/main   # paired A/B in one job
        perfgate run --workload mlp --confirm 5              # settle an inconclusive gate
    """
    from perfgate import app
    from perfgate.reporters.render import render_json, render_runs_text, runs_to_dict
    from perfgate.workloads import BUILTIN

    config = _config(suite, db_url, project, host_label=host_label)
    overrides: dict[str, Any] = {
        k: v
        for k, v in {
            "device": device,
            "repeats": repeats,
            "warmup": warmup,
            "measured": measured,
            "profiled": profiled,
        }.items()
        if v is not None
    }
    extra = dict(parse_param(p) for p in params)
    specs: list[BenchmarkSpec] = []
    for name in workloads:
        if name not in BUILTIN:
            raise ConfigError(f"--workload {name!r}: unknown (built-in: {', '.join(BUILTIN)})")
        specs.append(BenchmarkSpec(name=name, workload=name, **config.defaults))
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
    store = _open_store(config.database_url)
    try:
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
            )
    finally:
        store.close()
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
    store = _open_store(config.database_url)
    try:
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
    finally:
        store.close()
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
) -> tuple[Any, Any]:
    from perfgate import app

    config = _config(suite, db_url, project)
    git = app.detect_git_context(os.environ, Path.cwd(), branch=branch)
    if not git.branch:
        raise ConfigError("cannot tell the branch: pass --branch or run inside a git checkout")
    store = _open_store(config.database_url)
    try:
        result = app.compare(
            config,
            store,
            branch=git.branch,
            against=against or git.base_branch or config.base_branch,
            benchmarks=benchmarks,
        )
    finally:
        store.close()
    return config, result


def _compare_and_report(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    branch: str | None,
    against: str | None,
    benchmarks: tuple[str, ...],
    as_json: bool,
) -> bool:
    """Compare, print the report, and say whether the gate's policy fails it."""
    from perfgate import app
    from perfgate.reporters.render import gate_to_dict, render_json, render_text

    config, result = _compare(suite, db_url, project, branch, against, benchmarks)
    failed: bool = app.gate_failed(config, result)
    if as_json:
        click.echo(render_json(gate_to_dict(result, failed=failed)), nl=False)
    else:
        click.echo(render_text(result), nl=False)
    return failed


@cli.command()
@_gate_common
def compare(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    branch: str | None,
    against: str | None,
    benchmarks: tuple[str, ...],
    as_json: bool,
) -> None:
    """Report how the latest runs on a branch compare with a base branch (never fails).

    \b
    Example:
        perfgate compare --branch feat --against main
    """
    _compare_and_report(suite, db_url, project, branch, against, benchmarks, as_json)


@cli.command()
@_gate_common
def gate(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    branch: str | None,
    against: str | None,
    benchmarks: tuple[str, ...],
    as_json: bool,
) -> None:
    """Compare like 'compare', and exit 1 when a verdict the policy fails on is found.

    \b
    Example:
        perfgate gate --branch feat --against main --json
    """
    failed = _compare_and_report(suite, db_url, project, branch, against, benchmarks, as_json)
    if failed:
        sys.exit(int(ExitCode.REGRESSION))


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
    store = _open_store(config.database_url)
    try:
        points = app.history(
            config, store, benchmark=benchmark, branch=branch, metric=metric, limit=limit
        )
    finally:
        store.close()
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
def history_analyze(
    suite: Path | None,
    db_url: str | None,
    project: str | None,
    benchmark: str | None,
    branch: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Find change points in every stored series, each with the commits it lies between.

    A change point is a shift of level that persisted for at least 5 runs; the gate's
    baseline window starts at the last one, so an accepted change stops being compared
    against the level before it.

    \b
    Example:
        perfgate history analyze --branch main --benchmark mlp
    """
    from perfgate import app
    from perfgate.reporters.render import changes_to_dict, render_changes_text, render_json

    config = _config(suite, db_url, project)
    store = _open_store(config.database_url)
    try:
        changes = app.analyze_history(
            config, store, branch=branch or config.base_branch, benchmark=benchmark, limit=limit
        )
    finally:
        store.close()
    if as_json:
        click.echo(render_json(changes_to_dict(changes)), nl=False)
    else:
        click.echo(render_changes_text(changes), nl=False)


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
    store = _open_store(config.database_url)
    try:
        rows = app.noise(config, store, branch=branch or config.base_branch)
    finally:
        store.close()
    if as_json:
        click.echo(render_json(noise_to_dict(rows)), nl=False)
    else:
        click.echo(render_noise_text(rows), nl=False)


def main() -> None:
    cli(prog_name="perfgate")
