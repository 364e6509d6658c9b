"""Current run against its baseline window: the noise model, the test, the verdicts.

See the package docstring for the assumptions in plain words; the pieces, in order:

1. Scale: ratios. Every value is taken as its logarithm (a metric that can be 0 or negative
   is taken as a fraction of its baseline median instead), so a change is a ratio, its
   interval never crosses -100%, and a time and its throughput (the reciprocal) give the same
   test and the same verdict.
2. Noise components: a run's summary (the median of its repeat centres) varies by a job part
   (between runs) and a process part (between the repeats of one run). The process part is
   pooled from the repeats of every run, the current one included; the between-run variance
   from the baseline runs. An F test asks whether the job part is distinguishable from zero;
   when it is not (p above ``POOL_P``), the two estimates are pooled and the repeats' degrees
   of freedom count, but the job part the gate's other benchmarks typically show (the
   median of their variances, not the prior's scale of 3., which sits below it when they
   disagree) stays in: one series whose few runs happen to agree has not left the runner's
   jobs behind. That part is counted with the degrees of freedom the gate knows it with
   (Welch-Satterthwaite), not the repeats', and never with fewer than the series would have
   had unpooled. A run of one repeat shows no process part: its between-run variance is
   all there is. A current run whose repeats disagree far beyond usual (beyond what the
   pooled process part gives once in ``1 / NOISY_NOW_P`` runs, or three times the baseline
   runs' 90th-percentile spread, whichever is smaller) is tested wider (the machine is
   noisy now), unless leaving out its worst repeat leaves repeats that agree as usual: a
   neighbour slows a process, never speeds it up, and the median of the repeats stands on
   the others.
3. Empirical prior: across the noisy metrics of one gate (same runner), each variance is
   shrunk toward what the others show, weighted by its own degrees of freedom against the
   prior's (empirical Bayes, as for moderated t statistics). The prior's weight is estimated
   from how much the metrics' variances disagree beyond sampling noise: similar metrics lend
   each other many degrees of freedom, dissimilar ones almost none.
4. The job factor (:func:`_job_factor`): per metric, each series' runs less the median of
   the other series' deviations in the same job, when that leaves the gate's series less
   spread (:func:`_job_explains`); the job factor itself is judged as a series of its own
   (:func:`_job_evidence`) at the gate's strictest bar, and when the whole job moved every
   benchmark's change is called with the job's part in it (:func:`_with_job`).
5. Each series' level (:func:`_fit_level`): excursions (two or more runs in a row beyond
   ``OUTLIER_MADS`` robust SDs) leave the level and the spread, or are the level when the
   window ends in them and the current run stayed there (main moved before the fork), as
   are the last runs when they stand apart from the rest as a step (:func:`_moved_tail`); a
   drift is fitted when its slope passes a preliminary test at ``POOL_P``; a window whose
   last ``RECENT_RUNS`` runs, with their repeats and the current run's, spread more (one F
   test at ``ALPHA``) is judged with that spread (:func:`_noisier_lately`); the gate's
   series ask it together too (:func:`_runner_noisier`: the median of their p-values).
6. Tails (:func:`_series_tails`): a run's deviation is drawn from a body or, at a rate,
   from far out. The body is the normal or a Student t of ``_T_GRID``, weighed by how well
   each fits the series' residuals within ``FAR_SDS`` (the gate's other series lending
   their median evidence); the far runs are the residuals beyond it in the gate's other
   series less the one with the most, their sizes a power law (Hill's estimator). The test
   widens until a current run is as rare as the gate's level under that model. A series'
   own lone outliers are the rank guard's (:func:`_rank_p`).
7. The test and the verdict (:func:`compare_candidates`): a t test of the change against the
   level, Benjamini-Hochberg over the gate's noisy metrics (a family for the changes that
   point worse, one for those that point better), false-coverage adjusted intervals at the
   level the verdict is decided at.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import special

from perfgate.metrics import is_time, never_negative
from perfgate.models import Comparison, Direction, MetricPolicy, RunPoint, Verdict
from perfgate.stats.decide import (
    ALPHA,
    MIN_BASELINE_RUNS,
    POWER,
    Outcome,
    Words,
    classify_change,
    decided,
    deterministic_verdict,
    fixed,
    numerics_verdict,
    relative_change_pct,
    size_text,
    worse_sign,
)
from perfgate.stats.fdr import by_direction
from perfgate.stats.summary import mad, median, nanmedian, quantile

MAD_TO_SD = 1.4826
SCALE_FLOOR = 0.002
"""Smallest noise assumed, as a fraction of the centre: no timer is better than 0.2%."""
OUTLIER_MADS = 5.0
"""A run this many robust SDs from its window's median is not noise: a lone one is a tail
event (evidence on the tails, not on the spread), two or more in a row an excursion of the
level (over, or where main moved before the fork)."""
TRIM_MIN_RUNS = 10
"""Runs a window needs before outliers, a drift and the tails are estimated from it."""
POOL_P = 0.25
"""The level of a preliminary test (the usual one before pooling): the job component counts
as zero (process and job estimates pooled) when its F test has p above it, and a drift is
fitted when its slope's t test has p below it."""
JOB_MIN = 3
"""Other benchmarks of one metric a series' job factor is estimated from: their median
stands when one of them changed (the median of two is their mean: one benchmark 50%
slower would make the other's job factor 25% slower, and it an improvement)."""
RECENT_RUNS = 5
"""The last runs of a window checked for a runner that became noisier."""
PRIOR_MAX_DOF = 50.0
NOISY_NOW_FACTOR = 3.0
NOISY_NOW_MIN_COV = 0.02
NOISY_NOW_P = 0.001
"""A current run's repeats that spread more than the pooled process noise does once in
this many runs (chi-square) say the machine is noisy now; a last run's that spread so
beyond the last runs' typical spread had a neighbour (:func:`_noisier_lately`)."""
MAX_HEAVY_DOF = 20.0
"""The job factor's tails (:func:`fit_tail`) are called heavy only when a t with at most
this many degrees of freedom fits clearly better than the normal."""
_T_GRID = (2.5, 3.0, 4.0, 6.0, 10.0, 20.0, 50.0)
"""The Student t's a body may be: from about as heavy as a variance allows to near normal."""
_NU = np.asarray(_T_GRID)
FAR_SDS = 3.0
"""Where a series' far runs begin, in its SDs (a normal body puts 0.27% of runs beyond):
what lies beyond (a neighbour, a stall, a t's tail) is taken as the gate saw it, a share
and a power law of sizes, not extrapolated from the body."""

_LOG_MAX = 700.0
"""The largest log ratio ``math.expm1`` takes (its range ends near 709.8)."""

_MEDIAN_VAR = (1.0, 0.5, 0.4488, 0.298, 0.2869, 0.2139, 0.2111, 0.1684, 0.1663, 0.1381)
"""Variance of the median of n standard normal values, n = 1..10 (simulated)."""


def median_variance(n: int) -> float:
    """Variance of the median of ``n`` unit-variance normal values (pi / 2n for large n)."""
    n = max(int(n), 1)
    return _MEDIAN_VAR[n - 1] if n <= len(_MEDIAN_VAR) else math.pi / (2.0 * n)


@dataclass(frozen=True)
class Candidate:
    """One (benchmark, metric) to judge: the current run's point and its comparable window."""

    current: RunPoint
    baseline: tuple[RunPoint, ...]
    policy: MetricPolicy
    alpha: float = ALPHA
    """Significance level for this candidate: less than ALPHA at a look of a sequential
    confirmation (see :mod:`perfgate.stats.sequential`)."""


_Repeats = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Each run's repeat variance and degrees of freedom; the same without its worst repeat."""


@dataclass(frozen=True)
class _Series:
    """One candidate on the analysis scale (log, or fraction of the baseline median), with
    its process part: what the repeats of its runs say."""

    log: bool
    ref: float
    z: np.ndarray
    zc: float
    ss_within: float
    dof_within: int
    base_factor: float
    cur_factor: float
    cur_within: float | None
    one_disturbed: bool
    """The current run (3 repeats or more) agrees with itself once its worst repeat is left
    out: the rest spread no more than a run's repeats do 99 times in 100. A neighbour makes
    a process slower, never faster, and the median of the repeats shrugs off one such."""
    rest_factor: float
    """Variance factor of the current median when one of its repeats was disturbed."""
    usual_within: float
    cur_bound: float
    """The current run's repeat variance that usual process noise exceeds once in
    ``1 / NOISY_NOW_P`` runs (chi-square, from the pooled process part); inf when unknown."""
    se_var: float
    disturbed: np.ndarray
    """Baseline runs whose own repeats disagreed far beyond usual (a neighbour in some of
    their processes): their deviation is the disturbance's, not evidence on the tails."""
    repeats: _Repeats | None = None
    """Each run's repeat variance and its degrees of freedom (0: one repeat), the baseline
    runs' then the current run's: a runner that became noisier shows in its processes too;
    then the same without the run's worst repeat where the rest agree as usual (a neighbour
    disturbed one process), else the same again."""


@dataclass(frozen=True)
class _Level:
    """A series' model over its window (item 5 of the module docstring): the level it
    predicts for the current run and the spread of runs around it."""

    level: float
    factor: float
    """The variance of ``level`` in units of one run's variance (1/n for a mean of n runs;
    more for a trend's end or a level from the last few runs)."""
    var: float
    """Between-run variance around the model, from the runs counted as noise."""
    dof: int
    resid: np.ndarray
    """The runs' deviations from the model that are evidence on the tails, each in units of
    its run's SD (the earlier and the last runs' own when the runner became noisier): the
    runs counted as noise and the lone outliers (not the runs of an excursion that ended)."""
    words: str
    """What the model saw that a reader should know (main moved, a drift, noisier lately)."""
    lone: np.ndarray
    """The lone outliers' deviations from the level (the rank guard, :func:`_rank_p`)."""
    robust: float
    """The window's robust SD (MAD), the outlier bound's unit."""
    late: _Noisier | None = None
    """How the last runs spread against the earlier ones, significant or not; None where
    the window is too short to say (:func:`_runner_noisier` pools them)."""
    noisier: bool = False
    """Whether the series became noisier (judged with its last runs' spread)."""
    raw: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """``resid`` before its units: the deviations from the model."""
    at: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    """The run of each of ``raw``."""
    before: tuple[float, float] | None = None
    """Where main's move was fitted from a step (:func:`_moved_tail`), not seen beyond the
    outlier bound: the level and its factor without it, the other reading."""


