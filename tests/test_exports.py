"""`perfgate export tensorboard` read back by TensorBoard's own event reader, `perfgate export
prometheus` parsed by prometheus_client's parser and pushed to a Pushgateway stand-in on
loopback, and the PR comment's link to the HTML report."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers import fill, fingerprint, perfgate, record
from prometheus_client.parser import text_string_to_metric_families
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from perfgate.metrics import CATALOGUE
from perfgate.models import Comparison, Direction, GateResult, Measurement, Verdict
from perfgate.parsers.torch_trace import parse_torch_trace
from perfgate.reporters.markdown import ReportContext, render_comment
from perfgate.reporters.prometheus import prometheus_name
from perfgate.stats.summary import summarize

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
    done = perfgate(None, *args)
    return done.returncode, done.stdout, done.stderr


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


def _measure(metric: str, unit: str, value: float) -> Measurement:
    reps = [(value, value * 1.01, value * 0.99)]
    return Measurement(metric, unit, Direction.LOWER_IS_BETTER, tuple(reps), summarize(reps))


NPU = fingerprint(
    device_kind="npu", device_model="Ascend910B4", device_count=8, host_label="ci-npu-01"
)


@pytest.fixture(scope="module")
def npu_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An 8-NPU job's latest run with per-rank times, utilisation, memory and its loss, and a
    CPU benchmark beside it."""
    url = f"sqlite:///{tmp_path_factory.mktemp('npu') / 's.db'}"
    run = record(3, 20.0, benchmark="llama", fp=NPU)
    extra = (
        _measure("step_time_ms.rank0", "ms", 19.5),
        _measure("step_time_ms.rank1", "ms", 21.0),
        _measure("aicore_util_pct", "%", 62.5),
        _measure("device_busy_pct", "%", 91.0),
        _measure("peak_memory_bytes", "bytes", 3.0e9),
        _measure("hbm_bandwidth_gb_s", "GB/s", 1200.0),
        _measure("throughput_samples_per_s", "1/s", 640.0),
        _measure("loss.step25", "", 2.5),
    )
    fill(
        url,
        [
            record(2, 19.0, benchmark="llama", fp=NPU),
            replace(run, measurements=run.measurements + extra),
        ],
    )
    fill(url, [record(1, 7.0, benchmark="cnn", seed=2)])
    return url


def test_prometheus_names_are_in_base_units() -> None:
    assert prometheus_name("step_time_ms", "ms") == "perfgate_step_time_seconds"
    assert prometheus_name("step_time_ms.rank1", "ms") == "perfgate_step_time_seconds"
    assert prometheus_name("peak_memory_bytes", "bytes") == "perfgate_peak_memory_bytes"
    assert (
        prometheus_name("throughput_samples_per_s", "1/s")
        == "perfgate_throughput_samples_per_second"
    )
    assert prometheus_name("aicore_util_pct", "%") == "perfgate_aicore_util_ratio"
    assert (
        prometheus_name("peak_memory_pct_of_capacity", "%")
        == "perfgate_peak_memory_of_capacity_ratio"
    )
    assert (
        prometheus_name("hbm_bandwidth_gb_s", "GB/s") == "perfgate_hbm_bandwidth_bytes_per_second"
    )
    assert prometheus_name("epoch_time", "s") == "perfgate_epoch_time_seconds"
    # every time unit a metrics file may give is a time here too (metrics.TO_MS)
    assert prometheus_name("epoch_time", "seconds") == "perfgate_epoch_time_seconds"
    assert prometheus_name("wait", "usec") == "perfgate_wait_seconds"
    assert prometheus_name("tokens_per_s", "tokens/s") == "perfgate_tokens_per_second"
    assert prometheus_name("loss.step25", "") == "perfgate_loss"
    assert NPU.testbed() == "npu:Ascend910B4 x8 on ci-npu-01"
    assert fingerprint().testbed() == "cpu:Xeon"


