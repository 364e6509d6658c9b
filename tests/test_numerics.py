"""The numerics guard (DESIGN.md §5): the loss at the end of the measured window, with a fixed
seed, must not move. A change beyond its tolerance (``[metrics.loss] min_effect_pct``, a
relative %) is a ``regression`` of kind ``numerics`` in either direction and whatever the
speed did; the ``slowdown`` knob, which stands in for a change that only costs time, must
leave it equal bit for bit. Also here: the memory peak as a share of the device's capacity,
and the profile's utilisation as measurements.

Most tests judge built records with the stats API and a real SQLite store; three run real
torch workers on the CPU (a built-in workload, and a user entry measured A/B in a real git
repository).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest
from helpers import record
from npu_standin import StandIn

from perfgate.app.gate import compare, gate_failed
from perfgate.app.measure import (
    capacity_measurements,
    measurement,
    profile_measurements,
    training_measurements,
    utilisation_measurements,
)
from perfgate.config import Config, read_config_file
from perfgate.metrics import default_policy
from perfgate.models import (
    BenchmarkSpec,
    Direction,
    GateResult,
    MetricPolicy,
    ProfileSummary,
    RunRecord,
    Verdict,
)
from perfgate.runner import BenchmarkOutcome, RepeatResult, run_benchmark
from perfgate.runner.backends import host_memory_bytes
from perfgate.runner.worker import loss_value
from perfgate.stats.decide import numerics_verdict
from perfgate.stats.paired import Pair, PairedEvidence, compare_pairs, decide_paired
from perfgate.store import SqlStore, open_store

LOSS = default_policy("loss")
TIME = MetricPolicy(Direction.LOWER_IS_BETTER, 3.0)
NUMERICS = "the numerics changed — a result that must not move moved, whatever the speed did"

# -- the rule ------------------------------------------------------------------------------


def test_the_catalogue_makes_the_loss_a_numerics_metric_with_a_relative_tolerance() -> None:
    assert LOSS.numerics and LOSS.deterministic
    assert LOSS.min_effect_pct == pytest.approx(0.1)


def test_a_loss_beyond_its_tolerance_is_a_regression_in_either_direction() -> None:
    up = numerics_verdict("loss", 2.2981, 2.3012, 0.1)
    assert up == (Verdict.REGRESSION, pytest.approx(0.1349, abs=1e-4), up[2])
    assert up[2] == f"loss 2.3012 vs 2.2981 (+0.13%, tolerance 0.1%): {NUMERICS}"
    # A lower loss from a change that should not touch the numerics is broken numerics too.
    down = numerics_verdict("loss", 2.3012, 2.2981, 0.1)
    assert down[0] is Verdict.REGRESSION and down[1] < 0
    assert "(-0.13%, tolerance 0.1%)" in down[2]


def test_a_loss_within_its_tolerance_is_unchanged_and_never_an_improvement() -> None:
    for current in (2.2981, 2.2990, 2.2972):  # equal, +0.04%, -0.04%
        verdict, change, reason = numerics_verdict("loss", 2.2981, current, 0.1)
        assert verdict is Verdict.UNCHANGED, reason
        assert abs(change) < 0.1
        assert reason.endswith("the numerics held")
    assert numerics_verdict("loss", 2.2981, 2.2981, 0.1)[1] == 0.0


def test_a_loss_that_is_not_finite_is_a_regression() -> None:
    assert numerics_verdict("loss", 2.3, math.nan, 0.1)[0] is Verdict.REGRESSION
    assert numerics_verdict("loss", 2.3, math.inf, 50.0)[0] is Verdict.REGRESSION


# -- history: through the gate, on a real store ----------------------------------------------


def _with_loss(step_ms: float, i: int, loss: float, branch: str = "main") -> RunRecord:
    """A synthetic run (three repeats of step times around ``step_ms``) whose three repeats
    each ended at ``loss``."""
    run = record(i, step_ms, branch=branch)
    return replace(run, measurements=(*run.measurements, measurement("loss", [[loss]] * 3)))


@pytest.fixture
def history(tmp_path: Path) -> Iterator[SqlStore]:
    store = open_store(f"sqlite:///{tmp_path / 'perfgate.db'}")
    for i in range(4):
        store.save_run(_with_loss(10.0, i, 2.2981))
    yield store
    store.close()


def _gate(store: SqlStore, loss: float, step_ms: float, config: Config | None = None) -> GateResult:
    store.save_run(_with_loss(step_ms, 10, loss, branch="feat"))
    return compare(config or Config(), store, branch="feat", against="main")


@pytest.mark.parametrize("factor", [1.005, 0.995])
def test_a_faster_change_that_moves_the_loss_fails_the_gate_as_numerics(
    history: SqlStore, factor: float
) -> None:
    """30% faster, and the loss 0.5% higher or lower: the time is an improvement, the loss a
    regression of kind numerics, and the gate fails on it."""
    result = _gate(history, 2.2981 * factor, 7.0)
    by_metric = {c.metric: c for c in result.comparisons}
    assert by_metric["step_time_ms"].verdict is Verdict.IMPROVEMENT
    loss = by_metric["loss"]
    assert (loss.verdict, loss.kind, loss.method) == (Verdict.REGRESSION, "numerics", "history")
    assert loss.decides
    assert f"{2.2981 * factor:.6g} vs 2.2981 in the newest baseline run" in loss.reason
    assert NUMERICS in loss.reason
    assert result.verdict is Verdict.REGRESSION
    assert gate_failed(Config(), result)


def test_an_accepted_numerics_change_on_main_is_the_new_reference(history: SqlStore) -> None:
    """Main accepted a change of the loss (two runs at the new value after four at the old):
    a PR that keeps the new value passes; the window's median would still be the old one."""
    for i in (4, 5):
        history.save_run(_with_loss(10.0, i, 2.2500))
    result = _gate(history, 2.2500, 10.0)
    loss = next(c for c in result.comparisons if c.metric == "loss")
    assert (loss.verdict, loss.baseline_centre) == (Verdict.UNCHANGED, 2.25)
    assert not gate_failed(Config(), result)


