"""Use cases: run, record, compare, gate, history.

Each function takes its collaborators (config, store) as arguments and returns dataclasses;
the CLI renders them. Nothing here prints.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfgate.config import Config
from perfgate.errors import ParseError, StoreError, UsageError
from perfgate.measurements import inference_measurements, job_measurements
from perfgate.measurements import measurement as _measurement
from perfgate.models import (
    Alert,
    Attribution,
    BenchmarkSpec,
    CIContext,
    Comparison,
    Direction,
    Finding,
    Fingerprint,
    GateResult,
    GitContext,
    Measurement,
    NewAlert,
    ParamValue,
    ProfileSummary,
    PrunePlan,
    RunPoint,
    RunRecord,
    Verdict,
)
from perfgate.runner import BenchmarkOutcome, RepeatResult, run_benchmark
from perfgate.runner.distributed import LaunchOptions
from perfgate.runner.fingerprint import build_fingerprint
from perfgate.stats import ALPHA, Candidate, compare_candidates
from perfgate.stats.changepoints import MIN_SEGMENT, ChangePoint, detect_change_points
from perfgate.stats.paired import Pair, compare_pairs, decide_paired, pair_noise_from_history
from perfgate.stats.summary import repeat_centres
from perfgate.store import SqlStore

ProgressFn = Callable[[str], None]


# --- context -------------------------------------------------------------------------------


def _git(cwd: Path, *args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def detect_git_context(
    env: Mapping[str, str],
    cwd: Path,
    *,
    branch: str | None = None,
    commit: str | None = None,
    base_branch: str | None = None,
) -> GitContext:
    """Commit, branch and base from flags, else CI variables, else the git repository."""
    ref_name = env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") or ""
    ci_branch = (
        env.get("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME") or env.get("CI_COMMIT_REF_NAME") or ref_name
    )
    ci_commit = env.get("CI_COMMIT_SHA") or env.get("GITHUB_SHA") or ""
    ci_base = env.get("CI_MERGE_REQUEST_TARGET_BRANCH_NAME") or env.get("GITHUB_BASE_REF") or ""
    pr = env.get("CI_MERGE_REQUEST_IID") or ""
    if not pr and env.get("GITHUB_REF", "").startswith("refs/pull/"):
        pr = env["GITHUB_REF"].split("/")[2]
    resolved_branch = branch or ci_branch or _git(cwd, "rev-parse", "--abbrev-ref", "HEAD")
    if resolved_branch == "HEAD":
        resolved_branch = ""
    return GitContext(
        commit=commit or ci_commit or _git(cwd, "rev-parse", "HEAD"),
        branch=resolved_branch,
        base_branch=base_branch or ci_base,
        pr_number=int(pr) if pr.isdigit() else None,
    )


def detect_ci_context(env: Mapping[str, str]) -> CIContext:
    if env.get("GITHUB_ACTIONS") == "true":
        server = env.get("GITHUB_SERVER_URL", "https://github.com")
        url = ""
        if env.get("GITHUB_REPOSITORY") and env.get("GITHUB_RUN_ID"):
            url = f"{server}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
        return CIContext("github", url, env.get("GITHUB_EVENT_NAME", ""))
    if env.get("GITLAB_CI") == "true":
        return CIContext("gitlab", env.get("CI_JOB_URL", ""), env.get("CI_PIPELINE_SOURCE", ""))
    return CIContext()


# --- run and record ------------------------------------------------------------------------


def _profile(trace_path: str | None) -> ProfileSummary | None:
    """The profiled window's summary: a torch.profiler trace file, or the directory the NPU
    backend's torch_npu profiler wrote (one ``*_ascend_pt`` inside)."""
    if trace_path is None:
        return None
    if Path(trace_path).is_dir():
        from perfgate.parsers.ascend import parse_ascend

        ranks, _ = parse_ascend(Path(trace_path))
        return ranks[0]
    from perfgate.parsers import parse_torch_trace

    return parse_torch_trace(trace_path)


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
        step_ms = [rep.step_ms for rep in outcome.repeats]
        throughput = [[rep.batch_size * 1000.0 / t for t in rep.step_ms] for rep in outcome.repeats]
        memory = [[float(rep.peak_memory_bytes)] for rep in outcome.repeats]
        measurements = [
            _measurement("step_time_ms", "ms", Direction.LOWER_IS_BETTER, step_ms, steady=True),
            _measurement(
                "throughput_samples_per_s",
                "1/s",
                Direction.HIGHER_IS_BETTER,
                throughput,
                steady=True,
            ),
            _measurement("peak_memory_bytes", "bytes", Direction.LOWER_IS_BETTER, memory),
        ]
        profile = _profile(outcome.trace_path)
    if profile is not None and profile.op_calls_per_step is not None:
        measurements.append(
            _measurement(
                "op_calls_per_step",
                "count",
                Direction.LOWER_IS_BETTER,
                [[profile.op_calls_per_step]],
                deterministic=True,
            )
        )
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
    suite_dir: Path,
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
        repo: a directory inside the git checkout holding the head.
        suite_dir: the suite's directory relative to the repository root.
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


