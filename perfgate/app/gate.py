"""Compare runs with their baseline windows and decide the gate."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypeAlias

from perfgate.app.context import GitHistory
from perfgate.app.measure import contention_note
from perfgate.config import ALL_BENCHMARKS, Config
from perfgate.errors import StoreError, UsageError
from perfgate.metrics import TIME_UNIT, base_name, lookup, not_deciding
from perfgate.models import (
    Attribution,
    BaselineReset,
    Comparison,
    Direction,
    Finding,
    Fingerprint,
    GateResult,
    Measurement,
    NoiseRow,
    RunPoint,
    RunRecord,
    Verdict,
    WorkChange,
)
from perfgate.reporters.render import plural
from perfgate.stats import ALPHA, MIN_BASELINE_RUNS, Candidate, compare_candidates, decide
from perfgate.stats.budget import Reference, judge_budgets
from perfgate.stats.paired import (
    Pair,
    PairedEvidence,
    compare_pairs,
    decide_paired,
    pair_noise_from_history,
)
from perfgate.stats.summary import repeat_centres
from perfgate.stats.window import (
    HISTORY_SCAN_RUNS,
    Window,
    cut_window,
    moved_since,
    net_centres,
    runs_since_last_change,
)
from perfgate.store import SqlStore


def _point(record: RunRecord, m: Measurement, direction: Direction) -> RunPoint:
    """The run's point of ``m``, judged in ``direction``: the policy's (the catalogue's,
    or the suite's ``[metrics.NAME]``), not the one recorded with the measurement."""
    return RunPoint(
        run_id=record.id,
        benchmark=record.benchmark,
        metric=m.metric,
        unit=m.unit,
        direction=direction,
        branch=record.git.branch,
        commit=record.git.commit,
        fingerprint_key=record.fingerprint.key(),
        started_at=record.started_at,
        centre=m.summary.centre,
        repeat_centres=m.summary.repeat_centres or repeat_centres(m.repeats),
        deterministic=m.deterministic,
        centre_se=m.summary.centre_se,
    )


def _incomparable(
    record: RunRecord,
    m: Measurement,
    direction: Direction,
    against: str,
    others: Mapping[str, Fingerprint],
) -> Comparison:
    newest = next(iter(others.values()))
    diffs = tuple(record.fingerprint.differences(newest))
    return Comparison(
        benchmark=record.benchmark,
        metric=m.metric,
        unit=m.unit,
        direction=direction,
        verdict=Verdict.INCOMPARABLE,
        reason=(
            f"no run on {against} with this environment; {plural(len(others), 'other environment')}"
            f" not compared ({'; '.join(diffs) or 'differs'})"
        ),
        current_run_id=record.id,
        current_centre=m.summary.centre,
        fingerprint_differences=diffs,
    )


def latest_runs(
    config: Config, store: SqlStore, *, branch: str, benchmarks: Sequence[str] = ()
) -> list[RunRecord]:
    """The latest run of each benchmark on ``branch`` (only ``benchmarks`` when given) that
    is not excluded.

    Raises:
        UsageError: a named benchmark has no run on the branch, or the branch has none, or
            every run of a named benchmark (or of the branch) is excluded: a gate that
            judged nothing would pass.
    """
    names = store.benchmarks(project=config.project, branch=branch)
    if benchmarks:
        missing = sorted(set(benchmarks) - set(names))
        if missing:
            raise UsageError(
                f"no run of {', '.join(missing)} on branch {branch!r} in project {config.project!r}"
            )
        names = [n for n in names if n in set(benchmarks)]
    if not names:
        raise UsageError(
            f"no runs on branch {branch!r} in project {config.project!r}: record one with "
            "'perfgate run' first"
        )
    latest = store.latest_runs(project=config.project, benchmarks=names, branch=branch)
    excluded = [n for n in names if n not in latest] if benchmarks or not latest else []
    if excluded:
        raise UsageError(
            f"every run of {', '.join(excluded)} on branch {branch!r} is excluded "
            "('perfgate runs exclude'): nothing to judge"
        )
    return [latest[name] for name in names if name in latest]


Levels: TypeAlias = "float | Mapping[str, float]"
"""The level runs are judged at: one for all, or each benchmark's (a benchmark not named:
:data:`perfgate.stats.ALPHA`)."""


def _level(alpha: Levels, benchmark: str) -> float:
    return alpha.get(benchmark, ALPHA) if isinstance(alpha, Mapping) else alpha


def stored_levels(records: Sequence[RunRecord]) -> dict[str, float]:
    """The level each stored run is judged at again where looks measured it (their common
    level, :attr:`perfgate.models.RunRecord.alpha`), by benchmark: a gate of a run that
    ``run --confirm`` or ``check`` folded more repeats into spends no more than its looks
    did. The one place a stored run's level is read."""
    return {r.benchmark: r.alpha for r in records if r.alpha is not None}


def compare(
    config: Config,
    store: SqlStore,
    *,
    branch: str,
    against: str,
    benchmarks: Sequence[str] = (),
    base_sha: str = "",
    git: GitHistory | None = None,
) -> GateResult:
    """Compare the latest run of each benchmark on ``branch`` with its window on ``against``.

    Only runs with the same fingerprint key are compared; when the base branch has runs of
    the benchmark only in other environments, the comparison is ``incomparable`` and says
    which fields differ. With ``branch == against`` the latest run is compared with the runs
    before it. Otherwise the window ends at the PR's merge-base run (see
    :func:`compare_records`; ``base_sha`` and ``git`` say where the PR left ``against``).
    """
    with store.snapshot():
        records = latest_runs(config, store, branch=branch, benchmarks=benchmarks)
        return compare_records(
            config,
            store,
            records,
            branch=branch,
            against=against,
            base_sha=base_sha,
            git=git,
            alpha=stored_levels(records),
        )


@dataclass(frozen=True)
class GateReads:
    """What a gate over many benchmarks reads once for all of them instead of once for each:
    every benchmark's latest baseline reset, and the (run id, metric) of every alert
    triaged invalid (run ids are unique, so one project-wide set serves every benchmark)."""

    resets: Mapping[str, BaselineReset]
    invalid: frozenset[tuple[str, str]]

    @classmethod
    def read(cls, config: Config, store: SqlStore, benchmark: str | None = None) -> GateReads:
        statuses = store.alert_statuses(project=config.project, benchmark=benchmark)
        if benchmark is None:
            resets = store.baseline_resets(project=config.project)
        else:
            reset = store.baseline_reset(project=config.project, benchmark=benchmark)
            resets = {} if reset is None else {benchmark: reset}
        invalid = frozenset(key for key, status in statuses.items() if status == "invalid")
        return cls(resets, invalid)


def _selection(
    config: Config,
    reads: GateReads,
    benchmark: str,
    fingerprint_key: str,
    against: str,
    before: datetime | None,
    exclude_run_ids: Sequence[str],
) -> dict[str, Any]:
    """The store's selection of a benchmark's comparable runs on ``against``: the same
    fingerprint key, not excluded, since its latest baseline reset."""
    reset = reads.resets.get(benchmark)
    return {
        "project": config.project,
        "benchmark": benchmark,
        "branch": against,
        "before": before,
        "exclude_run_ids": tuple(exclude_run_ids),
        "fingerprint_key": fingerprint_key,
        "since": None if reset is None else reset.starts_at,
    }


def baseline_window(
    config: Config, store: SqlStore, *, benchmark: str, fingerprint_key: str, against: str
) -> Window:
    """The baseline window a gate judges a run of ``benchmark`` against: the last
    ``baseline_window`` runs on ``against`` with the same fingerprint key, not excluded,
    started at or after the benchmark's latest baseline reset and, per metric, after the
    last change point of its series that was not triaged invalid. One benchmark alone: a
    gate scans its benchmarks' series net of the job factor they share
    (:func:`compare_records`)."""
    reads = GateReads.read(config, store, benchmark)
    read = _window_read(config, store, reads, benchmark, fingerprint_key, against, None, ())
    return read.cut(config)


@dataclass(frozen=True)
class _WindowRead:
    """What a window is cut from: the newest eligible points, per metric the (run id,
    centre) series scanned for change points, and the other testbeds when there are none."""

    points: list[RunPoint]
    centres: dict[str, list[tuple[str, float]]]
    others: dict[str, Fingerprint]
    invalid: frozenset[tuple[str, str]]

    def cut(
        self, config: Config, centres: Mapping[str, Sequence[tuple[str, float]]] | None = None
    ) -> Window:
        """The window after the last change point of each metric's ``centres`` (this
        read's, or the gate's net of the job factor)."""
        since = runs_since_last_change(
            self.centres if centres is None else centres,
            deterministic=lambda metric: config.policy(metric).deterministic,
            invalid=self.invalid,
        )
        return cut_window(self.points, since, self.others)


def _window_read(
    config: Config,
    store: SqlStore,
    reads: GateReads,
    benchmark: str,
    key: str,
    against: str,
    before: datetime | None,
    excluded: Sequence[str],
) -> _WindowRead:
    selection = _selection(config, reads, benchmark, key, against, before, excluded)
    points, centres = store.history_and_centres(
        **selection, limit=config.baseline_window, scan=HISTORY_SCAN_RUNS
    )
    others: dict[str, Fingerprint] = {}
    if not points:
        fingerprints = store.fingerprints(
            project=config.project, benchmark=benchmark, branch=against
        )
        others = {k: fp for k, fp in fingerprints.items() if k != key}
    return _WindowRead(points, centres, others, reads.invalid)


@dataclass(frozen=True)
class _Anchor:
    """Where a PR's baseline window ends: the newest comparable base-branch run at the PR's
    merge-base commit (``exact``), else at its nearest ancestor."""

    run_id: str
    commit: str
    started_at: datetime
    merge_base: str
    """The merge-base commit sought ("" when git could only tell ancestry from the head)."""
    exact: bool
    newer: tuple[RunPoint, ...]
    """The points of the comparable base-branch runs after the anchor (newest scanned)."""
    tied: tuple[str, ...]
    """Ids of runs after the anchor in the store's order that started within a microsecond
    of it: excluded by id, as ``before`` (strict) cannot tell them apart."""


def _merge_base_anchor(
    config: Config,
    store: SqlStore,
    record: RunRecord,
    *,
    against: str,
    base_sha: str,
    git: GitHistory | None,
    reads: GateReads,
) -> tuple[_Anchor | None, str]:
    """The run a PR's window on ``against`` ends at, or ``None`` and why not in words ("" when
    nothing could be asked: no base commit given and no git history knowing the run's commit,
    which is today's window of the latest runs, silently).

    The merge-base is ``git merge-base HEAD B`` where B is ``base_sha`` (the CI's base commit
    or ``--base-sha``), else the base branch's newest run's commit; with no git that knows
    the commits, B itself. The anchor is the newest comparable run at that commit, else the
    newest whose commit git says is an ancestor of it (of the head, when the merge-base is
    unknown to git)."""
    head = record.git.commit
    head_known = git is not None and bool(head) and bool(git.resolve(head))
    if not base_sha and not head_known:
        return None, ""  # nothing tells where the PR left: no history to read for it
    key = record.fingerprint.key()
    selection = _selection(config, reads, record.benchmark, key, against, None, (record.id,))
    runs = store.recent_runs(**selection, limit=HISTORY_SCAN_RUNS)  # newest first
    if not runs:
        return None, ""
    target = ""
    if git is not None and head_known:
        target = git.merge_base(head, base_sha or runs[0][1])
    if not target and base_sha:
        target = (git.resolve(base_sha) if git is not None else "") or base_sha

    def anchor(i: int, exact: bool) -> tuple[_Anchor, str]:
        run_id, commit, started_at = runs[i]
        after = {newer_id for newer_id, _, _ in runs[:i]}
        tied = tuple(
            newer_id for newer_id, _, at in runs[:i] if at <= started_at + timedelta(microseconds=1)
        )
        # the measurements of the runs after the anchor (what moved since), when there are any
        newer = tuple(p for p in store.history(**selection, limit=i) if p.run_id in after)
        return _Anchor(run_id, commit, started_at, target, exact, newer, tied), ""

    for i, (_, commit, _) in enumerate(runs):
        if target and commit.startswith(target):
            return anchor(i, exact=True)
    of = target if git is not None and target and git.resolve(target) else ""
    of = of or (head if head_known else "")
    if git is None or not of:
        why = "no git repository here" if git is None else "git here knows neither it nor you"
        return None, (
            f"no run of {against} at your merge-base {target[:7]}, and {why} to find the "
            "nearest earlier one: compared with the latest runs"
        )
    known = False
    git.resolve_all(commit for _, commit, _ in runs)  # one git process tells which it has
    for i, (_, commit, _) in enumerate(runs):
        answer = git.is_ancestor(commit, of)
        if answer:
            return anchor(i, exact=False)
        known = known or answer is not None
    if not known:
        return None, (
            f"the runs of {against} are not in this checkout's git history (a shallow clone?): "
            "compared with the latest runs; fetch the history or pass --base-sha"
        )
    where = f"at or before your merge-base {target[:7]}" if of == target else "in your history"
    return None, (
        f"no run of {against} {where} among its newest {len(runs)} runs: compared with the "
        "latest runs"
    )


def _anchor_notes(config: Config, against: str, anchor: _Anchor, window: Window) -> list[str]:
    """What the reader of a PR gate should know about its window: which runs it holds when
    none was at the merge-base, and whether ``against`` moved since (per metric, the median of
    its later runs against the window's, beyond the minimum effect)."""
    notes: list[str] = []
    runs = max((len(ps) for ps in window.points.values()), default=0)
    if not anchor.exact and anchor.merge_base:
        notes.append(
            f"no run of {against} at your merge-base {anchor.merge_base[:7]}; compared "
            f"with the {plural(runs, 'run')} up to {anchor.commit[:7]}"
        )
    moved = []
    for metric, points in window.points.items():
        policy = config.policy(metric)
        change = moved_since(points, [p for p in anchor.newer if p.metric == metric], policy)
        if change is not None:
            word = "worse" if policy.direction.worse(change) else "better"
            moved.append(f"{abs(change):.1f}% {word} on {metric}")
    if moved:
        later = len({p.run_id for p in anchor.newer})
        notes.append(
            f"{against} is {', '.join(moved)} since your branch point ({plural(later, 'run')} "
            f"after {anchor.commit[:7]}): rebase to compare with it"
        )
    return notes


NOTE_BENCHMARKS_SHOWN = 5
"""Benchmarks a note shared by several names at most."""


def _grouped(notes: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """``(benchmark, note)`` pairs as one line per distinct note, naming its benchmarks."""
    by_note: dict[str, dict[str, None]] = {}  # each note's benchmarks, in order, once each
    for benchmark, note in notes:
        by_note.setdefault(note, {})[benchmark] = None
    out = []
    for note, named in by_note.items():
        more = len(named) - NOTE_BENCHMARKS_SHOWN
        shown = ", ".join(list(named)[:NOTE_BENCHMARKS_SHOWN])
        out.append(f"{shown}{f' and {more} more' if more > 0 else ''}: {note}")
    return tuple(out)


@dataclass(frozen=True)
class _Judged:
    """What one run brings to a gate: the candidates that decide, those only shown beside
    them, the comparisons fixed without statistics, and the time metric that decided."""

    candidates: list[Candidate]
    shown: list[Candidate]
    fixed: list[Comparison]
    shown_metrics: frozenset[str]


def _shown_beside(
    config: Config, record: RunRecord, usable: Callable[[str], bool]
) -> frozenset[str]:
    """The metrics of ``record`` shown but not deciding: the time metrics of
    :func:`not_deciding`, and each whose policy does not decide (an operator count the suite
    did not name: it explains, :attr:`perfgate.models.MetricPolicy.decides`). The one place
    both the history and the paired comparisons ask it."""
    times = not_deciding(
        record.fingerprint.device_kind, lambda m: record.measurement(m) is not None and usable(m)
    )
    explaining = {
        m.metric for m in record.measurements if not config.policy(m.metric, m.direction).decides
    }
    return times | explaining


def _judge(
    config: Config, record: RunRecord, window: Window, against: str, alpha: float = ALPHA
) -> _Judged:
    """One run's candidates, judged at ``alpha``, and its comparisons fixed without them."""
    candidates: list[Candidate] = []
    shown: list[Candidate] = []
    fixed: list[Comparison] = []
    enough = min(MIN_BASELINE_RUNS, len(window.points.get("step_time_ms", ())))
    beside = _shown_beside(config, record, lambda m: len(window.points.get(m, ())) >= enough)
    for m in record.measurements:
        policy = config.policy(m.metric, m.direction)
        if window.others:
            if m.metric not in beside:
                fixed.append(_incomparable(record, m, policy.direction, against, window.others))
            continue
        point = _point(record, m, policy.direction)
        candidate = Candidate(point, window.points.get(m.metric, ()), policy, alpha=alpha)
        (shown if m.metric in beside else candidates).append(candidate)
    return _Judged(candidates, shown, fixed, beside)


def _compared(judged: Sequence[_Judged]) -> tuple[Comparison, ...]:
    """The history comparisons of a gate's runs: those fixed without statistics, the
    deciding candidates tested together (one prior, one false-discovery family) and, apart
    from them, those only shown."""
    return (
        *(c for j in judged for c in j.fixed),
        *compare_candidates([c for j in judged for c in j.candidates]),
        *(
            replace(c, decides=False)
            for c in compare_candidates([c for j in judged for c in j.shown])
        ),
    )


def gate_window(
    config: Config,
    store: SqlStore,
    record: RunRecord,
    *,
    branch: str,
    against: str,
    base_sha: str = "",
    git: GitHistory | None = None,
    reads: GateReads | None = None,
) -> tuple[Window, _Anchor | None, str]:
    """The window a gate judges ``record`` against, the merge-base run it ends at (a PR with
    a base commit or a git history) and why it could not end there ("" when nothing to say):
    the one place both ``gate`` and ``run --confirm`` draw it (one benchmark alone: a gate
    scans its benchmarks net of their job factor, :func:`compare_records`)."""
    read, anchor, why = _gate_read(config, store, record, branch, against, base_sha, git, reads)
    return read.cut(config), anchor, why


def _gate_read(
    config: Config,
    store: SqlStore,
    record: RunRecord,
    branch: str,
    against: str,
    base_sha: str,
    git: GitHistory | None,
    reads: GateReads | None,
) -> tuple[_WindowRead, _Anchor | None, str]:
    anchor: _Anchor | None = None
    why, reads = "", reads or GateReads.read(config, store, record.benchmark)
    if branch != against and (base_sha or git is not None):
        anchor, why = _merge_base_anchor(
            config, store, record, against=against, base_sha=base_sha, git=git, reads=reads
        )
    before = record.started_at if branch == against else None
    if anchor is not None:
        before = anchor.started_at + timedelta(microseconds=1)
    excluded = (record.id, *(anchor.tied if anchor else ()))
    key = record.fingerprint.key()
    read = _window_read(config, store, reads, record.benchmark, key, against, before, excluded)
    return read, anchor, why


def compare_records(
    config: Config,
    store: SqlStore,
    records: Sequence[RunRecord],
    *,
    branch: str,
    against: str,
    base_sha: str = "",
    git: GitHistory | None = None,
    alpha: Levels = ALPHA,
) -> GateResult:
    """Judge the given runs (one per benchmark) against their windows on ``against``, at
    the level ``alpha`` (one for all, or by benchmark: a look's, :func:`stored_levels`); the
    runs need not be stored yet (``run --confirm`` judges a run before recording it).

    On another branch than ``against`` (a PR) with a base commit (``base_sha``: the CI's or
    ``--base-sha``) or a git history (``git``) that knows the run's commit, each window holds
    the comparable runs of ``against`` at or before the PR's merge-base run, so what landed
    on ``against`` after the fork point is not the PR's; the result's notes say which runs
    those are when none was at the merge-base, and whether ``against`` moved since. With
    neither, the window is the latest runs.

    Every run is also judged against the suite's budgets (:func:`budget_comparisons`), on
    any branch, with or without a history, A/B or not: those comparisons come first, apart
    from the statistics (no window, not in the false-discovery family).

    Raises:
        UsageError: ``against`` is another branch and has no runs at all in the project (a
            mistyped base branch would otherwise pass every gate as no baseline), and no
            run was measured beside its own base (``run --ab``: the pairs decide).
        UsageError, ParseError: the budgets' reference file is missing or malformed.
    """
    # every read of the gate in one snapshot: its benchmarks agree with each other, and
    # the whole gate costs one connection checkout, one BEGIN and one COMMIT
    with store.snapshot():
        if records and branch != against and not any(r.paired_with for r in records):
            check_base_branch(config, store, against)
        # one read of the resets and triage for every benchmark, where there are several
        reads = GateReads.read(config, store) if len(records) > 1 else None
        if git is not None and branch != against:
            git.resolve_all([base_sha, *(r.git.commit for r in records)])
        read = {
            r.id: _gate_read(config, store, r, branch, against, base_sha, git, reads)
            for r in records
        }
        # each benchmark's change points are its own: scanned net of the job factor the
        # gate's benchmarks share (a runner pool that moved every benchmark cuts no window)
        netted = net_centres(
            {r.id: read[r.id][0].centres for r in records},
            deterministic=lambda metric: config.policy(metric).deterministic,
        )
        judged: list[_Judged] = []
        notes: list[tuple[str, str]] = []
        for record in records:
            window_read, anchor, why = read[record.id]
            window = window_read.cut(config, netted[record.id])
            judged.append(_judge(config, record, window, against, _level(alpha, record.benchmark)))
            wall_decides = "step_time_ms" not in judged[-1].shown_metrics
            contended = contention_note(record, deciding_wall=wall_decides)
            anchored = _anchor_notes(config, against, anchor, window) if anchor else []
            notes += [(record.benchmark, n) for n in (why, *anchored, contended) if n]
        paired = [r for r in records if r.paired_with]
        comparisons = (*_compared(judged), *_paired(config, store, paired, against, alpha))
        ordered = tuple(sorted(comparisons, key=lambda c: (c.benchmark, c.metric, c.method)))
        attributions, found, work = _advice(config, store, records, ordered, against)
        result = GateResult(
            branch=branch,
            against=against,
            verdict=decide.overall_verdict(ordered),
            comparisons=ordered,
            findings=found,
            attributions=attributions,
            notes=_grouped(notes),
            work_changes=work,
        )
        return with_budgets(config, records, result)


def budget_comparisons(
    config: Config, records: Sequence[RunRecord]
) -> tuple[tuple[Comparison, ...], list[tuple[str, str]]]:
    """Each run against the suite's budgets (:mod:`perfgate.stats.budget`): the comparisons,
    in benchmark and metric order, and ``(benchmark, note)`` for each budget that judged
    nothing. The reference file is read only when a budget relative to it applies.

    Raises:
        UsageError, ParseError: the reference file is missing or malformed
            (:func:`perfgate.app.reference.read_reference`).
    """
    applied = [(r, budgets) for r in records if (budgets := config.budgets_for(r.benchmark))]
    reference: Reference | None = None
    if any(b.of_reference for _, budgets in applied for b in budgets.values()):
        from perfgate.app.reference import read_reference

        assert config.budget_reference is not None  # config.parse_budgets refuses otherwise
        reference = read_reference(config.budget_reference)
    comparisons: list[Comparison] = []
    notes: list[tuple[str, str]] = []
    for record, budgets in applied:
        judged = judge_budgets(record, budgets, reference)
        comparisons.extend(judged.comparisons)
        notes.extend((record.benchmark, n) for n in judged.notes)
    known = {r.benchmark for r in records} | {b.name for b in config.benchmarks}
    for name in sorted(set(config.budgets) - known - {ALL_BENCHMARKS}):
        # A misspelt [budgets.NAME] would otherwise hold nothing, silently.
        notes.append(
            (name, f"[budgets.{name}]: no benchmark of that name in the suite or this gate")
        )
    ordered = tuple(sorted(comparisons, key=lambda c: (c.benchmark, c.metric)))
    return ordered, notes


def with_budgets(config: Config, records: Sequence[RunRecord], result: GateResult) -> GateResult:
    """``result`` with the budgets of ``records`` judged, first, and its verdict again (a
    gate against the store's history or against baseline files), and a note for each
    ``[metrics.NAME]`` table that applies to no metric of the runs or the catalogue."""
    budgets, notes = budget_comparisons(config, records)
    recorded = {base_name(m.metric) for r in records for m in r.measurements}
    unmatched = [
        f"[metrics.{name}]: no run of this gate has that metric, nor does perfgate's "
        "catalogue know it (a misspelt name applies to nothing)"
        for name in sorted(config.metrics)
        if base_name(name) not in recorded and lookup(name) is None
    ]
    if not budgets and not notes and not unmatched:
        return result
    comparisons = (*budgets, *result.comparisons)
    return replace(
        result,
        comparisons=comparisons,
        verdict=decide.overall_verdict(comparisons),
        notes=(*_grouped(notes), *unmatched, *result.notes),
    )


BRANCHES_SHOWN = 10
"""Branch names a missing base branch's error lists at most."""

AB_BASE_SUFFIX = ":base"
"""How ``run --ab`` names the branch of its base runs: ``<branch>:base``."""


def check_base_branch(config: Config, store: SqlStore, against: str) -> None:
    """A base branch with no run of any benchmark is a usage error naming the branches that
    have runs (not the ``<branch>:base`` names under which ``run --ab`` keeps its base
    runs); one with runs, but not of a given benchmark, is that benchmark's no baseline.
    ``check`` calls it before it measures anything."""
    if store.benchmarks(project=config.project, branch=against):
        return
    branches = [b for b in store.branches(project=config.project) if not b.endswith(AB_BASE_SUFFIX)]
    more = ", ..." if len(branches) > BRANCHES_SHOWN else ""
    shown = ", ".join(branches[:BRANCHES_SHOWN]) + more
    raise UsageError(
        f"no runs on base branch {against!r} in project {config.project!r}; "
        f"branches with runs: {shown or 'none'}"
    )


ATTRIBUTION_WINDOW = 10
"""Baseline runs (the most recent of the window) whose profiles an attribution reads."""


def _advice(
    config: Config,
    store: SqlStore,
    records: Sequence[RunRecord],
    comparisons: Sequence[Comparison],
    against: str,
) -> tuple[tuple[Attribution, ...], tuple[Finding, ...], tuple[WorkChange, ...]]:
    """Per run: an attribution of each time metric that regressed or improved (against the
    profiles of its baseline window's newest runs), its findings
    (:func:`perfgate.app.advise.findings_for`), those the run it is judged against (the
    baseline window's newest, else the base branch's latest) also had marked known, and the
    work that changed: the operators whose calls per step moved against the same profiles
    (:func:`perfgate.advisor.work.work_change`), whatever the verdicts. Finding locations
    are prefixed with the benchmark."""
    from perfgate.advisor.attribution import attribute
    from perfgate.advisor.work import work_change
    from perfgate.app.advise import findings_for

    def base_of(record: RunRecord, mine: Sequence[Comparison]) -> RunRecord | None:
        # its window's newest, else the base branch's latest (read only for a run with findings)
        newest = [c.baseline_run_ids[-1] for c in mine if c.baseline_run_ids]
        if newest:
            try:
                return store.get_run(newest[0])
            except StoreError:
                return None
        base = store.latest_run(project=config.project, benchmark=record.benchmark, branch=against)
        return None if base is None or base.id == record.id else base

    paired = {c.benchmark for c in comparisons if c.method == "paired"}
    mine = {
        record.id: [
            c
            for c in comparisons
            if c.current_run_id == record.id and (c.method == "paired" or c.benchmark not in paired)
        ]
        for record in records
    }
    profiled = [r for r in records if r.profile is not None]
    attributed = {
        r.id: [
            (c, c.baseline_run_ids[-ATTRIBUTION_WINDOW:]) for c in mine[r.id] if _attributable(c)
        ]
        for r in profiled
    }
    worked = {r.id: _work_window(mine[r.id]) for r in profiled}
    # the window runs' profiles, all in one read (an attribution needs nothing else of them)
    wanted = [i for cs in attributed.values() for _, ids in cs for i in ids]
    profiles = store.profiles([*wanted, *(i for ids in worked.values() for i in ids)])
    attributions: list[Attribution] = []
    found: list[Finding] = []
    work: list[WorkChange] = []
    for record in records:
        if record.profile is not None:
            window_profiles = [(i, profiles[i]) for i in worked[record.id] if i in profiles]
            changed = work_change(record.benchmark, record.profile, window_profiles)
            if changed is not None:
                work.append(changed)
            for c, ids in attributed[record.id]:
                assert c.current_centre is not None and c.baseline_centre is not None
                delta = c.current_centre - c.baseline_centre
                window = [profiles[i] for i in ids if i in profiles]
                attributions.append(
                    attribute(record.benchmark, c.metric, delta, record.profile, window)
                )
        for f in findings_for(config, record, partial(base_of, record, mine[record.id])):
            where = f"{record.benchmark}: {f.location}" if f.location else record.benchmark
            found.append(replace(f, location=where))
    return tuple(attributions), tuple(found), tuple(work)


WORK_WINDOW = 3
"""Baseline runs (the newest of the window) whose profiles a run's operator counts are
diffed against: a few, so that an op whose count varies from run to run (a data loader's)
is told from one that changed, and every profiled run of a gate costs a few profile reads."""


def _work_window(mine: Sequence[Comparison]) -> tuple[str, ...]:
    """The baseline runs whose profiles a run's operator counts are diffed against: the
    newest :data:`WORK_WINDOW` of its ``op_calls_per_step`` comparison's window (a paired
    one first: the base run measured beside it), else of the longest window it was judged
    against."""
    windows = sorted(
        (c for c in mine if c.baseline_run_ids),
        key=lambda c: (
            c.metric != "op_calls_per_step",
            c.method != "paired",
            -len(c.baseline_run_ids),
        ),
    )
    return windows[0].baseline_run_ids[-WORK_WINDOW:] if windows else ()


def _attributable(c: Comparison) -> bool:
    """A time in ms (the profiles' unit) that regressed or improved."""
    return (
        c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
        and c.unit == TIME_UNIT
        and c.current_centre is not None
        and c.baseline_centre is not None
    )


def _measured(record: RunRecord, metric: str) -> bool:
    return record.measurement(metric) is not None


def _paired(
    config: Config, store: SqlStore, heads: Sequence[RunRecord], against: str, alpha: Levels
) -> tuple[Comparison, ...]:
    """Each head run against the base run measured beside it, pair by pair, at its level in
    ``alpha``; the spread of repeats inside the base branch's runs, where there is a history,
    bounds the pair noise from below (a few pairs cannot show their own noise)."""
    evidences: list[PairedEvidence] = []
    shown: list[PairedEvidence] = []
    for head in heads:
        assert head.paired_with is not None
        base = store.get_run(head.paired_with)
        beside = _shown_beside(config, head, partial(_measured, base))
        window = store.history(
            project=config.project,
            benchmark=head.benchmark,
            branch=against,
            fingerprint_key=head.fingerprint.key(),
            limit=config.baseline_window,
        )
        for m in head.measurements:
            b = base.measurement(m.metric)
            if b is None:
                continue
            policy = config.policy(m.metric, m.direction)
            centres = zip(b.summary.repeat_centres, m.summary.repeat_centres, strict=True)
            (shown if m.metric in beside else evidences).append(
                compare_pairs(
                    [Pair(base=x, head=y) for x, y in centres],
                    benchmark=head.benchmark,
                    metric=m.metric,
                    unit=m.unit,
                    direction=policy.direction,
                    policy=policy,
                    run_id=head.id,
                    base_run_id=base.id,
                    base_commit=base.git.commit,
                    noise=pair_noise_from_history([p for p in window if p.metric == m.metric]),
                    alpha=_level(alpha, head.benchmark),
                )
            )
    return (
        *(replace(c, method="paired") for c in decide_paired(evidences)),
        *(replace(c, method="paired", decides=False) for c in decide_paired(shown)),
    )


def gate_failed(config: Config, result: GateResult) -> bool:
    """Whether any deciding comparison's verdict is one the policy (``fail_on``) fails on."""
    return decide.gate_fails(result.comparisons, config.fail_on)


def noise(config: Config, store: SqlStore, *, branch: str) -> list[NoiseRow]:
    """Minimum detectable effect of every noisy metric: the latest run on ``branch`` judged
    against the runs before it. A metric whose MDE exceeds its minimum effect cannot be
    gated at that threshold: a real regression of that size would read as inconclusive."""
    result = compare(config, store, branch=branch, against=branch)
    return [
        NoiseRow(c.benchmark, c.metric, len(c.baseline_run_ids), c.mde_pct, c.min_effect_pct)
        for c in result.comparisons
        if not decide.is_budget(c) and not config.policy(c.metric).deterministic
    ]
