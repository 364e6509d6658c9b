"""Simulated run histories with known change points, and the scoring of a detector on them.

What a series is (one number per nightly run, oldest first):

* A level (a time in ms, drawn per series) times multiplicative noise: ``exp(sigma * e)``
  with ``sigma`` the series' CoV (1%, 3% or 5%), i.e. log-normal run-to-run noise. In half
  the series ``e`` is standard normal; in the other half it is Student-t with 3 degrees of
  freedom scaled to unit variance (heavy tails: the occasional run 3-6 sigma off).
* Single-run spikes: each run, with probability 2%, is 10-100% slower (and with 0.5%, 5-20%
  faster), as when a neighbour job or a cold cache hits one run. **Not change points.**
* True change points: 0-3 steps per series (30/30/25/15%), each of 2-20% (log-uniform, so
  small steps are as common as large ones on a log scale), up or down with equal odds, at
  least 20 runs from either end and 25 runs from each other. The level stays changed. A
  change point is labelled at the first run of the new level.
* Slow drift (a quarter of the series): a linear ramp of 3-8% in total spread over 100-200
  runs (at most 0.08% per run), after which the level stays where the ramp left it.
  **Not a change point**: no run-to-run jump is visible, and a history analysis that
  splits a ramp into steps would blame arbitrary commits.
* Variance change (a fifth of the series): from a random run on, sigma is multiplied by 2-3
  (or divided by 2), the median unchanged. **Not a change point**: a gate judges levels; a
  noisier machine is reported by the per-run noise checks, not as a regression of the code.

Scoring (a detection within ``MARGIN`` = 5 runs of a true change counts, each true change
matched at most once, each detection at most once):

* Pooled precision, recall and F1 over all series of a group: TP, FP and FN are summed over
  the series first. A detector that predicts nothing has precision 1 by convention (no false
  alarm), recall 0 wherever a true change exists, hence F1 0.
* TCPD-style F1 (van den Burg & Williams 2020, TCPDBench ``metrics.py``): per series, index 0
  is added to both the true and the predicted set as a trivial change point, then F1 of that
  series; the group's figure is the mean over series. A series with no true change and no
  prediction scores 1, one false alarm there scores 2/3. Under this convention the "zero"
  predictor scored 0.669 on TCPD's real series.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MARGIN = 5
COVS = (0.01, 0.03, 0.05)
BENCH_SEED = 20260101
"""Seed of the series the bench reports."""
TUNING_SEED = 7
"""Seed of the series perfgate's defaults were chosen on (never the bench seed)."""

SPIKE_UP_P = 0.02
SPIKE_DOWN_P = 0.005
HEAVY_TAIL_SHARE = 0.5
DRIFT_SHARE = 0.25
VARIANCE_SHARE = 0.2
MIN_FROM_END = 20
MIN_GAP = 25


@dataclass(frozen=True)
class SimSeries:
    """One simulated history: values oldest first, the true change indexes, what it contains."""

    values: tuple[float, ...]
    changes: tuple[int, ...]
    cov: float
    features: tuple[str, ...]


def _change_positions(rng: np.random.Generator, n: int, count: int) -> list[int]:
    for _ in range(1000):
        pos = sorted(int(p) for p in rng.integers(MIN_FROM_END, n - MIN_FROM_END + 1, size=count))
        if all(pos[i + 1] - pos[i] >= MIN_GAP for i in range(len(pos) - 1)):
            return pos
    return []


