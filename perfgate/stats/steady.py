"""Within one worker process: where warm-up ends, and how sure the centre of the rest is.

Assumptions: after a transient (allocator warm-up, lazy initialisation, compilation, cache
fills), step times settle into a stationary but autocorrelated series — a slow step makes
the next one likelier to be slow. So

* the end of the transient is found with MSER-5 (White 1997): average the samples in
  batches of 5 and drop the leading batches that minimise the marginal standard error of
  what remains, never more than half the run, and only when the dropped batches differ from
  the rest by more than 3 standard errors (MSER alone sometimes cuts stationary noise);
* the centre of the steady part is its median, and its standard error comes from a moving
  block bootstrap with blocks of about n^(1/3) steps, which keeps neighbouring steps
  together; i.i.d. formulas would understate it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

MSER_BATCH = 5
MAX_DROP_FRACTION = 0.5
TRANSIENT_Z = 3.0
BOOTSTRAP_SAMPLES = 200
BOOTSTRAP_SEED = 20261129


def steady_start(samples: Sequence[float] | np.ndarray, batch: int = MSER_BATCH) -> int:
    """Index of the first step of the steady state (MSER-``batch`` truncation point)."""
    x = np.asarray(samples, dtype=float)
    m = x.size // batch
    if m < 4:
        return 0
    means = x[: m * batch].reshape(m, batch).mean(axis=1)
    # For each d, the MSER statistic of means[d:]: sum of squared deviations / (m - d)^2.
    tail = means[::-1]
    counts = np.arange(1, m + 1, dtype=float)
    csum = np.cumsum(tail)
    csq = np.cumsum(tail * tail)
    ssd = csq - csum * csum / counts  # sum of squared deviations of the last k means
    stat = (ssd / counts**2)[::-1]  # index d -> statistic of means[d:]
    limit = int(m * MAX_DROP_FRACTION)
    d = int(np.argmin(stat[: limit + 1]))
    if d == 0:
        return 0
    # MSER alone truncates stationary noise now and then; keep a cut only when what it drops
    # really differs from what stays (a transient), by TRANSIENT_Z standard errors.
    head, rest = means[:d], means[d:]
    sd = float(np.std(rest, ddof=1))
    se = sd * np.sqrt(1.0 / head.size + 1.0 / rest.size)
    if abs(float(head.mean()) - float(rest.mean())) <= TRANSIENT_Z * se:
        return 0
    return d * batch


def block_bootstrap_se(
    samples: Sequence[float] | np.ndarray, *, seed: int = BOOTSTRAP_SEED
) -> float:
    """Standard error of the median by a moving block bootstrap (deterministic seed)."""
    x = np.asarray(samples, dtype=float)
    n = x.size
    if n < 4:
        return float("nan") if n < 2 else float(np.std(x, ddof=1))
    block = max(1, round(n ** (1.0 / 3.0)))
    starts_available = n - block + 1
    blocks_needed = math.ceil(n / block)
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, starts_available, size=(BOOTSTRAP_SAMPLES, blocks_needed))
    index = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(BOOTSTRAP_SAMPLES, -1)
    medians = np.median(x[index[:, :n]], axis=1)
    return float(np.std(medians, ddof=1))
