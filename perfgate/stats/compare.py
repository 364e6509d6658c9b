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
4. Tails: the gate's standardised baseline residuals are fitted with a Student t; heavy tails
   (a small fitted number of degrees of freedom) widen every test and interval of that gate.
   Of the t's a likelihood-ratio test does not reject at the level the gate decides at
   (alpha over its tests), the heaviest: the body of a few hundred residuals does not show
   the tail that far out.
5. Outliers and modes: from ``TRIM_MIN_RUNS`` runs on, runs beyond ``OUTLIER_MADS`` robust
   SDs leave the scale estimate, but not the decision: a current run whose change is no
   larger than what such baseline runs already showed (a spike, a slower runner pool) is not
   called a change. The same holds when the last runs of the window already moved the way the
   current one did: main moved, not the change under test. A run that is an outlier in at
   least half of a metric's series in the gate is a job-wide event (the job ran on a slower
   pool): it is an outlier in every one of them, also where one metric's own noise kept it
   inside the bound. An outlier explains only a current run of its kind: a job-wide one a
   current run that moved the whole job (the median change of the gate's series of its
   metric is ``JOB_WIDE_SDS`` or more), one whose repeats disagreed (a neighbour) a current
   run whose repeats disagree. Last runs that went far beyond the current change do not
   say main moved to it either, unless the whole current job moved (main moved, with a
   spike on top). A change a guard holds back is no discovery: in the FDR adjustment of
   the others it counts as a test with p = 1. A change the whole job made with no such
   outlier to explain it is still called (a change that slows everything looks the same),
   and its reason says the whole job moved (``JOB_MOVE_MIN`` benchmarks or more).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from perfgate.models import Comparison, MetricPolicy, RunPoint, Verdict
from perfgate.stats import special
from perfgate.stats.decide import (
    ALPHA,
    POWER,
    Outcome,
    change_verdict,
    classify_change,
    deterministic_verdict,
    numerics_verdict,
    relative_change_pct,
    size_text,
    worse_sign,
)
from perfgate.stats.fdr import benjamini_hochberg
from perfgate.stats.summary import mad, median, quantile

MIN_BASELINE_RUNS = 3
MAD_TO_SD = 1.4826
SCALE_FLOOR = 0.002
"""Smallest noise assumed, as a fraction of the centre: no timer is better than 0.2%."""
OUTLIER_MADS = 5.0
TRIM_MIN_RUNS = 10
POOL_P = 0.25
"""The job component counts as zero (process and job estimates pooled) when the F test of
it has p above this: the usual level for a preliminary test before pooling."""
OUTLIER_MARGIN_SDS = 5.0
"""A current run whose change is within this many SDs of a baseline outlier's deviation is
not called a change: it looks like that outlier (the same spike, the same slower pool)."""
JOB_WIDE_SDS = 2.0
"""The current run moved job-wide when the median change of the gate's series of its metric
is at least this many SDs of a run (one changed benchmark moves that median by a fraction
of an SD)."""
JOB_MOVE_MIN = 3
"""A change is said to have moved the whole job only when at least this many benchmarks of
the gate measure its metric (one or two cannot tell a job from a change)."""
RECENT_RUNS = 4
"""How many of the last baseline runs are checked for having moved already (main moved)."""
RECENT_MARGIN_SDS = 2.5
"""A last baseline run more than one SD out the same way, and within this many SDs of the
current change, counts as main having moved already; a current run this many SDs (of the
difference) beyond the moved runs is still a change of its own."""
PRIOR_MAX_DOF = 50.0
NOISY_NOW_FACTOR = 3.0
NOISY_NOW_MIN_COV = 0.02
NOISY_NOW_P = 0.001
"""A current run's repeats that spread more than the pooled process noise does once in
this many runs (chi-square) say the machine is noisy now."""
MAX_HEAVY_DOF = 20.0
"""Tails are called heavy (and widen the gate's tests) only when a t with at most this many
degrees of freedom fits clearly better than the normal: lighter excess tails (a rare
disturbed process) are left to the outlier guard, at the cost of little power."""
_T_GRID = (2.5, 3.0, 4.0, 6.0, 10.0, 20.0, 50.0)

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


