"""``perfgate check``: measure, gate, and settle inside the CI job what the gate left open.

One command for a PR job. It runs the suite (``history`` mode: the head only, judged against
the base branch's stored runs; ``ab`` mode: the PR's merge-base and the head in alternating
pairs, in the same job), gates, and gives every single-process training benchmark left
``inconclusive`` more repeats in fresh processes (more pairs in ``ab`` mode), as many as the
budget buys, then gates once more.

Error control is that of ``run --confirm`` (:mod:`perfgate.stats.sequential`): the first
gate and the re-measured one are two looks at a common level, so re-measuring only adds
detections at the plain gate's false-alarm rate, and a regression at the first look (at that
level) stands. The two looks are entered whenever a re-measurable benchmark is inconclusive
*or a regression* at the plain gate (a regression is judged again at the common level: it
stands there, or the second look settles it); reporting a plain regression while
re-measuring the rest would spend the false-alarm budget twice. ``ab`` mode's looks are means
of independent pair ratios (rho = sqrt(n0 / n)); when the first pairs are too few for the
pair-order test of :mod:`perfgate.stats.paired` to call anything (fewer than 8 at 0.01),
look 0 spends nothing and the second look is judged at the plain level. One re-measurement
round, sized by the
budget: the two-look rule is what keeps the false-alarm rate; a third look would need its
own share.

The budget buys rounds of one repeat (pair) of every benchmark the plain gate left open,
and only those are re-measured: look 0's stricter level can leave open a benchmark the plain
gate called unchanged, but re-measuring it would spend past ``--budget``, and it needs no
second look (unchanged at the plain level, it is not a regression there, so leaving it at
that level adds no false alarm).

On the base branch the final gate's regressions are recorded as untriaged alerts, as
``gate`` records them (:func:`perfgate.app.triage.record_alerts`).

What stays inconclusive is said, with why and what would settle it
(:func:`unsettled_notes`): the baseline cannot split job from process noise (too few runs),
job-level noise dominates (more repeats in this job cannot help: a fresh job or ``ab``
mode), the machine was contended, or the budget ran out before the smallest detectable
change reached the minimum effect.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from perfgate.app.context import GitHistory
from perfgate.app.gate import compare_records
from perfgate.app.measure import contention_note
from perfgate.app.record import (
    ProgressFn,
    confirm_and_record,
    extend_pairs_and_record,
    run_ab_and_record,
    run_and_record,
)
from perfgate.app.triage import record_alerts
from perfgate.config import Config
from perfgate.errors import ConfigError, UsageError
from perfgate.models import (
    BenchmarkSpec,
    CIContext,
    Comparison,
    Confirmation,
    GateResult,
    GitContext,
    LaunchOptions,
    RunRecord,
    Verdict,
)
from perfgate.stats import sequential
from perfgate.stats.decide import ALPHA, deciding, size_text
from perfgate.stats.paired import pairs_to_decide
from perfgate.store import SqlStore

MODES = ("history", "ab")
DEFAULT_BUDGET = "10m"
MAX_EXTRA = 12
"""Extra repeats (pairs) one benchmark gets at most: past a dozen the gain of one round is
small against the job's time (the detectable change shrinks as 1/sqrt(n))."""
MIN_BASELINE_FOR_SPLIT = sequential.MIN_RUNS


@dataclass(frozen=True)
class Budget:
    """What ``check`` may spend re-measuring: wall seconds, or a number of extra repeats."""

    seconds: float | None = None
    repeats: int | None = None

    def extra(self, seconds_per_repeat: Sequence[float]) -> int:
        """Extra repeats each open benchmark gets: the repeats asked for, or as many rounds
        of one repeat of every open benchmark (``seconds_per_repeat``, as measured) as the
        time buys; at most :data:`MAX_EXTRA`."""
        if self.repeats is not None:
            return min(self.repeats, MAX_EXTRA)
        total = sum(seconds_per_repeat)
        if self.seconds is None or total <= 0:
            return MAX_EXTRA
        return max(0, min(MAX_EXTRA, math.floor(self.seconds / total)))

    def text(self) -> str:
        if self.repeats is not None:
            return f"{self.repeats} extra repeat{'s' if self.repeats != 1 else ''}"
        return f"{self.seconds or 0:g} s"


