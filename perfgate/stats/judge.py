"""``perfgate.judge``: the gate's whole decision rule on plain numbers.

A team whose own harness measures its benchmarks judges those numbers with the same window
cut, noise model, tails, false-discovery control and verdict rule as ``perfgate gate``,
without a store::

    import perfgate

    verdicts = perfgate.judge(
        {"resnet": [[101.2, 100.8, 101.5], [100.9, 101.1, 100.7], [101.0, 101.4, 100.6]],
         "bert": [[55.1, 55.3, 54.9], [55.0, 55.2, 55.4], [54.8, 55.1, 55.0]]},
        {"resnet": [109.9, 110.3, 110.1], "bert": [55.2, 55.0, 55.1]},
    )
    verdicts["resnet"].verdict  # "regression"

``baseline`` maps each benchmark to its runs, oldest first; a run is the list of its
repeats' values in the metric's unit (one value per worker process), or one number for a
run of one repeat. ``current`` maps each benchmark to the current run's repeat values (or
one number). Runs of different benchmarks are taken to belong to the same CI job when they
stand at the same place counted from the newest (the last run of every benchmark is one
job, the one before it another, ...): that is how the gate tells a slower runner, which
moves every benchmark of its job, from one benchmark's change. Pure: no store, no file, no
clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from perfgate.errors import UsageError
from perfgate.metrics import default_policy, lookup, never_negative
from perfgate.models import Comparison, MetricPolicy, RunPoint
from perfgate.stats.compare import Candidate, compare_candidates
from perfgate.stats.summary import median
from perfgate.stats.window import HISTORY_SCAN_RUNS, net_centres, runs_since_last_change

BASELINE_WINDOW = 30
"""Runs a window holds at most: the newest 30 after the last change point, as the gate's
default ``baseline_window``."""

_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Judgement:
    """The verdict on one benchmark, as ``perfgate gate`` reports it."""

    verdict: str
    """``regression``, ``improvement``, ``unchanged``, ``inconclusive`` or ``no_baseline``."""
    change_pct: float | None
    ci_low_pct: float | None
    ci_high_pct: float | None
    mde_pct: float | None
    reason: str
    p_value: float | None = None
    p_adjusted: float | None = None
    baseline_runs: int = 0
    """How many runs of the baseline the window kept (after the change-point cut and cap)."""
    ci_level: float | None = None
    """The confidence level of [``ci_low_pct``, ``ci_high_pct``]: ``1 - alpha * called /
    tested`` (false-discovery adjusted, so wider in a gate of more benchmarks)."""


def _values(
    where: str, values: Sequence[float] | float, *, amount: str | None
) -> tuple[float, ...]:
    # a lone value (a harness with one process a run) is a run of one repeat
    items: list[Any] = [values]
    if isinstance(values, Iterable) and not isinstance(values, str | bytes):
        try:
            items = list(values)
        except TypeError:  # a 0-d array: one value
            items = [values]
    out = []
    for v in items:
        try:
            x = float(v)
        except (TypeError, ValueError, OverflowError):
            shown = repr(v) if len(repr(v)) <= 40 else repr(v)[:37] + "..."
            raise UsageError(f"{where}: {shown} is not a number") from None
        if not math.isfinite(x):
            raise UsageError(f"{where}: {v!r} is not a finite number")
        if amount is not None and x < 0:
            raise UsageError(f"{where}: {v!r} is negative, and {amount} never is")
        out.append(x)
    if not out:
        raise UsageError(f"{where}: a run needs at least one repeat value")
    return tuple(out)


def _runs(name: str, runs: Any) -> list[Any]:
    """A benchmark's baseline runs as a list; a string, a mapping or a plain number is not
    a list of runs (``"100"`` would be three runs of one digit each)."""
    if isinstance(runs, str | bytes | Mapping) or not isinstance(runs, Iterable):
        raise UsageError(
            f"baseline {name!r}: {runs!r} is not a list of runs (each a list of repeat values "
            "or one number)"
        )
    return list(runs)


def _rule(metric: Any, policy: Any) -> MetricPolicy:
    """The policy a judgement applies: ``policy``, else the catalogue's for ``metric``."""
    if not isinstance(metric, str) or not metric:
        raise UsageError(f"metric: {metric!r} is not a metric name")
    if policy is None:
        if lookup(metric) is None:
            raise UsageError(
                f"metric {metric!r} is not in perfgate's catalogue, so which way is better is "
                "not known: pass policy=perfgate.models.MetricPolicy(direction=..., "
                "min_effect_pct=...)"
            )
        return default_policy(metric)
    if not isinstance(policy, MetricPolicy):
        raise UsageError(f"policy: {type(policy).__name__}, not a MetricPolicy")
    for name in ("min_effect_pct", "min_effect_abs"):
        value = getattr(policy, name)
        if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
            raise UsageError(f"policy: {name} {value!r} is not a finite number >= 0")
    return policy


