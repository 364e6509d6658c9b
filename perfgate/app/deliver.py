"""Use cases that deliver a verdict where people look: the PR/MR comment, the commit status,
the job summary, a report directory (for fork PRs, posted later by ``perfgate comment``) and
the nightly tracking issue.

Delivery is best effort: every failure becomes one warning line (never with a token in it),
the report stays on disk and in the job summary, and the gate's verdict and exit code do not
change. Settings come from flags, else the CI's variables as the forge's registry entry
reads them (:mod:`perfgate.reporters.forges`); tokens come only from the environment.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from perfgate.app.files import write_atomic
from perfgate.config import Config
from perfgate.errors import DeliverySetupError, PerfgateError, ReportError, UsageError
from perfgate.models import GateResult, RunRecord, Verdict
from perfgate.reporters.forges import (
    FORGES,
    MAX_CHARS_ANY,
    Forge,
    Reporter,
    detect_forge,
    forge_named,
    forge_names,
)
from perfgate.reporters.forges.api import RetryPolicy
from perfgate.reporters.markdown import (
    ALERT_LABEL,
    ZWJ,
    CommentMode,
    ReportContext,
    alert_marker,
    alert_summary,
    alert_title,
    change_key,
    marker,
    render_alert_comment,
    render_alert_issue,
    render_comment,
    reported_keys,
    should_post,
    status_description,
)
from perfgate.reporters.series import trend_values
from perfgate.store import SqlStore

if TYPE_CHECKING:
    from perfgate.models import DetectedChange

FORMAT_VERSION = 1
REPORT_FILE = "report.md"
TARGET_FILE = "target.json"


@dataclass(frozen=True)
class ForgeTarget:
    """Where a report goes: the forge (its registry name), its API, the repository (GitHub
    ``owner/name``, GitLab id or path), the change request's number and the commit for the
    status."""

    forge: str
    api_url: str
    repo: str
    number: int | None = None
    sha: str = ""
    job_url: str = ""


@dataclass(frozen=True)
class TargetOverrides:
    """Flags that override what the CI's variables say."""

    forge: str | None = None
    api_url: str | None = None
    repo: str | None = None
    number: int | None = None
    sha: str | None = None

    def __post_init__(self) -> None:
        if self.forge is not None:
            forge_named(self.forge)  # an unknown --forge is refused before any work is done


def resolve_target(
    env: Mapping[str, str], overrides: TargetOverrides, *, job_url: str = ""
) -> ForgeTarget:
    """The target from flags over the forge's CI variables; ReportError if the forge or
    the repository cannot be told (UsageError: an unknown ``--forge``)."""
    forge = forge_named(overrides.forge) if overrides.forge else detect_forge(env)
    if forge is None:
        names = "|".join(forge_names())
        cis = " or ".join(f.ci for f in FORGES)
        raise DeliverySetupError(f"cannot tell the forge: pass --forge {names} (not in {cis})")
    target = ForgeTarget(
        forge=forge.name,
        api_url=overrides.api_url or forge.api_url(env),
        repo=overrides.repo or forge.repo(env),
        number=overrides.number if overrides.number is not None else forge.read_number(env),
        sha=overrides.sha or forge.read_sha(env),
        job_url=job_url,
    )
    if not target.repo:
        missing = f"pass --repo or set {forge.repo_variable}"
        raise DeliverySetupError(f"{forge.name}: no repository: {missing}")
    return target


def make_reporter(target: ForgeTarget, env: Mapping[str, str]) -> Reporter:
    """A poster for ``target`` with the token from the environment (the first of the
    forge's token variables that is set), retrying as the environment says."""
    forge = forge_named(target.forge)
    return forge.poster(target.api_url, target.repo, env, RetryPolicy.from_env(env))


# --- the gate's report ---------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    """A rendered gate report and what a poster needs besides it."""

    markdown: str
    marker: str
    verdict: str
    failed: bool
    post: bool
    mode: CommentMode
    state: str
    description: str
    context: str


