"""The metric catalogue: every metric perfgate records, with its unit, which way is better,
the smallest change that matters, and how its samples are taken.

One entry per metric, described in words in :data:`_ABOUT`. A measurement builder takes a
metric's unit, direction and kind of samples from here (it never writes them itself), and
:meth:`perfgate.config.Config.policy` starts from the entry's policy and applies the suite's
``[metrics.NAME]`` table over it. Adding a metric is one entry and its description here plus
the code that produces its samples.

Per-rank metrics of a multi-device job are named ``<metric>.rank<r>`` (``step_time_ms.rank1``)
and take the entry of ``<metric>``. A metric not in the catalogue (one read from a baseline
file written by another version, say) is judged by :data:`FALLBACK_POLICY`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import Enum
from types import MappingProxyType
from typing import Any

from perfgate.models import Direction, MetricPolicy

LOWER = Direction.LOWER_IS_BETTER
HIGHER = Direction.HIGHER_IS_BETTER

RANK_SUFFIX = ".rank"
"""Per-rank metrics are ``<metric>.rank<r>`` (``step_time_ms.rank1``)."""

STEP_SUFFIX = ".step"
"""The loss is recorded at the step it was taken after, ``loss.step<n>`` (warm-up + measured
steps: ``loss.step25``), and takes the entry of ``loss``: a run that trained for another
number of steps has another loss, so the two never meet in one comparison (its loss has no
baseline, rather than a false numerics regression)."""

FALLBACK_POLICY = MetricPolicy(LOWER, 3.0)
"""The policy of a metric the catalogue does not know."""

UTILISATION_POINTS = 15.0
"""The minimum effect of a utilisation percentage, in points (asc-tools' CI rule: NPU
utilisation -15 points); a suite's ``[metrics.NAME] min_effect_abs`` changes it."""


class Samples(str, Enum):
    """What one sample of a metric is, and so what one more repeat adds to it."""

    PER_STEP = "per_step"
    """One sample per timed step (or request): a repeat adds its whole series."""
    PER_REPEAT = "per_repeat"
    """One value per repeat (a peak, a percentile of the repeat's requests): a repeat adds one."""
    PER_RUN = "per_run"
    """One value per run, from a profile (the first repeat's profiled window, or an ingested
    profile): more repeats do not add to it."""


@dataclass(frozen=True, kw_only=True)
class MetricSpec(MetricPolicy):
    """One metric of the catalogue: its :class:`~perfgate.models.MetricPolicy` (how a
    comparison judges it before the suite's ``[metrics.NAME]``), and what it is."""

    name: str
    unit: str
    description: str
    samples: Samples = Samples.PER_REPEAT
    steady: bool = False
    """A series of steps whose warm-up transient is found and left out of its summary."""

    @property
    def policy(self) -> MetricPolicy:
        """Its policy alone, a plain :class:`~perfgate.models.MetricPolicy`."""
        return MetricPolicy(**{f.name: getattr(self, f.name) for f in fields(MetricPolicy)})


_STEP, _RUN = Samples.PER_STEP, Samples.PER_RUN


def _spec(
    name: str,
    unit: str,
    direction: Direction,
    min_effect_pct: float,
    samples: Samples = Samples.PER_REPEAT,
    **flags: Any,
) -> MetricSpec:
    """The catalogue's entry of ``name``, described by :data:`_ABOUT`."""
    about = _ABOUT[name]
    return MetricSpec(
        direction, min_effect_pct, name=name, unit=unit, description=about, samples=samples, **flags
    )


def _utilisation(name: str) -> MetricSpec:
    """A utilisation percentage from a profile: higher is better, judged in points
    (:data:`UTILISATION_POINTS`), never in % of its baseline."""
    return _spec(name, "%", HIGHER, 0.0, _RUN, min_effect_abs=UTILISATION_POINTS)


