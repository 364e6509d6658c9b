"""Detection quality of the PR gate on the noise shapes of issue 37, through ``perfgate.judge``.

The shapes are built from how CI noise looks, not from perfgate's model: a gate is B
benchmarks x n runs x r repeats (one value per worker process), log-normal around a
per-benchmark mean (10-200 ms, log-uniform), with three components on the log scale

* a **job factor** shared by every benchmark of a CI job (runs of different benchmarks at
  the same place counted from the newest are one job, as ``perfgate.judge`` reads them),
* a **benchmark-run factor** per (benchmark, run),
* a **process factor** per repeat.

Base gate: 10 benchmarks, 30 runs of history, 3 repeats, job 1.0%, benchmark-run 1.0%,
process 1.6% (log-scale standard deviations), so that a run's centre (the median of its 3
repeats) varies with CoV ~1.8% (printed at the top of the table). Every nuisance of the issue
is a field of :class:`Shape` and is applied by the one generator, :func:`draw`.

Rows (each gate is judged by one call ``perfgate.judge(baseline, current)``):

1. **A/A** (no change in the current run): share of gates with any benchmark ``regression``
   (a false gate); ``improvement`` counted beside it. Target <= 1%.
2. **Power**: benchmark 0 +8% in the current run (every repeat); share of gates where its
   verdict is ``regression``, and the ratio to the same gate without the nuisance (target
   >= 0.8).
3. **Oracle**: a one-sided test on the change's log ratio that knows its null distribution
   (Monte Carlo from :func:`draw`), at alpha/m (alpha 0.01, m benchmarks); its MDE at 80%
   power beside perfgate's median ``mde_pct`` under t3 job tails (target <= 1.5x).
4. **Calibration**: judge the A/A gate, read benchmark 0's ``mde_pct``, inject exactly that
   change into the same gate's current run and judge again; share caught (target 70-90%).
5. **Called unchanged while changed**: over the power rows, the share of true changes with
   verdict ``unchanged`` (target 0%).
6. **Short history**: 1, 2 and 3 runs of one repeat, each the median of 30 i.i.d. steps at
   CoV 8%, no job noise; share ``regression`` for +30% (3 runs) and +50% (1 and 2 runs).

Columns: the row, its gates, the rate with its 95% Wilson interval, other counts (for a
power row its ratio to the no-nuisance row and the verdicts that were not ``regression``),
the median ``mde_pct`` (A/A: the median over a gate's benchmarks, then over gates; power:
benchmark 0's; calibration: the MDE injected) and the row's wall seconds (rows run one after
another, each spread over ``--jobs`` worker processes).

Every gate draws from its own generator seeded by (``--seed``, the row's name, the gate's
index), so a row's numbers do not depend on ``--jobs``, on ``--only`` or on rows added later.
``perfgate`` is imported from the environment (``PYTHONPATH`` first), never from this
checkout by path, so the same script measures another tree::

    python bench/judge_shapes.py                       # ~8 min on 2 cores
    PYTHONPATH=/tmp/before python bench/judge_shapes.py --gates 100 --only A/A
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

ALPHA = 0.01
"""Level of the oracle's test (perfgate's default alpha)."""


@dataclass(frozen=True)
class Shape:
    """One noise shape. Sizes are log-scale (ln) standard deviations or shifts, 0.01 ~ 1%.

    A nuisance that describes the runner's state (pools, modes, a cycle, a drift, a noisier
    runner, a level shift on main) applies to the current run as well: the PR's job runs on
    the same CI. Events bound to a place in the history (an outlier run, a reverted blip) are
    in the baseline only.
    """

    benchmarks: int = 10
    runs: int = 30
    """Baseline runs (the current run comes after them)."""
    repeats: int = 3
    job_sd: float = 0.010
    bench_sd: float = 0.010
    proc_sd: float = 0.016
    job_df: float | None = None
    """Student t degrees of freedom of the job factor (scaled to unit variance); None: Gaussian."""
    bench_df: float | None = None
    """Same, for the benchmark-run factor."""
    proc_df: float | None = None
    """Same, for the process factor (one draw per repeat)."""
    t_unit_var: bool = True
    """Student t draws scaled to unit variance (the component keeps its sd); False: the t's
    scale is the component's sd, so a t3 component has 3x the variance (heavier still)."""
    job_phi: float = 0.0
    """AR(1) coefficient of the job factor across runs (stationary variance job_sd**2)."""
    job_mode: float = 0.0
    """Probability that a job sits on the slow mode (+``mode_size``, every benchmark)."""
    bench_mode: float = 0.0
    """Probability that a (benchmark, run) sits on the slow mode."""
    proc_mode: float = 0.0
    """Probability that a repeat (worker process) sits on the slow mode."""
    mode_size: float = math.log(1.08)
    drift: float = 0.0
    """Level added per run to every benchmark (main drifting; continues into the current run)."""
    cycle: float = 0.0
    """Amplitude of a sinusoidal load cycle on the job factor (random phase per gate)."""
    cycle_period: float = 30.0
    noisier_bench: float = 1.0
    """Benchmark 0's benchmark-run and process sd multiplied by this in its last
    ``noisier_runs`` runs and the current run."""
    noisier_runner: float = 1.0
    """Every component multiplied by this in the last ``noisier_runs`` runs and the current run."""
    noisier_runs: int = 5
    pools: float = 0.0
    """Sticky runner pools: each stretch of ``pool_stretch`` jobs (random phase) runs on one of
    two pools (50/50), the second slower by this."""
    pool_stretch: int = 6
    slow_pool: tuple[float, float] = (0.0, 0.0)
    """A slow pool in a share of jobs drawn uniformly in this range per gate, each job
    independently (the current one too), slower by ``slow_pool_size``."""
    slow_pool_size: float = math.log(1.15)
    main_shift: float = 0.0
    """A level shift on main 1-6 runs (uniform) before the fork point, persisting into the
    current run: on benchmark 0 only, or on every benchmark with ``shift_all``."""
    shift_all: bool = False
    spikes: float = 0.0
    """Probability that a repeat (worker process) had a neighbour: slower by a size drawn
    uniformly in ``spike_size`` (the current run too; a second population of large
    deviations, not a t's tail)."""
    spike_size: tuple[float, float] = (math.log(1.05), math.log(1.3))
    outlier: float = 0.0
    """One baseline run (random place) of one benchmark other than benchmark 0 slower by this."""
    blip: float = 0.0
    """Benchmark 0 slower by this for 2 consecutive baseline runs, then reverted (at least one
    normal run after them)."""
    change: float = 0.0
    """The change of benchmark 0 in the current run (every repeat)."""
    changed: int = 1
    """How many benchmarks (0, 1, ...) ``change`` moves: a PR that touches several."""
    steps: int = 0
    """When > 0, each repeat's value is further the median of this many i.i.d. steps of
    log-sd ``step_sd`` (the short-history rows: one repeat, no job noise)."""
    step_sd: float = 0.08

    def scaled(self, run_cov: float) -> Shape:
        """The same shape with the three noise components scaled to a run-level CoV."""
        k = run_cov / run_cov_of(self)
        return dataclasses.replace(
            self, job_sd=self.job_sd * k, bench_sd=self.bench_sd * k, proc_sd=self.proc_sd * k
        )