_UNITS = {"": None, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_budget(text: str) -> Budget:
    """``--budget``: a time (``600s``, ``10m``, ``1.5h``) or a whole number of extra repeats.

    Raises:
        ConfigError: anything else, or zero.
    """
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text.lower())
    problem = ""
    if found is None:
        problem = "expected a time (600s, 10m, 1h) or a number of extra repeats (8)"
    else:
        value, unit = float(found.group(1)), _UNITS[found.group(2)]
        if value <= 0:
            problem = "must be more than 0"
        elif unit is None and not value.is_integer():
            problem = "a number of extra repeats is a whole number (or give a unit: 90s)"
        else:
            return Budget(repeats=int(value)) if unit is None else Budget(seconds=value * unit)
    raise ConfigError(f"--budget {text!r}: {problem}")


@dataclass(frozen=True)
class CheckOutcome:
    """What ``check`` did: the final gate, the runs it judged, how many extra repeats (or
    pairs) the re-measured benchmarks got, and which those were."""

    result: GateResult
    records: tuple[RunRecord, ...]
    mode: str
    extra: int = 0
    remeasured: tuple[str, ...] = ()


def resolve_ab_ref(history: GitHistory | None, *, ab_ref: str, base_sha: str, against: str) -> str:
    """``ab`` mode's base commit: ``ab_ref`` when given, else the merge-base of HEAD with the
    CI's base commit, else with ``origin/<against>``, else with ``<against>``.

    Raises:
        UsageError: not in a git checkout, no merge-base to be found, or HEAD is that
            merge-base itself (nothing of the PR's checked out).
    """
    if ab_ref:
        return ab_ref
    if history is None:
        raise UsageError("--mode ab needs a git checkout (the base commit is measured from it)")
    tried = []
    for other in (base_sha, f"origin/{against}", against):
        if not other:
            continue
        tried.append(other[:12] if other == base_sha else other)
        if history.resolve(other):
            found = history.merge_base("HEAD", other)
            if found and found == history.resolve("HEAD"):
                # Measuring the base against itself would pass anything as unchanged.
                raise UsageError(
                    f"--mode ab: HEAD is the base commit {found[:12]} itself (a "
                    "pull_request_target job checks out the base branch, not the PR): check "
                    "out the PR's head, or use --mode history"
                )
            if found:
                return found
    raise UsageError(
        f"--mode ab: no merge-base of HEAD with {' or '.join(tried) or against!r} in this "
        "checkout (a shallow clone? fetch with depth 0, or pass --ab-ref)"
    )


def _open(result: GateResult, method: str) -> set[str]:
    """Benchmarks with a deciding ``method`` comparison left inconclusive."""
    return _with(result, method, (Verdict.INCONCLUSIVE,))


def _with(result: GateResult, method: str, verdicts: tuple[Verdict, ...]) -> set[str]:
    return {
        c.benchmark
        for c in deciding(result.comparisons)
        if c.method == method and c.verdict in verdicts
    }


_LOOKED_AGAIN = (Verdict.INCONCLUSIVE, Verdict.REGRESSION)
"""The plain gate's verdicts that send a benchmark to the two looks: an inconclusive one to
be settled, and a regression too, judged again at the common level (it stands there, or
is settled by the second look). Reporting a plain regression as it is while re-measuring
the inconclusive ones would spend the false-alarm budget twice."""


def _remeasurable(spec: BenchmarkSpec) -> bool:
    return not spec.distributed and spec.kind == "training"


def _seconds_per_repeat(record: RunRecord) -> float:
    """Seconds one repeat of ``record`` took; for the head run of an A/B pair, one pair (its
    start and end span both sides' repeats)."""
    repeats = max(record.spec.repeats, 1)
    return max((record.finished_at - record.started_at).total_seconds(), 0.0) / repeats


