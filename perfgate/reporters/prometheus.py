"""Latest values in the Prometheus exposition format, printed or pushed to a Pushgateway.

Names follow Prometheus' conventions (https://prometheus.io/docs/practices/naming/), so that
``promtool check metrics`` passes and PromQL reads as it does for any exporter:

* base units, the unit last in the name, values converted to it: ``step_time_ms`` is
  ``perfgate_step_time_seconds`` (ms / 1000), ``peak_memory_bytes`` stays
  ``perfgate_peak_memory_bytes``, ``throughput_samples_per_s`` is
  ``perfgate_throughput_samples_per_second``, ``hbm_bandwidth_gb_s`` is
  ``perfgate_hbm_bandwidth_bytes_per_second`` and a percentage is a ratio (``aicore_util_pct``
  at 62.5 is ``perfgate_aicore_util_ratio`` at 0.625);
* what varies between series is a label, never part of the name: a per-rank metric
  ``step_time_ms.rank1`` is ``perfgate_step_time_seconds{rank="1"}`` (the job's own value
  has ``rank=""``, which PromQL reads as no label), the loss at its step ``loss.step25`` is
  ``perfgate_loss{step="25"}``; ``benchmark``, ``branch``, ``project`` and ``device`` (the
  device kind: cpu, cuda, npu) likewise;
* ``testbed`` is readable (``npu:Ascend910B4 x8 on ci-npu-01``: device kind and model, the
  device count when above one, the host label when set); ``testbed_key`` is the fingerprint
  key beside it, so two environments that read alike (another torch version) stay two series;
* ``metric`` keeps perfgate's own name of the series (``step_time_ms``), the one
  ``perfgate history --metric`` takes.

Per (benchmark, testbed, branch) there is also ``perfgate_last_run_timestamp_seconds`` (so a
dashboard can tell stale data) and ``perfgate_run_info`` (1, labelled with the run's id and
commit). Values are the centre of each series' latest run. Building the text is pure; the
push to a Pushgateway is :mod:`perfgate.exporters.prometheus`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from perfgate.errors import require
from perfgate.metrics import RANK_SUFFIX, STEP_SUFFIX, TO_MS, lookup
from perfgate.models import GateResult

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import GaugeMetricFamily

FEATURE = "perfgate export prometheus"

PREFIX = "perfgate_"
SERIES_LABELS = ("project", "benchmark", "testbed", "testbed_key", "device", "branch")
"""The labels of one stored series' environment: every family has them."""
LABELS = (*SERIES_LABELS[:2], "metric", "rank", *SERIES_LABELS[2:])
"""The labels of a metric's family (``loss`` adds ``step``)."""


@dataclass(frozen=True)
class Unit:
    """How a perfgate unit is written in Prometheus: the factor to its base unit, the suffix
    the name ends with, and the name endings that spell the perfgate unit (removed first)."""

    scale: float
    suffix: str
    spelled: tuple[str, ...]
    anywhere: bool = False
    """The spelling may stand inside the name (``peak_memory_pct_of_capacity``)."""


_TIME = ("_seconds", "_milliseconds", "_microseconds", "_nanoseconds", "_ms", "_us", "_ns", "_s")
_BYTES = ("_bytes", "_b", "_kib", "_mib", "_gib", "_kb", "_mb", "_gb")
_RATE = ("_bytes_per_second", "_per_second", "_gb_s", "_mb_s", "_kb_s", "_b_s", "_per_s")
_SECONDS = {unit: to_ms * 1e-3 for unit, to_ms in TO_MS.items()}
_BYTES_IN = {"bytes": 1.0, "B": 1.0, "KiB": 1024.0, "MiB": 1024.0**2, "GiB": 1024.0**3}
_BYTES_IN |= {"KB": 1e3, "MB": 1e6, "GB": 1e9}
_UNITS = {
    **{unit: Unit(scale, "_seconds", _TIME) for unit, scale in _SECONDS.items()},
    **{unit: Unit(scale, "_bytes", _BYTES) for unit, scale in _BYTES_IN.items()},
    **{f"{u}/s": Unit(_BYTES_IN[u], "_bytes_per_second", _RATE) for u in ("B", "KB", "MB", "GB")},
    "1/s": Unit(1.0, "_per_second", _RATE),
    "%": Unit(0.01, "_ratio", ("_percent", "_pct"), anywhere=True),
}
_OTHER_RATE = Unit(1.0, "_per_second", _RATE)
"""Any other ``<things>/s`` (tokens/s, ops/s): a rate of a count."""
_AS_IS = Unit(1.0, "", ())


