"""The gate as one use case from Python (:func:`perfgate.app.run_gate`): a request in, the
whole job done (alerts, CI outputs, delivery) and said in the outcome, nothing printed. Real
SQLite stores in a temporary directory; the CLI's ``gate`` and ``compare`` are the same call."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import fill, perfgate, record

from perfgate import app
from perfgate.config import Config
from perfgate.errors import ConfigError
from perfgate.models import GateResult, Verdict
from perfgate.store import open_store

NOT_CI: dict[str, str] = {}
"""The environment the use case is given: no CI, so nothing is detected from the job."""


@pytest.fixture
def url(tmp_path: Path) -> str:
    """Main's history of ``mlp`` at 20 ms, then main's newest run at 26 ms (a regression on
    the base branch itself), and a feature branch at 26 ms; ``cnn`` steady at 7 ms on main,
    10 ms on the feature branch."""
    url = f"sqlite:///{tmp_path / 'perfgate.db'}"
    runs = [record(i, 20.0) for i in range(8)]
    runs += [record(8, 26.0), record(20, 26.0, branch="feat")]
    runs += [record(i, 7.0, benchmark="cnn", seed=2) for i in range(9)]
    runs += [record(20, 10.0, benchmark="cnn", branch="feat", seed=2)]
    fill(url, runs)
    return url


def request(url: str, tmp_path: Path, **changes: object) -> app.GateRequest:
    fields: dict[str, object] = {
        "config": Config(database_url=url),
        "branch": "main",
        "against": "main",
        "env": NOT_CI,
        "cwd": tmp_path,
    }
    fields.update(changes)
    return app.GateRequest(**fields)  # type: ignore[arg-type]


def test_a_gate_on_main_records_its_alert_writes_ci_outputs_and_delivers(
    url: str, tmp_path: Path
) -> None:
    junit, metrics, report_dir = tmp_path / "j.xml", tmp_path / "m.txt", tmp_path / "report"
    outcome = app.run_gate(
        request(
            url,
            tmp_path,
            outputs=app.CiOutputs(junit=junit, gitlab_metrics=metrics, annotations=True),
            delivery=app.delivery_for(report_dir=report_dir),
        )
    )
    assert outcome.result.verdict is Verdict.REGRESSION
    assert outcome.failed and outcome.fail_on == Config().fail_on
    # the alert: recorded, returned, and in the store
    (alert,) = outcome.alerts
    assert (alert.benchmark, alert.metric, alert.run_id) == ("mlp", "step_time_ms", "mlp-main-008")
    with open_store(url) as store:
        assert [a.id for a in app.list_alerts(Config(database_url=url), store)] == [alert.id]
    # the CI outputs: annotation lines to print, files written
    (line,) = outcome.ci.annotations
    assert line.startswith("::error title=perfgate%3A mlp step_time_ms regression::")
    assert outcome.ci.written == (junit, metrics) and outcome.ci.warnings == ()
    suites = {s.get("name"): s.get("failures") for s in ET.parse(junit).getroot()}
    assert suites == {"cnn": "0", "mlp": "1"}
    assert 'benchmark="mlp"' in metrics.read_text()
    # the delivery: the report directory
    assert outcome.delivery is not None
    assert outcome.delivery.done == (f"report written to {report_dir / 'report.md'}",)
    assert "regression" in (report_dir / "report.md").read_text()
    assert outcome.warnings == ()


def test_a_second_gate_of_the_same_run_records_no_second_alert(url: str, tmp_path: Path) -> None:
    first = app.run_gate(request(url, tmp_path))
    again = app.run_gate(request(url, tmp_path))
    assert len(first.alerts) == 1 and again.alerts == ()


@pytest.mark.parametrize(
    ("fail_on", "failed", "level"),
    [({Verdict.REGRESSION}, False, "warning"), ({Verdict.INCONCLUSIVE}, True, "error")],
)
def test_a_pr_gate_raises_no_alert_and_its_policy_decides_what_fails(
    url: str, tmp_path: Path, fail_on: set[Verdict], failed: bool, level: str
) -> None:
    """feat at 26 ms against main's window, whose newest run is at 26 ms too: inconclusive;
    whether that fails, and how it is annotated, is the policy's."""
    outcome = app.run_gate(
        request(
            url,
            tmp_path,
            branch="feat",
            benchmarks=("mlp",),
            fail_on=frozenset(fail_on),
            outputs=app.CiOutputs(annotations=True),
        )
    )
    assert outcome.result.verdict is Verdict.INCONCLUSIVE
    assert outcome.alerts == ()  # never on a PR branch
    assert outcome.failed is failed and outcome.fail_on == fail_on
    (line,) = outcome.ci.annotations
    assert line.startswith(f"::{level} title=perfgate%3A mlp step_time_ms inconclusive::")
    assert outcome.delivery is None


