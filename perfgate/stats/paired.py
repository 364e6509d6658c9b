"""Paired A/B gating: the head against the base measured right next to it, in the same job.

``perfgate run --ab REF`` runs repeats of the base (REF) and of the head in pairs, on one
machine, in one job, in random order inside each pair. This module decides from those pairs.

Assumptions, in plain words:

* A pair is two numbers: the centre of one base repeat (one worker process) and the centre of
  the head repeat run right next to it. Pairs are independent of each other.
* Noise that hits the whole job or drifts slowly (a slower machine, a neighbour that stays for
  minutes) slows both members of a pair alike and is multiplicative, so it cancels in the
  ratio head/base. What is left is process-level noise, and the spread of the pair ratios
  measures it now, on this machine: no history is needed.
* With few pairs that spread is itself uncertain (3 pairs give 2 degrees of freedom), which
  makes the test weak. Optionally the caller passes what the base branch's own runs say
  about process noise (:func:`pair_noise_from_history`: the pooled spread of repeat centres
  inside runs, times sqrt(2) for two members). That spread was measured across whole runs,
  so it includes drift that adjacent pair members do not share: it can only overstate the
  pair noise. As in :mod:`perfgate.stats.compare`, the larger of the two estimates is used,
  with the degrees of freedom of the one used: pairs noisier than usual are judged by their
  own spread, and pairs cannot look more precise than the machine usually is.
* Work on log-ratios ``log(head/base)``. The one thing known about them without a model is
  the order inside each pair: a fair coin put the base first or second. When the head does
  not change speed, which member of a pair is the head is that coin alone, so the sign of
  each log-ratio is a fair coin too, whatever the noise: heavy tails, a neighbour that comes
  and goes, processes that land in two speed levels. Two tests are made and a change must
  pass both:

  - the one-sample Student t on the (weighted, below) log-ratios, two-sided: it gives the
    interval, the minimum detectable effect and the pairs a change needs;
  - the pair-order (sign-flip randomization) test of their (weighted) mean, :func:`pair_order_p`:
    exact under that coin alone (all 2^n sign patterns up to ``EXACT_UP_TO`` pairs, a fixed
    seeded sample of them beyond).

  The t test alone was tried and failed: on this project's 2-core runner, a check of three
  A/A pairs beside a CPU hog agreed by chance to +6.9% [+5.8, +7.9] (p = 0.0025) and failed,
  1 of 12 A/A checks; A/A pairs of one job there spread 5-27% in their log-ratio from one
  job to the next, with single pairs at +48%, so a spread measured from 3 pairs (2 degrees of
  freedom) says little. The price: with n pairs the smallest two-sided pair-order p is
  2/2^n, so fewer than :func:`pairs_to_decide` pairs (8 at alpha 0.01) cannot call a change
  of any size, and fewer than 7 cannot call one ``unchanged``; ``check --mode ab`` measures
  more pairs for what is left open. Trimming outlying pairs before the t test was tried and
  rejected: with 5 pairs it made false alarms 3-5 times more frequent than the nominal rate.
* A neighbour that comes for a stretch of pairs (minutes) makes those pairs noisier than the
  rest, and an equally weighted mean drowns in them: a 10% slowdown under a 4x burst over 10
  of 48 pairs was found in about 7 sequences of 10. So both tests weigh each pair by the
  inverse of the noise around it (:func:`pair_weights`: its neighbours' mean square, half
  and half with the whole sequence's; uniform up to 11 pairs): the t test is then weighted
  least squares (its interval, MDE and pairs needed from the weighted spread), and the
  pair-order test sums the weighted log-ratios. The weights come from absolute values alone,
  so the pair-order test stays exact. ``bench/looks.py``: burst 80 -> 96% found, other
  shapes within 1.6 points, A/A within alpha.
* The change reported (and held against the minimum effect) is the Hodges-Lehmann estimate of
  the log-ratios, the median of all pairwise means: one bad pair among five barely moves it.
  The 95% interval, the p-value and the minimum detectable effect come from the t model.
* No timer is better than 0.2%: the spread of one log-ratio is taken as at least
  ``SCALE_FLOOR * sqrt(2)``, so identical pairs cannot make any tiny change significant.
* Verdicts mean what they mean in :mod:`perfgate.stats.compare`: p-values (the larger of
  the two tests') are adjusted with Benjamini-Hochberg across every metric of the gate (the
  changes that point worse a family apart from those that point better); a
  regression is significant after adjustment *and* at least the metric's minimum effect; a
  change past the minimum effect without enough evidence is ``inconclusive``, with an
  estimate of how many pairs would settle it (taking the observed change and spread as true,
  for 80% power at the significance level, and at least :func:`pairs_to_decide`); a smaller
  change is ``unchanged`` only when its worse bound at alpha lies inside the minimum effect
  *and* the pair-order test rejects a change of the minimum effect on the worse side (the
  log-ratios less that effect, one-sided), else ``inconclusive`` too. A single pair cannot
  show its own noise: it is never significant and never called unchanged. Deterministic
  metrics are compared exactly, without a test; a result that must not move (the loss,
  ``numerics``) is a regression when it moved beyond its tolerance either way, whatever the
  time did (:func:`perfgate.stats.decide.numerics_verdict`).
* compare.py's rank guard (a run must lie beyond every baseline run) is, here, the pair-order
  test: both protect a verdict from noise no model describes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from perfgate.metrics import is_time
from perfgate.models import Comparison, Direction, MetricPolicy, RunPoint, Verdict
from perfgate.stats.compare import MAD_TO_SD, SCALE_FLOOR, ratio_pct
from perfgate.stats.decide import (
    ALPHA,
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
    worst_case,
)
from perfgate.stats.fdr import by_direction

CI_LEVEL = 0.95
"""The confidence level of a pair's interval (the verdict is the tests', not the interval's)."""
MAX_PAIRS = 1000
"""Largest number of pairs ``pairs_needed`` reports; beyond it the metric is too noisy."""
MIN_PAIRS_ADVISED = 3
"""Pairs suggested when a single pair leaves the noise unknown."""
LOG_RATIO_FLOOR = SCALE_FLOOR * math.sqrt(2.0)
"""Smallest spread of one log-ratio: two members, each at least ``SCALE_FLOOR`` noisy."""
EXACT_UP_TO = 16
"""Pairs up to which :func:`pair_order_p` counts every sign pattern (2^16 of them)."""
SAMPLED_PATTERNS = 1 << 16
"""Sign patterns :func:`pair_order_p` draws (seeded) beyond ``EXACT_UP_TO`` pairs."""


