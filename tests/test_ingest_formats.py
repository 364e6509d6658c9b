"""perfgate ingest of other harnesses' result files: pytest-benchmark, pyperf, asv and the
plain metrics file (JSON, CSV).

The pytest-benchmark, pyperf and asv files were written by the real tools
(tests/data/results/README.md); the Kunpeng asv file and the metrics files are hand-written
from the documented formats. Real SQLite store, real CLI.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import perfgate

from perfgate.errors import ParseError
from perfgate.models import Direction, RunRecord
from perfgate.parsers import (
    FORMAT_AIS_BENCH,
    FORMAT_ASV,
    FORMAT_METRICS,
    FORMAT_PYPERF,
    FORMAT_PYTEST_BENCHMARK,
    FORMAT_TORCH,
    detect_format,
    read_profile,
)
from perfgate.store import open_store

DATA = Path(__file__).parent / "data"
RESULTS = DATA / "results"
PB = RESULTS / "pytest_benchmark" / "bench.json"
PB_SAVED = RESULTS / "pytest_benchmark" / "0001_saved_without_data.json"
PYPERF = RESULTS / "pyperf" / "suite.json"
PYPERF_GZ = RESULTS / "pyperf" / "timeit.json.gz"
ASV = RESULTS / "asv" / "results" / "toybox" / "0d82ceda-existing-py_tmp_pgvenv_h5_bin_python3.json"
ASV_KUNPENG = (
    RESULTS / "asv" / "handwritten" / "results" / "kunpeng-box"
    / "1a2b3c4d-virtualenv-py3.11-numpy.json"
)  # fmt: skip
METRICS_JSON = RESULTS / "metrics" / "train_log.json"
METRICS_CSV = RESULTS / "metrics" / "train_log.csv"
COMMIT = "a" * 40


def invoke(*args: str) -> tuple[int, str, str]:
    done = perfgate(None, *args)
    return done.returncode, done.stdout, done.stderr


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("perfgate: error: "), stderr
    return lines[0]


def ingest(
    path: Path, url: str, *extra: str, benchmark: str = "b", branch: str = "main"
) -> tuple[int, str, str]:
    return invoke(
        "ingest", str(path), "--benchmark", benchmark, "--db", url, "--branch", branch, *extra
    )


def ingest_json(path: Path, url: str, *extra: str, benchmark: str = "b") -> dict[str, Any]:
    code, out, err = ingest(path, url, "--json", *extra, benchmark=benchmark)
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def latest(url: str, benchmark: str, branch: str = "main") -> RunRecord:
    store = open_store(url)
    try:
        run = store.latest_run(project="default", benchmark=benchmark, branch=branch)
    finally:
        store.close()
    assert run is not None, benchmark
    return run


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


# --- detection ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        (PB, FORMAT_PYTEST_BENCHMARK),
        (PB_SAVED, FORMAT_PYTEST_BENCHMARK),
        (PYPERF, FORMAT_PYPERF),
        (PYPERF_GZ, FORMAT_PYPERF),
        (ASV, FORMAT_ASV),
        (ASV_KUNPENG, FORMAT_ASV),
        (METRICS_JSON, FORMAT_METRICS),
        (METRICS_CSV, FORMAT_METRICS),
        (DATA / "ais_bench" / "resnet50_bs1_summary.json", FORMAT_AIS_BENCH),
        (DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz", FORMAT_TORCH),
    ],
)
def test_the_one_dispatcher_tells_every_format_apart(path: Path, fmt: str) -> None:
    assert detect_format(path) == fmt


def test_a_pytest_benchmark_file_named_like_an_ais_bench_summary_is_still_pytest_benchmark(
    tmp_path: Path,
) -> None:
    renamed = tmp_path / "nightly_summary.json"
    renamed.write_bytes(PB.read_bytes())
    assert detect_format(renamed) == FORMAT_PYTEST_BENCHMARK


def test_a_result_file_is_not_a_profile_for_advise(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="holds benchmark results, not a profile"):
        read_profile(PB)


@pytest.mark.parametrize(
    ("name", "text"),
    [("results.json", '{"answers": [1, 2, 3]}'), ("results.csv", "when,how_long\n1,2\n")],
)
def test_a_file_of_no_known_format_gets_the_list_of_what_is_accepted(
    tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    db = tmp_path / "store.db"
    code, _, err = ingest(path, f"sqlite:///{db}")
    assert code == 2
    line = one_line(err)
    assert f"{path}: not a file perfgate can read" in line
    assert "pytest-benchmark, pyperf or asv" in line and "metrics file" in line
    assert not db.exists()


# --- pytest-benchmark ---------------------------------------------------------------------


def test_pytest_benchmark_records_each_test_as_its_own_run_with_every_round(url: str) -> None:
    doc = json.loads(PB.read_text(encoding="utf-8"))
    out = ingest_json(PB, url, "--commit", COMMIT, benchmark="unit")
    assert [r["run"]["benchmark"] for r in out["runs"]] == [
        "unit/test_build[100]",
        "unit/test_build[10000]",
        "unit/test_sort",
    ]
    # The file names the commit it measured; that is the one recorded, and a note says so.
    assert {r["run"]["commit"] for r in out["runs"]} == {doc["commit_info"]["id"]}
    assert any("which the file says it measured" in n for n in out["notes"])
    for bench in doc["benchmarks"]:
        run = latest(url, f"unit/{bench['name']}")
        m = run.measurement("time_ms")
        assert m is not None and m.unit == "ms"
        # Every round, in ms, one repeat (one pytest process).
        assert m.repeats == (tuple(x * 1000.0 for x in bench["stats"]["data"]),)
        assert m.summary.median == pytest.approx(bench["stats"]["median"] * 1000.0)
        fp = run.fingerprint
        assert fp.timing_method == "pytest-benchmark-v1"
        assert fp.cpu_model == doc["machine_info"]["cpu"]["brand_raw"]
        assert fp.cpu_cores == doc["machine_info"]["cpu"]["count"]
        assert fp.os == "Linux-x86_64" and fp.python_version == "3.11"
        assert fp.params["timer"] == "perf_counter"
        assert fp.params["python_implementation"] == "cpython"


def test_a_saved_pytest_benchmark_file_without_data_is_its_median_alone(url: str) -> None:
    doc = json.loads(PB_SAVED.read_text(encoding="utf-8"))
    out = ingest_json(PB_SAVED, url, benchmark="unit")
    assert any("--benchmark-save-data" in n for n in out["notes"])
    sort = next(b for b in doc["benchmarks"] if b["name"] == "test_sort")
    m = latest(url, "unit/test_sort").measurement("time_ms")
    assert m is not None
    assert m.repeats == ((sort["stats"]["median"] * 1000.0,),)


def test_a_test_name_in_two_modules_takes_its_fullname(tmp_path: Path, url: str) -> None:
    doc = json.loads(PB.read_text(encoding="utf-8"))
    twin = copy.deepcopy(doc["benchmarks"][2])
    twin["fullname"] = "other/test_bench.py::test_sort"
    doc["benchmarks"].append(twin)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    out = ingest_json(path, url, benchmark="unit")
    names = [r["run"]["benchmark"] for r in out["runs"]]
    assert "unit/test_bench.py::test_sort" in names
    assert "unit/other/test_bench.py::test_sort" in names
    assert "unit/test_build[100]" in names  # the others keep their short names


def _pytest_benchmark_file(tmp_path: Path, name: str, sort_scale: float, seed: int) -> Path:
    """The real file with its rounds redrawn around their own median (fixed seed), and
    test_sort's scaled: as another CI job of the same tests would write it."""
    doc = json.loads(PB.read_text(encoding="utf-8"))
    rng = np.random.default_rng(seed)
    for bench in doc["benchmarks"]:
        data = np.asarray(bench["stats"]["data"])
        centre = float(np.median(data)) * (sort_scale if bench["name"] == "test_sort" else 1.0)
        bench["stats"]["data"] = [float(x) for x in centre * rng.normal(1.0, 0.01, data.size)]
    doc["commit_info"]["id"] = f"{seed:040x}"
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt", ["pytest-benchmark", "pyperf"])
def test_seconds_that_overflow_in_ms_are_refused_naming_the_benchmark(
    tmp_path: Path, url: str, fmt: str
) -> None:
    """1e308 s is a finite float, 1e311 ms is not: the file is refused (exit 2, one line,
    nothing stored), not an internal error when the run is summarised."""
    path = tmp_path / "huge.json"
    if fmt == "pytest-benchmark":
        doc = json.loads(PB.read_text(encoding="utf-8"))
        doc["benchmarks"][0]["stats"]["data"] = [1e300, 1e308]
        name = doc["benchmarks"][0]["name"]
    else:
        doc = json.loads(PYPERF.read_text(encoding="utf-8"))
        bench = doc["benchmarks"][0]
        for run in bench["runs"]:
            if "values" in run:
                run["values"] = [1e308 for _ in run["values"]]
        name = bench.get("metadata", {}).get("name") or doc["metadata"]["name"]
    path.write_text(json.dumps(doc), encoding="utf-8")
    code, _, err = ingest(path, url)
    assert code == 2, err
    assert f"{name}: its time_ms values are too large to summarise" in one_line(err)
    assert not Path(url.removeprefix("sqlite:///")).exists()