def test_a_loss_taken_after_another_number_of_steps_is_not_compared(tmp_path: Path) -> None:
    """A PR that measures 30 steps where main measured 20 trains further: its loss differs
    (on the MLP, 1.93 after 24 steps and 1.70 after 34), which is not a numerics change. The
    loss is named for its step, so the two never meet: no baseline, and the gate passes."""
    store = open_store(f"sqlite:///{tmp_path / 'perfgate.db'}")
    try:
        for i in range(4):
            run = record(i, 10.0)
            store.save_run(
                replace(
                    run, measurements=(*run.measurements, measurement("loss.step24", [[1.93]] * 3))
                )
            )
        head = record(10, 10.0, branch="feat")
        store.save_run(
            replace(
                head, measurements=(*head.measurements, measurement("loss.step34", [[1.70]] * 3))
            )
        )
        result = compare(Config(), store, branch="feat", against="main")
    finally:
        store.close()
    loss = next(c for c in result.comparisons if c.metric == "loss.step34")
    assert loss.verdict is Verdict.NO_BASELINE
    assert not gate_failed(Config(), result)


def test_a_loss_within_tolerance_passes_the_gate(history: SqlStore) -> None:
    result = _gate(history, 2.2981 * 1.0004, 10.0)
    loss = next(c for c in result.comparisons if c.metric == "loss")
    assert (loss.verdict, loss.kind) == (Verdict.UNCHANGED, "numerics")
    assert not gate_failed(Config(), result)


def test_the_suite_sets_the_tolerance_and_the_loss_stays_a_numerics_metric(
    history: SqlStore, tmp_path: Path
) -> None:
    suite = tmp_path / "perfgate.toml"
    suite.write_text("[metrics.loss]\nmin_effect_pct = 1.0\n")
    config = read_config_file(suite)
    assert config.policy("loss").min_effect_pct == 1.0
    assert config.policy("loss").numerics
    result = _gate(history, 2.2981 * 0.995, 10.0, config)  # 0.5%: inside 1%
    loss = next(c for c in result.comparisons if c.metric == "loss")
    assert (loss.verdict, loss.kind) == (Verdict.UNCHANGED, "numerics")


# -- paired ----------------------------------------------------------------------------------