def pairs_to_decide(alpha: float = ALPHA, *, one_sided: bool = False) -> int:
    """Fewest pairs whose pair-order test can reach ``alpha``: the smallest p of n pairs is
    2/2^n two-sided (a change), 1/2^n one-sided (``unchanged``: the equivalence side)."""
    smallest = 1.0 if one_sided else 2.0
    n = 1
    while smallest / 2.0**n >= alpha:
        n += 1
    return n


@lru_cache(maxsize=EXACT_UP_TO)
def _patterns(n: int) -> np.ndarray:
    """Every sign pattern of n pairs (n up to ``EXACT_UP_TO``), one row each."""
    bits = (np.arange(1 << n)[:, None] >> np.arange(n)) & 1
    return np.asarray(1 - 2 * bits, dtype=float)


def _sign_flip_sums(x: np.ndarray) -> np.ndarray:
    """The sum of ``x`` under every sign pattern, or (beyond ``EXACT_UP_TO`` values) under
    ``SAMPLED_PATTERNS`` patterns drawn with a seed fixed by the count, in blocks."""
    if x.size <= EXACT_UP_TO:
        return np.asarray(_patterns(x.size) @ x, dtype=float)
    # each drawn pattern, cut in chunks of CHUNK values: a row of every chunk's table of
    # sums (the sequential looks of ``check`` call this at every look: table lookups, not a
    # fresh draw and a matrix product, for the same sums)
    sums = np.zeros(SAMPLED_PATTERNS)
    for c, rows in enumerate(_sampled_rows(x.size)):
        chunk = x[c * CHUNK : (c + 1) * CHUNK]
        sums += np.take(_patterns(chunk.size) @ chunk, rows)
    return sums