@dataclass(frozen=True)
class LatestValue:
    """The latest run's centre of one stored series (benchmark, metric, testbed, branch), in
    perfgate's unit; :func:`render_prometheus` converts it to the base unit."""

    project: str
    benchmark: str
    metric: str
    unit: str
    testbed: str
    """Readable (:meth:`Fingerprint.testbed <perfgate.models.Fingerprint.testbed>`)."""
    testbed_key: str
    """The fingerprint key (16 hex digits)."""
    device: str
    branch: str
    value: float
    run_id: str
    commit: str
    started_at: datetime


def _unit(unit: str) -> Unit:
    return _UNITS.get(unit) or (_OTHER_RATE if unit.endswith("/s") else _AS_IS)


def split_metric(metric: str) -> tuple[str, str, str]:
    """perfgate's name as (base name, rank, step): ``step_time_ms.rank1`` is
    (``step_time_ms``, ``1``, ""), ``loss.step25`` is (``loss``, "", ``25``)."""
    for suffix in (RANK_SUFFIX, STEP_SUFFIX):
        base, sep, number = metric.rpartition(suffix)
        if sep and base and number.isdigit():
            return (base, number, "") if suffix == RANK_SUFFIX else (base, "", number)
    return metric, "", ""


def prometheus_name(metric: str, unit: str) -> str:
    """The family name of ``metric`` (a base name, or a per-rank / per-step one: the rank and
    step become labels): ``perfgate_`` + the name with perfgate's unit spelling replaced by
    the base unit's suffix."""
    base, _, _ = split_metric(metric)
    name = re.sub(r"[^a-z0-9_]+", "_", base.lower()).strip("_") or "value"
    spec = _unit(unit)
    for spelled in spec.spelled:
        if name.endswith(spelled) and len(name) > len(spelled):
            name = name[: -len(spelled)]
            break
        if spec.anywhere and spelled + "_" in name:
            name = name.replace(spelled + "_", "_", 1)
            break
    return PREFIX + name + spec.suffix


def base_value(value: float, unit: str) -> float:
    """``value`` in the base unit of :func:`prometheus_name` (ms to s, % to a ratio, ...)."""
    return value * _unit(unit).scale


def _help(metric: str, unit: str, value: str = "latest run's centre") -> str:
    spec = lookup(metric)
    what = f"{spec.description} " if spec is not None else ""
    base = _unit(unit).suffix.lstrip("_").replace("_", " ") or unit
    in_unit = f", in {base}" if base else ""
    return f"{what}(perfgate metric {metric}, {value}{in_unit})"


