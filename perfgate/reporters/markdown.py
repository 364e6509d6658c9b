"""The PR/MR comment and job summary of a gate, as Markdown (pure, golden-tested).

One comment per (project, suite, testbed): a hidden marker names it so a poster can find
and update it in place. Layout: the verdict line, a table (worst rows first), a "why"
section (the operators whose calls per step changed, attribution, new advisor findings,
the reason behind each verdict that needs one), and folded details (environment, baseline
window, how to reproduce, how to accept or settle a verdict).

Budgets (the suite's absolute limits) are a section of their own above the table, in their
own words ("❌ over budget: ..."), breaches first; they are never counted as regressions,
and a breach counts for both comment modes that filter.

Every string that comes from data (benchmark, metric, branch, op, profile, finding) goes
through :func:`escape`: no Markdown or HTML injection, no @-mentions, no ``#123`` / ``!123``
references, no links. A comment that would exceed the forge's size limit loses its least
important rows first (unchanged, then improvements, ...) and says how many it left out.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from perfgate import __version__
from perfgate.errors import shown_url
from perfgate.models import (
    ONE_RUN_PER_FILE,
    Attribution,
    Comparison,
    Finding,
    GateResult,
    Severity,
    Verdict,
)
from perfgate.reporters.render import (
    drift_headline,
    format_change,
    format_value,
    interval_label,
    metric_tags,
    op_delta_text,
    plural,
    work_text,
)
from perfgate.stats.decide import CommentMode as CommentMode  # the comment policy's modes
from perfgate.stats.decide import deciding, deciding_verdicts, fixed, is_budget, posts_comment

if TYPE_CHECKING:
    from perfgate.models import DetectedChange

MAX_FINDINGS = 20
MAX_ATTRIBUTIONS = 10
MAX_OPS = 5
MAX_NAME_CHARS = 200
MAX_BUDGET_LINES = 20
"""Budget lines of each kind (breached, kept) a comment shows at most."""
SPARK_POINTS = 20

ZWJ = "\u200d"
"""Zero-width joiner: put after ``@``/``#``/``!``/... it stops mentions and references."""

