"""Frozen dataclasses and enums shared by every layer (DESIGN.md §4).

Nothing here does I/O. A class written to JSON or the store inherits
:class:`perfgate.serial.Serial` (``to_dict`` / ``from_dict``); its ``KEYS``, where the
on-disk shape is not its fields in order, say which keys, in which order, so the shapes are
defined next to each class. Numbers stay unformatted; rounding belongs to the renderers.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

from perfgate.serial import SORTED, Serial

ParamValue = str | int | float | bool
Params = Mapping[str, ParamValue]


class Direction(str, Enum):
    """Which way a metric gets better."""

    LOWER_IS_BETTER = "lower"
    HIGHER_IS_BETTER = "higher"

    def worse(self, change: float) -> bool:
        """Whether a change of ``change`` (any signed size: a difference, a percentage, a
        log-ratio) makes a metric with this direction worse. The one place that says it."""
        return change > 0 if self is Direction.LOWER_IS_BETTER else change < 0


class Verdict(str, Enum):
    """Outcome of comparing one (benchmark, metric) against its baseline."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    NO_BASELINE = "no_baseline"
    INCOMPARABLE = "incomparable"
    OVER_BUDGET = "over_budget"
    """An absolute budget of the suite's ``[budgets]`` is breached (judged on the run alone,
    history or not; never a regression)."""


