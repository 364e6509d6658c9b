"""``perfgate check``: measure, gate, and settle inside the CI job what the gate left open.

One command for a PR job. It runs the suite (``history`` mode: the head only, judged against
the base branch's stored runs; ``ab`` mode: the PR's merge-base and the head in alternating
pairs, in the same job), gates, and settles what the gate left open within the budget.

``history`` mode gives every single-process training benchmark left ``inconclusive`` more
repeats in fresh processes, as many as the budget buys, then gates once more. Its error
control is that of ``run --confirm`` (:mod:`perfgate.stats.sequential`): the first gate and
the re-measured one are two looks at a common level, so re-measuring only adds detections at
the plain gate's false-alarm rate, and a regression at the first look (at that level)
stands. The two looks are entered whenever a re-measurable benchmark is inconclusive *or a
regression* at the plain gate (a regression is judged again at the common level: it stands
there, or the second look settles it); reporting a plain regression while re-measuring the
rest would spend the false-alarm budget twice. One re-measurement round, sized by the
budget: the budget buys rounds of one repeat of every benchmark the plain gate left open,
and only those are re-measured (unchanged at the plain level, a benchmark is not a
regression there, so leaving it at that level adds no false alarm).

``ab`` mode measures until decided (:mod:`perfgate.stats.looks`): every benchmark the plain
gate left inconclusive, or called a regression, gets looks at growing pair counts, each
judged by the one paired rule at a level from an alpha-spending function, the looks'
levels summing to at most alpha; a benchmark stops at the first look that decides it
(regression, improvement, or unchanged by equivalence), and the budget left goes to the
undecided ones. Each stop says how many pairs it spent and why (:class:`perfgate.stats.
looks.Stop`); the plain gate's first pairs are the first look at a stricter level, so a
plain regression is judged again there, as in ``history`` mode.

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
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfgate.app.context import GitHistory
from perfgate.app.gate import (
    AB_BASE_SUFFIX,
    Levels,
    check_base_branch,
    compare_records,
    stored_levels,
)
from perfgate.app.measure import contention_note
from perfgate.app.record import (
    NOTHING_TO_RUN,
    ProgressFn,
    confirm_and_record,
    extend_pairs_and_record,
    run_ab_and_record,
    run_and_record,
)
from perfgate.app.triage import record_alerts
from perfgate.config import Config
from perfgate.errors import ConfigError, RunnerError, UsageError
from perfgate.models import (
    BenchmarkSpec,
    CIContext,
    Comparison,
    Confirmation,
    GateResult,
    GitContext,
    RunRecord,
    Verdict,
)
from perfgate.reporters.render import plural
from perfgate.runner.lifecycle import Interrupted
from perfgate.stats import looks, sequential
from perfgate.stats.decide import ALPHA, deciding, second_look, size_text
from perfgate.stats.paired import pairs_to_decide
from perfgate.store import SqlStore

MODES = ("history", "ab")
MAX_EXTRA = 12
"""Extra repeats one benchmark gets at most in ``history`` mode: past a dozen the gain of one
round is small against the job's time (the detectable change shrinks as 1/sqrt(n)). ``ab``
mode's looks are capped by :data:`perfgate.stats.looks.MAX_PAIRS` instead."""


@dataclass(frozen=True)
class Budget:
    """What ``check`` may spend re-measuring: wall seconds, or a number of extra repeats
    (``ab`` mode: extra pairs each open benchmark may get)."""

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
            return plural(self.repeats, "extra repeat")
        return f"{self.seconds or 0:g} s"


