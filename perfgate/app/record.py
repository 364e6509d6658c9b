"""Run benchmarks and record them: plain runs, paired A/B runs and ``run --confirm``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from perfgate.app.gate import compare_records
from perfgate.app.measure import (
    extended,
    inference_measurements,
    job_measurements,
    profile_measurements,
    training_measurements,
)
from perfgate.config import Config
from perfgate.errors import ParseError, UsageError
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
from perfgate.runner import BenchmarkOutcome, run_benchmark
from perfgate.runner.fingerprint import build_fingerprint
from perfgate.stats.decide import deciding
from perfgate.store import SqlStore

ProgressFn = Callable[[str], None]


def _profile(trace_path: str | None) -> ProfileSummary | None:
    """The profiled window's summary: a torch.profiler trace file, or the directory the NPU
    backend's torch_npu profiler wrote (one ``*_ascend_pt`` inside)."""
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
    rank_profiles: tuple[ProfileSummary, ...] = ()
    if first.ranks:
        measurements, profile, rank_profiles = job_measurements(outcome)
    elif spec.kind == "inference":
        measurements, profile = inference_measurements(outcome), _profile(outcome.trace_path)
    else:
        measurements, profile = training_measurements(outcome), _profile(outcome.trace_path)
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
    if not specs:
        raise UsageError("nothing to run: give --workload NAME or a suite with [[benchmarks]]")
    if not git.branch:
        raise UsageError("cannot tell the branch: pass --branch or run inside a git checkout")
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
            if warn is not None:
                warn(f"{spec.name}: rank 0 ran on another node; that node records the run")
            continue
        try:
            record = build_record(
                outcome,
                run_id=run_id,
                project=config.project,
                git=git,
                ci=ci,
                host_label=config.host_label,
            )
        except ParseError as exc:
            raise ParseError(f"benchmark {spec.name}: profiled window unreadable: {exc}") from exc
        record = with_advisor_findings(record, outcome.trace_path, warn)
        store.save_run(record)
        records.append(record)
    return records


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
) -> list[tuple[RunRecord, RunRecord]]:
    """``run --ab REF``: each benchmark measured in alternating base/head pairs, recorded as
    a base run (branch ``<branch>:base``, commit REF) and a head run naming it, both in one
    transaction.

    Args:
        ref: the base commit (e.g. the merge-base with main).
        repo: the suite's directory, inside the git checkout holding the head (the base
            runs the suite from the same place in its worktree).
        trace_root: where profiled windows go; a relative path is taken from the current
            directory (the base repeats run inside the worktree).
    """
    from perfgate.runner.ab import base_worktree, repo_root, resolve_commit, run_pairs

    if not specs:
        raise UsageError("nothing to run: give --workload NAME or a suite with [[benchmarks]]")
    if not git.branch:
        raise UsageError("cannot tell the branch: pass --branch or run inside a git checkout")
    _single_process_only(specs, "--ab")
    base_commit = resolve_commit(repo, ref)
    head_dir = repo_root(repo)
    assert head_dir is not None  # resolve_commit checked it
    suite_dir = repo.resolve().relative_to(head_dir.resolve())
    trace_root = trace_root.resolve()
    base_git = GitContext(commit=base_commit, branch=f"{git.branch}:base", base_branch=ref)
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
            )
            base = build_record(
                base_out,
                run_id=base_id,
                project=config.project,
                git=base_git,
                ci=ci,
                host_label=config.host_label,
            )
            head = build_record(
                head_out,
                run_id=head_id,
                project=config.project,
                git=git,
                ci=ci,
                host_label=config.host_label,
            )
            head = replace(head, paired_with=base.id)
            store.save_runs([base, head])
            pairs.append((base, head))
    return pairs


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
) -> list[Confirmation]:
    """``run --confirm N``: for each benchmark whose latest run on ``branch`` is judged
    inconclusive or a regression, run up to ``extra`` more repeats one at a time, judge after
    each at its alpha-spending level (:mod:`perfgate.stats.sequential`), stop once decided,
    and record the extended run in place of the original (marked excluded, same transaction).
    """
    import tempfile

    from perfgate.runner import run_repeat, split_threads
    from perfgate.runner.lifecycle import interruptible
    from perfgate.stats.sequential import look_alpha

    if extra < 1:
        raise UsageError("--confirm needs at least 1 extra repeat")
    _single_process_only(specs, "--confirm")
    done = []
    for spec in specs:
        original = store.latest_run(project=config.project, benchmark=spec.name, branch=branch)
        if original is None:
            raise UsageError(f"nothing to confirm: no run of {spec.name} on branch {branch!r}")
        first = compare_records(config, store, [original], branch=branch, against=against)
        doubtful = {
            c.metric
            for c in deciding(first.comparisons)
            if c.verdict in (Verdict.INCONCLUSIVE, Verdict.REGRESSION) and c.method == "history"
        }
        if not doubtful:
            done.append(Confirmation(spec.name, original, None, 0, "nothing to confirm"))
            continue
        step = original.measurement("step_time_ms")
        initial = len(step.repeats) if step is not None else original.spec.repeats
        threads, params = split_threads(original.spec)
        record, note, looks = original, "", 0
        with interruptible(), tempfile.TemporaryDirectory(prefix="perfgate-") as tmp:
            for look in range(1, extra + 1):
                if progress is not None:
                    progress(f"{spec.name}: confirming, extra repeat {look}/{extra}")
                rep = run_repeat(
                    replace(original.spec, repeats=initial + extra),
                    initial + look - 1,
                    threads=threads,
                    params=params,
                    trace_path=None,
                    workdir=Path(tmp),
                    sys_path=list(sys_path),
                    timeout_s=spec.timeout_s,
                )
                alpha = look_alpha(look, initial_repeats=initial, extra_repeats=extra)
                looks = look
                record = replace(
                    record,
                    id=uuid.uuid4().hex,
                    measurements=extended(record.measurements, rep),
                    spec=replace(
                        record.spec, repeats=initial + look, looks=look, confirm_alpha=alpha
                    ),
                )
                judged = compare_records(config, store, [record], branch=branch, against=against)
                open_metrics = [
                    c
                    for c in deciding(judged.comparisons)
                    if c.metric in doubtful and c.verdict is Verdict.INCONCLUSIVE
                ]
                if not open_metrics:
                    note = f"settled after {look} extra repeat{'s' if look > 1 else ''}"
                    break
            else:
                note = f"still inconclusive after {extra} extra repeats"
        store.save_runs([record], supersedes=[original.id])
        done.append(Confirmation(spec.name, original, record, looks, note))
    return done
