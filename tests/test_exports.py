"""`perfgate export tensorboard` read back by TensorBoard's own event reader, `perfgate export
prometheus` parsed by prometheus_client's parser and pushed to a Pushgateway stand-in on
loopback, and the PR comment's link to the HTML report."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import fill, fingerprint, record
from prometheus_client.parser import text_string_to_metric_families
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from perfgate.cli import cli
from perfgate.models import Comparison, Direction, GateResult, Verdict
from perfgate.parsers.torch_trace import parse_torch_trace
from perfgate.reporters.markdown import ReportContext, render_comment
from perfgate.reporters.prometheus import prometheus_name

DATA = Path(__file__).parent / "data"
TRACE = DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('exp') / 's.db'}"
    profile = parse_torch_trace(TRACE)
    runs = [record(i, 20.0 + i, benchmark="mlp") for i in range(5)]
    runs[-1] = replace(runs[-1], profile=profile)
    runs += [record(i, 7.0 + i, benchmark="cnn", seed=2) for i in range(3)]
    runs.append(record(9, 8.5, benchmark="cnn", seed=2, fp=fingerprint(host_label="big")))
    runs.append(record(20, 30.0, benchmark="mlp", branch="feat/x"))
    fill(url, runs)
    return url


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_tensorboard_events_hold_the_stored_values(db: str, tmp_path: Path) -> None:
    logdir = tmp_path / "tb"
    code, out, err = invoke("export", "tensorboard", str(logdir), "--db", db)
    assert code == 0, err
    assert len(out.splitlines()) == 3  # mlp/main, mlp/feat_x, cnn/main
    main = EventAccumulator(str(logdir / "mlp" / "main"))
    main.Reload()
    steps = main.Scalars("metrics/step_time_ms")
    assert [s.step for s in steps] == [0, 1, 2, 3, 4]
    from perfgate.store import open_store

    store = open_store(db)
    try:
        points = store.history(project="default", benchmark="mlp", branch="main", limit=10)
        run = store.get_run("mlp-main-004")
    finally:
        store.close()
    expected = [p.centre for p in points if p.metric == "step_time_ms"]
    assert [s.value for s in steps] == pytest.approx(expected, rel=1e-6)
    assert steps[0].wall_time == pytest.approx(points[0].started_at.timestamp())
    # the profiled run's top ops and step breakdown, at its step
    tags = main.Tags()["scalars"]
    assert run.profile is not None and run.profile.breakdown is not None
    top = run.profile.top_ops(1)[0]
    (op,) = main.Scalars(f"top_ops_ms_per_step/{top.name}")
    assert (op.step, op.value) == (4, pytest.approx(top.self_time_ms_per_step, rel=1e-6))
    (compute,) = main.Scalars("breakdown/compute_ms")
    assert compute.value == pytest.approx(run.profile.breakdown.compute_ms, rel=1e-6)
    assert sum(t.startswith("top_ops_ms_per_step/") for t in tags) == 10
    # PR branches are their own TensorBoard runs, with names safe for a path
    (feat_dir,) = [p for p in (logdir / "mlp").iterdir() if p.name.startswith("feat_x")]
    feat = EventAccumulator(str(feat_dir))
    feat.Reload()
    assert [s.value for s in feat.Scalars("metrics/step_time_ms")] == pytest.approx([30.0], 0.05)
    # exporting again replaces perfgate's event files instead of doubling the points
    code, _, _ = invoke("export", "tensorboard", str(logdir), "--db", db, "--benchmark", "mlp")
    assert code == 0
    again = EventAccumulator(str(logdir / "mlp" / "main"))
    again.Reload()
    assert len(again.Scalars("metrics/step_time_ms")) == 5


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_prometheus_exposition_parses_with_latest_values(db: str) -> None:
    assert prometheus_name("step_time_ms", "ms") == "perfgate_step_time_milliseconds"
    assert prometheus_name("peak_memory_bytes", "bytes") == "perfgate_peak_memory_bytes"
    assert (
        prometheus_name("throughput_samples_per_s", "1/s")
        == "perfgate_throughput_samples_per_second"
    )
    code, out, err = invoke("export", "prometheus", "--db", db)
    assert code == 0, err
    families = {f.name: f for f in text_string_to_metric_families(out)}
    assert families["perfgate_step_time_milliseconds"].type == "gauge"
    samples = {
        (s.labels["benchmark"], s.labels["testbed"]): s
        for s in families["perfgate_step_time_milliseconds"].samples
    }
    # one series per benchmark and testbed; the latest run's value; main only
    assert len(samples) == 3
    mlp = samples[("mlp", fingerprint().key())]
    assert mlp.labels == {
        "project": "default",
        "benchmark": "mlp",
        "metric": "step_time_ms",
        "testbed": fingerprint().key(),
        "branch": "main",
    }
    assert mlp.value == pytest.approx(24.0, rel=0.05)
    assert samples[("cnn", fingerprint(host_label="big").key())].value == pytest.approx(8.5, 0.05)
    assert samples[("cnn", fingerprint().key())].value == pytest.approx(9.0, rel=0.05)
    assert "perfgate_last_run_timestamp_seconds" in families


class _Gateway(BaseHTTPRequestHandler):
    received: list[tuple[str, str, bytes]] = []

    def _record(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.received.append((self.command, self.path, body))
        self.send_response(200)
        self.end_headers()

    do_PUT = do_POST = _record

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def gateway() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    received: list[tuple[str, str, bytes]] = []
    handler = type("Handler", (_Gateway,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def test_push_carries_the_printed_samples(
    db: str, gateway: tuple[str, list[tuple[str, str, bytes]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    url, received = gateway
    _, printed, _ = invoke("export", "prometheus", "--db", db)
    code, out, err = invoke(
        "export", "prometheus", "--db", db, "--push-gateway", url, "--job", "nightly"
    )
    assert code == 0, err
    assert out == "" and "pushed" in err
    ((method, path, body),) = received
    assert (method, path) == ("PUT", "/metrics/job/nightly")
    assert _samples(body.decode()) == _samples(printed)


def test_push_failure_is_an_infrastructure_error(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = invoke(
        "export", "prometheus", "--db", db, "--push-gateway", "http://127.0.0.1:9"
    )
    assert code == 3
    assert "push to the Pushgateway http://127.0.0.1:9 failed" in err


def _result() -> GateResult:
    c = Comparison(
        benchmark="mlp",
        metric="step_time_ms",
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        verdict=Verdict.UNCHANGED,
        reason="",
        current_run_id="r1",
        current_centre=20.0,
    )
    return GateResult(branch="feat", against="main", verdict=Verdict.UNCHANGED, comparisons=(c,))


def test_comment_links_the_report_when_its_url_is_set() -> None:
    url = "https://ci.example/perf/report/index.html"
    linked = render_comment(_result(), ReportContext(project="p", report_url=url))
    assert f"[history report]({url})" in linked.splitlines()[-1]
    assert "history report" not in render_comment(_result(), ReportContext(project="p"))
    for bad in ("javascript:alert(1)", "https://x/a)(b", "https://x/<img>", "ftp://x/"):
        text = render_comment(_result(), ReportContext(project="p", report_url=bad))
        assert "history report" not in text, bad


def test_gate_takes_the_report_url_from_flag_or_env(db: str, tmp_path: Path) -> None:
    url = "https://ci.example/perf/"
    for args, env in (
        (["--report-url", url], {}),
        ([], {"PERFGATE_REPORT_URL": url}),
    ):
        out = tmp_path / f"r{len(args)}"
        result = CliRunner().invoke(
            cli,
            ["gate", "--db", db, "--branch", "feat/x", "--against", "main"]
            + ["--report-dir", str(out), *args],
            env={"GITHUB_STEP_SUMMARY": None, **env},
        )
        assert result.exit_code in (0, 1), result.output
        assert f"[history report]({url})" in (out / "report.md").read_text(encoding="utf-8")


def test_grafana_dashboard_queries_the_exported_names(db: str) -> None:
    import json
    import re

    root = Path(__file__).parent.parent
    dashboard = json.loads((root / "ci/grafana/perfgate-dashboard.json").read_text())
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"perfgate_[a-z_]+", target["expr"])
    }
    _, out, _ = invoke("export", "prometheus", "--db", db)
    exported = {f.name for f in text_string_to_metric_families(out)}
    exported.add(prometheus_name("throughput_samples_per_s", "1/s"))
    exported.add(prometheus_name("peak_memory_bytes", "bytes"))
    assert queried and queried <= exported, queried - exported
    labels = {"project", "benchmark", "testbed", "branch"}
    assert labels <= {v["name"] for v in dashboard["templating"]["list"]}


def test_push_errors_never_show_the_gateway_credentials(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = invoke(
        "export", "prometheus", "--db", db, "--push-gateway", "http://bot:s3cret@127.0.0.1:9"
    )
    assert code == 3 and "s3cret" not in err
    assert "push to the Pushgateway http://127.0.0.1:9 failed" in err
    code, _, err = invoke("export", "prometheus", "--db", db, "--push-gateway", "ftp://u:s3cret@x")
    assert code == 2 and "s3cret" not in err and "expected an http(s):// URL" in err