@dataclass(frozen=True)
class _Prior:
    dof: float
    var: float
    typical: float = 0.0
    """The variances' typical value: their median, each scaled by the median of its
    chi-square. What the runner shows, unmoved by a few noisy metrics; ``var``, the
    prior's scale, sits below it when the variances disagree."""
    typical_dof: float = 0.0
    """The degrees of freedom ``typical`` is known with: half the variances' together (a
    median is about half as efficient as a mean)."""
    pooled: float = 0.0
    """The variances pooled (weighted by their degrees of freedom)."""
    pooled_dof: float = 0.0


_NO_PRIOR = _Prior(0.0, 0.0)


@dataclass(frozen=True)
class Evidence:
    """What the data say about one candidate (on the ratio scale)."""

    centre: float
    change: float
    """log ratio current / baseline (or the change as a fraction, for a metric that is not
    positive)."""
    log: bool
    sd: float
    """SD of ``change`` under no change."""
    dof: float
    p_value: float
    noisy_now: str
    job_move: str
    """Words for a current run that moved the whole job (every benchmark of the gate's
    metric together), or ''."""
    notes: str = ""
    """What the window's model saw (main moved before the fork, a drift, noisier lately)."""
    other: tuple[float, float, float] | None = None
    """The change read the other way, its SD and degrees of freedom, where the job factor
    was taken out of this series: net of the job's move when ``change`` holds it (the whole
    job moved), with the job's part in it when not. A runner that moved and a change to
    every benchmark read the same, so a claim of no change must hold under both readings."""
    before: tuple[float, float, float] | None = None
    """The change against the level before main's move, its SD and degrees of freedom,
    where the move was fitted from a step (:attr:`_Level.before`): a claim of no change
    must hold against it too."""

    def pct(self, x: float) -> float:
        """``x`` (log ratio, or fraction) in %; an end beyond any ratio (an interval of a
        few runs far out in its t's tail) is unbounded: inf."""
        if not self.log:
            return 100.0 * x
        return ratio_pct(x)

    @property
    def change_pct(self) -> float:
        return self.pct(self.change)

    def quantile(self, q: float) -> float:
        return float(special.stdtrit(self.dof, q))

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        half = self.quantile(0.5 + level / 2.0) * self.sd
        return self.pct(self.change - half), self.pct(self.change + half)

    def detectable(self, tests: int, alpha: float, min_effect_pct: float) -> float:
        """The change (in %) caught with probability POWER in a gate of ``tests`` noisy
        metrics: significant on its own (Benjamini-Hochberg's first step: alpha / tests) and
        measured at least the minimum effect."""
        level = alpha / max(tests, 1)
        crit = self.quantile(1.0 - level / 2.0) * self.sd
        floor = math.log1p(min_effect_pct / 100.0) if self.log else min_effect_pct / 100.0
        return self.pct(max(crit, floor) + self.quantile(POWER) * self.sd)

    def worse_bound(self, direction_sign: float, alpha: float) -> float:
        """The one-sided (1 - alpha) bound of the change on its worse side, in %."""
        edge = self.change + direction_sign * self.quantile(1.0 - alpha) * self.sd
        return self.pct(edge)