def _families(values: Sequence[LatestValue]) -> Iterator[GaugeMetricFamily]:
    """One gauge family per Prometheus name, then per (benchmark, testbed, branch) the
    latest run's start time and its id and commit (when there are values)."""
    from prometheus_client.core import GaugeMetricFamily

    families: dict[str, GaugeMetricFamily] = {}
    stepped = {prometheus_name(v.metric, v.unit) for v in values if split_metric(v.metric)[2]}
    for v in sorted(values, key=lambda v: (v.metric, v.benchmark, v.testbed_key, v.branch)):
        name = prometheus_name(v.metric, v.unit)
        base, rank, step = split_metric(v.metric)
        if name not in families:
            labels = (*LABELS, "step") if name in stepped else LABELS
            families[name] = GaugeMetricFamily(name, _help(base, v.unit), labels=labels)
        row = [v.project, v.benchmark, base, rank, v.testbed, v.testbed_key, v.device, v.branch]
        if name in stepped:
            row.append(step)
        families[name].add_metric(row, base_value(v.value, v.unit))
    yield from families.values()
    runs: dict[tuple[str, ...], LatestValue] = {}
    for v in values:
        runs.setdefault((v.project, v.benchmark, v.testbed, v.testbed_key, v.device, v.branch), v)
    if not runs:
        return
    stamps = GaugeMetricFamily(
        PREFIX + "last_run_timestamp_seconds",
        "Start time of the latest run of each benchmark on each testbed and branch (Unix time)",
        labels=SERIES_LABELS,
    )
    info = GaugeMetricFamily(
        PREFIX + "run_info",
        "The latest run of each benchmark on each testbed and branch: its id and commit (always 1)",
        labels=(*SERIES_LABELS, "run_id", "commit"),
    )
    for key, v in sorted(runs.items()):
        stamps.add_metric(list(key), v.started_at.timestamp())
        info.add_metric([*key, v.run_id, v.commit], 1.0)
    yield stamps
    yield info


def registry_of(values: Sequence[LatestValue]) -> CollectorRegistry:
    """A registry holding ``values`` as gauges (needs prometheus_client, ``perfgate[export]``)."""
    require("prometheus_client", extra="export", feature=FEATURE)
    from prometheus_client import CollectorRegistry
    from prometheus_client.registry import Collector

    class Latest(Collector):
        def collect(self) -> Iterator[GaugeMetricFamily]:
            return _families(values)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Latest())
    return registry


def render_prometheus(values: Sequence[LatestValue]) -> str:
    """The exposition text (format 0.0.4) of ``values``."""
    registry = registry_of(values)
    from prometheus_client import generate_latest

    return generate_latest(registry).decode("utf-8")


_GITLAB_UNSAFE = re.compile(r"[#\"'\\\s]+")
"""GitLab's parser drops a line from its first '#' and splits it like a shell: a '#', a quote
or a backslash in a label value would cut or break the whole report."""


def render_gitlab_metrics(result: GateResult) -> str:
    """A GitLab metrics report (``artifacts: reports: metrics``) of a gate: the current
    value of each deciding comparison, named as :func:`render_prometheus` names it
    (``perfgate_step_time_seconds{benchmark="mlp",metric="step_time_ms",rank=""} 0.0201``),
    one line each, in OpenMetrics text ending in ``# EOF``. GitLab shows each name's value
    beside the target branch's in the merge request; budgets (judged on the same value) and
    comparisons without a current value are left out."""
    from perfgate.stats import decide

    families: dict[str, dict[str, float]] = {}  # one family's lines together (OpenMetrics)
    helps: dict[str, str] = {}
    for c in decide.deciding(result.comparisons):
        if c.kind == "budget" or c.current_centre is None:
            continue
        name = prometheus_name(c.metric, c.unit)
        base, rank, step = split_metric(c.metric)
        labels = [("benchmark", c.benchmark), ("metric", base), ("rank", rank)]
        labels += [("step", step)] if step else []
        labels += [("method", "paired")] if c.method == "paired" else []
        text = ",".join(f'{k}="{_GITLAB_UNSAFE.sub("_", v)}"' for k, v in labels)
        families.setdefault(name, {}).setdefault(
            f"{name}{{{text}}}", base_value(c.current_centre, c.unit)
        )
        helps.setdefault(name, _help(base, c.unit, "the judged run's centre"))
    lines: list[str] = []
    for name, series in families.items():
        escaped = helps[name].replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
        lines += [f"# HELP {name} {escaped}", f"# TYPE {name} gauge"]
        lines += [f"{key} {value!r}" for key, value in series.items()]
    return "\n".join([*lines, "# EOF"]) + "\n"
