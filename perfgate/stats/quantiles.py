"""Tail latency: statistics for percentiles (a P99 is not a mean).

How perfgate judges the latency percentiles of an inference benchmark:

* ``latency_p50_ms`` holds every request's latency; its run centre (the median of the
  repeats' medians) is judged by the usual history procedure (:mod:`perfgate.stats.compare`).
* ``latency_p90_ms`` / ``latency_p99_ms`` hold **one percentile per repeat** (a fresh
  process each), and a run's centre is the median of those. They go through the same
  history procedure — their run-to-run noise is measured, not assumed — with a larger
  minimum effect (P90 5%, P99 10%): a P99 of a few hundred requests rests on its few
  slowest requests, so it moves more from run to run than a median, and a prediction
  interval built from a short history of such values is wide.
* Two pure tests here answer the sharper question "has the tail itself changed?" from raw
  request latencies, without assuming a shape for the latency distribution:

  - :func:`exceedance_test` — the share of current requests slower than the baseline's
    q-quantile, against the expected ``1 - q`` (a one-sided exact binomial test). If the
    tail did not move, about 1% of requests exceed the old P99; an injected tail of 1
    request in 20 being slow puts ~5% there, which 200 requests already show (p < 1e-3).
  - :func:`bootstrap_quantile_diff` — a percentile-bootstrap 95% interval of the relative
    difference of the q-quantiles of two samples (requests resampled independently, so it
    ignores autocorrelation: read it as a lower bound of the uncertainty).

  The binomial test treats requests as independent draws given the baseline quantile,
  which is optimistic when latencies come in bursts; the history test on per-repeat
  percentiles is what decides the verdict, and these name the size of the tail change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

__all__ = ["Exceedance", "Samples", "bootstrap_quantile_diff", "exceedance_test", "quantile"]

Samples = Sequence[float] | np.ndarray


def quantile(samples: Samples, q: float) -> float:
    """The q-quantile (0 < q < 1) by linear interpolation (numpy's default)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must lie in (0, 1), got {q}")
    if len(samples) == 0:
        raise ValueError("no samples")
    return float(np.quantile(np.asarray(samples, dtype=float), q))


@dataclass(frozen=True)
class Exceedance:
    """How many current requests exceed the baseline's q-quantile, against chance."""

    n: int
    exceeding: int
    threshold: float
    expected_share: float
    """``1 - q``: the share expected above the threshold if nothing changed."""
    p_value: float
    """One-sided: P(at least ``exceeding`` of ``n`` | share ``expected_share``)."""

    @property
    def share(self) -> float:
        return self.exceeding / self.n if self.n else 0.0


def exceedance_test(samples: Samples, threshold: float, q: float) -> Exceedance:
    """Binomial exceedance test of ``samples`` against a baseline q-quantile ``threshold``.

    Raises:
        ValueError: no samples, a non-finite sample, or q outside (0, 1).
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must lie in (0, 1), got {q}")
    arr = np.asarray(samples, dtype=float)
    if arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ValueError("samples must be a non-empty list of finite numbers")
    n = int(arr.size)
    k = int(np.sum(arr > threshold))
    expected = 1.0 - q
    p = float(sps.binom.sf(k - 1, n, expected)) if k > 0 else 1.0
    return Exceedance(n, k, float(threshold), expected, min(1.0, p))


def bootstrap_quantile_diff(
    baseline: Samples,
    current: Samples,
    q: float,
    *,
    resamples: int = 2000,
    seed: int = 11,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """Relative change of the q-quantile, current vs baseline, in percent, with a
    percentile-bootstrap interval: ``(change, low, high)``."""
    a = np.asarray(baseline, dtype=float)
    b = np.asarray(current, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("both samples need at least one value")
    base_q = float(np.quantile(a, q))
    if base_q == 0 or not math.isfinite(base_q):
        raise ValueError("the baseline quantile must be a finite non-zero number")
    rng = np.random.default_rng(seed)
    qa = np.quantile(a[rng.integers(0, a.size, size=(resamples, a.size))], q, axis=1)
    qb = np.quantile(b[rng.integers(0, b.size, size=(resamples, b.size))], q, axis=1)
    change = (qb / qa - 1.0) * 100.0
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(change, [tail, 100.0 - tail])
    return (float(np.quantile(b, q)) / base_q - 1.0) * 100.0, float(low), float(high)
