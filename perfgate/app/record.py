"""Run benchmarks and record them: plain runs, paired A/B runs and ``run --confirm``."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

from perfgate.app.context import GitHistory
from perfgate.app.gate import AB_BASE_SUFFIX, compare_records, gate_window, stored_levels
from perfgate.app.measure import (
    extended,
    inference_measurements,
    job_measurements,
    profile_measurements,
    training_measurements,
)
from perfgate.app.specs import base_side_spec
from perfgate.config import Config
from perfgate.errors import ParseError, RunnerError, StoreError, UsageError
from perfgate.models import (
    BenchmarkSpec,
    CIContext,
    Confirmation,
    GitContext,
    LaunchOptions,
    ParamValue,
    ProfileSummary,
    RunRecord,
    Verdict,
)
from perfgate.parsers import read_profile
from perfgate.reporters.render import plural
from perfgate.runner import BenchmarkOutcome, RepeatResult, run_benchmark
from perfgate.runner.fingerprint import build_fingerprint
from perfgate.stats import sequential
from perfgate.stats.decide import deciding
from perfgate.stats.window import Window
from perfgate.store import SqlStore

ProgressFn = Callable[[str], None]


def _profile(trace_path: str | None) -> ProfileSummary | None:
    """The profiled window's summary (a torch.profiler trace, or a torch_npu directory)."""
    if trace_path is None:
        return None
    return read_profile(Path(trace_path)).ranks[0]


