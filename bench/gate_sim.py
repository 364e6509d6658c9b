"""Noise simulator for the PR-gate detection benchmark (``bench/detection_gate.py``).

Vectorised with numpy; every draw comes from a generator seeded by :func:`rng_for`, so a run
reproduces exactly. The model, on the log scale (every factor multiplies the true value)::

    step value = true x (1 + effect) x job factor x process factor x step noise

* **job factor**, one per (metric, run): log-normal, SD ``job_sd`` (or, to test heavier
  tails, Student-t with ``job_df`` degrees of freedom scaled to that SD); plus, with
  probability ``job_spike_rate`` per run, a spike x U(1.10, 1.40) that hits *every metric
  of that run at once* (a slow machine for one job: a single-run spike in the history, or
  in the current run).
* **process factor**, one per worker process (repeat): normal, SD ``process_sd``; plus, with
  probability ``process_spike_rate``, a spike x U(1.05, 1.30) (a neighbour during that one
  process).
* **step noise**, one per step: Student-t(3) tails (normal when ``step_df`` is None), SD
  ``step_sd``; with probability ``step_outlier_rate`` a stall x U(1.5, 3.0) (garbage
  collection, allocator, page faults).

:func:`mixed_model` has all of it; :func:`gaussian_model` the same split of the noise with
none of the extras (log-normal job and process parts, normal steps, no spikes, no stalls).

A repeat centre is the median of its ``steps`` steps, a run centre the median of its repeat
centres: what perfgate stores. Apart from the job spikes, metrics are independent, which is
the worst case for "any alarm in a gate of 20".

An A/B run (``perfgate run --ab``) puts ``repeats`` base and ``repeats`` head processes in one
job: all share that job's factor and spikes, the two members of a pair also share a drift
(SD ``pair_drift_sd``); each process has its own process factor, spike and steps.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

BASE_SEED = 20260601
TRUE_VALUE = 50.0
"""True step time (ms) of every simulated metric."""

# The median of n unit-variance Student-t(3) values has SD about 1 / (2 f(0) sqrt(n)), with
# f(0) = 2 / pi the density at 0 of the unit-variance t(3): pi / 4 / sqrt(n).
_T3_MEDIAN_FACTOR = math.pi / 4.0


def rng_for(*key: int) -> np.random.Generator:
    """The generator of one simulated configuration: ``BASE_SEED`` plus a key of integers."""
    return np.random.default_rng([BASE_SEED, *key])


@dataclass(frozen=True)
class NoiseModel:
    label: str
    job_sd: float
    process_sd: float
    step_sd: float
    steps: int = 30
    job_df: float | None = None
    step_df: float | None = 3.0
    """Student-t degrees of freedom of the step noise; None: normal."""
    step_outlier_rate: float = 0.01
    process_spike_rate: float = 0.02
    job_spike_rate: float = 0.005
    pair_drift_sd: float = 0.0
    pool_rate: float = 0.0
    """Share of runs on a slower runner pool (same fingerprint): every metric of such a run
    is ``pool_factor`` times slower."""
    pool_factor: float = 1.25
    pool_block: int = 1
    """Runs in a row that stay on one pool (1: each run drawn on its own; 6: sticky)."""

    def describe(self) -> str:
        job_spikes = (
            f", spikes {self.job_spike_rate:.1%}/run x1.1-1.4, all metrics"
            if self.job_spike_rate
            else ", no spikes"
        )
        process_spikes = (
            f" (spikes {self.process_spike_rate:.0%}/process x1.05-1.3)"
            if self.process_spike_rate
            else " (no spikes)"
        )
        steps = "normal" if self.step_df is None else f"t{self.step_df:g}"
        stalls = ", no stalls"
        if self.step_outlier_rate:
            stalls = f", stalls {self.step_outlier_rate:.0%} x1.5-3"
        return (
            f"{self.label}: job SD {self.job_sd:.2%} ("
            + ("log-normal" if self.job_df is None else f"t{self.job_df:g} tails")
            + f"{job_spikes}), process SD {self.process_sd:.2%}{process_spikes}, "
            f"step SD {self.step_sd:.2%} ({steps}{stalls}), {self.steps} steps/process"
            + (f", pair drift SD {self.pair_drift_sd:.1%}" if self.pair_drift_sd else "")
            + (
                f", slow pool x{self.pool_factor:g} in {self.pool_rate:.0%} of runs"
                + (f" (sticky for {self.pool_block} runs)" if self.pool_block > 1 else "")
                if self.pool_rate
                else ""
            )
        )


def mixed_model(cov: float, steps: int = 30) -> NoiseModel:
    """Run-to-run CoV ``cov`` of one repeat centre: 50% job, 40% process, 10% steps (variance)."""
    step_median_sd = math.sqrt(0.1) * cov
    return NoiseModel(
        label=f"CoV {cov:.0%}",
        job_sd=math.sqrt(0.5) * cov,
        process_sd=math.sqrt(0.4) * cov,
        step_sd=step_median_sd * math.sqrt(steps) / _T3_MEDIAN_FACTOR,
        steps=steps,
    )


def gaussian_model(cov: float, steps: int = 30) -> NoiseModel:
    """:func:`mixed_model`'s split of the CoV (50% job, 40% process, 10% steps) with nothing
    else: log-normal job and process parts, normal step noise, no spikes, no stalls."""
    # the median of n normal steps has SD sqrt(pi / 2n) of one step's (large n)
    step_median_sd = math.sqrt(0.1) * cov
    return NoiseModel(
        label=f"Gaussian CoV {cov:.0%}",
        job_sd=math.sqrt(0.5) * cov,
        process_sd=math.sqrt(0.4) * cov,
        step_sd=step_median_sd / math.sqrt(math.pi / (2.0 * steps)),
        steps=steps,
        step_df=None,
        step_outlier_rate=0.0,
        process_spike_rate=0.0,
        job_spike_rate=0.0,
    )


def job_dominated_model(steps: int = 30) -> NoiseModel:
    """Shared-runner noise: job CoV 10%, process CoV 1%, quiet steps, drift inside the job."""
    return NoiseModel(
        label="job 10% / process 1%",
        job_sd=0.10,
        process_sd=0.01,
        step_sd=0.003 * math.sqrt(steps) / _T3_MEDIAN_FACTOR,
        steps=steps,
        pair_drift_sd=0.03,
    )


def _t(rng: np.random.Generator, df: float, size: tuple[int, ...]) -> np.ndarray:
    """Student-t draws scaled to unit variance."""
    return rng.standard_t(df, size) / math.sqrt(df / (df - 2.0))


def _job_log(
    rng: np.random.Generator, model: NoiseModel, n: int, runs: int, gate_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """(n, runs) log job factors and spike flags; spikes shared by the ``gate_size`` metrics
    of one gate."""
    if model.job_df is None:
        job = rng.normal(0.0, model.job_sd, (n, runs))
    else:
        job = model.job_sd * _t(rng, model.job_df, (n, runs))
    gates = n // gate_size
    hit = rng.random((gates, runs)) < model.job_spike_rate
    size = np.log(rng.uniform(1.10, 1.40, (gates, runs)))
    spiked = np.repeat(hit, gate_size, axis=0)
    job = job + np.repeat(np.where(hit, size, 0.0), gate_size, axis=0)
    if model.pool_rate:
        blocks = -(-runs // model.pool_block) + 1
        state = rng.random((gates, blocks)) < model.pool_rate
        phase = rng.integers(0, model.pool_block, (gates, 1))
        index = (np.arange(runs)[None, :] + phase) // model.pool_block
        slow = np.take_along_axis(state, index, axis=1)
        job = job + np.repeat(np.where(slow, math.log(model.pool_factor), 0.0), gate_size, axis=0)
    return job, spiked


def _process_log(rng: np.random.Generator, model: NoiseModel, shape: tuple[int, ...]) -> np.ndarray:
    proc = rng.normal(0.0, model.process_sd, shape)
    hit = rng.random(shape) < model.process_spike_rate
    return proc + np.where(hit, np.log(rng.uniform(1.05, 1.30, shape)), 0.0)


def _step_log(rng: np.random.Generator, model: NoiseModel, shape: tuple[int, ...]) -> np.ndarray:
    if model.step_df is None:
        steps = model.step_sd * rng.standard_normal(shape)
    else:
        steps = model.step_sd * _t(rng, model.step_df, shape)
    hit = rng.random(shape) < model.step_outlier_rate
    steps[hit] += np.log(rng.uniform(1.5, 3.0, int(hit.sum())))
    return steps


@functools.cache
def step_median_law(model: NoiseModel) -> tuple[float, float]:
    """(mean, SD) of the log of the median of one process's steps, measured once (seeded)."""
    medians = np.median(_step_log(rng_for(0), model, (50_000, model.steps)), axis=1)
    return float(np.mean(medians)), float(np.std(medians))


