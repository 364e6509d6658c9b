"""Budgets: the absolute limits of a suite's ``[budgets]``, judged on one run.

A budget says what a metric must be on every run (``latency_p99_ms <= 100``,
``aicore_util_pct >= 70``), whatever its history: a P99 of 140 ms that has always been
140 ms is no regression, and breaks its budget on every run. So a budget is judged on the
run alone, with no window, no test and no false-discovery family: the run's centre (the
value a history comparison compares, :attr:`perfgate.models.Summary.centre`) against the
limit. Its verdict is ``over_budget`` or ``unchanged`` (within it), its comparison has
``kind`` ``budget`` and ``method`` ``budget``, and it sits beside the history and paired
comparisons, never mixed into them.

A budget relative to the reference (``">= 95% of reference"``) takes its limit from the
reference's value of the metric for the benchmark (else for every benchmark, ``"*"``).

:func:`budget_verdict` is the one place a budget's pass or breach is decided.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from perfgate.config import ALL_BENCHMARKS, Budget
from perfgate.metrics import base_name, lookup
from perfgate.models import Comparison, Direction, Measurement, RunRecord, Verdict

Reference = Mapping[str, Mapping[str, float]]
"""Official numbers: benchmark name (``"*"``: every benchmark) -> metric -> value."""

KIND = "budget"
"""``Comparison.kind`` and ``Comparison.method`` of a budget's comparison."""


@dataclass(frozen=True)
class BudgetJudgement:
    """What a run's budgets found: one comparison per budgeted metric the run has, and a
    note per budget that could not be judged (the run has no such metric, the reference
    has no value for it)."""

    comparisons: tuple[Comparison, ...]
    notes: tuple[str, ...]


def budget_verdict(budget: Budget, value: float, limit: float) -> Verdict:
    """``over_budget`` when ``value`` breaks ``budget`` with its limit at ``limit``, else
    ``unchanged``: the decision of every budget."""
    return Verdict.UNCHANGED if budget.allows(value, limit) else Verdict.OVER_BUDGET


def _suffix(unit: str) -> str:
    if unit == "%":
        return "%"
    if unit == "1/s":
        return "/s"
    if unit in ("", "count"):
        return ""
    return f" {unit}"


def amount(value: float, unit: str) -> str:
    """A run's value with its unit, for a budget's reason (``140.0 ms``, ``72.5%``)."""
    if unit == "bytes":
        for scale, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if abs(value) >= scale:
                return f"{value / scale:.2f} {name}"
        return f"{value:.0f} B"
    if abs(value) >= 10_000:
        number = f"{value:,.0f}"
    elif abs(value) >= 1 or value == 0:
        number = f"{value:.1f}"
    else:
        number = f"{value:.3g}"
    return number + _suffix(unit)


def limit_text(limit: float, unit: str) -> str:
    """A limit with its unit, as a suite would write it (``100 ms``, ``70%``)."""
    if unit == "bytes":
        return amount(limit, unit)
    return f"{limit:.6g}{_suffix(unit)}"


def _margin(value: float, limit: float, unit: str) -> str:
    """How far ``value`` is from ``limit``: in points for a percentage, else relative."""
    if unit == "%":
        return f"{abs(value - limit):.1f} points"
    if limit == 0:
        return amount(abs(value - limit), unit)
    return f"{abs(value - limit) / abs(limit) * 100:.1f}%"


