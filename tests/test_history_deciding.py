"""`history analyze` judges the metrics that decide a gate, as the gate does
(perfgate.metrics.not_deciding): where the CPU time decides, a contended runner's wall time
opens no change point and no alert; and where both are recorded, the peak memory's share of
the device's capacity is shown beside its peak in bytes, not deciding, while a budget still
judges it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
from helpers import Done, fill, perfgate, record

from perfgate.metrics import ECHOES, WALL_TIMES, not_deciding
from perfgate.models import Direction, Measurement, RunRecord
from perfgate.stats import summarize

RUNS = 40
STEP_AT = 20


def with_metric(run: RunRecord, metric: str, unit: str, values: list[float]) -> RunRecord:
    """``run`` with one more metric, one value per repeat."""
    reps = [(v,) for v in values]
    direction = Direction.HIGHER_IS_BETTER if unit == "1/s" else Direction.LOWER_IS_BETTER
    m = Measurement(metric, unit, direction, tuple(reps), summarize(reps))
    return replace(run, measurements=(*run.measurements, m))


def contended(i: int, *, cpu_time: bool) -> RunRecord:
    """Run ``i`` of ``mlp`` on a CPU runner that became contended at run STEP_AT: its wall
    time 30% slower from then on, its CPU time (when recorded) as flat as before (fixed
    seed)."""
    wall = 20.0 * (1.3 if i >= STEP_AT else 1.0)
    run = record(i, wall, noise=0.01, seed=31)
    if not cpu_time:
        return run
    rng = np.random.default_rng(3100 + i)
    return with_metric(run, "step_cpu_ms", "ms", [float(18.0 * rng.lognormal(0, 0.01))] * 3)


def analyze(url: str, *args: str) -> Done:
    return perfgate(None, "history", "analyze", "--db", url, "--branch", "main", "--json", *args)


def test_a_contended_wall_time_is_not_analysed_where_the_cpu_time_decides(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, [contended(i, cpu_time=True) for i in range(RUNS)])
    result = analyze(url)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["change_points"] == [] and data["drifts"] == []
    note = "mlp: step_time_ms not analysed (shown, not deciding: its gate decides on the CPU"
    assert note in result.stderr
    listed = perfgate(None, "alerts", "list", "--db", url, "--json")
    assert json.loads(listed.stdout)["alerts"] == []


def test_the_same_wall_time_decides_and_is_found_without_a_cpu_time(tmp_path: Path) -> None:
    """The control: a history recorded before the CPU time was measured is judged on its
    wall time, as the gate judges it, and the step is found where it happened."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, [contended(i, cpu_time=False) for i in range(RUNS)])
    result = analyze(url)
    assert result.returncode == 0, result.stdout + result.stderr
    (change,) = json.loads(result.stdout)["change_points"]
    assert change["metric"] == "step_time_ms" and change["verdict"] == "regression"
    assert change["first_run_after"] == f"mlp-main-{STEP_AT:03d}"
    assert "not analysed" not in result.stderr


def test_a_memory_share_is_shown_beside_its_peak_in_bytes() -> None:
    assert ECHOES == {
        "peak_memory_pct_of_capacity": "peak_memory_bytes",
        "throughput_samples_per_s": "step_time_ms",
    }
    both = not_deciding("cpu", lambda m: m in ("step_cpu_ms", "peak_memory_bytes"))
    assert both == {*WALL_TIMES, "peak_memory_pct_of_capacity"}
    # without its peak in bytes (an ingested profile), the share decides
    assert not_deciding("cpu", lambda m: m == "step_cpu_ms") == set(WALL_TIMES)


def memory_run(i: int, *, branch: str = "main", grow: float = 1.0) -> RunRecord:
    """Run ``i`` with its peak memory in bytes and as a share of a 16 GB device (fixed
    seed); the PR run's memory ``grow`` times main's."""
    rng = np.random.default_rng(3200 + i)
    peak = [float(4e9 * grow * rng.lognormal(0, 0.002)) for _ in range(3)]
    run = record(i, 20.0, branch=branch, noise=0.01, seed=32)
    run = with_metric(run, "peak_memory_bytes", "bytes", peak)
    return with_metric(run, "peak_memory_pct_of_capacity", "%", [p / 16e9 * 100 for p in peak])


def test_the_gate_counts_a_memory_growth_once_and_its_budget_still_judges_the_share(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, [memory_run(i) for i in range(8)] + [memory_run(20, branch="feat", grow=1.4)])
    suite = tmp_path / "perfgate.toml"
    suite.write_text('[budgets]\npeak_memory_pct_of_capacity = "<= 30"\n', encoding="utf-8")
    result = perfgate(
        None, "gate", "--db", url, "--suite", str(suite), "--branch", "feat", "--against", "main",
        "--json",
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    rows = {(c["metric"], c["kind"]): c for c in json.loads(result.stdout)["comparisons"]}
    history = rows[("peak_memory_bytes", "")]
    assert history["decides"] and history["verdict"] == "regression"
    share = rows[("peak_memory_pct_of_capacity", "")]
    assert not share["decides"]  # the same growth, shown beside it
    budget = rows[("peak_memory_pct_of_capacity", "budget")]
    assert budget["decides"] and budget["verdict"] == "over_budget"  # 35% of the device