def build_record(
    outcome: BenchmarkOutcome,
    *,
    run_id: str,
    project: str,
    git: GitContext,
    ci: CIContext,
    host_label: str,
) -> RunRecord:
    """A RunRecord from what the runner measured (pure apart from parsing the trace)."""
    spec = outcome.spec
    first = outcome.repeats[0]
    comparable: dict[str, ParamValue] = {
        k: v for k, v in first.params.items() if k not in spec.treatment_params
    }
    comparable["threads"] = outcome.threads
    if first.ranks:
        comparable["nproc"] = spec.nproc
        comparable["nnodes"] = max(1, first.world_size // max(spec.nproc, 1))
    fingerprint = build_fingerprint(
        first.env, device=spec.device, params=comparable, host_label=host_label
    )
    if first.ranks:
        measurements, profile, rank_profiles = job_measurements(outcome)
    else:
        one = inference_measurements if spec.kind == "inference" else training_measurements
        measurements, profile, rank_profiles = one(outcome), _profile(outcome.trace_path), ()
    measurements.extend(profile_measurements(profile))
    recorded_spec = replace(spec, params={**spec.params, **first.params})
    return RunRecord(
        id=run_id,
        project=project,
        benchmark=spec.name,
        fingerprint=fingerprint,
        git=git,
        ci=ci,
        started_at=outcome.started_at,
        finished_at=outcome.finished_at,
        measurements=tuple(measurements),
        spec=recorded_spec,
        profile=profile,
        rank_profiles=rank_profiles,
    )


NOTHING_TO_RUN = "nothing to run: give --workload NAME or a suite with [[benchmarks]]"


def check_writable(
    store: SqlStore, specs: Sequence[BenchmarkSpec], trace_root: Path | None = None
) -> None:
    """What measuring ``specs`` will write, checked before it starts: a store that was opened
    read-only (a read-only file, directory or mount) and, when a benchmark profiles, a trace
    directory that cannot be created or written fail now, in one line (exit 3), not after
    the suite ran and its results had nowhere to go.

    Raises:
        StoreError: the store cannot be written.
        RunnerError: the profiled windows' directory cannot be written.
    """
    if store.read_only:
        raise StoreError(
            f"cannot record runs in {store.url}: it is read-only (the file, its directory "
            "or the file system); nothing was measured"
        )
    if trace_root is None or not any(s.profiled > 0 for s in specs):
        return
    existing = trace_root.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise RunnerError(
            f"cannot write profiler traces under {trace_root}: {existing} is not a writable "
            "directory (pass --trace-dir, or --profiled 0); nothing was measured"
        )


def run_and_record(
    config: Config,
    specs: Sequence[BenchmarkSpec],
    store: SqlStore,
    *,
    git: GitContext,
    ci: CIContext,
    trace_root: Path,
    sys_path: Sequence[str] = (),
    progress: ProgressFn | None = None,
    warn: ProgressFn | None = None,
    launch: LaunchOptions | None = None,
) -> list[RunRecord]:
    """Run each benchmark and record it as one run, in one transaction per run.

    A benchmark that fails stops the command; the runs already recorded stay (each complete),
    and nothing of the failed one is written. A multi-device benchmark is one torchrun job
    per repeat (``launch`` says how across nodes); on a node that did not hold rank 0
    nothing is recorded (that node's ``perfgate run`` records it).
    """
    _runnable(specs, git)
    build = partial(build_record, project=config.project, ci=ci, host_label=config.host_label)
    say: ProgressFn = warn or (lambda line: None)
    records = []
    for spec in specs:
        run_id = uuid.uuid4().hex
        outcome = run_benchmark(
            spec,
            trace_dir=trace_root / run_id,
            progress=progress,
            sys_path=list(sys_path),
            launch=launch,
        )
        if not outcome.repeats:
            say(f"{spec.name}: rank 0 ran on another node; that node records the run")
            continue
        try:
            record = build(outcome, run_id=run_id, git=git)
        except ParseError as exc:
            raise ParseError(f"benchmark {spec.name}: profiled window unreadable: {exc}") from exc
        record = with_advisor_findings(record, outcome.trace_path, warn)
        for note in store.save_run(record):  # a runner clock far from the store's
            say(note)
        records.append(record)
    return records


def _runnable(specs: Sequence[BenchmarkSpec], git: GitContext) -> None:
    if not specs:
        raise UsageError(NOTHING_TO_RUN)
    if not git.branch:
        raise UsageError("cannot tell the branch: pass --branch or run inside a git checkout")


def with_advisor_findings(
    record: RunRecord, trace_path: str | None, warn: ProgressFn | None = None
) -> RunRecord:
    """On an NPU run (its profiled window is a torch_npu profile directory), msprof-analyze's
    findings added to the record; a missing or failing advisor is reported through ``warn``
    (one line) and changes nothing else."""
    if trace_path is None or not Path(trace_path).is_dir():
        return record
    from perfgate.advisor import msprof

    outcome = msprof.run(Path(trace_path), location=record.benchmark)
    if outcome.problem and warn is not None:
        warn(outcome.problem)
    return replace(record, findings=record.findings + outcome.findings)


def run_ab_and_record(
    config: Config,
    specs: Sequence[BenchmarkSpec],
    store: SqlStore,
    *,
    ref: str,
    repo: Path,
    git: GitContext,
    ci: CIContext,
    trace_root: Path,
    progress: ProgressFn | None = None,
    warn: ProgressFn | None = None,
) -> list[tuple[RunRecord, RunRecord]]:
    """``run --ab REF``: each benchmark measured in alternating base/head pairs, recorded as
    a base run (branch ``<branch>:base``, commit REF) and a head run naming it, both in one
    transaction.

    Args:
        ref: the base commit (e.g. the merge-base with main).
        repo: the suite's directory, inside the git checkout holding the head (the base
            runs the suite from the same place in its worktree, each benchmark as the base
            commit's suite file defines it: :func:`perfgate.app.specs.base_side_spec`).
        trace_root: where profiled windows go; a relative path is taken from the current
            directory (the base repeats run inside the worktree).
    """
    from perfgate.runner.ab import base_worktree, repo_root, resolve_commit, run_pairs

    _runnable(specs, git)
    _single_process_only(specs, "--ab")
    base_commit = resolve_commit(repo, ref)
    head_dir = repo_root(repo)
    assert head_dir is not None  # resolve_commit checked it
    suite_dir = repo.resolve().relative_to(head_dir.resolve())
    trace_root = trace_root.resolve()
    base_git = GitContext(base_commit, f"{git.branch}{AB_BASE_SUFFIX}", base_branch=ref)
    build = partial(build_record, project=config.project, ci=ci, host_label=config.host_label)
    pairs = []
    with base_worktree(repo, base_commit) as base_dir:
        for spec in specs:
            head_id, base_id = uuid.uuid4().hex, uuid.uuid4().hex
            base_out, head_out, _ = run_pairs(
                spec,
                head_dir=head_dir,
                base_dir=base_dir,
                suite_dir=suite_dir,
                trace_dir=trace_root / head_id,
                seed=int(head_id[:8], 16),
                progress=progress,
                base_spec=base_side_spec(
                    spec, config, head_dir=head_dir, base_dir=base_dir, warn=warn
                ),
            )
            base = build(base_out, run_id=base_id, git=base_git)
            head = replace(build(head_out, run_id=head_id, git=git), paired_with=base.id)
            store.save_runs([base, head])
            pairs.append((base, head))
    return pairs


def extend_pairs_and_record(
    config: Config,
    store: SqlStore,
    pair: tuple[RunRecord, RunRecord],
    *,
    spec: BenchmarkSpec,
    extra: int,
    alpha: float,
    repo: Path,
    progress: ProgressFn | None = None,
) -> tuple[RunRecord, RunRecord]:
    """``check --mode ab``: ``extra`` more base/head pairs of a paired run, alternating in
    fresh processes as the first were, folded into a new base run and a new head run naming
    it (judged at ``alpha``, both looks' level); stored in one transaction that marks the
    pair they extend excluded.

    Args:
        pair: (base run, head run) as :func:`run_ab_and_record` recorded them.
        spec: the suite's benchmark they measured (each side runs it as its own tree
            defines it, as the first pairs did; not the head's recorded parameters).
        repo: the suite's directory inside the head's checkout, as for that call.
    """
    from perfgate.runner.ab import base_worktree, repo_root, run_pairs

    base, head = pair
    head_dir = repo_root(repo)
    if head_dir is None:
        raise UsageError(f"{repo} is not inside a git checkout: cannot measure more A/B pairs")
    suite_dir = repo.resolve().relative_to(head_dir.resolve())
    spec = replace(spec, repeats=extra, profiled=0, looks=0)
    with base_worktree(repo, base.git.commit) as base_dir:
        base_out, head_out, _ = run_pairs(
            spec,
            head_dir=head_dir,
            base_dir=base_dir,
            suite_dir=suite_dir,
            trace_dir=None,
            seed=int(head.id[:8], 16) + 1,
            progress=progress,
            base_spec=base_side_spec(spec, config, head_dir=head_dir, base_dir=base_dir),
        )
    new_base = _folded(base, base_out.repeats, alpha)
    new_head = replace(_folded(head, head_out.repeats, alpha), paired_with=new_base.id)
    store.save_runs([new_base, new_head], supersedes=[base.id, head.id])
    return new_base, new_head


def _single_process_only(specs: Sequence[BenchmarkSpec], flag: str) -> None:
    """``--ab`` and ``--confirm`` measure single-process training benchmarks only."""
    for spec in specs:
        if spec.distributed or spec.kind != "training":
            raise UsageError(
                f"{flag}: benchmark {spec.name} is "
                f"{'multi-device' if spec.distributed else spec.kind}; {flag} measures "
                "single-process training benchmarks only"
            )


def confirm_and_record(
    config: Config,
    specs: Sequence[BenchmarkSpec],
    store: SqlStore,
    *,
    branch: str,
    against: str,
    extra: int,
    sys_path: Sequence[str] = (),
    progress: ProgressFn | None = None,
    base_sha: str = "",
    git: GitHistory | None = None,
    runs: Sequence[RunRecord] | None = None,
    gate_tests: int | None = None,
) -> list[Confirmation]:
    """``run --confirm N``: the latest run of each benchmark on ``branch`` judged again at
    the confirmation's level (:mod:`perfgate.stats.sequential`); a benchmark with a
    regression keeps it, one with an inconclusive metric gets ``extra`` more repeats in fresh
    processes, and the run with all of them is recorded in place of the original (marked
    excluded, same transaction) with that level (:attr:`RunRecord.alpha`), so the gate
    judges it there.

    Args:
        runs: the runs to confirm, one per spec in order (``check``: the ones this job just
            recorded, not whatever run of the branch is latest in a shared store).
        gate_tests: the noisy deciding tests of the whole gate the level is for (default:
            those of these runs).
    """
    if extra < 1:
        raise UsageError("--confirm needs at least 1 extra repeat")
    _single_process_only(specs, "--confirm")
    originals = list(runs) if runs is not None else []
    for spec in specs if runs is None else ():
        original = store.latest_run(project=config.project, benchmark=spec.name, branch=branch)
        if original is None:
            raise UsageError(f"nothing to confirm: no run of {spec.name} on branch {branch!r}")
        originals.append(original)
    # a PR's windows end at its merge-base, as the gate's do
    judge = partial(
        compare_records, config, store, branch=branch, against=against, base_sha=base_sha, git=git
    )
    # a run confirmed before is judged at its looks' level, as the gate judges it
    stored = stored_levels(originals)
    plain = judge(originals, alpha=stored)
    tests = gate_tests or sum(
        1 for c in deciding(plain.comparisons) if c.method == "history" and c.p_value is not None
    )
    plans = [
        _confirm_plan(
            config,
            o,
            gate_window(config, store, o, **judge.keywords)[0],
            extra=extra,
            tests=tests,
            shown=frozenset(
                c.metric for c in plain.comparisons if c.benchmark == o.benchmark and not c.decides
            ),
        )
        for o in originals
    ]
    looking = {o.benchmark: p.alpha for o, p in zip(originals, plans, strict=True) if p.confirm}
    look0 = judge(originals, alpha={**stored, **looking})
    done: list[Confirmation] = []
    folded: dict[str, float] = {}
    for spec, original, p in zip(specs, originals, plans, strict=True):
        why = p.reason or sequential.needs_confirming(
            [c for c in look0.comparisons if c.benchmark == spec.name]
        )
        if why:
            done.append(Confirmation(spec.name, original, None, 0, why))
            continue
        record = _with_extra_repeats(original, spec, extra, p.alpha, sys_path, progress)
        store.save_runs([record], supersedes=[original.id])
        folded[spec.name] = p.alpha
        done.append(Confirmation(spec.name, original, record, extra, ""))
    if not folded:
        return done
    final = judge([c.folded or c.original for c in done], alpha={**stored, **folded})
    doubtful = {
        (c.benchmark, c.metric)
        for c in look0.comparisons
        if c.method == "history" and c.verdict is Verdict.INCONCLUSIVE
    }

    def note(c: Confirmation) -> str:
        verdicts = ", ".join(
            f"{x.metric} {x.verdict.value}"
            for x in deciding(final.comparisons)
            if x.benchmark == c.benchmark and (x.benchmark, x.metric) in doubtful
        )
        return (
            f"confirmed with {plural(extra, 'extra repeat')} "
            f"(both looks at alpha {folded[c.benchmark]:.2g}): {verdicts}"
        )

    return [c if c.folded is None else replace(c, note=note(c)) for c in done]


def _confirm_plan(
    config: Config,
    record: RunRecord,
    window: Window,
    *,
    extra: int,
    tests: int,
    shown: frozenset[str],
) -> sequential.ConfirmPlan:
    """The confirmation plan of one run, from its baseline window (as the gate draws it),
    over its deciding metrics (not those ``shown`` beside them: a wall time where the CPU
    time decides)."""
    initial = _initial_repeats(record)
    rhos: list[float | None] = []
    for m in record.measurements:
        points = window.points.get(m.metric, ())
        if window.others or m.deterministic or len(points) < sequential.MIN_RUNS:
            continue  # not a noisy comparison with a history
        if m.metric in shown or config.policy(m.metric).deterministic:
            continue
        rhos.append(
            # one value per run: more repeats do not change it
            1.0
            if len(m.repeats) != initial
            else sequential.look_correlation(points, initial_repeats=initial, extra_repeats=extra)
        )
    return sequential.plan(rhos, tests=tests)


def _with_extra_repeats(
    original: RunRecord,
    spec: BenchmarkSpec,
    extra: int,
    alpha: float,
    sys_path: Sequence[str],
    progress: ProgressFn | None,
) -> RunRecord:
    """``original`` with ``extra`` more repeats, each a fresh worker process, folded in; a
    new run id, judged at ``alpha``."""
    from perfgate.runner import repeat_progress, repeat_value, run_repeat, split_threads
    from perfgate.runner.lifecycle import interruptible, work_dir

    initial = _initial_repeats(original)
    threads, params = split_threads(original.spec)
    reps = []
    with interruptible(), work_dir() as tmp:
        for i in range(extra):
            rep = run_repeat(
                replace(original.spec, repeats=initial + extra),
                initial + i,
                threads=threads,
                params=params,
                trace_path=None,
                workdir=Path(tmp),
                sys_path=list(sys_path),
                timeout_s=spec.timeout_s,
            )
            reps.append(rep)
            if progress is not None:
                progress(
                    repeat_progress(spec.name, "extra repeat", i + 1, extra, repeat_value(rep))
                )
    return _folded(original, reps, alpha)


def _initial_repeats(record: RunRecord) -> int:
    """The repeats ``record`` was measured with (its step times', else its spec's)."""
    step = record.measurement("step_time_ms")
    return len(step.repeats) if step is not None else record.spec.repeats


def _folded(original: RunRecord, reps: Sequence[RepeatResult], alpha: float) -> RunRecord:
    """``original`` with the repeats ``reps`` folded into every metric a repeat extends: a
    new run id, its spec counting them (``looks``), judged at ``alpha`` (stored with it)."""
    measurements = original.measurements
    for rep in reps:
        measurements = extended(measurements, rep)
    extra = len(reps)
    return replace(
        original,
        id=uuid.uuid4().hex,
        measurements=measurements,
        spec=replace(original.spec, repeats=_initial_repeats(original) + extra, looks=extra),
        alpha=alpha,
    )