def run_check(
    config: Config,
    specs: Sequence[BenchmarkSpec],
    store: SqlStore,
    *,
    mode: str,
    budget: Budget,
    git: GitContext,
    ci: CIContext,
    against: str,
    trace_root: Path,
    repo: Path,
    sys_path: Sequence[str] = (),
    base_sha: str = "",
    history: GitHistory | None = None,
    ab_ref: str = "",
    progress: ProgressFn | None = None,
    warn: ProgressFn | None = None,
    launch: LaunchOptions | None = None,
) -> CheckOutcome:
    """Run ``specs``, gate them against ``against`` and settle what is left inconclusive
    (see the module).

    Raises:
        UsageError: an unknown mode; ``ab`` mode outside a git checkout or without a
            merge-base; what ``run`` and ``gate`` raise.
    """
    if mode not in MODES:
        raise UsageError(f"--mode {mode!r}: expected one of {', '.join(MODES)}")
    if not git.branch:
        raise UsageError("cannot tell the branch: pass --branch or run inside a git checkout")
    if mode == "ab":
        ref = resolve_ab_ref(history, ab_ref=ab_ref, base_sha=base_sha, against=against)
        outcome = _check_ab(
            config,
            specs,
            store,
            budget=budget,
            git=git,
            ci=ci,
            against=against,
            ref=ref,
            trace_root=trace_root,
            repo=repo,
            base_sha=base_sha,
            history=history,
            progress=progress,
            warn=warn,
        )
    else:
        outcome = _check_history(
            config,
            specs,
            store,
            budget=budget,
            git=git,
            ci=ci,
            against=against,
            trace_root=trace_root,
            sys_path=sys_path,
            base_sha=base_sha,
            history=history,
            progress=progress,
            warn=warn,
            launch=launch,
        )
    # a base-branch check's regressions become alerts, as a base-branch gate's do
    record_alerts(config, store, result=outcome.result)
    return outcome


def _check_history(
    config: Config,
    specs: Sequence[BenchmarkSpec],
    store: SqlStore,
    *,
    budget: Budget,
    git: GitContext,
    ci: CIContext,
    against: str,
    trace_root: Path,
    sys_path: Sequence[str],
    base_sha: str,
    history: GitHistory | None,
    progress: ProgressFn | None,
    warn: ProgressFn | None,
    launch: LaunchOptions | None,
) -> CheckOutcome:
    """``history`` mode: the head's runs, the gate, then more repeats for the benchmarks the
    plain gate left open, both looks at the level of the confirmation
    (:func:`perfgate.app.record.confirm_and_record`)."""
    records = run_and_record(
        config,
        specs,
        store,
        git=git,
        ci=ci,
        trace_root=trace_root,
        sys_path=sys_path,
        progress=progress,
        warn=warn,
        launch=launch,
    )

    def judge(runs: Sequence[RunRecord]) -> GateResult:
        return compare_records(
            config, store, runs, branch=git.branch, against=against, base_sha=base_sha, git=history
        )

    plain = judge(records)
    by_name = {s.name: s for s in specs}
    open_ = {b for b in _with(plain, "history", _LOOKED_AGAIN) if _remeasurable(by_name[b])}
    if not open_:
        return CheckOutcome(
            _with_notes(plain, unsettled_notes(plain, records, (), 0)), tuple(records), "history"
        )
    extra = budget.extra([_seconds_per_repeat(r) for r in records if r.benchmark in open_])
    if extra < 1:
        notes = unsettled_notes(
            plain, records, (), 0, budget_note=_too_small(budget, records, open_)
        )
        return CheckOutcome(_with_notes(plain, notes), tuple(records), "history")
    # the open benchmarks go in (the budget was sized on them), judged at the level of the
    # whole gate's tests; only those inconclusive at that level get the repeats
    confirmable = [s for s in specs if s.name in open_]
    recorded = {r.benchmark: r for r in records}
    confirmations = confirm_and_record(
        config,
        confirmable,
        store,
        branch=git.branch,
        against=against,
        extra=extra,
        sys_path=sys_path,
        progress=progress,
        base_sha=base_sha,
        git=history,
        runs=[recorded[s.name] for s in confirmable],
        gate_tests=_tests(plain),
    )
    folded = {c.benchmark: c.folded for c in confirmations if c.folded is not None}
    final_records = [folded.get(r.benchmark, r) for r in records]
    final = judge(final_records)
    notes = unsettled_notes(final, final_records, confirmations, extra)
    return CheckOutcome(
        _with_notes(final, notes), tuple(final_records), "history", extra, tuple(sorted(folded))
    )