def test_the_gate_judges_each_pytest_benchmark_test_against_its_own_history(
    tmp_path: Path, url: str
) -> None:
    for i in range(6):
        path = _pytest_benchmark_file(tmp_path, f"main{i}.json", 1.0, seed=i + 1)
        code, _, err = ingest(path, url, benchmark="unit")
        assert code == 0, err
    slower = _pytest_benchmark_file(tmp_path, "pr.json", 1.25, seed=99)
    code, _, err = ingest(slower, url, benchmark="unit", branch="feat")
    assert code == 0, err
    code, out, err = invoke("gate", "--db", url, "--branch", "feat", "--against", "main", "--json")
    assert code == 1, err
    verdicts = {(c["benchmark"], c["metric"]): c["verdict"] for c in json.loads(out)["comparisons"]}
    assert verdicts[("unit/test_sort", "time_ms")] == "regression"
    assert verdicts[("unit/test_build[100]", "time_ms")] != "regression"
    assert verdicts[("unit/test_build[10000]", "time_ms")] != "regression"


def test_a_time_in_seconds_is_slower_in_every_word_the_gate_says(tmp_path: Path, url: str) -> None:
    """A metric the catalogue does not know, in s: a time, as in ms (the reason and the
    report once said "higher" and "slower" of the same change; the report dropped the s)."""
    rng = np.random.default_rng(5)

    def run(name: str, epoch_s: float, branch: str) -> None:
        values = [float(x) for x in epoch_s * rng.normal(1.0, 0.005, 3)]
        doc = {
            "metrics": [{"name": "epoch_time", "unit": "s", "direction": "lower", "values": values}]
        }
        path = tmp_path / name
        path.write_text(json.dumps(doc), encoding="utf-8")
        code, _, err = ingest(path, url, benchmark="train", branch=branch)
        assert code == 0, err

    for i in range(6):
        run(f"main{i}.json", 1200.0, "main")
    run("pr.json", 1500.0, "feat")
    code, out, err = invoke("gate", "--db", url, "--branch", "feat", "--against", "main", "--json")
    assert code == 1, err
    (epoch,) = [c for c in json.loads(out)["comparisons"] if c["metric"] == "epoch_time"]
    assert epoch["verdict"] == "regression"
    assert "slower" in epoch["reason"] and "higher" not in epoch["reason"]
    code, text, err = invoke("gate", "--db", url, "--branch", "feat", "--against", "main")
    assert code == 1, err
    assert "slower" in text and "higher" not in text
    assert re.search(r"\b1\d{3} s -> 1\d{3} s, change \+2\d\.\d%", text), text


