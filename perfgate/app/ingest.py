"""Use case: record a run from a profile, or a result file, that a team's own job already
wrote (``perfgate ingest PATH``, the format detected by :func:`perfgate.parsers.detect_format`;
docs/ingest.md describes them). Each format has its own timing method
(:data:`perfgate.models.INGESTED_TIMING`), so its runs never share a history with ``perfgate
run``'s runs nor with another format's.

- A profile: an Ascend PyTorch Profiler output (a ``*_ascend_pt`` directory, text or db
  export, or a parent directory holding one per rank; :mod:`perfgate.parsers.ascend`), or a
  torch.profiler Chrome trace of a CUDA or CPU job (a ``*.json[.gz]`` file, or a
  ``tensorboard_trace_handler`` directory of one ``*.pt.trace.json[.gz]`` per worker;
  :mod:`perfgate.parsers.torch_trace`). Its samples are the profiled steps' times (per step
  the slowest rank's, since a synchronous step ends when its last rank does), or a
  ``--step-times`` file's numbers; the step breakdown, peak memory and op count come from the
  profile. On Ascend, msprof-analyze's advisor runs over the same directory and its findings
  are stored with the run (the result lists them with perfgate's own,
  :func:`perfgate.app.advise.findings_for`). Nothing is written unless a step time exists.
- An ais_bench ``*_summary.json`` (``ais_bench --output``; :mod:`perfgate.parsers.ais_bench`):
  an inference run with no profile (:func:`ais_bench_measurements`).
- Another harness's result file (:mod:`perfgate.parsers.results`: pytest-benchmark, pyperf,
  asv, perfgate's plain metrics file): a run per benchmark it holds, all stored in one
  transaction (:func:`build_result_records`).
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import unicodedata
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from perfgate.app.advise import base_run, findings_for, read_job
from perfgate.app.measure import capacity_measurements, measurement, utilisation_measurements
from perfgate.app.reference import compare_to_reference, read_reference
from perfgate.config import Config
from perfgate.errors import ParseError, UsageError
from perfgate.metrics import lookup
from perfgate.models import (
    INGESTED_TIMING,
    BenchmarkSpec,
    CIContext,
    Direction,
    Finding,
    Fingerprint,
    GitContext,
    IngestResult,
    Measurement,
    ParamValue,
    Profiled,
    ProfileSummary,
    RunRecord,
)
from perfgate.parsers import (
    FORMAT_AIS_BENCH,
    FORMAT_ASCEND,
    AisBenchSummary,
    detect_format,
    parse_ais_bench,
)
from perfgate.parsers.results import (
    RESULT_FORMATS,
    ResultFile,
    ResultMetric,
    parse_results,
)
from perfgate.runner.fingerprint import collect_fingerprint
from perfgate.stats.summary import summarize
from perfgate.store import SqlStore

# Collection settings that change what the profiler costs, so runs differing in them are
# not comparable. The export type (text or db) is left out: both describe the same job.
_COMPARABLE_COLLECTION = ("profiler_level", "aic_metrics")

_NO_BRANCH = "cannot tell the branch: pass --branch or run inside a git checkout"


def read_step_times(path: Path) -> tuple[float, ...]:
    """Step times in ms from a file of one number per line (blank lines and ``#`` comments
    skipped): UsageError where it cannot be read, ParseError where a line is not a positive
    finite number or there is none."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the step-times file: {exc}") from exc
    values: list[float] = []
    for number, line in enumerate(text.splitlines(), start=1):
        item = line.split("#", 1)[0].strip()
        if not item:
            continue
        try:
            value = float(item)
        except ValueError:
            raise ParseError(f"{path}:{number}: {item[:40]!r} is not a number of ms") from None
        if not math.isfinite(value) or value <= 0:
            raise ParseError(f"{path}:{number}: step time {item} ms is not a positive number")
        values.append(value)
    if not values:
        raise ParseError(f"{path}: no step times (expected one number of ms per line)")
    return tuple(values)