@dataclass(frozen=True)
class DeliveryOptions:
    """The gate's reporting flags."""

    comment: bool = False
    mode: CommentMode = CommentMode.ALWAYS
    target: TargetOverrides = TargetOverrides()
    report_dir: Path | None = None
    status: bool | None = None
    summary: bool | None = None
    testbed: str = ""
    suite_path: str = ""
    report_url: str = ""
    """The published HTML history report, linked from the comment's footer."""

    @property
    def wanted(self) -> bool:
        return self.comment or self.report_dir is not None or bool(self.status or self.summary)


def _trends(
    config: Config, store: SqlStore, result: GateResult
) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = {}
    by_benchmark: dict[str, list[Any]] = {}
    for c in result.comparisons:
        if c.method == "history" and c.baseline_run_ids:
            by_benchmark.setdefault(c.benchmark, []).append(c)
    for name, comparisons in by_benchmark.items():
        points = store.history(
            project=config.project,
            benchmark=name,
            branch=result.against,
            limit=max(config.baseline_window, *(len(c.baseline_run_ids) for c in comparisons)),
        )
        for c in comparisons:
            out[(c.benchmark, c.metric)] = trend_values(points, c)
    return out


def build_report(
    config: Config,
    store: SqlStore,
    result: GateResult,
    *,
    failed: bool,
    options: DeliveryOptions = DeliveryOptions(),
    commit: str = "",
    job_url: str = "",
    max_chars: int = MAX_CHARS_ANY,
) -> Report:
    """Render the comment of ``result``, with trends and environments from the store.

    The commit shown is the judged runs' (when they share one), else ``commit``. The testbed
    is ``options.testbed``, else the configured host label, else the judged runs' device.
    """
    runs: list[RunRecord] = []
    for run_id in dict.fromkeys(c.current_run_id for c in result.comparisons):
        with suppress(PerfgateError):  # an unsaved run: its environment is just not shown
            runs.append(store.get_run(run_id))
    environments: dict[str, dict[str, Any]] = {}
    for run in runs:
        environments.setdefault(run.fingerprint.key(), run.fingerprint.to_dict())
    commits = {run.git.commit for run in runs}
    if len(commits) == 1 and next(iter(commits)):
        commit = next(iter(commits))  # what was measured
    testbed = (
        options.testbed or config.host_label or (runs[0].fingerprint.testbed() if runs else "")
    )
    ingested = bool(runs) and not any(run.fingerprint.runner_timed for run in runs)
    ctx = ReportContext(
        project=config.project,
        suite=Path(options.suite_path).name if options.suite_path else "default",
        testbed=testbed,
        commit=commit,
        failed=failed,
        fail_on=tuple(sorted(v.value for v in config.fail_on)),
        trends=_trends(config, store, result),
        environments=sorted(environments.items()),
        suite_path=options.suite_path,
        job_url=job_url,
        report_url=options.report_url,
        ingested=ingested,
    )
    return Report(
        markdown=render_comment(result, ctx, max_chars=max_chars),
        marker=marker(ctx.project, ctx.suite, ctx.testbed),
        verdict=result.verdict.value,
        failed=failed,
        post=should_post(options.mode, result),
        mode=options.mode,
        state="failure" if failed else "success",
        description=status_description(result),
        context=f"perfgate/{config.project}",
    )


def write_report_dir(directory: Path, report: Report, target: ForgeTarget | None) -> None:
    """``report.md`` and ``target.json`` (where and how to post it; never a token), each
    replaced atomically (a file that cannot be written keeps its previous content)."""
    directory.mkdir(parents=True, exist_ok=True)
    data = {
        "format_version": FORMAT_VERSION,
        **(asdict(target) if target else {"forge": None}),
        **asdict(report),
        "mode": report.mode.value,
    }
    del data["markdown"]
    write_atomic(directory / REPORT_FILE, report.markdown)
    write_atomic(directory / TARGET_FILE, json.dumps(data, indent=2) + "\n")


