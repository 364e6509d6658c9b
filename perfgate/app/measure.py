"""The measurements of a run, from what the runner measured (pure; no torch, no store).

Each metric's unit, direction, kind of samples, steady-state handling and meaning come from
the catalogue (:mod:`perfgate.metrics`); this module only produces the samples, for three
shapes of benchmark:

- **training, one process** (:func:`training_measurements`): :data:`TRAINING_METRICS`
  (throughput: batch / step time, per step; peak memory: per repeat), and beside the wall
  time ``step_cpu_ms`` (CPU) or ``step_device_ms`` (CUDA, NPU); :func:`extended` adds one
  more repeat's samples (``run --confirm``); :func:`contention_note` says when the wall time
  was the neighbours'.
- **training, multi-device** (a torchrun job per repeat, :func:`job_measurements`): the
  job's ``step_time_ms`` (per step, the slowest rank's), ``throughput_samples_per_s`` (global
  batch: per-rank batch x ranks), ``peak_memory_bytes`` (the largest rank's) and
  ``rank_spread_pct`` (per repeat, judged in points); each rank's ``step_time_ms.rank<r>``
  and ``own_step_ms.rank<r>`` (when the step reports its time blocked in collectives, as
  the DDP workloads do); and from the first repeat's profiled window, one value per run,
  ``allreduce_ms`` (mean over ranks), ``communication_not_overlapped_ms`` (the most of any
  rank), ``communication_ms.rank<r>`` and ``communication_not_overlapped_pct.rank<r>``.
- **inference** (:func:`inference_measurements`): ``latency_p50_ms`` holds every request's
  latency (its centre, the median of the repeats' medians, is the P50); ``latency_p90_ms``
  and ``latency_p99_ms`` hold one percentile per repeat (a P99 is a property of a repeat's
  requests, not of one request: judged by the history procedure with a larger minimum effect);
  ``throughput_requests_per_s`` is requests / summed latency per repeat.

Every shape adds, when every repeat has it, ``peak_memory_pct_of_capacity`` (the peak over
the device's total memory; on the CPU, an RSS over the host's RAM or the container's limit;
for a job the largest rank's) and ``loss`` (the last measured step's, fixed seed: the
numerics guard; for a job rank 0's; an inference request has none). Any of them with a
profile adds ``op_calls_per_step`` and the profile's utilisation (:func:`profile_measurements`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from perfgate.advisor.cluster import spread_pct
from perfgate.metrics import CATALOGUE, Samples, at_step, entry
from perfgate.models import Measurement, ProfileSummary, RunRecord
from perfgate.runner import BenchmarkOutcome, RepeatResult
from perfgate.stats import summarize

TRAINING_METRICS = ("step_time_ms", "throughput_samples_per_s", "peak_memory_bytes")
"""What a single-process training run records, in this order."""

ROBUST_TIME_METRICS = ("step_cpu_ms", "step_device_ms")
"""Beside the wall time, what a single-process training run records where it was taken:
the CPU time of each step on the CPU, the device time of each step on an accelerator."""


def measurement(
    metric: str, repeats: Sequence[Sequence[float]], *, steady: bool | None = None
) -> Measurement:
    """A catalogue metric's Measurement from its samples grouped by repeat (KeyError for
    another metric): unit, direction, determinism and warm-up handling from the catalogue;
    ``steady=False`` summarises a per-step series as it is (an ingested profile's steps)."""
    spec = entry(metric)
    groups = tuple(tuple(float(x) for x in rep) for rep in repeats)
    summary = summarize(groups, steady=spec.steady if steady is None else steady)
    return Measurement(
        metric, spec.unit, spec.direction, groups, summary, deterministic=spec.deterministic
    )


def per_repeat_extras(rep: RepeatResult) -> dict[str, tuple[float, ...]]:
    """What a repeat adds where it knows it (each one value): ``peak_memory_pct_of_capacity``
    (its peak / its device's capacity) and ``loss`` (its last measured step's)."""
    values = {"peak_memory_pct_of_capacity": rep.peak_memory_pct, "loss": rep.loss}
    return {metric: (value,) for metric, value in values.items() if value is not None}


def training_samples(rep: RepeatResult) -> Mapping[str, tuple[float, ...]]:
    """One single-process training repeat's samples of each of :data:`TRAINING_METRICS`,
    of :data:`ROBUST_TIME_METRICS` and of :data:`EXTRA_METRICS` where the repeat took them."""
    samples = {
        "step_time_ms": tuple(rep.step_ms),
        "throughput_samples_per_s": tuple(rep.batch_size * 1000.0 / t for t in rep.step_ms),
        "peak_memory_bytes": (float(rep.peak_memory_bytes),),
    }
    if rep.cpu_ms:
        samples["step_cpu_ms"] = tuple(rep.cpu_ms)
    if rep.device_ms:
        samples["step_device_ms"] = tuple(rep.device_ms)
    return samples | per_repeat_extras(rep)


EXTRA_METRICS = ("peak_memory_pct_of_capacity", "loss")
"""Recorded after the others when every repeat has them (:func:`per_repeat_extras`)."""


def _extras(outcome: BenchmarkOutcome) -> list[Measurement]:
    """:data:`EXTRA_METRICS` that every repeat of ``outcome`` has, one value per repeat. The
    loss must be there in every repeat to be recorded: a run where some repeats returned
    none would compare its few against a baseline's all. It is named for the step it was
    taken after (:func:`perfgate.metrics.at_step`: warm-up + measured steps)."""
    extras = [per_repeat_extras(rep) for rep in outcome.repeats]
    steps = outcome.spec.warmup + outcome.spec.measured
    return [
        measurement(
            at_step(metric, steps) if metric == "loss" else metric, [e[metric] for e in extras]
        )
        for metric in EXTRA_METRICS
        if extras and all(metric in e for e in extras)
    ]


def training_measurements(outcome: BenchmarkOutcome) -> list[Measurement]:
    """A single-process training run's measurements (see the module): :data:`TRAINING_METRICS`,
    then each of :data:`ROBUST_TIME_METRICS` that every repeat took, then
    :data:`EXTRA_METRICS` likewise."""
    samples = [training_samples(rep) for rep in outcome.repeats]
    names = [*TRAINING_METRICS, *(m for m in ROBUST_TIME_METRICS if all(m in s for s in samples))]
    out = [measurement(metric, [s[metric] for s in samples]) for metric in names]
    return out + _extras(outcome)


CONTENTION_RATIO = 1.5
"""Wall time above this many times the CPU time, on a one-thread CPU step, says the step
waited for the CPU: quiet, a one-thread step's wall and CPU times agree within a few percent
(its only waits are page faults and the clock reads), so half as much again is the
scheduler running someone else."""


def contention_note(record: RunRecord, *, deciding_wall: bool) -> str | None:
    """The note a gate result carries when ``record`` was measured on a contended machine:
    a one-thread CPU run whose median step wall time is above :data:`CONTENTION_RATIO` times
    its median step CPU time, saying which of the two decided (``deciding_wall``: the wall
    time, its baseline having no CPU times); None otherwise (a multi-threaded step's process
    CPU time sums its threads and is no bound on its wall time)."""
    wall = record.measurement("step_time_ms")
    cpu = record.measurement("step_cpu_ms")
    if wall is None or cpu is None or record.fingerprint.params.get("threads") != 1:
        return None
    if cpu.summary.median <= 0 or wall.summary.median <= CONTENTION_RATIO * cpu.summary.median:
        return None
    decided = (
        "the wall time decided (its baseline has no CPU times), so this verdict measured the "
        "neighbours too: record main's runs with this version, or measure with run --ab"
        if deciding_wall
        else "step_cpu_ms decided (the scheduler's waits are not in it); step_time_ms and "
        "throughput are shown, not deciding"
    )
    return (
        f"the machine was contended during this run: wall time {wall.summary.median:.1f} ms "
        f"against {cpu.summary.median:.1f} ms of CPU time; {decided}"
    )


def extended(measurements: Sequence[Measurement], rep: RepeatResult) -> tuple[Measurement, ...]:
    """``measurements`` of a single-process training run with one more repeat's samples added
    to each metric a repeat extends (not a profile's one value per run, nor a deterministic
    count)."""
    added = training_samples(rep)
    out = []
    for m in measurements:
        spec = entry(m.metric) if m.metric in added else None
        if spec is not None and spec.samples is not Samples.PER_RUN and not m.deterministic:
            m = measurement(m.metric, (*m.repeats, added[m.metric]))
        out.append(m)
    return tuple(out)


def profile_measurements(profile: ProfileSummary | None) -> list[Measurement]:
    """What a run's profile adds to any benchmark: its operator calls per step and its
    utilisation (:func:`utilisation_measurements`)."""
    if profile is None:
        return []
    out = []
    if profile.op_calls_per_step is not None:
        out.append(measurement("op_calls_per_step", [[profile.op_calls_per_step]]))
    return out + utilisation_measurements(profile)


def utilisation_measurements(profile: ProfileSummary) -> list[Measurement]:
    """The profile's utilisation (``profile.utilisation``: catalogue metric -> value over
    the profiled steps) as one value per run each, in catalogue order: only finite values of
    the catalogue's :attr:`Samples.PER_RUN` metrics, so a run never holds one metric twice."""
    values = profile.utilisation
    return [
        measurement(name, [[float(values[name])]])
        for name, spec in CATALOGUE.items()
        if spec.samples is Samples.PER_RUN and name in values and math.isfinite(float(values[name]))
    ]


def capacity_measurements(profile: ProfileSummary) -> list[Measurement]:
    """``peak_memory_pct_of_capacity`` of an ingested profile: its allocator peak over the
    device capacity it reports (``device_memory_capacity_bytes``), when it has both. (A run
    takes it from its worker instead, each repeat against its device's capacity.)"""
    peak, capacity = profile.peak_memory_bytes, profile.device_memory_capacity_bytes
    if peak is None or not capacity or capacity <= 0:
        return []
    return [measurement("peak_memory_pct_of_capacity", [[peak * 100.0 / capacity]])]


def _communication(profile: ProfileSummary) -> tuple[float, float] | None:
    """(communication per step, its non-overlapped part) in ms, when the profile has them."""
    b = profile.breakdown
    if b is None or b.communication_not_overlapped_ms is None:
        return None
    hidden = b.communication_overlapped_ms or 0.0
    return b.communication_not_overlapped_ms + hidden, b.communication_not_overlapped_ms


def job_measurements(
    outcome: BenchmarkOutcome,
) -> tuple[list[Measurement], ProfileSummary | None, tuple[ProfileSummary, ...]]:
    """A multi-device run's measurements, the slowest rank's profile (the largest median
    own work per step, profiler off) and every rank's. An inference job's are latencies, as
    one process's are (:func:`inference_measurements`): a job step, the slowest rank's, is
    one request served by all of them."""
    reps = outcome.repeats
    world = reps[0].world_size
    spread = measurement(
        "rank_spread_pct",
        [[spread_pct([float(np.median(k.own_ms)) for k in r.ranks])] for r in reps],
    )
    if outcome.spec.kind == "inference":
        out = [*inference_measurements(outcome), spread]
    else:
        out = [
            measurement("step_time_ms", [r.step_ms for r in reps]),
            measurement(
                "throughput_samples_per_s",
                [[r.batch_size * world * 1000.0 / t for t in r.step_ms] for r in reps],
            ),
            measurement("peak_memory_bytes", [[float(r.peak_memory_bytes)] for r in reps]),
            spread,
            *_extras(outcome),
        ]
    ranks = sorted({k.rank for r in reps for k in r.ranks})
    for rank in ranks:
        steps = [k.step_ms for r in reps for k in r.ranks if k.rank == rank]
        out.append(measurement(f"step_time_ms.rank{rank}", steps))
        own = [k.own_ms for r in reps for k in r.ranks if k.rank == rank and k.wait_ms]
        if own:
            out.append(measurement(f"own_step_ms.rank{rank}", own))
    profiles = tuple(k.profile for k in reps[0].ranks if k.profile is not None)
    comm = {p.rank: c for p in profiles if (c := _communication(p)) is not None}
    if comm and len(comm) == len(profiles):
        out += [
            measurement("allreduce_ms", [[float(np.mean([c[0] for c in comm.values()]))]]),
            measurement("communication_not_overlapped_ms", [[max(c[1] for c in comm.values())]]),
        ]
        for p in profiles:
            total, exposed = comm[p.rank]
            step = p.breakdown.step_ms if p.breakdown is not None else 0.0
            pct = exposed / step * 100.0 if step > 0 else 0.0
            out += [
                measurement(f"communication_ms.rank{p.rank}", [[total]]),
                measurement(f"communication_not_overlapped_pct.rank{p.rank}", [[pct]]),
            ]
    medians = {
        k.rank: float(
            np.median([x for r in reps for j in r.ranks if j.rank == k.rank for x in j.own_ms])
        )
        for k in reps[0].ranks
    }
    slowest = max(medians, key=lambda r: medians[r]) if medians else None
    profile = next((p for p in profiles if p.rank == slowest), profiles[0] if profiles else None)
    return out, profile, profiles


def inference_measurements(outcome: BenchmarkOutcome) -> list[Measurement]:
    """An inference run's latency percentiles, throughput and memory (see the module)."""
    reps = outcome.repeats
    latencies = [r.step_ms for r in reps]
    return [
        measurement("latency_p50_ms", latencies),
        measurement("latency_p90_ms", [[float(np.percentile(x, 90))] for x in latencies]),
        measurement("latency_p99_ms", [[float(np.percentile(x, 99))] for x in latencies]),
        measurement("throughput_requests_per_s", [[len(x) * 1000.0 / sum(x)] for x in latencies]),
        measurement("peak_memory_bytes", [[float(r.peak_memory_bytes)] for r in reps]),
        *_extras(outcome),
    ]