def test_prometheus_exposition_parses_with_latest_values(db: str) -> None:
    code, out, err = invoke("export", "prometheus", "--db", db)
    assert code == 0, err
    families = {f.name: f for f in text_string_to_metric_families(out)}
    assert families["perfgate_step_time_seconds"].type == "gauge"
    samples = {
        (s.labels["benchmark"], s.labels["testbed_key"]): s
        for s in families["perfgate_step_time_seconds"].samples
    }
    # one series per benchmark and testbed; the latest run's value, in seconds; main only
    assert len(samples) == 3
    mlp = samples[("mlp", fingerprint().key())]
    assert mlp.labels == {
        "project": "default",
        "benchmark": "mlp",
        "metric": "step_time_ms",
        "rank": "",
        "testbed": "cpu:Xeon",
        "testbed_key": fingerprint().key(),
        "device": "cpu",
        "branch": "main",
    }
    assert mlp.value == pytest.approx(0.024, rel=0.05)
    big = samples[("cnn", fingerprint(host_label="big").key())]
    assert big.labels["testbed"] == "cpu:Xeon on big"
    assert big.value == pytest.approx(0.0085, 0.05)
    assert samples[("cnn", fingerprint().key())].value == pytest.approx(0.009, rel=0.05)
    stamps = families["perfgate_last_run_timestamp_seconds"].samples
    assert len(stamps) == 3 and all("metric" not in s.labels for s in stamps)


def test_ranks_steps_and_percentages_become_labels_and_ratios(npu_db: str) -> None:
    code, out, err = invoke("export", "prometheus", "--db", npu_db)
    assert code == 0, err
    families = {f.name: f for f in text_string_to_metric_families(out)}
    # no rank, step or percent in any name
    assert not [n for n in families if "rank" in n or "step2" in n or "percent" in n or "pct" in n]
    steps = {
        s.labels["rank"]: s.value
        for s in families["perfgate_step_time_seconds"].samples
        if s.labels["benchmark"] == "llama"
    }
    assert steps == {
        "": pytest.approx(0.020, rel=0.05),
        "0": pytest.approx(0.0195),
        "1": pytest.approx(0.021),
    }
    (aicore,) = families["perfgate_aicore_util_ratio"].samples
    assert aicore.value == pytest.approx(0.625)
    assert (aicore.labels["testbed"], aicore.labels["device"]) == (
        "npu:Ascend910B4 x8 on ci-npu-01",
        "npu",
    )
    assert aicore.labels["testbed_key"] == NPU.key()
    (hbm,) = families["perfgate_hbm_bandwidth_bytes_per_second"].samples
    assert hbm.value == pytest.approx(1.2e12)
    (loss,) = families["perfgate_loss"].samples
    assert (loss.labels["step"], loss.labels["metric"], loss.value) == ("25", "loss", 2.5)
    (info,) = [s for s in families["perfgate_run_info"].samples if s.labels["benchmark"] == "llama"]
    assert info.labels["run_id"] == "llama-main-003" and info.value == 1.0
    assert "Ascend: AI Core busy share" in families["perfgate_aicore_util_ratio"].documentation