_SPARKS = "▁▂▃▄▅▆▇█"
_INERT = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", **{c: "\\" + c for c in "\\`*_[]|~"}}
)
"""HTML specials as entities, Markdown punctuation backslash-escaped."""
_REFERENCE = re.compile(r"([@#!~%$&^])(?=\w)")
_INVISIBLE = re.compile(r"[\x00-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


_VERDICTS = {  # worst first: the table's label, the noun of a count of one, of several
    Verdict.OVER_BUDGET: ("❌ over budget", "over budget", "over budget"),
    Verdict.REGRESSION: ("🔴 regression", "regression", "regressions"),
    Verdict.INCONCLUSIVE: ("🟡 inconclusive", "inconclusive", "inconclusive"),
    Verdict.INCOMPARABLE: ("🟠 incomparable", "incomparable", "incomparable"),
    Verdict.NO_BASELINE: ("⚪ no baseline", "without baseline", "without baseline"),
    Verdict.IMPROVEMENT: ("🟢 improvement", "improvement", "improvements"),
    Verdict.UNCHANGED: ("⚪ unchanged", "unchanged", "unchanged"),
}
_RANK = {verdict: i - 1 for i, verdict in enumerate(_VERDICTS)}  # over budget: -1
_SEVERITY = {
    Severity.CRITICAL: "🔴 critical",
    Severity.WARNING: "🟠 warning",
    Severity.INFO: "🔵 info",
}


@dataclass(frozen=True)
class ReportContext:
    """What the comment needs beyond the GateResult (the use case builds it from the store).

    ``trends`` maps (benchmark, metric) to recent values, oldest first (the baseline
    window, then this run). ``environments`` lists (fingerprint key, fingerprint fields) of
    the runs judged.
    """

    project: str
    suite: str = ""
    testbed: str = ""
    commit: str = ""
    failed: bool = False
    fail_on: tuple[str, ...] = ("regression",)
    trends: Mapping[tuple[str, str], Sequence[float]] = field(default_factory=dict)
    environments: Sequence[tuple[str, Mapping[str, Any]]] = ()
    suite_path: str = ""
    job_url: str = ""
    report_url: str = ""
    """Where the HTML history report (``perfgate report --html``) is published, if anywhere."""
    ingested: bool = False
    """Every run judged was ingested from a file the job wrote (``perfgate ingest``), none
    measured by ``perfgate run``: reproducing it is the job's command, then the ingest."""


def escape(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """``text`` as inert inline Markdown: literal everywhere, links and mentions disarmed.

    Control and bidi characters are dropped, newlines become spaces, HTML specials become
    entities, Markdown punctuation is backslash-escaped, and a zero-width joiner follows
    ``@ # ! ~ % $ & ^`` before a word character (no mention or reference), ``:`` before
    ``//`` and ``www`` before ``.`` (no autolink).
    """
    flat = " ".join(_INVISIBLE.sub(" ", text).split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    flat = _REFERENCE.sub(lambda m: m.group(1) + ZWJ, flat)
    flat = re.sub(r":(?=//)", ":" + ZWJ, flat)
    flat = re.sub(r"(?i)(www)(?=\.)", lambda m: m.group(1) + ZWJ, flat)
    return flat.translate(_INERT)


def _enc(value: str) -> str:
    return quote(value, safe="") or "-"


def marker(project: str, suite: str, testbed: str) -> str:
    """The hidden line that identifies one comment: values percent-encoded, so no data can
    end the HTML comment or forge another marker."""
    where = f"project={_enc(project)} suite={_enc(suite)} testbed={_enc(testbed)}"
    return f"<!-- perfgate:report {where} -->"


def sparkline(values: Sequence[float], points: int = SPARK_POINTS) -> str:
    """Unicode bars of the last ``points`` values, scaled between their min and max."""
    recent = [v for v in values if v == v][-points:]
    if not recent:
        return ""
    low, high = min(recent), max(recent)
    if high == low:
        return _SPARKS[3] * len(recent)
    top = len(_SPARKS) - 1
    return "".join(_SPARKS[round((v - low) / (high - low) * top)] for v in recent)


def should_post(mode: CommentMode, result: GateResult) -> bool:
    """Whether ``mode`` asks for a (new) comment on this result: the comment policy of
    :func:`perfgate.stats.decide.posts_comment`."""
    return posts_comment(mode, result.comparisons)


def _tally(found: Sequence[Comparison], order: Iterable[Verdict]) -> list[str]:
    """``2 regressions``, ``1 improvement``, ...: each verdict of ``found``, in ``order``."""
    counts = Counter(c.verdict for c in found)
    return [f"{n} {_VERDICTS[v][1 + (n != 1)]}" for v in order if (n := counts[v])]


def _counts(result: GateResult) -> str:
    """'1 over budget, 2 regressions in 3 benchmarks (18 metrics)': a budget kept is not
    counted (the Budgets section shows it), nor is it one of the metrics."""
    every = deciding(result.comparisons)
    over = [c for c in every if is_budget(c) and c.verdict is Verdict.OVER_BUDGET]
    decided = [*over, *(c for c in every if not is_budget(c))]
    changed = [c for c in decided if c.verdict is not Verdict.UNCHANGED]
    tally = _tally(changed, _VERDICTS)
    found = ", ".join(tally) or ("no change" if decided else "nothing compared")
    benchmarks = plural(len({c.benchmark for c in every}), "benchmark")
    return f"{found} in {benchmarks} ({plural(len(decided) - len(over), 'metric')})"


def _baseline_phrase(result: GateResult) -> str:
    against = escape(result.against)
    windows = [c for c in result.comparisons if c.baseline_run_ids]
    if not windows:
        return f"vs {against}, no baseline yet"
    widest = max(windows, key=lambda c: len(c.baseline_run_ids))
    commits = [x for x in widest.baseline_commits if x]
    at = f" @ {escape(commits[-1][:7])}" if commits else ""
    return f"vs {against}{at}, {plural(len(widest.baseline_run_ids), 'run')}"


def _icon(result: GateResult, ctx: ReportContext) -> str:
    seen = deciding_verdicts(result.comparisons)
    if ctx.failed:
        return "❌"
    if any(_RANK[v] <= _RANK[Verdict.INCOMPARABLE] for v in seen):  # incomparable or worse
        return "⚠️"
    if seen and seen <= {Verdict.NO_BASELINE}:
        return "ℹ️"
    return "✅"


def verdict_line(result: GateResult, ctx: ReportContext) -> str:
    """The first visible line, e.g. '❌ perfgate: 2 regressions, 1 inconclusive in 6
    benchmarks (18 metrics) — vs main @ abc1234, 30 runs'."""
    return f"{_icon(result, ctx)} perfgate: {_counts(result)} — {_baseline_phrase(result)}"


def _row_order(c: Comparison) -> tuple[bool, int, float, str, str, str]:
    """Deciding rows first, worst first; those only shown after them."""
    size = abs(c.change_pct) if c.change_pct is not None and c.change_pct == c.change_pct else 0.0
    return (not c.decides, _RANK[c.verdict], -size, c.benchmark, c.metric, c.method)


def _table(rows: Sequence[Comparison], ctx: ReportContext) -> list[str]:
    lines = [
        f"| benchmark | metric | baseline | current | change [{interval_label(rows)}] | verdict "
        "| trend |",
        "| --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for c in rows:
        values = [format_value(x, c.unit) for x in (c.baseline_centre, c.current_centre)]
        label = _VERDICTS[c.verdict][0] if c.decides else c.verdict.value
        trend = sparkline(ctx.trends.get((c.benchmark, c.metric), ()))
        cells = [escape(c.benchmark), escape(c.metric) + metric_tags(c), *values, format_change(c)]
        lines.append("| " + " | ".join([*cells, label, trend]) + " |")
    return lines


def _budget_lines(result: GateResult) -> list[str]:
    """The Budgets section: each budget judged, in its own words, breaches first (at most
    :data:`MAX_BUDGET_LINES` of each kind, the rest counted)."""
    judged = sorted(filter(is_budget, result.comparisons), key=lambda c: (c.benchmark, c.metric))
    if not judged:
        return []
    lines = ["#### Budgets", ""]
    for breached, kind, icon in ((True, "over", "❌"), (False, "within", "✅")):
        rows = [
            f"- {icon} {kind} budget: **{escape(c.benchmark)}** {escape(c.reason, 400)}"
            for c in judged
            if (c.verdict is Verdict.OVER_BUDGET) is breached
        ]
        lines += _capped(rows, MAX_BUDGET_LINES, f"{kind} budget")
    return [*lines, ""]


def _capped(lines: list[str], limit: int, noun: str) -> list[str]:
    """The first ``limit`` of ``lines``, then how many more ``noun`` there are."""
    return lines[:limit] + ([f"- … {len(lines) - limit} more {noun}"] if len(lines) > limit else [])


def _not_shown(dropped: Sequence[Comparison]) -> str:
    parts = _tally([c for c in dropped if c.decides], reversed(_VERDICTS))
    beside = sum(1 for c in dropped if not c.decides)
    if beside:
        parts.append(f"{beside} shown, not deciding")
    return (
        f"*{plural(len(dropped), 'row')} not shown ({', '.join(parts)}) to stay "
        "within the comment size limit; `perfgate gate --json` has them all.*"
    )


def _attribution_line(a: Attribution) -> str:
    ops = [op_delta_text(op, escape(op.name)) for op in a.ops[:MAX_OPS]]
    if len(a.ops) > MAX_OPS:
        ops.append(f"{len(a.ops) - MAX_OPS} more")
    line = f"- **{escape(a.benchmark)}** {escape(a.metric)} {fixed(a.delta_ms, '+.2f')} ms per step"
    if ops:
        line += ": " + ", ".join(ops)
    if a.explained_share is not None:
        line += f" — explains {fixed(a.explained_share * 100, '.0f')}% of the change"
    if a.note:
        line += f" ({escape(a.note, 300)})"
    return line


def _finding_text(f: Finding) -> str:
    """A finding's item and, on its own line, its suggestion."""
    where = f" @ {escape(f.location)}" if f.location else ""
    text = f"- {_SEVERITY[f.severity]} · {escape(f.source)} {escape(f.rule)}{where}"
    if f.message:
        text += f": {escape(f.message, 400)}"
    if f.impact_ms is not None:
        text += f" (could save ~{fixed(f.impact_ms, '.2f')} ms per step)"
    if f.suggestion:
        text += f"\n  *Suggestion:* {escape(f.suggestion, 400)}"
    return text


def _why(result: GateResult) -> list[str]:
    # what work changed first: beside the verdict it explains (or the count it decides on)
    lines = [
        f"- **{escape(w.benchmark)}** {escape(work_text(w), 500)}" for w in result.work_changes
    ]
    attributions = [_attribution_line(a) for a in result.attributions]
    lines += _capped(attributions, MAX_ATTRIBUTIONS, "attributions")
    new = sorted(
        (f for f in result.findings if not f.known),
        key=lambda f: (list(Severity).index(f.severity), -(f.impact_ms or 0.0)),
    )
    lines += _capped([_finding_text(f) for f in new], MAX_FINDINGS, "new findings")
    known = sum(1 for f in result.findings if f.known)
    notes = [
        f"- **{escape(c.benchmark)}** {escape(c.metric)}: {escape(c.reason, 500)}"
        for c in sorted(deciding(result.comparisons), key=_row_order)
        if c.verdict in (Verdict.REGRESSION, Verdict.INCONCLUSIVE, Verdict.INCOMPARABLE)
    ]
    if lines and notes:
        lines.append("")
    lines += notes
    if known:
        lines += [
            "",
            f"{plural(known, 'advisor finding')} already present on {escape(result.against)} "
            "not repeated here.",
        ]
    return ["#### Why", "", *lines] if lines else []


_SHELL_SAFE = re.compile(r"^[A-Za-z0-9_.,:+=/-]{1,100}$")
_QUOTABLE = re.compile(r"^[\w .,:+=/()\[\]'-]{1,100}$")
"""A name a command line in the comment may hold in quotes: words, spaces, brackets (``my
bench``, ``test_sort[1-2]``, ``time_x(10, 'a')``); no mention, link or shell expansion."""


def _shell(word: str, placeholder: str = "NAME") -> str:
    """``word`` for a command line in the comment, or ``placeholder`` when it holds anything
    but plain characters (nothing from data is ever pasted raw, even in a code block)."""
    return word if _SHELL_SAFE.match(word) else placeholder


def _shell_name(name: str) -> str:
    """A benchmark's name for a command line in the comment: as is when plain, in shell
    quotes when it holds spaces or brackets (:data:`_QUOTABLE`), else ``NAME``."""
    if _SHELL_SAFE.match(name):
        return name
    return shlex.quote(name) if _QUOTABLE.match(name) and "://" not in name else "NAME"


def _ingested_by_name(ctx: ReportContext) -> bool:
    """Whether every run judged was ingested from a file of one run, which ``ingest
    --benchmark NAME`` names (so the reproduce steps must pass it)."""
    methods = {str(fields.get("timing_method", "")) for _, fields in ctx.environments}
    return bool(methods) and methods <= ONE_RUN_PER_FILE


def _environment_lines(ctx: ReportContext) -> list[str]:
    lines: list[str] = []
    for key, fields in ctx.environments:
        lines += [f"**Environment** (fingerprint {escape(key)})", "", "| field | value |"]
        lines.append("| --- | --- |")
        for name, value in fields.items():
            if isinstance(value, Mapping):
                value = ", ".join(f"{k}={v}" for k, v in sorted(value.items()))
            if value in ("", None):
                continue
            lines.append(f"| {escape(str(name))} | {escape(str(value))} |")
        lines.append("")
    return lines


def _window_lines(result: GateResult) -> list[str]:
    """The baseline windows, one line per distinct window shape (benchmarks sharing the
    same number of runs and commit range are listed together)."""
    groups: dict[tuple[str, int, str, str], dict[str, Comparison]] = {}
    for c in result.comparisons:
        if c.baseline_run_ids:
            commits = [x[:7] for x in c.baseline_commits if x] or [""]
            key = (c.method, len(c.baseline_run_ids), commits[0], commits[-1])
            groups.setdefault(key, {}).setdefault(c.benchmark, c)
    if not groups:
        return []
    lines = [f"**Baseline window** (on {escape(result.against)})", ""]
    for (method, n, first, last), members in groups.items():
        names = [escape(b) for b in list(members)[:10]]
        if len(members) > 10:
            names.append(f"and {len(members) - 10} more")
        span = f", commits {escape(first)}..{escape(last)}" if first else ""
        kind = " (A/B pairs)" if method == "paired" else ""
        line = f"- {', '.join(names)}{kind}: {plural(n, 'run')}{span}"
        if len(members) == 1:
            ids = next(iter(members.values())).baseline_run_ids
            shown = list(ids) if len(ids) <= 4 else [ids[0], ids[1], "…", ids[-1]]
            line += "; runs " + ", ".join(escape(i, 40) for i in shown)
        lines.append(line)
    return [*lines, ""]


def _record_line(ctx: ReportContext, branch: str, suite: str, names: Sequence[str]) -> str:
    """The command that records ``branch``'s runs again: ``perfgate run`` of the picks, or
    the ingest of the job's file; of each benchmark's file, with its ``--benchmark``, where
    ingest named the runs (:func:`_ingested_by_name`)."""
    picks = "".join(f" --benchmark {n}" for n in names)
    if not ctx.ingested:
        return f"git checkout {branch} && perfgate run{suite}{picks} --branch {branch}"
    ingest = f"perfgate ingest FILE{suite} --branch {branch}"
    if not (_ingested_by_name(ctx) and names):
        return f"git checkout {branch} && {ingest}"  # a result file names its own benchmarks
    return f"git checkout {branch} && " + " && ".join(f"{ingest} --benchmark {n}" for n in names)


def _reproduce_lines(result: GateResult, ctx: ReportContext) -> list[str]:
    decided = sorted(deciding(result.comparisons), key=_row_order)
    worst = [c.benchmark for c in decided if _RANK[c.verdict] <= 1]
    names = list(dict.fromkeys(_shell_name(n) for n in worst or [c.benchmark for c in decided]))
    picks = "".join(f" --benchmark {n}" for n in names[:5])
    suite = f" --suite {_shell(ctx.suite_path, 'SUITE')}" if ctx.suite_path else ""
    branch, against = _shell(result.branch, "BRANCH"), _shell(result.against, "BASE")
    head = f"# on {against} and on {branch}, on the same kind of runner"
    if ctx.ingested:
        several = _ingested_by_name(ctx) and len(names[:5]) > 1
        head += ", after the job wrote " + ("each benchmark's FILE" if several else "FILE")
    body = "\n".join(
        [
            head + ":",
            _record_line(ctx, against, suite, names[:5]),
            _record_line(ctx, branch, suite, names[:5]),
            f"perfgate gate{suite} --branch {branch} --against {against}{picks}",
            f"perfgate history{suite} --branch {against}"
            + (f" --benchmark {names[0]}" if names else ""),
        ]
    )
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", body)), default=0))
    return ["**Reproduce locally**", "", f"{fence}sh", body, fence, ""]


def _accept_lines(result: GateResult, *, ingested: bool) -> list[str]:
    against = escape(result.against)
    base = _shell(result.against, "BASE")
    lines = [
        "**Accept, settle or silence**",
        "",
        f"- An intended change: after merging, accept it with `perfgate baseline reset NAME "
        f"--at COMMIT --branch {base} --reason WHY` (the window restarts at that commit); "
        f"otherwise a level that holds for 5 runs on {against} becomes a change point and "
        "the window restarts there by itself.",
        "- A known regression someone is on: `perfgate alerts list`, then "
        "`perfgate alerts ack ID --reason WHY` (or `alerts ignore`).",
        (
            "- Inconclusive: the job run again with more repeats (processes) in its file, "
            "ingested on this branch, tells more; then gate again."
            if ingested
            else "- Inconclusive: `perfgate run --confirm 5 --benchmark NAME` on this branch "
            "adds 5 repeats in fresh processes and judges once more (a regression stands); "
            "then gate again."
        ),
        f"- Too noisy to gate: `perfgate noise --branch {base}` lists metrics that cannot see "
        "their minimum effect; raise `min_effect_pct` under `[metrics.NAME]` or add repeats.",
        "- Fewer comments: `--comment-mode change` or `--comment-mode regression`.",
    ]
    if Verdict.OVER_BUDGET in deciding_verdicts(result.comparisons):
        lines.append(
            "- Over budget: the limit is the suite's `[budgets]` (reviewed like code); a "
            "breach fails the gate unless `fail_on` leaves out `over_budget`."
        )
    return [*lines, ""]


