"""The measurements of a run, from what the runner measured (pure; no torch, no store).

Three shapes of benchmark:

- **training, one process** (``step_time_ms``, ``throughput_samples_per_s``,
  ``peak_memory_bytes``): built in :func:`perfgate.app.build_record`.
- **training, multi-device** (a torchrun job per repeat, :func:`job_measurements`):

  ============================================  ==================================================
  ``step_time_ms``                              the job's step: per step, the slowest rank's
  ``step_time_ms.rank<r>``                      each rank's own timed steps
  ``own_step_ms.rank<r>``                       each rank's own work per step: its timed step
                                                less its time blocked in collectives (when the
                                                step reports it, as the DDP workloads do)
  ``rank_spread_pct``                           per repeat, (slowest - fastest rank median own
                                                work) / fastest, in % (a straggler; judged in
                                                points)
  ``throughput_samples_per_s``                  global batch (per-rank batch x ranks) / job step
  ``peak_memory_bytes``                         the largest rank's
  ``allreduce_ms``                              collective communication per step, mean over
                                                ranks (profile; in a DDP step, the gradient
                                                all-reduce)
  ``communication_not_overlapped_ms``           the most any rank spends in communication
                                                not hidden under compute (profile)
  ``communication_ms.rank<r>``                  each rank's communication per step (profile)
  ``communication_not_overlapped_pct.rank<r>``  its non-overlapped share of the step (profile)
  ============================================  ==================================================

  The profile metrics come from the first repeat's profiled window (one value per run).
- **inference** (:func:`inference_measurements`): ``latency_p50_ms`` holds every request's
  latency (its centre, the median of the repeats' medians, is the P50); ``latency_p90_ms``
  and ``latency_p99_ms`` hold one percentile per repeat (a P99 is a property of a repeat's
  requests, not of one request; see :mod:`perfgate.stats.quantiles`);
  ``throughput_requests_per_s`` is requests / summed latency per repeat.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from perfgate.models import Direction, Measurement, ProfileSummary
from perfgate.runner import BenchmarkOutcome
from perfgate.stats import summarize

LOWER = Direction.LOWER_IS_BETTER
HIGHER = Direction.HIGHER_IS_BETTER


def measurement(
    metric: str,
    unit: str,
    direction: Direction,
    repeats: Sequence[Sequence[float]],
    *,
    steady: bool = False,
    deterministic: bool = False,
) -> Measurement:
    groups = tuple(tuple(float(x) for x in rep) for rep in repeats)
    summary = summarize(groups, steady=steady)
    return Measurement(metric, unit, direction, groups, summary, deterministic=deterministic)


def spread_pct(values: Sequence[float]) -> float:
    """(max - min) / min in percent; 0 for fewer than two values."""
    if len(values) < 2 or min(values) <= 0:
        return 0.0
    return (max(values) - min(values)) / min(values) * 100.0


def _communication(profile: ProfileSummary) -> tuple[float, float] | None:
    """(communication per step, its non-overlapped part) in ms, when the profile has them."""
    b = profile.breakdown
    if b is None or b.communication_not_overlapped_ms is None:
        return None
    hidden = b.communication_overlapped_ms or 0.0
    return b.communication_not_overlapped_ms + hidden, b.communication_not_overlapped_ms


def job_measurements(
    outcome: BenchmarkOutcome,
) -> tuple[list[Measurement], ProfileSummary | None, tuple[ProfileSummary, ...]]:
    """A multi-device run's measurements, the slowest rank's profile and every rank's.

    The slowest rank is the one with the largest median own work per step (profiler off).
    """
    reps = outcome.repeats
    world = reps[0].world_size
    out = [
        measurement("step_time_ms", "ms", LOWER, [r.step_ms for r in reps], steady=True),
        measurement(
            "throughput_samples_per_s",
            "1/s",
            HIGHER,
            [[r.batch_size * world * 1000.0 / t for t in r.step_ms] for r in reps],
            steady=True,
        ),
        measurement(
            "peak_memory_bytes", "bytes", LOWER, [[float(r.peak_memory_bytes)] for r in reps]
        ),
        measurement(
            "rank_spread_pct",
            "%",
            LOWER,
            [[spread_pct([float(np.median(k.own_ms)) for k in r.ranks])] for r in reps],
        ),
    ]
    ranks = sorted({k.rank for r in reps for k in r.ranks})
    for rank in ranks:
        out.append(
            measurement(
                f"step_time_ms.rank{rank}",
                "ms",
                LOWER,
                [k.step_ms for r in reps for k in r.ranks if k.rank == rank],
                steady=True,
            )
        )
        own = [k.own_ms for r in reps for k in r.ranks if k.rank == rank and k.wait_ms]
        if own:
            out.append(measurement(f"own_step_ms.rank{rank}", "ms", LOWER, own, steady=True))
    profiles = tuple(k.profile for k in reps[0].ranks if k.profile is not None)
    comm = {p.rank: c for p in profiles if (c := _communication(p)) is not None}
    if comm and len(comm) == len(profiles):
        out.append(
            measurement(
                "allreduce_ms", "ms", LOWER, [[float(np.mean([c[0] for c in comm.values()]))]]
            )
        )
        out.append(
            measurement(
                "communication_not_overlapped_ms", "ms", LOWER, [[max(c[1] for c in comm.values())]]
            )
        )
        for p in profiles:
            total, exposed = comm[p.rank]
            step = p.breakdown.step_ms if p.breakdown is not None else 0.0
            out.append(measurement(f"communication_ms.rank{p.rank}", "ms", LOWER, [[total]]))
            out.append(
                measurement(
                    f"communication_not_overlapped_pct.rank{p.rank}",
                    "%",
                    LOWER,
                    [[exposed / step * 100.0 if step > 0 else 0.0]],
                )
            )
    medians = {
        k.rank: float(
            np.median([x for r in reps for j in r.ranks if j.rank == k.rank for x in j.own_ms])
        )
        for k in reps[0].ranks
    }
    slowest = max(medians, key=lambda r: medians[r]) if medians else None
    profile = next((p for p in profiles if p.rank == slowest), profiles[0] if profiles else None)
    return out, profile, profiles


def inference_measurements(outcome: BenchmarkOutcome) -> list[Measurement]:
    """An inference run's latency percentiles, throughput and memory (see the module)."""
    reps = outcome.repeats
    latencies = [r.step_ms for r in reps]
    return [
        measurement("latency_p50_ms", "ms", LOWER, latencies),
        measurement(
            "latency_p90_ms", "ms", LOWER, [[float(np.percentile(x, 90))] for x in latencies]
        ),
        measurement(
            "latency_p99_ms", "ms", LOWER, [[float(np.percentile(x, 99))] for x in latencies]
        ),
        measurement(
            "throughput_requests_per_s",
            "1/s",
            HIGHER,
            [[len(x) * 1000.0 / sum(x)] for x in latencies],
        ),
        measurement(
            "peak_memory_bytes", "bytes", LOWER, [[float(r.peak_memory_bytes)] for r in reps]
        ),
    ]
