"""perfgate's use cases: the Python API behind the command line.

One module per use case; each function takes its collaborators (a
:class:`~perfgate.config.Config`, an open store) as arguments and returns frozen dataclasses
from :mod:`perfgate.models`. Nothing here prints. The names below are the facade
:mod:`perfgate` re-exports; each is imported on first use, so importing one use case does not
load the others (``perfgate detect`` needs no store).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_NAMES = {
    "Confirmation": "perfgate.models",
    "DetectedChange": "perfgate.models",
    "NoiseRow": "perfgate.models",
    "SqlStore": "perfgate.store",
    "TRIAGE_ACTIONS": "perfgate.app.triage",
    "Window": "perfgate.stats.window",
    "analyze_history": "perfgate.app.history",
    "baseline_window": "perfgate.app.gate",
    "build_record": "perfgate.app.record",
    "run_check": "perfgate.app.check",
    "compare": "perfgate.app.gate",
    "compare_records": "perfgate.app.gate",
    "confirm_and_record": "perfgate.app.record",
    "deciding": "perfgate.stats.decide",
    "default_actor": "perfgate.app.context",
    "detect_ci_context": "perfgate.app.context",
    "detect_git_context": "perfgate.app.context",
    "detect_series": "perfgate.app.history",
    "exclude_run": "perfgate.app.triage",
    "gate_failed": "perfgate.app.gate",
    "latest_runs": "perfgate.app.gate",
    "list_alerts": "perfgate.app.triage",
    "metric_history": "perfgate.app.history",
    "noise": "perfgate.app.gate",
    "open_store": "perfgate.store",
    "parse_budget": "perfgate.app.check",
    "overall_verdict": "perfgate.stats.decide",
    "prune": "perfgate.app.triage",
    "record_alerts": "perfgate.app.triage",
    "reset_baseline": "perfgate.app.triage",
    "run_ab_and_record": "perfgate.app.record",
    "run_and_record": "perfgate.app.record",
    "series_changes": "perfgate.app.history",
    "store_status": "perfgate.store.sql",
    "triage_alert": "perfgate.app.triage",
    "triage_trail": "perfgate.app.triage",
    "upgrade_store": "perfgate.store.sql",
    "with_advisor_findings": "perfgate.app.record",
    "with_triage": "perfgate.app.history",
}

__all__ = [
    "Confirmation",
    "DetectedChange",
    "NoiseRow",
    "SqlStore",
    "TRIAGE_ACTIONS",
    "Window",
    "analyze_history",
    "baseline_window",
    "build_record",
    "compare",
    "compare_records",
    "confirm_and_record",
    "deciding",
    "default_actor",
    "detect_ci_context",
    "detect_git_context",
    "detect_series",
    "exclude_run",
    "gate_failed",
    "latest_runs",
    "list_alerts",
    "metric_history",
    "noise",
    "open_store",
    "parse_budget",
    "overall_verdict",
    "prune",
    "record_alerts",
    "reset_baseline",
    "run_ab_and_record",
    "run_check",
    "run_and_record",
    "series_changes",
    "store_status",
    "triage_alert",
    "triage_trail",
    "upgrade_store",
    "with_advisor_findings",
    "with_triage",
]

if TYPE_CHECKING:
    from perfgate.app.check import parse_budget, run_check
    from perfgate.app.context import default_actor, detect_ci_context, detect_git_context
    from perfgate.app.gate import (
        baseline_window,
        compare,
        compare_records,
        gate_failed,
        latest_runs,
        noise,
    )
    from perfgate.app.history import (
        analyze_history,
        detect_series,
        metric_history,
        series_changes,
        with_triage,
    )
    from perfgate.app.record import (
        build_record,
        confirm_and_record,
        run_ab_and_record,
        run_and_record,
        with_advisor_findings,
    )
    from perfgate.app.triage import (
        TRIAGE_ACTIONS,
        exclude_run,
        list_alerts,
        prune,
        record_alerts,
        reset_baseline,
        triage_alert,
        triage_trail,
    )
    from perfgate.models import Confirmation, DetectedChange, NoiseRow
    from perfgate.stats.decide import deciding, overall_verdict
    from perfgate.stats.window import Window
    from perfgate.store import SqlStore, open_store
    from perfgate.store.sql import store_status, upgrade_store


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'perfgate.app' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
