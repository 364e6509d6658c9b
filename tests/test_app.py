"""Gate use cases over a real SQLite store filled with synthetic runs (no torch needed)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from perfgate.cli import cli
from perfgate.models import (
    BenchmarkSpec,
    CIContext,
    Direction,
    Fingerprint,
    GitContext,
    Measurement,
    RunRecord,
)
from perfgate.stats import summarize
from perfgate.store import open_store

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def fingerprint(**changes: object) -> Fingerprint:
    base: dict[str, object] = dict(
        device_kind="cpu",
        device_model="Xeon",
        device_count=1,
        cpu_model="Xeon",
        cpu_cores=2,
        os="Linux-x86_64",
        python_version="3.11",
        torch_version="2.13.0",
        timing_method="wall-sync-v1",
        params={"batch_size": 128, "threads": 1},
    )
    base.update(changes)
    return Fingerprint(**base)  # type: ignore[arg-type]


def record(
    i: int,
    step_ms: float,
    *,
    branch: str = "main",
    benchmark: str = "mlp",
    noise: float = 0.01,
    fp: Fingerprint | None = None,
    seed: int = 0,
) -> RunRecord:
    rng = np.random.default_rng(seed * 1000 + i)
    reps = [tuple(step_ms * rng.lognormal(0, noise, 30)) for _ in range(3)]
    step = Measurement(
        "step_time_ms", "ms", Direction.LOWER_IS_BETTER, tuple(reps), summarize(reps, steady=True)
    )
    return RunRecord(
        id=f"{benchmark}-{branch}-{i:03d}",
        project="default",
        benchmark=benchmark,
        fingerprint=fp or fingerprint(),
        git=GitContext(commit=f"{i:040x}", branch=branch),
        ci=CIContext(),
        started_at=T0 + timedelta(minutes=i),
        finished_at=T0 + timedelta(minutes=i, seconds=30),
        measurements=(step,),
        spec=BenchmarkSpec(name=benchmark, workload="mlp"),
    )


def fill(url: str, records: list[RunRecord]) -> None:
    store = open_store(url)
    try:
        for r in records:
            store.save_run(r)
    finally:
        store.close()


def gate(url: str, *args: str) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(cli, ["gate", "--db", url, "--json", *args])
    return result.exit_code, json.loads(result.stdout)


def test_gate_judges_each_benchmark_with_fdr_and_window(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    runs = [record(i, 20.0, benchmark=b) for b in ("a", "b", "c") for i in range(8)]
    runs += [
        record(50, 26.0, branch="feat", benchmark="a"),
        record(51, 20.1, branch="feat", benchmark="b"),
    ]
    fill(url, runs)
    code, data = gate(url, "--branch", "feat", "--against", "main")
    assert code == 1
    by_bench = {c["benchmark"]: c for c in data["comparisons"]}  # type: ignore[union-attr]
    assert set(by_bench) == {"a", "b"}  # c has no run on feat
    assert by_bench["a"]["verdict"] == "regression"
    assert by_bench["b"]["verdict"] == "unchanged"
    assert by_bench["a"]["p_adjusted"] >= by_bench["a"]["p_value"]
    assert len(by_bench["a"]["baseline_runs"]) == 8
    assert by_bench["a"]["baseline_commits"][0] == f"{0:040x}"


def test_window_is_capped_and_most_recent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, [record(i, 20.0) for i in range(40)])
    code, data = gate(url, "--branch", "main", "--against", "main")
    assert code == 0
    (c,) = data["comparisons"]  # type: ignore[misc]
    assert len(c["baseline_runs"]) == 30
    assert c["baseline_runs"][-1] == "mlp-main-038"
    assert "mlp-main-039" not in c["baseline_runs"]


def test_other_environment_is_incomparable_and_named(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    other = fingerprint(torch_version="2.12.0")
    fill(url, [record(i, 20.0, fp=other) for i in range(5)] + [record(9, 20.0, branch="pr")])
    code, data = gate(url, "--branch", "pr", "--against", "main")
    assert code == 0
    (c,) = data["comparisons"]  # type: ignore[misc]
    assert c["verdict"] == "incomparable"
    assert "torch_version: '2.12.0' in baseline, '2.13.0' now" in c["fingerprint_differences"]


def test_noise_view_flags_benchmarks_too_noisy_for_their_minimum_effect(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    quiet = [record(i, 20.0, benchmark="quiet", noise=0.005) for i in range(10)]
    rng = np.random.default_rng(1)
    noisy = [
        record(i, 20.0 * float(rng.lognormal(0, 0.15)), benchmark="noisy", noise=0.05)
        for i in range(10)
    ]
    fill(url, quiet + noisy)
    result = CliRunner().invoke(cli, ["noise", "--db", url, "--branch", "main", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["benchmark"]: r for r in json.loads(result.stdout)["metrics"]}
    assert rows["quiet"]["too_noisy"] is False and rows["quiet"]["mde_pct"] < 3.0
    assert rows["noisy"]["too_noisy"] is True and rows["noisy"]["mde_pct"] > 10.0
    text = CliRunner().invoke(cli, ["noise", "--db", url, "--branch", "main"]).stdout
    assert "TOO NOISY" in text and "1 of 2 metrics" in text


def test_history_analyze_names_the_commit_range_and_resets_the_window(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    runs = [record(i, 20.0, noise=0.01) for i in range(30)]
    runs += [record(i, 24.0, noise=0.01) for i in range(30, 42)]
    fill(url, runs)
    result = CliRunner().invoke(
        cli, ["history", "analyze", "--db", url, "--branch", "main", "--json"]
    )
    assert result.exit_code == 0, result.output
    (change,) = json.loads(result.stdout)["change_points"]
    assert change["index"] == 30
    assert change["verdict"] == "regression"
    assert change["commit_range"] == [f"{29:040x}", f"{30:040x}"]
    assert change["change_pct"] > 15
    # the gate's window starts at the accepted change: the new level is not a regression
    code, data = gate(url, "--branch", "main", "--against", "main")
    (c,) = data["comparisons"]  # type: ignore[misc]
    assert c["verdict"] == "unchanged", c["reason"]
    assert c["baseline_runs"][0] == "mlp-main-030"
    assert code == 0


def test_detect_reads_a_series_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(12)
    values = np.r_[rng.normal(100, 1, 40), rng.normal(110, 1, 40)]
    series = tmp_path / "s.csv"
    series.write_text("index,value\n" + "".join(f"{i},{v}\n" for i, v in enumerate(values)))
    result = CliRunner().invoke(cli, ["detect", str(series), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["change_points"] == [40]
    assert data["details"][0]["verdict"] == "regression"
    higher = CliRunner().invoke(cli, ["detect", str(series), "--direction", "higher", "--json"])
    assert json.loads(higher.stdout)["details"][0]["verdict"] == "improvement"
    bad = tmp_path / "bad.csv"
    bad.write_text("index,value\n0,1.0\n1,abc\n")
    result = CliRunner().invoke(cli, ["detect", str(bad)])
    assert result.exit_code == 2
    assert str(bad) in result.stderr and ":3" in result.stderr
