"""Sequential confirmation: alpha spending keeps the false-alarm rate over all looks, and
``run --confirm`` folds extra repeats into the latest run."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from perfgate.models import Direction, MetricPolicy, RunPoint, Verdict
from perfgate.stats import ALPHA, Candidate, compare_candidates
from perfgate.stats.sequential import look_alpha, spent

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
TIME = MetricPolicy(Direction.LOWER_IS_BETTER, 3.0)


def test_spending_adds_up_to_alpha_and_back_loads_it() -> None:
    looks = [look_alpha(i, initial_repeats=2, extra_repeats=6) for i in range(1, 7)]
    assert sum(looks) == pytest.approx(ALPHA)
    assert looks == sorted(looks)  # early looks need stronger evidence
    assert spent(1.0) == pytest.approx(ALPHA)
    with pytest.raises(ValueError):
        look_alpha(0, initial_repeats=2, extra_repeats=3)


def point(i: int, repeats: list[float]) -> RunPoint:
    return RunPoint(
        run_id=f"r{i}",
        benchmark="b",
        metric="step_time_ms",
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        branch="main",
        commit="c",
        fingerprint_key="k",
        started_at=T0 + timedelta(minutes=i),
        centre=statistics.median(repeats),
        repeat_centres=tuple(repeats),
    )


def false_alarms(rng: np.random.Generator, trials: int, *, spending: bool) -> int:
    """A/A: after a first look, up to 4 extra repeats, stopping at the first regression."""
    alarms = 0
    initial, extra = 1, 4
    for _ in range(trials):
        history = rng.lognormal(0.0, 0.03, size=(20, 3)) * 50.0
        base = tuple(point(i, [float(x) for x in history[i]]) for i in range(20))
        current = [float(x) for x in rng.lognormal(0.0, 0.03, size=initial + extra) * 50.0]
        for look in range(1, extra + 1):
            alpha = (
                look_alpha(look, initial_repeats=initial, extra_repeats=extra)
                if spending
                else ALPHA
            )
            cand = Candidate(point(99, current[: initial + look]), base, TIME, alpha=alpha)
            (c,) = compare_candidates([cand])
            if c.verdict is Verdict.REGRESSION:
                alarms += 1
                break
    return alarms


def test_alpha_spending_keeps_false_alarms_over_all_looks() -> None:
    trials = 1500
    with_spending = false_alarms(np.random.default_rng(9), trials, spending=True)
    naive = false_alarms(np.random.default_rng(9), trials, spending=False)
    assert with_spending / trials <= ALPHA
    assert with_spending <= naive


@pytest.mark.slow
def test_confirm_folds_extra_repeats_into_the_latest_run(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_", "GITLAB"))}
    env.pop("CI", None)
    env["PERFGATE_DATABASE_URL"] = f"sqlite:///{tmp_path / 's.db'}"

    def perfgate(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "perfgate", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    quick = ("--workload", "mlp", "--measured", "15", "--profiled", "0")
    for _ in range(3):
        assert perfgate("run", *quick, "--repeats", "2", "--branch", "main").returncode == 0
    slow = perfgate("run", *quick, "--repeats", "1", "--branch", "feat", "--param", "slowdown=0.3")
    assert slow.returncode == 0, slow.stderr
    original = json.loads(perfgate("history", "--branch", "feat", "--json").stdout)["points"]
    before = perfgate("gate", "--branch", "feat", "--against", "main", "--json")
    step = next(
        c for c in json.loads(before.stdout)["comparisons"] if c["metric"] == "step_time_ms"
    )
    confirm = perfgate(
        "run", *quick, "--branch", "feat", "--against", "main", "--confirm", "2", "--json"
    )
    assert confirm.returncode == 0, confirm.stderr
    if step["verdict"] not in ("regression", "inconclusive"):
        assert "mlp: nothing to confirm" in confirm.stderr
        return
    assert "mlp: settled after" in confirm.stderr or "still inconclusive after 2" in confirm.stderr
    (folded,) = json.loads(confirm.stdout)["runs"]
    assert folded["measurements"]["step_time_ms"]["repeat_centres"][0] == pytest.approx(
        original[0]["repeat_values"][0]
    )
    assert 2 <= len(folded["measurements"]["step_time_ms"]["repeat_centres"]) <= 3
    # the folded run replaced the original in the history of feat
    after = json.loads(perfgate("history", "--branch", "feat", "--json").stdout)["points"]
    assert {p["run_id"] for p in after} == {folded["id"]}
    gate = perfgate("gate", "--branch", "feat", "--against", "main", "--json")
    step_after = next(
        c for c in json.loads(gate.stdout)["comparisons"] if c["metric"] == "step_time_ms"
    )
    assert step_after["current_run_id"] == folded["id"]
    assert step_after["verdict"] != "improvement"