@dataclass(frozen=True)
class _Series:
    """One candidate on the analysis scale (log, or fraction of the baseline median)."""

    log: bool
    ref: float
    z: np.ndarray
    zc: float
    z_median: float
    """The median of ``z``: the baseline's centre on the analysis scale."""
    kept: np.ndarray
    outlier: np.ndarray
    disturbed: np.ndarray
    """Baseline runs whose own repeats disagreed far beyond usual (a neighbour during some
    of its processes): their deviation says nothing about the job-level tails."""
    var_between: float
    dof_between: int
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
    job_wide: np.ndarray
    """Baseline runs that were outliers in most of the gate's series of this metric at once
    (a job-wide event: a spike, a slower runner pool)."""
    job_shift: float = 0.0
    """How far the current run moved in the gate's series of this metric together: the
    median of their changes, in SDs of a run. A job-wide event moves them all."""
    job_move: str = ""
    """Words for :attr:`Evidence.job_move`."""


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
    guard: str
    """Why a change this large is not called one (a baseline run already as far, main moved
    already), or ''."""
    noisy_now: str
    job_move: str
    """Words for a current run that moved the whole job (every benchmark of the gate's
    metric together), or ''."""
    components: str

    def pct(self, x: float) -> float:
        return 100.0 * math.expm1(x) if self.log else 100.0 * x

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


def _within(points: Sequence[RunPoint], log: bool, ref: float) -> tuple[float, int]:
    """Process variance of one repeat and its degrees of freedom, pooled over the runs.

    Robust: the median of the runs' own variances, scaled by the median of a chi-square, so
    a process disturbed by a neighbour (which the median of a run's repeats shrugs off)
    does not inflate it. Counted at half the degrees of freedom of the plain pooled variance
    (a median of variances is about half as efficient).
    """
    return _pooled_within([_repeat_var(r) for r in _scaled_repeats(points, log, ref)])


