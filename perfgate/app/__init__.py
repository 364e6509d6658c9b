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

from typing import TYPE_CHECKING

from perfgate.lazy import lazy_exports

_NAMES = {
    "parse_budget": "perfgate.app.check",
    "CheckRequest": "perfgate.app.check_job",
    "run_check_job": "perfgate.app.check_job",
    "detect_ci_context": "perfgate.app.context",
    "detect_git_context": "perfgate.app.context",
    "baseline_window": "perfgate.app.gate",
    "compare": "perfgate.app.gate",
    "compare_records": "perfgate.app.gate",
    "gate_failed": "perfgate.app.gate",
    "noise": "perfgate.app.gate",
    "CiOutputs": "perfgate.app.gate_job",
    "CiReport": "perfgate.app.gate_job",
    "GateOutcome": "perfgate.app.gate_job",
    "GateRequest": "perfgate.app.gate_job",
    "compare_environments": "perfgate.app.gate_job",
    "conclude_gate": "perfgate.app.gate_job",
    "delivery_for": "perfgate.app.gate_job",
    "parse_fail_on": "perfgate.app.gate_job",
    "run_gate": "perfgate.app.gate_job",
    "analyze_history": "perfgate.app.history",
    "detect_series": "perfgate.app.history",
    "metric_history": "perfgate.app.history",
    "build_record": "perfgate.app.record",
    "confirm_and_record": "perfgate.app.record",
    "run_ab_and_record": "perfgate.app.record",
    "run_and_record": "perfgate.app.record",
    "IngestRequest": "perfgate.app.run_job",
    "Measure": "perfgate.app.run_job",
    "RunRequest": "perfgate.app.run_job",
    "ingest_file": "perfgate.app.run_job",
    "run_benchmarks": "perfgate.app.run_job",
    "list_alerts": "perfgate.app.triage",
    "prune": "perfgate.app.triage",
    "record_alerts": "perfgate.app.triage",
    "reset_baseline": "perfgate.app.triage",
    "triage_alert": "perfgate.app.triage",
    "open_store": "perfgate.store",
}
__all__ = list(_NAMES)

if TYPE_CHECKING:
    from perfgate.app.check import parse_budget as parse_budget
    from perfgate.app.check_job import CheckRequest as CheckRequest
    from perfgate.app.check_job import run_check_job as run_check_job
    from perfgate.app.context import detect_ci_context as detect_ci_context
    from perfgate.app.context import detect_git_context as detect_git_context
    from perfgate.app.gate import baseline_window as baseline_window
    from perfgate.app.gate import compare as compare
    from perfgate.app.gate import compare_records as compare_records
    from perfgate.app.gate import gate_failed as gate_failed
    from perfgate.app.gate import noise as noise
    from perfgate.app.gate_job import CiOutputs as CiOutputs
    from perfgate.app.gate_job import CiReport as CiReport
    from perfgate.app.gate_job import GateOutcome as GateOutcome
    from perfgate.app.gate_job import GateRequest as GateRequest
    from perfgate.app.gate_job import compare_environments as compare_environments
    from perfgate.app.gate_job import conclude_gate as conclude_gate
    from perfgate.app.gate_job import delivery_for as delivery_for
    from perfgate.app.gate_job import parse_fail_on as parse_fail_on
    from perfgate.app.gate_job import run_gate as run_gate
    from perfgate.app.history import analyze_history as analyze_history
    from perfgate.app.history import detect_series as detect_series
    from perfgate.app.history import metric_history as metric_history
    from perfgate.app.record import build_record as build_record
    from perfgate.app.record import confirm_and_record as confirm_and_record
    from perfgate.app.record import run_ab_and_record as run_ab_and_record
    from perfgate.app.record import run_and_record as run_and_record
    from perfgate.app.run_job import IngestRequest as IngestRequest
    from perfgate.app.run_job import Measure as Measure
    from perfgate.app.run_job import RunRequest as RunRequest
    from perfgate.app.run_job import ingest_file as ingest_file
    from perfgate.app.run_job import run_benchmarks as run_benchmarks
    from perfgate.app.triage import list_alerts as list_alerts
    from perfgate.app.triage import prune as prune
    from perfgate.app.triage import record_alerts as record_alerts
    from perfgate.app.triage import reset_baseline as reset_baseline
    from perfgate.app.triage import triage_alert as triage_alert
    from perfgate.store import open_store as open_store


__getattr__ = lazy_exports(__name__, _NAMES, globals())
