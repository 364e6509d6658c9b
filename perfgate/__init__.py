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
    "Config": "perfgate.config",
    "load_config": "perfgate.config",
    "open_store": "perfgate.app",
    "detect_git_context": "perfgate.app",
    "detect_ci_context": "perfgate.app",
    "run_and_record": "perfgate.app",
    "run_ab_and_record": "perfgate.app",
    "confirm_and_record": "perfgate.app",
    "GateRequest": "perfgate.app",
    "GateOutcome": "perfgate.app",
    "run_gate": "perfgate.app",
    "compare": "perfgate.app",
    "compare_records": "perfgate.app",
    "gate_failed": "perfgate.app",
    "noise": "perfgate.app",
    "metric_history": "perfgate.app",
    "analyze_history": "perfgate.app",
    "record_alerts": "perfgate.app",
    "triage_alert": "perfgate.app",
    "prune": "perfgate.app",
    "benchmark_specs": "perfgate.app.specs",
    "ingest_and_record": "perfgate.app.ingest",
    "judge": "perfgate.stats.judge",
    "Judgement": "perfgate.stats.judge",
    "advise_path": "perfgate.app.advise",
    "advise_run": "perfgate.app.advise",
}
__all__ = ["__version__", *_API]

if TYPE_CHECKING:
    from perfgate.app import GateOutcome as GateOutcome
    from perfgate.app import GateRequest as GateRequest
    from perfgate.app import analyze_history as analyze_history
    from perfgate.app import compare as compare
    from perfgate.app import compare_records as compare_records
    from perfgate.app import confirm_and_record as confirm_and_record
    from perfgate.app import detect_ci_context as detect_ci_context
    from perfgate.app import detect_git_context as detect_git_context
    from perfgate.app import gate_failed as gate_failed
    from perfgate.app import metric_history as metric_history
    from perfgate.app import noise as noise
    from perfgate.app import open_store as open_store
    from perfgate.app import prune as prune
    from perfgate.app import record_alerts as record_alerts
    from perfgate.app import run_ab_and_record as run_ab_and_record
    from perfgate.app import run_and_record as run_and_record
    from perfgate.app import run_gate as run_gate
    from perfgate.app import triage_alert as triage_alert
    from perfgate.app.advise import advise_path as advise_path
    from perfgate.app.advise import advise_run as advise_run
    from perfgate.app.ingest import ingest_and_record as ingest_and_record
    from perfgate.app.specs import benchmark_specs as benchmark_specs
    from perfgate.config import Config as Config
    from perfgate.config import load_config as load_config
    from perfgate.stats.judge import Judgement as Judgement
    from perfgate.stats.judge import judge as judge


__getattr__ = lazy_exports(__name__, _API, globals())