@dataclass(frozen=True)
class Delivery:
    """What delivering a report did (``done``) and what failed (``warnings``), one line each."""

    done: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def publish(
    report: Report, target: ForgeTarget, reporter: Reporter, *, comment: bool, status: bool
) -> Delivery:
    """Upsert the comment (a new one only when the comment mode asks for it; an existing
    one is always kept current) and set the commit status; each failure is a warning."""
    done: list[str] = []
    warnings: list[str] = []
    forge = forge_named(target.forge)
    if comment and target.number is None:
        warnings.append(f"{target.forge}: no {forge.change} number (pass --pr): comment not posted")
    elif comment and target.number is not None:
        try:
            action = reporter.upsert_comment(
                target.number, report.marker, report.markdown, create=report.post
            )
            done.append(
                f"comment {action} on {forge.change_ref(target.number)}"
                + (f" (comment mode {report.mode.value})" if action == "skipped" else "")
            )
        except ReportError as exc:
            warnings.append(f"comment not posted: {exc}")
    if status and not forge.statuses:
        done.append(f"no commit status on {target.forge} (the job's own result is the check)")
    elif status and not target.sha:
        warnings.append(f"{target.forge}: no commit (pass --sha): status not set")
    elif status:
        try:
            reporter.set_status(
                target.sha,
                report.state,
                context=report.context,
                description=report.description,
                target_url=target.job_url,
            )
            done.append(f"status {report.state} set on {target.sha[:12]}")
        except ReportError as exc:
            warnings.append(f"status not set: {exc}")
    return Delivery(tuple(done), tuple(warnings))


def deliver_gate(
    config: Config,
    store: SqlStore,
    result: GateResult,
    *,
    failed: bool,
    env: Mapping[str, str],
    options: DeliveryOptions,
    commit: str = "",
    job_url: str = "",
) -> Delivery:
    """Everything the gate's reporting flags ask for, in one call: render, write the report
    directory, append the job summary, post the comment and the status."""
    warnings: list[str] = []
    target: ForgeTarget | None = None
    posting = options.comment or bool(options.status)
    try:
        target = resolve_target(env, options.target, job_url=job_url)
    except ReportError as exc:
        if posting:
            warnings.append(str(exc))
    report = build_report(
        config,
        store,
        result,
        failed=failed,
        options=options,
        commit=target.sha if target is not None and target.sha else commit,
        job_url=job_url,
        max_chars=forge_named(target.forge).max_chars if target is not None else MAX_CHARS_ANY,
    )
    done: list[str] = []
    if options.report_dir is not None:
        try:
            write_report_dir(options.report_dir, report, target)
            done.append(f"report written to {options.report_dir / REPORT_FILE}")
        except OSError as exc:
            warnings.append(f"cannot write {options.report_dir}: {exc.strerror}")
    summary = options.summary
    if summary is None:
        summary = options.comment or options.report_dir is not None
    if summary and (path := env.get("GITHUB_STEP_SUMMARY", "")):
        try:
            with open(path, "a", encoding="utf-8") as out:
                out.write(report.markdown + "\n")
        except OSError as exc:
            warnings.append(f"cannot write the job summary ({exc.strerror})")
    if posting and target is not None:
        try:
            reporter = make_reporter(target, env)
        except ReportError as exc:
            warnings.append(f"not posted: {exc}")
        else:
            status = options.status if options.status is not None else options.comment
            delivery = publish(report, target, reporter, comment=options.comment, status=status)
            done += delivery.done
            warnings += delivery.warnings
    return Delivery(tuple(done), tuple(warnings))


# --- fork PRs: post a report directory from a privileged job -------------------------------

FORK_CONTEXT = "perfgate (fork PR)"
"""The status name ``comment --from`` sets: its own, never one from the report directory
(which an unprivileged fork's job wrote), so it cannot pass for a required check."""

CONCLUSIONS = {"success": "success", "failure": "failure", "neutral": "success"} | dict.fromkeys(
    ("cancelled", "timed_out", "skipped", "action_required", "stale", "startup_failure"), "error"
)
"""The fork job's conclusion (``github.event.workflow_run.conclusion``) -> the status state."""