def budget_comparison(
    budget: Budget,
    measurement: Measurement,
    *,
    benchmark: str,
    run_id: str,
    limit: float,
    reference_value: float | None = None,
) -> Comparison:
    """The comparison of one measurement with its budget, the limit resolved (a relative
    budget's: ``budget.value`` times ``reference_value``). Its direction is the budget's
    (an upper limit reads lower-is-better), its ``change_pct`` the value's distance from the
    limit in % of it."""
    value = measurement.summary.centre
    unit = measurement.unit
    verdict = budget_verdict(budget, value, limit)
    stated = f"{budget.operator} {limit_text(limit, unit)}"
    if budget.of_reference and reference_value is not None:
        stated += f" ({budget.value * 100:g}% of the reference {limit_text(reference_value, unit)})"
    what = f"{measurement.metric} {amount(value, unit)}"
    if verdict is Verdict.OVER_BUDGET:
        if value == limit:
            reason = f"{what} is at the limit of its budget {stated}, which excludes it"
        else:
            side = "over" if budget.upper else "under"
            reason = f"{what} is {side} its budget {stated} (by {_margin(value, limit, unit)})"
    elif value == limit:
        reason = f"{what} is within its budget {stated}, at the limit"
    else:
        reason = f"{what} is within its budget {stated} ({_margin(value, limit, unit)} to spare)"
    return Comparison(
        benchmark=benchmark,
        metric=measurement.metric,
        unit=unit,
        direction=Direction.LOWER_IS_BETTER if budget.upper else Direction.HIGHER_IS_BETTER,
        verdict=verdict,
        reason=reason,
        current_run_id=run_id,
        current_centre=value,
        change_pct=None if limit == 0 else (value - limit) / abs(limit) * 100.0,
        method=KIND,
        kind=KIND,
        limit=limit,
        budget=budget.text,
    )


def _reference_value(reference: Reference, benchmark: str, metric: str) -> float | None:
    """The reference's value of ``metric`` for ``benchmark``, else for every benchmark; a
    per-rank metric takes its base's where the reference has none of its own."""
    for name in (metric, base_name(metric)):
        for key in (benchmark, ALL_BENCHMARKS):
            value = reference.get(key, {}).get(name)
            if value is not None:
                return value
    return None


def _missing(record: RunRecord, metric: str) -> str:
    """Why ``record`` has no ``metric``, in words: a profile note about it, no profile at all,
    or a name the catalogue does not know (with the nearest name the run has)."""
    have = [m.metric for m in record.measurements]
    close = difflib.get_close_matches(metric, have, n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]}?" if close else ""
    if lookup(metric) is None:
        return f"the run has no {metric} (not a metric perfgate records{hint})"
    profiles = [p for p in (record.profile, *record.rank_profiles) if p is not None]
    for profile in profiles:
        for note in profile.notes:
            if note.startswith(f"{metric}:"):
                return f"the run has no {metric} ({note.removeprefix(f'{metric}:').strip()})"
    if not profiles:
        return f"the run has no {metric} (it has no profile{hint})"
    return f"the run has no {metric} (not measured{hint})"


def judge_budgets(
    record: RunRecord, budgets: Mapping[str, Budget], reference: Reference | None = None
) -> BudgetJudgement:
    """Judge ``record`` against ``budgets`` (metric -> budget, :meth:`Config.budgets_for`).

    Every measurement with a budget on its own name, else on its base name (each rank of
    ``step_time_ms.rank<r>`` by a budget on ``step_time_ms``), gets one comparison. A budget
    that judged nothing, or whose reference value is missing, gets a note; ``reference``
    is needed only by budgets relative to it.
    """
    comparisons: list[Comparison] = []
    notes: list[str] = []
    used: set[str] = set()
    for m in record.measurements:
        budget = budgets.get(m.metric) or budgets.get(base_name(m.metric))
        if budget is None:
            continue
        used.add(budget.metric)
        reference_value: float | None = None
        limit = budget.value
        if budget.of_reference:
            reference_value = _reference_value(reference or {}, record.benchmark, m.metric)
            if reference_value is None:
                notes.append(
                    f"budget {m.metric} {budget.text}: the reference has no {m.metric} for "
                    f"{record.benchmark} (nor for every benchmark, {ALL_BENCHMARKS!r})"
                )
                continue
            limit = budget.value * reference_value
        comparisons.append(
            budget_comparison(
                budget,
                m,
                benchmark=record.benchmark,
                run_id=record.id,
                limit=limit,
                reference_value=reference_value,
            )
        )
    for metric, budget in budgets.items():
        if metric not in used:
            notes.append(f"budget {metric} {budget.text}: {_missing(record, metric)}")
    return BudgetJudgement(tuple(comparisons), tuple(notes))
