"""``perfgate bisect``: the first commit of a range that made a benchmark slower.

The range is ``--good`` (exclusive) to ``--bad`` (inclusive), the commits on the ancestry
path between them, oldest first. Each round checks one midpoint out in a git worktree beside
the last commit known good, and measures the two with the A/B machinery of ``check --mode
ab``: alternating pairs in fresh processes (:func:`perfgate.runner.ab.run_pairs`), each side
running the benchmark as its own commit's suite defines it, judged by the one paired rule
(:func:`perfgate.app.gate.compare_records`, in a throwaway store: a bisection's pairs are no
branch's history). A midpoint's first try is one look at its first pairs (the suite's
repeats, at least 10: :data:`FIRST_FAMILY`) at alpha: a change far beyond the minimum
effect, which is what a bisection looks for, is decided there. One left inconclusive is
measured again with fresh pairs and group-sequential looks that add pairs until decided or
the round's share of the budget is spent (:func:`perfgate.stats.looks.
measure_until_decided`, the looks' levels summing to alpha),
so a midpoint's chance of a false verdict is at most alpha per try. A midpoint is ``bad``
when the paired rule calls it a regression against the last good commit (significant and
at least the minimum effect), ``good`` when it is unchanged (equivalence within the
minimum effect) or an improvement; then the range is halved. With ``n`` commits in the
range the culprit is named after at most ``ceil(log2(n))`` decided rounds.

The minimum effect is the metric's (the suite's ``[metrics.NAME]`` or the catalogue's)
unless ``min_effect_pct`` is given: the nightly passes half the change it detected, so a
midpoint is judged against the size of the change being looked for, not against the gate's
smallest one (equivalence within 25% of a 2x slowdown needs far fewer pairs than within 3%).

A midpoint that does not build or run (an import error, a step that raises, a worker that
dies) is skipped, as ``git bisect skip`` does, and the next nearest commit is measured. When
the budget runs out, every commit left is skipped, or a midpoint stays
inconclusive, the outcome says so with the range narrowed so far.

The halving (:func:`halve`) is driven by a ``measure(sha, against, seconds) -> Step`` seam,
so it is tested on simulated verdicts; :func:`bisect` builds the real one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.app.context import GitHistory, open_git_history
from perfgate.app.gate import AB_BASE_SUFFIX, compare_records
from perfgate.app.record import ProgressFn, build_record
from perfgate.app.specs import base_side_spec
from perfgate.config import Config
from perfgate.errors import ConfigError, RunnerError, UsageError
from perfgate.models import (
    BenchmarkSpec,
    ChangePoint,
    CIContext,
    Comparison,
    DetectedChange,
    Direction,
    GateResult,
    GitContext,
    RunRecord,
    Verdict,
)
from perfgate.reporters.forges import Reporter
from perfgate.reporters.markdown import change_key, escape
from perfgate.runner import BenchmarkOutcome, RepeatResult, split_threads
from perfgate.stats import looks
from perfgate.stats.decide import ALPHA, deciding
from perfgate.stats.paired import pairs_to_decide

if TYPE_CHECKING:
    from perfgate.app.deliver import TargetOverrides

GOOD = "good"
BAD = "bad"
SKIP = "skip"
INCONCLUSIVE = "inconclusive"

FOUND = "found"
BUDGET = "budget"
UNDECIDED = "undecided"
SKIPPED = "skipped"

MAX_TRIES = 2
"""Times one midpoint is measured (fresh pairs each time) before bisect stops there."""
FIRST_FAMILY = 4
"""A midpoint's first pairs let one metric decide alone among this many tested ones: the
gate adjusts its p-values across its deciding metrics (Benjamini-Hochberg), so with 8 pairs
(the fewest whose pair-order test reaches alpha, 2/256) a +100% CPU time beside an
unchanged peak memory is left inconclusive; 10 pairs (2/1024) decide it among 4."""
_STEP_METRICS = ("step_cpu_ms", "step_device_ms", "step_time_ms")
"""The metric a step's change is reported on, where several decide: the first present."""


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str = ""
    author: str = ""