def test_a_unit_the_catalogue_does_not_know_is_written_with_every_value(
    tmp_path: Path, url: str
) -> None:
    """MiB and % kept their unit in the ingest table and the JSON, and lost it in the gate's
    words ("2024 against 1024")."""
    for i, (mem, util) in enumerate([(1024.0, 55.0)] * 3 + [(2024.0, 35.0)]):
        metrics = [
            {"name": "mem", "values": [mem, mem], "unit": "MiB", "direction": "lower"},
            {"name": "util", "values": [util, util], "unit": "%", "direction": "higher"},
        ]
        path = tmp_path / f"m{i}.json"
        path.write_text(json.dumps({"metrics": metrics}), encoding="utf-8")
        code, _, err = ingest(path, url, benchmark="b", branch="main" if i < 3 else "feat")
        assert code == 0, err
    code, text, err = invoke("gate", "--db", url, "--branch", "feat", "--against", "main")
    assert code == 1, err
    assert "(2024 MiB against 1024 MiB, tolerance 3%)" in text, text
    assert "(35% against 55%, tolerance 3%)" in text, text


@pytest.mark.parametrize("table", ["min_effect_pct = 5", "decides = true"])
def test_a_suite_table_without_a_direction_keeps_the_file_s_direction(
    tmp_path: Path, url: str, table: str
) -> None:
    """tokens_per_s recorded as higher-is-better, 23% lower on the branch: with a suite
    table that set only its minimum effect it was judged lower-is-better, an improvement."""
    for i, rate in enumerate([1500.0, 1490.0, 1505.0, 1150.0]):
        doc = {
            "metrics": [
                {
                    "name": "tokens_per_s",
                    "values": [rate, rate * 1.001, rate * 0.999],
                    "unit": "1/s",
                    "direction": "higher",
                }
            ]
        }
        path = tmp_path / f"m{i}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        code, _, err = ingest(path, url, benchmark="b", branch="main" if i < 3 else "feat")
        assert code == 0, err
    suite = tmp_path / "perfgate.toml"
    suite.write_text(f"[metrics.tokens_per_s]\n{table}\n", encoding="utf-8")
    gate = ("gate", "--db", url, "--suite", str(suite), "--branch", "feat", "--against", "main")
    code, out, err = invoke(*gate, "--json")
    assert code == 1, err
    (c,) = [c for c in json.loads(out)["comparisons"] if c["metric"] == "tokens_per_s"]
    assert (c["verdict"], c["direction"]) == ("regression", "higher")
    suite.write_text(f"[metrics.tokens_per_s]\n{table}\ndirection = 'lower'\n")
    code, out, err = invoke(*gate, "--json")  # a table that says a direction is obeyed
    (c,) = [c for c in json.loads(out)["comparisons"] if c["metric"] == "tokens_per_s"]
    assert (c["verdict"], c["direction"]) == ("improvement", "lower")


