"""Drifts: a ramp is one finding, and a creeping regression is reported by the long-horizon
comparison (perfgate.stats.drift), down to `history analyze` and its alert on a real store."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from fake_forge import FakeForge
from helpers import Done, creeping_runs, fill, perfgate, record

from perfgate.errors import UsageError
from perfgate.models import Direction, Measurement
from perfgate.stats import summarize
from perfgate.stats.changepoints import detect_change_points
from perfgate.stats.drift import BLOCK_RUNS, HORIZON_DAYS, compare_horizon


def noise(n: int, cov: float, seed: int) -> np.ndarray:
    """n runs of log-normal noise at CoV ``cov`` around 100 (fixed seed)."""
    return 100.0 * np.exp(cov * np.random.default_rng(seed).standard_normal(n))


def creep(n: int, total: float, cov: float, seed: int) -> np.ndarray:
    """A linear creep of ``total`` (0.08: +8%) over all n runs, under noise."""
    return noise(n, cov, seed) * (1.0 + total * np.arange(n) / (n - 1))


# The statistics ---------------------------------------------------------------------------


def test_a_35_percent_ramp_over_100_runs_is_one_drift() -> None:
    x = creep(100, 0.35, 0.03, 21)
    assert detect_change_points(list(x)) == []  # no staircase of steps
    drift = compare_horizon(list(x))
    assert drift is not None
    assert 25.0 < drift.change_pct < 40.0
    assert drift.confidence > 0.999
    assert (drift.baseline_first, drift.baseline_last) == (0, BLOCK_RUNS - 1)
    assert (drift.recent_first, drift.recent_last) == (100 - BLOCK_RUNS, 99)
    assert drift.start <= 15 and drift.end >= 85  # it moved over the whole span


def test_a_ramp_between_two_levels_is_located() -> None:
    ramp = np.clip((np.arange(200) - 50) / 100, 0.0, 1.0)  # +35% over runs 50..150
    x = noise(200, 0.01, 22) * 1.35**ramp
    assert detect_change_points(list(x)) == []
    drift = compare_horizon(list(x))
    assert drift is not None
    assert abs(drift.start - 50) <= 5 and abs(drift.end - 150) <= 5
    assert drift.change_pct == pytest.approx(35.0, abs=2.0)


def test_8_percent_over_160_runs_is_reported() -> None:
    x = creep(160, 0.08, 0.02, 23)
    assert detect_change_points(list(x)) == []
    drift = compare_horizon(list(x))
    assert drift is not None
    assert 5.0 < drift.change_pct < 10.0 and drift.p_value < 0.001
    assert drift.horizon_runs == 160 - BLOCK_RUNS


def test_flat_noise_has_no_drift() -> None:
    alarms = sum(
        compare_horizon(list(noise(200, cov, seed))) is not None
        for seed in range(100, 140)
        for cov in (0.01, 0.05)
    )
    assert alarms <= 1


def test_heavy_tails_and_spikes_do_not_fake_a_drift() -> None:
    rng = np.random.default_rng(24)
    x = 100.0 * np.exp(0.02 * rng.standard_t(2, size=120))
    x[[3, 5, 112, 115, 119]] *= [0.5, 0.6, 3.0, 5.0, 10.0]  # spikes in both blocks
    assert compare_horizon(list(x)) is None


def test_a_step_is_a_change_point_not_a_drift() -> None:
    x = noise(150, 0.02, 25)
    x[80:] *= 1.10
    steps = [p.index for p in detect_change_points(list(x))]
    assert steps == [80]
    assert compare_horizon(list(x)) is not None  # the step alone moves the level...
    assert compare_horizon(list(x), steps=steps) is None  # ...and is divided out


def test_a_drift_beside_a_step_is_still_measured() -> None:
    x = creep(200, 0.04, 0.01, 26)
    x[100:] *= 1.08
    steps = [p.index for p in detect_change_points(list(x))]
    assert steps == [100]
    drift = compare_horizon(list(x), steps=steps)
    assert drift is not None and drift.steps_removed == 1
    assert 1.5 < drift.change_pct < 6.0  # the creep (about 4%), not the creep and the step


@pytest.mark.parametrize(("runs", "total", "cov"), [(30, 0.50, 0.005), (40, 0.20, 0.01)])
def test_a_large_clean_creep_is_reported(runs: int, total: float, cov: float) -> None:
    # The runs at both ends of a creep sat on one side of a running median cut short there,
    # which read as serial dependence and hid the creep: the larger and cleaner, the surer.
    x = creep(runs, total, cov, 30)
    drift = compare_horizon(list(x))
    assert drift is not None
    assert 0.5 * total * 100 < drift.change_pct < total * 100
    assert drift.confidence > 0.999


def test_a_load_cycle_beside_a_step_does_not_fake_a_drift() -> None:
    # The step's jump, measured on the runs either side of it, is off by the cycle's phase
    # there: dividing it out left that error as a drift in 5 of these 40 series.
    faked = []
    for seed in range(40):
        rng = np.random.default_rng([31, seed])
        t = np.arange(200)
        log_level = 0.03 * np.sin(2 * np.pi * t / rng.uniform(20, 40) + rng.uniform(0, 6.28))
        log_level[int(rng.integers(20, 100)) :] += math.log(1.10)
        x = 100.0 * np.exp(log_level + 0.02 * rng.standard_t(3, 200) / math.sqrt(3))
        steps = [p.index for p in detect_change_points(list(x))]
        drift = compare_horizon(list(x), steps=steps)
        if drift is not None and steps:
            faked.append((seed, steps, round(drift.change_pct, 1)))
    assert faked == []


def test_the_horizon_is_30_days_for_a_nightly_job() -> None:
    x = creep(120, 0.10, 0.01, 27)
    ages = [float(119 - i) for i in range(120)]  # one run a day
    drift = compare_horizon(list(x), ages_days=ages)
    assert drift is not None
    assert drift.horizon_days == HORIZON_DAYS and drift.horizon_runs == 30
    assert drift.baseline_last == 119 - 30


def test_too_short_or_too_small_or_bad_input() -> None:
    assert compare_horizon(list(creep(3 * BLOCK_RUNS - 1, 0.3, 0.01, 28))) is None
    assert compare_horizon(list(creep(100, 0.3, 0.01, 28)), min_effect_pct=50.0) is None
    with pytest.raises(UsageError):
        compare_horizon([1.0, float("nan")] * 20)
    with pytest.raises(UsageError):
        compare_horizon([1.0] * 40, ages_days=[0.0])
    with pytest.raises(UsageError):
        compare_horizon([1.0] * 40, alpha=1.0)


# history analyze on a real store ------------------------------------------------------------


def github_env(forge: FakeForge) -> dict[str, str | None]:
    """A GitHub Actions job's environment pointing at the fake forge."""
    env: dict[str, str | None] = {
        k: None
        for k in os.environ
        if k.startswith(("GITHUB_", "GITLAB_", "CI_", "RUNNER_")) or k in ("CI", "GITLAB_CI")
    }
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[k] = None
    env.update(
        GITHUB_ACTIONS="true",
        GITHUB_API_URL=forge.url,
        GITHUB_REPOSITORY="o/r",
        GITHUB_TOKEN="drift-token",  # given write access below
        PERFGATE_HTTP_BACKOFF_S="0.01",
        PERFGATE_HTTP_TIMEOUT_S="2",
        PERFGATE_HTTP_BUDGET_S="6",
    )
    return env