_ABOUT = {
    "step_time_ms": "wall time of one training step, device synchronised; for a multi-device job "
    "the slowest rank's, step by step; for an ingested profile its profiled steps",
    "step_cpu_ms": "CPU time of one training step on the CPU, beside its wall time: the step "
    "thread's CPU time with one intra-op thread, the whole process's (every thread, summed) with "
    "more; the scheduler's waits for busy neighbours stretch the wall time, not this",
    "step_device_ms": "device time of one training step on an accelerator (CUDA, NPU), between "
    "two timing events recorded around it on the stream; host noise does not reach it",
    "throughput_samples_per_s": "samples per second of each step: batch size (x ranks) / step time",
    "peak_memory_bytes": "the allocator's peak (RSS on CPU); for a multi-device job the largest "
    "rank's",
    "own_step_ms": "per rank (own_step_ms.rank<r>): the rank's timed step less its time blocked "
    "in collectives, when the step reports it",
    "rank_spread_pct": "per repeat, (slowest - fastest rank's median own work) / fastest: a "
    "straggler; its baseline is near 0, so its minimum effect is in points",
    "op_calls_per_step": "operator calls per profiled step; shown, not deciding, unless the suite "
    "names it in [metrics.op_calls_per_step]: the operators that changed are named beside the "
    "time verdict",
    "computing_ms": "compute per step of the profile's step breakdown",
    "communication_not_overlapped_ms": "communication per step not hidden under compute (a job: "
    "the most of any rank)",
    "free_ms": "time per step the device did neither compute nor communication",
    "communication_ms": "per rank (communication_ms.rank<r>): its communication per step, hidden "
    "or not",
    "communication_not_overlapped_pct": "per rank (communication_not_overlapped_pct.rank<r>): its "
    "non-overlapped communication as a share of its step",
    "allreduce_ms": "collective communication per step, mean over ranks (in a DDP step, the "
    "gradient all-reduce)",
    "device_busy_pct": "share of the profiled step the device was running something (compute or "
    "communication), per step",
    "aicore_util_pct": "Ascend: AI Core busy share of the step, time-weighted over its kernels' "
    "aicore_time / duration",
    "cube_util_pct": "Ascend: Cube (matrix) unit utilisation, time-weighted over the kernels that "
    "report it (aic_mac_ratio, cube_utilization(%))",
    "vector_util_pct": "Ascend: Vector unit utilisation, time-weighted over the kernels that "
    "report it (aiv_vec_ratio)",
    "l2_hit_pct": "Ascend: L2 cache hit rate, weighted by the tasks' durations (l2_cache.csv)",
    "hbm_bandwidth_gb_s": "mean HBM read + write bandwidth over the profiled window, where "
    "collected",
    "sm_occupancy_pct": "CUDA: the kernels' est. achieved occupancy, weighted by their durations",
    "peak_memory_pct_of_capacity": "peak memory as a share of the device's capacity, where the "
    "capacity is known",
    "loss": "the training loss at the end of the measured window with a fixed seed: it must stay "
    "equal within its tolerance (a relative %), whatever the speed did",
    "latency_p50_ms": "every request's latency; its centre, the median of the repeats' medians, "
    "is the P50",
    "latency_p90_ms": "the 90th percentile of each repeat's request latencies",
    "latency_p99_ms": "the 99th percentile of each repeat's request latencies",
    "h2d_latency_ms": "host-to-device copy of one inference's inputs, median (ais_bench "
    "H2D_latency)",
    "d2h_latency_ms": "device-to-host copy of one inference's outputs, median (ais_bench "
    "D2H_latency)",
    "throughput_requests_per_s": "requests per second of each repeat: requests / summed latency",
}
"""What each metric is, in words (the Prometheus HELP text, the HTML report's tooltips)."""

