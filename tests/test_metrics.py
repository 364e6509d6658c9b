"""The metric catalogue and the policy a comparison uses: catalogue, then the suite's table."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from perfgate.app.measure import (
    TRAINING_METRICS,
    extended,
    inference_measurements,
    job_measurements,
    measurement,
    training_measurements,
)
from perfgate.config import Config, config_from_mapping
from perfgate.errors import ConfigError
from perfgate.metrics import (
    CATALOGUE,
    FALLBACK_POLICY,
    PRIMARY_TIME,
    WALL_TIMES,
    Samples,
    base_name,
    default_policy,
    entry,
    is_time,
    lookup,
    not_deciding,
)
from perfgate.models import BenchmarkSpec, Direction, Measurement, MetricPolicy
from perfgate.runner import BenchmarkOutcome, RankResult, RepeatResult

LOWER, HIGHER = Direction.LOWER_IS_BETTER, Direction.HIGHER_IS_BETTER

# The policies perfgate judged by before the catalogue (config.DEFAULT_METRICS), pinned so
# moving them changed no verdict (changed on purpose since: marked where).
BEFORE = {
    "step_time_ms": MetricPolicy(LOWER, 3.0),
    "throughput_samples_per_s": MetricPolicy(HIGHER, 3.0),
    "peak_memory_bytes": MetricPolicy(LOWER, 5.0),
    # 3.1: an operator count explains and decides only where a suite names it.
    "op_calls_per_step": MetricPolicy(LOWER, 0.5, deterministic=True, decides=False),
    "computing_ms": MetricPolicy(LOWER, 3.0),
    "communication_not_overlapped_ms": MetricPolicy(LOWER, 5.0),
    "free_ms": MetricPolicy(LOWER, 10.0),
    "communication_ms": MetricPolicy(LOWER, 5.0),
    "communication_not_overlapped_pct": MetricPolicy(LOWER, 5.0, min_effect_abs=5.0),
    "allreduce_ms": MetricPolicy(LOWER, 5.0),
    "rank_spread_pct": MetricPolicy(LOWER, 0.0, min_effect_abs=5.0),
    "latency_p50_ms": MetricPolicy(LOWER, 3.0),
    "latency_p90_ms": MetricPolicy(LOWER, 5.0),
    "latency_p99_ms": MetricPolicy(LOWER, 10.0),
    "throughput_requests_per_s": MetricPolicy(HIGHER, 3.0),
    # own_step_ms.rank<r> had no entry and took the fallback.
    "own_step_ms": FALLBACK_POLICY,
}


ADDED_SINCE = {
    # 2.4: utilisation in points, memory against capacity, ais_bench copies, the loss guard.
    "device_busy_pct",
    "aicore_util_pct",
    "cube_util_pct",
    "vector_util_pct",
    "l2_hit_pct",
    "hbm_bandwidth_gb_s",
    "sm_occupancy_pct",
    "peak_memory_pct_of_capacity",
    "h2d_latency_ms",
    "d2h_latency_ms",
    "loss",
}


def test_the_catalogue_keeps_every_policy_perfgate_judged_by() -> None:
    assert set(CATALOGUE) - set(PRIMARY_TIME.values()) - ADDED_SINCE == set(BEFORE)
    for name, policy in BEFORE.items():
        assert CATALOGUE[name].policy == policy, name
        assert Config().policy(name) == policy, name


def test_the_primary_time_decides_where_it_is_usable_else_the_wall_time() -> None:
    """A training run's CPU time (device time on an accelerator) decides when it was
    measured in the run and its baseline; then the wall-clock metrics are only shown.
    Otherwise (a baseline from before, an ingested profile) the wall time decides."""
    every = {"step_cpu_ms", "step_device_ms"}
    assert not_deciding("cpu", lambda m: m == "step_cpu_ms") == set(WALL_TIMES)
    assert not_deciding("cuda", lambda m: m == "step_device_ms") == set(WALL_TIMES)
    # a memory share beside its peak in bytes is shown too (the same effect, counted once)
    share = {"peak_memory_pct_of_capacity"}
    assert not_deciding("npu", lambda m: True) == set(WALL_TIMES) | share
    assert not_deciding("cpu", lambda m: m == "step_device_ms") == every
    assert not_deciding("cuda", lambda m: m == "step_cpu_ms") == every
    # and a throughput beside the step time it is the reciprocal of, where the wall decides
    assert not_deciding("tpu", lambda m: True) == every | share | {"throughput_samples_per_s"}
    assert {PRIMARY_TIME[d] for d in ("cpu", "cuda", "npu")} == every


def test_every_entry_is_complete_and_consistent() -> None:
    for name, spec in CATALOGUE.items():
        assert spec.name == name
        assert spec.description
        assert spec.unit or spec.numerics, name  # a loss has no unit
        assert spec.min_effect_pct > 0 or spec.min_effect_abs > 0, name
        # A steady-state series is a series of steps; a deterministic count has no series.
        assert not spec.steady or spec.samples is Samples.PER_STEP, name
        assert not (spec.deterministic and spec.steady), name
        # Units live in names (DESIGN.md §4).
        suffix = {"ms": "_ms", "bytes": "_bytes", "%": "_pct", "1/s": "_per_s"}.get(spec.unit)
        assert suffix is None or name.endswith(suffix) or f"{suffix}_of_" in name, name


@pytest.mark.parametrize(
    ("metric", "base"),
    [
        ("step_time_ms.rank0", "step_time_ms"),
        ("own_step_ms.rank12", "own_step_ms"),
        ("communication_not_overlapped_pct.rank3", "communication_not_overlapped_pct"),
        ("step_time_ms", "step_time_ms"),
        ("step_time_ms.rankx", "step_time_ms.rankx"),
        ("step_time_ms.rank", "step_time_ms.rank"),
        (".rank1", ".rank1"),
    ],
)
def test_a_per_rank_name_resolves_to_its_base(metric: str, base: str) -> None:
    assert base_name(metric) == base


def test_lookup_entry_and_default_policy() -> None:
    assert lookup("step_time_ms.rank1") is CATALOGUE["step_time_ms"]
    assert entry("communication_ms.rank0") is CATALOGUE["communication_ms"]
    assert lookup("made_up_metric") is None
    assert default_policy("made_up_metric") == FALLBACK_POLICY
    assert default_policy("step_time_ms.rankx") == FALLBACK_POLICY
    with pytest.raises(KeyError, match="made_up_metric"):
        entry("made_up_metric")


def test_the_suite_overrides_the_catalogue_field_by_field() -> None:
    config = config_from_mapping(
        {
            "metrics": {
                "step_time_ms": {"direction": "higher"},
                "rank_spread_pct": {"min_effect_pct": 2.0},
                "communication_ms.rank1": {"min_effect_pct": 9.0},
                "my_metric": {"deterministic": True},
            }
        }
    )
    step = config.policy("step_time_ms")
    assert step == MetricPolicy(HIGHER, 3.0)
    # A per-rank metric without its own table takes its base's, the suite's included.
    assert config.policy("step_time_ms.rank1") == step
    # Fields the table leaves out keep the catalogue's (here the minimum effect in points).
    assert config.policy("rank_spread_pct") == MetricPolicy(LOWER, 2.0, min_effect_abs=5.0)
    # A table for one rank starts from the base's entry and leaves the other ranks alone.
    assert config.policy("communication_ms.rank1") == MetricPolicy(LOWER, 9.0)
    assert config.policy("communication_ms.rank0") == MetricPolicy(LOWER, 5.0)
    assert config.policy("my_metric") == MetricPolicy(LOWER, 3.0, deterministic=True)
    # The rest are the catalogue's.
    assert config.policy("throughput_samples_per_s") == CATALOGUE["throughput_samples_per_s"].policy
    assert set(config.metrics) == {
        "step_time_ms",
        "rank_spread_pct",
        "communication_ms.rank1",
        "my_metric",
    }


def test_a_wrong_direction_is_refused_with_its_key() -> None:
    with pytest.raises(ConfigError, match=r"metrics\.step_time_ms\.direction"):
        config_from_mapping({"metrics": {"step_time_ms": {"direction": "up"}}}, "perfgate.toml")


# The builders (app/measure.py) take unit, direction and steady state from the catalogue.


def _repeat(seed: int, *, ranks: tuple[RankResult, ...] = ()) -> RepeatResult:
    rng = np.random.default_rng(seed)
    steps = tuple(float(x) for x in 20.0 * rng.lognormal(0, 0.02, 40))
    # A warm-up transient the steady-state detection leaves out.
    steps = tuple(x * 3.0 for x in steps[:10]) + steps[10:]
    return RepeatResult(
        step_ms=steps,
        batch_size=64,
        params={},
        peak_memory_bytes=1000 + seed,
        env={},
        trace_path=None,
        ranks=ranks,
        world_size=max(len(ranks), 1),
    )


def _outcome(spec: BenchmarkSpec, repeats: tuple[RepeatResult, ...]) -> BenchmarkOutcome:
    t0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
    return BenchmarkOutcome(spec=spec, threads=1, repeats=repeats, started_at=t0, finished_at=t0)


def _agrees_with_catalogue(measurements: list[Measurement] | tuple[Measurement, ...]) -> None:
    for m in measurements:
        spec = entry(m.metric)
        assert (m.unit, m.direction, m.deterministic) == (
            spec.unit,
            spec.direction,
            spec.deterministic,
        ), m.metric
        assert (m.summary.dropped > 0) == spec.steady, m.metric


def test_measurement_takes_unit_direction_and_steady_state_from_the_catalogue() -> None:
    steps = _repeat(1).step_ms
    m = measurement("throughput_samples_per_s", [steps])
    assert (m.unit, m.direction) == ("1/s", HIGHER)
    assert m.summary.dropped == 10 and m.summary.centre_se is not None
    # An ingested profile's steps are summarised as they are.
    flat = measurement("step_time_ms", [steps], steady=False)
    assert flat.summary.dropped == 0 and flat.summary.centre_se is None
    assert measurement("op_calls_per_step", [[412.0]]).deterministic
    assert measurement("step_time_ms.rank1", [steps]).unit == "ms"
    with pytest.raises(KeyError):
        measurement("made_up_metric", [[1.0]])


def test_every_builder_records_catalogue_metrics_only() -> None:
    reps = (_repeat(1), _repeat(2), _repeat(3))
    training = training_measurements(_outcome(BenchmarkSpec("t", workload="mlp"), reps))
    assert [m.metric for m in training] == list(TRAINING_METRICS)
    _agrees_with_catalogue(training)
    inference = inference_measurements(
        _outcome(BenchmarkSpec("i", workload="mlp", kind="inference"), reps)
    )
    _agrees_with_catalogue(inference)
    ranks = tuple(
        RankResult(r, _repeat(10 + r).step_ms, peak_memory_bytes=5, wait_ms=(1.0,) * 40)
        for r in range(2)
    )
    job, _, _ = job_measurements(
        _outcome(BenchmarkSpec("j", workload="mlp", nproc=2), (_repeat(1, ranks=ranks),))
    )
    assert {"step_time_ms.rank1", "own_step_ms.rank0", "rank_spread_pct"} <= {m.metric for m in job}
    _agrees_with_catalogue(job)


def test_one_more_repeat_extends_what_a_repeat_extends() -> None:
    reps = (_repeat(1), _repeat(2))
    training = training_measurements(_outcome(BenchmarkSpec("t", workload="mlp"), reps))
    calls = measurement("op_calls_per_step", [[412.0]])
    more = extended((*training, calls), _repeat(3))
    by = {m.metric: m for m in more}
    assert len(by["step_time_ms"].repeats) == 3
    assert by["peak_memory_bytes"].repeats[-1] == (1003.0,)
    assert by["op_calls_per_step"] is calls
    _agrees_with_catalogue(more)


def test_is_time_by_unit_or_catalogue_name() -> None:
    assert is_time("ms") and is_time("step_time_ms") and is_time("latency_p99_ms.rank1")
    assert is_time("s") and is_time("us") and is_time("nanoseconds")
    assert not is_time("samples/s") and not is_time("throughput_samples_per_s")
    assert not is_time("bytes") and not is_time("no_such_metric")
