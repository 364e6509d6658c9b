"""Current run against its baseline window: prediction-interval test, FDR, verdicts.

See the package docstring for the assumptions.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import special

from perfgate.models import Comparison, MetricPolicy, RunPoint, Verdict
from perfgate.stats.decide import (
    ALPHA,
    Outcome,
    change_verdict,
    classify_change,
    deterministic_verdict,
)
from perfgate.stats.fdr import benjamini_hochberg
from perfgate.stats.summary import mad

"""False discovery rate of one gate: the share of flagged metrics allowed to be false."""

MIN_BASELINE_RUNS = 3
MAD_TO_SD = 1.4826
SCALE_FLOOR = 0.002
"""Smallest noise assumed, as a fraction of the centre: no timer is better than 0.2%."""
OUTLIER_MADS = 5.0
TRIM_MIN_RUNS = 10
MEDIAN_VARIANCE_FACTOR = math.pi / 2
NOISY_NOW_FACTOR = 3.0
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 7
NOISY_NOW_MIN_COV = 0.02


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
class _Evidence:
    centre: float
    change_pct: float
    ci_low_pct: float
    ci_high_pct: float
    p_value: float
    mde_pct: float
    noisy_now: str
    p_rank: float
    dof: float = math.inf
    spread_pct: float = 0.0
    """The prediction's scale in % of the baseline centre (the t statistic's denominator)."""

    def detectable_in(self, tests: int, alpha: float) -> float:
        """The smallest change significant on its own in a gate of ``tests`` noisy metrics:
        Benjamini-Hochberg's first step asks p <= alpha / tests of it."""
        level = alpha / max(tests, 1)
        return float(special.stdtrit(self.dof, 1.0 - level / 2.0)) * self.spread_pct