def _safe_url(url: str) -> bool:
    """An http(s) URL that cannot break out of a Markdown link."""
    return url.startswith(("https://", "http://")) and not re.search(r"[\s()<>\[\]\"'`]", url)


def _footer(ctx: ReportContext) -> str:
    parts = [f"perfgate {__version__}", "trend: the baseline window, oldest first, then this run"]
    if ctx.job_url.startswith("https://") and not re.search(r"[\s()<>\[\]]", ctx.job_url):
        parts.append(f"[CI job]({ctx.job_url})")
    if _safe_url(ctx.report_url):  # a user:password@ or a ?token= in it is not published
        parts.append(f"[history report]({shown_url(ctx.report_url)})")
    return "<sub>" + " · ".join(parts) + "</sub>"


def _compose(
    result: GateResult,
    ctx: ReportContext,
    rows: Sequence[Comparison],
    dropped: Sequence[Comparison],
    *,
    details: bool = True,
) -> str:
    head = escape(result.branch)
    if ctx.commit:
        head += f" @ {escape(ctx.commit[:7])}"
    gate = "failed" if ctx.failed else "passed"
    fails_on = ", ".join(escape(v) for v in ctx.fail_on)
    lines = [
        marker(ctx.project, ctx.suite, ctx.testbed),
        f"### {verdict_line(result, ctx)}",
        "",
        f"**{head}** · gate **{gate}** (fails on: {fails_on}) · project {escape(ctx.project)}"
        + (f" · testbed {escape(ctx.testbed)}" if ctx.testbed else ""),
        "",
        *_budget_lines(result),
    ]
    if rows:
        lines += [*_table(rows, ctx), ""]
    if dropped:
        lines += [_not_shown(dropped), ""]
    for note in result.notes:
        lines += [f"ℹ️ {escape(note, 500)}", ""]
    why = _why(result)
    if why:
        lines += [*why, ""]
    if details:
        lines += [
            "<details><summary>Details: environment, baseline, how to reproduce</summary>",
            "",
            *_environment_lines(ctx),
            *_window_lines(result),
            *_reproduce_lines(result, ctx),
            *_accept_lines(result, ingested=ctx.ingested),
            "</details>",
            "",
        ]
    lines.append(_footer(ctx))
    return "\n".join(lines) + "\n"