def test_the_comment_of_ingested_runs_names_their_host_and_reproduces_with_ingest(
    tmp_path: Path, url: str
) -> None:
    """A metrics file names no device: the comment's testbed was ":" (one marker for every
    such job on every host) and its steps said `perfgate run --benchmark b`, which fails."""
    for i, ms in enumerate([10.0, 10.1, 9.9, 15.0]):
        path = tmp_path / f"m{i}.json"
        path.write_text(json.dumps({"metrics": [{"name": "step_time_ms", "values": [ms, ms]}]}))
        code, _, err = ingest(path, url, benchmark="b", branch="main" if i < 3 else "feat")
        assert code == 0, err
    out = tmp_path / "out"
    code, _, err = invoke(
        *("gate", "--db", url, "--branch", "feat", "--against", "main"),
        *("--report-dir", str(out)),
    )
    assert code == 1, err
    report = (out / "report.md").read_text(encoding="utf-8")
    marker = report.splitlines()[0]
    assert re.search(r"testbed=host%3A[^ ]+ -->$", marker), marker
    assert "git checkout main && perfgate ingest FILE --branch main" in report
    assert "perfgate run" not in report


# --- pyperf -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "names"),
    [
        (PB, ["test_build[100]", "test_build[10000]", "test_sort"]),
        (PYPERF, ["sort a sorted list", "build a list"]),
    ],
)
def test_a_harness_file_names_its_own_benchmarks_without_benchmark(
    url: str, path: Path, names: list[str]
) -> None:
    """pytest-benchmark, pyperf and asv name their benchmarks: --benchmark is only a prefix."""
    code, out, err = invoke("ingest", str(path), "--db", url, "--branch", "main", "--json")
    assert code == 0, err
    assert [r["run"]["benchmark"] for r in json.loads(out)["runs"]] == names
    assert latest(url, names[-1]).measurement("time_ms") is not None


def test_asv_names_its_own_benchmarks_without_benchmark(url: str) -> None:
    code, out, err = invoke("ingest", str(ASV), "--db", url, "--branch", "main", "--json")
    assert code == 0, err
    names = [r["run"]["benchmark"] for r in json.loads(out)["runs"]]
    assert names and all(n.startswith("benchmarks.") for n in names), names