def _paired(metric: str, pairs: list[Pair], policy: MetricPolicy) -> PairedEvidence:
    return compare_pairs(
        pairs,
        benchmark="b",
        metric=metric,
        unit="" if metric == "loss" else "ms",
        direction=policy.direction,
        policy=policy,
        run_id="head",
        base_run_id="base",
    )


def test_paired_a_faster_head_whose_loss_moved_is_a_numerics_regression() -> None:
    time = _paired("step_cpu_ms", [Pair(10.0 + i / 10, 7.0 + i / 20) for i in range(8)], TIME)
    lower = _paired("loss", [Pair(2.2981, 2.2801)] * 3, LOSS)
    same = _paired("loss", [Pair(2.2981, 2.2981)] * 3, LOSS)
    t, moved, held = decide_paired([time, lower, same])
    assert t.verdict is Verdict.IMPROVEMENT
    assert (moved.verdict, moved.kind, moved.method) == (Verdict.REGRESSION, "numerics", "paired")
    assert "loss 2.2801 vs 2.2981 in the base measured beside it (-0.78%" in moved.reason
    assert moved.p_value is None  # no test: a deterministic comparison
    assert (held.verdict, held.kind) == (Verdict.UNCHANGED, "numerics")


# -- the worker's loss, and what a run records ---------------------------------------------


def test_the_worker_takes_a_loss_only_from_a_number_or_a_one_element_tensor() -> None:
    torch = pytest.importorskip("torch")
    assert loss_value(torch.tensor(2.5)) == 2.5
    assert loss_value(torch.tensor([0.25])) == 0.25
    assert loss_value(1.5) == 1.5 and loss_value(3) == 3.0
    for none in (None, True, torch.ones(4, 10), "2.5", torch.tensor(math.nan), math.inf):
        assert loss_value(none) is None, none
    assert loss_value(torch.tensor(2.5), "inference") is None


def _repeat(loss: float | None, peak: int = 300, capacity: int = 1000) -> RepeatResult:
    return RepeatResult(
        step_ms=(10.0, 10.5, 9.5),
        batch_size=8,
        params={},
        peak_memory_bytes=peak,
        env={},
        trace_path=None,
        memory_capacity_bytes=capacity,
        loss=loss,
    )


def _outcome(*reps: RepeatResult) -> BenchmarkOutcome:
    now = datetime(2026, 3, 1, tzinfo=timezone.utc)
    return BenchmarkOutcome(BenchmarkSpec(name="b"), 1, reps, now, now)


def test_a_run_records_the_loss_and_the_peak_share_only_when_every_repeat_has_them() -> None:
    got = {m.metric: m for m in training_measurements(_outcome(_repeat(2.5), _repeat(2.5, 400)))}
    spec = BenchmarkSpec(name="b")
    name = f"loss.step{spec.warmup + spec.measured}"  # the step it was taken after
    assert got[name].repeats == ((2.5,), (2.5,)) and got[name].deterministic
    assert got["peak_memory_pct_of_capacity"].repeats == ((30.0,), (40.0,))
    partial = {m.metric for m in training_measurements(_outcome(_repeat(2.5), _repeat(None, 1, 0)))}
    assert not any(m.startswith("loss") for m in partial)
    assert "peak_memory_pct_of_capacity" not in partial


def test_the_profile_utilisation_becomes_one_value_per_run_catalogue_metrics() -> None:
    profile = ProfileSummary(
        source="t",
        steps=3,
        utilisation={
            "aicore_util_pct": 71.5,
            "device_busy_pct": 88.0,
            "made_up_pct": 5.0,  # not in the catalogue
            "loss": 1.0,  # in the catalogue, but measured per repeat by the runner
            "l2_hit_pct": math.nan,
        },
        peak_memory_bytes=48 << 30,
        device_memory_capacity_bytes=64 << 30,
    )
    got = utilisation_measurements(profile)
    assert [(m.metric, m.repeats) for m in got] == [
        ("device_busy_pct", ((88.0,),)),
        ("aicore_util_pct", ((71.5,),)),
    ]
    assert [m.metric for m in profile_measurements(profile)] == [m.metric for m in got]
    (share,) = capacity_measurements(profile)
    assert (share.metric, share.repeats) == ("peak_memory_pct_of_capacity", ((75.0,),))
    assert capacity_measurements(replace(profile, device_memory_capacity_bytes=None)) == []


