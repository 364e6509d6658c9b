"""Multi-device benchmarks end to end: real torchrun jobs of 2 ranks on gloo (CPU), a real
SQLite store, the real gate and advisor.

Kept few and small (warm-up 2, 10 measured steps, 2 profiled, 1 repeat; about 6 s a job on
this 2-core machine). The workload is ``ddp_mlp`` at batch 512 / hidden 256 so that compute,
not the loopback all-reduce, dominates a step (~6 ms in a quiet period). The injected
straggler makes rank 1 do 9x the forward/backward work (``straggler_extra=8``), which
makes the job's step several times longer. Under neighbours' load single-repeat baseline
runs were seen at 7 and 13 ms in one module (minimum detectable effect of 3 such runs:
130-570%); as in test_cli_e2e, a regression is demanded where the run's noise allowed a
decision, and otherwise the gate must say inconclusive — never unchanged.
"""

from __future__ import annotations

import os
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torch")

from perfgate import app  # noqa: E402
from perfgate.config import Config  # noqa: E402
from perfgate.errors import RunnerError  # noqa: E402
from perfgate.models import (  # noqa: E402
    BenchmarkSpec,
    CIContext,
    GitContext,
    LaunchOptions,  # noqa: E402
    RunRecord,
    Verdict,
)
from perfgate.runner import run_benchmark  # noqa: E402
from perfgate.store import SqlStore, open_store  # noqa: E402

SMALL = {"batch_size": 512, "hidden": 256}
SPEC = BenchmarkSpec(
    name="ddp_mlp",
    workload="ddp_mlp",
    nproc=2,
    warmup=2,
    measured=10,
    profiled=2,
    repeats=1,
    params=SMALL,
)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Config, SqlStore, Path]]:
    root = tmp_path_factory.mktemp("dist")
    config = Config(database_url=f"sqlite:///{root / 'db.sqlite'}")
    store = open_store(config.database_url)
    yield config, store, root
    store.close()


def record(suite: tuple[Config, SqlStore, Path], branch: str, **params: float | int) -> RunRecord:
    config, store, root = suite
    spec = replace(SPEC, params={**SMALL, **params})
    (done,) = app.run_and_record(
        config,
        [spec],
        store,
        git=GitContext(commit=uuid.uuid4().hex[:12], branch=branch),
        ci=CIContext(),
        trace_root=root / "traces",
    )
    return done


@pytest.fixture(scope="module")
def baseline(suite: tuple[Config, SqlStore, Path]) -> list[RunRecord]:
    # Five runs: with three, a t prediction interval has 2 degrees of freedom and this
    # machine's run-to-run noise (7-13 ms steps under load) leaves even a 4x step unproven.
    return [record(suite, "main") for _ in range(5)]


def test_one_run_holds_every_ranks_samples_and_profile(baseline: list[RunRecord]) -> None:
    config = Config()
    run = baseline[0]
    job = run.measurement("step_time_ms")
    r0, r1 = run.measurement("step_time_ms.rank0"), run.measurement("step_time_ms.rank1")
    assert job is not None and r0 is not None and r1 is not None
    assert len(job.samples) == len(r0.samples) == len(r1.samples) == 10
    # the job's step is, step by step, the slowest rank's
    assert job.samples == tuple(max(a, b) for a, b in zip(r0.samples, r1.samples, strict=True))
    assert run.measurement("rank_spread_pct") is not None
    assert [p.rank for p in run.rank_profiles] == [0, 1]
    assert all(p.breakdown is not None for p in run.rank_profiles)
    for rank in (0, 1):
        assert run.measurement(f"communication_ms.rank{rank}") is not None
        assert run.measurement(f"communication_not_overlapped_pct.rank{rank}") is not None
    assert run.measurement("allreduce_ms") is not None
    assert run.fingerprint.device_count == 2
    assert run.fingerprint.params["nproc"] == 2 and run.fingerprint.params["nnodes"] == 1
    assert run.spec.nproc == 2
    assert config.policy("step_time_ms.rank1") == config.policy("step_time_ms")


def test_an_inference_job_of_two_ranks_records_latencies(
    suite: tuple[Config, SqlStore, Path],
) -> None:
    # kind = "inference" with nproc = 2 was recorded as training (step_time_ms, samples/s)
    config, store, root = suite
    spec = BenchmarkSpec(
        name="infer2", workload="mlp_infer", kind="inference", nproc=2, warmup=2, measured=10
    )
    (run,) = app.run_and_record(
        config,
        [spec],
        store,
        git=GitContext(commit=uuid.uuid4().hex[:12], branch="main"),
        ci=CIContext(),
        trace_root=root / "traces",
    )
    metrics = {m.metric for m in run.measurements}
    assert {"latency_p50_ms", "latency_p99_ms", "throughput_requests_per_s"} <= metrics
    assert {"step_time_ms", "throughput_samples_per_s"}.isdisjoint(metrics)
    assert {"rank_spread_pct", "step_time_ms.rank0", "step_time_ms.rank1"} <= metrics