@dataclass(frozen=True)
class Step:
    """One measured (or skipped) midpoint: its verdict against ``against`` (the last commit
    known good), the change of the deciding metric with its 95% interval, the pairs measured
    and the seconds the round took."""

    sha: str
    subject: str
    verdict: str
    against: str = ""
    metric: str = ""
    change_pct: float | None = None
    ci: tuple[float, float] | None = None
    pairs: int = 0
    seconds: float = 0.0
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "metric": self.metric or None,
            "ci": list(self.ci) if self.ci is not None else None,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class BisectOutcome:
    """What a bisection found: the culprit (None unless ``why`` is ``found``), the range
    narrowed to (``good``: the last commit known good; ``bad``: the first known bad), the
    commits the culprit may still be (after ``good``, up to and including ``bad``), every
    step, and why it stopped."""

    benchmark: str
    good: Commit
    bad: Commit
    candidates: tuple[Commit, ...]
    steps: tuple[Step, ...]
    why: str
    culprit: Commit | None = None
    seconds: float = 0.0
    min_effect_pct: float | None = None

    @property
    def rounds(self) -> int:
        """The midpoints measured (a skipped one is not a round)."""
        return sum(1 for s in self.steps if s.verdict != SKIP)

    @property
    def culprit_step(self) -> Step | None:
        """The step that measured the culprit bad; None where it was never measured (every
        midpoint was good, so the ``--bad`` commit is the first bad one by elimination)."""
        if self.culprit is None:
            return None
        return next((s for s in self.steps if s.sha == self.culprit.sha and s.verdict == BAD), None)

    def to_dict(self) -> dict[str, Any]:
        step = self.culprit_step
        return {
            "benchmark": self.benchmark,
            "culprit": self.culprit.sha if self.culprit else None,
            "subject": self.culprit.subject if self.culprit else None,
            "author": self.culprit.author if self.culprit else None,
            "change_pct": step.change_pct if step else None,
            "ci": list(step.ci) if step and step.ci else None,
            "why": self.why,
            "range": [self.good.sha, self.bad.sha],
            "candidates": [c.sha for c in self.candidates],
            "rounds": self.rounds,
            "seconds": round(self.seconds, 3),
            "min_effect_pct": self.min_effect_pct,
            "steps": [s.to_dict() for s in self.steps],
        }


MeasureFn = Callable[[str, str, float], Step]
"""Measure commit ``sha`` against commit ``against`` (known good) within ``seconds``."""


def halve(
    chain: Sequence[Commit],
    measure: MeasureFn,
    *,
    seconds_left: Callable[[], float],
    benchmark: str = "",
    note: Callable[[Step], None] | None = None,
) -> BisectOutcome:
    """Bisect ``chain`` (the good commit first, the bad one last, oldest first) with
    ``measure``; ``seconds_left``: what the budget still allows (each round gets its share:
    the time left over the rounds still needed at most). ``note`` is told every step."""
    if len(chain) < 2:
        raise UsageError("bisect needs a good commit and a later bad one")
    lo, hi = 0, len(chain) - 1
    skipped: set[int] = set()
    tries: dict[int, int] = {}
    steps: list[Step] = []
    why = FOUND
    while hi - lo > 1:
        inside = [i for i in range(lo + 1, hi) if i not in skipped]
        if not inside:
            why = SKIPPED
            break
        left = seconds_left()
        if left <= 0:
            why = BUDGET
            break
        middle = (lo + hi) / 2
        m = min(inside, key=lambda i: (abs(i - middle), i))
        rounds = max(1, math.ceil(math.log2(hi - lo)))
        step = measure(chain[m].sha, chain[lo].sha, left / rounds)
        steps.append(step)
        if note is not None:
            note(step)
        if step.verdict == BAD:
            hi = m
        elif step.verdict == GOOD:
            lo = m
        elif step.verdict == SKIP:
            skipped.add(m)
        else:
            tries[m] = tries.get(m, 0) + 1
            if tries[m] >= MAX_TRIES:
                why = UNDECIDED
                break
    return BisectOutcome(
        benchmark=benchmark,
        good=chain[lo],
        bad=chain[hi],
        candidates=tuple(chain[lo + 1 : hi + 1]),
        steps=tuple(steps),
        why=why,
        culprit=chain[hi] if why == FOUND else None,
    )


# --- git -------------------------------------------------------------------------------------


def _git(root: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, timeout=120, check=False
    )
    return out.stdout if out.returncode == 0 else ""