def _bootstrap_change_ci(
    centres: np.ndarray, current: float, excess: float, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    """95% percentile interval of the relative change by a residual bootstrap.

    A new run is modelled as its true level plus a residual drawn from the baseline runs'
    own residuals around their median (inflated for the degrees of freedom, plus any excess
    noise the current run shows); the baseline median is resampled with its runs. The
    interval is of (current - residual) / resampled median - 1, in percent.
    """
    k = centres.size
    rng = np.random.default_rng(seed)
    median = float(np.median(centres))
    residuals = (centres - median) * math.sqrt(k / max(k - 1, 1))
    idx = rng.integers(0, k, size=(BOOTSTRAP_RESAMPLES, k))
    resampled = centres[idx]
    half = k // 2
    if k % 2:
        base = np.partition(resampled, half, axis=1)[:, half]
    else:
        part = np.partition(resampled, (half - 1, half), axis=1)
        base = (part[:, half - 1] + part[:, half]) / 2.0
    noise = residuals[rng.integers(0, k, size=BOOTSTRAP_RESAMPLES)]
    if excess > 0:
        noise = noise + rng.normal(0.0, math.sqrt(excess), size=BOOTSTRAP_RESAMPLES)
    with np.errstate(divide="ignore", invalid="ignore"):
        change = ((current - noise) / base - 1.0) * 100.0
    # a resampled baseline of 0 (a metric that can be 0, e.g. a share) has no relative
    # change; with none left, an empty interval (low > high) leaves the t-based one alone
    change = change[np.isfinite(change)]
    if change.size == 0:
        return float("inf"), float("-inf")
    low, high = np.percentile(change, [2.5, 97.5])
    return float(low), float(high)


def _rank_p(centres: np.ndarray, current: float) -> float:
    """Two-sided rank (conformal) p-value of the current centre among the baseline's:
    exact under exchangeability, with no assumption on the shape of the noise."""
    k = centres.size
    above = int(np.sum(centres >= current)) + 1
    below = int(np.sum(centres <= current)) + 1
    return min(1.0, 2.0 * min(above, below) / (k + 1))


def _within_run_scale(points: Sequence[RunPoint]) -> tuple[float, int, float]:
    """Pooled spread of repeat centres inside runs.

    Returns (sd of one repeat centre, degrees of freedom, mean repeats per run).
    """
    ss, dof, total = 0.0, 0, 0
    for p in points:
        r = p.repeat_centres
        total += max(len(r), 1)
        if len(r) >= 2:
            mean = sum(r) / len(r)
            ss += sum((x - mean) ** 2 for x in r)
            dof += len(r) - 1
    mean_repeats = total / len(points) if points else 1.0
    if dof == 0:
        return 0.0, 0, mean_repeats
    return math.sqrt(ss / dof), dof, mean_repeats


def _trimmed_scale(values: np.ndarray, centre: float) -> tuple[float, int]:
    """Standard deviation of the values within OUTLIER_MADS scaled MADs of the centre.

    Nearly as efficient as the plain SD on clean data, yet one spike cannot inflate it;
    returns (scale, degrees of freedom).
    """
    robust = MAD_TO_SD * mad(values)
    if robust == 0 or values.size < TRIM_MIN_RUNS:
        # a MAD of a handful of runs is too unstable to judge outliers by
        kept = values
    else:
        kept = values[np.abs(values - centre) <= OUTLIER_MADS * robust]
    if kept.size < 2:
        return 0.0, 1
    return float(np.std(kept, ddof=1)), int(kept.size - 1)


def _cov(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    if mean == 0:
        return 0.0
    var = sum((x - mean) ** 2 for x in values) / (len(values) - 1)
    return math.sqrt(var) / abs(mean)


def _evidence(candidate: Candidate) -> _Evidence:
    current, baseline = candidate.current, candidate.baseline
    centres = np.asarray([p.centre for p in baseline], dtype=float)
    k = centres.size
    centre = float(np.median(centres))
    s_between, dof_between = _trimmed_scale(centres, centre)
    s_repeat, dof_within, mean_repeats = _within_run_scale((*baseline, current))
    s_within = s_repeat / math.sqrt(mean_repeats)
    if dof_within == 0:
        # Runs of one repeat: the step-level (block bootstrap) error is all we know inside.
        ses = [p.centre_se for p in (*baseline, current) if p.centre_se is not None]
        if ses:
            s_within, dof_within = math.sqrt(sum(x * x for x in ses) / len(ses)), len(ses)
    if s_between >= s_within:
        scale, dof = s_between, dof_between
    else:
        scale, dof = s_within, dof_within
    scale = max(scale, SCALE_FLOOR * abs(centre))
    # The baseline centre is a median: its variance is about pi/2 times that of a mean.
    # Noise the current run shows beyond what runs usually show inside themselves is added
    # to the prediction: a run measured while the machine is noisy needs a larger change to
    # count, rather than being trusted or thrown away.
    current_cov = _cov(current.repeat_centres)
    usual = [_cov(p.repeat_centres) for p in baseline if len(p.repeat_centres) >= 2]
    usual_cov = statistics.median(usual) if usual else 0.0
    usual_high = float(np.quantile(usual, 0.9)) if usual else 0.0
    reps = max(len(current.repeat_centres), 1)
    excess = max(current_cov**2 - usual_high**2, 0.0) * current.centre**2 / reps
    spread = math.sqrt(scale**2 * (1.0 + MEDIAN_VARIANCE_FACTOR / k) + excess)
    t_stat = (current.centre - centre) / spread
    p_value = float(2.0 * special.stdtr(dof, -abs(t_stat)))
    to_pct = 100.0 / abs(centre)
    change_pct = (current.centre - centre) * to_pct
    half_ci = float(special.stdtrit(dof, 0.975)) * spread * to_pct
    mde_pct = float(special.stdtrit(dof, 1.0 - candidate.alpha / 2.0)) * spread * to_pct

    noisy_now = ""
    if current_cov > NOISY_NOW_MIN_COV and current_cov > NOISY_NOW_FACTOR * usual_cov:
        noisy_now = (
            f"this run's repeats disagree ({current_cov:.1%} spread against a usual "
            f"{usual_cov:.1%}): the machine looks noisy now"
        )
    # The reported interval covers both the t-based prediction interval and the residual
    # bootstrap's: the first is honest for short histories, the second for skewed noise.
    boot_low, boot_high = _bootstrap_change_ci(centres, current.centre, excess)
    return _Evidence(
        centre=centre,
        change_pct=change_pct,
        ci_low_pct=min(change_pct - half_ci, boot_low),
        ci_high_pct=max(change_pct + half_ci, boot_high),
        p_value=p_value,
        mde_pct=mde_pct,
        noisy_now=noisy_now,
        p_rank=_rank_p(centres, current.centre),
        dof=float(dof),
        spread_pct=spread * to_pct,
    )


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
    )


def _deterministic(candidate: Candidate) -> Comparison:
    cur, policy = candidate.current, candidate.policy
    centre = float(np.median([p.centre for p in candidate.baseline]))
    change_pct = 0.0 if centre == cur.centre else (cur.centre - centre) * 100.0 / abs(centre or 1.0)
    verdict = deterministic_verdict(cur.direction, change_pct, policy.min_effect_pct)
    if verdict is Verdict.UNCHANGED:
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
    )