def _step_median_log(
    rng: np.random.Generator, model: NoiseModel, shape: tuple[int, ...]
) -> np.ndarray:
    mean, sd = step_median_law(model)
    return rng.normal(mean, sd, shape)


@dataclass(frozen=True)
class Series:
    """Simulated history plus current run of ``n`` metrics.

    ``centres``: (n, runs, repeats) repeat centres, the last run being the current one (with
    the effect). ``steps``: (n, 2, repeats * steps) raw step times of the last history run
    and of the current run, for the sample-based (asv-style) rule. ``spiked``: (n, runs),
    whether a job-level spike hit that run.
    """

    centres: np.ndarray
    steps: np.ndarray
    spiked: np.ndarray

    @property
    def run_centres(self) -> np.ndarray:
        return np.asarray(np.median(self.centres, axis=2))


def simulate_series(
    rng: np.random.Generator,
    model: NoiseModel,
    n: int,
    runs: int,
    repeats: int,
    *,
    effect: float = 0.0,
    gate_size: int = 1,
    noisy_last: int = 0,
    noisy_factor: float = 3.0,
    main_shift: int = 0,
    shift: float = 0.10,
) -> Series:
    """``n`` metrics (a multiple of ``gate_size``), ``runs`` runs each, the last one current.

    The median of a process's steps is drawn from its normal law (mean and SD measured by
    :func:`step_median_law`); the raw steps, needed only by the sample-based rule, are drawn
    for the last two runs and shifted so that each process's median is exactly that draw.
    """
    job, spiked = _job_log(rng, model, n, runs, gate_size)
    noise = job[:, :, None] + _process_log(rng, model, (n, runs, repeats))
    noise += _step_median_log(rng, model, (n, runs, repeats))
    if noisy_last:
        # the last baseline runs were measured on a noisier machine: their deviations grow
        mean = step_median_law(model)[0]
        part = slice(runs - 1 - noisy_last, runs - 1)
        noise[:, part, :] = mean + (noise[:, part, :] - mean) * noisy_factor
    level = noise
    level[:, -1, :] += math.log1p(effect)
    if main_shift:
        # main regressed ``main_shift`` runs before the current one, which includes it
        level[:, runs - 1 - main_shift :, :] += math.log1p(shift)
    raw = _step_log(rng, model, (n, 2, repeats, model.steps))
    raw += level[:, -2:, :, None] - np.median(raw, axis=3, keepdims=True)
    return Series(
        centres=TRUE_VALUE * np.exp(level),
        steps=TRUE_VALUE * np.exp(raw).reshape(n, 2, repeats * model.steps),
        spiked=spiked,
    )