def commit_chain(root: Path, good: str, bad: str) -> list[Commit]:
    """``good`` and the commits after it up to ``bad`` on the ancestry path, oldest first,
    each with its subject and author line.

    Raises:
        UsageError: outside a git checkout, an unknown ref, ``good`` not an ancestor of
            ``bad``, or nothing between them.
    """
    history = open_git_history(root)
    if history is None:
        raise UsageError(f"bisect: {root} is not inside a git checkout")
    for flag, ref in (("--good", good), ("--bad", bad)):
        if not history.resolve(ref):
            raise UsageError(f"bisect: {flag} {ref}: no such commit here (a shallow clone?)")
    first, last = history.resolve(good), history.resolve(bad)
    if first == last:
        raise UsageError(f"bisect: --good {good} and --bad {bad} are the same commit")
    if not history.is_ancestor(first, last):
        raise UsageError(f"bisect: --good {good} is not an ancestor of --bad {bad}")
    listed = _git(root, "rev-list", "--reverse", "--ancestry-path", f"{first}..{last}").split()
    return [describe(root, s) for s in (first, *listed)]


def describe(root: Path, sha: str) -> Commit:
    text = _git(root, "log", "-1", "--format=%s%x00%an <%ae>", sha).rstrip("\n")
    subject, _, author = text.partition("\x00")
    return Commit(sha, subject, author)


def checkout_of(suite: Path) -> tuple[Path, Path]:
    """The git checkout holding the suite file ``suite`` and the suite's directory relative
    to it (each side of a pair runs its own tree's code from there)."""
    from perfgate.runner.ab import repo_root

    where = suite.resolve().parent
    root = repo_root(where)
    if root is None:
        raise UsageError(f"bisect: {where} is not inside a git checkout")
    return root, where.relative_to(root)


# --- measuring one midpoint ------------------------------------------------------------------


def _with_min_effect(config: Config, record: RunRecord, pct: float | None) -> Config:
    """``config`` with ``pct`` the minimum effect of every noisy deciding metric of
    ``record`` (None: ``config`` as it is)."""
    if pct is None:
        return config
    metrics = dict(config.metrics)
    for m in record.measurements:
        policy = config.policy(m.metric, m.direction)
        if not (policy.deterministic or policy.numerics) and policy.decides:
            metrics[m.metric] = replace(policy, min_effect_pct=pct)
    return replace(config, metrics=metrics)


def step_verdict(result: GateResult, benchmark: str) -> tuple[str, Comparison | None]:
    """A midpoint's verdict from the paired gate of it against the good side: ``bad`` on a
    regression, ``inconclusive`` while any deciding comparison is, else ``good``; with the
    comparison its change is reported on (of several, the first of :data:`_STEP_METRICS`)."""
    mine = [
        c for c in deciding(result.comparisons) if c.benchmark == benchmark and c.method == "paired"
    ]
    worse = [c for c in mine if c.verdict is Verdict.REGRESSION]
    open_ = [c for c in mine if c.verdict is Verdict.INCONCLUSIVE]
    main = min(
        worse or open_ or mine,
        key=lambda c: _STEP_METRICS.index(c.metric) if c.metric in _STEP_METRICS else 99,
        default=None,
    )
    return (BAD if worse else INCONCLUSIVE if open_ or not mine else GOOD), main


@contextmanager
def _scratch_store() -> Iterator[Any]:
    """A throwaway store: a bisection's pairs are no history of any branch."""
    from perfgate.store import open_store

    with tempfile.TemporaryDirectory(prefix="perfgate-bisect-") as tmp:
        with open_store(f"sqlite:///{Path(tmp) / 'bisect.db'}") as store:
            yield store


class _Skip(Exception):
    """A midpoint that does not build or run: skipped."""


