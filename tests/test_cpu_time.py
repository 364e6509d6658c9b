"""CPU time beside wall time: ``step_cpu_ms``, the measure without the scheduler's waits.

Real torch training steps on the CPU in worker processes (the built-in ``mlp``, one thread),
a real SQLite file. Nothing here asserts on a ratio of measured times: under a CPU hog
the wall time of a step is the scheduler's business, so the CPU clock is checked by what it
does (a waiting step accrues none of it), with bounds a busy machine cannot cross.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import fill, fingerprint, perfgate, record

from perfgate.app import compare_records
from perfgate.app.measure import CONTENTION_RATIO, measurement
from perfgate.config import Config
from perfgate.metrics import entry
from perfgate.models import Comparison, GateResult, RunRecord, Verdict
from perfgate.stats.decide import deciding, gate_fails
from perfgate.store import open_store

torch = pytest.importorskip("torch")


def run_mlp(cwd: Path, *, repeats: int, measured: int) -> dict[str, object]:
    """One ``perfgate run --workload mlp`` (one thread, no profile); its run as JSON."""
    done = perfgate(
        cwd,
        "run", "--workload", "mlp", "--branch", "main", "--repeats", str(repeats),
        "--warmup", "5", "--measured", str(measured), "--profiled", "0", "--json",
        spawn=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run: dict[str, object] = json.loads(done.stdout)["runs"][0]
    return run


def test_a_cpu_run_records_its_cpu_time_beside_its_wall_time(tmp_path: Path) -> None:
    run = run_mlp(tmp_path, repeats=1, measured=12)
    measurements = run["measurements"]
    assert isinstance(measurements, dict)
    wall, cpu = measurements["step_time_ms"], measurements["step_cpu_ms"]
    assert cpu["unit"] == "ms"
    assert cpu["median"] > 0 and cpu["centre"] > 0
    assert cpu["n"] == wall["n"]  # the same steps, the same warm-up left out
    assert "step_device_ms" not in measurements  # no device on the CPU
    fp = run["fingerprint"]
    assert isinstance(fp, dict) and fp["params"]["threads"] == 1

    store = open_store(f"sqlite:///{tmp_path / '.perfgate' / 'perfgate.db'}")
    try:
        stored = store.get_run(str(run["id"])).measurement("step_cpu_ms")
    finally:
        store.close()
    assert stored is not None and len(stored.repeats) == 1 and len(stored.repeats[0]) == 12
    assert all(x > 0 for x in stored.repeats[0])


SLEEPER = """
import time

def build(device="cpu"):
    def step():
        time.sleep(0.025)  # waits, as a step waits while the scheduler runs a neighbour
    return {"step": step, "batch_size": 1}
"""

SLEEPER_SUITE = """
[defaults]
repeats = 1
warmup = 1
measured = 8
profiled = 0