_UNITS = {"": None, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_budget(text: str) -> Budget:
    """``--budget``: a time (``600s``, ``10m``, ``1.5h``) or a whole number of extra repeats
    (ConfigError: anything else, or zero)."""
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
    """What ``check`` did: the final gate, the runs it judged, the extra repeats (or pairs:
    the most any benchmark got) of the re-measured benchmarks, and which those were."""

    result: GateResult
    records: tuple[RunRecord, ...]
    mode: str
    extra: int = 0
    remeasured: tuple[str, ...] = ()
    stops: tuple[looks.Stop, ...] = ()
    """``ab`` mode: how each benchmark's looks ended (pairs spent, why they stopped)."""


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
    for other in [x for x in (base_sha, f"origin/{against}", against) if x]:
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
    return {
        c.benchmark
        for c in deciding(result.comparisons)
        if c.method == method and c.verdict is Verdict.INCONCLUSIVE
    }


def _seconds_per_repeat(record: RunRecord) -> float:
    """Seconds one repeat of ``record`` took (of an A/B pair's head run: one pair)."""
    repeats = max(record.spec.repeats, 1)
    return max((record.finished_at - record.started_at).total_seconds(), 0.0) / repeats


@dataclass(frozen=True)
class _Check:
    """What both modes of one check share: its settings, and the gate that judges its runs."""

    config: Config
    specs: Sequence[BenchmarkSpec]
    store: SqlStore
    budget: Budget
    git: GitContext
    ci: CIContext
    against: str
    trace_root: Path
    base_sha: str
    history: GitHistory | None
    progress: ProgressFn | None
    warn: ProgressFn | None

    def recording(self) -> dict[str, Any]:
        """How the runs are measured and recorded (``run_and_record``'s keywords)."""
        return dict(
            git=self.git,
            ci=self.ci,
            trace_root=self.trace_root,
            progress=self.progress,
            warn=self.warn,
        )

    def judge(self, runs: Sequence[RunRecord], alpha: Levels = ALPHA) -> GateResult:
        return compare_records(
            self.config,
            self.store,
            runs,
            branch=self.git.branch,
            against=self.against,
            base_sha=self.base_sha,
            git=self.history,
            alpha=alpha,
        )


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
    clock: Callable[[], float] = time.monotonic,
) -> CheckOutcome:
    """Run ``specs``, gate them against ``against`` and settle what is left inconclusive
    (see the module). ``clock``: seconds, for ``ab`` mode's budget (injected in tests).

    Raises:
        UsageError: an unknown mode; no benchmark; in ``history`` mode a base branch with
            no runs (before anything is measured); ``ab`` mode outside a git checkout or
            without a merge-base; what ``run`` and ``gate`` raise.
        RunnerError: stopped by a signal; the message names the runs recorded before it.
    """
    if mode not in MODES:
        raise UsageError(f"--mode {mode!r}: expected one of {', '.join(MODES)}")
    if not git.branch:
        raise UsageError("cannot tell the branch: pass --branch or run inside a git checkout")
    if not specs:
        raise UsageError(NOTHING_TO_RUN)
    if mode == "history" and git.branch != against:
        # a base branch without runs fails the gate: say so before measuring, not after
        check_base_branch(config, store, against)
    began = datetime.now(timezone.utc)
    job = _Check(
        config,
        specs,
        store,
        budget,
        git,
        ci,
        against,
        trace_root,
        base_sha,
        history,
        progress,
        warn,
    )
    try:
        if mode == "ab":
            ref = resolve_ab_ref(history, ab_ref=ab_ref, base_sha=base_sha, against=against)
            outcome = _check_ab(job, ref=ref, repo=repo, clock=clock)
        else:
            outcome = _check_history(job, sys_path=sys_path)
    except Interrupted as exc:
        # the first pass's runs (and any re-measured one) are recorded as each finishes: say
        # which (the check's branch, and its A/B base runs), not the runner's "nothing recorded"
        recorded = [
            (run_id, spec.name, branch)
            for spec in specs
            for branch in (git.branch, f"{git.branch}{AB_BASE_SUFFIX}")
            for run_id, _, _ in store.recent_runs(
                project=config.project, benchmark=spec.name, branch=branch, since=began
            )
        ]
        raise RunnerError(stopped_line(exc, recorded)) from exc
    # a base-branch check's regressions become alerts, as a base-branch gate's do
    record_alerts(config, store, result=outcome.result)
    return outcome