def test_the_cpu_capacity_is_the_ram_or_a_lower_container_limit(tmp_path: Path) -> None:
    ram = host_memory_bytes(())
    assert ram > 0
    limit = tmp_path / "memory.max"
    limit.write_text("1073741824\n")
    assert host_memory_bytes((str(limit),)) == min(ram, 1 << 30)
    limit.write_text("max\n")
    assert host_memory_bytes((str(limit),)) == ram


def test_the_npu_capacity_is_its_device_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from perfgate.runner.npu import NpuBackend

    fake = StandIn()
    monkeypatch.setitem(sys.modules, "torch_npu", fake.torch_npu)
    monkeypatch.setattr(torch, "npu", fake.npu, raising=False)
    assert NpuBackend(env={}).memory_capacity_bytes() == 0  # a torch_npu that cannot say
    fake.npu.current_device = lambda: 0
    fake.npu.get_device_properties = lambda d: SimpleNamespace(total_memory=64 << 30)
    assert NpuBackend(env={}).memory_capacity_bytes() == 64 << 30


# -- slowdown costs time only ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer"])
def test_slowdown_leaves_every_loss_equal_bit_for_bit(name: str) -> None:
    torch = pytest.importorskip("torch")
    import importlib

    module = importlib.import_module(f"perfgate.workloads.{name}")
    torch.set_num_threads(1)
    base, slow = module.build(batch_size=8), module.build(batch_size=8, slowdown=1.0)
    assert [float(base.step()) for _ in range(5)] == [float(slow.step()) for _ in range(5)]


@pytest.mark.parametrize(
    ("batch", "slowdown", "threads"), [(128, 0.1, 1), (128, 0.3, 2), (100, 3.0, 2)]
)
def test_the_mlp_slowdown_in_its_own_calls_leaves_the_loss_equal_bit_for_bit(
    batch: int, slowdown: float, threads: int
) -> None:
    """The MLP's slowdown runs its extra rows through the step's own calls and takes the
    loss on the batch's rows: at the default batch, small and large slowdowns, every loss is
    the one without it, to the last bit with one thread; with two, within 1e-6 relative
    (on an AVX-512 CPU, MKL's float32 matmul splits rows by their count, so a row's sum is
    ordered differently: about 1e-7, where the numerics guard allows 0.1%)."""
    torch = pytest.importorskip("torch")
    from perfgate.workloads import mlp

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        base = mlp.build(batch_size=batch)
        slow = mlp.build(batch_size=batch, slowdown=slowdown)
        plain = [float(base.step()) for _ in range(4)]
        slowed = [float(slow.step()) for _ in range(4)]
        if threads == 1:
            assert plain == slowed
        else:
            assert slowed == pytest.approx(plain, rel=1e-6, abs=0.0)
    finally:
        torch.set_num_threads(before)


DDP_KNOBS = """
import os, socket
import torch
import torch.distributed as dist
from perfgate.workloads import ddp

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
try:
    torch.set_num_threads(1)
    base = ddp.build_mlp(batch_size=8, hidden=64)
    knobs = ddp.build_mlp(
        batch_size=8, hidden=64, slowdown=1.0, straggler_rank=0, straggler_extra=0.5,
        extra_allreduce=16,
    )
    a = [float(base.step()) for _ in range(4)]
    b = [float(knobs.step()) for _ in range(4)]
    print(repr(a), repr(b))
    print("equal" if a == b else "differ", flush=True)
finally:
    dist.destroy_process_group()
os._exit(0)  # gloo's threads can abort the interpreter's own teardown
"""


