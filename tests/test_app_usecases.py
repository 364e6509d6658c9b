"""``run``, ``ingest``, ``check`` and the store's commands as use cases from Python
(:mod:`perfgate.app.run_job`, :mod:`perfgate.app.check_job`, :mod:`perfgate.app.stored`): a
request in, the whole job done (the store opened, written, closed), the result out, nothing
printed. Real SQLite stores and real worker processes in a temporary directory; the commands
are these calls plus rendering, so their command functions stay short."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import fill, record

from perfgate import app
from perfgate.app import stored
from perfgate.config import Config
from perfgate.errors import ConfigError, UsageError
from perfgate.models import Verdict
from perfgate.store import open_store

NOT_CI: dict[str, str] = {}
"""The environment the use cases are given: no CI, so nothing is detected from the job."""

DATA = Path(__file__).parent / "data"

QUICK = app.Measure(
    workloads=("mlp",), repeats=1, warmup=1, measured=3, profiled=0, branch="main", commit="c0"
)
"""One repeat of a few steps of the built-in ``mlp``, unprofiled, recorded on main."""


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'perfgate.db'}"


def test_run_records_one_run_per_benchmark_and_prints_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _url(tmp_path)
    lines: list[str] = []
    request = app.RunRequest(
        config=Config(database_url=url), measure=QUICK, env=NOT_CI, cwd=tmp_path
    )
    outcome = app.run_benchmarks(request, progress=lines.append)
    (run,) = outcome.records
    assert (run.benchmark, run.git.branch, run.git.commit) == ("mlp", "main", "c0")
    assert outcome.confirmations == ()
    assert lines  # one per finished repeat
    assert capsys.readouterr() == ("", "")
    with open_store(url, create=False) as store:
        assert store.get_run(run.id).id == run.id


def test_measure_applies_flags_and_params_over_the_suite() -> None:
    measure = app.Measure(workloads=("mlp",), repeats=2, params=(("slowdown", 0.5),))
    (spec,) = measure.specs(Config())
    assert (spec.name, spec.repeats, spec.params["slowdown"]) == ("mlp", 2, 0.5)
    with pytest.raises(ConfigError, match="unknown"):
        app.Measure(workloads=("nope",)).specs(Config())


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("repeats", 0, "overrides.repeats: expected an integer >= 1, got 0"),
        ("measured", 1, "overrides.measured: expected an integer >= 2, got 1"),
        ("device", "tpu", "overrides.device: expected one of cpu, cuda, npu, got 'tpu'"),
        ("timeout_s", -5.0, "overrides.timeout: expected a number of seconds > 0, got -5.0"),
    ],
)
def test_measure_refuses_a_flag_the_suite_would_refuse(flag: str, value: object, said: str) -> None:
    # a script's Measure(repeats=0) measured nothing and recorded nothing, silently
    with pytest.raises(ConfigError) as caught:
        app.Measure(workloads=("mlp",), **{flag: value}).specs(Config())
    assert str(caught.value) == said


def test_ingest_records_a_result_file_and_reads_before_it_opens_the_store(
    tmp_path: Path,
) -> None:
    url = _url(tmp_path)
    bench = DATA / "results" / "pytest_benchmark" / "bench.json"
    request = app.IngestRequest(
        config=Config(database_url=url),
        path=bench,
        benchmark="unit",
        branch="main",
        env=NOT_CI,
        cwd=tmp_path,
    )
    result = app.ingest_file(request)
    names = [result.record.benchmark, *(o.record.benchmark for o in result.others)]
    assert names and all(n.startswith("unit/") for n in names)
    with open_store(url, create=False) as store:
        assert store.get_run(result.record.id).benchmark == names[0]
    # a path that is not a profile never leaves a new, empty store behind
    other = tmp_path / "other"
    other.mkdir()
    bad = app.IngestRequest(
        config=Config(database_url=_url(other)),
        path=other / "missing.json",
        benchmark="b",
        branch="main",
        env=NOT_CI,
        cwd=other,
    )
    with pytest.raises(Exception):  # noqa: B017  (which error is ingest's own test)
        app.ingest_file(bad)
    assert not (other / "perfgate.db").exists()


def test_check_measures_gates_and_concludes_in_one_call(tmp_path: Path) -> None:
    url = _url(tmp_path)
    fill(url, [record(i, 20.0) for i in range(3)])  # main has runs (another testbed)
    report = tmp_path / "report"
    request = app.CheckRequest(
        config=Config(database_url=url),
        budget=app.parse_budget("1"),
        measure=app.Measure(
            workloads=("mlp",), repeats=1, warmup=1, measured=3, profiled=0, branch="feat"
        ),
        against="main",
        fail_on=frozenset({Verdict.REGRESSION}),
        delivery=app.delivery_for(report_dir=report),
        outputs=app.CiOutputs(junit=tmp_path / "j.xml", annotations=False),
        env=NOT_CI,
        cwd=tmp_path,
    )
    outcome = app.run_check_job(request)
    assert outcome.check.mode == "history"
    assert [r.benchmark for r in outcome.check.records] == ["mlp"]
    assert outcome.remeasured.startswith("check: ")
    assert outcome.failed is outcome.gate.failed is False
    assert outcome.gate.fail_on == frozenset({Verdict.REGRESSION})
    assert outcome.gate.ci.written == (tmp_path / "j.xml",)
    assert (report / "report.md").is_file()


def test_check_refuses_a_base_branch_without_runs_before_measuring(tmp_path: Path) -> None:
    url = _url(tmp_path)
    request = app.CheckRequest(
        config=Config(database_url=url),
        budget=app.parse_budget("1"),
        measure=app.Measure(workloads=("mlp",), repeats=1, branch="feat"),
        against="main",
        env=NOT_CI,
        cwd=tmp_path,
    )
    with pytest.raises(UsageError, match="main"):
        app.run_check_job(request)
    assert not (tmp_path / "perfgate.db").exists()  # nothing measured, nothing recorded


@pytest.fixture
def history(tmp_path: Path) -> Config:
    """Main's ``mlp`` at 20 ms, then 26 ms: a change point the analysis finds."""
    url = _url(tmp_path)
    fill(url, [record(i, 20.0 if i < 12 else 26.0) for i in range(24)])
    return Config(database_url=url)