def job_step_times(ranks: Sequence[ProfileSummary]) -> tuple[float, ...]:
    """Each profiled step's time for the whole job: the slowest rank's, step by step (as
    many steps as the rank with the fewest has)."""
    series = [r.step_times_ms for r in ranks if r.step_times_ms]
    return tuple(map(max, zip(*series, strict=False)))


def _measurement(metric: str, values: Sequence[float]) -> Measurement:
    """One repeat of ``values`` (an ingested run is one process's profile), summarised as it
    is: a profile's steps are its profiled window, not a timed run with a warm-up to find."""
    return measurement(metric, [values], steady=False)


def _record(
    name: str,
    project: str,
    git: GitContext,
    ci: CIContext,
    fp: Fingerprint,
    measurements: tuple[Measurement, ...],
    stamp: datetime,
    *,
    measured: int,
    profiled: int = 0,
    repeats: int = 1,
    kind: str = "training",
    **more: Any,
) -> RunRecord:
    """A run recorded from a file: no warm-up (its samples are taken as they are), on the
    fingerprint's device with its params; ``more``: the profile fields of the run.

    Raises:
        UsageError: the benchmark's or a metric's name holds a control character (a NUL
            that SQLite keeps, PostgreSQL refuses and a Prometheus label cannot carry).
    """
    for what, text in (("benchmark", name), *(("metric", m.metric) for m in measurements)):
        bad = next((ch for ch in text if unicodedata.category(ch) == "Cc"), None)
        if bad is not None:
            raise UsageError(f"{what} {text!r}: a control character (U+{ord(bad):04X}) in a name")
    spec = BenchmarkSpec(
        name=name,
        kind=kind,
        device=fp.device_kind,
        warmup=0,
        measured=measured,
        profiled=profiled,
        repeats=repeats,
        params=dict(fp.params),
    )
    return RunRecord(
        uuid.uuid4().hex, project, name, fp, git, ci, stamp, stamp, measurements, spec, **more
    )


def _measurements(profiled: Profiled, step_times: Sequence[float]) -> tuple[Measurement, ...]:
    slowest = profiled.slowest
    out = [_measurement("step_time_ms", step_times)]
    b = slowest.breakdown
    if b is not None:
        for metric, value in (
            ("computing_ms", b.compute_ms),
            ("communication_not_overlapped_ms", b.communication_not_overlapped_ms),
            ("free_ms", b.free_ms),
        ):
            if value is not None and math.isfinite(value):
                out.append(_measurement(metric, [value]))
    peaks = [r.peak_memory_bytes for r in profiled.ranks if r.peak_memory_bytes is not None]
    if peaks:
        out.append(_measurement("peak_memory_bytes", [float(max(peaks))]))
    if slowest.op_calls_per_step is not None:
        out.append(_measurement("op_calls_per_step", [slowest.op_calls_per_step]))
    taken = {m.metric for m in out}
    out += [m for m in utilisation_measurements(slowest) if m.metric not in taken]
    out += capacity_measurements(slowest)
    if len(profiled.ranks) > 1:
        # Each card's own too, so a budget such as "AI Core >= 70% on every card" sees each.
        for r in (r for r in profiled.ranks if r.rank is not None):
            out += [
                _measurement(f"{m.metric}.rank{r.rank}", m.samples)
                for m in utilisation_measurements(r)
            ]
    return tuple(out)


def _fingerprint(profiled: Profiled, host_label: str) -> Fingerprint:
    first = profiled.slowest
    collection = first.collection
    cuda = any(op.device == "cuda" for op in first.ops)
    device_kind = "npu" if profiled.format == FORMAT_ASCEND else "cuda" if cuda else "cpu"
    return collect_fingerprint(
        device_kind=device_kind,
        timing_method=INGESTED_TIMING[profiled.format],
        params={k: collection[k] for k in _COMPARABLE_COLLECTION if k in collection},
        host_label=host_label,
        device_model=collection.get("device", ""),
        device_count=len(profiled.ranks),
        torch_version=collection.get("torch_version", ""),
        torch_npu_version=collection.get("torch_npu_version", ""),
        cuda_version=collection.get("cuda_runtime_version", ""),
        cann_version=collection.get("cann_version", ""),
        driver_version=collection.get("cuda_driver_version", ""),
    )