def stopped_line(exc: Interrupted, recorded: Sequence[tuple[str, str, str]]) -> str:
    """The one line of a check stopped by a signal: what it recorded before the stop."""
    name = signal.Signals(exc.signum).name
    if not recorded:
        return f"stopped by {name}; the running worker was killed and nothing recorded"
    runs = ", ".join(
        f"{run_id[:12]} ({benchmark} on {branch})"
        if not branch.endswith(AB_BASE_SUFFIX)
        else f"{run_id[:12]} ({benchmark}, the A/B base of {branch[: -len(AB_BASE_SUFFIX)]})"
        for run_id, benchmark, branch in recorded
    )
    noun = "run" if len(recorded) == 1 else "runs"
    return (
        f"stopped by {name}; the running worker was killed; recorded before the stop: "
        f"{len(recorded)} {noun}, {runs}; nothing of the measurement it stopped"
    )


def _check_history(job: _Check, *, sys_path: Sequence[str]) -> CheckOutcome:
    """``history`` mode: the head's runs, the gate, then more repeats for the benchmarks the
    plain gate left open, both looks at the level of the confirmation
    (:func:`perfgate.app.record.confirm_and_record`)."""
    records = run_and_record(job.config, job.specs, job.store, sys_path=sys_path, **job.recording())
    plain = job.judge(records)
    by_name = {s.name: s for s in job.specs}
    looked = second_look(plain.comparisons, method="history", regression_stands=False)
    open_ = {b for b in looked if not by_name[b].distributed and by_name[b].kind == "training"}
    if not open_:
        return _as_judged(plain, records, "history")
    extra = job.budget.extra([_seconds_per_repeat(r) for r in records if r.benchmark in open_])
    if extra < 1:
        return _as_judged(plain, records, "history", _too_small(job.budget, records, open_))
    # the open benchmarks go in (the budget was sized on them), judged at the level of the
    # whole gate's tests; only those inconclusive at that level get the repeats
    confirmable = [s for s in job.specs if s.name in open_]
    recorded = {r.benchmark: r for r in records}
    confirmations = confirm_and_record(
        job.config,
        confirmable,
        job.store,
        branch=job.git.branch,
        against=job.against,
        extra=extra,
        sys_path=sys_path,
        progress=job.progress,
        base_sha=job.base_sha,
        git=job.history,
        runs=[recorded[s.name] for s in confirmable],
        gate_tests=_tests(plain),
    )
    folded = {c.benchmark: c.folded for c in confirmations if c.folded is not None}
    final_records = [folded.get(r.benchmark, r) for r in records]
    final = job.judge(final_records, stored_levels(final_records))
    notes = unsettled_notes(final, final_records, confirmations, extra)
    return CheckOutcome(
        _with_notes(final, notes), tuple(final_records), "history", extra, tuple(sorted(folded))
    )