@dataclass(frozen=True)
class Confirmation:
    """What ``run --confirm`` did for one benchmark."""

    benchmark: str
    original: RunRecord
    folded: RunRecord | None
    extra_repeats: int
    note: str


def _extend(record: RunRecord, rep: RepeatResult) -> tuple[Measurement, ...]:
    """The record's measurements with one more repeat's samples appended."""
    added = {
        "step_time_ms": rep.step_ms,
        "throughput_samples_per_s": tuple(rep.batch_size * 1000.0 / t for t in rep.step_ms),
        "peak_memory_bytes": (float(rep.peak_memory_bytes),),
    }
    out = []
    for m in record.measurements:
        if m.metric in added and not m.deterministic:
            steady = m.metric != "peak_memory_bytes"
            m = _measurement(
                m.metric, m.unit, m.direction, (*m.repeats, added[m.metric]), steady=steady
            )
        out.append(m)
    return tuple(out)


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
            for c in deciding(first)
            if c.verdict in (Verdict.INCONCLUSIVE, Verdict.REGRESSION) and c.method == "history"
        }
        if not doubtful:
            done.append(Confirmation(spec.name, original, None, 0, "nothing to confirm"))
            continue
        step = original.measurement("step_time_ms")
        initial = len(step.repeats) if step is not None else original.spec.repeats
        threads, params = split_threads(original.spec)
        record, note, looks = original, "", 0
        with tempfile.TemporaryDirectory(prefix="perfgate-") as tmp:
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
                    timeout_s=3600.0,
                )
                alpha = look_alpha(look, initial_repeats=initial, extra_repeats=extra)
                looks = look
                record = replace(
                    record,
                    id=uuid.uuid4().hex,
                    measurements=_extend(record, rep),
                    spec=replace(
                        record.spec, repeats=initial + look, looks=look, confirm_alpha=alpha
                    ),
                )
                judged = compare_records(config, store, [record], branch=branch, against=against)
                open_metrics = [
                    c
                    for c in deciding(judged)
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


# --- compare and gate ----------------------------------------------------------------------


def _point(record: RunRecord, m: Measurement) -> RunPoint:
    return RunPoint(
        run_id=record.id,
        benchmark=record.benchmark,
        metric=m.metric,
        unit=m.unit,
        direction=m.direction,
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
    record: RunRecord, m: Measurement, against: str, others: Mapping[str, Fingerprint]
) -> Comparison:
    newest = next(iter(others.values()))
    diffs = tuple(record.fingerprint.differences(newest))
    return Comparison(
        benchmark=record.benchmark,
        metric=m.metric,
        unit=m.unit,
        direction=m.direction,
        verdict=Verdict.INCOMPARABLE,
        reason=(
            f"no run on {against} with this environment; {len(others)} other environment"
            f"{'s' if len(others) != 1 else ''} not compared ({'; '.join(diffs) or 'differs'})"
        ),
        current_run_id=record.id,
        current_centre=m.summary.centre,
        fingerprint_differences=diffs,
    )


def overall_verdict(comparisons: Sequence[Comparison]) -> Verdict:
    seen = {c.verdict for c in comparisons}
    for verdict in (Verdict.REGRESSION, Verdict.INCONCLUSIVE, Verdict.IMPROVEMENT):
        if verdict in seen:
            return verdict
    if Verdict.UNCHANGED in seen:
        return Verdict.UNCHANGED
    if Verdict.NO_BASELINE in seen or not seen:
        return Verdict.NO_BASELINE
    return Verdict.INCOMPARABLE


def latest_runs(
    config: Config, store: SqlStore, *, branch: str, benchmarks: Sequence[str] = ()
) -> list[RunRecord]:
    """The latest run of each benchmark on ``branch`` (only ``benchmarks`` when given).

    Raises:
        UsageError: a named benchmark has no run on the branch, or the branch has none.
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
    records = []
    for name in names:
        record = store.latest_run(project=config.project, benchmark=name, branch=branch)
        if record is not None:
            records.append(record)
    return records


def compare(
    config: Config,
    store: SqlStore,
    *,
    branch: str,
    against: str,
    benchmarks: Sequence[str] = (),
) -> GateResult:
    """Compare the latest run of each benchmark on ``branch`` with its window on ``against``.

    Only runs with the same fingerprint key are compared; when the base branch has runs of
    the benchmark only in other environments, the comparison is ``incomparable`` and says
    which fields differ. With ``branch == against`` the latest run is compared with the runs
    before it.
    """
    records = latest_runs(config, store, branch=branch, benchmarks=benchmarks)
    return compare_records(config, store, records, branch=branch, against=against)


HISTORY_SCAN_RUNS = 100
"""Runs of history scanned for change points before the baseline window is cut."""


def _since_last_change(
    centres: Mapping[str, Sequence[tuple[str, float]]],
    config: Config,
    invalid: frozenset[tuple[str, str]] = frozenset(),
) -> dict[str, set[str]]:
    """Per noisy metric, the ids of the runs after the last change point of its series: an
    accepted change (a detected shift that persisted) starts a new baseline, so a gate never
    judges against a level the project has already moved away from. A change point whose
    alert was triaged ``invalid`` (``(first run after, metric)`` in ``invalid``) is not a
    change and does not cut the window. Metrics with no change point (and deterministic
    ones) are left out: their whole window counts."""
    out: dict[str, set[str]] = {}
    for metric, series in centres.items():
        if config.policy(metric).deterministic or len(series) < 2 * MIN_SEGMENT:
            continue
        points = [
            cp
            for cp in detect_change_points([c for _, c in series])
            if (series[cp.index][0], metric) not in invalid
        ]
        if points:
            out[metric] = {run_id for run_id, _ in series[points[-1].index :]}
    return out


@dataclass(frozen=True)
class Window:
    """A run's baseline: per metric, the comparable runs' points, oldest first; or, when
    there are none, the fingerprints of the other testbeds that do have runs."""

    points: Mapping[str, tuple[RunPoint, ...]]
    others: Mapping[str, Fingerprint]


def baseline_window(
    config: Config,
    store: SqlStore,
    *,
    benchmark: str,
    fingerprint_key: str,
    against: str,
    before: datetime | None = None,
    exclude_run_ids: Sequence[str] = (),
) -> Window:
    """The baseline window a gate judges a run of ``benchmark`` against: the last
    ``baseline_window`` runs on ``against`` with the same fingerprint key, not excluded,
    started at or after the benchmark's latest baseline reset and, per metric, after the
    last change point of its series that was not triaged invalid."""
    reset = store.baseline_reset(project=config.project, benchmark=benchmark)
    selection: dict[str, Any] = {
        "project": config.project,
        "benchmark": benchmark,
        "branch": against,
        "before": before,
        "exclude_run_ids": tuple(exclude_run_ids),
        "fingerprint_key": fingerprint_key,
        "since": None if reset is None else reset.starts_at,
    }
    points = store.history(**selection, limit=config.baseline_window)
    invalid = frozenset(
        key
        for key, status in store.alert_statuses(project=config.project, benchmark=benchmark).items()
        if status == "invalid"
    )
    since = _since_last_change(store.centres(**selection, limit=HISTORY_SCAN_RUNS), config, invalid)
    others: dict[str, Fingerprint] = {}
    if not points:
        others = {
            k: fp
            for k, fp in store.fingerprints(
                project=config.project, benchmark=benchmark, branch=against
            ).items()
            if k != fingerprint_key
        }
    by_metric: dict[str, list[RunPoint]] = {}
    for p in points:
        allowed = since.get(p.metric)
        if allowed is None or p.run_id in allowed:
            by_metric.setdefault(p.metric, []).append(p)
    return Window({m: tuple(ps) for m, ps in by_metric.items()}, others)


def _judge(
    config: Config, record: RunRecord, window: Window, against: str
) -> tuple[list[Candidate], list[Comparison]]:
    """The candidates (and the comparisons fixed without statistics) of one run."""
    candidates: list[Candidate] = []
    fixed: list[Comparison] = []
    alpha = record.spec.confirm_alpha or ALPHA
    for m in record.measurements:
        if window.others:
            fixed.append(_incomparable(record, m, against, window.others))
            continue
        candidates.append(
            Candidate(
                _point(record, m),
                window.points.get(m.metric, ()),
                config.policy(m.metric),
                alpha=alpha,
            )
        )
    return candidates, fixed


def compare_records(
    config: Config,
    store: SqlStore,
    records: Sequence[RunRecord],
    *,
    branch: str,
    against: str,
) -> GateResult:
    """Judge the given runs (one per benchmark) against their windows on ``against``; the
    runs need not be stored yet (``run --confirm`` judges a run before recording it)."""
    candidates: list[Candidate] = []
    fixed: list[Comparison] = []
    paired: list[RunRecord] = []
    for record in records:
        if record.paired_with:
            paired.append(record)
        window = baseline_window(
            config,
            store,
            benchmark=record.benchmark,
            fingerprint_key=record.fingerprint.key(),
            against=against,
            before=record.started_at if branch == against else None,
            exclude_run_ids=(record.id,),
        )
        more, done = _judge(config, record, window, against)
        candidates.extend(more)
        fixed.extend(done)
    comparisons = (
        *fixed,
        *compare_candidates(candidates),
        *_paired(config, store, paired, against),
    )
    ordered = tuple(sorted(comparisons, key=lambda c: (c.benchmark, c.metric, c.method)))
    attributions, found = _advice(config, store, records, ordered, against)
    result = GateResult(
        branch=branch,
        against=against,
        verdict=Verdict.UNCHANGED,
        comparisons=ordered,
        findings=found,
        attributions=attributions,
    )
    return replace(result, verdict=overall_verdict(deciding(result)))


ATTRIBUTION_WINDOW = 10
"""Baseline runs (the most recent of the window) whose profiles an attribution reads."""


def _advice(
    config: Config,
    store: SqlStore,
    records: Sequence[RunRecord],
    comparisons: Sequence[Comparison],
    against: str,
) -> tuple[tuple[Attribution, ...], tuple[Finding, ...]]:
    """Per run: an attribution of each time metric that regressed or improved (against the
    profiles of its baseline window's newest runs), and perfgate's rule findings merged with
    the stored msprof-analyze findings, those the base branch's latest run also had marked
    known. Finding locations are prefixed with the benchmark."""
    from perfgate.advise import run_findings, timed_cluster
    from perfgate.advisor.attribution import attribute
    from perfgate.advisor.rules import merge_findings

    loaded: dict[str, RunRecord | None] = {}

    def load(run_id: str) -> RunRecord | None:
        if run_id not in loaded:
            try:
                loaded[run_id] = store.get_run(run_id)
            except StoreError:
                loaded[run_id] = None
        return loaded[run_id]

    paired = {c.benchmark for c in comparisons if c.method == "paired"}
    attributions: list[Attribution] = []
    found: list[Finding] = []
    for record in records:
        mine = [
            c
            for c in comparisons
            if c.current_run_id == record.id and (c.method == "paired" or c.benchmark not in paired)
        ]
        if record.profile is not None:
            for c in mine:
                if (
                    c.verdict not in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
                    or c.unit != "ms"
                    or c.current_centre is None
                    or c.baseline_centre is None
                ):
                    continue
                window = [load(i) for i in c.baseline_run_ids[-ATTRIBUTION_WINDOW:]]
                profiles = [r.profile for r in window if r is not None and r.profile is not None]
                delta = c.current_centre - c.baseline_centre
                attributions.append(
                    attribute(record.benchmark, c.metric, delta, record.profile, profiles)
                )
        if record.profile is None and not record.findings and timed_cluster(record) is None:
            continue
        base: RunRecord | None = None
        newest = [c.baseline_run_ids[-1] for c in mine if c.baseline_run_ids]
        if newest:
            base = load(newest[0])
        else:
            base = store.latest_run(
                project=config.project, benchmark=record.benchmark, branch=against
            )
            if base is not None and base.id == record.id:
                base = None
        base_findings = () if base is None else (*run_findings(config, base), *base.findings)
        merged = merge_findings(run_findings(config, record), record.findings, base_findings)
        found.extend(
            replace(
                f, location=f"{record.benchmark}: {f.location}" if f.location else record.benchmark
            )
            for f in merged
        )
    return tuple(attributions), tuple(found)


def _paired(
    config: Config, store: SqlStore, heads: Sequence[RunRecord], against: str
) -> tuple[Comparison, ...]:
    """Each head run against the base run measured beside it, pair by pair; the spread of
    repeats inside the base branch's runs, where there is a history, bounds the pair noise
    from below (a few pairs cannot show their own noise)."""
    evidences = []
    for head in heads:
        assert head.paired_with is not None
        base = store.get_run(head.paired_with)
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
            noise = pair_noise_from_history([p for p in window if p.metric == m.metric])
            evidences.append(
                compare_pairs(
                    [
                        Pair(base=x, head=y)
                        for x, y in zip(
                            b.summary.repeat_centres, m.summary.repeat_centres, strict=True
                        )
                    ],
                    benchmark=head.benchmark,
                    metric=m.metric,
                    unit=m.unit,
                    direction=m.direction,
                    policy=config.policy(m.metric),
                    run_id=head.id,
                    base_run_id=base.id,
                    base_commit=base.git.commit,
                    noise=noise,
                )
            )
    return tuple(replace(c, method="paired") for c in decide_paired(evidences))


def deciding(result: GateResult) -> tuple[Comparison, ...]:
    """The comparisons the gate decides on: for a benchmark measured in A/B pairs its paired
    comparisons (job-level noise cancels there); for the others, history."""
    paired = {c.benchmark for c in result.comparisons if c.method == "paired"}
    return tuple(c for c in result.comparisons if c.method == "paired" or c.benchmark not in paired)


def gate_failed(config: Config, result: GateResult) -> bool:
    """Whether the gate fails: any deciding comparison whose verdict the policy fails on."""
    return any(c.verdict in config.fail_on for c in deciding(result))


@dataclass(frozen=True)
class NoiseRow:
    """How noisy one (benchmark, metric) is on a branch, against its minimum effect."""

    benchmark: str
    metric: str
    runs: int
    mde_pct: float | None
    min_effect_pct: float | None

    @property
    def too_noisy(self) -> bool:
        return (
            self.mde_pct is not None
            and self.min_effect_pct is not None
            and self.mde_pct > self.min_effect_pct
        )


def noise(config: Config, store: SqlStore, *, branch: str) -> list[NoiseRow]:
    """Minimum detectable effect of every noisy metric: the latest run on ``branch`` judged
    against the runs before it. A metric whose MDE exceeds its minimum effect cannot be
    gated at that threshold: a real regression of that size would read as inconclusive."""
    result = compare(config, store, branch=branch, against=branch)
    return [
        NoiseRow(
            benchmark=c.benchmark,
            metric=c.metric,
            runs=len(c.baseline_run_ids),
            mde_pct=c.mde_pct,
            min_effect_pct=c.min_effect_pct,
        )
        for c in result.comparisons
        if not config.policy(c.metric).deterministic
    ]


# --- history -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DetectedChange:
    """A change point of one stored series, with the commits it lies between."""

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    branch: str
    fingerprint_key: str
    point: ChangePoint
    last_run_before: str
    first_run_after: str
    commit_before: str
    commit_after: str
    runs_in_series: int
    triage: str | None = None
    """The state of this change point's alert (untriaged, acknowledged, wontfix, fixed),
    None where none is recorded."""

    @property
    def verdict(self) -> Verdict:
        worse = self.point.change_pct > 0
        if self.direction is Direction.HIGHER_IS_BETTER:
            worse = not worse
        return Verdict.REGRESSION if worse else Verdict.IMPROVEMENT


def series_changes(
    benchmark: str, points: Sequence[RunPoint], *, branch: str
) -> list[DetectedChange]:
    """Change points of one benchmark's stored points on ``branch`` (oldest first, as
    :meth:`SqlStore.history` returns them): one series per noisy metric and environment."""
    series: dict[tuple[str, str], list[RunPoint]] = {}
    for p in points:
        if not p.deterministic:
            series.setdefault((p.metric, p.fingerprint_key), []).append(p)
    found: list[DetectedChange] = []
    for (metric, key), runs in sorted(series.items()):
        for cp in detect_change_points([r.centre for r in runs]):
            before, after = runs[cp.index - 1], runs[cp.index]
            found.append(
                DetectedChange(
                    benchmark=benchmark,
                    metric=metric,
                    unit=after.unit,
                    direction=after.direction,
                    branch=branch,
                    fingerprint_key=key,
                    point=cp,
                    last_run_before=before.run_id,
                    first_run_after=after.run_id,
                    commit_before=before.commit,
                    commit_after=after.commit,
                    runs_in_series=len(runs),
                )
            )
    return found


def analyze_history(
    config: Config,
    store: SqlStore,
    *,
    branch: str,
    benchmark: str | None = None,
    limit: int = 1000,
    record: bool = True,
    now: datetime | None = None,
) -> list[DetectedChange]:
    """Change points of every noisy metric's series on ``branch`` (one series per
    benchmark, metric and environment), oldest first.

    Each is recorded as an alert (once: a change found again keeps its alert and triage
    state) unless ``record`` is false, and carries its alert's triage state; change points
    triaged ``invalid`` (not real changes) are left out."""
    names = [benchmark] if benchmark else store.benchmarks(project=config.project, branch=branch)
    found: list[DetectedChange] = []
    for name in names:
        points = store.history(project=config.project, benchmark=name, branch=branch, limit=limit)
        found.extend(series_changes(name, points, branch=branch))
    if record and found:
        record_alerts(config, store, changes=found, now=now)
    return with_triage(config, store, found)


def with_triage(
    config: Config, store: SqlStore, found: Sequence[DetectedChange]
) -> list[DetectedChange]:
    """``found`` with each change point's alert triage state; those triaged ``invalid``
    (not real changes) left out."""
    statuses: dict[tuple[str, str], str] = {}
    for name in sorted({c.benchmark for c in found}):
        statuses.update(store.alert_statuses(project=config.project, benchmark=name))
    out = []
    for c in found:
        status = statuses.get((c.first_run_after, c.metric))
        if status != "invalid":
            out.append(replace(c, triage=status))
    return out


def history(
    config: Config,
    store: SqlStore,
    *,
    benchmark: str | None,
    branch: str | None,
    metric: str,
    limit: int,
) -> list[RunPoint]:
    """The last ``limit`` runs' values of ``metric``, oldest first, for one or all benchmarks."""
    names = [benchmark] if benchmark else store.benchmarks(project=config.project, branch=branch)
    points: list[RunPoint] = []
    for name in names:
        points.extend(
            p
            for p in store.history(
                project=config.project, benchmark=name, branch=branch, limit=limit
            )
            if p.metric == metric
        )
    return points