_ENTRIES = (
    # Training, measured by the runner (profiler off).
    _spec("step_time_ms", "ms", LOWER, 3.0, _STEP, steady=True),
    _spec("step_cpu_ms", "ms", LOWER, 3.0, _STEP, steady=True),
    _spec("step_device_ms", "ms", LOWER, 3.0, _STEP, steady=True),
    _spec("throughput_samples_per_s", "1/s", HIGHER, 3.0, _STEP, steady=True),
    _spec("peak_memory_bytes", "bytes", LOWER, 5.0),
    _spec("own_step_ms", "ms", LOWER, 3.0, _STEP, steady=True),
    _spec("rank_spread_pct", "%", LOWER, 0.0, min_effect_abs=5.0),
    # From a profile: the first repeat's profiled window, or an ingested profile.
    _spec("op_calls_per_step", "count", LOWER, 0.5, _RUN, deterministic=True, decides=False),
    _spec("computing_ms", "ms", LOWER, 3.0, _RUN),
    _spec("communication_not_overlapped_ms", "ms", LOWER, 5.0, _RUN),
    _spec("free_ms", "ms", LOWER, 10.0, _RUN),
    _spec("communication_ms", "ms", LOWER, 5.0, _RUN),
    _spec("communication_not_overlapped_pct", "%", LOWER, 5.0, _RUN, min_effect_abs=5.0),
    _spec("allreduce_ms", "ms", LOWER, 5.0, _RUN),
    # Utilisation, from a profile (2.4): percentages judged in points, so that a drop from
    # 80% to 64% (16 points) is a change and one to 70% (10 points) is not.
    _utilisation("device_busy_pct"),
    _utilisation("aicore_util_pct"),
    _utilisation("cube_util_pct"),
    _utilisation("vector_util_pct"),
    _utilisation("l2_hit_pct"),
    _spec("hbm_bandwidth_gb_s", "GB/s", HIGHER, 15.0, _RUN),
    _utilisation("sm_occupancy_pct"),
    _spec("peak_memory_pct_of_capacity", "%", LOWER, 0.0, min_effect_abs=5.0),
    # Numerics guard (DESIGN.md §5): the loss at the end of the measured window, fixed seed.
    _spec("loss", "", LOWER, 0.1, deterministic=True, numerics=True),
    # Inference. A P90/P99 is one value per repeat, resting on a repeat's few slowest
    # requests: it moves more from run to run than a median, hence the larger minimum effect.
    _spec("latency_p50_ms", "ms", LOWER, 3.0, _STEP),
    _spec("latency_p90_ms", "ms", LOWER, 5.0),
    _spec("latency_p99_ms", "ms", LOWER, 10.0),
    _spec("h2d_latency_ms", "ms", LOWER, 10.0),
    _spec("d2h_latency_ms", "ms", LOWER, 10.0),
    _spec("throughput_requests_per_s", "1/s", HIGHER, 3.0),
)

CATALOGUE: Mapping[str, MetricSpec] = MappingProxyType({m.name: m for m in _ENTRIES})
"""Every metric perfgate records, by name."""


def base_name(metric: str) -> str:
    """``<metric>`` of a per-rank ``<metric>.rank<r>`` or of a loss at its step
    ``<metric>.step<n>``; any other name unchanged."""
    for suffix in (RANK_SUFFIX, STEP_SUFFIX):
        base, sep, number = metric.rpartition(suffix)
        if sep and base and number.isdigit():
            return base
    return metric


def at_step(metric: str, step: int) -> str:
    """The name of ``metric`` (the loss) taken after step ``step``: ``loss.step25``."""
    return f"{metric}{STEP_SUFFIX}{step}"


def lookup(metric: str) -> MetricSpec | None:
    """The catalogue entry of ``metric`` (a per-rank name takes its base's), or None."""
    return CATALOGUE.get(metric) or CATALOGUE.get(base_name(metric))


def entry(metric: str) -> MetricSpec:
    """The catalogue entry of a metric perfgate records.

    Raises:
        KeyError: the catalogue has no such metric (a builder asked for one not listed).
    """
    found = lookup(metric)
    if found is None:
        raise KeyError(f"{metric!r} is not in the metric catalogue (perfgate/metrics.py)")
    return found


