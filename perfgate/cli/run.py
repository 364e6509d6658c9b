"""``perfgate run`` and ``perfgate ingest``: record runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from perfgate.cli.base import (
    F,
    _config,
    _open_store,
    _progress_fn,
    cli,
    parse_param,
    store_options,
)
from perfgate.cli.progress import quiet_option
from perfgate.errors import ConfigError

if TYPE_CHECKING:
    from perfgate.config import Config
    from perfgate.models import BenchmarkSpec


def measure_options(func: F) -> F:
    """What to measure and how to record it: ``run``'s and ``check``'s options."""
    options = [
        click.option(
            "--workload",
            "workloads",
            multiple=True,
            # every name of perfgate.workloads.BUILTIN (tests/test_cli_help.py checks it;
            # importing it here would put the config reader on --help's path)
            help="Built-in workload: mlp, cnn, transformer (training steps), ddp_mlp, ddp_cnn "
            "(under --nproc N), mlp_infer (inference).",
        ),
        click.option(
            "--benchmark", "benchmarks", multiple=True, help="Run only these suite benchmarks."
        ),
        click.option(
            "--param", "params", multiple=True, metavar="KEY=VALUE", help="Workload parameter."
        ),
        click.option(
            "--device", type=click.Choice(["cpu", "cuda", "npu"]), help="Device to run on."
        ),
        click.option(
            "--repeats", type=click.IntRange(min=1), help="Worker processes per benchmark."
        ),
        click.option("--warmup", type=click.IntRange(min=0), help="Warm-up steps per repeat."),
        click.option("--measured", type=click.IntRange(min=2), help="Timed steps per repeat."),
        click.option(
            "--profiled", type=click.IntRange(min=0), help="Profiled steps (first repeat)."
        ),
        click.option("--branch", help="Branch to record under (default: from CI or git)."),
        click.option("--commit", help="Commit to record (default: from CI or git)."),
        click.option("--base-branch", help="The branch this one targets (default: from CI)."),
        click.option("--host-label", help="Label of the runner class, part of the fingerprint."),
        click.option(
            "--trace-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=Path(".perfgate/traces"),
            show_default=True,
            help="Where profiled windows are written.",
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=0, min_open=True, max=1e7),
            metavar="SECONDS",
            help="The most one repeat (worker or torchrun job) may take before it is killed "
            "and the run fails (default: the benchmark's timeout, 900; left at 900, a worker "
            "also stops once a step takes 20 times the warm-up's step time, at least 60 s).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return store_options(quiet_option(func))


def measured_specs(
    config: Config,
    *,
    workloads: tuple[str, ...],
    benchmarks: tuple[str, ...],
    params: tuple[str, ...],
    **overrides: Any,
) -> list[BenchmarkSpec]:
    """The benchmarks :func:`measure_options` pick, with their overrides applied."""
    from perfgate.app.specs import benchmark_specs

    return benchmark_specs(
        config,
        workloads=workloads,
        benchmarks=benchmarks,
        overrides={k: v for k, v in overrides.items() if v is not None},
        params=dict(parse_param(p) for p in params),
    )


@cli.command()
@measure_options
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
    help="Instead of a new run: give the latest run of each benchmark judged inconclusive N "
    "more repeats in fresh processes and record the result; a regression stands, and the "
    "false-alarm rate stays that of the plain gate.",
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
    timeout: float | None,
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
    from perfgate.app.record import check_writable
    from perfgate.models import LaunchOptions
    from perfgate.reporters.render import render_json, render_runs_text, runs_to_dict

    config = _config(suite, db_url, project, host_label=host_label)
    launch = LaunchOptions(nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint)
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
        nproc=nproc,
        nnodes=nnodes,
        timeout_s=timeout,
    )
    git = app.detect_git_context(
        os.environ, Path.cwd(), branch=branch, commit=commit, base_branch=base_branch
    )
    with _open_store(config.database_url) as store:
        check_writable(store, specs, None if confirm is not None else trace_dir)
        suite_dir = (suite or Path("perfgate.toml")).resolve().parent
        if confirm is not None:
            if not git.branch:
                raise ConfigError("cannot tell the branch: pass --branch")
            from perfgate.app.context import detect_pr_base

            base = detect_pr_base(os.environ, Path.cwd())
            confirmations = app.confirm_and_record(
                config,
                specs,
                store,
                branch=git.branch,
                against=against or git.base_branch or config.base_branch,
                extra=confirm,
                sys_path=[str(suite_dir), str(Path.cwd())],
                progress=_progress_fn(),
                base_sha=base.sha,
                git=base.git,
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
                git=git,
                ci=app.detect_ci_context(os.environ),
                trace_root=trace_dir,
                progress=_progress_fn(),
                warn=lambda line: click.echo(f"perfgate: warning: {line}", err=True),
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
@click.option(
    "--benchmark",
    default="",
    help="Benchmark name to record the run under (required for a profile, an ais_bench "
    "summary or a metrics file); a pytest-benchmark, pyperf or asv file names its own "
    "benchmarks, and NAME becomes their prefix: NAME/<each benchmark in it>.",
)
@click.option("--branch", help="Branch the run belongs to (default: CI variables, then git).")
@click.option(
    "--commit",
    help="Commit measured (default: CI variables, then git); a result file that names its "
    "commit (pytest-benchmark, asv) is recorded at that one.",
)
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
@click.option(
    "--reference",
    type=click.Path(dir_okay=False, path_type=Path),
    help="JSON of official figures per benchmark and metric; the run is shown beside them.",
)
@click.option("--json", "as_json", is_flag=True, help="Print versioned JSON.")
@quiet_option
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
    reference: Path | None,
    as_json: bool,
) -> None:
    """Record a run from a profile or result file your own job wrote.

    PATH is a torch_npu *_ascend_pt directory (text or db export), a parent directory of
    one per rank, a torch.profiler *.pt.trace.json[.gz] file, a directory of them, or an
    ais_bench *_summary.json (ais_bench / msit benchmark --output), recorded as an
    inference run. --reference FILE shows the run beside official figures (a report, not
    a verdict).

    PATH may also be another harness's results, detected from its content: pytest
    --benchmark-json, pyperf -o (.json or .json.gz), an asv results file
    (.asv/results/MACHINE/COMMIT-ENV.json), or a metrics file: JSON {"metrics": [{"name":
    "tokens_per_s", "values": [...], "unit": "1/s", "direction": "higher"}, ...]} or CSV
    with a name,value[,unit,direction] header. Each benchmark in a pytest-benchmark, pyperf
    or asv file is recorded as its own run, under the name the file gives it (NAME/<its
    name> with --benchmark NAME), with its samples (rounds, values per worker, asv samples)
    as time_ms; a metrics file is one run, NAME.

    \b
    Example:
        perfgate ingest ./prof/rank0_ascend_pt --benchmark llama-dp --json
        perfgate ingest ./prof --benchmark llama-dp --step-times steps.txt
        perfgate ingest out/2024_05_01-10_00_00_summary.json --benchmark resnet50_bs1 \\
            --reference modelzoo.json
        perfgate ingest .benchmarks.json                     # test_sort, test_parse, ...
        perfgate ingest .benchmarks.json --benchmark unit    # unit/test_sort, ...
        perfgate ingest train_metrics.csv --benchmark llama-7b-pretrain
    """
    from perfgate import app
    from perfgate.app.ingest import read_ingest, record_ingest
    from perfgate.app.reference import read_reference
    from perfgate.reporters.render import ingest_to_dict, render_ingest_text, render_json

    config = _config(suite, db_url, project, host_label=host_label)
    git = app.detect_git_context(
        os.environ, Path.cwd(), branch=branch, commit=commit, base_branch=base_branch
    )
    # The reference and the profile are read and checked before the store is opened: a path
    # that is not a profile never leaves a new, empty store behind.
    figures = read_reference(reference) if reference is not None else None
    read = read_ingest(
        config,
        path,
        benchmark=benchmark,
        git=git,
        ci=app.detect_ci_context(os.environ),
        step_times_file=step_times,
        advisor=not no_advisor,
        advisor_timeout_s=advisor_timeout,
        progress=_progress_fn(),
    )
    with _open_store(config.database_url) as store:
        result = record_ingest(config, store, read, reference=figures, reference_path=reference)
    if as_json:
        if result.advisor_problem:
            click.echo(f"perfgate: warning: {result.advisor_problem}", err=True)
        click.echo(render_json(ingest_to_dict(result)), nl=False)
    else:
        click.echo(render_ingest_text(result), nl=False)