def build_ingest_record(
    profiled: Profiled,
    *,
    benchmark: str,
    project: str,
    git: GitContext,
    ci: CIContext,
    host_label: str = "",
    step_times: Sequence[float] | None = None,
    findings: Sequence[Finding] = (),
) -> RunRecord:
    """The run recorded for ``profiled`` (pure); ParseError where the profile has no step
    time and no step-times file was given."""
    times = tuple(step_times) if step_times else job_step_times(profiled.ranks)
    slowest = profiled.slowest
    if not times and slowest.breakdown is not None and slowest.breakdown.step_ms > 0:
        times = (slowest.breakdown.step_ms,)
    if not times:
        raise ParseError(
            f"{profiled.path}: no step time in the profile (no step_trace_time and no step "
            "markers); pass --step-times FILE"
        )
    return _record(
        benchmark,
        project,
        git,
        ci,
        _fingerprint(profiled, host_label),
        _measurements(profiled, times),
        datetime.now(timezone.utc),
        measured=len(times),
        profiled=slowest.steps,
        profile=slowest,
        rank_profiles=profiled.ranks if len(profiled.ranks) > 1 else (),
        findings=tuple(findings),
    )


# --- an ais_bench summary -----------------------------------------------------------------

AIS_BENCH_PACKAGE = "ais_bench"
"""The distribution whose version is recorded (``pip install ais_bench-*.whl``)."""


def ais_bench_measurements(
    summary: AisBenchSummary,
) -> tuple[tuple[Measurement, ...], tuple[str, ...]]:
    """The measurements of an ais_bench summary and notes on how they were taken (pure).

    ``latency_p50_ms`` holds every inference's NPU compute time (``npu_compute_time_list``,
    whose centre is ais_bench's median; the median alone when the file lists no times);
    ``latency_p90_ms`` and ``latency_p99_ms`` are ``NPU_compute_time``'s percentiles where
    written, else the list's; ``throughput_samples_per_s`` is ais_bench's ``throughput``
    (1000 x batch size / mean compute ms: samples, not requests, per second, which is the
    catalogue's "batch size / step time"); ``h2d_latency_ms`` and ``d2h_latency_ms`` are the
    medians of the input and output copies, where written. The compute time's mean, min and
    max have no catalogue metric (a note says so)."""
    c = summary.compute
    times = summary.compute_times_ms
    notes: list[str] = []
    out = [_measurement("latency_p50_ms", times or (c.median_ms,))]
    for q, metric in ((90.0, "latency_p90_ms"), (99.0, "latency_p99_ms")):
        value = c.percentile(q)
        if value is None and times:
            value = float(np.percentile(times, q))
            notes.append(f"{metric}: the P{q:g} of npu_compute_time_list (the summary has none)")
        if value is not None:
            out.append(_measurement(metric, [value]))
    if summary.throughput is not None:
        out.append(_measurement("throughput_samples_per_s", [summary.throughput]))
    for metric, copy in (("h2d_latency_ms", summary.h2d), ("d2h_latency_ms", summary.d2h)):
        if copy is not None:
            out.append(_measurement(metric, [copy.median_ms]))
    notes.append("not recorded, no catalogue metric: NPU_compute_time mean/min/max")
    return tuple(out), tuple(notes)


def _installed_version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _arg(args: Sequence[str], *names: str) -> str:
    """The value of the first of ``names`` on ais_bench's command line (``--x v`` or
    ``--x=v``), or ""."""
    for i, a in enumerate(args):
        for name in names:
            if a == name and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(name + "="):
                return a.partition("=")[2]
    return ""