def _check_ab(
    config: Config,
    specs: Sequence[BenchmarkSpec],
    store: SqlStore,
    *,
    budget: Budget,
    git: GitContext,
    ci: CIContext,
    against: str,
    ref: str,
    trace_root: Path,
    repo: Path,
    base_sha: str,
    history: GitHistory | None,
    progress: ProgressFn | None,
    warn: ProgressFn | None,
) -> CheckOutcome:
    """``ab`` mode: pairs, the gate, then more pairs for the benchmarks left inconclusive,
    both looks at the level of :func:`perfgate.stats.sequential.look_level`."""
    pairs = run_ab_and_record(
        config,
        specs,
        store,
        ref=ref,
        repo=repo,
        git=git,
        ci=ci,
        trace_root=trace_root,
        progress=progress,
        warn=warn,
    )
    heads = [head for _, head in pairs]
    by_name = {s.name: s for s in specs}

    def judge(runs: Sequence[RunRecord]) -> GateResult:
        return compare_records(
            config, store, runs, branch=git.branch, against=against, base_sha=base_sha, git=history
        )

    plain = judge(heads)
    open_ = _with(plain, "paired", _LOOKED_AGAIN)
    if not open_:
        return CheckOutcome(
            _with_notes(plain, unsettled_notes(plain, heads, (), 0)), tuple(heads), "ab"
        )
    # a head run's span is its pairs': the seconds of one pair, both sides
    extra = budget.extra([_seconds_per_repeat(h) for h in heads if h.benchmark in open_])
    if extra < 1:
        notes = unsettled_notes(plain, heads, (), 0, budget_note=_too_small(budget, heads, open_))
        return CheckOutcome(_with_notes(plain, notes), tuple(heads), "ab")
    tests = _tests(plain)
    levels = {h.benchmark: _ab_level(max(h.spec.repeats, 1), extra, tests) for h in heads}
    at_level = [replace(h, spec=replace(h.spec, confirm_alpha=levels[h.benchmark])) for h in heads]
    look0 = judge(at_level)
    final_heads = []
    remeasured = []
    for pair, head in zip(pairs, heads, strict=True):
        mine = [c for c in look0.comparisons if c.benchmark == head.benchmark]
        # only what the budget was sized on: one the plain gate settled keeps its verdict
        if head.benchmark not in open_ or sequential.needs_confirming(mine, method="paired"):
            final_heads.append(head)
            continue
        _, new_head = extend_pairs_and_record(
            config,
            store,
            pair,
            spec=by_name[head.benchmark],
            extra=extra,
            alpha=levels[head.benchmark],
            repo=repo,
            progress=progress,
        )
        final_heads.append(new_head)
        remeasured.append(head.benchmark)
    final = judge(final_heads)
    notes = unsettled_notes(final, final_heads, (), extra, remeasured=remeasured)
    return CheckOutcome(
        _with_notes(final, notes), tuple(final_heads), "ab", extra, tuple(sorted(remeasured))
    )


def _ab_level(initial: int, extra: int, tests: int) -> float:
    """The level both looks of an A/B benchmark are judged at. When its first pairs are too
    few for the pair-order test to reach ``ALPHA`` (:func:`perfgate.stats.paired.
    pairs_to_decide`), look 0 can call nothing and leaves everything to the second look:
    that look alone spends the false-alarm budget, at the plain gate's level."""
    if initial < pairs_to_decide(ALPHA):
        return ALPHA
    return sequential.look_level(sequential.pairs_correlation(initial, extra), tests=tests)


def _tests(result: GateResult) -> int:
    """The noisy deciding tests of a gate (every benchmark's, re-measurable or not): the
    ``tests`` its looks' level is for."""
    return sum(1 for c in deciding(result.comparisons) if c.p_value is not None) or 1


def _too_small(budget: Budget, records: Sequence[RunRecord], open_: set[str]) -> str:
    need = sum(_seconds_per_repeat(r) for r in records if r.benchmark in open_)
    return (
        f"the budget ({budget.text()}) buys no extra repeat: one more of each inconclusive "
        f"benchmark takes about {need:.0f} s"
    )


def _with_notes(result: GateResult, notes: Sequence[str]) -> GateResult:
    return replace(result, notes=(*result.notes, *notes)) if notes else result