class Severity(str, Enum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


RUNNER_TIMING = "wall-sync-v1"
"""``perfgate run``'s timing method (steps timed with the profiler off), bumped whenever perfgate
changes *how* it measures, so old and new numbers never mix; an ingested run names its
file's format instead (:data:`INGESTED_TIMING`)."""
INGESTED_TIMING = {
    "ascend": "ascend-profile-v1",
    "torch_trace": "torch-trace-v1",
    "ais_bench": "ais-bench-v1",
    "pytest_benchmark": "pytest-benchmark-v1",
    "pyperf": "pyperf-v1",
    "asv": "asv-v1",
    "metrics_file": "metrics-file-v1",
}
"""An ingested run's timing method by its file's format (the parsers' ``FORMAT_*`` names):
ingested runs never share a history with ``perfgate run``'s, nor with another format's."""
ONE_RUN_PER_FILE = frozenset(
    INGESTED_TIMING[f] for f in ("ascend", "torch_trace", "ais_bench", "metrics_file")
)
"""The timing methods of files that hold one run, named by ``ingest --benchmark`` (a profile,
an ais_bench summary, a metrics file); the other result files name their own benchmarks."""


@dataclass(frozen=True)
class Fingerprint(Serial):
    """The environment a run was measured in.

    Stored whole. Only the fields in ``COMPARABLE_FIELDS`` take part in :meth:`key`, the
    hash that keys a comparable history: two runs are compared only when their keys match.
    Versions that change often without changing speed (kernel release, perfgate's own
    version) are kept for the record but not hashed; ``timing_method`` is what changes
    when perfgate changes *how* it measures.
    """

    device_kind: str
    device_model: str
    device_count: int
    cpu_model: str
    cpu_cores: int
    os: str
    python_version: str
    torch_version: str
    timing_method: str
    params: Params = field(default_factory=dict, metadata=SORTED)
    host_label: str = ""
    torch_npu_version: str = ""
    cuda_version: str = ""
    cann_version: str = ""
    driver_version: str = ""
    os_release: str = ""
    perfgate_version: str = ""

    KEYS = (
        *("device_kind", "device_model", "device_count", "cpu_model", "cpu_cores", "os"),
        *("os_release", "python_version", "torch_version", "torch_npu_version"),
        *("cuda_version", "cann_version", "driver_version", "perfgate_version"),
        *("timing_method", "params", "host_label"),
    )
    COMPARABLE_FIELDS: ClassVar[tuple[str, ...]] = tuple(
        k for k in KEYS if k not in ("os_release", "perfgate_version")
    )

    def comparable(self) -> dict[str, Any]:
        data = self.to_dict()
        return {name: data[name] for name in self.COMPARABLE_FIELDS}

    def key(self) -> str:
        """Stable hash of the comparable part (16 hex digits)."""
        canonical = json.dumps(
            self.comparable(), sort_keys=True, separators=(",", ":"), default=str
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def runner_timed(self) -> bool:
        """Whether perfgate's runner measured the run, rather than a file being ingested."""
        return self.timing_method == RUNNER_TIMING

    def testbed(self) -> str:
        """The testbed in words: ``npu:Ascend910B4 x8 on ci-npu-01`` (the count when above
        one, the host label when set); a run whose file named no device is ``host:`` its CPU
        model. The PR comment's marker and the Prometheus label use it."""
        kind = self.device_kind or "host"
        text = f"{kind}:{self.device_model or self.cpu_model or 'unknown'}"
        if self.device_count > 1:
            text += f" x{self.device_count}"
        if self.host_label:
            text += f" on {self.host_label}"
        return text

    def differences(self, other: Fingerprint) -> list[str]:
        """The comparable fields that differ, in words (``field: theirs in baseline, mine now``)."""
        mine, theirs = self.comparable(), other.comparable()
        out: list[str] = []
        for name in self.COMPARABLE_FIELDS:
            if name == "params":
                for k in sorted(set(mine["params"]) | set(theirs["params"])):
                    a, b = mine["params"].get(k), theirs["params"].get(k)
                    if a != b:
                        out.append(f"param {k}: {b!r} in baseline, {a!r} now")
            elif mine[name] != theirs[name]:
                out.append(f"{name}: {theirs[name]!r} in baseline, {mine[name]!r} now")
        return out


@dataclass(frozen=True)
class MetricPolicy:
    """How one metric is judged: which way is better and the smallest change that matters."""

    direction: Direction
    min_effect_pct: float
    deterministic: bool = False
    min_effect_abs: float = 0.0
    """A minimum effect in the metric's own unit (points, for a metric that is itself a
    percentage near 0 such as ``rank_spread_pct``): a change must be at least this *and*
    ``min_effect_pct`` of the baseline."""
    numerics: bool = False
    """A result that must not move (the loss with a fixed seed): judged without statistics,
    and a change beyond ``min_effect_pct`` either way is a ``regression`` of kind
    ``numerics`` (:func:`perfgate.stats.decide.numerics_verdict`), never an improvement."""
    decides: bool = True
    """False: the metric explains and is shown, but never decides a gate (an operator
    count: a changed count is named beside the time verdict, "work changed", and fails
    nothing alone: one more cheap call can make a step faster, a slower kernel keeps the
    count). The catalogue's default for counts; a suite that names the metric in
    ``[metrics.NAME]`` opts in to its deciding (``decides = false`` there keeps it shown)."""

    def min_effect_pct_at(self, baseline: float, *, falling: bool = False) -> float:
        """The minimum effect as a percentage of ``baseline``: the larger of the two.

        ``falling``: for a change judged on the ratio scale that went down. There a drop of
        ``min_effect_abs`` points is the rise of ``min_effect_abs / (baseline -
        min_effect_abs)`` (80% -> 65% is as large a ratio as 65% -> 80%), so that a drop and
        a rise of the same points weigh the same (15 points: 80% -> 67% is not a change
        that matters)."""
        if self.min_effect_abs <= 0:
            return self.min_effect_pct
        # A baseline of (nearly) 0 caps the percentage at 10000% rather than dividing by 0.
        floor = max(abs(baseline), self.min_effect_abs / 100.0)
        if falling:
            floor = max(floor - self.min_effect_abs, self.min_effect_abs / 100.0)
        return max(self.min_effect_pct, 100.0 * self.min_effect_abs / floor)


TREATMENT_PARAMS: tuple[str, ...] = (
    *("slowdown", "straggler_rank", "straggler_extra", "extra_allreduce", "bucket_cap_mb"),
    *("tail_every", "tail_factor"),
)
"""The built-in workloads' knobs that stand in for a code change (extra work, a straggler,
extra communication, smaller gradient buckets, a latency tail): kept out of the fingerprint
by default, so a run with them is compared against the runs without them."""


@dataclass(frozen=True)
class BenchmarkSpec(Serial):
    """One benchmark to run: a built-in workload or a user ``module:function`` entry, with
    the ``params`` passed to it (those in ``treatment_params``: see :data:`TREATMENT_PARAMS`)."""

    name: str
    workload: str | None = None
    entry: str | None = None
    device: str = "cpu"
    params: Params = field(default_factory=dict, metadata=SORTED)
    warmup: int = 5
    measured: int = 30
    profiled: int = 3
    repeats: int = 3
    treatment_params: frozenset[str] = frozenset(TREATMENT_PARAMS)
    looks: int = 0
    """Extra repeats folded in by ``run --confirm`` (0: none)."""
    kind: str = "training"
    """``training`` (timed steps) or ``inference`` (timed requests under
    ``torch.inference_mode()``, reported as latency percentiles)."""
    nproc: int = 1
    """Processes (ranks) per node; above 1 (or with ``nnodes`` above 1) the benchmark runs
    under torchrun, one rank per device."""
    nnodes: int = 1
    timeout_s: float = 900.0
    """The most one repeat (one worker process, or one torchrun job) may take; a repeat
    that outlives it is killed and the run fails (exit 3). Well under a CI job's limit."""
    timeout_set: bool = False
    """Whether the suite or ``--timeout`` gave ``timeout_s`` (even one equal to the default):
    left unset, a repeat is also stopped once its warm-up says a step hangs
    (:mod:`perfgate.runner.watchdog`). Not stored: it says how this run was asked for."""

    KEYS = (
        *("name", "kind", "nproc", "nnodes", "workload", "entry", "device", "params"),
        *("warmup", "measured", "profiled", "repeats", "treatment_params", "looks"),
        "timeout_s",
    )

    @property
    def distributed(self) -> bool:
        """Whether the benchmark runs as a torchrun job."""
        return self.nproc > 1 or self.nnodes > 1


@dataclass(frozen=True)
class Summary(Serial):
    """Summary statistics of one measurement's samples.

    ``centre`` is the value a run is represented by between runs: the median of the
    per-repeat medians, so that each worker process counts once. For step series the
    statistics cover the steady state only: ``dropped`` leading samples (warm-up found by
    MSER-5) are kept in the raw samples but left out here. ``centre_se`` is the within-process
    standard error of the centre (moving block bootstrap), ``None`` when not computed.
    """

    n: int
    centre: float
    median: float
    mean: float
    mad: float
    p10: float
    p90: float
    p99: float
    minimum: float
    maximum: float
    repeat_centres: tuple[float, ...] = ()
    dropped: int = 0
    centre_se: float | None = None

    KEYS = (
        *("n", "dropped", "centre_se", "repeat_centres", "centre", "median", "mean", "mad"),
        *("p10", "p90", "p99", "min=minimum", "max=maximum"),
    )


@dataclass(frozen=True)
class Measurement:
    """One metric of one run: raw samples grouped by repeat (worker process), and their summary."""

    metric: str
    unit: str
    direction: Direction
    repeats: tuple[tuple[float, ...], ...]
    summary: Summary
    deterministic: bool = False

    @property
    def samples(self) -> tuple[float, ...]:
        return tuple(x for rep in self.repeats for x in rep)


@dataclass(frozen=True)
class OpStat(Serial):
    """One operator (or kernel) of a profile, normalised per profiled step."""

    name: str
    device: str
    calls_per_step: float
    self_time_ms_per_step: float
    total_time_ms_per_step: float
    op_type: str = ""
    input_shapes: tuple[str, ...] = ()
    core: str = ""
    """The accelerator core that ran it, as the profiler names it (Ascend: ``AI_CORE``,
    ``AI_VECTOR_CORE``, ``MIX_AIC``, ``MIX_AIV``, ``AI_CPU``, ``HCCL``, ...); empty elsewhere."""
    metrics: Mapping[str, float] = field(default_factory=dict)
    """Hardware counters averaged over the op's calls, weighted by duration (Ascend
    ``aic_mac_ratio``, ``aiv_vec_ratio``, ``cube_utilization(%)``, ...), when collected."""

    KEYS = (
        *("name", "device", "op_type", "core", "metrics", "calls_per_step"),
        *("self_time_ms_per_step", "total_time_ms_per_step", "input_shapes"),
    )


@dataclass(frozen=True)
class StepBreakdown(Serial):
    """Where a step's time goes, in ms per step; ``None`` where the profile cannot tell."""

    step_ms: float
    compute_ms: float | None = None
    communication_not_overlapped_ms: float | None = None
    communication_overlapped_ms: float | None = None
    free_ms: float | None = None
    data_loading_ms: float | None = None
    bubble_ms: float | None = None
    """Pipeline bubble: time in receive ops waiting for another stage (Ascend ``Bubble``)."""
    preparing_ms: float | None = None
    """From the step's start to its first device task (Ascend ``Preparing``)."""


@dataclass(frozen=True)
class LinkBandwidth(Serial):
    """Traffic over one link type in one profiled step (Ascend communication.json)."""

    link: str
    """``HCCS``, ``RDMA``, ``SDMA``, ``PCIE``, ``SIO``, ..."""
    transit_size_mb: float
    transit_time_ms: float
    bandwidth_gb_s: float


@dataclass(frozen=True)
class CommunicationSummary(Serial):
    """Collective and point-to-point communication of one rank, per profiled step.

    Times in ms. ``wait_ratio`` and ``synchronization_ratio`` are the profiler's own
    (wait / (wait + transit), sync / (sync + transit)); ``None`` when it had none.
    """

    ops_per_step: float
    elapse_ms: float
    transit_ms: float
    wait_ms: float
    synchronization_ms: float
    idle_ms: float
    wait_ratio: float | None = None
    synchronization_ratio: float | None = None
    links: tuple[LinkBandwidth, ...] = ()


@dataclass(frozen=True)
class RankPair(Serial):
    """Traffic from one rank to another over one link type in one profiled step (Ascend
    ``communication_matrix.json``, or the db export's equivalent), summed over the step's
    collective and point-to-point ops. Times in ms, sizes in MB (as the profiler writes
    them); ``bandwidth_gb_s`` is transit size / transit time."""

    src: int
    dst: int
    link: str
    """``Transport Type`` as the profiler names it: ``HCCS``, ``RDMA``, ``SDMA``, ``PCIE``,
    ``SIO``, ``LOCAL`` (a rank to itself)."""
    transit_size_mb: float
    transit_time_ms: float
    bandwidth_gb_s: float
    wait_ms: float | None = None
    """Time the pair's ops waited before transfer (the source rank's wait), when known."""
    ops: int = 0
    """Communication ops summed into the pair."""


class SpanKind(str, Enum):
    """What a span of a timeline lane was doing."""

    COMPUTE = "compute"
    COMMUNICATION = "communication"
    MEMCPY = "memcpy"
    HOST = "host"
    """A host-side op or API call (a CPU lane)."""
    OTHER = "other"


@dataclass(frozen=True)
class TimelineSpan(Serial):
    """One op (kernel, task, host call) on a lane, in µs from the step's start; written as
    ``[start_us, dur_us, name, kind]``: compact, a step may hold 10^4 spans."""

    ROW = True

    start_us: float
    dur_us: float
    name: str
    kind: SpanKind


@dataclass(frozen=True)
class TimelineLane(Serial):
    """One row of a timeline: a device stream or a host thread."""

    name: str
    """As the profiler names it (``Stream 2``, ``HCCL Plane 0``, ``thread 1234 (python)``)."""
    device: bool
    """A device stream (True) or a host thread (False)."""
    spans: tuple[TimelineSpan, ...]
    """Sorted by start."""


@dataclass(frozen=True)
class Timeline(Serial):
    """What ran when in one profiled step (MindStudio Insight's timeline view, one step)."""

    step: str
    """The step's name in the profile (``ProfilerStep#5``, ``step 50``)."""
    duration_us: float
    lanes: tuple[TimelineLane, ...] = ()
    dropped_spans: int = 0
    """Spans left out to keep the stored timeline bounded (the shortest first); 0 when whole."""

    KEYS = ("step", "duration_us", "dropped_spans", "lanes")


@dataclass(frozen=True)
class ProfileSummary(Serial):
    """What a profiler saw over its window, normalised per step.

    ``notes`` names every metric the source could not provide, and why.
    """

    source: str
    steps: int
    ops: tuple[OpStat, ...] = ()
    breakdown: StepBreakdown | None = None
    peak_memory_bytes: int | None = None
    memory_per_step_bytes: tuple[float, ...] = ()
    device_busy_fraction: float | None = None
    op_calls_per_step: float | None = None
    kernel_launches_per_step: float | None = None
    rank: int | None = None
    raw_files: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    op_types: tuple[OpStat, ...] = ()
    """Per operator type (``name`` is the type), when the source aggregates by type."""
    step_times_ms: tuple[float, ...] = ()
    """End-to-end time of each profiled step, oldest first, when the source has them."""
    communication: CommunicationSummary | None = None
    peak_reserved_bytes: int | None = None
    """Peak memory the device allocator held (reserved), when the source reports it."""
    memory_growth_bytes: int | None = None
    """Allocated memory at the end of the profiled window minus at its start."""
    collection: Mapping[str, str] = field(default_factory=dict)
    """How the profile was collected: profiler level, aic_metrics, export type, torch_npu
    and CANN versions, device name, ... (keys as the source names them, lower-cased)."""
    utilisation: Mapping[str, float] = field(default_factory=dict)
    """Utilisation over the profiled steps, keyed by catalogue metric (``device_busy_pct``,
    ``aicore_util_pct``, ``cube_util_pct``, ``vector_util_pct``, ``l2_hit_pct`` in %,
    ``hbm_bandwidth_gb_s``, ``sm_occupancy_pct``): only those the profile holds; ``notes``
    says why the others are missing."""
    device_memory_capacity_bytes: int | None = None
    """The device's memory capacity, when the profile says (for
    ``peak_memory_pct_of_capacity``)."""
    rank_pairs: tuple[RankPair, ...] = ()
    """Rank-to-rank traffic of one profiled step (multi-rank Ascend jobs)."""
    timeline: Timeline | None = None
    """One profiled step, op by op, per device stream and host thread."""

    def top_ops(self, n: int = 10) -> tuple[OpStat, ...]:
        return tuple(sorted(self.ops, key=lambda o: -o.self_time_ms_per_step)[:n])


@dataclass(frozen=True)
class ClusterView(Serial):
    """How the ranks of one multi-device job compare with each other.

    ``step_ms`` and ``comm_wait_ms`` are per rank, in the order of ``ranks``; spreads are
    (max - min) / min in percent. ``slow_links`` names each (rank, link) whose bandwidth
    is below the expected bandwidth of its link type.
    """

    ranks: tuple[int, ...]
    step_ms: tuple[float, ...]
    slowest_rank: int
    step_spread_pct: float
    comm_wait_ms: tuple[float | None, ...] = ()
    comm_wait_spread_pct: float | None = None
    slow_links: tuple[str, ...] = ()


@dataclass(frozen=True)
class Profiled:
    """A profile read from disk (:func:`perfgate.parsers.read_profile`): its format
    (``ascend`` or ``torch_trace``), the path given, one summary per rank, and the ranks'
    cluster view, which the parsers leave None (it is analysis: the app sets it with
    :func:`perfgate.advisor.cluster.cluster_view`)."""

    format: str
    path: Path
    ranks: tuple[ProfileSummary, ...]
    cluster: ClusterView | None = None

    @property
    def slowest(self) -> ProfileSummary:
        """The rank whose mean step is longest (the only one for a single-rank profile)."""
        return max(self.ranks, key=lambda r: r.breakdown.step_ms if r.breakdown else -math.inf)


@dataclass(frozen=True)
class GitContext(Serial):
    commit: str = ""
    branch: str = ""
    base_branch: str = ""
    pr_number: int | None = None


@dataclass(frozen=True)
class CIContext(Serial):
    provider: str = ""
    job_url: str = ""
    trigger: str = ""


@dataclass(frozen=True)
class RunRecord:
    """One recorded run of one benchmark: its samples, profile and environment."""

    id: str
    project: str
    benchmark: str
    fingerprint: Fingerprint
    git: GitContext
    ci: CIContext
    started_at: datetime
    finished_at: datetime
    measurements: tuple[Measurement, ...]
    spec: BenchmarkSpec
    profile: ProfileSummary | None = None
    excluded: bool = False
    paired_with: str | None = None
    """For a head run recorded by ``run --ab``: the id of the base run measured beside it,
    repeat by repeat (repeat i of each ran next to the other)."""
    rank_profiles: tuple[ProfileSummary, ...] = ()
    """One profile per rank when the run is a multi-device job (``profile`` is then the
    slowest rank's)."""
    findings: tuple[Finding, ...] = ()
    """What the advisors (perfgate's rules, msprof-analyze) said about this run's profile."""
    alpha: float | None = None
    """For a run measured in looks (``run --confirm``, ``check``'s more repeats or pairs):
    the level its looks were judged at, their common one, stored with it so that a later
    gate judges it there again and spends no more than the looks did
    (:func:`perfgate.app.gate.stored_levels`); None: a plain run."""

    def measurement(self, metric: str) -> Measurement | None:
        return next((m for m in self.measurements if m.metric == metric), None)


@dataclass(frozen=True)
class RunPoint:
    """One run's value of one metric, as the history query returns it (no raw samples)."""

    run_id: str
    benchmark: str
    metric: str
    unit: str
    direction: Direction
    branch: str
    commit: str
    fingerprint_key: str
    started_at: datetime
    centre: float
    repeat_centres: tuple[float, ...]
    deterministic: bool = False
    centre_se: float | None = None


@dataclass(frozen=True)
class Comparison(Serial):
    """The verdict on one (benchmark, metric) of the current run against its baseline window."""

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    verdict: Verdict
    reason: str
    current_run_id: str
    current_centre: float | None
    baseline_centre: float | None = None
    baseline_run_ids: tuple[str, ...] = ()
    baseline_commits: tuple[str, ...] = ()
    change_pct: float | None = None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    p_rank: float | None = None
    min_effect_pct: float | None = None
    mde_pct: float | None = None
    fingerprint_differences: tuple[str, ...] = ()
    method: str = "history"
    """``history`` (against the base branch's window) or ``paired`` (against the base run
    measured beside it by ``run --ab``)."""
    alpha: float | None = None
    """The significance level the verdict was decided at."""
    decides: bool = True
    """False: shown beside the metrics that decide, never deciding (a training run's wall
    time where its CPU or device time decides, :func:`perfgate.metrics.not_deciding`; an
    operator count the suite did not opt in to, :attr:`MetricPolicy.decides`)."""
    kind: str = ""
    """What was judged, where it is not a speed: ``budget`` (an absolute limit of the
    suite's ``[budgets]``, verdict ``over_budget`` or ``unchanged``), ``numerics`` (a loss that
    must stay equal within its tolerance: a change is a ``regression`` whatever the speed
    did); "" for a statistical or deterministic comparison with history or a pair."""
    limit: float | None = None
    """Kind ``budget``: the limit the run's centre was held to, in the metric's unit (a
    budget relative to the reference: resolved against it); ``change_pct`` is then the
    centre's distance from it, in % of it."""
    budget: str = ""
    """Kind ``budget``: the budget as the suite states it (``<= 100``, ``>= 95% of
    reference``)."""
    ci_level: float | None = None
    """The confidence level of [``ci_low_pct``, ``ci_high_pct``]: 0.95 for a pair; against
    history ``1 - alpha * called / tested`` on the change's side (the false-discovery
    adjusted interval, so a gate of more metrics shows wider ones)."""

    KEYS = (
        *("benchmark", "metric", "unit", "direction", "verdict", "reason", "current_run_id"),
        *("current=current_centre", "baseline=baseline_centre", "baseline_runs=baseline_run_ids"),
        *("baseline_commits", "change_pct", "ci_low_pct", "ci_high_pct", "p_value"),
        *("p_adjusted", "p_rank", "min_effect_pct", "mde_pct", "mde_power", "alpha"),
        *("fingerprint_differences", "method", "decides", "kind", "limit", "budget"),
        "ci_level",
    )

    @property
    def mde_power(self) -> float | None:
        """The power ``mde_pct`` is stated at (None without one)."""
        return 0.8 if self.mde_pct is not None else None


@dataclass(frozen=True)
class Finding(Serial):
    """One thing an advisor noticed: what, where, how bad, and what to do about it.

    ``source`` is ``perfgate`` for perfgate's own rules and ``msprof-analyze`` for findings
    taken from the Ascend advisor; ``rule`` is the rule id or the advisor's category.
    """

    rule: str
    severity: Severity
    location: str
    message: str
    suggestion: str
    evidence: Mapping[str, float | str] = field(default_factory=dict)
    source: str = "perfgate"
    impact_ms: float | None = None
    """Estimated step time (ms) the suggestion could save, when the rule can tell."""
    known: bool = False
    """The baseline (e.g. main) already has this finding: not news in a PR."""

    KEYS = (
        *("source", "rule", "severity", "location", "message", "suggestion", "evidence"),
        *("impact_ms", "known"),
    )

    def key(self) -> tuple[str, str, str]:
        """What identifies a finding across runs: source, rule and location."""
        return (self.source, self.rule, self.location)


@dataclass(frozen=True)
class OpDelta(Serial):
    """How one op's time per step moved between the baseline and the current run."""

    name: str
    device: str
    baseline_ms: float
    current_ms: float
    share: float | None = None
    """This op's part of the metric's change (delta / total delta); None if it has none."""
    status: str = "changed"
    """``changed``, ``new`` (absent from the baseline) or ``vanished`` (absent now)."""
    baseline_shapes: tuple[str, ...] = ()
    current_shapes: tuple[str, ...] = ()

    KEYS = (
        *("name", "device", "baseline_ms", "current_ms", "delta_ms", "share", "status"),
        *("baseline_shapes", "current_shapes"),
    )

    @property
    def delta_ms(self) -> float:
        return self.current_ms - self.baseline_ms


@dataclass(frozen=True)
class Attribution(Serial):
    """Which ops explain a time metric's change between a run and its baseline window."""

    benchmark: str
    metric: str
    delta_ms: float
    """The metric's change per step (current centre minus baseline centre)."""
    ops: tuple[OpDelta, ...]
    """The ops that explain it, largest contribution first (new and vanished ops included)."""
    explained_share: float | None = None
    """Sum of the listed ops' deltas over ``delta_ms``."""
    note: str = ""

    KEYS = ("benchmark", "metric", "delta_ms", "explained_share", "ops", "note")


@dataclass(frozen=True)
class OpCountChange(Serial):
    """One operator whose calls per step changed between a run and its baseline profile."""

    name: str
    device: str
    baseline_calls: float
    """Calls per step in the baseline (0 for an op that appeared)."""
    current_calls: float
    """Calls per step now (0 for an op that disappeared)."""
    time_ms: float
    """Its total time per step, now (in the baseline, for one that disappeared): what the
    changes are ordered by."""

    KEYS = (
        *("name", "device", "baseline_calls_per_step=baseline_calls"),
        *("current_calls_per_step=current_calls", "delta_calls_per_step=delta_calls"),
        *("time_ms_per_step=time_ms", "status"),
    )

    @property
    def delta_calls(self) -> float:
        return self.current_calls - self.baseline_calls

    @property
    def status(self) -> str:
        """``new`` (absent from the baseline), ``vanished`` (absent now) or ``changed``."""
        if self.baseline_calls == 0:
            return "new"
        return "vanished" if self.current_calls == 0 else "changed"


@dataclass(frozen=True)
class WorkChange(Serial):
    """The work a run's step does that its baseline's did not, or no longer does: the
    operators that appeared, disappeared or changed calls per step, by time, largest first
    (:func:`perfgate.advisor.work.work_change`). It explains a verdict; it decides nothing
    (an operator count decides only where the suite opts in, :attr:`MetricPolicy.decides`).
    """

    benchmark: str
    ops: tuple[OpCountChange, ...]
    """The changed ops listed, largest time first (at most
    :data:`perfgate.advisor.work.MAX_OPS` of them)."""
    baseline_run_id: str
    """The baseline run whose profile the current one was diffed against."""
    more: int = 0
    """Changed ops not listed (smaller in time)."""

    KEYS = ("benchmark", "baseline_run_id", "ops", "more")


@dataclass(frozen=True)
class GateResult:
    """Everything one gate decided; renderers and the exit code are functions of it."""

    branch: str
    against: str
    verdict: Verdict
    comparisons: tuple[Comparison, ...]
    findings: tuple[Finding, ...] = ()
    attributions: tuple[Attribution, ...] = ()
    notes: tuple[str, ...] = ()
    """What the reader should know about the baseline itself, in words (which base-branch
    runs a PR was compared with, and whether the base branch moved since its merge-base)."""
    work_changes: tuple[WorkChange, ...] = ()
    """Per benchmark whose profile's operators changed count against its baseline's: which
    ones (shown beside the time verdict, "work changed: +1 aten::clone per step")."""


# --- team store: alerts, triage, baseline resets, retention ---------------------------------


@dataclass(frozen=True)
class NewAlert:
    """A regression a gate found on the base branch, or a change point history analysis
    found: one (benchmark, metric, run, verdict), recorded once however often it is found."""

    project: str
    benchmark: str
    metric: str
    run_id: str
    branch: str
    fingerprint_key: str
    verdict: Verdict
    source: str  # "gate", "history" (a change point) or "drift"
    commit_after: str
    change_pct: float | None = None
    previous_run_id: str | None = None
    commit_before: str | None = None


@dataclass(frozen=True)
class Alert(Serial):
    """A stored alert and its triage state (untriaged, acknowledged, invalid, wontfix,
    fixed)."""

    id: int
    project: str
    benchmark: str
    metric: str
    run_id: str
    previous_run_id: str | None
    branch: str
    fingerprint_key: str
    verdict: Verdict
    source: str
    change_pct: float | None
    commit_before: str | None
    commit_after: str
    status: str
    created_at: datetime
    updated_at: datetime

    KEYS = (
        *("id", "project", "benchmark", "metric", "run_id", "previous_run_id", "branch"),
        *("fingerprint_key", "verdict", "source", "change_pct", "commit_range", "status"),
        *("created_at", "updated_at"),
    )

    @property
    def commit_range(self) -> tuple[str | None, str]:
        """The commits the change lies between (the one before: None where unknown)."""
        return (self.commit_before, self.commit_after)


@dataclass(frozen=True)
class TriageEvent(Serial):
    """Who did what to an alert, a run or a baseline, when and why."""

    id: int
    project: str
    action: str  # ack, ignore, fixed, reset, exclude, import
    alert_id: int | None
    run_id: str | None
    benchmark: str | None
    state: str | None
    by: str
    at: datetime
    reason: str


@dataclass(frozen=True)
class BaselineReset:
    """An accepted change: the benchmark's baseline window starts at ``run_id`` (the first
    run of ``commit``), whatever came before."""

    id: int
    project: str
    benchmark: str
    commit: str
    run_id: str
    starts_at: datetime
    by: str
    at: datetime
    reason: str


@dataclass(frozen=True)
class PrunePlan:
    """What a retention pass deletes (or, dry, would delete) and what it kept on purpose."""

    candidates: int
    protected: int
    deleted_run_ids: tuple[str, ...]
    dry_run: bool
    reasons: Mapping[str, int] = field(default_factory=dict)
    """How many candidate runs each protection kept (baseline, change_point, reset, alert,
    paired)."""


@dataclass(frozen=True)
class ChangePoint:
    """One change of level in a series.

    ``index`` is the first run of the new regime: ``values[index]`` is after the change, so
    the change lies between the runs ``index - 1`` and ``index`` (their commits bound it).
    ``before``/``after`` are the medians of the segments on either side (bounded by the
    neighbouring change points or the series ends); ``change_pct`` is
    ``(after - before) / |before| * 100`` (infinite when ``before`` is 0). ``p_value`` and
    ``confidence`` are described in the module docstring.
    """

    index: int
    before: float
    after: float
    change_pct: float
    p_value: float
    confidence: float


@dataclass(frozen=True)
class Drift:
    """A creeping change of level: a series' newest runs against its runs a long horizon ago,
    beyond the change points found in between (:mod:`perfgate.stats.drift`).

    Indexes are positions in the series, oldest first: the old block is
    ``baseline_first..baseline_last``, the newest ``recent_first..recent_last``; the move
    happened over ``start..end`` (the best single ramp between the blocks). ``before`` and
    ``after`` are the old block's median and that moved by ``change_pct``, the Hodges-Lehmann
    shift between the blocks in percent; ``p_value`` is the rank test's and ``confidence``
    ``1 - p_value``. ``horizon_runs`` and ``horizon_days`` (None without timestamps) say how
    far before the newest run the old block ends; ``steps_removed`` counts the change points
    divided out before comparing.
    """

    baseline_first: int
    baseline_last: int
    recent_first: int
    recent_last: int
    start: int
    end: int
    before: float
    after: float
    change_pct: float
    p_value: float
    confidence: float
    horizon_runs: int
    horizon_days: float | None
    steps_removed: int


@dataclass(frozen=True)
class DetectedChange:
    """A change point of one stored series, with the commits it lies between."""

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    branch: str
    fingerprint_key: str
    point: ChangePoint
    last_run_before: str
    first_run_after: str
    commit_before: str
    commit_after: str
    runs_in_series: int
    triage: str | None = None
    """The state of this change point's alert (untriaged, acknowledged, wontfix, fixed),
    None where none is recorded."""
    drift: Drift | None = None
    """Set when this is a drift (a creeping change, not a step): ``point`` then sums it up
    (index: the first run that moved) and ``first_run_after`` is the run its alert is keyed
    on: the newest run when the drift was first found, kept while that alert lasts."""

    @property
    def verdict(self) -> Verdict:
        worse = self.direction.worse(self.point.change_pct)
        return Verdict.REGRESSION if worse else Verdict.IMPROVEMENT


@dataclass(frozen=True)
class NoiseRow:
    """How noisy one (benchmark, metric) is on a branch, against its minimum effect."""

    benchmark: str
    metric: str
    runs: int
    mde_pct: float | None
    min_effect_pct: float | None

    @property
    def too_noisy(self) -> bool:
        """The gate would miss a change of twice the minimum effect more than one time in
        five (its MDE is stated at 80% power; a change of exactly the minimum effect is
        measured above it only half the time, whatever the noise)."""
        return (
            self.mde_pct is not None
            and self.min_effect_pct is not None
            and self.mde_pct > 2.0 * self.min_effect_pct
        )


@dataclass(frozen=True)
class Confirmation:
    """What ``run --confirm`` did for one benchmark."""

    benchmark: str
    original: RunRecord
    folded: RunRecord | None
    extra_repeats: int
    note: str


# --- compare --across: a report, not a gate ------------------------------------------------


@dataclass(frozen=True)
class MetricRatio:
    """One metric of one benchmark on both sides."""

    metric: str
    unit: str
    direction: Direction
    a: float
    b: float

    @property
    def ratio(self) -> float | None:
        """B / A (None when A is 0)."""
        return None if self.a == 0 else self.b / self.a

    @property
    def better(self) -> str:
        """``a``, ``b`` or ``same`` (within 1%)."""
        ratio = self.ratio
        if ratio is None or abs(ratio - 1.0) < 0.01:
            return "same"
        return "a" if self.direction.worse(ratio - 1.0) else "b"


@dataclass(frozen=True)
class OpRow:
    """One op of a side's top list, with its time per step on both sides (None: absent)."""

    name: str
    a_ms: float | None
    b_ms: float | None


@dataclass(frozen=True)
class AcrossBenchmark:
    benchmark: str
    run_a: str
    run_b: str
    metrics: tuple[MetricRatio, ...]
    top_ops_a: tuple[OpRow, ...] = ()
    top_ops_b: tuple[OpRow, ...] = ()


@dataclass(frozen=True)
class AcrossReport:
    a: str
    b: str
    fingerprint_a: Fingerprint | None
    fingerprint_b: Fingerprint | None
    benchmarks: tuple[AcrossBenchmark, ...]
    only_a: tuple[str, ...] = ()
    """Benchmarks with a run on side A only."""
    only_b: tuple[str, ...] = ()
    differences: tuple[str, ...] = ()
    """What differs between the two fingerprints (B against A)."""


# --- the advisor's thresholds (a suite's [advisor] table overrides them) ---------------------

_MIB = 1024 * 1024

DEFAULT_SLOW_LINK_GB_S: tuple[tuple[str, float], ...] = (
    # msprof-analyze's bandwidth_contention_analysis flags SDMA below 0.8 x 18 GB/s.
    ("SDMA", 0.8 * 18.0),
    ("HCCS", 18.0),
    ("RDMA", 12.5),
)
"""Per link type, the bandwidth (GB/s) below which a link is slow, unless a suite says otherwise."""

DEFAULT_LINK_NOMINAL_GB_S: tuple[tuple[str, float], ...] = (
    # Ascend/msprof analysis/common_func/ms_constant/number_constant.py, the "standard
    # bandwidth" msprof's HcclAnalysisTool judges links by: CHIP_V4_1_0 (Atlas A2, Ascend
    # 910B; 24 AI cores in its ChipCoreNum) HCCS 28, RDMA 25 GB/s.
    ("HCCS", 28.0),
    ("RDMA", 25.0),
    # The same file lists PCIe only for CHIP_V2_1_0 (Ascend 910, Atlas training): 20 GB/s.
    ("PCIE", 20.0),
    # Engineering defaults, no documented figure found: SDMA is the copy engine that moves
    # intra-node traffic over HCCS (the fixtures' SDMA and HCCS totals carry the same bytes),
    # so it gets HCCS's figure; SIO (the die-to-die link of Atlas A3) gets it too, so that it
    # is not judged more leniently than HCCS.
    ("SDMA", 28.0),
    ("SIO", 28.0),
)
"""Nominal bandwidth (GB/s) per link type, for the share of it a rank pair achieves."""

TABLE_THRESHOLDS = frozenset({"slow_link_gb_s", "link_nominal_gb_s"})
"""The Thresholds fields a suite gives as a table of numbers (name = number) rather than one
number."""


@dataclass(frozen=True)
class Thresholds:
    """Every threshold of perfgate's rules, with its default and the reason for it."""

    comm_share_warning: float = 0.10
    """Communication not overlapped above a tenth of the step is worth overlapping."""
    comm_share_critical: float = 0.30
    """Above 30% the job is communication-bound (msprof-analyze's own example: AllReduce 30%)."""
    idle_share_warning: float = 0.15
    """A device-bound step idles a few %; above 15% free time the host holds the device back."""
    idle_share_critical: float = 0.50
    """Idle half the step: the device is mostly waiting (capped at warning on CPU-only traces)."""
    data_loading_share: float = 0.10
    """Data loading above a tenth of the step is named as the cause of idle time."""
    sync_calls_per_step: float = 1.0
    """Any host synchronisation inside the step stalls an accelerator's queue; one is enough."""
    cpu_sync_cause_share: float = 0.25
    """On CPU a sync idles nothing; it is named the cause of idle time when it is 1 in 4 ops."""
    tiny_op_calls_per_step: float = 500.0
    """More launches per step than this, each tiny, and launch overhead dominates."""
    tiny_op_median_us: float = 20.0
    """An op shorter than ~20 µs costs about as much to dispatch and launch as to run."""
    launch_overhead_us: float = 5.0
    """Typical eager dispatch + launch cost of one op; used for the tiny-ops impact estimate."""
    aicpu_share: float = 0.05
    """AI CPU ops are 10-100x slower than AI Core ones; 5% of op time on them is worth removing."""
    format_conversion_share: float = 0.10
    """A format conversion type (TransData, Cast, ...) above 10% of op time is pure overhead."""
    dominant_op_share: float = 0.20
    """Only an op holding a fifth of compute op time moves the step when tuned."""
    low_unit_utilization: float = 0.30
    """Cube/Vector busy below 30% of an op's time: tiling, alignment or format is off."""
    memory_bound_pipe_ratio: float = 0.80
    """An MTE2/MTE3 pipe busy above 80% of the op's time means the op is memory-bound."""
    memory_capacity_warning: float = 0.90
    """Peak above 90% of device memory leaves no room for fragmentation or a longer input."""
    memory_capacity_critical: float = 0.95
    """Above 95% an out-of-memory error is a batch away."""
    leak_min_steps: int = 4
    """Fewer per-step memory samples cannot tell steady growth from warm-up."""
    leak_min_growth_bytes: float = float(_MIB)
    """Growth below 1 MiB over the window is allocator noise, not a leak."""
    leak_rising_share: float = 0.75
    """A leak grows step after step: at least 3 in 4 step-to-step changes are increases."""
    window_growth_share: float = 0.05
    """Start-to-end growth above 5% of the peak is worth a look when per-step data is missing."""
    straggler_spread_pct: float = 3.0
    """Ranks of a synchronous job run at the slowest's pace; 3% is above run-to-run noise."""
    straggler_critical_pct: float = 20.0
    """One rank a fifth slower than the fastest wastes a fifth of the whole job."""
    min_profiled_steps: int = 3
    """Fewer profiled steps than this and one odd step decides every number."""
    profiler_overhead: float = 0.50
    """Profiled steps 50% longer than the timed ones: absolute op times are inflated."""
    slow_link_gb_s: tuple[tuple[str, float], ...] = DEFAULT_SLOW_LINK_GB_S
    """Bandwidth (GB/s) below which the cluster view reports a link as slow, per link type
    (compared case-insensitively; :data:`DEFAULT_SLOW_LINK_GB_S` by default). Link types not
    listed are never reported. A suite's ``[advisor.slow_link_gb_s]`` table is merged over
    the defaults (``HCCS = 20`` changes HCCS and keeps SDMA and RDMA)."""
    pair_low_utilisation: float = 0.30
    """A rank pair moving data below 30% of its link's nominal bandwidth (asc-tools'
    communication profile flags the same share): small messages, a contended or degraded
    link, or traffic routed over a slower path."""
    pair_wait_ms: float = 5.0
    """A pair whose source waited over 5 ms per step before transferring (asc-tools' limit):
    long enough to be a peer arriving late, not handshake jitter."""
    link_nominal_gb_s: tuple[tuple[str, float], ...] = DEFAULT_LINK_NOMINAL_GB_S
    """Nominal bandwidth (GB/s) per link type that a pair's utilisation is measured against
    (:data:`DEFAULT_LINK_NOMINAL_GB_S`, Ascend 910B figures); ``[advisor.link_nominal_gb_s]``
    is merged over it. Link types not listed (and ``LOCAL``) have no utilisation."""


def threshold_names() -> tuple[str, ...]:
    """The field names of :class:`Thresholds` (the keys a suite's ``[advisor]`` table allows)."""
    return tuple(f.name for f in fields(Thresholds))


@dataclass(frozen=True)
class Band:
    """A window's median and its prediction band for the next run's centre."""

    centre: float
    low: float
    high: float
    runs: int
    level: float
    """The band's probability of holding the next run's centre (e.g. 0.95)."""


@dataclass(frozen=True)
class LaunchOptions:
    """How a job is launched across nodes (``perfgate run --nnodes/--node-rank/
    --rdzv-endpoint``); on one node all defaults."""

    nnodes: int | None = None
    """Overrides the spec's ``nnodes``."""
    node_rank: int | None = None
    rdzv_endpoint: str | None = None
    """``HOST:PORT`` of the c10d rendezvous (the same on every node); default: a free port
    on 127.0.0.1 (one node only)."""
    rdzv_id: str = "perfgate"


# --- what ingest and advise found ---------------------------------------------------------


@dataclass(frozen=True)
class IngestResult:
    """What ``perfgate ingest`` recorded: from a profile (``profiled``), or from another
    harness's result file (an ais_bench summary: ``profiled`` is None)."""

    record: RunRecord
    """The run as recorded (its ``findings``: msprof-analyze's, stored with it)."""
    profiled: Profiled | None
    """The profile read; None for a result file."""
    advisor_problem: str | None = None
    advisor_version: str | None = None
    findings: tuple[Finding, ...] = ()
    """Every finding on the run, as ``advise``, the gate and the HTML run page show it
    (:func:`perfgate.app.advise.findings_for`, ``known`` against the base branch)."""
    format: str = ""
    """What was read: the profile's format (``ascend``, ``torch_trace``) or ``ais_bench``."""
    path: Path | None = None
    notes: tuple[str, ...] = ()
    """For a result file: what it did not say and what was not recorded (a profile's notes
    are on its summaries)."""
    reference: tuple[ReferenceRow, ...] = ()
    """The run beside the official figures of ``--reference`` (none without it)."""
    reference_path: Path | None = None
    step_times_path: Path | None = None
    """The ``--step-times`` file the step time was read from (None: the profile's steps)."""
    others: tuple[IngestResult, ...] = ()
    """The other runs recorded from the same file, in its order: a pytest-benchmark, pyperf
    or asv file holds several benchmarks, each recorded as its own run (this is the first);
    each has its own measurements, findings and reference rows, and no notes (the file's are
    on this one)."""

    @property
    def runs(self) -> tuple[IngestResult, ...]:
        """This run and the others recorded from the same file."""
        return (self, *self.others)


@dataclass(frozen=True)
class Advice:
    """What ``perfgate advise`` found for one profile or stored run."""

    kind: str
    """``profile`` (a path) or ``run`` (a stored run)."""
    target: str
    """The path or run id as given."""
    profile: ProfileSummary | None
    """The profile judged (the slowest rank's for a multi-rank job); None if the run has none."""
    findings: tuple[Finding, ...]
    ranks: int = 1
    cluster: ClusterView | None = None
    run: RunRecord | None = None
    format: str = ""
    """The profile format for a path (``ascend``, ``torch_trace``)."""
    advisor_ran: bool = False
    """Whether msprof-analyze was asked (Ascend profile, not ``--no-advisor``)."""
    advisor_problem: str | None = None
    advisor_version: str | None = None
    baseline_run_id: str | None = None
    """The base branch run whose findings marked these ``known`` (runs only)."""


# --- a run beside official figures (perfgate.app.reference) --------------------------------


@dataclass(frozen=True)
class ReferenceRow(Serial):
    """One metric of a run beside its official figure (a vendor's or ModelZoo's number): a
    report, not a verdict. ``value`` is the run's centre, None when the run did not measure
    the metric; better or worse follows the metric's direction in the catalogue."""

    metric: str
    unit: str
    direction: Direction
    official: float
    value: float | None

    KEYS = ("metric", "unit", "direction", "official", "value", "ratio", "change_pct", "better")

    @property
    def ratio(self) -> float | None:
        """The run's value / the official one (None: not measured, or an official 0)."""
        return None if self.value is None or self.official == 0 else self.value / self.official

    @property
    def change_pct(self) -> float | None:
        """(run - official) / |official| in %."""
        if self.value is None or self.official == 0:
            return None
        return (self.value - self.official) / abs(self.official) * 100.0

    @property
    def better(self) -> bool | None:
        """Whether the run beats the official figure in the metric's direction; None when
        not measured or equal."""
        if self.value is None or self.value == self.official:
            return None
        return not self.direction.worse(self.value - self.official)