def simulate_series(
    rng: np.random.Generator, n: int, cov: float, *, n_changes: int | None = None
) -> SimSeries:
    """One series of n runs at run-to-run CoV ``cov`` (see the module docstring).

    ``n_changes`` fixes the number of true change points instead of drawing it.
    """
    features: list[str] = []
    log_level = np.full(n, math.log(float(rng.uniform(5.0, 200.0))))

    count = int(rng.choice(4, p=[0.30, 0.30, 0.25, 0.15]))
    if n_changes is not None:
        count = n_changes
    changes = _change_positions(rng, n, count)
    for c in changes:
        size = math.exp(float(rng.uniform(math.log(0.02), math.log(0.20))))
        sign = 1.0 if rng.random() < 0.5 else -1.0
        log_level[c:] += math.log1p(sign * size)
    if changes:
        features.append("steps")

    if rng.random() < DRIFT_SHARE:
        length = int(rng.integers(100, min(200, n - 10) + 1))
        start = int(rng.integers(0, n - length + 1))
        total = float(rng.uniform(0.03, 0.08)) * (1.0 if rng.random() < 0.5 else -1.0)
        ramp = np.clip((np.arange(n) - start) / length, 0.0, 1.0)
        log_level += math.log1p(total) * ramp
        features.append("drift")

    sigma = np.full(n, cov)
    if rng.random() < VARIANCE_SHARE:
        start = int(rng.integers(MIN_FROM_END, n - MIN_FROM_END))
        factor = float(rng.uniform(2.0, 3.0)) if rng.random() < 0.7 else 0.5
        sigma[start:] *= factor
        features.append("variance")

    if rng.random() < HEAVY_TAIL_SHARE:
        noise = rng.standard_t(3, size=n) / math.sqrt(3.0)
        features.append("heavy_tails")
    else:
        noise = rng.standard_normal(n)
    values = np.exp(log_level + sigma * noise)

    up = rng.random(n) < SPIKE_UP_P
    down = rng.random(n) < SPIKE_DOWN_P
    values[up] *= 1.0 + rng.uniform(0.10, 1.00, size=int(up.sum()))
    values[down] *= 1.0 - rng.uniform(0.05, 0.20, size=int(down.sum()))
    if up.any() or down.any():
        features.append("spikes")
    return SimSeries(tuple(float(v) for v in values), tuple(changes), cov, tuple(features))


def make_dataset(
    seed: int,
    *,
    per_cov: int = 60,
    covs: Sequence[float] = COVS,
    length: tuple[int, int] = (200, 300),
) -> list[SimSeries]:
    """``per_cov`` series of ``length`` runs (uniform, inclusive) per CoV level, from one seed."""
    rng = np.random.default_rng(seed)
    out: list[SimSeries] = []
    for cov in covs:
        for _ in range(per_cov):
            n = int(rng.integers(length[0], length[1] + 1))
            out.append(simulate_series(rng, n, cov))
    return out


def creeping(
    rng: np.random.Generator, n: int, total: float, cov: float, *, flat: int = 0
) -> tuple[float, ...]:
    """A linear creep of ``total`` (0.35: +35%) over n runs under log-normal noise at CoV
    ``cov``, after ``flat`` runs at the starting level and before ``flat`` at the end one:
    no step anywhere, one drift."""
    ramp = np.clip((np.arange(n + 2 * flat) - flat) / max(n - 1, 1), 0.0, 1.0)
    values = 100.0 * np.exp(cov * rng.standard_normal(n + 2 * flat)) * (1.0 + total * ramp)
    return tuple(float(v) for v in values)


def true_positives(truth: Sequence[int], predicted: Sequence[int], margin: int = MARGIN) -> int:
    """Detections within ``margin`` of a true change, each side matched at most once.

    Greedy in index order, each true change taking the earliest free detection in its
    window: for equal-width windows on a line this gives the largest possible matching.
    """
    preds = sorted(predicted)
    used = [False] * len(preds)
    tp = 0
    for t in sorted(truth):
        for i, p in enumerate(preds):
            if not used[i] and abs(p - t) <= margin:
                used[i] = True
                tp += 1
                break
    return tp


@dataclass(frozen=True)
class Score:
    """Pooled counts and rates of one detector on one group of series."""

    tp: int
    fp: int
    fn: int
    tcpd_f1: float

    @property
    def precision(self) -> float:
        return 1.0 if self.tp + self.fp == 0 else self.tp / (self.tp + self.fp)

    @property
    def recall(self) -> float:
        return 1.0 if self.tp + self.fn == 0 else self.tp / (self.tp + self.fn)

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 0.0 if p + r == 0 else 2.0 * p * r / (p + r)


def tcpd_f1(truth: Sequence[int], predicted: Sequence[int], margin: int = MARGIN) -> float:
    """F1 of one series with TCPD's convention: index 0 added to both sets."""
    t = sorted({0, *truth})
    x = sorted({0, *predicted})
    tp = true_positives(t, x, margin)
    precision, recall = tp / len(x), tp / len(t)
    return 0.0 if tp == 0 else 2.0 * precision * recall / (precision + recall)


def score(truths: Sequence[Sequence[int]], predictions: Sequence[Sequence[int]]) -> Score:
    """Pooled precision/recall/F1 and mean TCPD-style F1 over paired series."""
    tp = fp = fn = 0
    per_series: list[float] = []
    for truth, pred in zip(truths, predictions, strict=True):
        hit = true_positives(truth, pred)
        tp += hit
        fp += len(pred) - hit
        fn += len(truth) - hit
        per_series.append(tcpd_f1(truth, pred))
    mean = sum(per_series) / len(per_series) if per_series else 1.0
    return Score(tp, fp, fn, mean)