def _check_ab(job: _Check, *, ref: str, repo: Path, clock: Callable[[], float]) -> CheckOutcome:
    """``ab`` mode: pairs, the gate, then looks that add pairs to every benchmark left open
    until it is decided or the budget is spent (:mod:`perfgate.stats.looks`)."""
    budget = job.budget
    started = clock()  # the budget is the whole check's: the first pairs spend it too
    pairs = run_ab_and_record(
        job.config, job.specs, job.store, ref=ref, repo=repo, **job.recording()
    )
    heads = [head for _, head in pairs]
    by_name = {s.name: s for s in job.specs}
    plain = job.judge(heads)
    open_ = set(second_look(plain.comparisons, method="paired", regression_stands=False))
    if not open_:
        return _as_judged(plain, heads, "ab")
    # a head run's span is its pairs': the seconds of one pair, both sides
    seconds = {h.benchmark: _seconds_per_repeat(h) for h in heads if h.benchmark in open_}
    used = clock() - started
    left = None if budget.seconds is None else max(budget.seconds - used, 0.0)
    if left is not None and all(v > left for v in seconds.values()):
        return _as_judged(plain, heads, "ab", _too_small(budget, heads, open_, left))
    # the plain gate was no look: every open benchmark's looks start at its first pairs
    current = {head.benchmark: (base, head) for base, head in pairs}

    levels_now: dict[str, float] = {}

    def look(levels: Mapping[str, float]) -> set[str]:
        levels_now.update(levels)
        runs = [current[b][1] for b in current]
        # decided: a deciding paired comparison is a regression, or none is inconclusive
        still = second_look(job.judge(runs, levels_now).comparisons, regression_stands=True)
        return {b for b in levels if b not in still}

    def measure(benchmark: str, k: int, level: float) -> None:
        current[benchmark] = extend_pairs_and_record(
            job.config,
            job.store,
            current[benchmark],
            spec=by_name[benchmark],
            extra=k,
            alpha=level,
            repo=repo,
            progress=job.progress,
        )

    stops = looks.measure_until_decided(
        {h.benchmark: max(h.spec.repeats, 1) for h in heads if h.benchmark in open_},
        seconds_per_pair=seconds,
        budget=looks.Budget(seconds=left, pairs=budget.repeats),
        measure=measure,
        judge=look,
        clock=clock,
    )
    last = {s.benchmark: s.level for s in stops}
    final_heads = [current[h.benchmark][1] if h.benchmark in last else h for h in heads]
    final = job.judge(final_heads, last)
    remeasured = tuple(sorted(s.benchmark for s in stops if s.extra > 0))
    still_open = _open(final, "paired")
    spent = tuple(
        f"{s.benchmark}: {s.text()}; the false-alarm rate over its "
        f"{plural(len(s.looks), 'look')} stays within alpha {ALPHA:g}"
        for s in stops
        if s.benchmark not in still_open
    )
    notes = spent + unsettled_notes(final, final_heads, (), 0, stops=stops)
    return CheckOutcome(
        _with_notes(final, notes),
        tuple(final_heads),
        "ab",
        max((s.extra for s in stops), default=0),
        remeasured,
        stops,
    )


def _tests(result: GateResult) -> int:
    """The noisy deciding tests of a gate (every benchmark's): what its looks' level is for."""
    return sum(1 for c in deciding(result.comparisons) if c.p_value is not None) or 1


def _too_small(
    budget: Budget, records: Sequence[RunRecord], open_: set[str], left: float | None = None
) -> str:
    need = sum(_seconds_per_repeat(r) for r in records if r.benchmark in open_)
    spent = "" if left is None else f", {left:.0f} s of it left after the first pairs,"
    return (
        f"the budget ({budget.text()}){spent} buys no extra repeat: one more of each "
        f"inconclusive benchmark takes about {need:.0f} s"
    )


def _with_notes(result: GateResult, notes: Sequence[str]) -> GateResult:
    return replace(result, notes=(*result.notes, *notes)) if notes else result


def _as_judged(
    plain: GateResult, runs: Sequence[RunRecord], mode: str, budget_note: str = ""
) -> CheckOutcome:
    """The plain gate as the check's outcome, nothing re-measured (``budget_note``: why)."""
    notes = unsettled_notes(plain, runs, (), 0, budget_note=budget_note)
    return CheckOutcome(_with_notes(plain, notes), tuple(runs), mode)


def unsettled_notes(
    result: GateResult,
    records: Sequence[RunRecord],
    confirmations: Sequence[Confirmation],
    extra: int,
    *,
    budget_note: str = "",
    remeasured: Sequence[str] = (),
    stops: Sequence[looks.Stop] = (),
) -> tuple[str, ...]:
    """One line per benchmark still inconclusive after ``check``: why, and what would settle
    it. ``confirmations``: what re-measuring did per benchmark in history mode; ``extra``:
    the repeats (pairs) the re-measured ones got; ``budget_note``: why none were bought;
    ``stops``: how ``ab`` mode's looks ended per benchmark."""
    stopped = {s.benchmark: s for s in stops}
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
        if benchmark in stopped:
            why = _why_looks(rows, stopped[benchmark])
        else:
            slow = benchmark in contended and any(c.metric == "step_time_ms" for c in rows)
            why = _why(
                rows, budget_note, why_not.get(benchmark, ""), benchmark in done, extra, slow
            )
        out.append(f"{benchmark}: still inconclusive: {why}")
    return tuple(out)