def test_a_regression_on_a_pr_branch_fails_the_gate_and_raises_no_alert(
    url: str, tmp_path: Path
) -> None:
    outcome = app.run_gate(request(url, tmp_path, branch="feat", benchmarks=("cnn",)))
    assert outcome.result.verdict is Verdict.REGRESSION and outcome.failed
    assert outcome.alerts == ()  # a PR's regression is the PR's, said in its comment


def test_compare_is_the_same_use_case_without_alerts_or_outputs(url: str, tmp_path: Path) -> None:
    outcome = app.run_gate(
        request(url, tmp_path, alerts=False, outputs=app.CiOutputs(annotations=False))
    )
    assert outcome.failed and outcome.alerts == () and outcome.ci == app.CiReport()
    with open_store(url) as store:
        assert app.list_alerts(Config(database_url=url), store) == []


def test_an_output_that_cannot_be_written_is_a_warning_not_another_verdict(
    url: str, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    outputs = app.CiOutputs(junit=blocker / "j.xml", annotations=False)
    outcome = app.run_gate(request(url, tmp_path, outputs=outputs))
    assert outcome.failed and outcome.ci.written == ()
    (warning,) = outcome.ci.warnings
    assert warning.startswith(f"cannot write {blocker / 'j.xml'}: ")


def test_conclude_gate_is_the_second_half_for_a_gate_decided_elsewhere(tmp_path: Path) -> None:
    result = GateResult("feat", "main", Verdict.NO_BASELINE, ())
    config = Config(database_url=f"sqlite:///{tmp_path / 'none.db'}")
    outcome = app.conclude_gate(config, result, env=NOT_CI, outputs=app.CiOutputs())
    assert not outcome.failed and outcome.delivery is None and outcome.ci == app.CiReport()
    assert not (tmp_path / "none.db").exists()  # nothing to deliver: no store opened


def test_fail_on_is_parsed_once_for_the_cli_and_the_api() -> None:
    assert app.parse_fail_on("regression, inconclusive") == {
        Verdict.REGRESSION,
        Verdict.INCONCLUSIVE,
    }
    with pytest.raises(Exception, match="empty"):
        app.parse_fail_on(" , ")


def test_app_exports_use_cases_and_models_not_the_store_or_the_statistics() -> None:
    for name in ("run_gate", "conclude_gate", "GateRequest", "GateOutcome", "CiOutputs"):
        assert name in app.__all__
    for name in ("SqlStore", "Window", "deciding", "overall_verdict"):
        assert name not in app.__all__


def test_the_cli_gate_records_the_alert_and_compare_does_not(url: str) -> None:
    args = ["--db", url, "--branch", "main", "--against", "main", "--verbose"]  # no CI variables
    compared = perfgate(None, "compare", *args)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    with open_store(url) as store:
        assert app.list_alerts(Config(database_url=url), store) == []
    gated = perfgate(None, "gate", *args)
    assert gated.returncode == 1, gated.stdout + gated.stderr
    with open_store(url) as store:
        assert len(app.list_alerts(Config(database_url=url), store)) == 1


def test_an_empty_fail_on_is_refused_before_the_gate_runs(url: str, tmp_path: Path) -> None:
    # fail_on=frozenset() failed on nothing: a script's gate never failed
    with pytest.raises(ConfigError, match="fail_on: empty"):
        request(url, tmp_path, fail_on=frozenset())
