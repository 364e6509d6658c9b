"""The decision procedure: is the current run slower than its comparable history?

Assumptions, in plain words:

* A run is represented by one number per metric, its *centre*: the median of the per-repeat
  medians of its step samples. Each repeat is a separate worker process, so the centre
  counts processes, not the thousands of autocorrelated steps inside them.
* Changes are ratios: every value is taken as its logarithm, so a change is "x% slower",
  its interval never crosses -100%, and a time and its throughput are one effect with one
  verdict. (A metric that can be 0 or negative is taken relative to its baseline median.)
* The noise of a run centre has a job part (between runs: the machine, the neighbours of
  that CI job) and a process part (between the repeats of one run). Both are estimated
  together: when the job part cannot be told from zero (an F test, p > 0.25), the repeats'
  degrees of freedom count too, so three runs of three repeats are not two degrees of
  freedom. The job part the gate's other benchmarks typically show (the median of their
  variances: a few noisy benchmarks do not blind the rest) stays in, counted with the
  degrees of freedom the gate knows it with, not the repeats'. A run of one repeat shows
  no process part; its spread between runs is all there is. A current run whose repeats
  disagree far beyond usual (more than usual process noise does once in a thousand runs)
  is tested wider, unless one slow repeat is all of it (a neighbour slowed that process;
  the median of the repeats stands on the others).
* The metrics of one gate share a runner: each metric's noise is shrunk toward what the
  others show (an empirical prior, weighted by how much the metrics agree), so a new
  benchmark with three runs of history is not blind when its neighbours have thirty.
* Heavy tails are recognised, not assumed away: the gate's standardised baseline residuals
  are fitted with a Student t, and heavy tails widen that gate's tests and intervals. A few
  hundred residuals cannot tell a t4 from a t6 that far out where the gate decides, so of
  the t's they do not rule out at the gate's own level (alpha over its tests), the
  heaviest is taken.
* Spikes and runner pools are not trimmed out of the decision: from 10 runs on, runs beyond
  5 robust SDs leave the noise estimate, but a current run that looks like them (a slower
  pool, the same kind of spike) is ``inconclusive``, naming them. A run that is such an
  outlier in most of a gate's benchmarks (the whole job ran slow) is taken as one in all of
  them, and explains only a current run that moved the whole job too; an outlier whose
  repeats disagreed (a neighbour in some of its processes) explains only a current run
  whose repeats disagree. When the last baseline runs already moved the way the current run
  did, main moved, not the change under test; not when they went far beyond it while the
  rest of the job stayed put (a spike). A change held back so is no discovery: it does not
  lower the Benjamini-Hochberg bar for the gate's other metrics. A change the whole job made
  at once (three or more benchmarks of the metric, their median change beyond two SDs) is
  still called, and its reason says so: a change that slows everything and a slower runner
  the window never saw look the same, and only a rerun tells them apart.
* The test is a prediction-interval t test of the current centre against the window's
  median; across every (benchmark, metric) of one gate, p-values are adjusted with
  Benjamini–Hochberg at alpha 0.01, and alpha is stated in every reason and in the JSON.
* A regression must be significant after adjustment *and* at least the metric's minimum
  effect. ``unchanged`` is an equivalence claim: the change's one-sided (1 - alpha) bound on
  its worse side lies inside the minimum effect. Anything else is ``inconclusive``, with
  the reason.
* The smallest detectable change a verdict reports (MDE) is the change caught with 80%
  power in that gate: significant at alpha / m with m noisy metrics (Benjamini–Hochberg's
  first step) and measured at least the minimum effect.
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
