"""Gate use cases over a real SQLite store filled with synthetic runs (no torch needed)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
from helpers import fill, fingerprint, perfgate, record

from perfgate.app import compare_records
from perfgate.config import config_from_mapping
from perfgate.models import (
    Direction,
    RunRecord,
    Verdict,
)
from perfgate.store import open_store


def gate(url: str, *args: str) -> tuple[int, dict[str, object]]:
    result = perfgate(None, "gate", "--db", url, "--json", *args)
    return result.returncode, json.loads(result.stdout)


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
    result = perfgate(None, "noise", "--db", url, "--branch", "main", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {r["benchmark"]: r for r in json.loads(result.stdout)["metrics"]}
    assert rows["quiet"]["too_noisy"] is False and rows["quiet"]["mde_pct"] < 6.0
    assert rows["noisy"]["too_noisy"] is True and rows["noisy"]["mde_pct"] > 20.0
    text = perfgate(None, "noise", "--db", url, "--branch", "main").stdout
    assert "TOO NOISY" in text and "1 of 2 metrics" in text


def test_noise_claims_nothing_of_metrics_it_could_not_judge(tmp_path: Path) -> None:
    # with 2 runs each it said "every metric with a baseline catches twice its minimum
    # effect" under a table of "needs 3+ runs"
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, [record(i, 20.0) for i in range(2)])
    text = perfgate(None, "noise", "--db", url, "--branch", "main").stdout
    assert "needs 3+ runs" in text
    assert "no metric has 3+ runs yet" in text and "catches" not in text
    fill(url, [record(i, 20.0, noise=0.005) for i in range(2, 10)])
    text = perfgate(None, "noise", "--db", url, "--branch", "main").stdout
    assert "each of the " in text and "catches twice its minimum effect" in text


def test_history_analyze_names_the_commit_range_and_resets_the_window(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    runs = [record(i, 20.0, noise=0.01) for i in range(30)]
    runs += [record(i, 24.0, noise=0.01) for i in range(30, 42)]
    fill(url, runs)
    result = perfgate(None, "history", "analyze", "--db", url, "--branch", "main", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
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
    result = perfgate(None, "detect", str(series), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["change_points"] == [40]
    assert data["details"][0]["verdict"] == "regression"
    higher = perfgate(None, "detect", str(series), "--direction", "higher", "--json")
    assert json.loads(higher.stdout)["details"][0]["verdict"] == "improvement"
    bad = tmp_path / "bad.csv"
    bad.write_text("index,value\n0,1.0\n1,abc\n")
    result = perfgate(None, "detect", str(bad))
    assert result.returncode == 2
    assert str(bad) in result.stderr and ":3" in result.stderr


def _judged(url: str, suite: dict[str, object], head: RunRecord) -> dict[tuple[str, str], Verdict]:
    store = open_store(url)
    try:
        result = compare_records(
            config_from_mapping(suite), store, [head], branch=head.git.branch, against="main"
        )
    finally:
        store.close()
    return {(c.metric, c.method): c.verdict for c in result.comparisons}


def test_the_suite_direction_decides_the_verdict_not_the_recorded_one(tmp_path: Path) -> None:
    """``[metrics.step_time_ms] direction = "higher"``: a run 30% above its history is an
    improvement, though the run recorded step_time_ms as lower-is-better."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, [record(i, 20.0) for i in range(8)])
    slower = record(50, 26.0, branch="feat")
    assert slower.measurements[0].direction is Direction.LOWER_IS_BETTER
    assert _judged(url, {}, slower) == {("step_time_ms", "history"): Verdict.REGRESSION}
    higher = {"metrics": {"step_time_ms": {"direction": "higher"}}}
    assert _judged(url, higher, slower) == {("step_time_ms", "history"): Verdict.IMPROVEMENT}


def test_the_suite_direction_decides_a_paired_verdict_too(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    # (ten pairs: fewer cannot decide, whatever they show)
    base = record(1, 20.0, noise=0.002, repeats=10)
    head = replace(record(2, 26.0, branch="feat", noise=0.002, repeats=10), paired_with=base.id)
    fill(url, [base])
    assert _judged(url, {}, head)[("step_time_ms", "paired")] is Verdict.REGRESSION
    higher = {"metrics": {"step_time_ms": {"direction": "higher"}}}
    assert _judged(url, higher, head)[("step_time_ms", "paired")] is Verdict.IMPROVEMENT