def _ais_bench_fingerprint(
    summary: AisBenchSummary, host_label: str, version: str, cann: str
) -> Fingerprint:
    """The batch size (ais_bench's formula inverted), whether the times were ``--pipeline``
    intervals, the ais_bench version installed where ingest runs and the CANN version of its
    environment (the summary names neither, nor the NPU model), ``--device``'s count."""
    params: dict[str, ParamValue] = {}
    batch = summary.batch_size
    if batch is not None:
        params["batch_size"] = round(batch) if abs(batch - round(batch)) < 1e-6 else round(batch, 3)
    if version:
        params["ais_bench_version"] = version
    if summary.multi_threads:
        params["pipeline_intervals"] = True
    devices = _arg(summary.args, "--device", "-d")
    return collect_fingerprint(
        device_kind="npu",
        timing_method=INGESTED_TIMING[FORMAT_AIS_BENCH],
        params=params,
        host_label=host_label,
        device_count=len([d for d in devices.split(",") if d.strip()]) if devices else 1,
        cann_version=cann,
    )


def build_ais_bench_record(
    summary: AisBenchSummary,
    *,
    benchmark: str,
    project: str,
    git: GitContext,
    ci: CIContext,
    host_label: str = "",
    ais_bench_version: str = "",
    cann_version: str = "",
) -> tuple[RunRecord, tuple[str, ...]]:
    """The inference run recorded for an ais_bench summary, and the notes on what it did not
    say or what was not recorded (pure)."""
    measurements, notes = ais_bench_measurements(summary)
    fingerprint = _ais_bench_fingerprint(summary, host_label, ais_bench_version, cann_version)
    n = len(summary.compute_times_ms) or summary.compute.count or 1
    stamp = datetime.now(timezone.utc)
    record = _record(
        benchmark, project, git, ci, fingerprint, measurements, stamp, measured=n, kind="inference"
    )
    if not ais_bench_version:
        notes += (
            f"{AIS_BENCH_PACKAGE} is not installed where perfgate ingests: its version is not "
            "recorded",
        )
    return record, (*summary.notes, *notes)


# --- another harness's result file ---------------------------------------------------------


def result_measurement(metric: ResultMetric) -> Measurement:
    """The measurement of one metric of a result file, its samples summarised as they are
    (a harness's rounds or values, not a series of steps with a warm-up to find): a
    catalogue metric with the catalogue's unit and direction, another with the file's."""
    if lookup(metric.name) is not None:
        return measurement(metric.name, metric.repeats, steady=False)
    groups = tuple(tuple(float(x) for x in rep) for rep in metric.repeats)
    direction = metric.direction or Direction.LOWER_IS_BETTER
    return Measurement(metric.name, metric.unit, direction, groups, summarize(groups, steady=False))


def _result_git(git: GitContext, result: ResultFile) -> tuple[GitContext, tuple[str, ...]]:
    """The git context of a result file's runs: the commit it says it measured
    (``commit_info.id``, asv's ``commit_hash``) over the one given or detected, with a note
    when they differ (an asv results file is per commit, whichever is checked out); the
    branch given or detected, else the file's (``commit_info.branch``)."""
    notes: tuple[str, ...] = ()
    commit = git.commit
    if result.commit:
        given, named = git.commit.lower(), result.commit.lower()
        same = bool(given) and (given.startswith(named) or named.startswith(given))
        if git.commit and not same:
            notes = (
                f"recorded at commit {result.commit[:12]}, which the file says it measured, "
                f"not at {git.commit[:12]} (--commit or the checkout)",
            )
        # The same commit both ways: the longer name of it.
        commit = max(git.commit, result.commit, key=len) if same else result.commit
    return replace(git, commit=commit, branch=git.branch or result.branch), notes