# --- team store: alerts, triage, retention ---------------------------------------------------


def default_actor(env: Mapping[str, str]) -> str:
    """Who a triage action is recorded as when ``--by`` is not given: the CI user, else the
    login name."""
    for name in ("GITLAB_USER_LOGIN", "GITHUB_ACTOR", "USER", "USERNAME"):
        if env.get(name):
            return env[name]
    return "unknown"


def _utcnow(now: datetime | None) -> datetime:
    return now if now is not None else datetime.now(timezone.utc)


def record_alerts(
    config: Config,
    store: SqlStore,
    *,
    changes: Sequence[DetectedChange] = (),
    result: GateResult | None = None,
    now: datetime | None = None,
) -> list[Alert]:
    """Record as untriaged alerts the change points of a history analysis and, for a gate
    on the base branch, its regressions; an alert already recorded for the same run and
    metric keeps its state. Runs not in the store (a gate that judged an unsaved run) get
    no alert. Returns the alerts created now."""
    found: list[NewAlert] = [
        NewAlert(
            project=config.project,
            benchmark=c.benchmark,
            metric=c.metric,
            run_id=c.first_run_after,
            branch=c.branch,
            fingerprint_key=c.fingerprint_key,
            verdict=c.verdict,
            source="history",
            commit_after=c.commit_after,
            change_pct=c.point.change_pct,
            previous_run_id=c.last_run_before,
            commit_before=c.commit_before,
        )
        for c in changes
    ]
    if result is not None and result.branch == config.base_branch:
        runs: dict[str, RunRecord | None] = {}
        for c in deciding(result):
            if c.verdict is not Verdict.REGRESSION:
                continue
            if c.current_run_id not in runs:
                try:
                    runs[c.current_run_id] = store.get_run(c.current_run_id)
                except StoreError:
                    runs[c.current_run_id] = None
            run = runs[c.current_run_id]
            if run is None:
                continue
            found.append(
                NewAlert(
                    project=config.project,
                    benchmark=c.benchmark,
                    metric=c.metric,
                    run_id=run.id,
                    branch=run.git.branch,
                    fingerprint_key=run.fingerprint.key(),
                    verdict=Verdict.REGRESSION,
                    source="gate",
                    commit_after=run.git.commit,
                    change_pct=c.change_pct,
                    previous_run_id=c.baseline_run_ids[-1] if c.baseline_run_ids else None,
                    commit_before=c.baseline_commits[-1] if c.baseline_commits else None,
                )
            )
    if not found:
        return []
    return store.record_alerts(found, now=_utcnow(now))


