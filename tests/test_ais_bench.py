"""perfgate ingest of ais_bench summaries, and --reference.

The summaries are hand-written from ais_bench's documented fields (tests/data/ais_bench/
PROVENANCE.md): no NPU wrote them. Those a test needs with other numbers are written the
way ais_bench computes its figures (numpy min/max/mean/median/percentile over the compute
times, throughput = 1000 x batch / mean), from fixed seeds. Real SQLite store, real CLI.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import perfgate

from perfgate.app.reference import ANY_BENCHMARK, read_reference
from perfgate.errors import ParseError, UsageError
from perfgate.models import RunRecord
from perfgate.parsers import FORMAT_AIS_BENCH, FORMAT_TORCH, detect_format, read_profile
from perfgate.store import open_store

DATA = Path(__file__).parent / "data"
SUMMARY = DATA / "ais_bench" / "resnet50_bs1_summary.json"
OLD_SUMMARY = DATA / "ais_bench" / "ais_infer_2022" / "sumary.json"
TORCH_TRACE = DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz"
RANK0 = DATA / "ascend" / "msinsight_pt_text_level1_2rank" / "rank0_ascend_pt"


def invoke(*args: str) -> tuple[int, str, str]:
    done = perfgate(None, *args)
    return done.returncode, done.stdout, done.stderr


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("perfgate: error: "), stderr
    return lines[0]


def ingest(path: Path, url: str, *extra: str, branch: str = "main") -> tuple[int, str, str]:
    return invoke(
        "ingest", str(path), "--benchmark", "resnet50_bs1", "--db", url, "--branch", branch,
        *extra,
    )  # fmt: skip


def latest(url: str, branch: str, benchmark: str = "resnet50_bs1") -> RunRecord:
    store = open_store(url)
    try:
        run = store.latest_run(project="default", benchmark=benchmark, branch=branch)
    finally:
        store.close()
    assert run is not None
    return run


def summary_doc(times: Sequence[float] | np.ndarray[Any, Any], batch: int = 1) -> dict[str, Any]:
    """An ais_bench summary of these compute times, its figures computed as ais_bench does."""
    a = np.asarray(times)
    stats = {
        "min": float(a.min()),
        "max": float(a.max()),
        "mean": float(a.mean()),
        "median": float(np.median(a)),
        "P99": float(np.percentile(a, 99)),
        "count": len(a),
    }
    return {
        "filesinfo": {},
        "args": ["ais_bench", "--model", "m.om", "--device", "0", "--output", "/out"],
        "NPU_compute_time": stats,
        "H2D_latency": dict(stats, mean=0.1, median=0.1, min=0.1, max=0.1, P99=0.1),
        "D2H_latency": dict(stats, mean=0.03, median=0.03, min=0.03, max=0.03, P99=0.03),
        "npu_compute_time_list": [float(x) for x in a],
        "throughput": 1000.0 * batch / float(a.mean()),
        "pid": 1,
    }


def write_summary(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


# --- recording -----------------------------------------------------------------------------


def test_a_summary_is_recorded_as_an_inference_run_with_catalogue_metrics(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    code, out, err = ingest(SUMMARY, url, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["format"] == "ais_bench" and doc["kind"] == "inference"

    fixture = json.loads(SUMMARY.read_text())
    compute = fixture["NPU_compute_time"]
    run = latest(url, "main")
    assert run.profile is None and run.spec.kind == "inference"
    got = {m.metric: m for m in run.measurements}
    assert set(got) == {
        "latency_p50_ms",
        "latency_p90_ms",
        "latency_p99_ms",
        "throughput_samples_per_s",
        "h2d_latency_ms",
        "d2h_latency_ms",
    }
    assert {m.unit for k, m in got.items() if k.endswith("latency_ms")} == {"ms"}
    assert got["h2d_latency_ms"].summary.centre == pytest.approx(fixture["H2D_latency"]["median"])
    assert got["d2h_latency_ms"].summary.centre == pytest.approx(fixture["D2H_latency"]["median"])
    assert got["throughput_samples_per_s"].unit == "1/s"
    # P50: every inference's time, centred on ais_bench's own median.
    assert got["latency_p50_ms"].summary.n == compute["count"] == 40
    assert got["latency_p50_ms"].summary.centre == pytest.approx(compute["median"])
    assert got["latency_p99_ms"].summary.centre == pytest.approx(compute["P99"])
    # The file has no P90: it is taken from the list, and the notes say so.
    p90 = float(np.percentile(fixture["npu_compute_time_list"], 90))
    assert got["latency_p90_ms"].summary.centre == pytest.approx(p90)
    assert any("latency_p90_ms" in n for n in doc["notes"])
    assert got["throughput_samples_per_s"].summary.centre == pytest.approx(fixture["throughput"])
    # What has no catalogue metric is said, not silently dropped.
    assert any("not recorded" in n and "mean/min/max" in n for n in doc["notes"])

    fp = run.fingerprint
    assert fp.timing_method == "ais-bench-v1"
    assert fp.device_kind == "npu" and fp.device_count == 1
    assert fp.params["batch_size"] == 1
    assert fp.torch_version == ""


def test_an_older_ais_infer_summary_is_read_by_its_name_and_spelling(tmp_path: Path) -> None:
    """``sumary.json`` with ``percentile(99%)``, no count and no list: the P99 is read, the
    P50 is the median alone, and no P90 is invented."""
    assert detect_format(OLD_SUMMARY) == FORMAT_AIS_BENCH
    url = f"sqlite:///{tmp_path / 'store.db'}"
    code, out, err = ingest(OLD_SUMMARY, url)
    assert code == 0, err
    assert "from ais_bench summary" in out
    run = latest(url, "main")
    got = {m.metric: m for m in run.measurements}
    assert "latency_p90_ms" not in got
    assert got["latency_p50_ms"].summary.n == 1
    assert got["latency_p50_ms"].summary.centre == pytest.approx(15.99884033203125)
    assert got["latency_p99_ms"].summary.centre == pytest.approx(17.815630435943604)
    assert run.fingerprint.params["batch_size"] == 1
    assert "npu_compute_time_list" in out  # the note on the missing list


def test_ais_bench_runs_are_gated_against_each_other_and_a_slowdown_regresses(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(11)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    for i in range(4):
        times = 0.68 * rng.lognormal(0, 0.01, 200)
        path = write_summary(tmp_path / f"main{i}_summary.json", summary_doc(times))
        code, _, err = ingest(path, url)
        assert code == 0, err
    slow = write_summary(
        tmp_path / "feat_summary.json", summary_doc(1.3 * 0.68 * rng.lognormal(0, 0.01, 200))
    )
    code, _, err = ingest(slow, url, branch="feat")
    assert code == 0, err
    assert latest(url, "feat").fingerprint.key() == latest(url, "main").fingerprint.key()

    code, out, err = invoke("gate", "--db", url, "--branch", "feat", "--against", "main", "--json")
    assert code == 1, out + err
    verdicts = {c["metric"]: c["verdict"] for c in json.loads(out)["comparisons"]}
    assert verdicts["latency_p50_ms"] == "regression"
    assert verdicts["throughput_samples_per_s"] == "regression"


def test_an_ais_bench_run_never_shares_a_history_with_a_profile_ingest(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    code, _, err = ingest(TORCH_TRACE, url)
    assert code == 0, err
    code, _, err = ingest(SUMMARY, url, branch="feat")
    assert code == 0, err
    trace_run, summary_run = latest(url, "main"), latest(url, "feat")
    assert trace_run.fingerprint.timing_method == "torch-trace-v1"
    assert trace_run.fingerprint.key() != summary_run.fingerprint.key()
    assert any(
        d.startswith("timing_method")
        for d in summary_run.fingerprint.differences(trace_run.fingerprint)
    )


# --- bad summaries -------------------------------------------------------------------------


def _without_compute() -> str:
    doc = json.loads(SUMMARY.read_text())
    del doc["NPU_compute_time"]
    return json.dumps(doc)


def _string_median() -> str:
    doc = json.loads(SUMMARY.read_text())
    doc["NPU_compute_time"]["median"] = "0.68"
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (_without_compute(), "no NPU_compute_time"),
        (_string_median(), "NPU_compute_time.median: '0.68' is not a number"),
        ('{"NPU_compute_time": {"min": 1, "max"', "not JSON"),
        ("", "empty file"),
        ('{"NPU_compute_time": {"min": 1.0, "max": 2.0, "mean": 1.5}}', "no median"),
    ],
)
def test_a_malformed_summary_is_one_line_and_creates_no_store(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "broken_summary.json"
    path.write_text(content, encoding="utf-8")
    db = tmp_path / "store.db"
    code, _, err = ingest(path, f"sqlite:///{db}")
    assert code == 2, err
    line = one_line(err)
    assert message in line and str(path) in line
    assert not db.exists()


def test_step_times_do_not_apply_to_a_summary(tmp_path: Path) -> None:
    steps = tmp_path / "steps.txt"
    steps.write_text("1.0\n")
    db = tmp_path / "store.db"
    code, _, err = ingest(SUMMARY, f"sqlite:///{db}", "--step-times", str(steps))
    assert code == 2
    assert "--step-times" in one_line(err)
    assert not db.exists()


# --- detection -----------------------------------------------------------------------------


def test_detection_keeps_profiles_as_they_were_and_names_ais_bench_for_unknown_files(
    tmp_path: Path,
) -> None:
    assert detect_format(TORCH_TRACE) == FORMAT_TORCH
    assert detect_format(RANK0) == "ascend"
    renamed = tmp_path / "resnet.json"  # a summary under another name: known by its content
    renamed.write_bytes(SUMMARY.read_bytes())
    assert detect_format(renamed) == FORMAT_AIS_BENCH
    plain = tmp_path / "trace.json"  # any other JSON is still a torch trace
    plain.write_text('{"traceEvents": []}')
    assert detect_format(plain) == FORMAT_TORCH
    other = tmp_path / "notes.txt"
    other.write_text("x")
    with pytest.raises(ParseError, match=r"ais_bench \*_summary\.json"):
        detect_format(other)
    # run, advise and torchrun read profiles: a summary is refused there, pointing to ingest.
    with pytest.raises(ParseError, match="perfgate ingest"):
        read_profile(SUMMARY)


def test_an_ais_bench_output_directory_points_to_its_summaries(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "2024_05_01-10_00_00").mkdir(parents=True)
    (out / "2024_05_01-10_00_00_summary.json").write_bytes(SUMMARY.read_bytes())
    with pytest.raises(ParseError, match="2024_05_01-10_00_00_summary.json"):
        detect_format(out)


# --- --reference ---------------------------------------------------------------------------


def test_reference_prints_each_metric_better_or_worse_by_its_direction(tmp_path: Path) -> None:
    ref = tmp_path / "modelzoo.json"
    ref.write_text(
        json.dumps(
            [
                {
                    "benchmark": "resnet50_bs1",
                    "source": "Ascend ModelZoo, 910B, CANN 8.0",
                    "metrics": {
                        "throughput_samples_per_s": 1600.0,  # higher is better: the run is worse
                        "latency_p99_ms": 1.2,  # lower is better: the run (0.84) is better
                        "latency_p50_ms": 0.5,  # the run (0.68) is worse
                    },
                },
                {"metrics": {"peak_memory_bytes": 1e9}},  # every benchmark; not measured here
                {"benchmark": "bert_bs8", "metrics": {"latency_p99_ms": 9.0}},  # not this one
            ]
        )
    )
    url = f"sqlite:///{tmp_path / 'store.db'}"
    code, out, err = ingest(SUMMARY, url, "--reference", str(ref))
    assert code == 0, err
    text = out[out.index("against reference") :]
    rows = {line.split()[0]: line for line in text.splitlines()[3:] if line.strip()}
    assert rows["throughput_samples_per_s"].endswith("worse")
    assert rows["latency_p99_ms"].endswith("better")
    assert rows["latency_p50_ms"].endswith("worse")
    assert rows["peak_memory_bytes"].endswith("not measured")
    assert "bert" not in text and text.count("latency_p99_ms") == 1

    code, out, err = ingest(SUMMARY, url, "--reference", str(ref), "--json")
    assert code == 0, err
    reference = json.loads(out)["reference"]
    assert reference["file"] == str(ref)
    by_metric = {r["metric"]: r for r in reference["rows"]}
    p99 = by_metric["latency_p99_ms"]
    assert p99["better"] is True and p99["value"] == pytest.approx(0.836401)
    assert p99["ratio"] == pytest.approx(0.836401 / 1.2)
    assert by_metric["throughput_samples_per_s"]["better"] is False
    assert by_metric["peak_memory_bytes"]["value"] is None
    # A report, not a verdict: the ingest still succeeded with worse figures.


def test_reference_works_for_a_profile_ingest_too(tmp_path: Path) -> None:
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps({"*": {"step_time_ms": 1000.0}}))
    code, out, err = invoke(
        "ingest", str(TORCH_TRACE), "--benchmark", "mlp", "--db",
        f"sqlite:///{tmp_path / 'store.db'}", "--branch", "main", "--reference", str(ref),
    )  # fmt: skip
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("step_time_ms"))
    assert row.endswith("better")  # a CPU MLP step is far below 1 s


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"metrics": {"thruput": 1}}', "metrics.thruput: not a metric perfgate records"),
        ('{"metrics": {"latency_p99_ms": "1.2"}}', "metrics.latency_p99_ms: '1.2' is not a number"),
        ('[{"benchmark": "a", "metric": {}}]', "[0].metric: not a key of a reference entry"),
        ('{"a": {"latency_p99_ms": 1}, "b": 3}', "b: metric -> value, not a number"),
        ("[1,", "not JSON"),
        (
            '[{"benchmark": "a", "metrics": {"latency_p99_ms": 1}},'
            ' {"benchmark": "a", "metrics": {"latency_p99_ms": 2}}]',
            "a latency_p99_ms is given twice",
        ),
    ],
)
def test_a_bad_reference_file_is_one_line_naming_the_key_and_records_nothing(
    tmp_path: Path, content: str, message: str
) -> None:
    ref = tmp_path / "ref.json"
    ref.write_text(content)
    db = tmp_path / "store.db"
    code, _, err = ingest(SUMMARY, f"sqlite:///{db}", "--reference", str(ref))
    assert code == 2, err
    line = one_line(err)
    assert message in line and str(ref) in line
    assert not db.exists()


def test_a_missing_reference_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read the reference file"):
        read_reference(tmp_path / "nope.json")
    db = tmp_path / "store.db"
    code, _, err = ingest(SUMMARY, f"sqlite:///{db}", "--reference", str(tmp_path / "nope.json"))
    assert code == 2 and "nope.json" in one_line(err)
    assert not db.exists()


def test_the_three_reference_shapes_read_the_same(tmp_path: Path) -> None:
    entry = tmp_path / "entry.json"
    entry.write_text(json.dumps({"benchmark": "r", "metrics": {"latency_p99_ms": 1.2}}))
    listed = tmp_path / "list.json"
    listed.write_text(
        json.dumps(
            [{"benchmark": "r", "metrics": {"latency_p99_ms": 1.2}}, {"metrics": {"loss": 2.0}}]
        )
    )
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"r": {"latency_p99_ms": 1.2}, "*": {"loss": 2.0}}))
    assert read_reference(entry) == {"r": {"latency_p99_ms": 1.2}}
    assert read_reference(listed) == read_reference(mapping)
    assert read_reference(mapping)[ANY_BENCHMARK] == {"loss": 2.0}
