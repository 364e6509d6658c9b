"""The whole job of ``perfgate run`` and ``perfgate ingest``, as one call each.

:func:`run_benchmarks` measures the suite's benchmarks (or ``--workload`` names) and records
one run each: plainly, as paired A/B runs (``--ab REF``), or by giving inconclusive runs
more repeats (``--confirm N``). :func:`ingest_file` records a run from a profile or result
file a job wrote. :class:`Measure` is what to measure, shared with ``check``
(:mod:`perfgate.app.check_job`). Nothing here prints: live lines go to the ``progress`` and
``warn`` callbacks, everything else comes back in the outcome.

The module imports the runner, the store and the parsers on first use, so the command line
can build a request without loading them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.errors import ConfigError
from perfgate.models import Confirmation, IngestResult, LaunchOptions, ParamValue, RunRecord

if TYPE_CHECKING:
    from perfgate.config import Config
    from perfgate.models import BenchmarkSpec, GitContext

ProgressFn = Callable[[str], None]


@dataclass(frozen=True)
class Measure:
    """What to measure and how to record it (``run``'s and ``check``'s shared options).

    ``workloads``: built-in workloads, each a benchmark (else the suite's, ``benchmarks``
    picking some); ``params``: workload parameters over each spec's own; the fields from
    ``device`` to ``nnodes``: spec fields given as flags (None: the suite's); ``branch``,
    ``commit``, ``base_branch`` None: from the CI, else git; ``trace_dir``: where profiled
    windows are written.
    """

    workloads: tuple[str, ...] = ()
    benchmarks: tuple[str, ...] = ()
    params: tuple[tuple[str, ParamValue], ...] = ()
    device: str | None = None
    repeats: int | None = None
    warmup: int | None = None
    measured: int | None = None
    profiled: int | None = None
    timeout_s: float | None = None
    nproc: int | None = None
    nnodes: int | None = None
    branch: str | None = None
    commit: str | None = None
    base_branch: str | None = None
    trace_dir: Path = Path(".perfgate/traces")

    def specs(self, config: Config) -> list[BenchmarkSpec]:
        """The benchmarks this picks from ``config``, with the overrides applied.

        Raises:
            ConfigError: an unknown workload or benchmark name, or an invalid value.
        """
        from perfgate.app.specs import benchmark_specs

        flags = ("device", "repeats", "warmup", "measured", "profiled", "nproc", "nnodes")
        overrides = {k: v for k in (*flags, "timeout_s") if (v := getattr(self, k)) is not None}
        return benchmark_specs(
            config,
            workloads=self.workloads,
            benchmarks=self.benchmarks,
            overrides=overrides,
            params=dict(self.params),
        )

    def git(self, env: Mapping[str, str], cwd: Path) -> GitContext:
        """The commit, branch and base the runs are recorded under."""
        from perfgate.app.context import detect_git_context

        return detect_git_context(
            env, cwd, branch=self.branch, commit=self.commit, base_branch=self.base_branch
        )


def suite_dir(suite: Path | None, cwd: Path) -> Path:
    """The directory of the suite file (``./perfgate.toml`` when none is named): the
    benchmarks' entries are imported from there."""
    return (cwd / (suite or Path("perfgate.toml"))).resolve().parent


@dataclass(frozen=True)
class RunRequest:
    """What ``run`` is asked: measure ``measure`` and record one run per benchmark.

    ``suite``: the suite file (its directory goes on the workers' import path);
    ``ab_ref``: also measure this commit, in alternating pairs with the head;
    ``confirm``: instead of a new run, give the latest inconclusive runs this many more
    repeats (``against``: their base branch, None: the CI's, else the config's);
    ``launch``: how a torchrun job spans nodes; ``env`` None: ``os.environ``; ``cwd`` None:
    the working directory.
    """

    config: Config
    measure: Measure = Measure()
    suite: Path | None = None
    ab_ref: str | None = None
    confirm: int | None = None
    against: str | None = None
    launch: LaunchOptions = LaunchOptions()
    env: Mapping[str, str] | None = None
    cwd: Path | None = None


@dataclass(frozen=True)
class RunOutcome:
    """What ``run`` recorded: the runs (an A/B pair's base run before its head run), and
    with ``--confirm`` what confirming did for each benchmark."""

    records: tuple[RunRecord, ...]
    confirmations: tuple[Confirmation, ...] = ()


def run_benchmarks(
    request: RunRequest, *, progress: ProgressFn | None = None, warn: ProgressFn | None = None
) -> RunOutcome:
    """Measure the benchmarks ``request`` picks and record them in the config's store
    (:func:`perfgate.app.record.run_and_record`, ``run_ab_and_record`` or
    ``confirm_and_record``); what can be checked is checked before anything is measured.
    ``progress``: a line per finished repeat or pair; ``warn``: what went wrong but did not
    stop the run.

    Raises:
        ConfigError: an invalid benchmark selection; ``confirm`` without a branch.
        StoreError: the store cannot be opened or written.
        RunnerError: a benchmark failed, or the trace directory cannot be written.
    """
    from perfgate.app import record
    from perfgate.app.context import detect_ci_context
    from perfgate.store import open_store

    config = request.config
    env = os.environ if request.env is None else request.env
    cwd = Path.cwd() if request.cwd is None else request.cwd
    specs = request.measure.specs(config)
    git = request.measure.git(env, cwd)
    trace_dir = request.measure.trace_dir
    where = suite_dir(request.suite, cwd)
    sys_path = [str(where), str(cwd)]
    with open_store(config.database_url) as store:
        record.check_writable(store, specs, None if request.confirm is not None else trace_dir)
        if request.confirm is not None:
            if not git.branch:
                raise ConfigError("cannot tell the branch: pass --branch")
            from perfgate.app.context import detect_pr_base

            base = detect_pr_base(env, cwd)
            confirmations = record.confirm_and_record(
                config,
                specs,
                store,
                branch=git.branch,
                against=request.against or git.base_branch or config.base_branch,
                extra=request.confirm,
                sys_path=sys_path,
                progress=progress,
                base_sha=base.sha,
                git=base.git,
            )
            folded = tuple(c.folded for c in confirmations if c.folded is not None)
            return RunOutcome(folded, tuple(confirmations))
        # how either kind of run is measured and recorded
        how: dict[str, Any] = dict(
            git=git, ci=detect_ci_context(env), trace_root=trace_dir, progress=progress, warn=warn
        )
        if request.ab_ref is not None:
            pairs = record.run_ab_and_record(
                config, specs, store, ref=request.ab_ref, repo=where, **how
            )
            return RunOutcome(tuple(r for pair in pairs for r in pair))
        records = record.run_and_record(
            config, specs, store, sys_path=sys_path, launch=request.launch, **how
        )
    return RunOutcome(tuple(records))


@dataclass(frozen=True)
class IngestRequest:
    """What ``ingest`` is asked: record the profile or result file at ``path``.

    ``benchmark``: the name to record it under (a result file's prefix); ``branch``,
    ``commit``, ``base_branch`` None: from the CI, else git; ``step_times``: a file of step
    times (ms) taken over the profile's; ``advisor``: run msprof-analyze's advisor on an
    Ascend profile, for at most ``advisor_timeout_s``; ``reference``: official figures to
    show the run beside; ``env`` None: ``os.environ``; ``cwd`` None: the working directory.
    """

    config: Config
    path: Path
    benchmark: str = ""
    branch: str | None = None
    commit: str | None = None
    base_branch: str | None = None
    step_times: Path | None = None
    advisor: bool = True
    advisor_timeout_s: float = 300.0
    reference: Path | None = None
    env: Mapping[str, str] | None = None
    cwd: Path | None = None


def ingest_file(request: IngestRequest, *, progress: ProgressFn | None = None) -> IngestResult:
    """Read the file ``request`` names, build its run(s) and record them in the config's
    store (:func:`perfgate.app.ingest.read_ingest`, ``record_ingest``). The reference and the
    file are read and checked before the store is opened: a path that is not a profile never
    leaves a new, empty store behind. ``progress``: lines while a large profile is read.

    Raises:
        UsageError: no benchmark name where one is needed, or no branch.
        ParseError: the file cannot be read as any format perfgate knows.
        StoreError: the store cannot be opened or written.
    """
    from perfgate.app.context import detect_ci_context, detect_git_context
    from perfgate.app.ingest import read_ingest, record_ingest
    from perfgate.app.reference import read_reference
    from perfgate.store import open_store

    config = request.config
    env = os.environ if request.env is None else request.env
    cwd = Path.cwd() if request.cwd is None else request.cwd
    git = detect_git_context(
        env, cwd, branch=request.branch, commit=request.commit, base_branch=request.base_branch
    )
    figures = read_reference(request.reference) if request.reference is not None else None
    read = read_ingest(
        config,
        request.path,
        benchmark=request.benchmark,
        git=git,
        ci=detect_ci_context(env),
        step_times_file=request.step_times,
        advisor=request.advisor,
        advisor_timeout_s=request.advisor_timeout_s,
        progress=progress,
    )
    with open_store(config.database_url) as store:
        return record_ingest(
            config, store, read, reference=figures, reference_path=request.reference
        )