def test_a_straggler_fails_the_gate_and_the_advisor_names_it(
    suite: tuple[Config, SqlStore, Path], baseline: list[RunRecord]
) -> None:
    config, store, _ = suite
    slow = record(suite, "feat", straggler_rank=1, straggler_extra=8.0)
    assert slow.fingerprint.key() == baseline[0].fingerprint.key()  # the knob is a treatment
    result = app.compare_records(config, store, [slow], branch="feat", against="main")
    verdicts = {c.metric: c for c in result.comparisons}
    for metric in ("step_time_ms", "rank_spread_pct"):
        c = verdicts[metric]
        assert c.change_pct is not None and c.mde_pct is not None and c.min_effect_pct
        assert c.change_pct > 100.0, c.reason
        # The detectable effect is stated before the gate's FDR adjustment across its
        # metrics, so demand a regression only well past it (as test_cli_e2e does).
        if c.change_pct > max(c.mde_pct, c.min_effect_pct) * 2.5:
            assert c.verdict is Verdict.REGRESSION, c.reason
        else:  # the machine is too noisy now to see even this: the gate must say so
            assert c.verdict in (Verdict.REGRESSION, Verdict.INCONCLUSIVE), c.reason
    if verdicts["step_time_ms"].verdict is Verdict.REGRESSION:
        assert app.gate_failed(config, result)
    slow_rank = [f for f in result.findings if f.rule == "slow_rank"]
    assert slow_rank and slow_rank[0].location == "ddp_mlp: rank 1"
    assert "rank 1 is the slowest" in slow_rank[0].message


def test_extra_communication_shows_in_the_communication_share(
    suite: tuple[Config, SqlStore, Path], baseline: list[RunRecord]
) -> None:
    # 48M floats (192 MB) all-reduced after the backward pass, every step: many times the
    # gradients' traffic (~100 ms a step on loopback), and it cannot overlap. The share is
    # the ranks' mean (the max would be the rank that waited longest for the other, which
    # load alone can push high). Beside the CPU hog and another test process, a baseline
    # rank waited up to 18 ms a step in its all-reduce; 64 MB (34 ms then) was too close.
    chatty = record(suite, "comm", extra_allreduce=48_000_000)

    def share(run: RunRecord) -> float:
        values = [run.measurement(f"communication_not_overlapped_pct.rank{r}") for r in (0, 1)]
        return sum(m.summary.centre for m in values if m is not None) / 2

    def comm(run: RunRecord) -> float:
        m = run.measurement("allreduce_ms")
        assert m is not None
        return m.summary.centre

    assert share(chatty) > max(share(b) for b in baseline)
    assert share(chatty) > 50.0
    assert comm(chatty) > 2 * max(comm(b) for b in baseline)


def test_a_rank_that_raises_is_named_and_nothing_is_recorded(tmp_path: Path) -> None:
    (tmp_path / "boom.py").write_text(
        textwrap.dedent(
            """
            import torch
            import torch.distributed as dist

            def build(device="cpu"):
                rank = dist.get_rank()

                def step():
                    dist.all_reduce(torch.ones(4))
                    if rank == 1:
                        raise RuntimeError("injected failure on rank 1")

                return step
            """
        )
    )
    config = Config(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}")
    store = open_store(config.database_url)
    spec = BenchmarkSpec(name="boom", entry="boom:build", nproc=2, warmup=2, measured=4, repeats=1)
    try:
        with pytest.raises(RunnerError, match=r"rank 1 raised RuntimeError: injected failure"):
            app.run_and_record(
                config,
                [spec],
                store,
                git=GitContext(commit="abc", branch="main"),
                ci=CIContext(),
                trace_root=tmp_path / "traces",
                sys_path=[str(tmp_path)],
            )
        assert store.benchmarks(project=config.project) == []
    finally:
        store.close()


def _ranks_of(run_id: str) -> list[int]:
    """Pids of live processes that belong to the torchrun job ``run_id``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if f"TORCHELASTIC_RUN_ID={run_id}".encode() in env:
            found.append(int(pid))
    return found


def test_a_hung_rank_times_out_and_leaves_no_process(tmp_path: Path) -> None:
    (tmp_path / "hang.py").write_text(
        textwrap.dedent(
            """
            import time
            import torch.distributed as dist

            def build(device="cpu"):
                rank = dist.get_rank()

                def step():
                    if rank == 1:
                        time.sleep(3600)
                    dist.barrier()

                return step
            """
        )
    )
    run_id = f"perfgate-test-{uuid.uuid4().hex[:8]}"
    spec = BenchmarkSpec(name="hang", entry="hang:build", nproc=2, warmup=1, measured=2, repeats=1)
    # Rank 1 hangs in its first warm-up step. Before it, torchrun and both ranks import
    # torch (about 3 s of CPU each); beside two busy neighbours on 2 cores that takes most of
    # 20 s, so the rank is named in whichever phase it had reached by then.
    hung = r"rank 1 \((?:starting|building|warm-up)\)"
    with pytest.raises(RunnerError, match=rf"did not finish within 20 s.*{hung}"):
        run_benchmark(
            spec,
            trace_dir=None,
            sys_path=[str(tmp_path)],
            timeout_s=20.0,
            launch=LaunchOptions(rdzv_id=run_id),
        )
    assert _ranks_of(run_id) == []
