"""The whole job of ``perfgate check``, as one call: :func:`run_check_job`.

It measures the suite (:class:`~perfgate.app.run_job.Measure`), gates it and settles what is
left inconclusive within a budget (:func:`perfgate.app.check.run_check`, which also records
a base-branch check's alerts), then does what the gate's result leads to, as ``gate`` does
(:func:`perfgate.app.gate_job.conclude_gate`: whether it fails, the CI outputs, the
delivery). Nothing here prints: live lines go to the ``progress`` and ``warn`` callbacks,
everything else comes back in the :class:`CheckJobOutcome`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.app.gate_job import CiOutputs, GateOutcome, check_fail_on
from perfgate.app.run_job import Measure, ProgressFn, suite_dir

if TYPE_CHECKING:
    from perfgate.app.check import Budget, CheckOutcome
    from perfgate.app.deliver import DeliveryOptions
    from perfgate.config import Config
    from perfgate.models import Verdict


@dataclass(frozen=True)
class CheckRequest:
    """What ``check`` is asked: measure, gate, re-measure the undecided, report.

    ``mode``: ``history`` (against the base branch's stored runs) or ``ab`` (the merge-base
    measured in this job too, in pairs); ``ab_ref`` None: ``ab`` mode's base is the
    merge-base with the CI's base commit, else with the base branch; ``budget``: what
    re-measuring may spend (:func:`perfgate.app.check.parse_budget`); ``against`` None: the
    CI's base branch, else the config's; ``base_sha`` None: the CI's base commit;
    ``fail_on`` None: the config's; ``delivery`` None: no comment, status, summary or report
    directory; ``env`` None: ``os.environ``; ``cwd`` None: the working directory.
    """

    config: Config
    budget: Budget
    measure: Measure = Measure()
    suite: Path | None = None
    mode: str = "history"
    ab_ref: str | None = None
    against: str | None = None
    base_sha: str | None = None
    fail_on: frozenset[Verdict] | None = None
    delivery: DeliveryOptions | None = None
    outputs: CiOutputs = CiOutputs()
    env: Mapping[str, str] | None = None
    cwd: Path | None = None

    def __post_init__(self) -> None:
        check_fail_on(self.fail_on)


@dataclass(frozen=True)
class CheckJobOutcome:
    """What ``check`` found and did: the measuring (``check``: the final gate, the runs it
    judged, what was re-measured), ``remeasured``: that in one line, and the gate's
    consequences (``gate``: whether it fails, the CI outputs, the delivery)."""

    check: CheckOutcome
    remeasured: str
    gate: GateOutcome

    @property
    def failed(self) -> bool:
        """Whether the policy fails the gate (exit 1)."""
        return self.gate.failed


def run_check_job(
    request: CheckRequest, *, progress: ProgressFn | None = None, warn: ProgressFn | None = None
) -> CheckJobOutcome:
    """Run ``request``'s benchmarks, gate them, settle what is inconclusive within the
    budget, and conclude the gate (CI outputs, delivery, whether it fails). A base that ``ab``
    mode cannot measure stops before the store is opened.

    Raises:
        ConfigError: an invalid benchmark selection.
        UsageError: see :func:`perfgate.app.check.run_check`.
        StoreError: the store cannot be opened or written.
        RunnerError: a benchmark failed, or the check was stopped by a signal.
    """
    from perfgate.app.check import remeasured_line, resolve_ab_ref, run_check
    from perfgate.app.context import detect_ci_context, detect_pr_base
    from perfgate.app.gate_job import conclude_gate
    from perfgate.app.record import check_writable
    from perfgate.store import open_store

    config = request.config
    env = os.environ if request.env is None else request.env
    cwd = Path.cwd() if request.cwd is None else request.cwd
    specs = request.measure.specs(config)
    git = request.measure.git(env, cwd)
    pr = detect_pr_base(env, cwd, base_sha=request.base_sha)
    where = suite_dir(request.suite, cwd)
    against = request.against or git.base_branch or config.base_branch
    ab_ref = request.ab_ref
    if request.mode == "ab":
        ab_ref = resolve_ab_ref(pr.git, ab_ref=ab_ref or "", base_sha=pr.sha, against=against)
    with open_store(config.database_url) as store:
        check_writable(store, specs, request.measure.trace_dir)
        checked = run_check(
            config,
            specs,
            store,
            mode=request.mode,
            budget=request.budget,
            git=git,
            ci=detect_ci_context(env),
            against=against,
            trace_root=request.measure.trace_dir,
            repo=where,
            sys_path=[str(where), str(cwd)],
            base_sha=pr.sha,
            history=pr.git,
            ab_ref=ab_ref or "",
            progress=progress,
            warn=warn,
        )
    concluded = conclude_gate(
        config,
        checked.result,
        fail_on=request.fail_on,
        delivery=request.delivery,
        outputs=request.outputs,
        env=env,
        commit=git.commit,
        branch=git.branch,
        cwd=cwd,
    )
    return CheckJobOutcome(checked, remeasured_line(checked), concluded)