def unsettled_notes(
    result: GateResult,
    records: Sequence[RunRecord],
    confirmations: Sequence[Confirmation],
    extra: int,
    *,
    budget_note: str = "",
    remeasured: Sequence[str] = (),
) -> tuple[str, ...]:
    """One line per benchmark still inconclusive after ``check``: why, and what would settle
    it. ``confirmations``: what re-measuring did per benchmark in history mode; ``extra``:
    the repeats (pairs) the re-measured ones got; ``budget_note``: why none were bought."""
    why_not = {c.benchmark: c.note for c in confirmations if c.folded is None and c.note}
    done = {c.benchmark for c in confirmations if c.folded is not None} | set(remeasured)
    # a wall time that decided on a contended machine: re-measuring here measures the
    # neighbours again
    contended = {r.benchmark for r in records if contention_note(r, deciding_wall=True)}
    out = []
    for benchmark in sorted(_open(result, "history") | _open(result, "paired")):
        rows = [
            c
            for c in deciding(result.comparisons)
            if c.benchmark == benchmark and c.verdict is Verdict.INCONCLUSIVE
        ]
        out.append(
            f"{benchmark}: still inconclusive: "
            + _why(
                rows,
                budget_note=budget_note,
                not_confirmed=why_not.get(benchmark, ""),
                remeasured=benchmark in done,
                extra=extra,
                contended=benchmark in contended and any(c.metric == "step_time_ms" for c in rows),
            )
        )
    return tuple(out)


def _why(
    rows: Sequence[Comparison],
    *,
    budget_note: str,
    not_confirmed: str,
    remeasured: bool,
    extra: int,
    contended: bool,
) -> str:
    worst = max(rows, key=lambda c: c.mde_pct if c.mde_pct is not None else math.inf)
    paired = worst.method == "paired"
    runs = len(worst.baseline_run_ids)
    mde = size_text(worst.mde_pct) if worst.mde_pct is not None else "unknown"
    floor = f"{worst.min_effect_pct:g}%" if worst.min_effect_pct is not None else "its"
    sees = f"{worst.metric} can see a change of {mde} against a minimum effect of {floor}"
    if paired and worst.mde_pct is None:
        sees = (
            f"{worst.metric} can see no change of any size yet: fewer than "
            f"{pairs_to_decide(ALPHA)} pairs (the pair-order test)"
        )
    if contended and not paired:
        return (
            f"{sees}; the machine was contended now, so re-measuring here buys little: "
            "run the job on a quieter runner or with --mode ab"
        )
    if budget_note:
        return f"{sees}; {budget_note}: raise --budget"
    if not_confirmed and "job-level noise" in not_confirmed:
        return f"{sees}; the noise is in the baseline between jobs: {not_confirmed}"
    if not_confirmed:
        return f"{sees}; {not_confirmed}"
    if not paired and runs < 2 * MIN_BASELINE_FOR_SPLIT:
        return (
            f"{sees}; only {runs} baseline run{'s' if runs != 1 else ''}: every run recorded "
            "on the base branch narrows it, or measure with --mode ab"
        )
    if remeasured:
        done = f"after {extra} extra {'pairs' if paired else 'repeats'}"
        if not paired:
            more = "a quieter runner, more base-branch runs, or --mode ab"
        elif extra >= MAX_EXTRA:  # the round's cap, not the budget, stopped it
            more = (
                f"more pairs than one round's {MAX_EXTRA} (a larger repeats in the suite: "
                "the first round's pairs) or a quieter runner"
            )
        else:
            more = "more pairs (a larger --budget)"
        return f"{sees} {done}; the noise left is too large for this effect: {more}"
    return f"{sees}; re-measuring was not possible here"


def remeasured_line(outcome: CheckOutcome) -> str:
    """One line for the terminal: what ``check`` re-measured, or that it had nothing to."""
    if not outcome.remeasured:
        return "check: nothing re-measured"
    what = "pairs" if outcome.mode == "ab" else "repeats"
    names = ", ".join(outcome.remeasured)
    return (
        f"check: re-measured {names} with {outcome.extra} extra {what} (both looks at a "
        f"common level; the false-alarm rate stays the plain gate's, alpha {ALPHA:g})"
    )