def _effect_words(policy: MetricPolicy, min_effect: float) -> str:
    if policy.min_effect_abs > 0:
        return f"{min_effect:.3g}% minimum effect ({policy.min_effect_abs:g} points)"
    return f"{min_effect:g}% minimum effect"


def _judge(candidate: Candidate, ev: _Evidence, p_adjusted: float) -> Comparison:
    cur, policy = candidate.current, candidate.policy
    min_effect = policy.min_effect_pct_at(ev.centre)
    k = len(candidate.baseline)
    if cur.unit == "ms":
        word = "slower" if ev.change_pct > 0 else "faster"
    else:
        word = "higher" if ev.change_pct > 0 else "lower"
    size = f"{abs(ev.change_pct):.1f}% {word} than the median of {k} baseline runs"
    evidence = f"p={p_adjusted:.2g} after FDR adjustment, raw {ev.p_value:.2g}"
    outcome = classify_change(
        change_pct=ev.change_pct,
        p_adjusted=p_adjusted,
        p_rank=ev.p_rank,
        baseline_runs=k,
        mde_pct=ev.mde_pct,
        min_effect_pct=min_effect,
        alpha=candidate.alpha,
    )
    if outcome is Outcome.RANK_BLOCKED:
        verdict = Verdict.INCONCLUSIVE
        as_far = max(int(round(ev.p_rank * (k + 1) / 2)) - 1, 0)
        reason = (
            f"{size}, {evidence}, but {as_far} of the {k} baseline runs are already as far "
            "out; more runs would settle it"
        )
    elif outcome is Outcome.CHANGE:
        verdict = change_verdict(cur.direction, ev.change_pct)
        reason = f"{size}, {evidence}, beyond the {_effect_words(policy, min_effect)}"
    elif outcome is Outcome.UNSURE:
        verdict = Verdict.INCONCLUSIVE
        reason = (
            f"{size}, but not significant ({evidence}); with this noise only changes "
            f"above {ev.mde_pct:.1f}% can be told apart"
        )
        if ev.noisy_now:
            reason += f" ({ev.noisy_now})"
    elif outcome is Outcome.BLIND:
        verdict = Verdict.INCONCLUSIVE
        reason = (
            f"{abs(ev.change_pct):.1f}% {word}, but too noisy to call it unchanged: only "
            f"changes above {ev.mde_pct:.1f}% can be told apart ({evidence})"
        )
        if ev.noisy_now:
            reason += f" ({ev.noisy_now})"
    else:
        verdict = Verdict.UNCHANGED
        reason = (
            f"{abs(ev.change_pct):.1f}% {word}, within the "
            f"{_effect_words(policy, min_effect)} ({evidence}); changes above "
            f"{ev.mde_pct:.1f}% would have shown"
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
        baseline_centre=ev.centre,
        change_pct=ev.change_pct,
        ci_low_pct=ev.ci_low_pct,
        ci_high_pct=ev.ci_high_pct,
        p_value=ev.p_value,
        p_adjusted=p_adjusted,
        min_effect_pct=min_effect,
        mde_pct=ev.mde_pct,
        p_rank=ev.p_rank,
        baseline_run_ids=_run_ids(candidate),
        baseline_commits=_commits(candidate),
    )


def compare_candidates(candidates: Sequence[Candidate]) -> tuple[Comparison, ...]:
    """Judge every candidate of one gate, with FDR control across the noisy ones.

    The order of the result follows the input.
    """
    results: list[Comparison | None] = [None] * len(candidates)
    tested: list[tuple[int, _Evidence]] = []
    for i, cand in enumerate(candidates):
        if len(cand.baseline) < MIN_BASELINE_RUNS:
            results[i] = _no_baseline(cand)
        elif cand.policy.deterministic:
            results[i] = _deterministic(cand)
        else:
            tested.append((i, _evidence(cand)))
    adjusted = benjamini_hochberg([ev.p_value for _, ev in tested])
    for (i, ev), p_adj in zip(tested, adjusted, strict=True):
        # The detectable effect a verdict reports is the gate's, not one test's: with m
        # metrics judged together, a lone change must reach alpha / m before adjustment.
        mde = ev.detectable_in(len(tested), candidates[i].alpha)
        results[i] = _judge(candidates[i], replace(ev, mde_pct=mde), p_adj)
    return tuple(r for r in results if r is not None)