#: ``perfgate alerts`` actions and the state each moves an alert to.
TRIAGE_ACTIONS = {"ack": "acknowledged", "fixed": "fixed", "reopen": "untriaged"}
IGNORE_STATES = ("invalid", "wontfix")


def triage_alert(
    config: Config,
    store: SqlStore,
    alert_id: int,
    *,
    action: str,
    by: str,
    reason: str,
    state: str | None = None,
    now: datetime | None = None,
) -> Alert:
    """``ack`` / ``fixed`` / ``reopen`` an alert, or ``ignore`` it as ``invalid`` (not a
    real change: it no longer cuts baseline windows and history analysis drops it) or
    ``wontfix`` (real, accepted)."""
    if action == "ignore":
        if state not in IGNORE_STATES:
            raise UsageError(f"ignore needs --as {' or '.join(IGNORE_STATES)}")
        target = state
    elif action in TRIAGE_ACTIONS:
        target = TRIAGE_ACTIONS[action]
    else:
        raise UsageError(f"unknown triage action {action!r}")
    if not by.strip():
        raise UsageError("a triage action needs --by (who)")
    return store.triage_alert(
        alert_id,
        project=config.project,
        state=target,
        action=action,
        by=by,
        reason=reason,
        now=_utcnow(now),
    )


def prune(
    config: Config,
    store: SqlStore,
    *,
    keep_days: int | None,
    keep_runs: int | None,
    dry_run: bool,
    now: datetime | None = None,
) -> PrunePlan:
    """Retention: see :meth:`SqlStore.prune`; the protected window is the config's."""
    if (keep_days is None) == (keep_runs is None):
        raise UsageError("prune needs exactly one of --keep-days N or --keep-runs N")
    if (keep_days is not None and keep_days < 1) or (keep_runs is not None and keep_runs < 1):
        raise UsageError("--keep-days and --keep-runs must be at least 1")
    return store.prune(
        project=config.project,
        baseline_window=config.baseline_window,
        now=_utcnow(now),
        keep_days=keep_days,
        keep_runs=keep_runs,
        dry_run=dry_run,
    )
