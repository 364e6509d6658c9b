"""The decision procedure: is the current run slower than its comparable history?

Assumptions, in plain words:

* A run is represented by one number per metric, its *centre*: the median of the per-repeat
  medians of its step samples. Each repeat is a separate worker process, so the centre
  counts processes, not the thousands of autocorrelated steps inside them.
* The noise of a run centre has two parts: process-level (seen as the spread of the repeat
  medians inside a run) and job-level (seen only as the spread of centres between runs). The
  larger of the two estimates is used, with the degrees of freedom of the one used, so a
  history of three runs cannot pretend to be precise.
* Between runs, the baseline window's centres are treated as exchangeable draws from the
  distribution the current run would come from if nothing changed. The current centre is
  tested against a prediction interval built on a robust centre (median) and the standard
  deviation of the runs within 5 MADs of it (trimming only from 10 runs on: the MAD of fewer
  is too unstable), with Student-t quantiles, so a single extreme baseline run moves neither
  much; and the run must lie beyond all but one in ten of the baseline runs (a rank check
  that assumes no shape of the noise).
* Across every (benchmark, metric) of one gate, p-values are adjusted with
  Benjamini–Hochberg, so a gate over many metrics does not flag a random few of them.
* A regression must be significant after adjustment *and* at least the metric's minimum
  effect. A change past the minimum effect without enough evidence is ``inconclusive``, and
  so is a small change when the noise is so large that only changes of several times the
  minimum effect could have been seen: perfgate says it cannot tell rather than guess. Noise
  the current run shows beyond what runs usually show inside themselves (the machine is
  noisy now) widens the prediction interval.
* The smallest detectable change a verdict reports is the gate's: with m noisy metrics
  judged together, a lone change must reach alpha / m before adjustment (Benjamini–Hochberg's
  first step), so a change past the reported size is significant in that gate.
* Deterministic metrics (operator counts) carry no noise: any change beyond their tolerance
  is reported as such, without a test.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_NAMES = {
    "ALPHA": "perfgate.stats.decide",
    "MIN_BASELINE_RUNS": "perfgate.stats.compare",
    "Candidate": "perfgate.stats.compare",
    "benjamini_hochberg": "perfgate.stats.fdr",
    "compare_candidates": "perfgate.stats.compare",
    "summarize": "perfgate.stats.summary",
}

__all__ = [
    "ALPHA",
    "MIN_BASELINE_RUNS",
    "Candidate",
    "benjamini_hochberg",
    "compare_candidates",
    "summarize",
]

if TYPE_CHECKING:
    from perfgate.stats.compare import MIN_BASELINE_RUNS, Candidate, compare_candidates
    from perfgate.stats.decide import ALPHA
    from perfgate.stats.fdr import benjamini_hochberg
    from perfgate.stats.summary import summarize


def __getattr__(name: str) -> Any:
    # Imported on first use: the renderers need only stats.decide, not scipy.
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'perfgate.stats' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