_MARKER = re.compile(r"<!-- perfgate:report project=[^\s<>]+ suite=[^\s<>]+ testbed=[^\s<>]+ -->")
_HEX_SHA = re.compile(r"[0-9a-fA-F]{7,40}")
_REPO = re.compile(r"[\w.\-/]{1,200}")
_SAFE_TAGS = ("<details>", "</details>", "<summary>", "</summary>", "<sub>", "</sub>")
_INLINE_LINK = re.compile(r"(!?)\[([^\[\]\n]*)\]\(([^()\s]*)(?:\s+\"[^\"\n]*\")?\)")
_MENTION = re.compile(r"([@#!~%$^])(?=\w)")
_AUTOLINK = re.compile(r"(?i)(:)(?=//)|(www)(?=\.)")
_TEXT = (str, type(None))
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("forge", "api_url", "repo"), _TEXT),
    "number": (int, type(None)),
    **dict.fromkeys(("sha", "job_url"), _TEXT),
    **dict.fromkeys(("marker", "verdict"), (str,)),
    **dict.fromkeys(("failed", "post"), (bool,)),
    "mode": (str,),
}
"""The fields of ``target.json`` that are read, and their types. ``state``, ``context`` and
``description`` are written there too (for a person reading the file) but never read: what a
status says comes from the trusted job alone."""


