"""The whole job of ``perfgate gate`` and ``perfgate compare``, as one call each.

:func:`run_gate` judges a branch's latest runs and does all its result leads to (alerts, CI
outputs, delivery, whether the gate fails); :func:`conclude_gate` is its second half, for a
gate decided elsewhere (``check``). Nothing here prints: every line a command shows comes
back in the outcome, and side effects are best effort (a file that cannot be written, a
comment that cannot be posted, a read-only store that cannot take an alert: a warning, never
another verdict).

The module imports the gate's machinery on first use, so the command line can build a
:class:`GateRequest` without loading the store or the statistics.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.errors import ConfigError
from perfgate.models import AcrossReport, Alert, GateResult, Verdict

if TYPE_CHECKING:
    from perfgate.app.deliver import Delivery, DeliveryOptions
    from perfgate.config import Config
    from perfgate.store import SqlStore


@dataclass(frozen=True)
class CiOutputs:
    """Where a gate also reports in the CI's own formats."""

    junit: Path | None = None
    """JUnit XML (one testsuite per benchmark, one testcase per deciding comparison)."""
    gitlab_metrics: Path | None = None
    """A GitLab metrics report (``artifacts:reports:metrics``)."""
    annotations: bool | None = None
    """GitHub workflow commands; None: when ``GITHUB_ACTIONS=true``."""