def _t_unit(
    rng: np.random.Generator, df: float | None, size: tuple[int, ...], unit_var: bool = True
) -> np.ndarray:
    if df is None:
        return rng.standard_normal(size)
    return rng.standard_t(df, size) * (math.sqrt((df - 2.0) / df) if unit_var else 1.0)


def draw(shape: Shape, rng: np.random.Generator, gates: int = 1) -> np.ndarray:
    """Log values of ``gates`` gates: an array (gates, benchmarks, runs + 1, repeats).

    Index ``runs`` on the third axis is the current run; benchmark 0 is the one a power row
    changes. A value is ``log(mean_b) + job + bench_run + process + nuisances``, with
    ``mean_b`` log-uniform in 10-200 ms.
    """
    g, b, n, r = gates, shape.benchmarks, shape.runs + 1, shape.repeats
    idx = np.arange(n)
    late = idx >= n - 1 - shape.noisier_runs  # the last noisier_runs baseline runs + current
    runner_k = np.where(late, shape.noisier_runner, 1.0)  # (n,)

    # the job factor, shared by every benchmark of a job
    if shape.job_phi:
        e = _t_unit(rng, shape.job_df, (g, n), shape.t_unit_var)
        job = np.empty((g, n))
        job[:, 0] = e[:, 0]
        s = math.sqrt(1.0 - shape.job_phi**2)
        for i in range(1, n):
            job[:, i] = shape.job_phi * job[:, i - 1] + s * e[:, i]
    else:
        job = _t_unit(rng, shape.job_df, (g, n), shape.t_unit_var)
    job = job * shape.job_sd * runner_k
    if shape.job_mode:
        job += shape.mode_size * (rng.random((g, n)) < shape.job_mode)
    if shape.cycle:
        phase = rng.uniform(0, 2 * math.pi, (g, 1))
        job += shape.cycle * np.sin(2 * math.pi * idx / shape.cycle_period + phase)
    if shape.pools:
        offset = rng.integers(0, shape.pool_stretch, (g, 1))
        stretch = (idx + offset) // shape.pool_stretch  # (g, n)
        slow = rng.random((g, n // shape.pool_stretch + 2)) < 0.5
        job += shape.pools * np.take_along_axis(slow, stretch, axis=1)
    if shape.slow_pool[1] > 0:
        p = rng.uniform(*shape.slow_pool, (g, 1))
        job += shape.slow_pool_size * (rng.random((g, n)) < p)
    if shape.drift:
        job = job + shape.drift * idx

    # benchmark-run and process factors
    bench_k = np.ones((b, n))
    bench_k[0, late] = shape.noisier_bench
    bench_k = bench_k * runner_k
    bench = _t_unit(rng, shape.bench_df, (g, b, n), shape.t_unit_var) * shape.bench_sd * bench_k
    if shape.bench_mode:
        bench += shape.mode_size * (rng.random((g, b, n)) < shape.bench_mode)
    proc = _t_unit(rng, shape.proc_df, (g, b, n, r), shape.t_unit_var)
    proc = proc * shape.proc_sd * bench_k[..., None]
    if shape.proc_mode:
        proc += shape.mode_size * (rng.random((g, b, n, r)) < shape.proc_mode)
    if shape.spikes:
        hit = rng.random((g, b, n, r)) < shape.spikes
        proc += hit * rng.uniform(*shape.spike_size, (g, b, n, r))
    if shape.steps:
        steps = rng.standard_normal((g, b, n, r, shape.steps)) * shape.step_sd
        proc += np.median(steps, axis=-1)

    level = rng.uniform(math.log(10.0), math.log(200.0), (g, b, 1))
    x = level + job[:, None, :] + bench
    if shape.main_shift:
        k = rng.integers(1, 7, (g, 1))
        shifted = (idx >= n - 1 - k) * shape.main_shift  # (g, n)
        if shape.shift_all:
            x += shifted[:, None, :]
        else:
            x[:, 0, :] += shifted
    if shape.outlier and b > 1:
        who = rng.integers(1, b, g)
        when = rng.integers(0, n - 1, g)
        x[np.arange(g), who, when] += shape.outlier
    if shape.blip:
        start = rng.integers(0, n - 3, (g, 1))
        x[:, 0, :] += shape.blip * ((idx >= start) & (idx < start + 2))
    x[:, : shape.changed, n - 1] += shape.change
    return x[..., None] + proc


def run_cov_of(shape: Shape, draws: int = 200_000) -> float:
    """Run-level CoV of one benchmark of ``shape``'s Gaussian base: the spread of a run's
    centre (the median of its repeats) from the job, benchmark-run and process factors."""
    rng = np.random.default_rng(12345)
    job = rng.standard_normal(draws) * shape.job_sd
    bench = rng.standard_normal(draws) * shape.bench_sd
    proc = rng.standard_normal((draws, shape.repeats)) * shape.proc_sd
    c = np.exp(job + bench + np.median(proc, axis=-1))
    return float(c.std() / c.mean())


# --------------------------------------------------------------------------- rows

LN8, LN5 = math.log(1.08), math.log(1.05)


@dataclass(frozen=True)
class Row:
    """One line of the table."""

    name: str
    kind: str
    """``aa``, ``power``, ``calib`` (inject the stated MDE), ``oracle`` or ``unchanged``."""
    shape: Shape = Shape()
    ref: str | None = None
    """The no-nuisance row a power row is compared with."""
    weight: float = 1.0
    """Gates of this row as a share of ``--gates`` (the expensive rows run fewer)."""


def _rows() -> list[Row]:
    base = Shape()
    cov1 = Shape(benchmarks=20).scaled(0.01)
    one = Shape(benchmarks=1).scaled(0.01)
    short = Shape(
        benchmarks=1, repeats=1, job_sd=0.0, bench_sd=0.0, proc_sd=0.0, steps=30, step_sd=0.08
    )
    r = dataclasses.replace
    nuisances = [
        ("Gaussian", base, 1.0),
        ("t3 job tails", r(base, job_df=3.0), 1.0),
        ("t4 job tails", r(base, job_df=4.0), 1.0),
        ("t3 benchmark tails", r(base, bench_df=3.0), 1.0),
        ("t4 benchmark tails", r(base, bench_df=4.0), 1.0),
        ("t3 process tails", r(base, proc_df=3.0), 1.0),
        ("t3 tails in every component", r(base, job_df=3.0, bench_df=3.0, proc_df=3.0), 1.0),
        ("AR(1) job noise phi 0.6", r(base, job_phi=0.6), 1.0),
        ("AR(1) job noise phi 0.9", r(base, job_phi=0.9), 1.0),
        ("job mode +8% in 30%", r(base, job_mode=0.3), 1.0),
        ("benchmark mode +8% in 30%", r(base, bench_mode=0.3), 1.0),
        ("process mode +8% in 30%", r(base, proc_mode=0.3), 1.0),
        ("50 benchmarks", r(base, benchmarks=50), 0.3),
        ("main drifting 0.3%/run", r(base, drift=math.log(1.003)), 1.0),
        ("3% load cycle, period 30, 100 runs", r(base, cycle=0.03, runs=100), 0.5),
        ("one benchmark 3x noisier, last 5 runs", r(base, noisier_bench=3.0), 1.0),
        ("runner 3x noisier, last 5 runs", r(base, noisier_runner=3.0), 1.0),
        ("runner 2x noisier, last 5 runs", r(base, noisier_runner=2.0), 1.0),
        ("runner 1.5x noisier, last 10 runs", r(base, noisier_runner=1.5, noisier_runs=10), 1.0),
        ("sticky pools 15% apart, 6-job stretches", r(base, pools=math.log(1.15)), 1.0),
        ("slow pool +15% in 3-5% of jobs", r(base, slow_pool=(0.03, 0.05)), 1.0),
        ("main +10% 1-6 runs before fork, one benchmark", r(base, main_shift=math.log(1.1)), 1.0),
        (
            "main +10% 1-6 runs before fork, all benchmarks",
            r(base, main_shift=math.log(1.1), shift_all=True),
            1.0,
        ),
        (
            "main +4% 1-6 runs before fork, one benchmark (inside the outlier bound)",
            r(base, main_shift=math.log(1.04)),
            1.0,
        ),
        ("one run 30% slow in one benchmark", r(base, outlier=math.log(1.3)), 1.0),
        ("one benchmark +10% for 2 runs, reverted", r(base, blip=math.log(1.1)), 1.0),
        ("t3 job tails, gate 20, CoV 1%", r(cov1, job_df=3.0), 0.5),
        ("t3 job tails at scale sd (3x variance)", r(base, job_df=3.0, t_unit_var=False), 1.0),
        ("neighbour spikes: 2% of processes +5-30%", r(base, spikes=0.02), 1.0),
        (
            "neighbour spikes: 2% of processes +5-30%, 1 repeat",
            r(base, spikes=0.02, repeats=1),
            1.0,
        ),
    ]
    rows = [Row(f"A/A: {name}", "aa", shape, weight=w) for name, shape, w in nuisances]
    rows.append(Row("A/A: short, 3 runs x 1 repeat", "aa", short))
    rows.append(Row("A/A: new suite of 10, 2 runs x 3 repeats", "aa", r(base, runs=2)))
    for b, k in ((3, 1), (4, 1), (5, 2), (10, 3), (10, 5)):
        what = "one benchmark" if k == 1 else f"{k} benchmarks"
        rows.append(
            Row(
                f"A/A of the others: gate of {b}, {what} 2x faster",
                "aa",
                r(base, benchmarks=b, change=math.log(0.5), changed=k),
            )
        )
    rows.append(Row("A/A: new suite of 10, 2 runs x 1 repeat", "aa", r(base, runs=2, repeats=1)))
    rows.append(
        Row(
            "A/A: new suite of 10, 2 runs x 3 repeats, benchmark mode +8% in 30%",
            "aa",
            r(base, runs=2, bench_mode=0.3),
        )
    )

    p8 = "power +8%: no nuisance"
    p5 = "power +5%, gate 20, CoV 1%: no nuisance"
    p1 = "power +5%, 1 benchmark, CoV 1%: no nuisance"
    rows += [
        Row(p8, "power", r(base, change=LN8)),
        Row(
            "power +8%: one run 30% slow in another benchmark",
            "power",
            r(base, change=LN8, outlier=math.log(1.3)),
            p8,
        ),
        Row(
            "power +8%: same benchmark +10% 2 runs, reverted",
            "power",
            r(base, change=LN8, blip=math.log(1.1)),
            p8,
        ),
        Row(
            "power +8%: main drifting 0.3%/run",
            "power",
            r(base, change=LN8, drift=math.log(1.003)),
            p8,
        ),
        Row(
            "power +8%: job +8% mode in 30% of jobs", "power", r(base, change=LN8, job_mode=0.3), p8
        ),
        Row("power +8%: 50 benchmarks", "power", r(base, change=LN8, benchmarks=50), p8, 0.3),
        Row(
            "power +8%: neighbour spikes in 2% of processes",
            "power",
            r(base, change=LN8, spikes=0.02),
            p8,
        ),
        Row("power +8%: 3 of 10 benchmarks +8%", "power", r(base, change=LN8, changed=3), p8),
        Row(
            "power +8%: every benchmark +8% (the whole job)",
            "power",
            r(base, change=LN8, changed=10),
            p8,
        ),
        Row("power +8%: t3 benchmark tails", "power", r(base, change=LN8, bench_df=3.0), p8),
        Row(
            "power +8%: t3 tails in every component",
            "power",
            r(base, change=LN8, job_df=3.0, bench_df=3.0, proc_df=3.0),
            p8,
        ),
        Row(p5, "power", r(cov1, change=LN5), weight=0.5),
        Row(
            "power +5%, gate 20, CoV 1%: t3 job tails",
            "power",
            r(cov1, change=LN5, job_df=3.0),
            p5,
            0.5,
        ),
        Row(
            "power +5%, gate 20, CoV 1%: t3 job tails at scale sd",
            "power",
            r(cov1, change=LN5, job_df=3.0, t_unit_var=False),
            p5,
            0.5,
        ),
        Row(p1, "power", r(one, change=LN5)),
        Row(
            "power +5%, 1 benchmark, CoV 1%: after a reverted 2-run +10% blip",
            "power",
            r(one, change=LN5, blip=math.log(1.1)),
            p1,
        ),
        Row(
            "power +5%, 1 benchmark, CoV 1%: after a 0.3%/run drift",
            "power",
            r(one, change=LN5, drift=math.log(1.003)),
            p1,
        ),
        Row(
            "oracle: t3 job tails, gate 20, CoV 1% (MDE at 80% power)",
            "oracle",
            r(cov1, job_df=3.0),
            "power +5%, gate 20, CoV 1%: t3 job tails",
        ),
        Row(
            "oracle: t3 job tails at scale sd, gate 20, CoV 1% (MDE at 80% power)",
            "oracle",
            r(cov1, job_df=3.0, t_unit_var=False),
            "power +5%, gate 20, CoV 1%: t3 job tails at scale sd",
        ),
        Row(
            "oracle: t3 benchmark tails (MDE at 80% power)",
            "oracle",
            r(base, bench_df=3.0),
            "power +8%: t3 benchmark tails",
        ),
        Row(
            "oracle: t3 tails in every component (MDE at 80% power)",
            "oracle",
            r(base, job_df=3.0, bench_df=3.0, proc_df=3.0),
            "power +8%: t3 tails in every component",
        ),
        Row("calibration: stated MDE injected, 30 runs", "calib", base),
        Row("calibration: stated MDE injected, 3 runs", "calib", r(base, runs=3)),
        Row("called unchanged while changed (all power rows)", "unchanged"),
        Row("short: 3 runs x 1 repeat, +30%", "power", r(short, runs=3, change=math.log(1.3))),
        Row("short: 2 runs x 1 repeat, +50%", "power", r(short, runs=2, change=math.log(1.5))),
        Row("short: 1 run x 1 repeat, +50%", "power", r(short, runs=1, change=math.log(1.5))),
        Row(
            "short: new suite of 10, 2 runs x 3 repeats, +30%",
            "power",
            r(base, runs=2, change=math.log(1.3)),
        ),
        Row(
            "short: new suite of 10, 2 runs x 1 repeat, +30%",
            "power",
            r(base, runs=2, repeats=1, change=math.log(1.3)),
        ),
        Row(
            "short: new suite of 10, 1 run x 3 repeats, +30%",
            "power",
            r(base, runs=1, change=math.log(1.3)),
        ),
    ]
    return rows


ROWS = _rows()


def _key(seed: int, name: str) -> int:
    """A row's seed: stable across runs, rows added and ``--only``."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "big")


# --------------------------------------------------------------------------- judging


def _inputs(x: np.ndarray) -> tuple[dict[str, list[list[float]]], dict[str, list[float]]]:
    """One gate's log values (benchmarks, runs + 1, repeats) as ``perfgate.judge`` takes them."""
    v = np.exp(x)
    n = v.shape[1] - 1
    baseline = {f"b{j}": v[j, :n].tolist() for j in range(v.shape[0])}
    current = {f"b{j}": v[j, n].tolist() for j in range(v.shape[0])}
    return baseline, current


def _finite(v: float | None) -> float:
    return v if v is not None and math.isfinite(v) else math.nan


def _gates(row: Row, key: int, start: int, stop: int) -> list[tuple]:
    """Judge gates ``start``..``stop`` of a row (in a worker); one small tuple per gate."""
    import perfgate

    out = []
    for i in range(start, stop):
        x = draw(row.shape, np.random.default_rng([key, i]))[0]
        got = perfgate.judge(*_inputs(x))
        if row.kind == "aa":
            verdicts = [j.verdict for j in got.values()]
            mdes = [_finite(j.mde_pct) for j in got.values()]
            mdes = [m for m in mdes if not math.isnan(m)]
            out.append(
                (
                    "regression" in verdicts,
                    "improvement" in verdicts,
                    statistics.median(mdes) if mdes else math.nan,
                )
            )
        elif row.kind == "power":
            j = got["b0"]
            out.append((j.verdict, _finite(j.mde_pct)))
        else:  # calib
            mde = _finite(got["b0"].mde_pct)
            if math.isnan(mde):
                out.append((math.nan, None))
                continue
            n = row.shape.runs
            x[0, n, :] += math.log1p(mde / 100.0)
            out.append((mde, perfgate.judge(*_inputs(x))["b0"].verdict))
    return out


def _oracle(shape: Shape, draws: int, seed: int) -> tuple[float, float]:
    """MDE % at 80% power of a one-sided test at alpha/m that knows the null distribution.

    Statistic: the change of benchmark 0 on the log scale, its current centre minus the mean
    of its baseline centres (centre = median of the repeats). Its null distribution is
    simulated from :func:`draw`; the critical value is its 1 - alpha/m quantile (m = the
    gate's benchmarks) and the MDE the shift d with P(T0 + d > c) = 0.8. Returned twice:
    on the raw change (``draws`` draws), and on the change net of the gate's mean (the other
    benchmarks' change in the same jobs), which cancels the job factor exactly (``draws / 10``
    draws of the whole gate).
    """
    m = shape.benchmarks
    q = 1.0 - ALPHA / m
    rng = np.random.default_rng(seed)
    raw = []
    for _ in range(max(1, draws // 20000)):
        x = draw(dataclasses.replace(shape, benchmarks=1), rng, 20000)
        c = np.median(x[:, 0], axis=-1)  # (g, runs + 1)
        raw.append(c[:, -1] - c[:, :-1].mean(axis=1))
    net = []
    for _ in range(max(1, draws // 10 // 2000)):
        x = draw(shape, rng, 2000)
        c = np.median(x, axis=-1)  # (g, b, runs + 1)
        d = c[:, 0] - c[:, 1:].mean(axis=1)
        net.append(d[:, -1] - d[:, :-1].mean(axis=1))

    def mde(t: np.ndarray) -> float:
        crit, low = np.quantile(t, [q, 0.2])
        return 100.0 * math.expm1(crit - low)

    return mde(np.concatenate(raw)), mde(np.concatenate(net))


# --------------------------------------------------------------------------- table


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval of k successes in n."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def _rate(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]" if n else "-"


def _med(values: Sequence[float]) -> str:
    v = [x for x in values if not math.isnan(x)]
    return f"{statistics.median(v):.2f}" if v else "-"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gates", type=int, default=400, help="gates per row (default 400)")
    ap.add_argument("--only", default="", help="rows whose name contains this")
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--oracle-draws", type=int, default=400_000)
    args = ap.parse_args(argv)

    import perfgate

    rows = [r for r in ROWS if args.only.lower() in r.name.lower()]
    env = f"PYTHONPATH={os.environ['PYTHONPATH']} " if os.environ.get("PYTHONPATH") else ""
    command = f"{env}python bench/judge_shapes.py {' '.join(argv or sys.argv[1:])}".rstrip()
    print(f"`{command}`")
    print()
    print(
        f"perfgate {perfgate.__version__} from {os.path.dirname(perfgate.__file__)}; "
        f"base gate: 10 benchmarks x 30 runs x 3 repeats, job {Shape.job_sd:.1%}, "
        f"benchmark-run {Shape.bench_sd:.1%}, process {Shape.proc_sd:.1%} "
        f"-> run CoV {run_cov_of(Shape()):.2%}; seed {args.seed}"
    )
    print()
    print("| row | gates | rate [95% CI] | other | median MDE % | s |")
    print("| --- | ---: | --- | --- | ---: | ---: |")
    power: dict[str, float] = {}
    mdes: dict[str, list[float]] = {}
    changed = unchanged = 0
    t_all = time.perf_counter()
    pool = ProcessPoolExecutor(args.jobs) if args.jobs > 1 else None
    try:
        for row in rows:
            t0 = time.perf_counter()
            key = _key(args.seed, row.name)
            if row.kind == "oracle":
                raw, net = _oracle(row.shape, args.oracle_draws, key % 2**32)
                pg = _med(mdes.get(row.ref or "", []))
                ratio = f"{float(pg) / raw:.2f}x / {float(pg) / net:.2f}x" if pg != "-" else "-"
                other = (
                    f"oracle on the raw change {raw:.2f}%, net of the gate's mean {net:.2f}%; "
                    f"perfgate median mde_pct {pg}% = {ratio} the raw / net oracle's"
                )
                s = time.perf_counter() - t0
                draws = f"{args.oracle_draws} draws"
                print(f"| {row.name} | {draws} | - | {other} | {raw:.2f} | {s:.0f} |")
                sys.stdout.flush()
                continue
            if row.kind == "unchanged":
                print(
                    f"| {row.name} | {changed} | {_rate(unchanged, changed)} | target 0% | - | - |"
                )
                continue
            n = max(1, round(args.gates * row.weight))
            size = max(1, math.ceil(n / (4 * args.jobs)))
            chunks = [(row, key, a, min(n, a + size)) for a in range(0, n, size)]
            if pool is None:
                res = [g for c in chunks for g in _gates(*c)]
            else:
                res = [g for f in [pool.submit(_gates, *c) for c in chunks] for g in f.result()]
            s = time.perf_counter() - t0
            if row.kind == "aa":
                k = sum(1 for g in res if g[0])
                imp = sum(1 for g in res if g[1])
                rate, other, mde = (
                    _rate(k, n),
                    f"improvement {_rate(imp, n)}",
                    _med([g[2] for g in res]),
                )
            elif row.kind == "power":
                k = sum(1 for g in res if g[0] == "regression")
                u = sum(1 for g in res if g[0] == "unchanged")
                changed, unchanged = changed + n, unchanged + u
                power[row.name] = k / n
                mdes[row.name] = [g[1] for g in res]
                tally = collections.Counter(g[0] for g in res if g[0] != "regression")
                other = ", ".join(f"{v} {c}" for v, c in sorted(tally.items())) or "all regression"
                if row.ref in power and power[row.ref] > 0:
                    other = f"x{k / n / power[row.ref]:.2f} of no-nuisance; " + other
                rate, mde = _rate(k, n), _med(mdes[row.name])
            else:  # calib
                stated = [g for g in res if g[1] is not None]
                k = sum(1 for g in stated if g[1] == "regression")
                rate = _rate(k, len(stated))
                other = f"{n - len(stated)} of {n} gates state no MDE; target 70-90%"
                mde = _med([g[0] for g in stated])
            print(f"| {row.name} | {n} | {rate} | {other} | {mde} | {s:.0f} |")
            sys.stdout.flush()
    finally:
        if pool is not None:
            pool.shutdown()
    print()
    print(f"total {time.perf_counter() - t_all:.0f} s with --jobs {args.jobs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