def render_comment(result: GateResult, ctx: ReportContext, *, max_chars: int | None = None) -> str:
    """The whole comment, at most ``max_chars`` characters (the forge's limit; None: none).

    The budgets come first and are never cut. When the comment is too long the least important
    rows (the end of :func:`_row_order`) are left out and counted; if that is not enough, the
    details instead."""
    rows = sorted((c for c in result.comparisons if not is_budget(c)), key=_row_order)
    if max_chars is None:
        return _compose(result, ctx, rows, (), details=True)
    for details in (True, False):

        def fits(dropped: int, details: bool = details) -> bool:
            keep = len(rows) - dropped
            return (
                len(_compose(result, ctx, rows[:keep], rows[keep:], details=details)) <= max_chars
            )

        if fits(0):
            return _compose(result, ctx, rows, (), details=details)
        if fits(len(rows)):  # then the fewest dropped rows that fit, by bisection
            keep = len(rows) - 1 - bisect.bisect_left(range(1, len(rows)), True, key=fits)
            return _compose(result, ctx, rows[:keep], rows[keep:], details=details)
    short = _compose(result, ctx, [], rows, details=False)
    note = "\n\n*Report cut to fit the comment size limit; `perfgate gate --json` has it all.*\n"
    cut = short[: max(0, max_chars - len(note))]
    return cut[: cut.rfind("\n") + 1 or len(cut)].rstrip("\n") + note


