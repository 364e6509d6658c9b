"""Use case: ``perfgate advise`` — what a profile says is slow, and what to do about it:
:func:`advise_path` for a profile on disk (anything ``perfgate ingest`` reads; on Ascend
msprof-analyze's advisor runs too), :func:`advise_run` for a stored run. :func:`findings_for`
is the one list of a stored run's findings: ``ingest``, ``advise``, the gate and the HTML run
page all show what it returns. Nothing is written; nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from perfgate.advisor.cluster import cluster_view, spread_pct
from perfgate.advisor.rules import Thresholds, advise, merge_findings, slow_ranks_and_links
from perfgate.config import Config
from perfgate.models import Advice, ClusterView, Finding, Profiled, RunRecord
from perfgate.store import SqlStore

_RANK_STEP = "step_time_ms.rank"
_RANK_OWN = "own_step_ms.rank"


def read_job(path: Path, thresholds: Thresholds | None = None) -> Profiled:
    """The profile at ``path`` (:func:`perfgate.parsers.read_profile`) with the cluster view
    of its ranks when it has two or more (``thresholds``: the suite's ``[advisor]``)."""
    from perfgate.parsers import read_profile  # the parsers (pandas among them) only here

    profiled = read_profile(path)
    if len(profiled.ranks) < 2:
        return profiled
    return replace(profiled, cluster=cluster_view(profiled.ranks, thresholds))


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
    from perfgate.advisor import msprof as msprof_advisor
    from perfgate.parsers import FORMAT_ASCEND

    profiled = read_job(path, thresholds)
    profile = profiled.slowest
    own = advise(
        profile,
        thresholds=thresholds,
        cluster=profiled.cluster,
        ranks=profiled.ranks,
        device_memory_bytes=device_memory_bytes,
    )
    ran = profiled.format == FORMAT_ASCEND and msprof
    where = "" if len(profiled.ranks) > 1 or profile.rank is None else f"rank {profile.rank}"
    outcome = msprof_advisor.run(path, location=where, timeout_s=msprof_timeout_s) if ran else None
    return Advice(
        kind="profile",
        target=str(path),
        profile=profile,
        findings=merge_findings(own, outcome.findings if outcome is not None else ()),
        ranks=len(profiled.ranks),
        cluster=profiled.cluster,
        format=profiled.format,
        advisor_ran=ran,
        advisor_problem=outcome.problem if outcome is not None else None,
        advisor_version=outcome.version if outcome is not None else None,
    )


def advise_run(
    config: Config, store: SqlStore, run_id: str, *, device_memory_bytes: int | None = None
) -> Advice:
    """Advise on a stored run (``run_id`` or a unique prefix of 6+ characters; StoreError:
    no such run, or an ambiguous prefix)."""
    record = store.get_run(run_id)
    base = base_run(config, store, record)
    ranks = record.rank_profiles
    return Advice(
        kind="run",
        target=run_id,
        profile=record.profile,
        findings=findings_for(config, record, base, device_memory_bytes=device_memory_bytes),
        ranks=max(1, len(ranks)),
        run=record,
        baseline_run_id=None if base is None else base.id,
    )


def base_run(config: Config, store: SqlStore, record: RunRecord) -> RunRecord | None:
    """The run whose findings are not news for ``record``: the base branch's latest run of
    its benchmark; None for a run on the base branch (or when the branch has none)."""
    if record.git.branch == config.base_branch:
        return None
    base = store.latest_run(
        project=record.project, benchmark=record.benchmark, branch=config.base_branch
    )
    return None if base is None or base.id == record.id else base


def findings_for(
    config: Config,
    record: RunRecord,
    base: RunRecord | Callable[[], RunRecord | None] | None = None,
    *,
    device_memory_bytes: int | None = None,
) -> tuple[Finding, ...]:
    """Every finding on a stored run, most severe first: perfgate's rules over it
    (:func:`run_findings`) and the msprof-analyze findings stored with it, one finding per
    key (:func:`~perfgate.advisor.rules.merge_findings`). Those ``base`` (the run it is
    judged against, e.g. :func:`base_run`) also had are marked ``known``; ``base`` may be
    a function that reads that run, called only when the run has a finding to mark (the
    gate reads no base run for a benchmark without findings)."""
    own = run_findings(config, record, device_memory_bytes)
    if not own and not record.findings:
        return ()
    if callable(base):
        base = base()
    known: tuple[Finding, ...] = ()
    if base is not None and base.id != record.id:
        known = (*run_findings(config, base, device_memory_bytes), *base.findings)
    return merge_findings(own, record.findings, known)


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
    # only perfgate's runner times its steps with the profiler off: an ingested profile's
    # step time is its own profiled steps (compared with themselves, one slow step read as
    # the profiler's overhead)
    step = record.measurement("step_time_ms")
    timed_apart = step is not None and record.fingerprint.runner_timed
    return advise(
        record.profile,
        thresholds=config.advisor,
        cluster=view,
        ranks=record.rank_profiles,
        device_memory_bytes=device_memory_bytes,
        measured_step_ms=step.summary.centre if step is not None and timed_apart else None,
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
    return ClusterView(
        ranks=ranks,
        step_ms=step_ms,
        slowest_rank=ranks[max(range(len(ranks)), key=lambda i: step_ms[i])],
        step_spread_pct=spread_pct(step_ms),
        comm_wait_ms=tuple(waits.get(r) for r in ranks) if known else (),
        comm_wait_spread_pct=spread_pct(known) if len(known) >= 2 and min(known) > 0 else None,
    )