def test_ddp_knobs_leave_the_loss_equal_bit_for_bit() -> None:
    """DDP's slowdown, straggler and extra all-reduce knobs cost time, never the loss. In a
    fresh process (a process group in pytest's own would outlive the test; in the full
    suite one hung there), with a timeout."""
    pytest.importorskip("torch")
    done = subprocess.run(
        [sys.executable, "-c", DDP_KNOBS],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.stdout.split()[-1:] == ["equal"], done.stdout + done.stderr[-2000:]


# -- real worker processes -------------------------------------------------------------------


@pytest.mark.slow
def test_a_real_run_records_one_loss_equal_across_repeats_and_slowdown_keeps_it() -> None:
    """Three fresh worker processes of the built-in MLP on the CPU: the two repeats' losses
    are equal, the ``slowdown=1.0`` run's is the same value, and the paired rule calls it
    unchanged (the time, not the numerics, is what slowdown changes)."""
    pytest.importorskip("torch")
    spec = BenchmarkSpec(name="mlp", workload="mlp", warmup=2, measured=5, profiled=0, repeats=2)
    base = training_measurements(run_benchmark(spec, trace_dir=None))
    slow_spec = replace(spec, repeats=1, params={"slowdown": 1.0})
    slow = training_measurements(run_benchmark(slow_spec, trace_dir=None))
    loss = next(m for m in base if m.metric == "loss.step7")  # warmup 2 + measured 5
    (first,), (second,) = loss.repeats
    assert first == second and math.isfinite(first) and first > 0
    assert next(m for m in slow if m.metric == "loss.step7").repeats == ((first,),)
    share = next(m for m in base if m.metric == "peak_memory_pct_of_capacity")
    assert all(0.0 < v[0] < 100.0 for v in share.repeats)
    (held,) = decide_paired([_paired("loss", [Pair(first, first)], LOSS)])
    assert (held.verdict, held.kind) == (Verdict.UNCHANGED, "numerics")


ENTRY = """
import torch
import torch.nn.functional as F

WORK = {work}
LR = {lr}

def build(device="cpu"):
    torch.manual_seed(0)
    model = torch.nn.Linear(32, 1)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    x, y = torch.randn(64, 32), torch.randn(64, 1)
    a = torch.randn(96, 96) / 10
    def step():
        z = a
        for _ in range(WORK):  # work that costs time and feeds no loss
            z = torch.tanh(z @ a)
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return {{"step": step, "batch_size": 64}}
"""

SUITE = """
[defaults]
repeats = 2
warmup = 2
measured = 8
profiled = 0

[[benchmarks]]
name = "fit"
entry = "bench_fit:build"
"""


@pytest.mark.slow
def test_a_user_entry_faster_with_other_numerics_fails_a_paired_gate(tmp_path: Path) -> None:
    """``run --ab``: the head does a quarter of the step's extra work (faster) and trains
    with twice the learning rate (another loss): the pairs' loss comparison is a
    ``regression`` of kind numerics, and the gate fails with exit 1."""
    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_", "GITLAB"))}
    env.pop("CI", None)
    env.pop("PERFGATE_DATABASE_URL", None)

    def sh(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)

    def git(*args: str) -> None:
        out = sh(tmp_path, "git", "-c", "user.email=t@t", "-c", "user.name=t", *args)
        assert out.returncode == 0, out.stderr

    bench = tmp_path / "bench"
    bench.mkdir()
    git("init", "-q", "-b", "main")
    (bench / "bench_fit.py").write_text(textwrap.dedent(ENTRY.format(work=64, lr=0.01)))
    (bench / "perfgate.toml").write_text(textwrap.dedent(SUITE))
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    (bench / "bench_fit.py").write_text(textwrap.dedent(ENTRY.format(work=16, lr=0.02)))
    git("commit", "-q", "-am", "faster, other numerics")

    run = sh(bench, sys.executable, "-m", "perfgate", "run", "--ab", "HEAD~1", "--branch", "feat")
    assert run.returncode == 0, run.stderr
    gate = sh(
        bench, sys.executable, "-m", "perfgate", "gate", "--branch", "feat", "--against", "main",
        "--json",
    )  # fmt: skip
    data = json.loads(gate.stdout)
    paired = {c["metric"]: c for c in data["comparisons"] if c["method"] == "paired"}
    (loss,) = [c for name, c in paired.items() if name.startswith("loss.step")]
    assert (loss["verdict"], loss["kind"]) == ("regression", "numerics"), loss["reason"]
    assert loss["current"] != loss["baseline"]
    assert NUMERICS in loss["reason"]
    assert paired["step_cpu_ms"]["change_pct"] < 0  # the head was faster
    assert data["verdict"] == "regression" and gate.returncode == 1, gate.stdout