def build_result_records(
    result: ResultFile,
    *,
    benchmark: str,
    project: str,
    git: GitContext,
    ci: CIContext,
    host_label: str = "",
) -> tuple[tuple[RunRecord, ...], tuple[str, ...]]:
    """One run per benchmark of a result file, and the notes on what the file did not say
    (pure apart from the host fields the file does not name: those are this host's).

    A run is named as the file names it (pytest-benchmark's name, or its ``fullname`` where
    the name is repeated: names survive tests added or removed), under the prefix
    ``benchmark`` when one is given (``asv/benchmarks.Suite.time_x(10, 'a')``); a metrics
    file's one run, which the file does not name, is ``benchmark``. The fingerprint's CPU, OS
    and Python are the file's where it names them; its params, the file's (the Python
    implementation, pytest-benchmark's ``timer`` and ``disable_gc``, asv's environment and
    machine name, a metrics file's ``params``)."""
    git, notes = _result_git(git, result)
    stamp = datetime.now(timezone.utc)
    h = result.host  # what the file says of its host; the rest is read here
    records = []
    for bench in result.benchmarks:
        name = f"{benchmark}/{bench.name}" if benchmark and bench.name else bench.name or benchmark
        fp = collect_fingerprint(
            device_kind=h.device_kind,
            timing_method=INGESTED_TIMING[result.format],
            params={**result.params, **bench.params},
            host_label=host_label,
            device_count=1 if h.device_kind else 0,
            cpu_model=h.cpu_model or None,
            cpu_cores=h.cpu_cores or None,
            os_name=h.os or None,
            os_release=h.os_release or None,
            python_version=h.python_version or None,
        )
        measurements = tuple(result_measurement(m) for m in bench.metrics)
        first = measurements[0].repeats
        n = max(len(rep) for rep in first)
        records.append(
            _record(name, project, git, ci, fp, measurements, stamp, measured=n, repeats=len(first))
        )
    return tuple(records), (*result.notes, *notes)


# --- reading and recording -----------------------------------------------------------------


LONG_INGEST_BYTES = 8 * 1024 * 1024
"""A profile at least this large (all its files) is read with progress lines: a 38 MB trace
takes long enough that a silent CI log looks hung."""


def _input_bytes(path: Path) -> int:
    """The size of ``path``: the file's, or a directory's files' together."""
    try:
        if path.is_file():
            return path.stat().st_size
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    except OSError:
        return 0