def paired_measure(
    config: Config,
    spec: BenchmarkSpec,
    store: Any,
    *,
    root: Path,
    suite_dir: Path,
    chain: Sequence[Commit],
    min_effect_pct: float | None = None,
    progress: ProgressFn | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> MeasureFn:
    """The real ``measure``: ``sha`` against ``against`` in worktrees, pairs until decided.
    A run that fails names its side: ``(base)``, the good commit, stops the bisection."""
    from perfgate.runner.ab import base_worktree, run_pairs

    subjects = {c.sha: c.subject for c in chain}
    attempts: dict[str, int] = {}
    build = functools.partial(
        build_record, project=config.project, ci=CIContext(), host_label=config.host_label
    )
    first_pairs = max(spec.repeats, pairs_to_decide(ALPHA / FIRST_FAMILY))

    def measure(sha: str, against: str, seconds: float) -> Step:
        began = clock()
        subject = subjects.get(sha, "")
        with base_worktree(root, against) as base_dir, base_worktree(root, sha) as head_dir:
            # the good side (base) and the midpoint (head), each its own tree's suite, and
            # the repeats measured so far of each
            base_spec = base_side_spec(spec, config, head_dir=root, base_dir=base_dir)
            head_spec = base_side_spec(spec, config, head_dir=root, base_dir=head_dir)
            base: list[RepeatResult] = []
            head: list[RepeatResult] = []
            started = datetime.now(timezone.utc)
            seed = int(uuid.uuid4().hex[:8], 16)

            def more(k: int, *, first: bool = False) -> None:
                nonlocal seed
                seed += 1
                try:
                    base_out, head_out, _ = run_pairs(
                        replace(head_spec, repeats=k, profiled=0),
                        head_dir=head_dir,
                        base_dir=base_dir,
                        suite_dir=suite_dir,
                        trace_dir=None,
                        seed=seed,
                        progress=progress,
                        base_spec=replace(base_spec, repeats=k, profiled=0),
                    )
                except (RunnerError, ConfigError) as exc:
                    if "(base)" not in str(exc):
                        raise _Skip(str(exc)) from exc
                    if not first:
                        raise
                    good = f"bisect: the good commit {against[:12]} does not run: {exc}"
                    raise RunnerError(good) from exc
                base.extend(base_out.repeats)
                head.extend(head_out.repeats)

            def record(
                side: BenchmarkSpec, repeats: list[RepeatResult], git: GitContext
            ) -> RunRecord:
                threads, _ = split_threads(side)
                side = replace(side, repeats=len(repeats))
                now = datetime.now(timezone.utc)
                outcome = BenchmarkOutcome(side, threads, tuple(repeats), started, now)
                return build(outcome, run_id=uuid.uuid4().hex, git=git)

            def judge(level: float) -> GateResult:
                base_run = record(base_spec, base, GitContext(against, f"bisect{AB_BASE_SUFFIX}"))
                head_run = record(head_spec, head, GitContext(sha, "bisect"))
                head_run = replace(head_run, paired_with=base_run.id)
                store.save_runs([base_run])
                judged = _with_min_effect(config, head_run, min_effect_pct)
                return compare_records(
                    judged, store, [head_run], branch="bisect", against="bisect-good", alpha=level
                )

            verdict: str = INCONCLUSIVE
            row: Comparison | None = None

            def look(asked: Mapping[str, float]) -> set[str]:
                nonlocal verdict, row
                verdict, row = step_verdict(judge(asked[spec.name]), spec.name)
                return {spec.name} if verdict != INCONCLUSIVE else set()

            try:
                more(first_pairs, first=True)
                took = clock() - began
                attempts[sha] = attempts.get(sha, 0) + 1
                extra = (
                    looks.Budget(pairs=0)
                    if attempts[sha] == 1
                    else looks.Budget(seconds=max(seconds - (clock() - began), 0.0))
                )
                # a first try is one look at the first pairs, a retry looks that add pairs
                # within its share of the budget (see the module)
                looks.measure_until_decided(
                    {spec.name: len(head)},
                    seconds_per_pair={spec.name: took / max(len(head), 1)},
                    budget=extra,
                    measure=lambda _, k, __: more(k),
                    judge=look,
                    clock=clock,
                )
            except _Skip as exc:
                return Step(sha, subject, SKIP, against, seconds=clock() - began, note=str(exc))
        step = Step(sha, subject, verdict, against, pairs=len(head), seconds=clock() - began)
        if row is None:
            return step
        low, high = row.ci_low_pct, row.ci_high_pct
        ci = (low, high) if low is not None and high is not None else None
        note = row.reason if verdict == INCONCLUSIVE else ""
        return replace(step, metric=row.metric, change_pct=row.change_pct, ci=ci, note=note)

    return measure


# --- the use case ----------------------------------------------------------------------------


def bisect(
    config: Config,
    spec: BenchmarkSpec,
    *,
    suite: Path,
    good: str,
    bad: str,
    seconds: float,
    min_effect_pct: float | None = None,
    progress: ProgressFn | None = None,
    note: Callable[[Step], None] | None = None,
    measure: MeasureFn | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> BisectOutcome:
    """Find the first commit after ``good`` up to ``bad`` that made ``spec`` slower (see the
    module), within ``seconds`` of measuring. ``suite``: the suite file, inside the git
    checkout whose history is searched. ``measure``: a stand-in for the paired measurement
    (tests).

    Raises:
        UsageError: what :func:`commit_chain` raises; a benchmark that is not single-process
            training.
        RunnerError: the good commit does not run.
    """
    if spec.distributed or (spec.kind or "training") != "training":
        raise UsageError(
            f"bisect: benchmark {spec.name} is "
            f"{'multi-device' if spec.distributed else spec.kind}; bisect measures "
            "single-process training benchmarks (as A/B pairs do)"
        )
    root, suite_dir = checkout_of(suite)
    chain = commit_chain(root, good, bad)
    start = clock()

    def left() -> float:
        return seconds - (clock() - start)

    with ExitStack() as stack:
        if measure is None:
            store = stack.enter_context(_scratch_store())
            measure = paired_measure(
                config,
                spec,
                store,
                root=root,
                suite_dir=suite_dir,
                chain=chain,
                min_effect_pct=min_effect_pct,
                progress=progress,
                clock=clock,
            )
        outcome = halve(chain, measure, seconds_left=left, benchmark=spec.name, note=note)
    return replace(outcome, seconds=clock() - start, min_effect_pct=min_effect_pct)


# --- from the nightly's analysis -------------------------------------------------------------


@dataclass(frozen=True)
class Suspect:
    """A change point of the nightly's analysis worth bisecting: its benchmark, commit range,
    change, and key on the tracking issue."""

    benchmark: str
    metric: str
    good: str
    bad: str
    change_pct: float
    key: str


def bisected_key(key: str) -> str:
    """The key the tracking issue keeps for a change point whose culprit was looked for (16
    hex digits, beside the change points' own keys): one search per change point."""
    return hashlib.sha256(f"bisected\x1f{key}".encode()).hexdigest()[:16]


def suspects(
    path: Path, *, root: Path, benchmarks: Sequence[str], done: Sequence[str] = ()
) -> list[Suspect]:
    """The regressions of a ``history analyze --json`` file (step change points, not drifts)
    whose commit range spans more than one commit, of a benchmark in ``benchmarks``, not
    searched before (``done``: keys the tracking issue holds); the largest first.

    Raises:
        UsageError: the file cannot be read or is not such a file.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--changes {path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:  # not UTF-8, or not JSON
        raise UsageError(f"--changes {path}: not JSON ({exc})") from None
    except RecursionError:
        raise UsageError(
            f"--changes {path}: not 'history analyze --json' (nested too deeply)"
        ) from None
    rows = data.get("change_points") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise UsageError(
            f"--changes {path}: no change_points list; expected the JSON of "
            "'perfgate history analyze --json'"
        )
    history = GitHistory(root)
    found = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or row.get("verdict") != Verdict.REGRESSION.value:
            continue
        change_pct = row.get("change_pct") or 0.0
        if isinstance(change_pct, bool) or not isinstance(change_pct, int | float):
            raise UsageError(f"--changes {path}: change_points[{i}].change_pct: not a number")
        before, after = (list(row.get("commit_range") or []) + ["", ""])[:2]
        name, metric = str(row.get("benchmark", "")), str(row.get("metric", ""))
        # unknown here (either empty, or not in this checkout) is no range to search
        if name not in benchmarks or history.is_ancestor(before, after) is not True:
            continue
        span = _git(root, "rev-list", "--count", "--ancestry-path", f"{before}..{after}").strip()
        if not span.isdigit() or int(span) < 2:
            continue
        # the change point's key: its series and the first run after it (the rest is moot)
        series, first = str(row.get("fingerprint_key", "")), str(row.get("first_run_after", ""))
        point, lower = ChangePoint(0, 0.0, 0.0, 0.0, 1.0, 0.0), Direction.LOWER_IS_BETTER
        change = DetectedChange(name, metric, "", lower, "", series, point, "", first, "", "", 0)
        key = change_key(change)
        if bisected_key(key) in done:
            continue
        found.append(Suspect(name, metric, before, after, float(change_pct), key))
    return sorted(found, key=lambda s: -abs(s.change_pct))


@dataclass(frozen=True)
class NightlyBisect:
    """What ``bisect`` did: the change point it searched (``--changes``; None: nothing to
    search, or a range given), what the search found (None: nothing searched), and what was
    said on the tracking issue."""

    suspect: Suspect | None
    outcome: BisectOutcome | None = None
    delivered: str = ""


def bisect_changes(
    config: Config,
    specs: Mapping[str, BenchmarkSpec],
    *,
    changes: Path,
    suite: Path,
    seconds: float,
    branch: str,
    reporter: Reporter | None = None,
    reporter_after: Callable[[], Reporter] | None = None,
    progress: ProgressFn | None = None,
    note: Callable[[Step], None] | None = None,
    measure: MeasureFn | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> NightlyBisect:
    """The nightly's search: of the regressions in ``changes`` (``history analyze --json``)
    whose range spans more than one commit, the largest one not searched before (the
    tracking issue's keys, where ``reporter`` is given) is bisected, with half its detected
    change as the minimum effect (at least the metric's own); the culprit, its author line
    and the measured change are then posted on the tracking issue, by ``reporter_after()``
    where given (a fresh client: a client's delivery budget starts at its first request,
    the look-up of the keys, and the search takes minutes), else by ``reporter``."""
    from perfgate.app.deliver import alert_culprit, tracked_keys

    done = tracked_keys(config.project, reporter) if reporter is not None else []
    root, _ = checkout_of(suite)
    found = suspects(changes, root=root, benchmarks=list(specs), done=done)
    if not found:
        return NightlyBisect(None)
    suspect = found[0]
    floor = config.policy(suspect.metric).min_effect_pct
    outcome = bisect(
        config,
        specs[suspect.benchmark],
        suite=suite,
        good=suspect.good,
        bad=suspect.bad,
        seconds=seconds,
        min_effect_pct=max(abs(suspect.change_pct) / 2.0, floor),
        progress=progress,
        note=note,
        measure=measure,
        clock=clock,
    )
    if reporter is None:
        return NightlyBisect(suspect, outcome)
    comment, key = render_culprit_markdown(outcome, suspect), bisected_key(suspect.key)
    reporter = reporter_after() if reporter_after is not None else reporter
    said = alert_culprit(config.project, branch, comment, key, reporter)
    return NightlyBisect(suspect, outcome, said)


def bisect_job(
    config: Config,
    *,
    suite: Path | None,
    seconds: float,
    benchmark: str | None = None,
    good: str = "",
    bad: str = "",
    changes: Path | None = None,
    min_effect_pct: float | None = None,
    branch: str | None = None,
    alert: TargetOverrides | None = None,
    env: Mapping[str, str] | None = None,
    progress: ProgressFn | None = None,
    note: Callable[[Step], None] | None = None,
) -> NightlyBisect:
    """``perfgate bisect``'s whole job: with ``changes``, the nightly's search
    (:func:`bisect_changes`, among ``benchmark`` only where given), else ``benchmark``'s
    first bad commit after ``good`` up to ``bad`` (:func:`bisect`); with ``alert`` (overrides
    of the CI's forge target), the culprit is named on the project's tracking issue.
    ``suite``: the suite file where the config names none (default ``./perfgate.toml``);
    ``branch`` None: the base branch; ``env`` None: ``os.environ``.

    Raises:
        UsageError: ``benchmark`` is not in the suite; what the search raises.
        ReportError: the forge target cannot be told (before anything is measured).
    """
    from perfgate.app import deliver
    from perfgate.app.specs import benchmark_specs

    env = os.environ if env is None else env
    specs = {s.name: s for s in benchmark_specs(config)}
    if benchmark is not None:
        if not config.source:  # each commit runs the benchmark as its suite file defines it
            raise UsageError(
                "bisect: no suite file (./perfgate.toml or [tool.perfgate] in ./pyproject.toml): "
                "pass --suite FILE"
            )
        if benchmark not in specs:
            known = ", ".join(sorted(specs)) or "none"
            raise UsageError(f"bisect: --benchmark {benchmark}: not in the suite (it has: {known})")
        specs = {benchmark: specs[benchmark]}
    fresh: Callable[[], Reporter] | None = None
    if alert is not None:
        # one client per delivery: a client's HTTP budget (PERFGATE_HTTP_BUDGET_S) starts at
        # its first request, and the search between them takes minutes
        fresh = functools.partial(deliver.make_reporter, deliver.resolve_target(env, alert), env)
    reporter = fresh() if fresh is not None else None
    suite = Path(config.source) if config.source else (suite or Path("perfgate.toml"))
    branch = branch or config.base_branch
    common: dict[str, Any] = dict(suite=suite, seconds=seconds, progress=progress, note=note)
    if changes is not None:
        return bisect_changes(
            config,
            specs,
            changes=changes,
            branch=branch,
            reporter=reporter,
            reporter_after=fresh,
            **common,
        )
    assert benchmark is not None
    outcome = bisect(
        config, specs[benchmark], good=good, bad=bad, min_effect_pct=min_effect_pct, **common
    )
    if reporter is None:
        return NightlyBisect(None, outcome)
    key = bisected_key(f"{outcome.benchmark} {good} {bad}")
    comment = render_culprit_markdown(outcome)
    said = deliver.alert_culprit(config.project, branch, comment, key, reporter)
    return NightlyBisect(None, outcome, said)


def render_culprit_markdown(outcome: BisectOutcome, suspect: Suspect | None = None) -> str:
    """The tracking issue's comment: the culprit (or the range narrowed to), its author
    line, the measured change and each step."""
    lines = []
    what = escape(outcome.benchmark)
    if suspect is not None:
        what += (
            f" {escape(suspect.metric)} ({suspect.change_pct:+.1f}% between "
            f"{suspect.good[:8]}..{suspect.bad[:8]})"
        )
    if outcome.culprit is not None:
        step = outcome.culprit_step
        change = (
            f"{step.change_pct:+.1f}%"
            + (f" [{step.ci[0]:+.1f}%, {step.ci[1]:+.1f}%]" if step.ci else "")
            + f" ({escape(step.metric)}, {step.pairs} pairs against {step.against[:10]})"
            if step is not None and step.change_pct is not None
            else "not measured on its own (every commit before it measured good)"
        )
        lines += [
            f"**perfgate bisect**: {what}: first bad commit "
            f"**{outcome.culprit.sha[:12]}** {escape(outcome.culprit.subject)}",
            "",
            f"- author: {escape(outcome.culprit.author)}",
            f"- measured change: {change}",
        ]
    else:
        lines += [
            f"**perfgate bisect**: {what}: not narrowed to one commit ({why_text(outcome)})",
            "",
            f"- the first bad commit is one of {len(outcome.candidates)}: "
            + ", ".join(c.sha[:10] for c in outcome.candidates),
        ]
    lines += [
        f"- {outcome.rounds} round(s) in {outcome.seconds / 60:.1f} min",
        "",
        "| commit | verdict | change | 95% interval | pairs | seconds |",
        "| --- | --- | ---: | --- | ---: | ---: |",
    ]
    for s in outcome.steps:
        change = f"{s.change_pct:+.1f}%" if s.change_pct is not None else "-"
        ci = f"[{s.ci[0]:+.1f}%, {s.ci[1]:+.1f}%]" if s.ci else "-"
        lines.append(
            f"| {s.sha[:10]} {escape(s.subject)} | {s.verdict} | {change} | {ci} | "
            f"{s.pairs} | {s.seconds:.0f} |"
        )
    return "\n".join(lines) + "\n"


def why_text(outcome: BisectOutcome) -> str:
    """Why a bisection stopped short of one commit, in words."""
    if outcome.why == UNDECIDED:
        where = f" {outcome.steps[-1].sha[:12]}" if outcome.steps else ""
        return f"the midpoint{where} stayed inconclusive after {MAX_TRIES} tries"
    return {
        BUDGET: "the budget ran out",
        SKIPPED: "every commit left between them was skipped: it does not build or run",
    }.get(outcome.why, "found")