def simulate_ab(
    rng: np.random.Generator,
    model: NoiseModel,
    n: int,
    repeats: int,
    *,
    effect: float = 0.0,
    gate_size: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Base and head repeat centres, (n, repeats) each, measured in pairs in one job."""
    shared, _ = _job_log(rng, model, n, 1, gate_size)
    if model.pair_drift_sd:
        shared = shared + rng.normal(0.0, model.pair_drift_sd, (n, repeats))
    out = []
    for shift in (0.0, math.log1p(effect)):
        level = shared + _process_log(rng, model, (n, repeats)) + shift
        out.append(TRUE_VALUE * np.exp(level + _step_median_log(rng, model, (n, repeats))))
    return out[0], out[1]


def realised_cov(model: NoiseModel, repeats: int, n: int = 20000) -> dict[str, float]:
    """Noise the model produces: CoV (SD / mean) and robust CoV (1.4826 MAD / median) of a
    repeat centre, of a run centre, and of a pair's head/base ratio."""
    rng = rng_for(999, repeats)
    series = simulate_series(rng, model, n, 2, repeats)
    base, head = simulate_ab(rng, model, n, repeats)
    out: dict[str, float] = {}
    for name, x in (
        ("repeat", series.centres[:, 0, 0]),
        ("run", series.run_centres[:, 0]),
        ("pair", head[:, 0] / base[:, 0]),
    ):
        med = float(np.median(x))
        out[name] = float(np.std(x) / np.mean(x))
        out[name + "_robust"] = 1.4826 * float(np.median(np.abs(x - med))) / med
    return out