def _pooled_within(each: Sequence[tuple[float, int] | None]) -> tuple[float, int]:
    """:func:`_within` from each run's (variance of its scaled repeats, degrees of freedom),
    None for a run of one repeat."""
    variances = [v for v, _ in filter(None, each)]
    dofs = [d for _, d in filter(None, each)]
    if not variances:
        return 0.0, 0
    d = int(median(dofs))
    var = median(variances) * d / float(special.chdtri(d, 0.5))
    dof = max(sum(dofs) // 2, 1)
    return var * dof, dof


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


def _between(z: np.ndarray, outlier: np.ndarray) -> tuple[np.ndarray, float, int]:
    """The runs left for the between-run variance (outliers out), that variance and its
    degrees of freedom."""
    kept = z[~outlier]
    var = float(np.var(kept, ddof=1)) if kept.size >= 2 else 0.0
    return kept, var, max(int(kept.size) - 1, 0)


def _series(candidate: Candidate) -> _Series:
    current, baseline = candidate.current, candidate.baseline
    raw = np.asarray([p.centre for p in baseline], dtype=float)
    reps = [x for p in (*baseline, current) for x in p.repeat_centres]
    log = bool(np.all(raw > 0) and current.centre > 0 and all(x > 0 for x in reps))
    mid = median(raw)
    ref = abs(mid) if mid != 0 else max(float(np.max(np.abs(raw))), 1.0)
    z = _scaled(raw, log, ref)
    zc = float(_scaled(np.asarray([current.centre]), log, ref)[0])
    k = z.size
    centre = median(z)
    outlier = np.zeros(k, dtype=bool)
    if k >= TRIM_MIN_RUNS:
        robust = MAD_TO_SD * mad(z)
        if robust > 0:
            outlier = np.abs(z - centre) > OUTLIER_MADS * robust
    kept, var_between, dof_between = _between(z, outlier)
    # each run's own repeat variance, once: pooled for the process part, and compared with
    # the usual one for the runs (and the current run) disturbed
    scaled = _scaled_repeats((*baseline, current), log, ref)
    repeat_vars = [_repeat_var(r) for r in scaled]
    ss_w, dof_w = _pooled_within(repeat_vars)
    base_n = [max(len(p.repeat_centres), 1) for p in baseline]
    base_factor = float(np.mean([median_variance(n) for n in base_n]))
    each = [None if rv is None else rv[0] for rv in repeat_vars[:-1]]
    usual = [v for v in each if v is not None]
    cur_n = max(len(current.repeat_centres), 1)
    cur_within = None if repeat_vars[-1] is None else repeat_vars[-1][0]
    one_disturbed = False
    if cur_n >= 3 and dof_w > 0:
        sign = worse_sign(candidate.policy.direction)  # the scale keeps the order (ref > 0)
        rest = sorted(scaled[-1], key=lambda x: sign * x)[:-1]
        d = len(rest) - 1
        one_disturbed = _var(rest) <= float(special.chdtri(d, 0.01)) / d * ss_w / dof_w
    typical = median(usual) if usual else 0.0
    disturbed = np.asarray(
        [
            v is not None and v > max(NOISY_NOW_FACTOR**2 * typical, NOISY_NOW_MIN_COV**2)
            for v in each
        ],
        dtype=bool,
    )
    ses = [p.centre_se for p in (*baseline, current) if p.centre_se is not None]
    scale = 1.0 / abs(current.centre) if log and current.centre else 1.0 / ref
    se_var = float(np.mean(np.square(ses))) * scale**2 if ses else 0.0
    return _Series(
        log=log,
        ref=mid,
        z=z,
        zc=zc,
        z_median=centre,
        kept=kept,
        outlier=outlier,
        disturbed=disturbed,
        var_between=var_between,
        dof_between=dof_between,
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
        job_wide=np.zeros(k, dtype=bool),
    )


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
    if excess <= 0:
        dof = PRIOR_MAX_DOF
    else:
        dof = min(2.0 * _trigamma_inverse(excess), PRIOR_MAX_DOF)
    var = math.exp(mean + float(special.digamma(dof / 2.0)) - math.log(dof / 2.0))
    typical = median((v * d / special.chdtri(d, 0.5)).tolist())
    return _Prior(dof, var, typical, float(np.sum(d)) / 2.0)


def _moderate(var: float, dof: float, prior: _Prior) -> tuple[float, float]:
    if prior.dof <= 0 or dof <= 0 and prior.var <= 0:
        return var, dof
    total = prior.dof + dof
    return (prior.dof * prior.var + dof * var) / total, total


def _t_logpdf(x: np.ndarray, nu: float) -> np.ndarray:
    return np.asarray(
        math.lgamma((nu + 1) / 2)
        - math.lgamma(nu / 2)
        - 0.5 * math.log(nu * math.pi)
        - (nu + 1) / 2 * np.log1p(x * x / nu)
    )


def fit_tail(residuals: np.ndarray, level: float = ALPHA) -> float:
    """Degrees of freedom of the heaviest Student t that standardised residuals do not rule
    out at ``level`` (a scale fitted for each); ``inf`` when no t fits clearly better than
    the normal.

    A few hundred residuals tell a t4 from a t6 in the body of the distribution, not far out
    where a gate decides: a change is called at a p-value near ``level`` (alpha over the
    gate's tests). So of the t's that a likelihood-ratio test against the best fit does not
    reject at that level (chi-square, one degree of freedom), the heaviest is taken: the
    tail the gate cannot tell from what it saw.
    """
    r = residuals[np.isfinite(residuals)]
    if r.size < 30:
        return math.inf
    var = float(np.mean(r * r))
    normal_ll = -0.5 * r.size * (1.0 + math.log(2 * math.pi * var))
    lls = []
    for nu in _T_GRID:
        scale2 = var
        for _ in range(30):  # EM for the scale of a t with known nu
            w = (nu + 1) / (nu + r * r / scale2)
            scale2 = float(np.mean(w * r * r))
        ll = float(np.sum(_t_logpdf(r / math.sqrt(scale2), nu))) - 0.5 * r.size * math.log(scale2)
        lls.append((nu, ll))
    best = max(ll for _, ll in lls)
    # the normal is kept unless a t wins by a clear margin (one parameter more)
    if best <= normal_ll + 3.0:
        return math.inf
    slack = 0.5 * special.chdtri(1.0, level)
    nu = min(nu for nu, ll in lls if ll >= best - slack)
    return nu if nu <= MAX_HEAVY_DOF else math.inf


def _guard(
    s: _Series, change: float, sd_run: float, *, now_disturbed: bool, now_job_wide: bool
) -> str:
    """Why a change this large should not be called one, or ''. ``now_disturbed``: the
    current run's repeats disagree far beyond usual; ``now_job_wide``: the gate's series of
    this metric moved with it (``JOB_WIDE_SDS``)."""
    centre = s.z_median
    if change == 0:
        return ""
    sign = 1.0 if change > 0 else -1.0
    dev = (s.z - centre) * sign
    k = s.z.size
    recent = 0
    for i in range(k - 1, max(k - 1 - RECENT_RUNS, 0) - 1, -1):
        near = dev[i] > sd_run and abs(change) - dev[i] <= RECENT_MARGIN_SDS * sd_run
        if (dev[i] >= 0.5 * abs(change) or near) and k - i < k / 2:
            recent += 1
        else:
            break
    if recent:
        beyond = abs(change) - float(np.mean(dev[k - recent :]))
        if not now_job_wide:
            beyond = abs(beyond)
        if beyond > RECENT_MARGIN_SDS * sd_run * math.sqrt(1.0 + 1.0 / recent):
            # past where main moved to: still this change's. So is a change well short of
            # it when the rest of the job stayed put: those runs went further, all of the
            # job (a spike), and not to a level this one benchmark is on now
            recent = 0
    if recent:
        moved = float(np.mean(s.z[k - recent :])) - median(s.z[: k - recent])
        pct = 100.0 * math.expm1(moved) if s.log else 100.0 * moved
        return (
            f"the last {recent} baseline run{'s' if recent > 1 else ''} already moved "
            f"{pct:+.1f}% (main moved before this change)"
        )
    # an outlier explains a current run of its own kind only: a job-wide one (every metric
    # of its run moved: a spike, a slower pool) a run that moved job-wide, a disturbed one
    # (its repeats disagreed: a neighbour in some processes) a run whose repeats disagree;
    # one benchmark's change in a run whose others stayed put and whose repeats agree is
    # neither of those events
    like = [
        i
        for i in range(s.z.size)
        if s.outlier[i]
        and dev[i] > 0
        and abs(dev[i] - abs(change)) <= OUTLIER_MARGIN_SDS * sd_run
        and (now_job_wide if s.job_wide[i] else now_disturbed or not s.disturbed[i])
    ]
    if like:
        n = len(like)
        return (
            f"{n} of the {s.z.size} baseline runs {'was' if n == 1 else 'were'} already "
            "as far out (a spike or a slower runner pool)"
        )
    return ""


def _with_prior_job(s: _Series, between: _Prior, within: _Prior, var_w: float, dof: float) -> float:
    """Degrees of freedom of the change's variance when its job part is the gate's (the
    typical between-run variance of its series less their typical process part, each known
    with half their degrees of freedom: a median) and the rest comes from the pooled
    repeats ``var_w`` with ``dof`` degrees of freedom (Welch-Satterthwaite).

    The job part is a difference of two estimates, each known with the degrees of freedom
    of the runs it comes from: counting the repeats' degrees of freedom for the whole
    variance treats a part the gate guessed from a few runs per benchmark as if it had been
    measured many times.
    """
    a, b = between.typical, s.base_factor * within.typical
    job = a - b
    job_dof = job * job / (a * a / between.typical_dof + b * b / within.typical_dof)
    mv = median_variance(s.z.size)
    part = (1.0 + mv) * job
    rest = (s.cur_factor + s.base_factor * mv) * var_w
    total = part + rest
    return total * total / (part * part / job_dof + rest * rest / dof)


def _evidence(s: _Series, between: _Prior, within: _Prior, nu: float) -> Evidence:
    k = s.z.size
    var_b, dof_b = _moderate(s.var_between, s.dof_between, between)
    var_w, dof_w = (0.0, 0.0)
    if s.dof_within > 0:
        var_w, dof_w = _moderate(s.ss_within / s.dof_within, s.dof_within, within)
    job = var_b - s.base_factor * var_w
    words = ""
    if dof_w > 0 and var_w > 0 and dof_b > 0:
        f_stat = var_b / (s.base_factor * var_w)
        p_job = float(special.fdtrc(dof_b, dof_w, f_stat))
        if p_job > POOL_P:
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
                dof = min(dof, max(_with_prior_job(s, between, within, var_w, dof), dof_b))
            words = f"job noise not distinguishable (F p={p_job:.2g}): repeats pooled"
        else:
            dof = dof_b
            words = f"job noise {math.sqrt(max(job, 0.0)):.2%}, process {math.sqrt(var_w):.2%}"
    else:
        dof = dof_b
    job = max(job, 0.0)
    var_run = job + s.base_factor * var_w if dof_w > 0 else var_b
    var_cur = job + s.cur_factor * var_w if dof_w > 0 else var_b
    var_cur = max(var_cur, s.se_var)
    noisy_now = ""
    usual = max(min(NOISY_NOW_FACTOR**2 * s.usual_within, s.cur_bound), NOISY_NOW_MIN_COV**2)
    cur_within = -1.0 if s.cur_within is None else s.cur_within  # None: one repeat
    now_disturbed = cur_within > usual
    if now_disturbed:
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
    var = var_cur + var_run * k * median_variance(k) / k
    sd = max(math.sqrt(max(var, 0.0)), SCALE_FLOOR)
    dof = max(dof, 1.0)
    if math.isfinite(nu):
        dof = min(dof, nu)
    change = s.zc - s.z_median
    p_value = float(2.0 * special.stdtr(dof, -abs(change) / sd))
    # the current run moved job-wide, the way of this change (one decision: the guard's
    # and the reason's)
    now_job_wide = math.copysign(1.0, change) * s.job_shift >= JOB_WIDE_SDS
    sd_run = math.sqrt(max(var_run, 0.0)) or sd
    return Evidence(
        centre=s.ref,
        change=change,
        log=s.log,
        sd=sd,
        dof=dof,
        p_value=p_value,
        guard=_guard(s, change, sd_run, now_disturbed=now_disturbed, now_job_wide=now_job_wide),
        noisy_now=noisy_now,
        job_move=s.job_move if now_job_wide else "",
        components=words + (f"; heavy tails (t{nu:g})" if math.isfinite(nu) else ""),
    )


def _job_outliers(series: Sequence[_Series]) -> np.ndarray:
    """The last runs' positions (aligned from the newest, over the shortest window of at
    least ``TRIM_MIN_RUNS`` runs) that are outliers in at least half of ``series``: a
    job-wide event, a spike or a slower runner, that moved every metric of its run
    together."""
    series = [s for s in series if s.z.size >= TRIM_MIN_RUNS]
    if not series:
        return np.zeros(0, dtype=bool)
    k = min(s.z.size for s in series)
    return np.asarray(np.mean([s.outlier[-k:] for s in series], axis=0) >= 0.5, dtype=bool)


def _with_job_outliers(s: _Series, common: np.ndarray) -> _Series:
    """``s`` with the gate's job-wide outlier runs counted as its outliers too: a run where
    most of the gate's metrics ran slow (a slower pool) is one here as well, even where this
    metric's own noise kept it inside its outlier bound. It leaves the scale estimate and
    the guard compares the current run with it."""
    k = common.size
    if not k or s.z.size < k or not common.any():
        return s
    outlier = s.outlier.copy()
    outlier[-k:] |= common
    job_wide = s.job_wide.copy()
    job_wide[-k:] = common
    if np.array_equal(outlier, s.outlier):
        return replace(s, job_wide=job_wide)
    kept, var_between, dof_between = _between(s.z, outlier)
    return replace(
        s,
        outlier=outlier,
        job_wide=job_wide,
        kept=kept,
        var_between=var_between,
        dof_between=dof_between,
    )


def _job_shift(series: Sequence[_Series], between: _Prior) -> tuple[float, str]:
    """The median of the current runs' changes over ``series`` (one metric of the gate), each
    in SDs of its between-run spread: near 0 when one benchmark changed, large when the
    whole job moved (a spike, a slower pool). With it, words for a move that many series
    made together (at least ``JOB_MOVE_MIN`` of them), or ''."""
    shifts, moves = [], []
    for s in series:
        var, _ = _moderate(s.var_between, s.dof_between, between)
        if var > 0:
            shifts.append((s.zc - s.z_median) / math.sqrt(var))
            moves.append(s.zc - s.z_median)
    if not shifts:
        return 0.0, ""
    move = median(moves)
    pct = 100.0 * math.expm1(move) if all(s.log for s in series) else 100.0 * move
    words = ""
    if len(shifts) >= JOB_MOVE_MIN:
        words = (
            f"the whole job moved: {len(shifts)} benchmarks by {pct:+.1f}% in the median; a "
            "change to every benchmark and a runner or a spike that moved the whole job look "
            "the same, and a rerun tells them apart"
        )
    return median(shifts), words


def _tail_residuals(series: Sequence[_Series], between: _Prior, common: np.ndarray) -> np.ndarray:
    """Standardised baseline residuals of the gate's series, for the tail fit.

    Outliers stay in (they are what the tail is). Runs that are outliers in most series at
    once are left out: a job-wide event (a spike, a slower runner) moves every metric of its
    run together (``common``, from :func:`_job_outliers`); the outlier guard answers for
    those, the tails for the rest.
    """
    series = [s for s in series if s.z.size >= TRIM_MIN_RUNS]
    if not series:
        return np.zeros(0)
    k = common.size
    out = []
    for s in series:
        var, _ = _moderate(s.var_between, s.dof_between, between)
        if var > 0:
            z = s.z[-k:][~common & ~s.disturbed[-k:]]
            out.append((z - float(np.mean(s.kept))) / math.sqrt(var))
    return np.concatenate(out) if out else np.zeros(0)


def gate_evidence(candidates: Sequence[Candidate]) -> list[Evidence]:
    """Evidence for noisy candidates judged together.

    Each metric's prior comes from the same metric of the gate's other benchmarks (one
    runner, one kind of measurement: a step time lends nothing to a memory peak, and a
    throughput, the reciprocal of a step time, would only echo it); the tails are fitted
    over the whole gate.
    """
    series = [_series(c) for c in candidates]
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(candidates):
        groups.setdefault(c.current.metric, []).append(i)
    priors: list[tuple[_Prior, _Prior]] = [(_Prior(0.0, 0.0), _Prior(0.0, 0.0))] * len(series)
    residuals = []
    for members in groups.values():
        common = _job_outliers([series[i] for i in members])
        for i in members:
            series[i] = _with_job_outliers(series[i], common)
        group = [series[i] for i in members]
        between = fit_prior([s.var_between for s in group], [s.dof_between for s in group])
        within = fit_prior(
            [s.ss_within / s.dof_within if s.dof_within else 0.0 for s in group],
            [s.dof_within for s in group],
        )
        for i in members:
            priors[i] = (between, within)
        shift, words = _job_shift(group, between)
        for i in members:
            series[i] = replace(series[i], job_shift=shift, job_move=words)
        residuals.append(_tail_residuals(group, between, common))
    level = min((c.alpha for c in candidates), default=ALPHA) / max(len(candidates), 1)
    nu = fit_tail(np.concatenate(residuals), level) if residuals else math.inf
    return [_evidence(s, b, w, nu) for s, (b, w) in zip(series, priors, strict=True)]


def _run_ids(candidate: Candidate) -> tuple[str, ...]:
    return tuple(p.run_id for p in candidate.baseline)


def _commits(candidate: Candidate) -> tuple[str, ...]:
    return tuple(p.commit for p in candidate.baseline)


def _no_baseline(candidate: Candidate) -> Comparison:
    cur, k = candidate.current, len(candidate.baseline)
    return Comparison(
        benchmark=cur.benchmark,
        metric=cur.metric,
        unit=cur.unit,
        direction=cur.direction,
        verdict=Verdict.NO_BASELINE,
        reason=(
            f"only {k} comparable baseline run{'s' if k != 1 else ''} "
            f"(at least {MIN_BASELINE_RUNS} needed)"
        ),
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
        verdict := deterministic_verdict(cur.direction, change_pct, policy.min_effect_pct)
    ) is Verdict.UNCHANGED:
        reason = f"deterministic metric, {cur.centre:g} against {centre:g}: within tolerance"
    else:
        reason = (
            f"deterministic metric changed from {centre:g} to {cur.centre:g} "
            f"({change_pct:+.1f}%, tolerance {policy.min_effect_pct:g}%)"
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


def _effect_words(policy: MetricPolicy, min_effect: float) -> str:
    if policy.min_effect_abs > 0:
        return f"{min_effect:.3g}% minimum effect ({policy.min_effect_abs:g} points)"
    return f"{min_effect:g}% minimum effect"


def _judge(candidate: Candidate, ev: Evidence, p_adjusted: float, tests: int) -> Comparison:
    cur, policy = candidate.current, candidate.policy
    alpha = candidate.alpha
    min_effect = policy.min_effect_pct_at(ev.centre)
    k = len(candidate.baseline)
    change_pct = ev.change_pct
    if cur.unit == "ms":
        word = "slower" if change_pct > 0 else "faster"
    else:
        word = "higher" if change_pct > 0 else "lower"
    low, high = ev.interval()
    mde = ev.detectable(tests, alpha, min_effect)
    sign = worse_sign(cur.direction)
    bound = ev.worse_bound(sign, alpha)
    size = f"{abs(change_pct):.1f}% {word} than the median of {k} baseline runs"
    evidence = f"p={p_adjusted:.2g} after FDR adjustment (raw {ev.p_value:.2g}, alpha {alpha:g})"
    outcome = classify_change(
        change_pct=change_pct,
        p_adjusted=p_adjusted,
        min_effect_pct=min_effect,
        alpha=alpha,
        worse_bound_pct=bound,
        direction=cur.direction,
        guarded=bool(ev.guard),
    )
    power = f"{int(POWER * 100)}% power"
    if outcome is Outcome.RANK_BLOCKED:
        verdict = Verdict.INCONCLUSIVE
        reason = f"{size}, {evidence}, but {ev.guard}; more runs would settle it"
    elif outcome is Outcome.CHANGE:
        verdict = change_verdict(cur.direction, change_pct)
        reason = f"{size}, {evidence}, beyond the {_effect_words(policy, min_effect)}"
    elif outcome is Outcome.UNSURE:
        verdict = Verdict.INCONCLUSIVE
        reason = (
            f"{size}, but not significant ({evidence}); with this noise a change of "
            f"{size_text(mde)} is caught with {power}"
        )
    elif outcome is Outcome.BLIND:
        verdict = Verdict.INCONCLUSIVE
        reason = (
            f"{abs(change_pct):.1f}% {word}, but it cannot be called unchanged: it may be "
            f"up to {abs(bound):.1f}% worse, beyond the "
            f"{_effect_words(policy, min_effect)} (bound at alpha {alpha:g}; {evidence}); a "
            f"change of {size_text(mde)} is caught with {power}"
        )
    else:
        verdict = Verdict.UNCHANGED
        reason = (
            f"{abs(change_pct):.1f}% {word}: at most {abs(bound):.1f}% worse (bound at alpha "
            f"{alpha:g}), within the {_effect_words(policy, min_effect)} ({evidence}); a change "
            f"of {size_text(mde)} is caught with {power}"
        )
    if ev.noisy_now and verdict is Verdict.INCONCLUSIVE:
        reason += f" ({ev.noisy_now})"
    if ev.job_move and outcome is Outcome.CHANGE:
        reason += f" ({ev.job_move})"
    return Comparison(
        benchmark=cur.benchmark,
        metric=cur.metric,
        unit=cur.unit,
        direction=cur.direction,
        verdict=verdict,
        reason=reason,
        current_run_id=cur.run_id,
        current_centre=cur.centre,
        baseline_centre=ev.centre,
        change_pct=change_pct,
        ci_low_pct=low,
        ci_high_pct=high,
        p_value=ev.p_value,
        p_adjusted=p_adjusted,
        min_effect_pct=min_effect,
        mde_pct=mde,
        p_rank=None,
        baseline_run_ids=_run_ids(candidate),
        baseline_commits=_commits(candidate),
        alpha=alpha,
    )


def compare_candidates(candidates: Sequence[Candidate]) -> tuple[Comparison, ...]:
    """Judge every candidate of one gate, with FDR control across the noisy ones.

    The order of the result follows the input.
    """
    results: list[Comparison | None] = [None] * len(candidates)
    tested: list[int] = []
    for i, cand in enumerate(candidates):
        if len(cand.baseline) < MIN_BASELINE_RUNS:
            results[i] = _no_baseline(cand)
        elif cand.policy.deterministic or cand.policy.numerics:
            results[i] = _deterministic(cand)
        else:
            tested.append(i)
    evidences = gate_evidence([candidates[i] for i in tested])
    raw = [ev.p_value for ev in evidences]
    # A change a guard holds back (a baseline run already as far out, main moved) is no
    # discovery: it counts among the gate's tests, but its small p-value must not lower the
    # bar for the others. When a whole job ran slow (a slower runner pool), most metrics
    # are held back and their p-values would otherwise let a lone unguarded one through.
    free = benjamini_hochberg(
        [1.0 if ev.guard else p for ev, p in zip(evidences, raw, strict=True)]
    )
    shown = benjamini_hochberg(raw) if any(ev.guard for ev in evidences) else free
    adjusted = [a if ev.guard else f for ev, a, f in zip(evidences, shown, free, strict=True)]
    for i, ev, p_adj in zip(tested, evidences, adjusted, strict=True):
        results[i] = _judge(candidates[i], ev, p_adj, len(tested))
    return tuple(r for r in results if r is not None)


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
    none = _Prior(0.0, 0.0)
    return _evidence(s, none, none, math.inf).sd
