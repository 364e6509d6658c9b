"""Utilisation metrics are judged in points: with the default minimum effect of 15 points
(asc-tools' "NPU utilisation -15 points" rule), a drop of 16 points is a regression and one
of 10 points is not, whatever the percentage of the baseline those are."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import fill, perfgate, record

from perfgate.app.measure import measurement
from perfgate.models import RunRecord


def _with_util(run: RunRecord, metric: str, value: float) -> RunRecord:
    return replace(run, measurements=(*run.measurements, measurement(metric, [[value]])))


def _history(url: str, metric: str, level: float, head: float) -> dict[str, object]:
    rng = np.random.default_rng(7)
    main = [_with_util(record(i, 20.0), metric, level + rng.normal(0, 0.5)) for i in range(10)]
    feat = _with_util(record(20, 20.0, branch="feat"), metric, head)
    fill(url, [*main, feat])
    result = perfgate(None, "gate", "--db", url, "--json", "--branch", "feat", "--against", "main")
    data = json.loads(result.stdout)
    (row,) = [c for c in data["comparisons"] if c["metric"] == metric]
    return {"exit": result.returncode, **row}


@pytest.mark.parametrize("metric", ["aicore_util_pct", "cube_util_pct", "l2_hit_pct"])
def test_a_16_point_drop_is_a_regression(tmp_path: Path, metric: str) -> None:
    row = _history(f"sqlite:///{tmp_path / 's.db'}", metric, 80.0, 64.0)
    assert row["verdict"] == "regression"
    assert row["exit"] == 1
    assert row["unit"] == "%"


@pytest.mark.parametrize("metric", ["aicore_util_pct", "device_busy_pct"])
def test_a_10_point_drop_is_not(tmp_path: Path, metric: str) -> None:
    row = _history(f"sqlite:///{tmp_path / 's.db'}", metric, 80.0, 70.0)
    assert row["verdict"] == "unchanged"
    assert row["exit"] == 0
    # 15 points of an 80% baseline, stated as a percentage of it.
    assert row["min_effect_pct"] == pytest.approx(100 * 15 / 80.0, rel=0.05)


def test_the_points_are_the_suites_to_change(tmp_path: Path) -> None:
    suite = tmp_path / "perfgate.toml"
    suite.write_text("[metrics.aicore_util_pct]\nmin_effect_abs = 5.0\n", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 's.db'}"
    rng = np.random.default_rng(7)
    main = [
        _with_util(record(i, 20.0), "aicore_util_pct", 80.0 + rng.normal(0, 0.5)) for i in range(10)
    ]
    fill(url, [*main, _with_util(record(20, 20.0, branch="feat"), "aicore_util_pct", 70.0)])
    against = ["--branch", "feat", "--against", "main"]
    result = perfgate(None, "gate", "--db", url, "--json", "--suite", str(suite), *against)
    data = json.loads(result.stdout)
    (row,) = [c for c in data["comparisons"] if c["metric"] == "aicore_util_pct"]
    assert row["verdict"] == "regression"
    assert result.returncode == 1