def load_report_dir(directory: Path) -> tuple[str, dict[str, Any]]:
    """``report.md`` and ``target.json`` of a report directory, every field checked (the
    directory may come from an untrusted fork): UsageError naming the field otherwise."""
    where = directory / TARGET_FILE
    try:
        markdown = (directory / REPORT_FILE).read_text(encoding="utf-8")
        data = json.loads(where.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{directory}: cannot read the report ({exc.strerror})") from None
    except ValueError as exc:
        raise UsageError(f"{where}: not JSON ({' '.join(str(exc).split())})") from None
    except RecursionError:
        raise UsageError(f"{where}: not a perfgate report target (nested too deeply)") from None
    if not isinstance(data, dict) or data.get("format_version") != FORMAT_VERSION:
        raise UsageError(f"{where}: not a perfgate report target (version 1)")

    def bad(key: str, what: str) -> UsageError:
        shown = json.dumps(data[key])
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        return UsageError(f"{where}: {key}: {what}, not {shown}")

    if "marker" not in data:
        raise UsageError(f"{where}: missing 'marker'")
    for key, types in _FIELD_TYPES.items():
        if key not in data:
            continue
        value = data[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise bad(key, f"expected {names}")
    if data.get("forge") is not None:
        try:
            forge_named(data["forge"])
        except UsageError as exc:
            raise UsageError(f"{where}: forge: {exc}") from None
    if data.get("number") is not None and data["number"] < 1:
        raise bad("number", "expected a positive whole number")
    if data.get("sha") and not _HEX_SHA.fullmatch(data["sha"]):
        raise bad("sha", "expected 7 to 40 hex digits")
    if data.get("repo") and not _REPO.fullmatch(data["repo"]):
        raise bad("repo", "expected owner/name or a project id")
    if not _MARKER.fullmatch(data["marker"]):
        raise bad("marker", "not perfgate's marker")
    if "mode" in data and data["mode"] not in {m.value for m in CommentMode}:
        raise bad("mode", "expected " + "|".join(m.value for m in CommentMode))
    if "verdict" in data and data["verdict"] not in {v.value for v in Verdict} | {""}:
        raise bad("verdict", "expected " + "|".join(v.value for v in Verdict))
    if len(data.get("job_url") or "") > 2000:
        raise UsageError(f"{where}: job_url: longer than 2000 characters")
    return markdown, data


def forge_hosts(forge: Forge, env: Mapping[str, str], api_url: str) -> frozenset[str]:
    """The host names of the forge this job posts to: its web server (the registry's
    ``server_url_variable``: ``GITHUB_SERVER_URL``, ``CI_SERVER_URL``, ``GITCODE_SERVER_URL``)
    and its API host (``api.`` dropped too: ``api.gitcode.com`` -> ``gitcode.com``)."""
    server = env.get(forge.server_url_variable, "") if forge.server_url_variable else ""
    urls = (server, api_url or forge.default_api_url)
    hosts = [(urlsplit(url).hostname or "").lower() for url in urls]
    return frozenset(h for host in hosts if host for h in (host, host.removeprefix("api.")))


def _on_host(url: str, hosts: frozenset[str]) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    host = (parts.hostname or "").lower()
    return parts.scheme in ("https", "http") and host in hosts and "@" not in parts.netloc


def sanitize_fork_markdown(
    markdown: str, marker_line: str, hosts: frozenset[str], *, where: str = REPORT_FILE
) -> str:
    """An untrusted report made safe to post with a privileged token: its first line must be
    ``marker_line`` (kept as is); in the rest no raw HTML (``<`` escaped, but for perfgate's own
    bare ``<details>``/``<summary>``/``<sub>`` tags), no images (their alt text stays), links
    only to ``hosts`` (others become their text), no reference-style links or bare-URL
    autolinks, and mentions and references disarmed."""
    lines = markdown.splitlines()
    if not lines or lines[0] != marker_line:
        raise UsageError(f"{where}: does not start with its marker")
    rest = "\n".join(lines[1:]).replace("<", "&lt;")
    for tag in _SAFE_TAGS:
        rest = rest.replace("&lt;" + tag[1:], tag)

    def text(chunk: str) -> str:
        chunk = _MENTION.sub(lambda m: m.group(1) + ZWJ, chunk)
        chunk = _AUTOLINK.sub(lambda m: (m.group(1) or m.group(2)) + ZWJ, chunk)
        # entities are never Markdown syntax: no reference-style link or image can form
        return chunk.replace("[", "&#91;").replace("]", "&#93;")

    out: list[str] = []
    at = 0
    for m in _INLINE_LINK.finditer(rest):
        out.append(text(rest[at : m.start()]))
        image, label, url = m.group(1), m.group(2), m.group(3)
        if not image and label and _on_host(url, hosts):
            out.append(f"[{text(label)}]({url})")
        else:
            out.append(text(label))
        at = m.end()
    out.append(text(rest[at:]))
    return marker_line + "\n" + "".join(out) + "\n"


def fork_label(conclusion: str | None) -> str:
    """The line under the marker of a comment ``comment --from`` posts: whose numbers these
    are, so nobody reads a fork's report as a trusted check."""
    job = f"its job's conclusion: {conclusion}" if conclusion else "its job's conclusion not given"
    return (
        f"> **Produced by an unprivileged fork PR run** ({job}). The trusted job that posted it"
        " checked the report's format and commit, not its numbers."
    )


def post_report_dir(
    directory: Path,
    env: Mapping[str, str],
    overrides: TargetOverrides,
    *,
    status: bool = True,
    conclusion: str | None = None,
    expect_sha: str | None = None,
) -> Delivery:
    """``perfgate comment --from DIR``: post what a gate wrote with ``--report-dir``.

    The directory may come from an untrusted fork's job, so nothing in it decides what the
    token vouches for: the API URL is never taken from it, every field of ``target.json`` is
    checked, the status has perfgate's own context (:data:`FORK_CONTEXT`), a state from
    ``conclusion`` (the fork job's; required for a status) and a description saying an
    unprivileged run produced it; the markdown is sanitised, labelled under its marker and
    capped. With ``expect_sha`` (the trusted head commit, e.g.
    ``github.event.workflow_run.head_sha``) the report, and on GitHub the PR's head, must be
    at that commit.
    """
    if conclusion is not None and conclusion not in CONCLUSIONS:
        raise UsageError(f"--conclusion: expected {'|'.join(CONCLUSIONS)}, not {conclusion!r}")
    state = CONCLUSIONS.get(conclusion or "", "")
    if status and not state:
        raise UsageError(
            "comment --from: pass --conclusion (the fork job's conclusion, e.g. "
            "github.event.workflow_run.conclusion) to set the status, or --no-status"
        )
    markdown, data = load_report_dir(directory)
    detected = detect_forge(env)
    saved = TargetOverrides(
        forge=overrides.forge or (detected.name if detected else None) or data.get("forge"),
        # never the file's API URL: the token must only go where this job's CI says
        api_url=overrides.api_url,
        repo=overrides.repo or data.get("repo") or None,
        number=overrides.number if overrides.number is not None else data.get("number"),
        sha=overrides.sha or data.get("sha") or None,
    )
    target = resolve_target(env, saved)
    forge = forge_named(target.forge)
    hosts = forge_hosts(forge, env, target.api_url)
    job_url = str(data.get("job_url") or "")
    target = replace(target, job_url=job_url if _on_host(job_url, hosts) else "")
    if expect_sha is not None and target.sha != expect_sha:
        raise UsageError(
            f"the report is for commit {target.sha[:12] or '?'}, not {expect_sha[:12]}: not posted"
        )
    body = sanitize_fork_markdown(
        markdown, data["marker"], hosts, where=str(directory / REPORT_FILE)
    )
    marker_line, rest = body.split("\n", 1)
    body = f"{marker_line}\n{fork_label(conclusion)}\n\n{rest}"[: forge.max_chars]
    reporter = make_reporter(target, env)
    if expect_sha is not None and target.number is not None:
        head = reporter.head_sha(target.number)  # None where the forge's poster cannot tell
        if head is not None and head != expect_sha:
            raise UsageError(
                f"{forge.change_ref(target.number)} is at {head[:12] or '?'}, "
                f"not {expect_sha[:12]}: not posted"
            )
    report = Report(
        markdown=body,
        marker=data["marker"],
        verdict=str(data.get("verdict", "")),
        failed=state != "success",
        post=bool(data.get("post", True)),
        mode=CommentMode(data.get("mode", "always")),
        state=state,
        # under a status description's 140 characters: the conclusion is one of CONCLUSIONS
        description=f"From an unprivileged fork PR run (job {conclusion}); not a trusted check",
        context=FORK_CONTEXT,
    )
    delivery = publish(report, target, reporter, comment=True, status=status)
    if delivery.warnings:
        raise ReportError("; ".join(delivery.warnings))
    return delivery


# --- nightly: one tracking issue per project -----------------------------------------------


def alert_changes(
    project: str, branch: str, changes: Sequence[DetectedChange], reporter: Reporter
) -> str:
    """Report the change points not reported before on the project's tracking issue: found
    by its marker, created when missing, its body updated in place (and one comment naming
    the new ones, so watchers are notified). Returns what it did, in one line."""
    found = reporter.find_issue(alert_marker(project), ALERT_LABEL)
    old_body = found[1] if found else ""
    seen = set(reported_keys(old_body))
    new = [c for c in changes if change_key(c) not in seen]
    if not new:
        where = f" (issue {found[0]})" if found else ""
        return f"no new change points to report{where}"
    body = render_alert_issue(project, branch, new, old_body)
    if found is None:
        number = reporter.create_issue(alert_title(project, branch), body, ALERT_LABEL)
        return f"tracking issue {number} opened with {alert_summary(new)}"
    reporter.update_issue(found[0], body)
    reporter.comment_issue(found[0], render_alert_comment(branch, new))
    return f"tracking issue {found[0]} updated with {alert_summary(new, new=True)}"


def tracked_keys(project: str, reporter: Reporter) -> list[str]:
    """The keys the project's tracking issue holds (change points reported, culprits looked
    for); none where there is no tracking issue."""
    found = reporter.find_issue(alert_marker(project), ALERT_LABEL)
    return reported_keys(found[1]) if found else []


def alert_culprit(project: str, branch: str, comment: str, key: str, reporter: Reporter) -> str:
    """Name a bisection's culprit on the project's tracking issue: ``comment`` posted on it
    (opened where there is none), and ``key`` added to the keys its body keeps, so the next
    nightly does not search for that culprit again (the keys survive the body's rewrites by
    :func:`alert_changes`). Returns what it did."""
    mark = alert_marker(project)
    found = reporter.find_issue(mark, ALERT_LABEL)
    if found is None:
        body = f"{mark}\n<!-- perfgate:reported {key} -->\n"
        number = reporter.create_issue(alert_title(project, branch), body, ALERT_LABEL)
        reporter.comment_issue(number, comment)
        return f"tracking issue {number} opened, culprit named in a comment"
    number, old_body = found
    if key not in reported_keys(old_body):
        listed = re.search(r"<!-- perfgate:reported ([0-9a-f ]*?) ?-->", old_body)
        if listed is None:
            body = old_body.replace(mark, f"{mark}\n<!-- perfgate:reported {key} -->", 1)
        else:
            keys = f"{listed.group(1)} {key}".strip()
            body = f"{old_body[: listed.start()]}<!-- perfgate:reported {keys} -->"
            body += old_body[listed.end() :]
        reporter.update_issue(number, body)
    reporter.comment_issue(number, comment)
    return f"tracking issue {number}: culprit named in a comment"