def status_description(result: GateResult) -> str:
    """A commit status line (plain text, at most 140 characters)."""
    text = f"{_counts(result)} vs {plain(result.against)}"
    return text if len(text) <= 140 else text[:139] + "…"


def plain(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """``text`` for a place that is not Markdown (a title, a status): one line, no control
    characters, no mentions or references."""
    flat = " ".join(_INVISIBLE.sub(" ", text).split())[:limit]
    return _REFERENCE.sub(lambda m: m.group(1) + ZWJ, flat)


# --- the nightly tracking issue -------------------------------------------------------------

ALERT_LABEL = "perfgate"
MAX_ALERT_ROWS = 500
MAX_REPORTED_KEYS = 2000
_ROWS_START = "<!-- perfgate:rows -->"
_ROWS_END = "<!-- /perfgate:rows -->"
_REPORTED = re.compile(r"<!-- perfgate:reported ([0-9a-f ]*) -->")
_ALERT_HEADER = (
    "| benchmark | metric | commits | before | after | change | verdict | confidence | runs |",
    "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: |",
)


def alert_marker(project: str) -> str:
    """The hidden line that identifies a project's tracking issue."""
    return f"<!-- perfgate:alerts project={_enc(project)} -->"


def alert_title(project: str, branch: str) -> str:
    return f"perfgate: performance change points on {plain(branch)} ({plain(project)})"


def change_key(change: DetectedChange) -> str:
    """What identifies a change point across nightly analyses (16 hex digits): its series
    (benchmark, metric, environment) and the first run after it."""
    raw = "\x1f".join(
        [change.benchmark, change.metric, change.fingerprint_key, change.first_run_after]
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def reported_keys(body: str) -> list[str]:
    """The change-point keys a tracking issue's body says were already reported."""
    match = _REPORTED.search(body)
    return match.group(1).split() if match else []


MAX_DRIFTS_NAMED = 3
"""Drifts an alert's one-line summary names; the issue lists them all."""


def alert_summary(changes: Sequence[DetectedChange], *, new: bool = False) -> str:
    """What an analysis found, by kind: '2 change point(s)', '1 drift (mlp step_time_ms:
    main is 8.1% slower than 160 runs ago)', or both; each kind called ``new`` if asked."""
    steps = sum(1 for c in changes if c.drift is None)
    drifts = [c for c in changes if c.drift is not None]
    fresh = "new " if new else ""
    parts = [f"{steps} {fresh}change point(s)"] if steps or not drifts else []
    if drifts:
        named = "; ".join(
            f"{c.benchmark} {c.metric}: {drift_headline(c)}" for c in drifts[:MAX_DRIFTS_NAMED]
        )
        more = len(drifts) - MAX_DRIFTS_NAMED
        named += f"; {more} more" if more > 0 else ""
        parts.append(f"{plural(len(drifts), fresh + 'drift')} ({named})")
    return " and ".join(parts)


def _alert_row(c: DetectedChange) -> str:
    commits = f"{escape(c.commit_before[:8] or '?')}..{escape(c.commit_after[:8] or '?')}"
    drift = f" (drift: {escape(drift_headline(c))})" if c.drift else ""
    return (
        f"| {escape(c.benchmark)} | {escape(c.metric)} | {commits} | "
        f"{format_value(c.point.before, c.unit)} | {format_value(c.point.after, c.unit)} | "
        f"{fixed(c.point.change_pct, '+.1f')}% | {_VERDICTS[c.verdict][0]}{drift} | "
        f"{c.point.confidence:.3f} | {c.runs_in_series} |"
    )


def _old_rows(body: str) -> list[str]:
    start, end = body.find(_ROWS_START), body.find(_ROWS_END)
    if start < 0 or end < start:
        return []
    lines = body[start + len(_ROWS_START) : end].splitlines()
    return [x for x in lines if x.startswith("| ") and x not in _ALERT_HEADER]


def render_alert_issue(
    project: str, branch: str, new: Sequence[DetectedChange], old_body: str = ""
) -> str:
    """The tracking issue's body: every change point reported so far (newest first), with
    their keys in a hidden list so a later analysis reports only new ones."""
    keys = list(dict.fromkeys([*reported_keys(old_body), *(change_key(c) for c in new)]))
    rows = [*(_alert_row(c) for c in new), *_old_rows(old_body)][:MAX_ALERT_ROWS]
    lines = [
        alert_marker(project),
        f"<!-- perfgate:reported {' '.join(keys[-MAX_REPORTED_KEYS:])} -->",
        f"## perfgate: performance change points on {escape(branch)}",
        "",
        f"Found by the nightly `perfgate history analyze --alert` in project "
        f"{escape(project)}, newest first. Each change lies in the commit range shown: after "
        "the first commit, up to and including the second — an estimate of *where*, not proof "
        "of *which* commit. A drift (a creeping change no single run shows) compares the "
        "newest runs with those a long horizon ago; its commits are the runs it moved over. "
        "A change is reported once; this list is updated in place.",
        "",
        _ROWS_START,
        *_ALERT_HEADER,
        *rows,
        _ROWS_END,
        "",
        f"<sub>perfgate {__version__}</sub>",
    ]
    return "\n".join(lines) + "\n"


def render_alert_comment(branch: str, new: Sequence[DetectedChange]) -> str:
    """A short comment on the tracking issue naming the change points found this time."""
    steps = sum(1 for c in new if c.drift is None)
    found = [
        plural(n, f"new {word}")
        for n, word in ((steps, "change point"), (len(new) - steps, "drift"))
        if n
    ]
    head = f"**perfgate**: {' and '.join(found) or '0 new change points'} on {escape(branch)}"
    return "\n".join([head, "", *_ALERT_HEADER, *(_alert_row(c) for c in new)]) + "\n"