def _why(
    rows: Sequence[Comparison],
    budget_note: str,
    not_confirmed: str,
    remeasured: bool,
    extra: int,
    contended: bool,
) -> str:
    """Why ``rows`` (history mode, or a paired benchmark no look was spent on) stayed open."""
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
    if not paired and runs < 2 * sequential.MIN_RUNS:
        return (
            f"{sees}; only {plural(runs, 'baseline run')}: every run recorded "
            "on the base branch narrows it, or measure with --mode ab"
        )
    if remeasured:
        done = f"after {extra} extra {'pairs' if paired else 'repeats'}"
        more = (
            "more pairs (a larger --budget)"
            if paired
            else "a quieter runner, more base-branch runs, or --mode ab"
        )
        return f"{sees} {done}; the noise left is too large for this effect: {more}"
    if paired:
        # ab mode adds pairs to every benchmark the plain gate left open (their notes come
        # from their looks): this one the plain gate settled, and the final gate, adjusted
        # across the metrics the looks changed, did not
        return (
            f"{sees}; the first pairs settled it at the plain gate, so none were added, but "
            "the final gate (adjusted across every metric of the gate) left it open: raise "
            "--budget or repeats in the suite"
        )
    return f"{sees}; re-measuring was not possible here"


def _why_looks(rows: Sequence[Comparison], stop: looks.Stop) -> str:
    """Why ``ab`` mode's looks left a benchmark open, in words: the pairs spent, the smallest
    change they can see, what stopped them, and how many more pairs would likely settle it."""
    worst = max(rows, key=lambda c: c.mde_pct if c.mde_pct is not None else math.inf)
    floor = worst.min_effect_pct or 0.0
    spent = (
        f"{worst.metric}: {stop.pairs} pairs measured ({stop.extra} added in "
        f"{stop.seconds:.0f} s over {plural(len(stop.looks), 'look')})"
    )
    if worst.mde_pct is None:
        sees = (
            f"{spent} cannot show a change of any size yet: the pair-order test needs "
            f"{pairs_to_decide(stop.level or ALPHA)} pairs at the last look's level "
            f"{stop.level:.2g}"
        )
    else:
        sees = (
            f"{spent} can see a change of {size_text(worst.mde_pct)} (80% power, level "
            f"{stop.level:.2g}) against a minimum effect of {floor:g}%"
        )
    why = {
        looks.BUDGET: "the budget was spent: no further pair fitted",
        looks.PLANNED: f"the budget's {stop.extra} extra pairs were measured",
        looks.CAP: f"it reached the cap of {looks.MAX_PAIRS} pairs",
    }.get(stop.why, "a look decided it, but not the final gate (adjusted across every metric)")
    fix = "raise --budget"
    if stop.why == looks.CAP:
        fix = "a quieter runner or a steadier step (the pairs disagree too much)"
    change = abs(worst.change_pct or 0.0)
    target = max(change, floor)
    need = looks.pairs_to_settle(
        stop.pairs, ci_low_pct=worst.ci_low_pct, ci_high_pct=worst.ci_high_pct, target_pct=target
    )
    if need is None:
        settle = "the pairs disagree too much to say how many more would settle it"
    else:
        more = need - stop.pairs
        settle = (
            f"about {plural(more, 'more pair')} ({need} in all) would likely "
            f"settle a change of {target:.1f}%"
        )
    return f"{sees}; {why}; {settle}: {fix}"


def remeasured_line(outcome: CheckOutcome) -> str:
    """One line for the terminal: what ``check`` re-measured, or that it had nothing to."""
    if outcome.stops:
        return (
            f"check: measured until decided ({looks.spent_text(outcome.stops)}); the "
            f"false-alarm rate over every look stays within alpha {ALPHA:g}"
        )
    if not outcome.remeasured:
        return "check: nothing re-measured"
    what = "pairs" if outcome.mode == "ab" else "repeats"
    names = ", ".join(outcome.remeasured)
    return (
        f"check: re-measured {names} with {outcome.extra} extra {what} (both looks at a "
        f"common level; the false-alarm rate stays the plain gate's, alpha {ALPHA:g})"
    )