def read_ingest(
    config: Config,
    path: Path,
    *,
    benchmark: str,
    git: GitContext,
    ci: CIContext,
    step_times_file: Path | None = None,
    advisor: bool = True,
    advisor_timeout_s: float = 300.0,
    progress: Callable[[str], None] | None = None,
) -> IngestResult:
    """Read the profile (or result file) at ``path``, run the Ascend advisor on a profile
    (a failing one is reported, not fatal) and build its run (a result file's runs), without
    touching the store, so that a file that cannot be read never opens (or creates) one: its
    result before it is recorded (no findings, no reference).
    ``progress`` gets a line before and after reading a large profile
    (:data:`LONG_INGEST_BYTES`) and before the advisor runs."""
    path = Path(path)
    fmt = detect_format(path)
    if not benchmark and fmt not in RESULT_FORMATS:
        raise UsageError("--benchmark NAME is required: which benchmark does this profile time?")
    if step_times_file is not None and (fmt in RESULT_FORMATS or fmt == FORMAT_AIS_BENCH):
        own = (
            "an ais_bench summary has its own latencies"
            if fmt == FORMAT_AIS_BENCH
            else "a result file has its own samples"
        )
        raise UsageError(f"{path}: --step-times applies to a profile; {own}")
    where: dict[str, Any] = dict(benchmark=benchmark, project=config.project, git=git, ci=ci)
    where["host_label"] = config.host_label
    if fmt in RESULT_FORMATS:
        result = parse_results(path, fmt)
        if not benchmark and any(not b.name for b in result.benchmarks):
            raise UsageError(
                f"{path}: a metrics file does not name its benchmark: pass --benchmark NAME"
            )
        records, notes = build_result_records(result, **where)
        if not records[0].git.branch:
            raise UsageError(_NO_BRANCH)
        first, *rest = (IngestResult(r, None, format=fmt, path=path) for r in records)
        return replace(first, notes=notes, others=tuple(rest))
    if not git.branch:
        raise UsageError(_NO_BRANCH)
    if fmt == FORMAT_AIS_BENCH:
        from perfgate.runner.npu import cann_version

        ais, cann = _installed_version(AIS_BENCH_PACKAGE), cann_version(os.environ)
        record, notes = build_ais_bench_record(
            parse_ais_bench(path), **where, ais_bench_version=ais, cann_version=cann
        )
        return IngestResult(record, None, format=FORMAT_AIS_BENCH, path=path, notes=notes)
    step_times = read_step_times(step_times_file) if step_times_file is not None else None
    size = _input_bytes(path) if progress is not None else 0
    if progress is not None and size >= LONG_INGEST_BYTES:
        progress(f"reading {path} ({size / 1e6:.1f} MB)")
    profiled = read_job(path, config.advisor)
    ranks = profiled.ranks
    if progress is not None and size >= LONG_INGEST_BYTES:
        steps = max((r.steps for r in ranks), default=0)
        progress(f"read {path}: {profiled.format}, {len(ranks)} rank(s), {steps} step(s)")
    from perfgate.advisor import msprof

    outcome = msprof.AdvisorOutcome()  # none: the advisor runs on an Ascend profile only
    if profiled.format == FORMAT_ASCEND and advisor:
        one = len(ranks) == 1 and ranks[0].rank is not None
        location = f"rank {ranks[0].rank}" if one else f"{len(ranks)} ranks" if ranks[1:] else ""
        if progress is not None:
            progress(f"running msprof-analyze's advisor (up to {advisor_timeout_s:.0f} s)")
        outcome = msprof.run(path, location=location, timeout_s=advisor_timeout_s)
    findings = outcome.findings
    record = build_ingest_record(profiled, **where, step_times=step_times, findings=findings)
    return IngestResult(
        record,
        profiled,
        outcome.problem,
        outcome.version,
        format=profiled.format,
        path=profiled.path,
        step_times_path=step_times_file,
    )


def record_ingest(
    config: Config,
    store: SqlStore,
    read: IngestResult,
    *,
    reference: Mapping[str, Mapping[str, float]] | None = None,
    reference_path: Path | None = None,
) -> IngestResult:
    """Store what :func:`read_ingest` built, with its findings against the base run, beside
    the official figures of ``reference`` (:func:`perfgate.app.reference.read_reference`)."""
    saved = store.save_runs([r.record for r in read.runs])

    def recorded(one: IngestResult, notes: tuple[str, ...]) -> IngestResult:
        record = one.record
        return replace(
            one,
            findings=findings_for(config, record, base_run(config, store, record)),
            notes=notes,
            reference=compare_to_reference(record, reference) if reference is not None else (),
            reference_path=reference_path,
        )

    first = recorded(read, (*read.notes, *saved))  # saved: a clock far from the store's
    return replace(first, others=tuple(recorded(r, ()) for r in read.others))


def ingest_and_record(
    config: Config,
    store: SqlStore,
    path: Path,
    *,
    benchmark: str,
    git: GitContext,
    ci: CIContext,
    step_times_file: Path | None = None,
    advisor: bool = True,
    advisor_timeout_s: float = 300.0,
    reference_file: Path | None = None,
) -> IngestResult:
    """:func:`read_ingest` then :func:`record_ingest`: everything is read and checked before
    the one write; with ``reference_file``, the run is set beside the official figures."""
    reference = read_reference(reference_file) if reference_file is not None else None
    read = read_ingest(
        config,
        path,
        benchmark=benchmark,
        git=git,
        ci=ci,
        step_times_file=step_times_file,
        advisor=advisor,
        advisor_timeout_s=advisor_timeout_s,
    )
    return record_ingest(config, store, read, reference=reference, reference_path=reference_file)
