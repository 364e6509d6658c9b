"""Use case: ``perfgate advise`` — what a profile says is slow, and what to do about it.

Two entry points, one result:

- :func:`advise_path` reads a profile from disk (anything ``perfgate ingest`` reads) and
  runs perfgate's rules over it (the slowest rank's profile, plus the cluster view of a
  multi-rank job); on an Ascend profile msprof-analyze's advisor runs too, unless told not.
- :func:`advise_run` does the same for a stored run: its profile, its stored msprof-analyze
  findings, and the findings the base branch's latest run of the benchmark already had
  marked ``known``.

Nothing is written; nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfgate.advisor.rules import Thresholds, advise, merge_findings, slow_ranks_and_links
from perfgate.config import Config
from perfgate.models import ClusterView, Finding, ProfileSummary, RunRecord
from perfgate.store import SqlStore

__all__ = ["Advice", "advise_path", "advise_run", "run_findings", "timed_cluster"]

_RANK_STEP = "step_time_ms.rank"
_RANK_OWN = "own_step_ms.rank"


@dataclass(frozen=True)
class Advice:
    """What ``perfgate advise`` found for one profile or stored run."""

    kind: str
    """``profile`` (a path) or ``run`` (a stored run)."""
    target: str
    """The path or run id as given."""
    profile: ProfileSummary | None
    """The profile judged (the slowest rank's for a multi-rank job); None if the run has none."""
    findings: tuple[Finding, ...]
    ranks: int = 1
    cluster: ClusterView | None = None
    run: RunRecord | None = None
    format: str = ""
    """The profile format for a path (``ascend``, ``torch_trace``)."""
    advisor_ran: bool = False
    """Whether msprof-analyze was asked (Ascend profile, not ``--no-advisor``)."""
    advisor_problem: str | None = None
    advisor_version: str | None = None
    baseline_run_id: str | None = None
    """The base branch run whose findings marked these ``known`` (runs only)."""


def advise_path(
    path: Path,
    *,
    thresholds: Thresholds | None = None,
    msprof: bool = True,
    msprof_timeout_s: float = 300.0,
    device_memory_bytes: int | None = None,
) -> Advice:
    """Advise on the profile at ``path`` (a torch trace, a ``*_ascend_pt`` directory, or a
    directory of several ranks)."""
    from perfgate.ingest import FORMAT_ASCEND, read_profile

    profiled = read_profile(path)
    profile = profiled.slowest
    own = advise(
        profile,
        thresholds=thresholds,
        cluster=profiled.cluster,
        ranks=profiled.ranks,
        device_memory_bytes=device_memory_bytes,
    )
    theirs: tuple[Finding, ...] = ()
    problem: str | None = None
    version: str | None = None
    ran = profiled.format == FORMAT_ASCEND and msprof
    if ran:
        from perfgate.advisor import msprof as msprof_advisor

        where = "" if len(profiled.ranks) > 1 or profile.rank is None else f"rank {profile.rank}"
        outcome = msprof_advisor.run(path, location=where, timeout_s=msprof_timeout_s)
        theirs, problem, version = outcome.findings, outcome.problem, outcome.version
    return Advice(
        kind="profile",
        target=str(path),
        profile=profile,
        findings=merge_findings(own, theirs),
        ranks=len(profiled.ranks),
        cluster=profiled.cluster,
        format=profiled.format,
        advisor_ran=ran,
        advisor_problem=problem,
        advisor_version=version,
    )


def advise_run(
    config: Config, store: SqlStore, run_id: str, *, device_memory_bytes: int | None = None
) -> Advice:
    """Advise on a stored run (``run_id`` or a unique prefix of 6+ characters).

    Raises:
        StoreError: no such run, or the prefix is ambiguous.
    """
    record = store.get_run(run_id)
    own = run_findings(config, record, device_memory_bytes)
    base: RunRecord | None = None
    if record.git.branch != config.base_branch:
        base = store.latest_run(
            project=record.project, benchmark=record.benchmark, branch=config.base_branch
        )
    base_findings: tuple[Finding, ...] = ()
    if base is not None and base.id != record.id:
        base_findings = (*run_findings(config, base, device_memory_bytes), *base.findings)
    else:
        base = None
    ranks = record.rank_profiles
    return Advice(
        kind="run",
        target=run_id,
        profile=record.profile,
        findings=merge_findings(own, record.findings, base_findings),
        ranks=max(1, len(ranks)),
        run=record,
        baseline_run_id=None if base is None else base.id,
    )


def run_findings(
    config: Config, record: RunRecord, device_memory_bytes: int | None = None
) -> tuple[Finding, ...]:
    """perfgate's rule findings on a stored run's profile (none without one), with the suite's
    thresholds; the run's step time measured with the profiler off feeds the overhead check.
    A multi-device run's slow-rank rule reads its per-rank timed step times
    (:func:`timed_cluster`), also when it has no profile."""
    view = timed_cluster(record)
    if record.profile is None:
        if view is None:
            return ()
        return tuple(slow_ranks_and_links(view, config.advisor))
    step = record.measurement("step_time_ms")
    return advise(
        record.profile,
        thresholds=config.advisor,
        cluster=view,
        ranks=record.rank_profiles,
        device_memory_bytes=device_memory_bytes,
        measured_step_ms=None if step is None else step.summary.centre,
    )


def timed_cluster(record: RunRecord) -> ClusterView | None:
    """The ranks of a multi-device run compared by their own work per step (profiler off):
    ``own_step_ms.rank<r>`` (each timed step less the rank's time blocked in collectives)
    where the run has it, else the timed steps ``step_time_ms.rank<r>``; with each rank's
    communication not overlapped per step from its profile as its wait (a rank that waits
    least is the one the others wait for).

    Own work rather than the timed steps or the profiles' step windows: the ranks' steps are
    not aligned per step, and in a synchronous job every rank's step lasts about as long as
    the slowest's (the others wait for it inside their next collective), so a straggler
    shows in its own work and in the others' waits, not in the step length.
    None for a single-process run.
    """

    def per_rank(prefix: str) -> list[tuple[int, float]]:
        return sorted(
            (int(m.metric[len(prefix) :]), m.summary.centre)
            for m in record.measurements
            if m.metric.startswith(prefix) and m.metric[len(prefix) :].isdigit()
        )

    steps = per_rank(_RANK_OWN)
    if len(steps) < 2:
        steps = per_rank(_RANK_STEP)
    if len(steps) < 2:
        return None
    ranks = tuple(r for r, _ in steps)
    step_ms = tuple(ms for _, ms in steps)
    waits: dict[int, float] = {}
    for p in record.rank_profiles:
        b = p.breakdown
        if p.rank is not None and b is not None and b.communication_not_overlapped_ms is not None:
            waits[p.rank] = b.communication_not_overlapped_ms
    known = [waits[r] for r in ranks if r in waits]
    fastest = min(step_ms)
    return ClusterView(
        ranks=ranks,
        step_ms=step_ms,
        slowest_rank=ranks[max(range(len(ranks)), key=lambda i: step_ms[i])],
        step_spread_pct=(max(step_ms) - fastest) / fastest * 100.0 if fastest > 0 else 0.0,
        comm_wait_ms=tuple(waits.get(r) for r in ranks) if known else (),
        comm_wait_spread_pct=(
            (max(known) - min(known)) / min(known) * 100.0
            if len(known) >= 2 and min(known) > 0
            else None
        ),
    )
