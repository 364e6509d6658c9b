"""``perfgate run`` and ``perfgate ingest``: record runs."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import click

from perfgate import app
from perfgate.app.run_job import IngestRequest, Measure, RunRequest
from perfgate.cli.base import (
    F,
    PathType,
    StoreFlags,
    cli,
    echo_report,
    options,
    parse_param,
    store_options,
    warn_line,
)
from perfgate.cli.progress import progress_for_command, quiet_option
from perfgate.models import LaunchOptions

_MEASURE_OPTIONS = (
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
    click.option("--device", type=click.Choice(["cpu", "cuda", "npu"]), help="Device to run on."),
    click.option("--repeats", type=click.IntRange(min=1), help="Worker processes per benchmark."),
    click.option("--warmup", type=click.IntRange(min=0), help="Warm-up steps per repeat."),
    click.option("--measured", type=click.IntRange(min=2), help="Timed steps per repeat."),
    click.option("--profiled", type=click.IntRange(min=0), help="Profiled steps (first repeat)."),
    click.option("--branch", help="Branch to record under (default: from CI or git)."),
    click.option("--commit", help="Commit to record (default: from CI or git)."),
    click.option("--base-branch", help="The branch this one targets (default: from CI)."),
    click.option("--host-label", help="Label of the runner class, part of the fingerprint."),
    click.option(
        "--trace-dir",
        type=PathType(file_okay=False),
        default=Path(".perfgate/traces"),
        show_default=True,
        help="Where profiled windows are written.",
    ),
    click.option(
        "--timeout",
        "timeout_s",
        type=click.FloatRange(min=0, min_open=True, max=1e7),
        metavar="SECONDS",
        help="The most one repeat (worker or torchrun job) may take before it is killed "
        "and the run fails (default: the benchmark's timeout, 900; left at 900, a worker "
        "also stops once a step takes 20 times the warm-up's step time, at least 60 s).",
    ),
)
"""What to measure and how to record it (:class:`~perfgate.app.run_job.Measure`); all but
``--host-label``, which is the config's."""

_MEASURE_FIELDS = tuple(
    f.name for f in dataclasses.fields(Measure) if f.name not in ("params", "nproc", "nnodes")
)
"""The fields of :class:`~perfgate.app.run_job.Measure` that :data:`_MEASURE_OPTIONS` give
as they are (``--param`` is parsed first; ``nproc`` and ``nnodes`` are ``run``'s own)."""


MeasureFlags = Callable[..., Measure]
"""The flags of :data:`_MEASURE_OPTIONS` as given: called with the fields they leave out
(``nproc``, ``nnodes``: ``run``'s), the :class:`~perfgate.app.run_job.Measure` they ask for,
``--param`` read then (a malformed one is a usage error where the command asks for it)."""


def measure_options(func: F) -> F:
    """``run``'s and ``check``'s options: the store's, ``--quiet``, ``--host-label``, and
    what to measure, handed to ``func`` as one ``measure`` (:data:`MeasureFlags`)."""

    @functools.wraps(func)
    def command(*args: Any, **kwargs: Any) -> Any:
        fields = {name: kwargs.pop(name) for name in _MEASURE_FIELDS}
        params = tuple(kwargs.pop("params"))

        def measure(**more: Any) -> Measure:
            return Measure(params=tuple(parse_param(p) for p in params), **fields, **more)

        return func(*args, measure=measure, **kwargs)

    return options(store_options, quiet_option, *_MEASURE_OPTIONS)(cast(F, command))


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
    store: StoreFlags,
    host_label: str | None,
    measure: MeasureFlags,
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
    from perfgate.reporters.render import render_runs_text, runs_to_dict

    request = RunRequest(
        config=store.config(host_label=host_label),
        measure=measure(nproc=nproc, nnodes=nnodes),
        suite=store.suite,
        ab_ref=ab_ref,
        confirm=confirm,
        against=against,
        launch=LaunchOptions(nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint),
    )
    outcome = app.run_benchmarks(request, progress=progress_for_command(), warn=warn_line)
    for c in outcome.confirmations:
        click.echo(f"{c.benchmark}: {c.note}", err=True)
    echo_report(outcome.records, as_json, runs_to_dict, render_runs_text)
    if not as_json:
        for r in outcome.records:
            click.echo(f"recorded run {r.id} ({r.benchmark} on {r.git.branch})")


advisor_timeout_option = click.option(
    "--advisor-timeout",
    "advisor_timeout_s",
    type=click.FloatRange(min=1.0),
    default=300.0,
    show_default=True,
    help="Seconds msprof-analyze may take before it is stopped.",
)
"""``--advisor-timeout`` of ``ingest`` and ``advise``."""


@cli.command()
@store_options
@click.argument("path", type=PathType())
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
    type=PathType(dir_okay=False),
    help="File with one step time (ms) per line; taken over the profile's step times.",
)
@click.option(
    "--no-advisor", is_flag=True, help="Do not run msprof-analyze's advisor on an Ascend profile."
)
@advisor_timeout_option
@click.option(
    "--reference",
    type=PathType(dir_okay=False),
    help="JSON of official figures per benchmark and metric; the run is shown beside them.",
)
@click.option("--json", "as_json", is_flag=True, help="Print versioned JSON.")
@quiet_option
def ingest(
    store: StoreFlags, host_label: str | None, no_advisor: bool, as_json: bool, **request: Any
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
    from perfgate.reporters.render import ingest_to_dict, render_ingest_text

    config = store.config(host_label=host_label)
    # ``request``: the flags named as IngestRequest's fields (path, benchmark, ...)
    asked = IngestRequest(config=config, advisor=not no_advisor, **request)
    result = app.ingest_file(asked, progress=progress_for_command())
    if as_json and result.advisor_problem:
        click.echo(f"perfgate: warning: {result.advisor_problem}", err=True)
    echo_report(result, as_json, ingest_to_dict, render_ingest_text)