def _point(
    benchmark: str, metric: str, policy: MetricPolicy, run: int, repeats: tuple[float, ...]
) -> RunPoint:
    spec = lookup(metric)
    return RunPoint(
        run_id=f"{benchmark}#{run}",
        benchmark=benchmark,
        metric=metric,
        unit=spec.unit if spec is not None else "",
        direction=policy.direction,
        branch="",
        commit="",
        fingerprint_key="",
        started_at=_EPOCH + timedelta(minutes=run),
        centre=median(repeats),
        repeat_centres=repeats,
    )


def _windows(
    series: Mapping[str, Sequence[RunPoint]], metric: str, policy: MetricPolicy
) -> dict[str, tuple[RunPoint, ...]]:
    """The gate's window of each series: its runs after the last change point among the
    newest ``HISTORY_SCAN_RUNS`` (the scan net of the job factor the series share), the
    newest ``BASELINE_WINDOW`` of them."""
    scanned = {name: list(points[-HISTORY_SCAN_RUNS:]) for name, points in series.items()}
    fixed = policy.deterministic or policy.numerics
    centres = net_centres(
        {name: {metric: [(p.run_id, p.centre) for p in pts]} for name, pts in scanned.items()},
        deterministic=lambda _: fixed,
    )
    out = {}
    for name, pts in scanned.items():
        since = runs_since_last_change(centres[name], deterministic=lambda _: fixed)
        allowed = since.get(metric)
        kept = [p for p in pts if allowed is None or p.run_id in allowed]
        out[name] = tuple(kept[-BASELINE_WINDOW:])
    return out


def judge(
    baseline: Mapping[str, Sequence[Sequence[float] | float]],
    current: Mapping[str, Sequence[float] | float],
    *,
    metric: str = "step_time_ms",
    policy: MetricPolicy | None = None,
) -> dict[str, Judgement]:
    """Judge each benchmark of ``current`` against its ``baseline`` runs, all of them as one
    gate (one false-discovery family, one runner's noise shared between them).

    ``metric`` names the catalogue entry whose direction and minimum effect apply
    (``step_time_ms``: lower is better, 3%); ``policy`` overrides them, and is needed for a
    metric the catalogue does not hold (which way is better is not guessed). Returns a
    :class:`Judgement` per benchmark of ``current``, in its order; one missing from
    ``baseline`` is ``no_baseline``.

    Raises:
        UsageError: a value is not a finite number, or negative where the metric is an
            amount (a time, bytes, a count, a rate); a run has no values; a baseline is not
            a list of runs; ``metric`` is not in the catalogue and no ``policy`` is given; a
            policy's minimum effect is not a finite number >= 0.
    """
    for given, what in ((baseline, "baseline"), (current, "current")):
        if not isinstance(given, Mapping):
            raise UsageError(f"{what}: {type(given).__name__}, not a mapping of benchmark names")
    rule = _rule(metric, policy)
    spec = lookup(metric)
    amount = f"{metric} ({spec.unit})" if spec and never_negative(spec.unit) else None
    given = {name: _runs(name, runs) for name, runs in baseline.items()}
    n = max((len(runs) for runs in given.values()), default=0)
    series = {}
    for name in current:
        runs = given.get(name, [])
        # runs aligned from the newest: the last run of every benchmark is the same job
        offset = n - len(runs)
        series[name] = [
            _point(
                name,
                metric,
                rule,
                offset + i,
                _values(f"baseline {name!r} run {i}", run, amount=amount),
            )
            for i, run in enumerate(runs)
        ]
    windows = _windows(series, metric, rule)
    candidates = [
        Candidate(
            _point(name, metric, rule, n, _values(f"current {name!r}", repeats, amount=amount)),
            windows[name],
            rule,
        )
        for name, repeats in current.items()
    ]
    comparisons = compare_candidates(candidates)
    return {c.benchmark: _judgement(c) for c in comparisons}


def _judgement(c: Comparison) -> Judgement:
    return Judgement(
        verdict=c.verdict.value,
        change_pct=c.change_pct,
        ci_low_pct=c.ci_low_pct,
        ci_high_pct=c.ci_high_pct,
        ci_level=c.ci_level,
        mde_pct=c.mde_pct,
        reason=c.reason,
        p_value=c.p_value,
        p_adjusted=c.p_adjusted,
        baseline_runs=len(c.baseline_run_ids),
    )
