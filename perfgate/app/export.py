"""Use cases ``perfgate export tensorboard`` and ``perfgate export prometheus``: read the
store, hand plain values to the writers in :mod:`perfgate.exporters.tensorboard` and
:mod:`perfgate.reporters.prometheus` (the push: :mod:`perfgate.exporters.prometheus`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfgate.app.files import write_atomic
from perfgate.app.history import select_benchmarks
from perfgate.config import Config
from perfgate.exporters.tensorboard import Scalar
from perfgate.models import RunPoint, RunRecord
from perfgate.reporters.prometheus import LatestValue
from perfgate.store import SqlStore

TOP_OPS = 10


@dataclass(frozen=True)
class TensorBoardExport:
    """What an export wrote: one event file per (benchmark, branch), and how many scalars."""

    files: tuple[Path, ...]
    scalars: int


def _profile_scalars(run: RunRecord, step: int) -> list[Scalar]:
    from perfgate.exporters.tensorboard import tag

    profile, wall = run.profile, run.started_at.timestamp()
    if profile is None:
        return []
    out = [
        Scalar(tag("top_ops_ms_per_step", op.name), step, op.self_time_ms_per_step, wall)
        for op in profile.top_ops(TOP_OPS)
    ]
    parts = profile.breakdown.to_dict() if profile.breakdown is not None else {}  # ms per step
    breakdown = [(part, float(ms)) for part, ms in parts.items() if ms is not None]
    return out + [Scalar(tag("breakdown", part), step, ms, wall) for part, ms in breakdown]


def export_tensorboard(
    config: Config,
    store: SqlStore,
    logdir: Path,
    *,
    benchmarks: Sequence[str] = (),
    branch: str | None = None,
    limit: int = 1000,
    profiles: bool = True,
) -> TensorBoardExport:
    """Event files under ``logdir``: per (benchmark, branch), the scalars ``metrics/<metric>``
    (each run's centre) and, for runs with a profile, ``top_ops_ms_per_step/<op>`` (the
    top ops' self time) and ``breakdown/<part>`` (the step breakdown, ms per step).

    Each event file is written atomically, and the event files of an earlier export in its
    directory are removed only after it is: an export that fails (a full disk) leaves the
    previous one readable.

    Raises:
        OSError: an event file cannot be written.
    """
    from perfgate.exporters.tensorboard import run_dir, tag

    files: list[Path] = []
    count = 0
    for name in select_benchmarks(config, store, benchmarks, branch):
        points = store.history(project=config.project, benchmark=name, branch=branch, limit=limit)
        by_branch: dict[str, list[RunPoint]] = {}
        for p in points:
            by_branch.setdefault(p.branch, []).append(p)
        for run_branch, series in sorted(by_branch.items()):
            order = {run: i for i, run in enumerate(dict.fromkeys(p.run_id for p in series))}
            scalars = [
                Scalar(
                    tag("metrics", p.metric), order[p.run_id], p.centre, p.started_at.timestamp()
                )
                for p in series
            ]
            if profiles:
                for run_id, step in order.items():
                    scalars += _profile_scalars(store.get_run(run_id), step)
            files.append(write_events(run_dir(logdir, name, run_branch), scalars))
            count += len(scalars)
    return TensorBoardExport(tuple(files), count)


def write_events(directory: Path, scalars: Sequence[Scalar]) -> Path:
    """Write ``scalars`` as one event file in ``directory``, then remove perfgate's earlier
    event files there (so re-exporting does not duplicate points); returns its path."""
    from perfgate.exporters.tensorboard import event_file, is_event_file

    name, data = event_file(scalars, now=time.time())
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    write_atomic(path, data)
    for old in directory.iterdir():
        if old != path and is_event_file(old):
            old.unlink(missing_ok=True)
    return path


def latest_values(
    config: Config, store: SqlStore, *, branch: str | None = None, benchmarks: Sequence[str] = ()
) -> list[LatestValue]:
    """The latest run's centre of every (benchmark, metric, testbed) on ``branch`` (default:
    the base branch), each with its testbed in words and its fingerprint key."""
    on = branch or config.base_branch
    out: list[LatestValue] = []
    for name in select_benchmarks(config, store, benchmarks, on):
        environments = store.fingerprints(project=config.project, benchmark=name, branch=on)
        for key, fp in environments.items():
            points = store.history(
                project=config.project, benchmark=name, branch=on, fingerprint_key=key, limit=1
            )
            out.extend(
                LatestValue(
                    project=config.project,
                    benchmark=name,
                    metric=p.metric,
                    unit=p.unit,
                    testbed=fp.testbed(),
                    testbed_key=key,
                    device=fp.device_kind,
                    branch=on,
                    value=p.centre,
                    run_id=p.run_id,
                    commit=p.commit,
                    started_at=p.started_at,
                )
                for p in points
            )
    return out