@pytest.mark.parametrize(
    "path",
    [METRICS_JSON, DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz"],
    ids=["metrics", "trace"],
)
def test_a_file_that_names_no_benchmark_still_needs_benchmark(url: str, path: Path) -> None:
    code, out, err = invoke("ingest", str(path), "--db", url, "--branch", "main")
    assert code == 2 and out == ""
    assert "--benchmark NAME" in one_line(err)


def test_pyperf_runs_are_repeats_and_warmups_and_calibration_are_left_out(url: str) -> None:
    doc = json.loads(PYPERF.read_text(encoding="utf-8"))
    out = ingest_json(PYPERF, url, benchmark="micro")
    assert [r["run"]["benchmark"] for r in out["runs"]] == [
        "micro/sort a sorted list",
        "micro/build a list",
    ]
    for bench in doc["benchmarks"]:
        runs = [r for r in bench["runs"] if r.get("values")]
        assert len(runs) < len(bench["runs"])  # the file has a calibration run
        m = latest(url, f"micro/{bench['metadata']['name']}").measurement("time_ms")
        assert m is not None
        assert m.repeats == tuple(tuple(v * 1000.0 for v in r["values"]) for r in runs)
    run = latest(url, "micro/build a list")
    assert run.fingerprint.timing_method == "pyperf-v1"
    assert run.fingerprint.cpu_model == doc["metadata"]["cpu_model_name"]
    assert run.fingerprint.os == "Linux-x86_64"
    assert run.spec.repeats == 3


def test_a_gzipped_pyperf_file_is_read(url: str) -> None:
    doc = json.loads(gzip.decompress(PYPERF_GZ.read_bytes()))
    ingest_json(PYPERF_GZ, url, benchmark="micro")
    m = latest(url, "micro/timeit").measurement("time_ms")
    assert m is not None
    values = [v for r in doc["benchmarks"][0]["runs"] for v in r.get("values", [])]
    assert m.samples == pytest.approx([v * 1000.0 for v in values])


# --- asv ----------------------------------------------------------------------------------


def test_asv_records_each_parameter_combination_with_its_samples(url: str) -> None:
    doc = json.loads(ASV.read_text(encoding="utf-8"))
    out = ingest_json(ASV, url, "--commit", COMMIT, benchmark="asv")
    names = [r["run"]["benchmark"] for r in out["runs"]]
    assert "asv/benchmarks.Params.time_build(10, 'list')" in names
    assert "asv/benchmarks.Params.time_build(1000, 'tuple')" in names
    samples = doc["results"]["benchmarks.Params.time_build"][doc["result_columns"].index("samples")]
    run = latest(url, "asv/benchmarks.Params.time_build(1000, 'tuple')")
    m = run.measurement("time_ms")
    assert m is not None
    assert m.samples == pytest.approx([s * 1000.0 for s in samples[3]])  # (1000, 'tuple')
    # An asv results file is per commit: its commit is recorded, not the one given.
    assert run.git.commit == doc["commit_hash"]
    assert run.fingerprint.timing_method == "asv-v1"
    assert run.fingerprint.params["asv_machine"] == "toybox"
    # benchmarks.json beside the machine folder gives each benchmark's type.
    peak = latest(url, "asv/benchmarks.peakmem_list").measurement("memory_bytes")
    assert peak is not None and peak.unit == "bytes"
    track = latest(url, "asv/benchmarks.track_widgets").measurement("value")
    assert track is not None and track.samples == (42.0,)


def test_asv_without_benchmarks_json_takes_types_from_names_and_skips_failures(
    url: str,
) -> None:
    out = ingest_json(ASV_KUNPENG, url, benchmark="np")
    names = [r["run"]["benchmark"] for r in out["runs"]]
    assert names == [
        "np/bench_linalg.Eig.time_eig('float32')",
        "np/bench_linalg.Eig.time_eig('float64')",
        "np/bench_core.mem_array",
    ]
    notes = " ".join(out["notes"])
    assert "bench_linalg.Eig.time_broken" in notes  # null: failed
    assert "bench_core.track_items" in notes  # NaN: skipped
    assert "bench_core.check_shape" in notes  # no type
    run = latest(url, "np/bench_linalg.Eig.time_eig('float64')")
    m = run.measurement("time_ms")
    assert m is not None and m.samples == pytest.approx((45.6,))
    fp = run.fingerprint
    assert (fp.cpu_model, fp.cpu_cores, fp.os) == ("Kunpeng 920", 96, "Linux-aarch64")
    assert fp.python_version == "3.11"
    assert fp.params["asv_env"] == "virtualenv-py3.11-numpy"


# --- the plain metrics file ---------------------------------------------------------------


def test_a_metrics_file_is_one_run_with_the_directions_and_units_it_gives(url: str) -> None:
    ingest_json(METRICS_JSON, url, "--commit", COMMIT, benchmark="llama")
    run = latest(url, "llama")
    assert run.fingerprint.timing_method == "metrics-file-v1"
    assert run.fingerprint.device_kind == "npu"
    assert run.fingerprint.params == {"global_batch_size": 64, "model": "llama-7b"}
    epoch = run.measurement("epoch_time")
    assert epoch is not None and (epoch.unit, epoch.samples) == ("s", (1234.5,))
    tokens = run.measurement("tokens_per_s")
    assert tokens is not None and tokens.direction is Direction.HIGHER_IS_BETTER
    assert tokens.samples == (1510.2, 1498.7, 1505.1, 1502.9)
    # A catalogue metric takes the catalogue's unit and direction, its repeats as given.
    step = run.measurement("step_time_ms")
    assert step is not None and step.direction is Direction.LOWER_IS_BETTER
    assert step.repeats == ((101.2, 99.8, 100.3), (100.4, 100.9, 100.1))
    # A *_ms metric given in seconds is converted.
    wait = run.measurement("data_wait_ms")
    assert wait is not None and wait.unit == "ms"
    assert wait.samples == pytest.approx((4.2, 4.0, 4.4))


def test_a_metrics_csv_reads_like_its_json(url: str) -> None:
    code, out, err = ingest(METRICS_CSV, url, benchmark="llama")
    assert code == 0, err
    assert "tokens_per_s" in out
    run = latest(url, "llama")
    tokens = run.measurement("tokens_per_s")
    assert tokens is not None and tokens.direction is Direction.HIGHER_IS_BETTER
    assert tokens.samples == (1510.2, 1498.7, 1505.1, 1502.9)
    step = run.measurement("step_time_ms")
    assert step is not None and step.samples == (101.2, 99.8)
    epoch = run.measurement("epoch_time")
    assert epoch is not None and epoch.unit == "s"


def test_the_formats_never_share_a_history(url: str) -> None:
    ingest_json(METRICS_JSON, url, benchmark="same")
    first = latest(url, "same")
    ingest_json(METRICS_CSV, url, benchmark="same")  # same format: same timing method
    ingest_json(PYPERF_GZ, url, benchmark="same")
    methods = {
        first.fingerprint.timing_method,
        latest(url, "same").fingerprint.timing_method,
        latest(url, "same/timeit").fingerprint.timing_method,
    }
    assert methods == {"metrics-file-v1", "pyperf-v1"}


# --- bad input ----------------------------------------------------------------------------


def _broken_pytest_benchmark(doc: dict[str, Any]) -> None:
    doc["benchmarks"][1]["stats"]["data"][3] = "fast"


def _broken_pyperf(doc: dict[str, Any]) -> None:
    doc["version"] = 5


def _broken_asv(doc: dict[str, Any]) -> None:
    doc["results"]["benchmarks.Params.time_build"][0].pop()


def _negative_asv_time(doc: dict[str, Any]) -> None:
    doc["results"]["benchmarks.TimeSuite.time_sum"][-1][0][0] = -2.6e-05  # samples[0][0]


@pytest.mark.parametrize(
    ("source", "break_it", "where"),
    [
        (PB, _broken_pytest_benchmark, "benchmarks[1].stats.data[3]: 'fast' is not a number"),
        (PYPERF, _broken_pyperf, "version: pyperf JSON format 5"),
        (ASV, _broken_asv, "results.benchmarks.Params.time_build: result: 3 values for 4"),
        (ASV, _negative_asv_time, "TimeSuite.time_sum: samples[0][0]: -2.6e-05 is below 0"),
    ],
)
def test_a_malformed_harness_file_is_one_line_naming_the_key_and_writes_nothing(
    tmp_path: Path, source: Path, break_it: Any, where: str
) -> None:
    doc = json.loads(source.read_text(encoding="utf-8"))
    break_it(doc)
    path = tmp_path / source.name
    path.write_text(json.dumps(doc), encoding="utf-8")
    db = tmp_path / "store.db"
    code, _, err = ingest(path, f"sqlite:///{db}")
    assert code == 2
    line = one_line(err)
    assert str(path) in line and where in line
    assert not db.exists()


@pytest.mark.parametrize(
    ("metric", "where"),
    [
        (
            {"name": "tokens_per_s", "value": 1500.0},
            "metrics[0].direction (tokens_per_s): missing",
        ),
        (
            {"name": "throughput_samples_per_s", "value": 10.0, "direction": "lower"},
            "catalogue says higher is better",
        ),
        ({"name": "epoch_time_ms", "value": 3.0, "unit": "GB"}, "'GB' is not a time"),
        ({"name": "loss", "values": [1.0, "nan?"]}, "metrics[0].values[1]"),
        ({"name": "x", "value": 1.0, "values": [1.0], "direction": "lower"}, "give one of"),
        # finite numbers whose sum (a mean, a median of two) or ms (1e306 s) overflows
        ({"name": "x", "values": [1e308, 1e308], "direction": "lower"}, "values (x): too large"),
        ({"name": "step_time_ms", "value": 1e306, "unit": "s"}, "too large to summarise"),
        # an amount below 0 (it gated as "209% faster" before)
        ({"name": "step_time_ms", "value": -11.0}, "value (step_time_ms): -11 ms is negative"),
        (
            {"name": "epoch_time", "values": [3.0, -2.0], "unit": "s", "direction": "lower"},
            "metrics[0].value (epoch_time): -2 s is negative",
        ),
        ({"name": "peak_memory_bytes", "value": -1}, "-1 bytes is negative"),
    ],
)
def test_a_bad_metric_in_a_metrics_file_is_one_line(
    tmp_path: Path, metric: dict[str, Any], where: str
) -> None:
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"metrics": [metric]}), encoding="utf-8")
    db = tmp_path / "store.db"
    code, _, err = ingest(path, f"sqlite:///{db}")
    assert code == 2
    line = one_line(err)
    assert str(path) in line and where in line
    assert not db.exists()