CHUNK = 8
"""Values per chunk of a drawn sign pattern (a table of 2^CHUNK sums per chunk)."""


@lru_cache(maxsize=8)
def _sampled_rows(n: int) -> np.ndarray:
    """The ``SAMPLED_PATTERNS`` sign patterns of n values (more than ``EXACT_UP_TO``), drawn
    with a seed fixed by n in blocks of 4096, as row numbers of :func:`_patterns` of each
    chunk of ``CHUNK`` values: one row per chunk, one column per pattern."""
    rng = np.random.default_rng(n)
    block = 4096
    bits = np.concatenate(
        [rng.integers(0, 2, size=(block, n)) for _ in range(SAMPLED_PATTERNS // block)]
    )
    starts = range(0, n, CHUNK)
    return np.stack([bits[:, s : s + CHUNK] @ (1 << np.arange(min(CHUNK, n - s))) for s in starts])


def pair_order_p(values: Sequence[float], *, side: int = 0) -> float:
    """The pair-order (sign-flip randomization) p-value of the mean of ``values``.

    Under no change each value's sign is a fair coin (which member of its pair was the head),
    so the observed sum is one of the sums with every pattern of signs, equally likely.
    ``side`` 0: two-sided, the share of patterns whose sum is at least as far from zero;
    +1: the share at least as high; -1: at least as low. Exact up to ``EXACT_UP_TO`` values
    (the observed pattern is one of those counted); beyond, from a fixed seeded sample, as
    ``(1 + hits) / (1 + draws)``.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return 1.0
    sums = _sign_flip_sums(x)
    observed = float(x.sum())
    # sums that equal the observed one in exact arithmetic may differ in the last bits
    tie = 1e-9 * float(np.abs(x).sum())
    if side > 0:
        hits = int(np.count_nonzero(sums >= observed - tie))
    elif side < 0:
        hits = int(np.count_nonzero(sums <= observed + tie))
    else:
        hits = int(np.count_nonzero(np.abs(sums) >= abs(observed) - tie))
    if x.size <= EXACT_UP_TO:
        return hits / sums.size
    return (1 + hits) / (1 + sums.size)


@dataclass(frozen=True)
class Pair:
    """One base repeat and the head repeat run right next to it (their centres)."""

    base: float
    head: float


@dataclass(frozen=True)
class PairNoise:
    """Spread of one pair's log-ratio known from elsewhere, with its degrees of freedom."""

    log_sd: float
    dof: int
    source: str = "the base branch's runs"


def pair_noise_from_repeats(
    runs: Iterable[Sequence[float]], source: str = "the base branch's runs"
) -> PairNoise | None:
    """Pair noise implied by repeat centres grouped by run: ``sqrt(2)`` times the pooled
    standard deviation of the log repeat centres around their run's mean.

    Runs with fewer than two positive finite repeat centres add nothing; ``None`` when no run
    has two.
    """
    ss, dof = 0.0, 0
    for run in runs:
        logs = [math.log(x) for x in run if math.isfinite(x) and x > 0]
        if len(logs) >= 2:
            mean = statistics.fmean(logs)
            ss += sum((x - mean) ** 2 for x in logs)
            dof += len(logs) - 1
    if dof == 0:
        return None
    return PairNoise(log_sd=math.sqrt(2.0 * ss / dof), dof=dof, source=source)


def pair_noise_from_history(points: Sequence[RunPoint]) -> PairNoise | None:
    """:func:`pair_noise_from_repeats` over a metric's baseline window (its RunPoints)."""
    k = len(points)
    return pair_noise_from_repeats(
        (p.repeat_centres for p in points),
        source=f"{k} base-branch run{'s' if k != 1 else ''}",
    )


@dataclass(frozen=True)
class PairedEvidence:
    """What the pairs of one (benchmark, metric) show, before the gate-wide adjustment.

    ``p_value`` is ``None`` where no test was made (a single pair and no history noise, or
    a deterministic metric): else the larger of the t test's (``p_t``) and the pair-order
    test's (``p_order``); ``change_pct`` is ``None`` only when there are no pairs.
    ``p_equivalence``: the pair-order test, one-sided, of a change of the minimum effect on
    the worse side (``unchanged`` needs it below alpha).
    ``noise_from`` says whose spread the test used (``"pairs"`` or the history's source),
    ``dof`` its degrees of freedom. ``pairs_needed``: pairs in all for 80% power against the
    observed change (at least the minimum effect) at the spread used; ``None`` when untested
    or past ``MAX_PAIRS``.
    """

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    policy: MetricPolicy
    run_id: str
    base_run_id: str
    base_commit: str
    n_pairs: int
    alpha: float
    base_centre: float | None
    head_centre: float | None
    change_pct: float | None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    p_value: float | None = None
    mde_pct: float | None = None
    worse_bound_pct: float | None = None
    """The one-sided (1 - alpha) bound of the change on its worse side: ``unchanged`` only
    when it lies inside the minimum effect."""
    p_t: float | None = None
    p_order: float | None = None
    p_equivalence: float | None = None
    log_ratio_sd: float | None = None
    dof: int | None = None
    noise_from: str = ""
    pairs_needed: int | None = None


def hodges_lehmann(values: Sequence[float]) -> float:
    """Median of the Walsh averages ``(x_i + x_j) / 2`` over ``i <= j``."""
    if not values:
        raise ValueError("no values")
    x = list(values)
    return statistics.median((a + b) / 2.0 for i, a in enumerate(x) for b in x[i:])


def pairs_for_power(
    log_sd: float,
    effect_log: float,
    *,
    start: int = 2,
    dof: int | None = None,
    alpha: float = ALPHA,
) -> int | None:
    """Smallest number of pairs (at least ``start``) that would detect the effect.

    Detect means: the two-sided t test at ``alpha`` rejects with chance ``POWER`` (exact, from
    the noncentral t) when the true change is ``effect_log`` (a log-ratio) and one log-ratio
    has spread ``log_sd``, known with ``dof`` degrees of freedom (``None``: estimated from the
    n pairs themselves, n - 1); ``None`` past ``MAX_PAIRS``.
    """
    from scipy import special  # here, not above: 0.2 s of import (test_import_cost.py)

    effect = abs(effect_log)
    scale = max(log_sd, LOG_RATIO_FLOOR)
    if effect == 0.0:
        return None
    # With the spread known exactly (a z test) fewer pairs would do, never more: start the
    # search just below the z test's answer.
    z = float(special.ndtri(1.0 - alpha / 2.0) + special.ndtri(POWER))
    guess = int((z * scale / effect) ** 2) - 1
    low = max(start, 2 if dof is None else 1, min(guess, MAX_PAIRS + 1))
    width = 4
    while low <= MAX_PAIRS:
        n = np.arange(low, min(low + width, MAX_PAIRS + 1), dtype=float)
        df = n - 1 if dof is None else np.full_like(n, float(dof))
        critical = special.stdtrit(df, 1.0 - alpha / 2.0)
        shift = effect * np.sqrt(n) / scale
        reached = np.flatnonzero(_two_sided_power(df, shift, critical) >= POWER)
        if reached.size:
            return int(n[reached[0]])
        low, width = low + width, width * 4
    return None


def _two_sided_power(df: np.ndarray, shift: np.ndarray, critical: np.ndarray) -> np.ndarray:
    """P(|T| > critical) for T noncentral t with ``df`` and noncentrality ``shift``.

    Both tails are taken as lower tails, P(T > c) being P(-T < -c) with -T noncentral t of
    noncentrality -shift, so neither is 1 minus a number near 1. scipy's ``nctdtr`` returns
    nan for some tails below about 1e-11 (scipy issues 25106 and 25470; a quarter of this
    search's evaluations, checked against a series summed independently): such a tail is
    counted as 0, which moves the power by less than 1e-11.
    """
    from scipy import special

    upper = np.nan_to_num(special.nctdtr(df, -shift, -critical), nan=0.0)
    lower = np.nan_to_num(special.nctdtr(df, shift, -critical), nan=0.0)
    out: np.ndarray = upper + lower
    return out


def _sd(values: Sequence[float], mean: float) -> float:
    """Sample standard deviation (n - 1), in plain floats."""
    return math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (len(values) - 1))


NEIGHBOUR_PAIRS = 5
"""Pairs on each side of a pair whose spread says how noisy the machine was around it:
about the stretch a neighbour process stays (a minute or more, pairs of a few seconds)."""


def pair_weights(log_ratios: Sequence[float]) -> np.ndarray | None:
    """Each pair's weight, the inverse of the noise around it (None: all alike).

    The noise around a pair is the mean square of its ``NEIGHBOUR_PAIRS`` neighbours'
    log-ratios on each side (not its own: that is its evidence), averaged half and half with
    the whole sequence's robust variance (so ten neighbours count as much as the rest). A
    neighbour that came for a stretch of pairs weighs those pairs down instead of drowning
    the mean. Only absolute values enter, so every sign pattern of the pair-order test sees
    the same weights: the test stays exact. None where every pair is each other's neighbour
    (too few pairs to tell a stretch from the rest).
    """
    x = np.asarray(log_ratios, dtype=float)
    n = x.size
    if n <= 2 * NEIGHBOUR_PAIRS + 1:
        return None
    sq = x * x
    total = np.concatenate(([0.0], np.cumsum(sq)))
    i = np.arange(n)
    lo, hi = np.maximum(i - NEIGHBOUR_PAIRS, 0), np.minimum(i + NEIGHBOUR_PAIRS + 1, n)
    local = (total[hi] - total[lo] - sq) / (hi - lo - 1)
    whole = (float(np.median(np.abs(x))) * MAD_TO_SD) ** 2
    out: np.ndarray = 1.0 / np.maximum(0.5 * local + 0.5 * whole, LOG_RATIO_FLOOR**2)
    return out


def _weighted(d: Sequence[float]) -> tuple[float, float | None, list[float]]:
    """The log-ratios' mean, their spread as one pair's SD (None for one pair) and the
    values the pair-order test sums: each weighted by :func:`pair_weights` (weighted least
    squares: the spread is the residuals' weighted mean square scaled to an average pair)."""
    w = pair_weights(d)
    n = len(d)
    if w is None:
        mean = statistics.fmean(d)
        return mean, _sd(d, mean) if n >= 2 else None, list(d)
    x = np.asarray(d, dtype=float)
    mean = float(np.sum(w * x) / np.sum(w))
    var = float(np.sum(w * (x - mean) ** 2)) / (n - 1) * n / float(np.sum(w))
    return mean, math.sqrt(var), (w * x).tolist()


def _check(pairs: Sequence[Pair], *, positive: bool) -> None:
    for i, p in enumerate(pairs):
        ok = math.isfinite(p.base) and math.isfinite(p.head)
        if ok and positive:
            ok = p.base > 0 and p.head > 0
        if not ok:
            need = "positive finite numbers" if positive else "finite numbers"
            raise ValueError(f"pair {i}: base and head must be {need}, got {p!r}")


def compare_pairs(
    pairs: Sequence[Pair],
    *,
    benchmark: str,
    metric: str,
    unit: str,
    direction: Direction,
    policy: MetricPolicy,
    run_id: str,
    base_run_id: str,
    base_commit: str = "",
    noise: PairNoise | None = None,
    alpha: float = ALPHA,
) -> PairedEvidence:
    """Evidence of one (benchmark, metric) from its base/head pairs; see the module docstring.

    ``noise``: the pair noise the base branch's runs imply (:func:`pair_noise_from_history`);
    used when larger than the pairs' own spread, or when there is a single pair. ``alpha``:
    the significance level (lower at a look of a sequential confirmation, as in compare.py).

    Raises:
        ValueError: a base or head value that is not finite, or (for a noisy metric) not
            positive: a ratio needs both.
    """
    from scipy import special

    empty = PairedEvidence(
        benchmark=benchmark,
        metric=metric,
        unit=unit,
        direction=direction,
        policy=policy,
        run_id=run_id,
        base_run_id=base_run_id,
        base_commit=base_commit,
        n_pairs=len(pairs),
        alpha=alpha,
        base_centre=None,
        head_centre=None,
        change_pct=None,
    )
    if not pairs:
        return empty
    exact = policy.deterministic or policy.numerics
    _check(pairs, positive=not exact)
    base_centre = float(statistics.median(p.base for p in pairs))
    head_centre = float(statistics.median(p.head for p in pairs))
    if exact:
        change = relative_change_pct(base_centre, head_centre)
        return replace(empty, base_centre=base_centre, head_centre=head_centre, change_pct=change)
    d = [math.log(p.head / p.base) for p in pairs]
    n = len(d)
    centre = hodges_lehmann(d)
    mean, spread, summed = _weighted(d)
    own = max(spread, LOG_RATIO_FLOOR) if spread is not None else None
    prior = max(noise.log_sd, LOG_RATIO_FLOOR) if noise is not None else None
    if own is not None and (prior is None or own >= prior):
        sd, dof, noise_from, fixed_dof = own, n - 1, "pairs", None
    elif noise is not None and prior is not None:
        sd, dof, noise_from, fixed_dof = prior, noise.dof, noise.source, noise.dof
    else:
        return replace(
            empty, base_centre=base_centre, head_centre=head_centre, change_pct=ratio_pct(centre)
        )
    # Pairs that would settle it: enough to detect the change seen or, when that is below
    # the minimum effect, a change of the minimum effect; never fewer than can decide.
    limit = math.log1p(policy.min_effect_pct / 100.0)
    target = max(abs(centre), limit)
    se = sd / math.sqrt(n)
    p_t = float(2.0 * special.stdtr(dof, -abs(mean / se)))
    p_order = pair_order_p(summed)
    sign = worse_sign(direction)
    p_equivalence = pair_order_p(_weighted([sign * x - limit for x in d])[2], side=-1)
    half_ci = float(special.stdtrit(dof, 0.5 + CI_LEVEL / 2.0)) * se
    # the change caught with POWER: significant, and measured at least the minimum effect
    # (none while the pairs are too few for the pair-order test to reach alpha)
    crit = float(special.stdtrit(dof, 1.0 - alpha / 2.0)) * se
    mde = (
        max(crit, limit) + float(special.stdtrit(dof, POWER)) * se
        if n >= pairs_to_decide(alpha)
        else None
    )
    reach = float(special.stdtrit(dof, 1.0 - alpha)) * se
    worse = mean + reach if sign > 0 else mean - reach
    needed = pairs_for_power(sd, target, start=n + 1, dof=fixed_dof, alpha=alpha)
    return replace(
        empty,
        base_centre=base_centre,
        head_centre=head_centre,
        change_pct=ratio_pct(centre),
        ci_low_pct=ratio_pct(mean - half_ci),
        ci_high_pct=ratio_pct(mean + half_ci),
        p_value=max(p_t, p_order),
        mde_pct=None if mde is None else ratio_pct(mde),
        worse_bound_pct=ratio_pct(worse),
        p_t=p_t,
        p_order=p_order,
        p_equivalence=p_equivalence,
        log_ratio_sd=sd,
        dof=dof,
        noise_from=noise_from,
        pairs_needed=None if needed is None else max(needed, pairs_to_decide(alpha)),
    )


def _words(ev: PairedEvidence, change_pct: float) -> str:
    if is_time(ev.unit):
        word = "slower" if change_pct > 0 else "faster"
    else:
        word = "higher" if change_pct > 0 else "lower"
    return f"{fixed(abs(change_pct), '.1f')}% {word}"


def _pairs(n: int) -> str:
    return f"{n} pair{'s' if n != 1 else ''}"


def _comparison(
    ev: PairedEvidence, verdict: Verdict, reason: str, p_adjusted: float | None = None
) -> Comparison:
    return Comparison(
        benchmark=ev.benchmark,
        metric=ev.metric,
        unit=ev.unit,
        direction=ev.direction,
        verdict=verdict,
        reason=reason,
        current_run_id=ev.run_id,
        current_centre=ev.head_centre,
        baseline_centre=ev.base_centre,
        baseline_run_ids=(ev.base_run_id,),
        baseline_commits=(ev.base_commit,) if ev.base_commit else (),
        change_pct=ev.change_pct,
        ci_low_pct=ev.ci_low_pct,
        ci_high_pct=ev.ci_high_pct,
        ci_level=CI_LEVEL if ev.ci_low_pct is not None else None,
        p_value=ev.p_value,
        p_adjusted=p_adjusted,
        min_effect_pct=ev.policy.min_effect_pct,
        mde_pct=ev.mde_pct,
        alpha=ev.alpha,
        method="paired",
    )


def _numerics(ev: PairedEvidence) -> Comparison:
    """A result that must not move (the loss), head against base: a change beyond the
    tolerance either way is a regression (:func:`perfgate.stats.decide.numerics_verdict`)."""
    base, head = float(ev.base_centre or 0.0), float(ev.head_centre or 0.0)
    verdict, _, reason = numerics_verdict(
        ev.metric, base, head, ev.policy.min_effect_pct, against=" in the base measured beside it"
    )
    return replace(_comparison(ev, verdict, reason), kind="numerics")


def _deterministic(ev: PairedEvidence, change: float) -> Comparison:
    base, head = ev.base_centre, ev.head_centre
    tolerance = ev.policy.min_effect_pct
    verdict = deterministic_verdict(ev.direction, change, tolerance)
    if verdict is Verdict.UNCHANGED:
        reason = f"deterministic metric, {head:g} against {base:g} in the base: within tolerance"
        return _comparison(ev, verdict, reason)
    reason = (
        f"deterministic metric changed from {base:g} in the base to {head:g} "
        f"({fixed(change, '+.1f')}%, tolerance {tolerance:g}%)"
    )
    return _comparison(ev, verdict, reason)


def _single_pair(ev: PairedEvidence, change: float) -> Comparison:
    size = f"{_words(ev, change)} than the base measured alongside it (1 pair)"
    reason = (
        f"{size}, but a single pair cannot show its own noise; run at least "
        f"{MIN_PAIRS_ADVISED} pairs"
    )
    return _comparison(ev, Verdict.INCONCLUSIVE, reason)


def _more_pairs(ev: PairedEvidence, what: str) -> str:
    if ev.pairs_needed is None:
        return f"more than {MAX_PAIRS} pairs would be needed: the pairs disagree too much"
    extra = ev.pairs_needed - ev.n_pairs
    return f"about {extra} more pair{'s' if extra != 1 else ''} ({ev.pairs_needed} in all) {what}"


def _judge(ev: PairedEvidence, change: float, p_adjusted: float) -> Comparison:
    min_effect = ev.policy.min_effect_pct
    borrowed = ev.noise_from not in ("", "pairs")
    note = f"; pair noise from {ev.noise_from}" if borrowed else ""
    evidence = (
        f"p={p_adjusted:.2g} after FDR adjustment (raw: t test {ev.p_t:.2g}, pair-order "
        f"test {ev.p_order:.2g}; alpha {ev.alpha:g})"
    )
    bound = ev.worse_bound_pct if ev.worse_bound_pct is not None else math.inf
    if ev.mde_pct is None:
        caught = (
            f"no change of any size can be shown with fewer than {pairs_to_decide(ev.alpha)} "
            "pairs (the pair-order test)"
        )
    else:
        caught = f"a change of {size_text(ev.mde_pct)} is caught with {int(POWER * 100)}% power"
    # the t bound may lie inside the minimum effect while the pair-order test, which holds
    # without a noise model, cannot rule it out: then it is not shown unchanged
    outcome = classify_change(
        change_pct=change,
        p_adjusted=p_adjusted,
        min_effect_pct=min_effect,
        alpha=ev.alpha,
        worse_bound_pct=bound,
        direction=ev.direction,
    )
    order_blind = outcome is Outcome.UNCHANGED and not (ev.p_equivalence or 1.0) < ev.alpha
    blind, advice = "", ""
    if outcome is Outcome.UNSURE:
        advice = _more_pairs(ev, "would settle a change this size")
    elif outcome is Outcome.BLIND or order_blind:
        outcome = Outcome.BLIND
        advice = _more_pairs(ev, f"would show a change of the {min_effect:g}% minimum effect")
        if order_blind:
            blind = (
                f"the t bound puts it {worst_case(ev.direction, bound)}, yet the pair-order test "
                f"cannot rule out the {min_effect:g}% minimum effect (p="
                f"{ev.p_equivalence or 1.0:.2g}, alpha {ev.alpha:g}; "
                f"{pairs_to_decide(ev.alpha, one_sided=True)} pairs at least)"
            )
    words = Words(
        moved=_words(ev, change),
        against=f"than the base measured alongside it ({_pairs(ev.n_pairs)}{note})",
        evidence=evidence,
        effect=f"{min_effect:g}% minimum effect",
        caught=caught,
        advice=advice,
        blind=blind,
    )
    verdict, reason = decided(outcome, ev.direction, change, bound, ev.alpha, words)
    return _comparison(ev, verdict, reason, p_adjusted)


def decide_paired(evidences: Sequence[PairedEvidence]) -> tuple[Comparison, ...]:
    """Verdicts for every (benchmark, metric) of one A/B gate, in the input order.

    p-values are adjusted with Benjamini-Hochberg across the metrics that were tested, the
    changes that point worse and those that point better each a family of their own
    (:func:`perfgate.stats.fdr.by_direction`).
    """
    tested = [i for i, ev in enumerate(evidences) if ev.p_value is not None]
    sides = [
        worse_sign(evidences[i].direction) * (evidences[i].change_pct or 0.0) > 0 for i in tested
    ]
    adjusted = dict(
        zip(
            tested,
            by_direction([float(evidences[i].p_value or 0.0) for i in tested], sides),
            strict=True,
        )
    )
    results: list[Comparison] = []
    for i, ev in enumerate(evidences):
        change = ev.change_pct
        if change is None:
            results.append(_comparison(ev, Verdict.NO_BASELINE, "no base/head pairs were measured"))
        elif ev.policy.numerics:
            results.append(_numerics(ev))
        elif ev.policy.deterministic:
            results.append(_deterministic(ev, change))
        elif i not in adjusted:
            results.append(_single_pair(ev, change))
        else:
            results.append(_judge(ev, change, adjusted[i]))
    return tuple(results)