PRIMARY_TIME: Mapping[str, str] = MappingProxyType(
    {"cpu": "step_cpu_ms", "cuda": "step_device_ms", "npu": "step_device_ms"}
)
"""The time metric that decides a training run's gate, per device kind: the one without the
scheduler's waits. Beside one busy process per core on a shared 2-core VM a one-thread step's
wall time was 2-2.4x its thread CPU time (bench/demo.py); cache and host sharing still reach
the CPU time (there 1.0-2.2x its quiet value), so it is less noisy, not noise-free. On an
accelerator, the time between two events on the device's stream (host-bound gaps included)."""

WALL_TIMES = ("step_time_ms", "throughput_samples_per_s")
"""The wall-clock metrics of a training run: they decide where the device's primary time
metric is not usable, and are shown beside it (never deciding) where it is."""

ECHOES: Mapping[str, str] = MappingProxyType(
    {
        "peak_memory_pct_of_capacity": "peak_memory_bytes",
        "throughput_samples_per_s": "step_time_ms",
    }
)
"""A metric that restates another one's effect, and the one it restates: the peak memory as a
share of the device's capacity is the peak in bytes over a capacity the fingerprint holds
fixed, so judged beside it, the same change would count twice in the gate's false-discovery
family. Where both are usable it is shown, not deciding; it exists for budgets
(``[budgets]``), which judge it on the run alone whatever decides here. Likewise a training
run's throughput, the reciprocal of its step time on the ratio scale the gate tests on."""


def not_deciding(device_kind: str, usable: Callable[[str], bool]) -> frozenset[str]:
    """The metrics of a training run on ``device_kind`` that are shown but do not decide its
    gate: the wall-clock ones (:data:`WALL_TIMES`) when the device's :data:`PRIMARY_TIME`
    metric is ``usable`` (measured in the run and in what it is judged against), else the
    primary ones (a baseline recorded before they were measured: the wall time decides, as it
    did then); and each of :data:`ECHOES` whose original is ``usable``. The one place this is
    decided (the gate, ``run --confirm`` and ``history analyze`` ask it)."""
    primary = PRIMARY_TIME.get(device_kind)
    times = WALL_TIMES if primary is not None and usable(primary) else PRIMARY_TIME.values()
    return frozenset(times) | {echo for echo, original in ECHOES.items() if usable(original)}


TIME_UNIT = "ms"
"""The unit of every time metric of the catalogue (and of a result file's ``*_ms`` metrics)."""
TO_MS = {
    **dict.fromkeys(("s", "sec", "second", "seconds"), 1000.0),
    **dict.fromkeys(("ms", "msec", "millisecond", "milliseconds"), 1.0),
    **dict.fromkeys(("us", "µs", "usec", "microseconds"), 1e-3),
    **dict.fromkeys(("ns", "nsec", "nanoseconds"), 1e-6),
}
"""The time units perfgate reads, each as its factor to ms."""


def is_time(metric_or_unit: str) -> bool:
    """Whether a metric, by its unit (one of :data:`TO_MS`) or its catalogue name, is a
    time: its changes are "slower"/"faster" in words. The one place that says it."""
    if metric_or_unit in TO_MS:
        return True
    found = lookup(metric_or_unit)
    return found is not None and found.unit in TO_MS


def never_negative(unit: str) -> bool:
    """Whether a value in ``unit`` is an amount (a time, bytes, a count, a rate) and so is
    never below 0: a negative one is bad input, not a change. The one place that says it."""
    return unit in TO_MS or unit in ("bytes", "count") or unit.endswith("/s")


def default_policy(metric: str) -> MetricPolicy:
    """The catalogue's policy of ``metric``; :data:`FALLBACK_POLICY` for one it does not know."""
    found = lookup(metric)
    return found.policy if found is not None else FALLBACK_POLICY