[[benchmarks]]
name = "sleeper"
entry = "bench_sleeper:build"
"""


def test_a_step_that_waits_takes_wall_time_and_no_cpu_time(tmp_path: Path) -> None:
    """The mechanism a contended run relies on: ``step_cpu_ms`` is read off this thread's
    (or process's) CPU clock, which stands still while the step is not running. A step that
    sleeps 25 ms is at least 25 ms of wall time and next to no CPU time. Both bounds are
    absolute and a busy machine only moves each away from its limit (more wall time; a
    sleeping thread accrues no CPU time however long it waits): no ratio of two measured
    times is asserted, so a CPU hog beside the test cannot fail it."""
    (tmp_path / "bench_sleeper.py").write_text(SLEEPER)
    (tmp_path / "perfgate.toml").write_text(SLEEPER_SUITE)
    done = perfgate(tmp_path, "run", "--branch", "main", "--json")
    assert done.returncode == 0, done.stderr
    measurements = json.loads(done.stdout)["runs"][0]["measurements"]
    wall, cpu = measurements["step_time_ms"], measurements["step_cpu_ms"]
    assert wall["n"] == cpu["n"] > 0
    assert wall["min"] >= 25.0  # time.sleep waits at least that long
    assert cpu["max"] < 5.0  # about 0.05 ms measured (the Python around the sleep)


def test_more_than_one_thread_takes_the_process_cpu_time() -> None:
    from perfgate.runner.worker import cpu_time_clock

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert cpu_time_clock("cpu")[0] == "thread"
        torch.set_num_threads(2)
        assert cpu_time_clock("cpu")[0] == "process"
    finally:
        torch.set_num_threads(before)
    assert cpu_time_clock("cuda")[0] == ""  # off the CPU the host thread waits: not recorded
    assert "process" in entry("step_cpu_ms").description


def with_cpu(run: RunRecord, cpu_ms: float, *, seed: int) -> RunRecord:
    """``run`` with a ``step_cpu_ms`` of three repeats of 30 steps around ``cpu_ms``."""
    rng = np.random.default_rng(seed)
    reps = [tuple(cpu_ms * rng.lognormal(0, 0.01, 30)) for _ in range(3)]
    return replace(run, measurements=(*run.measurements, measurement("step_cpu_ms", reps)))


def gate(tmp_path: Path, heads: Sequence[RunRecord], *, baseline_cpu: bool = True) -> GateResult:
    """The gate on ``heads`` against 6 quiet main runs of 10 ms (wall and, with
    ``baseline_cpu``, CPU)."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    main = [record(i, 10.0) for i in range(6)]
    fill(url, [with_cpu(r, 10.0, seed=i) for i, r in enumerate(main)] if baseline_cpu else main)
    store = open_store(url)
    try:
        return compare_records(Config(), store, heads, branch="feat", against="main")
    finally:
        store.close()


def by_metric(result: GateResult) -> dict[str, Comparison]:
    return {c.metric: c for c in result.comparisons}


def test_a_contended_run_says_so_and_its_cpu_time_decides(tmp_path: Path) -> None:
    """Three times the wall time, the same CPU time: the neighbours' doing. The wall time
    is shown with its own verdict, but the CPU time decides, and the gate passes."""
    contended = with_cpu(record(50, 30.0, branch="feat"), 10.0, seed=50)
    result = gate(tmp_path, [contended])
    wall = contended.measurement("step_time_ms")
    cpu = contended.measurement("step_cpu_ms")
    assert wall is not None and cpu is not None
    assert result.notes == (
        f"mlp: the machine was contended during this run: wall time {wall.summary.median:.1f} "
        f"ms against {cpu.summary.median:.1f} ms of CPU time; step_cpu_ms decided (the "
        "scheduler's waits are not in it); step_time_ms and throughput are shown, not deciding",
    )
    rows = by_metric(result)
    assert rows["step_time_ms"].verdict is Verdict.REGRESSION
    assert not rows["step_time_ms"].decides
    assert rows["step_cpu_ms"].decides
    assert rows["step_cpu_ms"].verdict is not Verdict.REGRESSION
    assert [c.metric for c in deciding(result.comparisons)] == ["step_cpu_ms"]
    assert result.verdict is not Verdict.REGRESSION
    assert not gate_fails(result.comparisons, frozenset({Verdict.REGRESSION}))


def test_more_cpu_time_is_a_regression_whatever_the_wall_time(tmp_path: Path) -> None:
    """30% more CPU time per step is a regression even when the wall time did not move
    (a quieter machine than main's): the CPU time decides."""
    slower = with_cpu(record(50, 10.0, branch="feat"), 13.0, seed=50)
    result = gate(tmp_path, [slower])
    rows = by_metric(result)
    assert rows["step_cpu_ms"].verdict is Verdict.REGRESSION and rows["step_cpu_ms"].decides
    assert not rows["step_time_ms"].decides
    assert result.verdict is Verdict.REGRESSION


def test_a_baseline_without_cpu_times_is_judged_on_the_wall_time(tmp_path: Path) -> None:
    """Main's runs were recorded before CPU times were: the wall time decides as it did,
    the CPU time is shown, and a contended run's note says the verdict measured the
    neighbours too."""
    contended = with_cpu(record(50, 30.0, branch="feat"), 10.0, seed=50)
    result = gate(tmp_path, [contended], baseline_cpu=False)
    rows = by_metric(result)
    assert rows["step_time_ms"].decides and rows["step_time_ms"].verdict is Verdict.REGRESSION
    assert not rows["step_cpu_ms"].decides
    assert rows["step_cpu_ms"].verdict is Verdict.NO_BASELINE
    assert "the wall time decided (its baseline has no CPU times)" in result.notes[0]


@pytest.mark.parametrize(
    ("wall_ms", "threads"),
    [(10.5, 1), (CONTENTION_RATIO * 10.0 * 0.97, 1), (30.0, 4)],
    ids=["quiet", "just-below-the-ratio", "multi-threaded"],
)
def test_no_note_for_a_quiet_or_multi_threaded_run(
    tmp_path: Path, wall_ms: float, threads: int
) -> None:
    fp = fingerprint(params={"batch_size": 128, "threads": threads})
    head = with_cpu(record(50, wall_ms, branch="feat", fp=fp), 10.0, seed=50)
    notes = gate(tmp_path, [head]).notes
    assert not any("contended" in n for n in notes), notes