def analyze(url: str, *args: str, env: dict[str, str | None] | None = None) -> Done:
    return perfgate(None, "history", "analyze", "--db", url, "--branch", "main", *args, env=env)


def test_history_analyze_reports_8_percent_over_160_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, creeping_runs(0, 160))
    result = analyze(url, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["change_points"] == []
    (drift,) = data["drifts"]
    assert drift["verdict"] == "regression" and drift["metric"] == "step_time_ms"
    assert 5.0 < drift["change_pct"] < 10.0 and drift["confidence"] > 0.999
    assert drift["horizon_runs"] == 150 and drift["baseline_runs"] == [0, 9]
    assert drift["commit_range"][1] == f"{drift['moved_over_runs'][1]:040x}"
    text = analyze(url).stdout
    assert "no change points" in text
    assert "mlp step_time_ms: main is " in text and "% slower than 150 runs / 6 days ago" in text


def test_history_analyze_reports_a_30_run_creep_from_100_to_150_ms(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, [record(i, 100.0 + 50.0 * i / 29, seed=32) for i in range(30)])
    result = analyze(url, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    drifts = {d["metric"]: d for d in json.loads(result.stdout)["drifts"]}
    assert drifts["step_time_ms"]["verdict"] == "regression"
    assert 30.0 < drifts["step_time_ms"]["change_pct"] < 50.0


def test_history_analyze_alert_opens_one_alert_for_a_creep(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, creeping_runs(0, 160))
    with FakeForge() as forge:
        forge.tokens["drift-token"] = "write"
        env = github_env(forge)
        first = analyze(url, "--alert", env=env)
        assert first.returncode == 0, first.stdout + first.stderr
        # a drift says what it is, not "change point(s)"
        assert "opened with 1 drift (mlp step_time_ms: main is " in first.stderr
        assert "% slower than 150 runs / 6 days ago)" in first.stderr
        assert "change point" not in first.stderr
        (issue,) = forge.issues["o/r"]
        assert str(issue["body"]).count("regression (drift: main is ") == 1

        fill(url, creeping_runs(160, 170))  # the next nights: the newest block moves on
        second = analyze(url, "--alert", env=env)
        assert second.returncode == 0, second.stdout + second.stderr
        assert "no new change points to report" in second.stderr
        assert len(forge.issues["o/r"]) == 1

    listed = perfgate(None, "alerts", "list", "--db", url, "--json")
    (alert,) = json.loads(listed.stdout)["alerts"]  # found twice, one alert
    assert alert["source"] == "drift" and alert["verdict"] == "regression"
    assert alert["run_id"] == "mlp-main-159"  # keyed on the newest run when first found
    again = json.loads(analyze(url, "--json").stdout)
    (drift,) = again["drifts"]
    assert drift["alert_run"] == "mlp-main-159"


def test_a_drift_is_named_as_one_in_the_alert_comment_and_summary(tmp_path: Path) -> None:
    from perfgate import app
    from perfgate.config import Config
    from perfgate.reporters.markdown import alert_summary, render_alert_comment
    from perfgate.store import open_store

    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, creeping_runs(0, 160))
    store = open_store(url)
    try:
        found = app.analyze_history(Config(), store, branch="main", record=False)
    finally:
        store.close()
    (drift,) = found
    head = render_alert_comment("main", found).splitlines()[0]
    assert head == "**perfgate**: 1 new drift on main"
    summary = alert_summary(found, new=True)
    assert summary.startswith("1 new drift (mlp step_time_ms: main is ")
    assert summary.endswith("% slower than 150 runs / 6 days ago)")
    assert f"{abs(drift.point.change_pct):.1f}% slower" in summary


def test_a_metric_that_rises_from_zero_does_not_break_the_nightly_analysis(tmp_path: Path) -> None:
    """A share that was exactly 0 for 20 runs (no communication on one device) and then
    0.5-2 ms: a change from 0 has no relative size; the analysis still finishes (exit 0)
    with finite JSON, and alerts, rather than failing every night."""
    rng = np.random.default_rng(4)
    runs = []
    for i in range(40):
        base = record(i, 20.0, noise=0.01)
        level = 0.0 if i < 20 else float(rng.uniform(0.5, 2.0))
        reps = [tuple([level] * 30) for _ in range(3)]
        extra = Measurement(
            "communication_not_overlapped_ms", "ms", Direction.LOWER_IS_BETTER, tuple(reps),
            summarize(reps, steady=True),
        )  # fmt: skip
        runs.append(replace(base, measurements=(*base.measurements, extra)))
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, runs)
    result = analyze(url, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert all(math.isfinite(c["change_pct"]) for c in data["change_points"])


# One family per benchmark ------------------------------------------------------------------


def test_a_drift_is_kept_only_if_it_holds_among_its_benchmarks_series() -> None:
    from perfgate.stats.drift import kept_in_family

    assert kept_in_family([0.004], tested=1) == [True]
    assert kept_in_family([0.004], tested=10) == [False]  # 0.004 x 10 / 1 = 0.04
    assert kept_in_family([0.0001, 0.004], tested=2) == [True, True]
    assert kept_in_family([], tested=5) == []


def test_noise_drifts_of_many_series_are_not_reported_and_a_creep_still_is() -> None:
    from perfgate.stats.drift import kept_in_family

    found = [compare_horizon(list(noise(60, 0.03, 5000 + k))) for k in range(40)]
    raw = [d.p_value for d in found if d is not None]
    assert len(raw) == 2  # these seeds' noise holds two drifts significant on their own...
    assert not any(kept_in_family(raw, tested=40))  # ...which the family does not report
    real = compare_horizon(list(creep(160, 0.08, 0.02, 1)))
    assert real is not None
    assert kept_in_family([real.p_value, *raw], tested=41) == [True, False, False]


def test_history_analyze_keeps_a_creep_beside_twelve_flat_benchmarks(tmp_path: Path) -> None:
    # Each benchmark is its own family: twelve flat ones do not dilute the creep of another.
    url = f"sqlite:///{tmp_path / 's.db'}"
    runs = creeping_runs(0, 160)
    for b in range(12):
        z = np.random.default_rng(500 + b).standard_normal(60)
        runs += [
            record(i, 20.0 * float(np.exp(0.03 * z[i])), benchmark=f"flat{b}", seed=b)
            for i in range(60)
        ]
    fill(url, runs)
    data = json.loads(analyze(url, "--json").stdout)
    assert [d["benchmark"] for d in data["drifts"]] == ["mlp"]


def test_detect_reports_a_ramp_as_one_drift_with_its_span(tmp_path: Path) -> None:
    # +10% over runs 40-60 of 100, CoV 1%: no change point, one drift over those runs.
    ramp = np.clip((np.arange(100) - 40) / 20, 0.0, 1.0)
    values = 100.0 * np.exp(0.01 * np.random.default_rng(5).standard_normal(100)) * (1 + 0.1 * ramp)
    series = tmp_path / "ramp.csv"
    series.write_text("index,value\n" + "".join(f"{i},{v}\n" for i, v in enumerate(values)))
    result = perfgate(None, "detect", str(series), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["change_points"] == []
    drift = data["drift"]
    assert drift["verdict"] == "regression"
    assert drift["change_pct"] == pytest.approx(10.0, abs=2.0)
    assert abs(drift["start"] - 41) <= 3 and abs(drift["end"] - 60) <= 3
    done = perfgate(None, "detect", str(series))
    text = done.stdout + done.stderr
    assert "no change points in 100 values" in text
    assert "drift over runs" in text and "regression" in text
