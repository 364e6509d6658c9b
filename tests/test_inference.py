"""Inference benchmarks: real forward passes timed per request, latency percentiles judged
by the history procedure on one percentile per repeat (perfgate.app.measure).

The injected tail makes 1 request in 20 do 20x the work: 5% of requests, so the P99 moves
(about 20x) and the P50 does not. 300 requests per repeat, 2 repeats, 6 baseline runs.

Latencies are wall-clock times. On this shared 2-core machine a request takes about 2.5 ms
and a busy neighbour that preempts it adds a time slice: a repeat's P99 was seen at 3 ms and
at 12 ms in one baseline. A 3x tail (7 ms) sat inside that; a 20x tail (about 50 ms) is far
above it, so the verdict is the tail's and not the neighbours'.
"""

from __future__ import annotations

import statistics
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torch")

from perfgate import app  # noqa: E402
from perfgate.config import Config  # noqa: E402
from perfgate.models import BenchmarkSpec, CIContext, GitContext, RunRecord, Verdict  # noqa: E402
from perfgate.store import open_store  # noqa: E402

SPEC = BenchmarkSpec(
    name="mlp_infer",
    workload="mlp_infer",
    kind="inference",
    warmup=20,
    measured=300,
    profiled=0,
    repeats=2,
    params={"batch_size": 32},
)


def test_a_latency_tail_regresses_p99_and_leaves_p50(tmp_path: Path) -> None:
    config = Config(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}")
    store = open_store(config.database_url)

    def run(branch: str, **params: float | int) -> RunRecord:
        (done,) = app.run_and_record(
            config,
            [replace(SPEC, params={**SPEC.params, **params})],
            store,
            git=GitContext(commit=uuid.uuid4().hex[:12], branch=branch),
            ci=CIContext(),
            trace_root=tmp_path / "traces",
        )
        return done

    try:
        # Six baseline runs: with three, the t quantile at the gate's level (2 degrees of
        # freedom) leaves even a tripled P99 below what the gate can tell apart.
        base = [run("main") for _ in range(6)]
        tail = run("feat", tail_every=20, tail_factor=20.0)
        result = app.compare_records(config, store, [tail], branch="feat", against="main")
    finally:
        store.close()
    metrics = {m.metric for m in tail.measurements}
    assert {"latency_p50_ms", "latency_p90_ms", "latency_p99_ms"} <= metrics
    assert "throughput_requests_per_s" in metrics and "step_time_ms" not in metrics
    p50 = tail.measurement("latency_p50_ms")
    assert p50 is not None and len(p50.samples) == 600  # every request's latency
    assert tail.fingerprint.key() == base[0].fingerprint.key()  # the tail knob is a treatment

    verdicts = {c.metric: c for c in result.comparisons}
    p99, median = verdicts["latency_p99_ms"], verdicts["latency_p50_ms"]
    assert p99.change_pct is not None and p99.mde_pct is not None, p99.reason
    assert median.change_pct is not None, median.reason
    # Never "unchanged" or "faster": the tail is there. A regression is demanded once the
    # change is well past what this run's noise lets the gate see (the detectable effect is
    # the gate's, after its FDR adjustment); a machine loaded far beyond the usual 2-20%
    # noise makes it inconclusive, which is what the gate must then say.
    assert p99.verdict in (Verdict.REGRESSION, Verdict.INCONCLUSIVE), p99.reason
    if p99.change_pct > 2.5 * p99.mde_pct and "already" not in p99.reason:
        assert p99.verdict is Verdict.REGRESSION, p99.reason
    calm = p99.mde_pct < 100.0  # the machine let the gate see the tail's size
    if calm:
        assert p99.change_pct > 200.0, p99.reason  # about +1000% when quiet
        # The median does not move with the tail. On a shared runner the whole run can be
        # a few % slower (load), so "unchanged" is relative: far below the P99's change,
        # and a regression only if that load alone made one.
        assert abs(median.change_pct) < max(15.0, p99.change_pct / 4), median.reason
        if median.verdict is Verdict.REGRESSION:
            assert median.change_pct < p99.change_pct / 4, median.reason

    # The tail test on raw requests: ~5% of the requests exceed the baseline's P99 (1% expected).
    old = [x for b in base for m in [b.measurement("latency_p50_ms")] if m for x in m.samples]
    old_p99 = statistics.quantiles(old, n=100, method="inclusive")[98]
    share = sum(x > old_p99 for x in p50.samples) / len(p50.samples)
    if calm:  # (a loaded baseline can have a P99 near the tail's 20x)
        assert share > 0.03
