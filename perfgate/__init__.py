"""perfgate: a CI performance-regression gate for deep-learning training and inference.

The Python API is the facade below: the same use cases the command line calls, each taking a
:class:`Config` and an open store and returning frozen dataclasses (:mod:`perfgate.models`).
A script that records a built-in workload and gates it::

    import perfgate

    config = perfgate.load_config()
    with perfgate.open_store(config.database_url) as store:
        git = perfgate.detect_git_context({}, Path.cwd(), branch="feat")
        specs = perfgate.benchmark_specs(config, workloads=["mlp"])
        perfgate.run_and_record(config, specs, store, git=git, ci=perfgate.detect_ci_context({}),
                                trace_root=Path(".perfgate/traces"))
        result = perfgate.compare(config, store, branch="feat", against="main")
        failed = perfgate.gate_failed(config, result)

The names are imported on first use, so ``import perfgate`` (and ``perfgate --help``) stays
light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfgate.lazy import lazy_exports

# The one place the version is written: pyproject.toml reads it from here (a plain literal,
# so the build reads it without importing perfgate).
__version__ = "0.1.0"

_API = {
    # configuration and the store
    "Config": "perfgate.config",
    "load_config": "perfgate.config",
    "open_store": "perfgate.app",
    # what to run, and recording it
    "benchmark_specs": "perfgate.app.specs",
    "detect_git_context": "perfgate.app",
    "detect_ci_context": "perfgate.app",
    "run_and_record": "perfgate.app",
    "run_ab_and_record": "perfgate.app",
    "confirm_and_record": "perfgate.app",
    "ingest_and_record": "perfgate.app.ingest",
    # a command's whole job: judging, alerts, CI outputs and delivery (``perfgate gate``)
    "GateRequest": "perfgate.app",
    "GateOutcome": "perfgate.app",
    "run_gate": "perfgate.app",
    # judging
    "compare": "perfgate.app",
    "compare_records": "perfgate.app",
    "gate_failed": "perfgate.app",
    "noise": "perfgate.app",
    "judge": "perfgate.stats.judge",
    "Judgement": "perfgate.stats.judge",
    # history and the team workflow
    "metric_history": "perfgate.app",
    "analyze_history": "perfgate.app",
    "record_alerts": "perfgate.app",
    "triage_alert": "perfgate.app",
    "prune": "perfgate.app",
    # explaining
    "advise_path": "perfgate.app.advise",
    "advise_run": "perfgate.app.advise",
}

__all__ = [
    "__version__",
    "Config",
    "GateOutcome",
    "GateRequest",
    "Judgement",
    "advise_path",
    "advise_run",
    "analyze_history",
    "benchmark_specs",
    "compare",
    "compare_records",
    "confirm_and_record",
    "detect_ci_context",
    "detect_git_context",
    "gate_failed",
    "ingest_and_record",
    "judge",
    "load_config",
    "metric_history",
    "noise",
    "open_store",
    "prune",
    "record_alerts",
    "run_ab_and_record",
    "run_and_record",
    "run_gate",
    "triage_alert",
]

if TYPE_CHECKING:
    from perfgate.app import (
        GateOutcome,
        GateRequest,
        analyze_history,
        compare,
        compare_records,
        confirm_and_record,
        detect_ci_context,
        detect_git_context,
        gate_failed,
        metric_history,
        noise,
        open_store,
        prune,
        record_alerts,
        run_ab_and_record,
        run_and_record,
        run_gate,
        triage_alert,
    )
    from perfgate.app.advise import advise_path, advise_run
    from perfgate.app.ingest import ingest_and_record
    from perfgate.app.specs import benchmark_specs
    from perfgate.config import Config, load_config
    from perfgate.stats.judge import Judgement, judge


__getattr__ = lazy_exports(__name__, _API, globals())
