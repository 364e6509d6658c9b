"""perfgate's use cases: the Python API behind the command line.

A command's whole job is one call here: ``perfgate gate`` and ``compare`` are
:func:`run_gate` (a :class:`GateRequest` in, a :class:`GateOutcome` out: the result, whether it
fails, the alerts recorded, the CI outputs and the delivery). These names are use cases and the
models they take and return; the store and the statistics stay behind them.

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
    "AcrossReport": "perfgate.models",
    "Alert": "perfgate.models",
    "Comparison": "perfgate.models",
    "GateResult": "perfgate.models",
    "Verdict": "perfgate.models",
    "CiOutputs": "perfgate.app.gate_job",
    "CiReport": "perfgate.app.gate_job",
    "GateOutcome": "perfgate.app.gate_job",
    "GateRequest": "perfgate.app.gate_job",
    "compare_environments": "perfgate.app.gate_job",
    "conclude_gate": "perfgate.app.gate_job",
    "delivery_for": "perfgate.app.gate_job",
    "parse_fail_on": "perfgate.app.gate_job",
    "run_gate": "perfgate.app.gate_job",
    "CheckJobOutcome": "perfgate.app.check_job",
    "CheckRequest": "perfgate.app.check_job",
    "run_check_job": "perfgate.app.check_job",
    "IngestRequest": "perfgate.app.run_job",
    "Measure": "perfgate.app.run_job",
    "RunOutcome": "perfgate.app.run_job",
    "RunRequest": "perfgate.app.run_job",
    "ingest_file": "perfgate.app.run_job",
    "run_benchmarks": "perfgate.app.run_job",
    "Confirmation": "perfgate.models",
    "DetectedChange": "perfgate.models",
    "NoiseRow": "perfgate.models",
    "TRIAGE_ACTIONS": "perfgate.app.triage",
    "analyze_history": "perfgate.app.history",
    "baseline_window": "perfgate.app.gate",
    "build_record": "perfgate.app.record",
    "run_check": "perfgate.app.check",
    "compare": "perfgate.app.gate",
    "compare_records": "perfgate.app.gate",
    "confirm_and_record": "perfgate.app.record",
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
    "prune": "perfgate.app.triage",
    "record_alerts": "perfgate.app.triage",
    "reset_baseline": "perfgate.app.triage",
    "run_ab_and_record": "perfgate.app.record",
    "run_and_record": "perfgate.app.record",
    "series_changes": "perfgate.app.history",
    "triage_alert": "perfgate.app.triage",
    "triage_trail": "perfgate.app.triage",
    "with_advisor_findings": "perfgate.app.record",
    "with_triage": "perfgate.app.history",
}

__all__ = [
    "AcrossReport",
    "Alert",
    "Comparison",
    "GateResult",
    "Verdict",
    "CiOutputs",
    "CiReport",
    "GateOutcome",
    "GateRequest",
    "compare_environments",
    "conclude_gate",
    "delivery_for",
    "parse_fail_on",
    "run_gate",
    "CheckJobOutcome",
    "CheckRequest",
    "run_check_job",
    "IngestRequest",
    "Measure",
    "RunOutcome",
    "RunRequest",
    "ingest_file",
    "run_benchmarks",
    "Confirmation",
    "DetectedChange",
    "NoiseRow",
    "TRIAGE_ACTIONS",
    "analyze_history",
    "baseline_window",
    "build_record",
    "compare",
    "compare_records",
    "confirm_and_record",
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
    "prune",
    "record_alerts",
    "reset_baseline",
    "run_ab_and_record",
    "run_check",
    "run_and_record",
    "series_changes",
    "triage_alert",
    "triage_trail",
    "with_advisor_findings",
    "with_triage",
]

if TYPE_CHECKING:
    from perfgate.app.check import parse_budget, run_check
    from perfgate.app.check_job import CheckJobOutcome, CheckRequest, run_check_job
    from perfgate.app.context import default_actor, detect_ci_context, detect_git_context
    from perfgate.app.gate import (
        baseline_window,
        compare,
        compare_records,
        gate_failed,
        latest_runs,
        noise,
    )
    from perfgate.app.gate_job import (
        CiOutputs,
        CiReport,
        GateOutcome,
        GateRequest,
        compare_environments,
        conclude_gate,
        delivery_for,
        parse_fail_on,
        run_gate,
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
    from perfgate.app.run_job import (
        IngestRequest,
        Measure,
        RunOutcome,
        RunRequest,
        ingest_file,
        run_benchmarks,
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
    from perfgate.models import (
        AcrossReport,
        Alert,
        Comparison,
        Confirmation,
        DetectedChange,
        GateResult,
        NoiseRow,
        Verdict,
    )
    from perfgate.store import open_store


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'perfgate.app' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