@pytest.mark.parametrize(
    ("metric", "benchmark", "said"),
    [
        ("a\u0000b", "b", "metric 'a\\x00b': a control character (U+0000) in a name"),
        ("step_time_ms", "b\tc", "benchmark 'b\\tc': a control character (U+0009) in a name"),
    ],
)
def test_a_control_character_in_a_name_is_one_line_on_every_store(
    tmp_path: Path, metric: str, benchmark: str, said: str
) -> None:
    # SQLite kept a NUL (and the Prometheus export wrote it raw); PostgreSQL refused it, exit 3
    path = tmp_path / "metrics.json"
    doc = {"metrics": [{"name": metric, "values": [1.0, 2.0], "direction": "lower"}]}
    path.write_text(json.dumps(doc), encoding="utf-8")
    db = tmp_path / "store.db"
    code, _, err = ingest(path, f"sqlite:///{db}", benchmark=benchmark)
    assert code == 2
    assert said in one_line(err)
    assert not db.exists()


def test_the_baseline_shown_is_the_one_the_change_is_measured_from(
    tmp_path: Path, url: str
) -> None:
    """It showed the baseline runs' median, 10.8 ms, beside a change measured from their
    fitted level, 11.47 ms: "10.8 ms -> 30 ms, change +161.5%" (30 / 10.8 is +179%)."""
    for i, ms in enumerate([10.0, 15.0, 10.5, 11.0, 30.0]):
        doc = {"metrics": [{"name": "epoch_time_ms", "values": [ms], "direction": "lower"}]}
        path = tmp_path / f"m{i}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        code, _, err = ingest(path, url, benchmark="ep", branch="main" if i < 4 else "feat")
        assert code == 0, err
    code, out, err = invoke("gate", "--db", url, "--branch", "feat", "--against", "main", "--json")
    (c,) = json.loads(out)["comparisons"]
    assert c["current"] == 30.0
    assert c["baseline"] * (1 + c["change_pct"] / 100) == pytest.approx(30.0)
    code, text, _ = invoke("gate", "--db", url, "--branch", "feat", "--against", "main")
    assert "11.5 ms -> 30 ms, change +161.5%" in text, text


