"""Use case: ``perfgate compare --across A B`` — the same benchmarks on two environments
(a GPU and an NPU, two device models, two driver stacks) side by side.

A report, never a gate: the two sides are different machines, so no statistical verdict is
drawn and the command exits 0. For each benchmark with a run on both sides (the latest run
of each side, on ``branch`` when given): the ratio B / A of every metric both runs have
(step time, throughput, latency percentiles, memory, ...) and which side is better, and
the top ops by time on each side with their time on the other (ops are matched by name;
a CUDA kernel and an Ascend operator of the same layer usually have different names, so
the lists are shown side by side, not subtracted).

A side is selected by a fingerprint key or a unique prefix of one (``perfgate history``
and ``--json`` outputs show keys), or by ``device:KIND`` (``device:cpu``, ``device:cuda``,
``device:npu``) or ``model:TEXT`` (a substring of the device model). Nothing here prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perfgate.config import Config
from perfgate.errors import UsageError
from perfgate.models import (
    AcrossBenchmark,
    AcrossReport,
    Fingerprint,
    MetricRatio,
    OpRow,
    RunRecord,
)
from perfgate.store import SqlStore

TOP_OPS = 10


def matches(selector: str, key: str, fp: Fingerprint) -> bool:
    """Whether a fingerprint is selected by ``selector`` (see the module docstring)."""
    kind, sep, value = selector.partition(":")
    if sep and kind == "device":
        return fp.device_kind == value
    if sep and kind == "model":
        return value.lower() in fp.device_model.lower()
    return key.startswith(selector)


def _latest(
    config: Config, store: SqlStore, benchmark: str, selector: str, branch: str | None
) -> RunRecord | None:
    where: dict[str, Any] = dict(project=config.project, benchmark=benchmark, branch=branch)
    newest = None
    for key, fp in store.fingerprints(**where).items():
        if not matches(selector, key, fp):
            continue
        points = store.history(**where, fingerprint_key=key, limit=1)
        if points and (newest is None or points[-1].started_at > newest.started_at):
            newest = points[-1]
    return None if newest is None else store.get_run(newest.run_id)


def _ops(a: RunRecord, b: RunRecord) -> tuple[tuple[OpRow, ...], tuple[OpRow, ...]]:
    if a.profile is None or b.profile is None:
        return (), ()
    times_a = {o.name: o.self_time_ms_per_step for o in a.profile.ops}
    times_b = {o.name: o.self_time_ms_per_step for o in b.profile.ops}
    top = a.profile.top_ops(TOP_OPS), b.profile.top_ops(TOP_OPS)
    return (
        tuple(OpRow(o.name, o.self_time_ms_per_step, times_b.get(o.name)) for o in top[0]),
        tuple(OpRow(o.name, times_a.get(o.name), o.self_time_ms_per_step) for o in top[1]),
    )


def compare_across(
    config: Config,
    store: SqlStore,
    a: str,
    b: str,
    *,
    branch: str | None = None,
    benchmarks: Sequence[str] = (),
) -> AcrossReport:
    """Side A against side B, benchmark by benchmark (see the module docstring).

    Raises:
        UsageError: a selector matches no run at all, or both select the same environment.
    """
    names = list(benchmarks) or store.benchmarks(project=config.project, branch=branch)
    rows: list[AcrossBenchmark] = []
    only_a: list[str] = []
    only_b: list[str] = []
    fp_a: Fingerprint | None = None
    fp_b: Fingerprint | None = None
    for name in names:
        run_a = _latest(config, store, name, a, branch)
        run_b = _latest(config, store, name, b, branch)
        fp_a = fp_a or (run_a.fingerprint if run_a is not None else None)
        fp_b = fp_b or (run_b.fingerprint if run_b is not None else None)
        if run_a is None or run_b is None:
            if run_a is not None or run_b is not None:
                (only_a if run_a is not None else only_b).append(name)
            continue
        if run_a.id == run_b.id:
            raise UsageError(f"{a!r} and {b!r} select the same run of {name} ({run_a.id[:12]})")
        metrics = tuple(
            MetricRatio(m.metric, m.unit, m.direction, m.summary.centre, other.summary.centre)
            for m in run_a.measurements
            if (other := run_b.measurement(m.metric)) is not None
        )
        rows.append(AcrossBenchmark(name, run_a.id, run_b.id, metrics, *_ops(run_a, run_b)))
    if fp_a is None:
        raise UsageError(f"--across: {a!r} selects no stored run in project {config.project!r}")
    if fp_b is None:
        raise UsageError(f"--across: {b!r} selects no stored run in project {config.project!r}")
    return AcrossReport(
        a=a,
        b=b,
        fingerprint_a=fp_a,
        fingerprint_b=fp_b,
        benchmarks=tuple(rows),
        only_a=tuple(only_a),
        only_b=tuple(only_b),
        differences=tuple(fp_b.differences(fp_a)),
    )