@dataclass(frozen=True)
class CiReport:
    """What writing the CI outputs did: the annotation lines to print (workflow commands,
    escaped), the files written, and one warning per file that could not be."""

    annotations: tuple[str, ...] = ()
    written: tuple[Path, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class GateRequest:
    """What a gate is asked: which runs, against what, under which policy, reported where.

    ``branch`` None: the CI's or the checkout's; ``against`` None: the CI's base branch, else
    the config's ``base_branch``; ``base_sha`` None: the CI's base commit, else the git
    history; ``baseline_file``: judge against baseline JSON files instead of the store's
    history; ``fail_on`` None: the config's; ``alerts``: record the regressions of a gate on
    the base branch as untriaged alerts; ``delivery`` None: no comment, status, summary or
    report directory; ``env`` None: ``os.environ``; ``cwd`` None: the working directory.
    """

    config: Config
    branch: str | None = None
    against: str | None = None
    benchmarks: tuple[str, ...] = ()
    base_sha: str | None = None
    baseline_file: Path | None = None
    fail_on: frozenset[Verdict] | None = None
    alerts: bool = True
    delivery: DeliveryOptions | None = None
    outputs: CiOutputs = CiOutputs()
    env: Mapping[str, str] | None = None
    cwd: Path | None = None

    def __post_init__(self) -> None:
        check_fail_on(self.fail_on)


def check_fail_on(fail_on: frozenset[Verdict] | None) -> None:
    """ConfigError for an empty ``fail_on``, as ``--fail-on`` and the suite refuse it: it
    would fail on nothing, the gate silently switched off."""
    if fail_on is not None and not fail_on:
        known = ", ".join(v.value for v in Verdict)
        raise ConfigError(f"fail_on: empty; give at least one verdict from {known}")


@dataclass(frozen=True)
class GateOutcome:
    """What a gate found and did.

    ``failed``: whether the policy (``fail_on``) fails the gate; ``alerts``: the alerts
    recorded now; ``delivery``: what delivering the report did and what failed (empty when
    none was asked for); ``ci``: the CI outputs; ``warnings``: what could not be done before
    the report (a read-only store that cannot take this gate's alerts)."""

    result: GateResult
    failed: bool
    fail_on: frozenset[Verdict]
    alerts: tuple[Alert, ...] = ()
    delivery: Delivery | None = None
    ci: CiReport = CiReport()
    warnings: tuple[str, ...] = ()


def parse_fail_on(text: str) -> frozenset[Verdict]:
    """``regression,inconclusive`` (``--fail-on``): the verdicts that fail the gate
    (ConfigError: empty, or not verdicts)."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    known = ", ".join(v.value for v in Verdict)
    if not names:
        # An empty list would fail on nothing: the gate silently switched off.
        raise ConfigError(f"--fail-on: empty ({text!r}); give at least one verdict from {known}")
    try:
        return frozenset(Verdict(x) for x in names)
    except ValueError:
        raise ConfigError(f"--fail-on {text!r}: expected verdicts from {known}") from None


def delivery_for(
    suite_path: str = "",
    *,
    comment: bool = False,
    comment_mode: str = "always",
    forge: str | None = None,
    forge_url: str | None = None,
    repo: str | None = None,
    pr_number: int | None = None,
    sha: str | None = None,
    report_dir: Path | None = None,
    status: bool | None = None,
    summary: bool | None = None,
    testbed: str | None = None,
    report_url: str | None = None,
) -> DeliveryOptions:
    """The delivery a gate's reporting flags ask for, each keyword named as its flag
    (``pr_number``: ``--pr``); ``suite_path``: the suite file, named in the comment's marker.

    Raises:
        ValueError: ``comment_mode`` is not a :class:`~perfgate.stats.decide.CommentMode`.
    """
    from perfgate.app.deliver import DeliveryOptions, TargetOverrides
    from perfgate.stats.decide import CommentMode

    return DeliveryOptions(
        comment=comment,
        mode=CommentMode(comment_mode),
        target=TargetOverrides(
            forge=forge, api_url=forge_url, repo=repo, number=pr_number, sha=sha
        ),
        report_dir=report_dir,
        status=status,
        summary=summary,
        testbed=testbed or "",
        suite_path=suite_path,
        report_url=report_url or "",
    )


def run_gate(request: GateRequest) -> GateOutcome:
    """Judge the latest runs of ``request.branch`` and do everything the gate's result
    leads to, in one store session: the alerts (:func:`perfgate.app.triage.record_alerts`),
    the CI outputs, the delivery, and whether the gate fails.

    Raises:
        ConfigError: the branch cannot be told, or ``base_sha`` is not a commit.
        UsageError: no runs to judge, or the base branch has none
            (:func:`perfgate.app.gate.compare`).
        StoreError: the store cannot be opened or read.
    """
    from perfgate.app.context import detect_git_context, detect_pr_base
    from perfgate.store import open_store

    config = request.config
    env = os.environ if request.env is None else request.env
    cwd = Path.cwd() if request.cwd is None else request.cwd
    git = detect_git_context(env, cwd, branch=request.branch)
    base = detect_pr_base(env, cwd, base_sha=request.base_sha)
    if not git.branch:
        raise ConfigError("cannot tell the branch: pass --branch or run inside a git checkout")
    with open_store(config.database_url, create=False) as store:
        if request.baseline_file is not None:
            from perfgate.app.baselines import gate_from_baseline_files
            from perfgate.app.gate import latest_runs, stored_levels

            records = latest_runs(config, store, branch=git.branch, benchmarks=request.benchmarks)
            result = gate_from_baseline_files(
                config,
                records,
                request.baseline_file,
                alpha=stored_levels(records),
                against=request.against,
            )
        else:
            from perfgate.app.gate import compare

            result = compare(
                config,
                store,
                branch=git.branch,
                against=request.against or git.base_branch or config.base_branch,
                benchmarks=request.benchmarks,
                base_sha=base.sha,
                git=base.git,
            )
        wanted = request.alerts and request.baseline_file is None  # files record no alerts
        alerts, warnings = _alerts(config, store, result) if wanted else ((), ())
        outcome = conclude_gate(
            config,
            result,
            fail_on=request.fail_on,
            delivery=request.delivery,
            outputs=request.outputs,
            env=env,
            commit=git.commit,
            store=store,
        )
    return replace(outcome, alerts=alerts, warnings=(*warnings, *outcome.warnings))


def _alerts(
    config: Config, store: SqlStore, result: GateResult
) -> tuple[tuple[Alert, ...], tuple[str, ...]]:
    """The alerts ``result`` raises, recorded; or, where the store is read-only and there
    are some, a warning that they are not."""
    from perfgate.app.triage import gate_alerts, record_alerts

    if not store.read_only:
        return tuple(record_alerts(config, store, result=result)), ()
    if not gate_alerts(config, result):
        return (), ()
    return (), (
        f"store {store.url} is read-only: this gate's regressions are not recorded as alerts",
    )


def conclude_gate(
    config: Config,
    result: GateResult,
    *,
    fail_on: frozenset[Verdict] | None = None,
    delivery: DeliveryOptions | None = None,
    outputs: CiOutputs = CiOutputs(),
    env: Mapping[str, str] | None = None,
    commit: str | None = None,
    branch: str | None = None,
    cwd: Path | None = None,
    store: SqlStore | None = None,
) -> GateOutcome:
    """What a decided gate leads to: whether the policy fails it, its CI outputs and its
    delivery (``gate``'s second half, and ``check``'s). ``commit``: the one the report names
    when the judged runs do not share one (None: detected, only when there is a delivery);
    ``store``: an open one to read the report's trends from (None: opened for the delivery).
    Alerts are the caller's (:func:`run_gate` records them; ``check`` records its own)."""
    from perfgate.app.gate import gate_failed

    env = os.environ if env is None else env
    if fail_on is not None:
        config = replace(config, fail_on=fail_on)
    failed = gate_failed(config, result)
    ci = write_ci_outputs(config, result, outputs, env=env)
    done: Delivery | None = None
    if delivery is not None and delivery.wanted:
        from perfgate.app.context import detect_ci_context, detect_git_context
        from perfgate.app.deliver import deliver_gate
        from perfgate.store import open_store

        if commit is None:
            cwd = Path.cwd() if cwd is None else cwd
            commit = detect_git_context(env, cwd, branch=branch).commit
        with nullcontext(store) if store is not None else open_store(config.database_url) as db:
            done = deliver_gate(
                config,
                db,
                result,
                failed=failed,
                env=env,
                options=delivery,
                commit=commit,
                job_url=detect_ci_context(env).job_url,
            )
    return GateOutcome(result=result, failed=failed, fail_on=config.fail_on, delivery=done, ci=ci)


def write_ci_outputs(
    config: Config, result: GateResult, outputs: CiOutputs, *, env: Mapping[str, str]
) -> CiReport:
    """The annotations, JUnit XML and GitLab metrics report of a gate under the config's
    ``fail_on``. A file that cannot be written is a warning: like the PR comment, it never
    changes the verdict's exit code."""
    from perfgate.app.files import write_atomic
    from perfgate.reporters.annotations import annotations_wanted, github_annotations

    annotations: list[str] = []
    if annotations_wanted(env, outputs.annotations):
        annotations = github_annotations(result, config.fail_on)
    files: list[tuple[Path, str | bytes]] = []
    if outputs.junit is not None:
        from perfgate.reporters.junit import render_junit

        files.append((outputs.junit, render_junit(result, config.fail_on)))
    if outputs.gitlab_metrics is not None:
        from perfgate.reporters.prometheus import render_gitlab_metrics

        files.append((outputs.gitlab_metrics, render_gitlab_metrics(result)))
    written: list[Path] = []
    warnings: list[str] = []
    for path, data in files:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data)
        except OSError as exc:
            warnings.append(f"cannot write {path}: {exc.strerror or exc}")
        else:
            written.append(path)
    return CiReport(tuple(annotations), tuple(written), tuple(warnings))


def compare_environments(
    config: Config, a: str, b: str, *, branch: str | None = None, benchmarks: tuple[str, ...] = ()
) -> AcrossReport:
    """``compare --across A B``: the same benchmarks on two environments side by side
    (:func:`perfgate.app.across.compare_across`), read from the config's store; a report,
    never a gate."""
    from perfgate.app.across import compare_across
    from perfgate.store import open_store

    with open_store(config.database_url, create=False) as store:
        return compare_across(config, store, a, b, branch=branch, benchmarks=benchmarks)