def test_a_huge_value_is_shown_with_its_exponent(tmp_path: Path, url: str) -> None:
    # 1e300 ms was written out in 301 digits in the ingest and history tables
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"metrics": [{"name": "step_time_ms", "values": [1e300]}]}))
    code, out, err = ingest(path, url)
    assert code == 0, err
    assert "1e+300" in out and "0" * 20 not in out
    code, out, err = invoke("history", "--db", url, "--benchmark", "b")
    assert code == 0, err
    assert "1e+300 ms" in out and "0" * 20 not in out


def test_a_metric_given_twice_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    twice = {"name": "epoch_time", "value": 1.0, "unit": "s", "direction": "lower"}
    path.write_text(json.dumps({"metrics": [twice, twice]}), encoding="utf-8")
    db = tmp_path / "store.db"
    code, _, err = ingest(path, f"sqlite:///{db}")
    assert code == 2
    assert f"{path}: metrics: two entries named 'epoch_time'" in one_line(err)
    assert not db.exists()


def test_a_bad_csv_cell_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "train.csv"
    path.write_text(
        "# from the log\nname,value,unit,direction\nepoch_time,12.5,s,lower\n"
        "epoch_time,twelve,s,lower\n",
        encoding="utf-8",
    )
    db = tmp_path / "store.db"
    code, _, err = ingest(path, f"sqlite:///{db}")
    assert code == 2
    assert f"{path}: line 4: value (epoch_time): 'twelve' is not a number" in one_line(err)
    assert not db.exists()