def test_the_store_commands_open_the_store_themselves(history: Config, tmp_path: Path) -> None:
    points = stored.show_history(
        history, benchmark="mlp", branch="main", metric="step_time_ms", limit=5
    )
    assert len(points) == 5
    assert stored.db_status(history).runs == 24
    assert stored.noise_report(history, branch=None)
    assert stored.trail(history) == []
    written = stored.export_baseline_files(
        history, tmp_path / "baselines", branch=None, benchmarks=()
    )
    assert written and all(p.is_file() for p in written)


def test_analyze_reports_the_changes_and_how_alerting_failed(history: Config) -> None:
    plain = stored.analyze(stored.AnalyzeRequest(history, branch="main"))
    assert plain.changes and plain.alerted is None and plain.alert_failed is None
    asked = stored.analyze(stored.AnalyzeRequest(history, alert=True, env=NOT_CI))
    assert len(asked.changes) == len(plain.changes)  # recorded once, found again
    assert asked.alerted is None and asked.alert_failed is not None  # no forge in NOT_CI
    alerts = stored.alerts_of(history, benchmark="mlp")
    assert alerts
    acked = stored.triage(history, alerts[0].id, action="ack", by="me", reason="on it", env=NOT_CI)
    assert acked.status == "acknowledged"
    assert [e.by for e in stored.trail(history)] == ["me"]


def test_a_read_only_command_never_creates_a_store(tmp_path: Path) -> None:
    config = Config(database_url=_url(tmp_path / "typo"))
    with pytest.raises(UsageError):
        stored.show_history(config, benchmark=None, branch=None, metric="step_time_ms", limit=1)
    assert not (tmp_path / "typo").exists()


CONVERTED = ("base", "check", "history", "look", "run", "team")
"""The cli modules whose commands are a request to one use case (issue 39)."""


@pytest.mark.parametrize("name", CONVERTED)
def test_no_command_function_is_over_60_lines(name: str) -> None:
    path = Path(app.__file__).parents[1] / "cli" / f"{name}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    long = [
        f"{path.name}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > 60
    ]
    assert not long, long


def test_a_timeout_flag_equal_to_the_default_counts_as_given() -> None:
    (spec,) = app.Measure(workloads=("mlp",), timeout_s=900.0).specs(Config())
    assert spec.timeout_s == 900.0 and spec.timeout_set
    (plain,) = app.Measure(workloads=("mlp",)).specs(Config())
    assert not plain.timeout_set