def _promtool(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus)")
    return subprocess.run(
        [promtool, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def test_promtool_check_metrics_is_clean(db: str, npu_db: str) -> None:
    old_style = (
        "# HELP perfgate_step_time_ms_rank1_milliseconds x\n"
        "# TYPE perfgate_step_time_ms_rank1_milliseconds gauge\n"
        "perfgate_step_time_ms_rank1_milliseconds 20\n"
    )
    flagged = _promtool("check", "metrics", stdin=old_style)
    assert flagged.returncode != 0 and "milliseconds" in flagged.stdout + flagged.stderr
    for url in (db, npu_db):
        _, out, _ = invoke("export", "prometheus", "--db", url)
        checked = _promtool("check", "metrics", stdin=out)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert checked.stdout + checked.stderr == ""


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


def test_a_report_url_s_credentials_are_not_published_in_the_comment() -> None:
    """PERFGATE_REPORT_URL with user:password@ (or a ?token=) went into the PR comment and
    the job summary as it was; the link keeps the host and path only."""
    url = "https://u:sekretpw@ci.example/perf/index.html?token=abc123&page=2"
    footer = render_comment(_result(), ReportContext(project="p", report_url=url)).splitlines()
    assert "[history report](https://ci.example/perf/index.html?token=***&page=2)" in footer[-1]
    assert not any("sekretpw" in line or "abc123" in line for line in footer)


def test_gate_takes_the_report_url_from_flag_or_env(db: str, tmp_path: Path) -> None:
    url = "https://ci.example/perf/"
    for args, env in (
        (["--report-url", url], {}),
        ([], {"PERFGATE_REPORT_URL": url}),
    ):
        out = tmp_path / f"r{len(args)}"
        result = perfgate(
            None, "gate", "--db", db, "--branch", "feat/x", "--against", "main",
            "--report-dir", str(out), *args, env=env,
        )  # fmt: skip
        assert result.returncode in (0, 1), result.stdout + result.stderr
        assert f"[history report]({url})" in (out / "report.md").read_text(encoding="utf-8")


def _dashboard() -> dict[str, Any]:
    root = Path(__file__).parent.parent
    data: dict[str, Any] = json.loads((root / "ci/grafana/perfgate-dashboard.json").read_text())
    return data


def _queries(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if v.get("definition")]
    return exprs


def test_grafana_dashboard_queries_the_exported_names(npu_db: str) -> None:
    dashboard = _dashboard()
    exprs = _queries(dashboard)
    queried = {name for e in exprs for name in re.findall(r"perfgate_[a-z_]+", e)}
    _, out, _ = invoke("export", "prometheus", "--db", npu_db)
    families = {f.name: f for f in text_string_to_metric_families(out)}
    # what this export holds, plus what others hold (a CUDA run's SM occupancy)
    exported = set(families) | {prometheus_name(m, s.unit) for m, s in CATALOGUE.items()}
    assert queried and queried <= exported, queried - exported
    assert {"perfgate_step_time_seconds", "perfgate_aicore_util_ratio"} <= queried
    # every label a panel filters on is one the exporter writes
    written = {k for f in families.values() for s in f.samples for k in s.labels}
    filtered = {name for e in exprs for name in re.findall(r"([a-z_]+)\s*!?=~?\s*\"", e)}
    assert {"rank", "testbed", "device"} <= filtered <= written, filtered - written
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"project", "benchmark", "testbed", "device", "branch"} <= variables


def test_grafana_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    """Each panel's query, its variables filled in, as a recording rule that promtool parses."""
    rules = ["groups:", "  - name: perfgate-dashboard", "    rules:"]
    for i, expr in enumerate(_queries(_dashboard())):
        if expr.startswith("label_values("):
            continue
        filled = re.sub(r"\$\{?[a-z_]+\}?", ".*", expr)
        rules += [f"      - record: perfgate:dashboard_{i}", f"        expr: {json.dumps(filled)}"]
    path = tmp_path / "rules.yml"
    path.write_text("\n".join(rules) + "\n")
    checked = _promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout


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
    # a token in the query string, as some gateways behind a proxy take it
    code, _, err = invoke(
        *("export", "prometheus", "--db", db),
        *("--push-gateway", "http://127.0.0.1:9/x?a=1&api_token=s3cret"),
    )
    assert code == 3 and "s3cret" not in err
    assert "Pushgateway http://127.0.0.1:9/x?a=1&api_token=*** failed" in err


def test_an_empty_job_name_is_a_usage_error_before_any_push(db: str) -> None:
    # it was pushed to /metrics/job@base64/= (exit 0 against a lenient server, a refused push
    # and exit 3 against a real gateway)
    code, _, err = invoke(
        *("export", "prometheus", "--db", db, "--push-gateway", "http://127.0.0.1:9"),
        *("--job", " "),
    )
    assert code == 2 and "--job: empty" in err
