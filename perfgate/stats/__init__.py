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
* The benchmarks of one gate share a runner, and each CI job a *job factor*: a slower
  runner, a turbo state, a neighbour that slows every benchmark of that job. Runs of the
  gate's benchmarks at the same place counted from the newest belong to one job. Each
  benchmark's job factor is the median of the *other* benchmarks' deviations from their
  own medians in that job (three others at least: the median of two is their mean, and
  one benchmark's change would move it), and it is taken out of the benchmark's runs and
  of the current run when that leaves the gate's series less spread than they were. A PR
  (or a commit on main) may have changed several benchmarks, so in each job only the
  benchmarks that agree on one level lend it: sorted, cut where two neighbours are more
  than the outlier bound (5 robust SDs of how one job's benchmarks disagree) apart, the
  largest group, the unmoved one on a tie; a benchmark farther out changed and lends
  nothing. What is left is the benchmark's own noise. The job factor is
  judged apart: a current job far beyond what the window's jobs did (the same model as one
  series, at the gate's strictest bar, alpha over its tests, and no rarer than the window's
  jobs as far out: a runner's pools and turbo states recur) moved the whole job, and
  every benchmark's change is called with the job's part in it, its reason saying the
  whole job moved. A runner that moved and a change to every benchmark read the same, so
  an ``unchanged`` must hold under both readings: net of the job's move and with it (also
  where the job's own test did not call the move).
* Each series' model over its window: from 10 runs on, a run beyond 5 robust SDs of the
  window's median is not noise. Two or more in a row are an excursion of the level (a
  regression merged and reverted, a slower runner for a while): over, it leaves the level
  and the spread and guards nothing. At the window's end they are where main moved before
  the fork, unless the current run stayed at the level before them (a spike): the current
  run is then judged against those last runs. Main that moved by less shows as a step: the
  last runs (fewer than half the window) stand apart from the others on the current run's
  side, a one-sided t test at alpha (a preliminary test: read in noise, it only judges the
  current run against fewer runs); the current run, nearer them, is judged against them,
  and ``unchanged`` must hold against the level before them too. A lone one is a tail
  event. A drift (a
  least-squares slope over the runs that are noise, kept when its t test has p < 0.25, the
  usual level of a preliminary test) predicts the level at the current run. When the last
  5 runs spread more than the rest, the runner became noisier and the current run is judged
  with their spread. One F test at alpha on one scale ratio asks it of two measures at
  once: the last 5 runs' deviations against the earlier runs', and the repeats of those
  runs and of the current one against the earlier runs' repeats (their scale taken
  robustly, the median of the runs' repeat variances). One process a neighbour disturbed,
  which its run's median shrugs off, is not the runner: a last run whose repeats spread far
  beyond what the last runs typically show (once in 1 / ``NOISY_NOW_P`` runs) counts
  without its worst repeat when the rest agree without it; a runner that became noisier
  spreads every last run alike. A runner that became noisier shows in both measures; five
  runs alone leave a 3x noisier one unseen one time in five, and with their repeats the
  ratio is known with 17 degrees of freedom rather than 5. The tails' evidence is then each
  run's deviation in its own period's SD: a spread that grew is not a heavy tail. A runner
  2x noisier in its last 5 runs still slips past one series' test in most gates, so the
  gate's series also ask it together: the median of their F tests' p-values (the median
  of m uniforms is at most x when half of them are, a binomial tail, so one benchmark that
  became noisier on its own moves it by half a rank) at alpha; then every current run that
  its own test did not catch is judged with the median of the series' scale ratios (each
  over its F's median, 1 on a quiet runner).
* The metrics of one gate share a runner: each metric's noise is shrunk toward what the
  others show (an empirical prior, weighted by how much the metrics agree, and lending no
  more degrees of freedom than it was estimated from), so a new benchmark with three runs
  of history is not blind when its neighbours have thirty. One or two runs show next to
  nothing of a benchmark's own spread: net of the job factor, such a benchmark is judged
  with the spread of the gate's benchmarks pooled (with their degrees of freedom), and only
  a change that is called stands; anything else is ``no_baseline``, saying what a change
  would have to be to be called now. One run of each benchmark says nothing of the noise.
* Tails: a run's deviation from its series' model comes from a body or, at a rate, from
  far out. The body is the normal (prior 1/2) or a Student t of 2.5-50 degrees of
  freedom, weighed by how well each fits the shape of the series' residuals within 3 SDs,
  each of the gate's other series lending its median evidence (a runner
  whose benchmarks all have t tails is seen in each). The far runs are those beyond 3 SDs
  in the gate's other series, less the one with the most of them (one benchmark's
  outlier, however far, widens no other benchmark's test; its own are the rank guard's);
  their share is the rate and their sizes a power law from 3 SDs on (a Pareto, its index
  by Hill's estimator: the tail a t has, heavier than a normal's). The test is widened
  until a current run is as rare as the gate's bar (alpha over its tests) says under that
  model: t3 run noise widens it about 2x (a t3's quantile there is 2.27x the normal's), a
  Gaussian gate not at all, neighbours that slow 2% of processes by 5-30% enough that a
  current run so slowed is rarely called (with one repeat a run, 3.0% of A/A gates still
  fail on one whose window had seen few such runs: `bench/data/shapes_after.md`; three
  repeats' median shrugs the slowed process off). The job factor's own 30-odd values are
  fitted with one t, the heaviest a likelihood-ratio test does not rule out at the gate's
  bar.
* A metric that never varied in its window is judged as a deterministic one and is not a
  test of the false-discovery family; a throughput echoes the step time it is the
  reciprocal of and is shown, not tested again.
* The test is a prediction-interval t test of the current centre against the window's
  median; across every (benchmark, metric) of one gate, p-values are adjusted with
  Benjamini–Hochberg at alpha 0.01, and alpha is stated in every reason and in the JSON.
  The changes that point worse (the gate fails on them) are one family, those that point
  better another, each of all m tests at alpha / 2 one-sided: a PR's real speedups do not
  lower the bar a slowdown elsewhere is called at, as one pooled family would (with R of m
  called, the next at (R + 1) alpha / m).
* Intervals are false-coverage adjusted (Benjamini-Yekutieli): with R of the gate's m tests
  called on a side, each on that side is at level 1 - max(R, 1) alpha / m, so a change is
  called exactly when its interval leaves 0, and the interval shown is the one the verdict
  was decided at.
* A regression must be significant after adjustment *and* at least the metric's minimum
  effect. ``unchanged`` is an equivalence claim: the change's one-sided (1 - alpha) bound on
  its worse side lies inside the minimum effect. Anything else is ``inconclusive``, with
  the reason.
* The smallest detectable change a verdict reports (MDE) is the change caught with 80%
  power in that gate: significant at alpha / m with m noisy metrics (Benjamini–Hochberg's
  first step) and measured at least the minimum effect.
* Deterministic metrics (operator counts) carry no noise: any change beyond their tolerance
  is reported as such, without a test. An operator count explains a verdict and does not
  decide the gate unless the suite names it (``[metrics.op_calls_per_step]``,
  :attr:`perfgate.models.MetricPolicy.decides`); the operators that changed are named
  beside the verdict (:func:`perfgate.advisor.work.work_change`).

A worked example (``tests/test_judge.py``'s gate): ten benchmarks, thirty runs of three
repeats; job noise 1%, a benchmark's own 1%, a process 1.6% (run CoV 1.8%). One benchmark
had two runs 10% slow that were reverted; one run of another was 30% slow; the current
run of the first is 10% slower. The two reverted runs are an excursion (7 robust SDs, in a
row): they leave the level and the spread. The 30% run is a lone outlier of the other
benchmark: its tail, no one else's. With the job factor out, the first benchmark's own
runs spread about 1.5%, and the change's SD (the current run's noise and the level's) is
about 1.6%. ``_gate(6, change=0.10, blip=True, outlier_elsewhere=True)`` measures +12.1%
(the drawn noise adds to the 10%), raw p = 7e-11, far below the bar 0.01 / 10; its
interval, at 1 - 0.01 / 10, is [+6.4%, +18.0%]: a regression. The stated MDE is 6.7%:
about 1.6% x (3.9 + 0.85), the bar's t quantile plus 80% power's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfgate.lazy import lazy_exports

_NAMES = {
    "ALPHA": "perfgate.stats.decide",
    "MIN_BASELINE_RUNS": "perfgate.stats.decide",
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
    from perfgate.stats.compare import Candidate, compare_candidates
    from perfgate.stats.decide import ALPHA, MIN_BASELINE_RUNS
    from perfgate.stats.fdr import benjamini_hochberg
    from perfgate.stats.summary import summarize


# Imported on first use: the renderers need only stats.decide, not scipy.
__getattr__ = lazy_exports(__name__, _NAMES, globals())