def _pooled_within(each: Sequence[tuple[float, int] | None]) -> tuple[float, int]:
    """Process variance of one repeat (times its degrees of freedom) and those degrees of
    freedom, pooled from each run's (variance of its scaled repeats, degrees of freedom),
    None for a run of one repeat.

    Robust: the median of the runs' own variances, scaled by the median of a chi-square, so
    a process disturbed by a neighbour (which the median of a run's repeats shrugs off)
    does not inflate it. Counted at half the degrees of freedom of the plain pooled variance
    (a median of variances is about half as efficient).
    """
    variances = [v for v, _ in filter(None, each)]
    dofs = [d for _, d in filter(None, each)]
    if not variances:
        return 0.0, 0
    d = int(median(dofs))
    var = median(variances) * d / float(special.chdtri(d, 0.5))
    dof = max(sum(dofs) // 2, 1)
    return var * dof, dof


def _runs_within(var: np.ndarray, dof: np.ndarray) -> tuple[float, int]:
    """:func:`_pooled_within` from arrays of runs' repeat variances and degrees of freedom
    (0: one repeat)."""
    return _pooled_within(
        [(float(v), int(n)) if n else None for v, n in zip(var, dof, strict=True)]
    )


def _scaled_repeats(points: Sequence[RunPoint], log: bool, ref: float) -> list[list[float]]:
    """Each point's repeat centres on the analysis scale, scaled in one vectorised call
    (element by element the same numbers as one call per point)."""
    flat = np.asarray([x for p in points for x in p.repeat_centres], dtype=float)
    values: list[float] = _scaled(flat, log, ref).tolist()
    out: list[list[float]] = []
    at = 0
    for p in points:
        n = len(p.repeat_centres)
        out.append(values[at : at + n])
        at += n
    return out


def _scaled(x: np.ndarray, log: bool, ref: float) -> np.ndarray:
    return np.log(x) if log else x / ref


_PLAIN_VAR_MAX = 7
"""Up to this many values numpy's variance adds them one by one (its pairwise summation
starts at 8), so :func:`_var` computes the same number in plain Python."""


def _var(values: Sequence[float]) -> float:
    """``np.var(values, ddof=1)``, bit for bit, without numpy's per-call cost on the few
    repeats of one run (the same operations in the same order: the mean, the squared
    deviations added one by one, divided by n - 1); numpy itself for longer inputs."""
    n = len(values)
    if n > _PLAIN_VAR_MAX:
        return float(np.var(np.asarray(values, dtype=float), ddof=1))
    total = values[0]
    for x in values[1:]:
        total += x
    mean = total / n
    d = values[0] - mean
    ss = d * d
    for x in values[1:]:
        d = x - mean
        ss += d * d
    return ss / (n - 1)


def _repeat_var(repeats: Sequence[float]) -> tuple[float, int] | None:
    """The variance of one run's scaled repeats and its degrees of freedom; None for one."""
    return (_var(repeats), len(repeats) - 1) if len(repeats) >= 2 else None


def _series(candidate: Candidate) -> _Series:
    current, baseline = candidate.current, candidate.baseline
    raw = np.asarray([p.centre for p in baseline], dtype=float)
    reps = [x for p in (*baseline, current) for x in p.repeat_centres]
    log = bool(np.all(raw > 0) and current.centre > 0 and all(x > 0 for x in reps))
    mid = median(raw)
    ref = abs(mid) if mid != 0 else max(float(np.max(np.abs(raw))), 1.0)
    z = _scaled(raw, log, ref)
    zc = float(_scaled(np.asarray([current.centre]), log, ref)[0])
    # each run's own repeat variance, once: pooled for the process part, and compared with
    # the usual one for the current run
    scaled = _scaled_repeats((*baseline, current), log, ref)
    repeat_vars = [_repeat_var(r) for r in scaled]
    ss_w, dof_w = _pooled_within(repeat_vars)
    base_n = [max(len(p.repeat_centres), 1) for p in baseline]
    base_factor = float(np.mean([median_variance(n) for n in base_n]))
    usual = [rv[0] for rv in repeat_vars[:-1] if rv is not None]
    typical = median(usual) if usual else 0.0
    bound = max(NOISY_NOW_FACTOR**2 * typical, NOISY_NOW_MIN_COV**2)
    disturbed = np.asarray([rv is not None and rv[0] > bound for rv in repeat_vars[:-1]])
    cur_n = max(len(current.repeat_centres), 1)
    cur_within = None if repeat_vars[-1] is None else repeat_vars[-1][0]
    sign = worse_sign(candidate.policy.direction)  # the scale keeps the order (ref > 0)
    # each run's repeat variance for the recency test, and without its worst repeat where
    # the rest agree as usual (the test decides which a run's spread is, :func:`_noisier_lately`)
    rests = [_agreeing_rest(r, sign, ss_w / dof_w if dof_w else 0.0) for r in scaled]
    one_disturbed = rests[-1] is not None
    each = [rv or (0.0, 0) for rv in repeat_vars]
    rest_each = [rest or rv for rest, rv in zip(rests, each, strict=True)]
    ses = [p.centre_se for p in (*baseline, current) if p.centre_se is not None]
    scale = 1.0 / abs(current.centre) if log and current.centre else 1.0 / ref
    se_var = float(np.mean(np.square(ses))) * scale**2 if ses else 0.0
    return _Series(
        log=log,
        ref=mid,
        z=z,
        zc=zc,
        ss_within=ss_w,
        dof_within=dof_w,
        base_factor=base_factor,
        cur_factor=median_variance(cur_n),
        cur_within=cur_within,
        one_disturbed=one_disturbed,
        rest_factor=median_variance(cur_n - 2),
        usual_within=quantile(usual, 0.9) if usual else 0.0,
        cur_bound=(
            float(special.chdtri(cur_n - 1, NOISY_NOW_P)) / (cur_n - 1) * ss_w / dof_w
            if cur_n >= 2 and dof_w > 0
            else math.inf
        ),
        se_var=se_var,
        disturbed=disturbed,
        repeats=(
            np.asarray([v for v, _ in each]),
            np.asarray([d for _, d in each]),
            np.asarray([v for v, _ in rest_each]),
            np.asarray([d for _, d in rest_each]),
        ),
    )


def _agreeing_rest(repeats: Sequence[float], sign: float, usual: float) -> tuple[float, int] | None:
    """The variance (and its degrees of freedom) of a run's repeats less its worst one, when
    they agree as usual without it (no more spread than ``usual`` process noise gives 99 times
    in 100): one process had a neighbour, and the run's median stands on the others. None
    under three repeats, without a usual spread, or when the rest disagree too."""
    if len(repeats) < 3 or usual <= 0:
        return None
    rest = sorted(repeats, key=lambda x: sign * x)[:-1]
    d = len(rest) - 1
    var = _var(rest)
    return (var, d) if var <= float(special.chdtri(d, 0.01)) / d * usual else None


def ratio_pct(log_ratio: float) -> float:
    """A log ratio in % (``log(1.1)`` is +10%); one beyond any ratio ``math.expm1`` can
    give (an interval end of a few runs or pairs far out in its t's tail) is unbounded:
    inf, which every report shows as such."""
    return 100.0 * math.expm1(log_ratio) if log_ratio < _LOG_MAX else math.inf


def _excursions(z: np.ndarray, centre: float, robust: float) -> tuple[np.ndarray, np.ndarray]:
    """Runs beyond ``OUTLIER_MADS`` robust SDs ``robust`` of the window's median ``centre`` (from
    ``TRIM_MIN_RUNS`` runs on), with their neighbours on the same side beyond half that
    (the same excursion, measured with noise), and which of them are lone ones. Two or
    more in a row are an excursion of the level (a regression merged and reverted, a
    slower runner for a while): over, it says nothing about the noise; a lone one is a
    tail event."""
    k = z.size
    out = np.zeros(k, dtype=bool)
    if k < TRIM_MIN_RUNS:
        return out, out
    if robust <= 0:
        return out, out
    dev = (z - centre) / robust
    out = np.abs(dev) > OUTLIER_MADS
    near = np.abs(dev) > OUTLIER_MADS / 2.0
    grown = True
    while grown:
        side = np.sign(dev) * out
        left = np.concatenate(([0.0], side[:-1]))
        right = np.concatenate((side[1:], [0.0]))
        more = near & ~out & ((left == np.sign(dev)) | (right == np.sign(dev)))
        grown = bool(more.any())
        out = out | more
    side = np.sign(dev) * out
    before = np.concatenate(([0.0], side[:-1]))
    after = np.concatenate((side[1:], [0.0]))
    lone = out & (before != side) & (after != side)
    return out, lone


def _fit_level(
    z: np.ndarray,
    zc: float,
    *,
    trim: bool = True,
    disturbed: np.ndarray | None = None,
    repeats: _Repeats | None = None,
    moved: int = 0,
    before: tuple[float, float] | None = None,
) -> _Level:
    """The level the window predicts for the current run ``zc`` and the runs' spread
    around it.

    The runs of an excursion are not noise: they leave the spread and the level. When the
    window ends in one (its last runs all beyond the bound on one side), main moved there
    before the fork point unless the current run is nearer the level before it (the
    excursion was a spike); if it moved, the current run is judged against those runs.
    From ``TRIM_MIN_RUNS`` runs on, a drift is fitted (least squares over the runs that
    are noise) and kept when its slope is distinguishable from zero at ``POOL_P``; the
    level is then the drift's value at the current run. A window whose last
    ``RECENT_RUNS`` runs spread more than the earlier ones (lone outliers counted on both
    sides) (an F test at ``ALPHA``) is judged with their spread: the runner became
    noisier. Main moved by less than the bound shows as a step: the last runs stand apart
    from the model of the others, on the current run's side (:func:`_moved_tail`, a
    preliminary test at ``ALPHA``); when the current run is nearer them, the fit is made
    again with them as ``moved``, the last runs main moved in, and the level ``before``
    it. Without ``trim`` (the job factor, whose modes and pools are common, not
    excursions) only where main moved is taken out.
    """
    k = z.size
    robust = MAD_TO_SD * mad(z) if k else 0.0
    centre = median(z) if k else 0.0
    out, lone = _excursions(z, centre, robust)
    if disturbed is not None and disturbed.size == k:
        lone = lone & ~disturbed  # a neighbour's doing, not the runner's tail
    rare = lone.copy()  # the rank guard's: lone outliers, in the noise or not
    if not trim and out.any():
        last = int(np.flatnonzero(~out)[-1]) + 1 if (~out).any() else 0
        out = np.arange(k) >= last
        lone = np.zeros(k, dtype=bool)
        rare &= ~out
    if k >= TRIM_MIN_RUNS and robust > 0:
        # the current run is the last runs' neighbour: where it and they stand beyond half
        # the bound on one side, they are one excursion (main moved, measured with noise)
        half = OUTLIER_MADS / 2.0 * robust
        side = math.copysign(1.0, zc - centre)
        if abs(zc - centre) > half:
            i = k - 1
            while i >= 0 and (z[i] - centre) * side > half:
                out[i], lone[i], rare[i] = True, False, False
                i -= 1
    idx = np.arange(k, dtype=float)
    words = []
    tail = 0
    if out.any() and out[-1]:
        side = np.sign(z[-1] - centre)
        while tail < k and out[k - 1 - tail] and np.sign(z[k - 1 - tail] - centre) == side:
            tail += 1
        noise = z[~out]
        if tail >= k / 2 or abs(zc - float(np.mean(z[k - tail :]))) >= abs(
            zc - float(np.mean(noise))
        ):
            tail = 0  # a spike at the end: the current run stayed at the level before it
            if not trim:
                out = np.zeros(k, dtype=bool)
    if moved:
        out[k - moved :], lone[k - moved :], rare[k - moved :] = True, False, False
        tail = moved
    noise_mask = ~out
    zk, xk = z[noise_mask], idx[noise_mask]
    n = zk.size
    mean = float(np.mean(zk)) if n else float(median(z))
    level, factor, slope, xbar = mean, 1.0 / max(n, 1), 0.0, 0.0
    resid = zk - level
    dof = max(n - 1, 0)
    if n >= TRIM_MIN_RUNS:
        xbar = float(np.mean(xk))
        drift = _drift(zk, xk - xbar, mean)
        if drift is not None:
            slope, sxx, resid = drift
            level = mean + slope * (k - xbar)
            factor = 1.0 / n + (k - xbar) ** 2 / sxx
            dof = n - 2
            words.append(f"a drift of {ratio_pct(slope):+.2f}% a run, taken into account")
    var = float(np.sum(resid * resid)) / dof if dof > 0 else 0.0
    unit = np.full(k, math.sqrt(var))  # each run's SD, the unit of the tails' evidence
    late = recent = None
    if n >= TRIM_MIN_RUNS + RECENT_RUNS and var > 0:
        model = mean + slope * (np.arange(k) - xbar)
        late = _noisier_lately(z - model, noise_mask, lone, dof, repeats)
        recent = late if late is not None and late.p_value < ALPHA and late.typical > 1 else None
        if recent is not None:
            unit[:] = math.sqrt(recent.early)
            unit[recent.first :] = math.sqrt(recent.var)
            var, dof = recent.var, recent.dof
            words.append(
                f"the last {RECENT_RUNS} runs{' and their repeats' if recent.repeats else ''} "
                f"spread {math.sqrt(recent.var / recent.early):.1f}x more than the earlier "
                "ones: judged with their spread"
            )
    if trim and not tail and n >= TRIM_MIN_RUNS and var > 0:
        # each run in its own SD's units: the last runs of a runner that became noisier
        # stand apart by their spread, not by a step
        own = resid / unit[xk.astype(int)]
        step = _moved_tail(own, xk, k, math.copysign(1.0, zc - level))
        if step and abs(zc - float(np.mean(z[k - step :]))) < abs(zc - level):
            return _fit_level(
                z, zc, disturbed=disturbed, repeats=repeats, moved=step, before=(level, factor)
            )
    if tail:
        level = float(np.mean(z[k - tail :]))
        factor = 1.0 / tail
        words.append(
            f"the last {tail} baseline run{'s' if tail > 1 else ''} had moved "
            f"{fixed(ratio_pct(level - float(np.mean(zk))), '+.1f')}% "
            "(main moved before this change): "
            f"judged against {'them' if tail > 1 else 'it'}"
        )
    at = np.concatenate((xk, idx[lone])).astype(int)
    raw = np.concatenate((resid, z[lone] - level))
    evidence = raw / unit[at] if var > 0 else resid[:0]
    return _Level(
        level,
        factor,
        var,
        dof,
        evidence,
        "; ".join(words),
        z[rare] - level,
        robust,
        late,
        recent is not None,
        raw,
        at,
        before,
    )


def _with_runner(fit: _Level, runner: float) -> _Level:
    """``fit`` where the gate's runner became ``runner`` times noisier in the last runs
    (:func:`_runner_noisier`) and this series' own test did not say so: judged as if it
    had, the earlier runs' variance times ``runner`` from the last runs on."""
    late = fit.late
    if runner <= 1 or fit.noisier or late is None or fit.var <= 0:
        return fit
    var = max(late.early * runner, fit.var)
    unit = np.where(fit.at >= late.first, math.sqrt(var), math.sqrt(late.early))
    words = (
        f"the last {RECENT_RUNS} runs of most of the gate's benchmarks spread "
        f"{math.sqrt(runner):.1f}x more than the earlier ones: judged with that spread"
    )
    return replace(
        fit,
        var=var,
        resid=fit.raw / unit,
        words="; ".join(w for w in (fit.words, words) if w),
        noisier=True,
    )


def _moved_tail(resid: np.ndarray, at: np.ndarray, k: int, side: float) -> int:
    """How many of the last runs of a window of ``k`` main moved in, on ``side``, by less
    than the outlier bound: 0 when none. ``resid``: the runs' deviations from the model of
    the window, at places ``at`` (ascending). Each tail shorter than the rest (the last j runs, j
    below k / 2) is tested as two groups (a t test of the tail's mean deviation against
    the others', one-sided), the strongest taken when it passes at ``ALPHA``. A preliminary
    test, like the drift's and the noisier runner's: a step read in noise judges the current
    run against fewer runs (a wider test, some power lost), never a narrower one; and an
    ``unchanged`` must hold against the level before the step too."""
    tails = (k - 1) // 2
    if tails < 1 or resid.size < TRIM_MIN_RUNS:
        return 0
    r, x = resid, at  # in place order: the window's noise runs, oldest first
    n, dof = r.size, r.size - 2
    j = np.arange(1, tails + 1)
    na = n - np.searchsorted(x, k - j)  # the runs of each tail
    nb = n - na
    first = np.concatenate(([0.0], np.cumsum(r[::-1])))  # sums of the last m runs
    second = np.concatenate(([0.0], np.cumsum(r[::-1] ** 2)))
    sa, qa = first[na], second[na]
    sb, qb = first[-1] - sa, second[-1] - qa
    ok = (na > 0) & (nb >= 2)
    na_, nb_ = np.maximum(na, 1), np.maximum(nb, 1)
    s2 = (qa - sa * sa / na_ + qb - sb * sb / nb_) / dof
    ok &= s2 > 0
    t = side * (sa / na_ - sb / nb_) / np.sqrt(np.where(ok, s2, 1.0) * (1.0 / na_ + 1.0 / nb_))
    p = np.where(ok, special.stdtr(dof, -t), 1.0)
    best = int(np.argmin(p))
    return int(j[best]) if p[best] < ALPHA else 0


def _drift(z: np.ndarray, x: np.ndarray, mean: float) -> tuple[float, float, np.ndarray] | None:
    """A least-squares slope of runs ``z`` at centred places ``x``, its sum of squares of
    ``x`` and the residuals, when its t test has p < ``POOL_P`` (a preliminary test's
    usual level); else None."""
    sxx = float(np.sum(x * x))
    b = float(np.sum(x * (z - mean))) / sxx
    r = z - (mean + b * x)
    s2 = float(np.sum(r * r)) / (z.size - 2)
    if s2 > 0 and 2.0 * special.stdtr(z.size - 2, -abs(b) / math.sqrt(s2 / sxx)) < POOL_P:
        return b, sxx, r
    return None


@dataclass(frozen=True)
class _Noisier:
    """How much more the last runs spread than the earlier ones (:func:`_noisier_lately`)."""

    var: float
    """The runs' variance from the last runs on: the earlier runs' times the scale ratio."""
    early: float
    """The earlier runs' variance."""
    dof: int
    """The degrees of freedom the ratio was measured with."""
    first: int
    """The index of the first of the last runs."""
    repeats: bool
    """Whether the runs' repeats counted."""
    p_value: float
    """The F test's (upper tail): the series became noisier when it is under ``ALPHA``."""
    typical: float
    """The scale ratio over what it is on a quiet runner (its F's median), for the gate's
    runner-wide test (:func:`_runner_noisier`)."""


def _noisier_lately(
    dev: np.ndarray,
    noise: np.ndarray,
    lone: np.ndarray,
    dof: int,
    repeats: _Repeats | None,
) -> _Noisier | None:
    """Whether the runner became noisier: the last ``RECENT_RUNS`` runs' deviations from the
    model and, where runs have repeats, the repeats of those runs and of the current one,
    each against the earlier runs' (one F test on the scale ratio both measure; the series
    became noisier when it is significant at ``ALPHA``); None without a spread. ``dev``:
    the runs' deviations from the model; the lone outliers count on both sides: a runner
    that became noisier shows first in tail events near the end, and a runner whose tail
    events happen anywhere shows them earlier too."""
    first = dev.size - RECENT_RUNS  # the last runs by place: an excursion among them (a
    # noisier runner makes them) leaves its runs out, not older, quieter ones in
    seen = noise | lone
    is_late = np.arange(dev.size) >= first
    late, early = dev[seen & is_late], dev[seen & ~is_late]
    early_dof = max(dof - int(np.sum(noise & is_late)) + int(np.sum(lone & ~is_late)), 1)
    v_early = float(np.sum(early * early)) / early_dof
    if v_early <= 0:
        return None
    chi, late_dof, ref_dof = float(np.sum(late * late)) / v_early, late.size, early_dof
    with_repeats = False
    if repeats is not None and repeats[0].size == dev.size + 1:
        var, d, rest_var, rest_d = repeats
        early_d, late_d = int(np.sum(d[:first])), int(np.sum(d[first:]))
        if early_d > 0 and late_d > 0:
            # the earlier repeats' scale robustly (a disturbed process is not the runner)
            w_ss, w_dof = _runs_within(var[:first], d[:first])
            # a last run whose repeats spread far beyond what the last runs typically show
            # (once in 1 / NOISY_NOW_P runs) had a neighbour in one process, when the rest
            # agree without it: it counts without that repeat. A runner that became noisier
            # spreads every last run's repeats alike and keeps them all
            l_ss, l_dof = _runs_within(var[first:], d[first:])
            lv, ld = var[first:], d[first:]
            dof1 = np.maximum(ld, 1)
            far = lv > special.chdtri(dof1, NOISY_NOW_P) / dof1 * (l_ss / l_dof)
            lv, ld = np.where(far, rest_var[first:], lv), np.where(far, rest_d[first:], ld)
            if w_ss > 0:
                chi += float(np.sum(lv * ld)) / (w_ss / w_dof)
                late_dof += int(np.sum(ld))
                ref_dof = min(ref_dof, w_dof)
                with_repeats = True
    if not late_dof:
        return None
    ratio = chi / late_dof
    p_value = float(special.fdtrc(late_dof, ref_dof, ratio))
    typical = ratio / float(special.fdtri(late_dof, ref_dof, 0.5))
    return _Noisier(ratio * v_early, v_early, late_dof, first, with_repeats, p_value, typical)


def _runner_noisier(fits: Sequence[_Level]) -> float:
    """How much noisier the runner became in the last runs, for every series of a metric:
    1 when it did not. One series' F test sees a runner 2x noisier in its last 5 runs in
    few gates; the gate's series see it together. The test is on the median of their F
    tests' p-values (the median of m uniforms is at most x when half of them are: a
    binomial tail), so one benchmark that became noisier on its own moves it by half a
    rank and lends the others nothing; the ratio taken is the median of the series' ratios,
    each over its F's median (1 on a quiet runner)."""
    late = [f.late for f in fits if f.late is not None]
    if len(late) <= JOB_MIN:
        return 1.0
    half = (len(late) + 1) // 2
    p_median = float(np.median([x.p_value for x in late]))
    # P(at least `half` of m uniforms <= x), the binomial tail as a regularised beta
    if float(special.betainc(half, len(late) - half + 1, p_median)) >= ALPHA:
        return 1.0
    return max(float(np.median([x.typical for x in late])), 1.0)


def _rank_p(fit: _Level, change: float, runs: int) -> float:
    """The rank guard: a current run like the window's lone outliers (on its side, within
    half the outlier bound of them: the same event measured with noise, a spike or a
    slower pool) is as rare as they were, (1 + their number) / (runs + 1), whatever a model
    of the tails says. Excursions of several runs (over) guard nothing, nor do outliers
    far from this change."""
    if change == 0 or not fit.lone.size:
        return 0.0
    dev = fit.lone * math.copysign(1.0, change)
    like = int(np.sum((dev > 0) & (np.abs(dev - abs(change)) <= OUTLIER_MADS / 2 * fit.robust)))
    return (1.0 + like) / (runs + 1.0) if like else 0.0


def _job_factor(
    zs: Sequence[np.ndarray], zcs: Sequence[float]
) -> tuple[np.ndarray, float, np.ndarray] | None:
    """The job factor the gate's series of one metric share: at each run position
    (aligned from the newest: the last run of every benchmark is one CI job), the median
    of the series' deviations from their own median, and the current job's; with them,
    each series' job factor from the *other* series alone (a row per series, the current
    job's last), so one benchmark's own change or noise never moves its own job factor.
    ``None`` under ``JOB_MIN + 1`` series: fewer cannot tell a job from a change."""
    if len(zs) <= JOB_MIN:
        return None
    k = max(z.size for z in zs)
    dev = np.full((len(zs), k + 1), np.nan)
    for j, (z, zc) in enumerate(zip(zs, zcs, strict=True)):
        c = median(z)
        dev[j, k - z.size : k] = z - c
        dev[j, k] = zc - c
    # in each job, only the benchmarks that agree on one level lend it: a PR (or a commit
    # on main) that changed several benchmarks would drag a median between them and the
    # rest, and blame the rest
    radius = OUTLIER_MADS * _job_spread(dev[:, :k])
    if radius > 0:
        for c in range(k + 1):
            have = np.flatnonzero(~np.isnan(dev[:, c]))
            agree = _agreeing(dev[have, c], radius)
            if agree is not None:
                dev[have[~agree], c] = np.nan
    counts = np.sum(~np.isnan(dev), axis=0)
    job = np.where(counts >= JOB_MIN, nanmedian(dev), 0.0)
    # every series' others at once: row j of ``rest`` is the gate less series j
    m = len(zs)
    rest = dev[(np.arange(m)[:, None] + np.arange(1, m)[None, :]) % m]
    enough = np.sum(~np.isnan(rest), axis=1) >= JOB_MIN
    others = np.where(enough, nanmedian(rest, axis=1), 0.0)
    return job[:k], float(job[k]), others


def _job_spread(dev: np.ndarray) -> float:
    """How far the benchmarks of one job disagree: the robust SD of the deviations across
    the benchmarks of each past job, the median over jobs (0 without a past job of three)."""
    ok = np.sum(~np.isnan(dev), axis=0) >= JOB_MIN
    if not ok.any():
        return 0.0
    d = dev[:, ok]
    mads = nanmedian(np.abs(d - nanmedian(d)))
    return MAD_TO_SD * float(np.median(mads))


def _agreeing(values: np.ndarray, radius: float) -> np.ndarray | None:
    """The benchmarks whose current deviations agree on one level: the values sorted and
    cut where two neighbours are more than ``radius`` apart (the outlier bound of how one
    job's benchmarks disagree: farther is not noise), the largest group, the one whose
    median is nearest 0 (no move) on a tie; None when no group of JOB_MIN agrees."""
    order = np.argsort(values)
    cuts = np.flatnonzero(np.diff(values[order]) > radius) + 1
    groups = np.split(order, cuts)
    size = max(g.size for g in groups)
    if size < JOB_MIN:
        return None
    best = min((g for g in groups if g.size == size), key=lambda g: abs(median(values[g])))
    agree = np.zeros(values.size, dtype=bool)
    agree[best] = True
    return agree


def _job_explains(zs: Sequence[np.ndarray], others: np.ndarray) -> bool:
    """Whether taking each series' job factor out leaves the gate's series less spread
    than they are (summed over the series): a runner whose jobs move its benchmarks
    together, rather than an estimate that only adds the other series' noise."""
    k = others.shape[1] - 1
    raw = adjusted = 0.0
    for j, z in enumerate(zs):
        if z.size < 2:
            continue
        raw += float(np.var(z, ddof=1))
        adjusted += float(np.var(z - others[j, k - z.size : k], ddof=1))
    return adjusted < raw


def net_of_job(centres: Sequence[Sequence[float]]) -> list[list[float]]:
    """Each series of run centres (oldest first; series aligned from the newest, a place one
    CI job) divided by its job factor from the other series (:func:`_job_factor`), where
    the series have one and taking it out leaves them less spread (:func:`_job_explains`):
    what is left moves with the benchmark alone. For the change-point scan of the windows:
    a level shift of the whole job (a runner pool, a turbo state) is the job's, and the
    gate judges it apart. A series with a value <= 0 stands as it is."""
    out = [list(c) for c in centres]
    usable = [i for i, c in enumerate(centres) if len(c) and min(c) > 0]
    zs = [np.log(np.asarray(centres[i], dtype=float)) for i in usable]
    jobs = _job_factor(zs, [median(z) for z in zs])
    if jobs is None or not _job_explains(zs, jobs[2]):
        return out
    k = jobs[2].shape[1] - 1
    for j, i in enumerate(usable):
        z = zs[j]
        out[i] = np.exp(z - jobs[2][j, k - z.size : k]).tolist()
    return out


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x (Newton's method, as for moderated t statistics)."""
    if x > 1e7:
        return 1.0 / math.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = float(special.polygamma(1, y))
        step = tri * (1.0 - tri / x) / float(special.polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def fit_prior(variances: Sequence[float], dofs: Sequence[int]) -> _Prior:
    """A scaled inverse chi-square prior for variances seen with ``dofs`` degrees of freedom:
    its degrees of freedom say how far the variances agree beyond their sampling noise.
    With it, the variances' typical value (:attr:`_Prior.typical`)."""
    pairs = [(v, d) for v, d in zip(variances, dofs, strict=True) if v > 0 and d > 0]
    if len(pairs) < 3:
        return _Prior(0.0, 0.0)
    v = np.asarray([p[0] for p in pairs])
    d = np.asarray([p[1] for p in pairs], dtype=float)
    e = np.log(v) - special.digamma(d / 2.0) + np.log(d / 2.0)
    mean = float(np.mean(e))
    excess = float(np.var(e, ddof=1) - np.mean(special.polygamma(1, d / 2.0)))
    # the prior lends no more degrees of freedom than it was estimated from: ten series of
    # two runs agree by chance as often as not, and their scale is known with ten
    cap = min(PRIOR_MAX_DOF, float(np.sum(d)))
    dof = cap if excess <= 0 else min(2.0 * _trigamma_inverse(excess), cap)
    var = math.exp(mean + float(special.digamma(dof / 2.0)) - math.log(dof / 2.0))
    typical = median((v * d / special.chdtri(d, 0.5)).tolist())
    total = float(np.sum(d))
    return _Prior(dof, var, typical, total / 2.0, float(np.sum(v * d)) / total, total)


def _moderate(var: float, dof: float, prior: _Prior) -> tuple[float, float]:
    if prior.dof <= 0 or dof <= 0 and prior.var <= 0:
        return var, dof
    total = prior.dof + dof
    return (prior.dof * prior.var + dof * var) / total, total


def _t_lls(r: np.ndarray, n: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The log-likelihood of standardised residuals under each Student t of ``_T_GRID``,
    and each one's squared scale (fitted by EM from ``var``), for a batch of series at once:
    row i of ``r`` holds series i's ``n[i]`` residuals, padded with zeros (a zero adds nothing
    to the sums below). Returns two arrays of (series, t)."""
    nu = _NU[None, :, None]
    r2 = (r * r)[:, None, :]
    weighted = (nu + 1) * r2
    count = n[:, None, None]
    scale2 = np.broadcast_to(var[:, None, None], (r.shape[0], _NU.size, 1))
    for _ in range(30):  # EM for the scale of a t with known nu
        scale2 = np.add.reduce(weighted / (nu + r2 / scale2), axis=2, keepdims=True) / count
    const = special.gammaln((nu + 1) / 2) - special.gammaln(nu / 2) - 0.5 * np.log(nu * math.pi)
    spread = np.add.reduce(np.log1p(r2 / scale2 / nu), axis=2, keepdims=True)
    lls = count * (const - 0.5 * np.log(scale2)) - (nu + 1) / 2 * spread
    return lls[:, :, 0], scale2[:, :, 0]


def _tail_lls(r: np.ndarray) -> tuple[float, np.ndarray]:
    """The log-likelihood of standardised residuals ``r`` under the normal and under each
    Student t of ``_T_GRID`` (:func:`_t_lls`)."""
    var = float(np.mean(r * r)) if r.size else 1.0
    normal = -0.5 * r.size * (1.0 + math.log(2 * math.pi * var))
    if not r.size:
        return normal, np.zeros(len(_T_GRID))
    return normal, _t_lls(r[None, :], np.array([r.size]), np.array([var]))[0][0]


def _heaviest(normal: float, lls: np.ndarray, level: float) -> float:
    """Degrees of freedom of the heaviest t a likelihood-ratio test against the best fit
    does not reject at ``level``; ``inf`` unless a t beats the normal by a clear margin."""
    best = float(np.max(lls))
    if best <= normal + 3.0:
        return math.inf
    slack = 0.5 * float(special.chdtri(1.0, level))
    nu = min(nu for nu, ll in zip(_T_GRID, lls.tolist(), strict=True) if ll >= best - slack)
    return nu if nu <= MAX_HEAVY_DOF else math.inf


def fit_tail(residuals: np.ndarray, level: float = ALPHA) -> float:
    """The job factor's tails (one series of about 30 values, whose tails the window's jobs
    show alone): degrees of freedom of the heaviest Student t that standardised residuals
    do not rule out at ``level``; ``inf`` when no t fits clearly better than the normal
    (or under 30 residuals).

    A few hundred residuals tell a t4 from a t6 in the body of the distribution, not far out
    where a gate decides: a change is called at a p-value near ``level`` (alpha over the
    gate's tests). So of the t's that a likelihood-ratio test against the best fit does not
    reject at that level (chi-square, one degree of freedom), the heaviest is taken.
    """
    r = residuals[np.isfinite(residuals)]
    if r.size < 30:
        return math.inf
    return _heaviest(*_tail_lls(r), level)


def _body_lls(resids: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The log-likelihoods of each series' standardised residuals within ``FAR_SDS`` under
    the normal and each t of ``_T_GRID``, each truncated there (the body's shape is what
    tells a t from the normal; the far runs are the far tail's), and each one's scale
    (fitted by EM to the runs within): two arrays of (series, normal and t's)."""
    within = [r[np.abs(r) <= FAR_SDS] for r in resids]
    n = np.array([w.size for w in within], dtype=float)
    r = np.zeros((len(within), max(w.size for w in within)))
    for i, w in enumerate(within):
        r[i, : w.size] = w
    ss = np.sum(r * r, axis=1)
    var = np.where(n > 0, np.maximum(ss / np.maximum(n, 1.0), 1e-12), 1.0)
    ts, scale2 = _t_lls(r, n, var)
    scale = np.sqrt(np.maximum(scale2, 1e-12))
    ts -= n[:, None] * np.log(1.0 - 2.0 * special.stdtr(_NU, -FAR_SDS / scale))
    sd = np.sqrt(var)
    normal = -0.5 * ss / var - n * np.log(sd * math.sqrt(2.0 * math.pi))
    normal -= n * np.log(1.0 - 2.0 * special.ndtr(-FAR_SDS / sd))
    # the normal body is the model's own: one SD (the residuals' units)
    ones = np.ones((len(within), 1))
    return np.concatenate((normal[:, None], ts), axis=1), np.concatenate((ones, scale), axis=1)


@dataclass(frozen=True)
class _Tail:
    """The tails a series' runs are judged with: its body (a normal or a t, weighed by how
    well each fits) and beyond ``FAR_SDS`` the far runs' share and power law."""

    weights: np.ndarray = field(default_factory=lambda: np.ones(1))
    scales: np.ndarray = field(default_factory=lambda: np.ones(1))
    rate: float = 0.0
    index: float = math.inf
    """The far runs' power law, P(size > x) = (x / ``FAR_SDS``) ** -index (Hill's
    estimator from their sizes)."""

    def exceeds(self, x: np.ndarray, dof: float) -> np.ndarray:
        """P(|residual| > x) at each x: the body's mixture (each t no lighter than ``dof``,
        the noise's own uncertainty) and the far runs' power law."""
        nu = np.concatenate(([dof], np.minimum(_NU, dof)))[: self.weights.size, None]
        tails = 2.0 * special.stdtr(nu, -x[None, :] / self.scales[:, None])
        body: np.ndarray = self.weights @ tails
        if self.rate <= 0:
            return body
        far = np.where(x > FAR_SDS, (np.maximum(x, FAR_SDS) / FAR_SDS) ** -self.index, 1.0)
        out: np.ndarray = (1.0 - self.rate) * body + self.rate * far
        return out

    def width(self, dof: float, level: float) -> float:
        """How many times the body's t test (its SD, ``dof``) must widen so that a current
        run is called no more often than ``level`` (two-sided): the x with P(|residual| >
        x) = level (:meth:`exceeds`) over the t's own x."""
        body = float(special.stdtrit(dof, 1.0 - level / 2.0))
        limit = level * (1.0 + 1e-9)  # the t's own x is at ``level``, up to rounding
        # P(|residual| > x) falls with x: bracketed among doublings of the t's own x, then
        # passes of 32 points narrow the bracket to 1/32**4 of itself (scipy.optimize is
        # off the gate's path)
        lo = hi = body
        while hi == lo:
            grid = lo * 2.0 ** np.arange(8)
            above = np.flatnonzero(self.exceeds(grid, dof) > limit)
            if not above.size:  # (only where lo is the t's own x)
                return 1.0
            lo = float(grid[above[-1]])
            hi = float(grid[above[-1] + 1]) if above[-1] < 7 else lo
        for _ in range(4):
            grid = np.linspace(lo, hi, 33)
            above = np.flatnonzero(self.exceeds(grid, dof) > limit)
            i = int(above[-1]) if above.size else 0
            lo, hi = float(grid[i]), float(grid[i + 1])
        return hi / body


def _series_tails(resids: Sequence[np.ndarray]) -> list[_Tail]:
    """Each series' tails from its own standardised residuals and the gate's other
    series'. The body: the normal (prior 1/2) and the t's of ``_T_GRID``, weighed by their
    likelihood, the others lending their median log-likelihood ratios, each of them as
    much evidence as this series' own. The far runs: the others', less the one of them
    with the most far runs (a series' own are the rank guard's, :func:`_rank_p`: a current
    run between its body and them is a change). So a runner whose benchmarks see stalls,
    neighbours or t-like tails shows it in each, and one benchmark's outlier (however far)
    widens no other benchmark's test."""
    usable = [r.size >= TRIM_MIN_RUNS for r in resids]
    kept = [i for i, ok in enumerate(usable) if ok]
    fits: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(resids)
    if kept:
        lls, body_scales = _body_lls([resids[i] for i in kept])
        for row, i in enumerate(kept):
            fits[i] = (lls[row], body_scales[row])
    gains = [None if f is None else f[0] - f[0][0] for f in fits]
    far = [np.abs(r[np.abs(r) > FAR_SDS]) for r in resids]
    prior = np.log(np.concatenate(([0.5], np.full(_NU.size, 0.5 / _NU.size))))
    out = []
    for i in range(len(resids)):
        others = [j for j in range(len(resids)) if j != i and usable[j]]
        lent = [gains[j] for j in others]
        own = gains[i]
        weights = np.eye(_NU.size + 1)[0]  # no runs to tell: the normal
        if own is not None or lent:
            logw = prior + (np.zeros(_NU.size + 1) if own is None else own)
            if lent:
                logw = logw + len(lent) * np.median(np.asarray(lent), axis=0)
            weights = np.exp(logw - np.max(logw))
            weights /= np.sum(weights)
        fit = fits[i] if fits[i] is not None else (fits[others[0]] if others else None)
        scales = fit[1] if fit is not None else np.ones(_NU.size + 1)
        if others:
            others.remove(max(others, key=lambda j: far[j].size))
        n = sum(resids[j].size for j in others)
        sizes = np.concatenate([far[j] for j in others]) if others else np.zeros(0)
        if not (n and sizes.size):
            out.append(_Tail(weights, scales))
            continue
        index = sizes.size / max(float(np.sum(np.log(sizes / FAR_SDS))), 1e-9)
        out.append(_Tail(weights, scales, sizes.size / n, index))
    return out


def _with_prior_job(
    s: _Series, factor: float, between: _Prior, within: _Prior, var_w: float, dof: float
) -> float:
    """Degrees of freedom of the change's variance when its job part is the gate's (the
    typical between-run variance of its series less their typical process part, each known
    with half their degrees of freedom: a median) and the rest comes from the pooled
    repeats ``var_w`` with ``dof`` degrees of freedom (Welch-Satterthwaite); ``factor``:
    the variance of the window's level in runs.

    The job part is a difference of two estimates, each known with the degrees of freedom
    of the runs it comes from: counting the repeats' degrees of freedom for the whole
    variance treats a part the gate guessed from a few runs per benchmark as if it had been
    measured many times.
    """
    a, b = between.typical, s.base_factor * within.typical
    job = a - b
    job_dof = job * job / (a * a / between.typical_dof + b * b / within.typical_dof)
    part = (1.0 + factor) * job
    rest = (s.cur_factor + s.base_factor * factor) * var_w
    total = part + rest
    return total * total / (part * part / job_dof + rest * rest / dof)


def _evidence(
    s: _Series, fit: _Level, zc: float, between: _Prior, within: _Prior, tails: _Tail, level: float
) -> Evidence:
    """The change of the current run ``zc`` (the job factor taken out where the gate has
    one) against ``fit``, and its SD from the noise components."""
    var_b, dof_b = _moderate(fit.var, fit.dof, between)
    if s.z.size < MIN_BASELINE_RUNS and between.pooled_dof > 0:
        # one or two runs show next to nothing of this benchmark's own spread: it is
        # judged with the spread of the runner's benchmarks pooled (a bimodal or noisy
        # one among them counts in full, as this one may be such), with their freedom
        var_b, dof_b = between.pooled, between.pooled_dof
    var_w, dof_w = (0.0, 0.0)
    if s.dof_within > 0:
        var_w, dof_w = _moderate(s.ss_within / s.dof_within, s.dof_within, within)
    job = var_b - s.base_factor * var_w
    if dof_w > 0 and var_w > 0 and dof_b > 0:
        f_stat = var_b / (s.base_factor * var_w)
        if float(special.fdtrc(dof_b, dof_w, f_stat)) > POOL_P:
            pooled = (dof_b * var_b / s.base_factor + dof_w * var_w) / (dof_b + dof_w)
            # never below what the runs themselves spread: the F test of a short history
            # is weak, and a job part it missed must not be pooled away
            var_w, dof = max(pooled, var_b / s.base_factor), dof_b + dof_w
            # the job part the gate's other benchmarks show on this runner stays in: one
            # series' weak F test does not take it off the runner
            job = (
                between.typical - s.base_factor * within.typical
                if between.dof and within.dof
                else 0.0
            )
            if job > 0:
                # a job part the gate guessed is not known as well as the pooled repeats;
                # never fewer degrees of freedom than not pooling would have had, though
                guessed = _with_prior_job(s, fit.factor, between, within, var_w, dof)
                dof = min(dof, max(guessed, dof_b))
        else:
            dof = dof_b
    else:
        dof = dof_b
    job = max(job, 0.0)
    var_run = job + s.base_factor * var_w if dof_w > 0 else var_b
    var_cur = job + s.cur_factor * var_w if dof_w > 0 else var_b
    var_cur = max(var_cur, s.se_var)
    noisy_now = ""
    usual = max(min(NOISY_NOW_FACTOR**2 * s.usual_within, s.cur_bound), NOISY_NOW_MIN_COV**2)
    cur_within = -1.0 if s.cur_within is None else s.cur_within  # None: one repeat
    if cur_within > usual:
        if s.one_disturbed:
            # one process of the run was disturbed (slower: a neighbour): its median stands
            # on the others, as the median of fewer repeats with one of them on the slow side
            var_cur += (s.rest_factor - s.cur_factor) * var_w
        else:
            var_cur += (cur_within - s.usual_within) * s.cur_factor
            noisy_now = (
                f"this run's repeats disagree ({math.sqrt(cur_within):.1%} spread against "
                f"a usual {math.sqrt(s.usual_within):.1%}): the machine looks noisy now"
            )
    var = var_cur + var_run * fit.factor
    sd = max(math.sqrt(max(var, 0.0)), SCALE_FLOOR)
    dof = max(dof, 1.0)
    width = tails.width(dof, level)
    sd *= width
    change = zc - fit.level
    p_value = float(2.0 * special.stdtr(dof, -abs(change) / sd))
    before = None
    if fit.before is not None:
        sd_before = math.sqrt(max(var_cur + var_run * fit.before[1], 0.0))
        before = (zc - fit.before[0], max(sd_before * width, SCALE_FLOOR), dof)
    return Evidence(
        centre=s.ref,
        change=change,
        log=s.log,
        sd=sd,
        dof=dof,
        p_value=max(p_value, _rank_p(fit, change, s.z.size)),
        noisy_now=noisy_now,
        job_move="",
        notes=fit.words,
        before=before,
    )


def _job_evidence(job: np.ndarray, current: float, level: float, log: bool) -> Evidence:
    """The current job's factor against the jobs of the window: the same model as one
    series (:func:`_fit_level`), its own tails, and no rarer than the window's jobs as far
    out on its side (within half the outlier bound: the same state measured with noise)."""
    fit = _fit_level(job, current, trim=False)
    sd_run = math.sqrt(fit.var) if fit.var > 0 else 0.0
    nu = fit_tail(fit.resid, level) if sd_run > 0 else math.inf
    sd = max(sd_run * math.sqrt(1.0 + fit.factor), SCALE_FLOOR)
    dof = max(min(float(fit.dof), nu), 1.0)
    change = current - fit.level
    p_value = float(2.0 * special.stdtr(dof, -abs(change) / sd))
    # a job like jobs the window saw (a runner pool, a turbo state: the runner's states
    # recur, unlike one benchmark's excursion) is as rare as they were, whatever the model
    seen = (job - fit.level) * math.copysign(1.0, change)
    like = int(np.sum(seen >= abs(change) - OUTLIER_MADS / 2.0 * fit.robust))
    rank = (1.0 + like) / (job.size + 1.0) if like and change else 0.0
    return Evidence(
        centre=1.0,
        change=change,
        log=log,
        sd=sd,
        dof=dof,
        p_value=max(p_value, _rank_p(fit, change, job.size), rank),
        noisy_now="",
        job_move="",
        notes=fit.words,
    )


def _job_part(ev: Evidence, job: Evidence) -> tuple[float, float, float]:
    """The change of ``ev`` (net of the job factor) with the job's part in it: the change,
    its SD from both variances, and the fewer degrees of freedom of the two."""
    return ev.change + job.change, math.sqrt(ev.sd**2 + job.sd**2), min(ev.dof, job.dof)


def _with_job(ev: Evidence, job: Evidence, benchmarks: int, *, removed: bool) -> Evidence:
    """``ev`` when its whole job moved (:func:`_job_evidence` significant), with words that
    say so; where the job factor was taken out of ``ev`` (``removed``), the benchmark's own
    change and the job's together (:func:`_job_part`), the own one the other reading."""
    words = (
        f"the whole job moved: {benchmarks} benchmarks by {fixed(job.pct(job.change), '+.1f')}% "
        "together; a change to every benchmark and a different runner look the same, and a "
        "rerun tells them apart"
    )
    if not removed:
        return replace(ev, job_move=words)
    change, sd, dof = _job_part(ev, job)
    return replace(
        ev,
        change=change,
        sd=sd,
        dof=dof,
        p_value=float(2.0 * special.stdtr(dof, -abs(change) / sd)),
        job_move=words,
        other=(ev.change, ev.sd, ev.dof),
    )


def gate_evidence(candidates: Sequence[Candidate]) -> list[Evidence]:
    """Evidence for noisy candidates judged together.

    Per metric (one runner, one kind of measurement: a step time lends nothing to a memory
    peak), the gate's series share a job factor, taken out of each before it is judged and
    judged itself; each metric's variances are shrunk toward the others' (the empirical
    prior) and each series' tails are its own, with the others' as a prior.
    """
    series = [_series(c) for c in candidates]
    out: list[Evidence | None] = [None] * len(series)
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(candidates):
        groups.setdefault(c.current.metric, []).append(i)
    alpha = min((c.alpha for c in candidates), default=ALPHA)
    level = alpha / max(len(candidates), 1)
    for members in groups.values():
        group = [series[i] for i in members]
        zs = [s.z for s in group]
        jobs = _job_factor(zs, [s.zc for s in group])
        removed = jobs is not None and _job_explains(zs, jobs[2])
        fits, currents = [], []
        for j, s in enumerate(group):
            # a series of 1-2 runs knows no job part of its own: judged only net of the
            # job factor, what is left is its own noise, which the gate's series share
            if jobs is None or not (removed or s.z.size < MIN_BASELINE_RUNS):
                fits.append(_fit_level(s.z, s.zc, disturbed=s.disturbed, repeats=s.repeats))
                currents.append(s.zc)
            else:
                own = jobs[2][j]
                k = own.size - 1
                fits.append(
                    _fit_level(
                        s.z - own[k - s.z.size : k],
                        s.zc - own[k],
                        disturbed=s.disturbed,
                        repeats=s.repeats,
                    )
                )
                currents.append(s.zc - own[k])
        runner = _runner_noisier(fits)
        fits = [_with_runner(f, runner) for f in fits]
        between = fit_prior([f.var for f in fits], [f.dof for f in fits])
        within = fit_prior(
            [s.ss_within / s.dof_within if s.dof_within else 0.0 for s in group],
            [s.dof_within for s in group],
        )
        tails = _series_tails([f.resid for f in fits])
        job_ev, moved = None, None
        if jobs is not None:
            # the whole job moved: every benchmark fails at once, so it must pass the
            # strictest bar of the gate's family (Benjamini-Hochberg's first step)
            job_ev = _job_evidence(jobs[0], jobs[1], level, all(s.log for s in group))
            if job_ev.p_value < level:
                moved = job_ev
        for i, s, fit, zc, tail in zip(members, group, fits, currents, tails, strict=True):
            ev = _evidence(s, fit, zc, between, within, tail, level)
            taken_out = removed or s.z.size < MIN_BASELINE_RUNS
            if moved is not None:
                ev = _with_job(ev, moved, len(group), removed=taken_out)
            elif job_ev is not None and taken_out:
                # the job did not move significantly: its part is the other reading
                ev = replace(ev, other=_job_part(ev, job_ev))
            out[i] = ev
    return [ev for ev in out if ev is not None]


def _run_ids(candidate: Candidate) -> tuple[str, ...]:
    return tuple(p.run_id for p in candidate.baseline)


def _commits(candidate: Candidate) -> tuple[str, ...]:
    return tuple(p.commit for p in candidate.baseline)


def _no_baseline(candidate: Candidate, mde: float | None = None) -> Comparison:
    """Too few runs to judge; ``mde``: the change this runner's noise (the gate's other
    benchmarks) would let a run of 1-2 baseline runs call now, when it knows one."""
    cur, k = candidate.current, len(candidate.baseline)
    reason = (
        f"only {k} comparable baseline run{'s' if k != 1 else ''} "
        f"(at least {MIN_BASELINE_RUNS} needed)"
    )
    if mde is not None:
        reason += (
            f"; with this runner's noise (its other benchmarks) a change of {size_text(mde)} "
            f"would be called now, and {MIN_BASELINE_RUNS - k} more run"
            f"{'s' if MIN_BASELINE_RUNS - k != 1 else ''} judge it on its own history"
        )
    else:
        reason += f": {MIN_BASELINE_RUNS - k} more run{'s' if MIN_BASELINE_RUNS - k != 1 else ''}"
        reason += " would judge it"
    return Comparison(
        benchmark=cur.benchmark,
        metric=cur.metric,
        unit=cur.unit,
        direction=cur.direction,
        verdict=Verdict.NO_BASELINE,
        reason=reason,
        current_run_id=cur.run_id,
        current_centre=cur.centre,
        min_effect_pct=candidate.policy.min_effect_pct,
        baseline_run_ids=_run_ids(candidate),
        baseline_commits=_commits(candidate),
        alpha=candidate.alpha,
    )


def _deterministic(candidate: Candidate) -> Comparison:
    """A metric without noise against the median of its window: any change beyond the
    tolerance counts; for a result that must not move (``numerics``: the loss), against the
    newest baseline run, either way is a regression
    (:func:`perfgate.stats.decide.numerics_verdict`)."""
    cur, policy = candidate.current, candidate.policy
    centre = median([p.centre for p in candidate.baseline])
    change_pct = relative_change_pct(centre, cur.centre)
    tolerance = policy.min_effect_pct_at(centre)  # a plain %: points either way weigh alike
    kind = ""
    if policy.numerics:
        # Against the newest baseline run, not the window's median: once a numerics change
        # is accepted on the base branch, the runs after it hold the new value, and a median
        # would keep failing every later gate until half the window had moved.
        newest = max(candidate.baseline, key=lambda p: p.started_at)
        centre = newest.centre
        verdict, change_pct, reason = numerics_verdict(
            cur.metric,
            centre,
            cur.centre,
            policy.min_effect_pct,
            against=f" in the newest baseline run ({newest.commit[:8] or newest.run_id[:8]})",
        )
        kind = "numerics"
    elif (
        verdict := deterministic_verdict(cur.direction, change_pct, tolerance)
    ) is Verdict.UNCHANGED:
        reason = f"deterministic metric, {cur.centre:g} against {centre:g}: within tolerance"
    else:
        said = _effect_size(policy, tolerance)
        reason = (
            f"deterministic metric changed from {centre:g} to {cur.centre:g} "
            f"({fixed(change_pct, '+.1f')}%, tolerance {said})"
        )
    return Comparison(
        benchmark=cur.benchmark,
        metric=cur.metric,
        unit=cur.unit,
        direction=cur.direction,
        verdict=verdict,
        reason=reason,
        current_run_id=cur.run_id,
        current_centre=cur.centre,
        baseline_centre=centre,
        change_pct=change_pct,
        min_effect_pct=policy.min_effect_pct,
        baseline_run_ids=_run_ids(candidate),
        baseline_commits=_commits(candidate),
        kind=kind,
    )


def _effect_size(policy: MetricPolicy, min_effect: float) -> str:
    """The minimum effect in one unit: ``15 points`` where the absolute one binds (a
    percentage near 0), else ``3%`` of the baseline."""
    if policy.min_effect_abs > 0 and min_effect > policy.min_effect_pct:
        return f"{policy.min_effect_abs:g} points"
    return f"{min_effect:g}%"


def _effect_words(policy: MetricPolicy, min_effect: float) -> str:
    """:func:`_effect_size` as the reasons say it: ``minimum effect of 15 points``, ``3%
    minimum effect``."""
    size = _effect_size(policy, min_effect)
    return f"minimum effect of {size}" if size.endswith("points") else f"{size} minimum effect"


def _other_unsure(
    ev: Evidence, policy: MetricPolicy, min_effect: float, alpha: float, direction: Direction
) -> str:
    """Why a change that is unchanged as ``ev`` reads it cannot be called unchanged: read
    the other way (:attr:`Evidence.other`: net of the job's move, or with the job's part in
    it) it may be worse than the minimum effect (a runner that moved and a change to every
    benchmark read the same), or against the level before a move of main fitted from a
    step (:attr:`Evidence.before`); '' when it is unchanged every way."""

    def unsure(reading: tuple[float, float, float] | None) -> tuple[Evidence, float] | None:
        if reading is None:
            return None
        other = replace(ev, change=reading[0], sd=reading[1], dof=reading[2])
        bound = other.worse_bound(worse_sign(direction), alpha)
        outcome = classify_change(
            change_pct=other.change_pct,
            p_adjusted=1.0,
            min_effect_pct=min_effect,
            alpha=alpha,
            worse_bound_pct=bound,
            direction=direction,
        )
        return None if outcome is Outcome.UNCHANGED else (other, bound)

    moved = unsure(ev.before)
    if moved is not None:
        other, bound = moved
        return (
            "against the level before the last runs moved (main may have moved before this "
            f"change, or not) it is {fixed(other.change_pct, '+.1f')}% and may be up to "
            f"{fixed(abs(bound), '.1f')}% worse, beyond the {_effect_words(policy, min_effect)}"
        )
    found = unsure(ev.other)
    if found is None:
        return ""
    other, bound = found
    if ev.job_move:
        return (
            f"{ev.job_move}; net of the job's move it is {fixed(other.change_pct, '+.1f')}% and "
            f"may be up to {fixed(abs(bound), '.1f')}% worse, beyond the "
            f"{_effect_words(policy, min_effect)}"
        )
    return (
        "it is measured net of the job factor the gate's benchmarks share, and with the "
        "job's part in it (the whole job "
        f"{fixed(ev.pct(other.change - ev.change), '+.1f')}%, not "
        "significantly: a different runner and a change to every benchmark read the same) it "
        f"is {fixed(other.change_pct, '+.1f')}% and may be up to {fixed(abs(bound), '.1f')}% "
        "worse, beyond the "
        f"{_effect_words(policy, min_effect)}"
    )


def _compared_with(current: float, ev: Evidence) -> float:
    """The baseline value the current run's change is measured from: the fitted level (net
    of what the job factor took out, the job's move added back where the whole job moved),
    so that ``baseline -> current`` is the change shown, where the baseline runs' median
    (``ev.centre``) is not (10.8 -> 30 ms called +161.5% against a level of 11.47)."""
    if not ev.log or -ev.change >= _LOG_MAX:  # a fraction of the median: that median
        return ev.centre
    return current * math.exp(-ev.change)


def _judge(
    candidate: Candidate, ev: Evidence, p_adjusted: float, tests: int, level: float
) -> Comparison:
    """The verdict and its words; ``level``: the interval's (:func:`compare_candidates`)."""
    cur, policy = candidate.current, candidate.policy
    alpha = candidate.alpha
    change_pct = ev.change_pct
    min_effect = policy.min_effect_pct_at(ev.centre)  # shown: points as a % of the baseline
    # decided on the ratio scale, where a drop of those points is the larger ratio
    limit = policy.min_effect_pct_at(ev.centre, falling=ev.log and change_pct < 0)
    k = len(candidate.baseline)
    if is_time(cur.unit):
        word = "slower" if change_pct > 0 else "faster"
    else:
        word = "higher" if change_pct > 0 else "lower"
    low, high = (x if math.isfinite(x) else None for x in ev.interval(level))
    if low is not None and never_negative(cur.unit):
        low = max(low, -100.0)  # on the additive scale (zeros in the runs): an amount ends at 0
    mde = ev.detectable(tests, alpha, min_effect)
    bound = ev.worse_bound(worse_sign(cur.direction), alpha)
    outcome = classify_change(
        change_pct=change_pct,
        p_adjusted=p_adjusted,
        min_effect_pct=limit,
        alpha=alpha,
        worse_bound_pct=bound,
        direction=cur.direction,
    )
    blind = ""
    if outcome is Outcome.UNCHANGED:
        blind = _other_unsure(ev, policy, limit, alpha, cur.direction)
    if blind:
        outcome = Outcome.BLIND
    words = Words(
        moved=f"{fixed(abs(change_pct), '.1f')}% {word}",
        against=f"than the level of its {k} baseline run{'s' if k != 1 else ''}",
        evidence=f"p={p_adjusted:.2g} after FDR adjustment (raw {ev.p_value:.2g}, alpha {alpha:g})",
        effect=_effect_words(policy, min_effect),
        caught=f"a change of {size_text(mde)} is caught with {int(POWER * 100)}% power",
        blind=blind,
    )
    verdict, reason = decided(outcome, cur.direction, change_pct, bound, alpha, words)
    if ev.noisy_now and verdict is Verdict.INCONCLUSIVE:
        reason += f" ({ev.noisy_now})"
    if ev.job_move and outcome is Outcome.CHANGE:
        reason += f" ({ev.job_move})"
    if ev.notes:
        reason += f" ({ev.notes})"
    return Comparison(
        benchmark=cur.benchmark,
        metric=cur.metric,
        unit=cur.unit,
        direction=cur.direction,
        verdict=verdict,
        reason=reason,
        current_run_id=cur.run_id,
        current_centre=cur.centre,
        baseline_centre=_compared_with(cur.centre, ev),
        change_pct=change_pct,
        ci_low_pct=low,
        ci_high_pct=high,
        ci_level=level if low is not None or high is not None else None,
        p_value=ev.p_value,
        p_adjusted=p_adjusted,
        min_effect_pct=min_effect,
        mde_pct=mde if math.isfinite(mde) else None,
        p_rank=None,
        baseline_run_ids=_run_ids(candidate),
        baseline_commits=_commits(candidate),
        alpha=alpha,
    )


def compare_candidates(candidates: Sequence[Candidate]) -> tuple[Comparison, ...]:
    """Judge every candidate of one gate, with FDR control across the noisy ones, one family
    for the changes that point worse and one for those that point better
    (:func:`perfgate.stats.fdr.by_direction`).

    Intervals are false-coverage adjusted (Benjamini and Yekutieli): with R of the m tests
    called on a side, every interval on that side is at level 1 - max(R, 1) * alpha / m, so
    a change is called exactly when its interval leaves 0. The order of the result follows
    the input.
    """
    results: list[Comparison | None] = [None] * len(candidates)
    tested: list[int] = []
    for i, cand in enumerate(candidates):
        if cand.policy.deterministic or cand.policy.numerics:
            short = len(cand.baseline) < MIN_BASELINE_RUNS
            results[i] = _no_baseline(cand) if short else _deterministic(cand)
        elif not cand.baseline:
            results[i] = _no_baseline(cand)
        elif len(cand.baseline) >= MIN_BASELINE_RUNS and _never_varied(cand):
            results[i] = _deterministic(cand)
        else:
            tested.append(i)
    evidences = gate_evidence([candidates[i] for i in tested])
    sides = [
        worse_sign(candidates[i].current.direction) * ev.change_pct > 0
        for i, ev in zip(tested, evidences, strict=True)
    ]
    adjusted = by_direction([ev.p_value for ev in evidences], sides)
    m = len(tested)
    alpha = min((candidates[i].alpha for i in tested), default=ALPHA)
    called = Counter(side for side, p in zip(sides, adjusted, strict=True) if p < alpha)
    levels = {side: 1.0 - max(called[side], 1) * alpha / max(m, 1) for side in (False, True)}
    # a series of 1-2 runs is judged on its runner's noise, net of the job factor: the
    # metric needs JOB_MIN + 1 series of two runs or more (the job factor and a spread)
    known = Counter(
        candidates[i].current.metric for i in tested if len(candidates[i].baseline) >= 2
    )
    for i, ev, p_adj, side in zip(tested, evidences, adjusted, sides, strict=True):
        cand = candidates[i]
        judged = _judge(cand, ev, p_adj, m, levels[side])
        if len(cand.baseline) < MIN_BASELINE_RUNS:
            if known[cand.current.metric] <= JOB_MIN:
                judged = _no_baseline(cand)
            elif judged.verdict not in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
                judged = _no_baseline(cand, judged.mde_pct)
        results[i] = judged
    return tuple(r for r in results if r is not None)


def _never_varied(candidate: Candidate) -> bool:
    """Every baseline run and repeat measured the same value: the metric shows no noise to
    test against (a count in a profile), so a change is judged as a deterministic one and
    is not a test of the gate's false-discovery family."""
    values = {p.centre for p in candidate.baseline}
    values.update(x for p in candidate.baseline for x in p.repeat_centres)
    return len(values) == 1


def change_sd(baseline: Sequence[RunPoint], *, repeats: int) -> float:
    """The SD of a current run's change against ``baseline`` under no change, on the ratio
    scale, for a run of ``repeats`` repeats: the job part, the process part over the run's
    own repeats and the window median's, from this module's noise components (the F test
    and pooling included) as :func:`compare_candidates` scales a lone candidate: without the
    gate's prior or tail fit, and without the current run's repeats (not measured yet).
    ``run --confirm`` takes its look correlation from it (:mod:`perfgate.stats.sequential`).

    Raises:
        ValueError: ``baseline`` is empty or ``repeats`` is below 1.
    """
    if not baseline or repeats < 1:
        raise ValueError("a baseline and at least one repeat are needed")
    mid = median([p.centre for p in baseline])
    stand_in = RunPoint(
        run_id="",
        benchmark=baseline[-1].benchmark,
        metric=baseline[-1].metric,
        unit=baseline[-1].unit,
        direction=baseline[-1].direction,
        branch="",
        commit="",
        fingerprint_key=baseline[-1].fingerprint_key,
        started_at=baseline[-1].started_at,
        centre=mid,
        repeat_centres=(),
    )
    policy = MetricPolicy(baseline[-1].direction, 0.0)
    s = _series(Candidate(stand_in, tuple(baseline), policy))
    s = replace(s, cur_factor=median_variance(repeats), cur_within=None)
    fit = _fit_level(s.z, s.zc)
    return _evidence(s, fit, s.zc, _NO_PRIOR, _NO_PRIOR, _Tail(), ALPHA).sd
