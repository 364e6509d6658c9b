"""Latest values in the Prometheus exposition format, printed or pushed to a Pushgateway.

One gauge family per perfgate metric, named by Prometheus conventions with the unit in the
name (``step_time_ms`` -> ``perfgate_step_time_milliseconds``, ``peak_memory_bytes`` ->
``perfgate_peak_memory_bytes``, ``throughput_samples_per_s`` ->
``perfgate_throughput_samples_per_second``), labelled ``project``, ``benchmark``,
``metric`` (perfgate's own name), ``testbed`` (the fingerprint key) and ``branch``; plus
``perfgate_last_run_timestamp_seconds`` per series, so a dashboard can tell stale data.
Values are the centre of each series' latest run. Building the text is pure; pushing is the
only I/O and fails as :class:`~perfgate.errors.ReportError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.error import URLError
from urllib.parse import unquote

from perfgate.errors import ConfigError, ReportError, require

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import GaugeMetricFamily

FEATURE = "perfgate export prometheus"

PREFIX = "perfgate_"
LABELS = ("project", "benchmark", "metric", "testbed", "branch")
_SUFFIXES = (
    ("_per_s", "_per_second"),
    ("_ms", "_milliseconds"),
    ("_us", "_microseconds"),
    ("_ns", "_nanoseconds"),
    ("_s", "_seconds"),
    ("_pct", "_percent"),
)
_UNIT_SUFFIX = {
    "ms": "_milliseconds",
    "us": "_microseconds",
    "s": "_seconds",
    "bytes": "_bytes",
    "1/s": "_per_second",
    "%": "_percent",
}


@dataclass(frozen=True)
class LatestValue:
    """The latest run's centre of one series (benchmark, metric, testbed, branch)."""

    project: str
    benchmark: str
    metric: str
    unit: str
    testbed: str
    branch: str
    value: float
    run_id: str
    commit: str
    started_at: datetime


def prometheus_name(metric: str, unit: str) -> str:
    """The family name of ``metric``: ``perfgate_`` + the name with its unit spelled out."""
    name = re.sub(r"[^a-zA-Z0-9_]", "_", metric).lower()
    for short, long in _SUFFIXES:
        if name.endswith(short):
            name = name[: -len(short)] + long
            break
    else:
        suffix = _UNIT_SUFFIX.get(unit, "")
        if suffix and not name.endswith(suffix):
            name += suffix
    return PREFIX + name


def _families(values: Sequence[LatestValue]) -> Iterator[GaugeMetricFamily]:
    """One gauge family per metric, then the last-run timestamps (when there are values)."""
    from prometheus_client.core import GaugeMetricFamily

    families: dict[str, GaugeMetricFamily] = {}
    for v in sorted(values, key=lambda v: (v.metric, v.benchmark, v.testbed, v.branch)):
        name = prometheus_name(v.metric, v.unit)
        if name not in families:
            families[name] = GaugeMetricFamily(
                name,
                f"Latest run's centre of a perfgate metric ({v.metric}, {v.unit or 'no unit'})",
                labels=LABELS,
            )
        families[name].add_metric([v.project, v.benchmark, v.metric, v.testbed, v.branch], v.value)
    stamps = GaugeMetricFamily(
        PREFIX + "last_run_timestamp_seconds",
        "Start time of the latest run of each series (Unix seconds)",
        labels=LABELS,
    )
    for v in values:
        stamps.add_metric(
            [v.project, v.benchmark, v.metric, v.testbed, v.branch], v.started_at.timestamp()
        )
    yield from families.values()
    if values:
        yield stamps


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


def split_credentials(gateway: str) -> tuple[str, str | None, str | None]:
    """``http://user:pass@host:9091/x`` as (``http://host:9091/x``, user, password), the
    credentials ending at the *last* ``@`` of the authority (a host name has none, so an
    unencoded ``@`` in the password stays in the password); a URL without credentials
    comes back as it is, with (None, None)."""
    scheme, sep, rest = gateway.partition("://")
    match = re.match(r"[^/?#]*", rest)
    end = match.end() if match else 0
    netloc, path = rest[:end], rest[end:]
    if not sep or "@" not in netloc:
        return gateway, None, None
    userinfo, _, host = netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return f"{scheme}://{host}{path}", unquote(user), unquote(password)


def push_prometheus(
    values: Sequence[LatestValue], gateway: str, *, job: str, timeout: float = 10.0
) -> None:
    """PUT ``values`` to the Pushgateway at ``gateway`` under ``/metrics/job/<job>``
    (replacing what that job pushed before). Credentials in the URL
    (``http://user:password@host:9091``) are sent as HTTP basic auth."""
    # Messages show the URL without user:password@ (a credential never reaches a CI log).
    shown, user, password = split_credentials(gateway)
    if not gateway.startswith(("http://", "https://")):
        raise ConfigError(f"--push-gateway {shown!r}: expected an http(s):// URL")
    registry = registry_of(values)
    from prometheus_client import push_to_gateway
    from prometheus_client.exposition import basic_auth_handler, default_handler

    def handler(url: str, method: str, timeout: float | None, headers: Any, data: bytes) -> Any:
        if user is None:
            return default_handler(url, method, timeout, headers, data)
        return basic_auth_handler(url, method, timeout, headers, data, user, password)

    try:
        push_to_gateway(shown, job=job, registry=registry, timeout=timeout, handler=handler)
    except (URLError, OSError, ValueError) as exc:
        reason = str(getattr(exc, "reason", None) or exc).replace(gateway, shown)
        if password:
            reason = reason.replace(password, "***")
        raise ReportError(f"push to the Pushgateway {shown} failed: {reason}") from None