def test_step_times_do_not_apply_to_a_result_file(tmp_path: Path) -> None:
    steps = tmp_path / "steps.txt"
    steps.write_text("1.0\n", encoding="utf-8")
    code, _, err = ingest(PB, f"sqlite:///{tmp_path / 's.db'}", "--step-times", str(steps))
    assert code == 2
    assert "--step-times applies to a profile" in one_line(err)


@pytest.mark.parametrize(("factor", "verdict"), [(1.13, "improvement"), (0.87, "regression")])
def test_a_metrics_files_direction_decides_its_verdict(
    tmp_path: Path, factor: float, verdict: str
) -> None:
    """``tokens_per_s`` is no catalogue metric: the file says higher is better, and the gate
    judges it so (13% more tokens/s is an improvement, 13% fewer a regression)."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    rng = np.random.default_rng(3)

    def write(level: float, i: int) -> Path:
        values = [float(v) for v in level * rng.lognormal(0, 0.003, 4)]
        doc = {"metrics": [{"name": "tokens_per_s", "values": values, "unit": "1/s",
                            "direction": "higher"}]}  # fmt: skip
        path = tmp_path / f"m{i}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        return path

    for i in range(6):
        code, _, err = ingest(write(1500.0, i), url, "--commit", f"{i:040x}")
        assert code == 0, err
    code, _, err = ingest(write(1500.0 * factor, 9), url, branch="feat")
    assert code == 0, err
    code, out, _ = invoke("gate", "--db", url, "--branch", "feat", "--against", "main", "--json")
    (row,) = [c for c in json.loads(out)["comparisons"] if c["metric"] == "tokens_per_s"]
    assert row["verdict"] == verdict
    assert code == (1 if verdict == "regression" else 0)


def test_every_ingest_format_has_a_timing_method_of_its_own() -> None:
    """The formats ``ingest`` reads and the timing methods that keep their histories apart are
    written in one table (models.INGESTED_TIMING, read by the reporters too): a parser's new
    format without a method there would fail at ingest, one method for two formats would mix
    their histories."""
    from perfgate.models import INGESTED_TIMING, ONE_RUN_PER_FILE, RUNNER_TIMING
    from perfgate.parsers.dispatch import FORMAT_AIS_BENCH, FORMAT_ASCEND, FORMAT_TORCH
    from perfgate.parsers.results import FORMAT_METRICS, RESULT_FORMATS

    formats = {FORMAT_ASCEND, FORMAT_TORCH, FORMAT_AIS_BENCH, *RESULT_FORMATS}
    assert set(INGESTED_TIMING) == formats
    methods = set(INGESTED_TIMING.values())
    assert len(methods) == len(formats) and RUNNER_TIMING not in methods
    one_run = {FORMAT_ASCEND, FORMAT_TORCH, FORMAT_AIS_BENCH, FORMAT_METRICS}
    assert {INGESTED_TIMING[f] for f in one_run} == ONE_RUN_PER_FILE
