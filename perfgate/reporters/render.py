"""Pure renderers of a GateResult and of history: terminal text and versioned JSON."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from perfgate import __version__
from perfgate.metrics import CATALOGUE, is_time
from perfgate.models import (
    Advice,
    Attribution,
    ChangePoint,
    Comparison,
    Direction,
    Drift,
    Finding,
    Fingerprint,
    GateResult,
    IngestResult,
    OpDelta,
    OpStat,
    ProfileSummary,
    RunPoint,
    RunRecord,
    Severity,
    Verdict,
    WorkChange,
)
from perfgate.serial import to_dict
from perfgate.stats import decide
from perfgate.stats.decide import fixed

if TYPE_CHECKING:
    from perfgate.models import AcrossReport, DetectedChange, NoiseRow

TOP_OP_TYPES = 10

FORMAT_VERSION = 1

_MARK = {v: v.value.replace("_", " ") for v in Verdict}
_MARK.update({v: _MARK[v].upper() for v in (Verdict.REGRESSION, Verdict.OVER_BUDGET)})


def byte_unit(size: float) -> tuple[float, str]:
    """The binary unit a size in bytes reads best in: its divisor and name (GiB to B)."""
    units = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))
    return next(((float(d), name) for d, name in units if abs(size) >= d), (1.0, "B"))


def plural(n: int, word: str) -> str:
    """``1 run``, ``2 runs``."""
    return f"{n} {word}{'s' if n != 1 else ''}"


def format_value(value: float | None, unit: str) -> str:
    """A metric value rounded for people, with its unit (none for a count or a unitless
    value: ``44``, ``1.318``)."""
    if value is None:
        return "-"
    if unit == "%":
        return f"{value:.3g}%"
    if unit == "bytes":
        scale, name = byte_unit(value)
        return f"{fixed(value / scale, '.1f')} {name}" if scale > 1 else f"{value:.0f} B"
    if unit == "ms":
        return f"{value:.0f} ms" if 100 <= abs(value) < 1e9 else f"{value:.3g} ms"
    if is_time(unit):
        return f"{value:.4g} {unit}"
    if unit == "1/s":
        return f"{fixed(value, ',.0f')}/s" if abs(value) >= 1000 else f"{value:.4g}/s"
    return f"{value:.4g}" if unit in ("", "count") else f"{value:.4g} {unit}"


def metric_tags(c: Comparison) -> str:
    """What a report adds to a comparison's metric name: `` (A/B)`` for a paired one,
    `` (shown, not deciding)`` for one only shown (a wall time where the CPU time decides)."""
    return (" (A/B)" if c.method == "paired" else "") + (
        "" if c.decides else " (shown, not deciding)"
    )


REPORT_WIDTH = 100
"""The columns the gate's terminal report fits in (longer lines wrap, names are cut)."""

UNBOUNDED_PCT = 1000.0
"""An interval end farther out than this (in %), or none, or an infinite one, is shown as
unbounded (``+∞``, "more than 10× slower"): with few runs the t quantile makes it
astronomically large, and its digits mean nothing."""


def _bounded(x: float | None) -> float | None:
    """``x`` when it is a number worth printing as an interval end, else None (unbounded)."""
    return None if x is None or not math.isfinite(x) or abs(x) > UNBOUNDED_PCT else x


def _end(x: float | None, side: float) -> str:
    """An interval end for the compact notation: ``+13.6``, or ``+∞`` / ``-∞`` (``side``:
    the sign an unbounded end takes)."""
    b = _bounded(x)
    if b is None:
        return "+∞" if (x if x is not None and not math.isnan(x) else side) > 0 else "-∞"
    return f"{b:+.1f}"


def interval_label(rows: Iterable[Comparison]) -> str:
    """What the intervals of ``rows`` are: ``99% CI``, ``99-99.75% CI`` where levels differ
    (:attr:`Comparison.ci_level`: a history comparison's is false-coverage adjusted, a pair's
    95%), ``CI`` where none says."""
    levels = sorted({c.ci_level for c in rows if c.ci_level is not None})
    if not levels:
        return "CI"
    shown = [f"{level * 100:.4g}" for level in (levels[0], levels[-1])]
    return f"{shown[0]}% CI" if shown[0] == shown[1] else f"{shown[0]}-{shown[1]}% CI"


def format_change(c: Comparison) -> str:
    """The change and its interval: ``+9.8% [+6.1, +13.6]``; an absurd or missing end of an
    interval that has one finite end is ``+∞`` / ``-∞``."""
    if c.change_pct is None:
        return "-"
    if not math.isfinite(c.change_pct):
        return "+∞" if c.change_pct > 0 else "-∞"
    change = f"{fixed(c.change_pct, '+.1f')}%"
    if c.ci_low_pct is None and c.ci_high_pct is None:
        return change
    return f"{change} [{_end(c.ci_low_pct, -1.0)}, {_end(c.ci_high_pct, 1.0)}]"


def budget_counts(result: GateResult) -> tuple[int, int]:
    """How many of the gate's budgets were breached and how many kept."""
    judged = [c for c in decide.deciding(result.comparisons) if decide.is_budget(c)]
    over = sum(1 for c in judged if c.verdict is Verdict.OVER_BUDGET)
    return over, len(judged) - over


def headline(result: GateResult) -> str:
    """One line: what the gate found, e.g. '1 regression, 2 unchanged in 1 benchmark'; the
    budgets first and apart ('1 over budget, 2 within budget; 3 unchanged in ...')."""
    parts = []
    rest = [c for c in result.comparisons if not decide.is_budget(c)]
    for verdict, n in decide.verdict_counts(rest).items():
        if n:
            word = _MARK[verdict].lower()
            countable = verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
            parts.append(plural(n, word) if countable else f"{n} {word}")
    benchmarks = plural(len({c.benchmark for c in result.comparisons}), "benchmark")
    found = ", ".join(parts) or "nothing compared"
    over, kept = budget_counts(result)
    budgets = [f"{over} over budget"] * bool(over) + [f"{kept} within budget"] * bool(kept)
    if budgets:
        found = f"{', '.join(budgets)}; {found}"
    return f"{found} in {benchmarks} — {result.branch} vs {result.against}"


def display_width(text: str) -> int:
    """The columns ``text`` takes in a terminal: two for each CJK ideograph or fullwidth
    character, none for a combining mark. ``len`` counts code points, so a benchmark named
    训练_基准 (5 code points, 9 columns) pushed every column after it out of line."""
    if text.isascii() and text.isprintable():
        return len(text)  # the usual case, without wcwidth's tables (8 ms to import)
    from wcwidth import wcswidth, wcwidth

    width = wcswidth(text)
    if width >= 0:
        return int(width)
    # wcswidth gives up (-1) on a control character; count it as nothing, the rest as usual.
    return sum(max(int(wcwidth(ch)), 0) for ch in text)


def pad(text: str, width: int) -> str:
    """``str.ljust`` by terminal columns (:func:`display_width`)."""
    return text + " " * max(width - display_width(text), 0)


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows (the first is the header) as aligned text columns, two spaces apart, with a rule
    under the header; columns are as wide as their widest cell on screen."""
    widths = [max(display_width(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(pad(cell, widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    return [lines[0], "  ".join("-" * w for w in widths), *lines[1:]]


def budget_lines(result: GateResult) -> list[str]:
    """The budgets block of the terminal report: one line per budget judged, breaches
    first, each in its own words ('OVER BUDGET  svc  latency_p99_ms 140.0 ms is over its
    budget <= 100 ms (by 40.0%)'); a long name is cut (:func:`short_name`)."""
    judged = [c for c in result.comparisons if decide.is_budget(c)]
    if not judged:
        return []
    judged.sort(key=lambda c: (c.verdict is not Verdict.OVER_BUDGET, c.benchmark, c.metric))
    marks = ["OVER BUDGET" if c.verdict is Verdict.OVER_BUDGET else "within" for c in judged]
    names = [short_name(c.benchmark, BENCHMARK_CELL) for c in judged]
    w, v = max(map(display_width, marks)), max(map(display_width, names))
    rows = zip(marks, names, judged, strict=True)
    return ["budgets:", *(f"  {pad(m, w)}  {pad(n, v)}  {c.reason}" for m, n, c in rows)]


BENCHMARK_CELL = 40
"""Columns a benchmark's name takes at most in the terminal report (cut with an ellipsis)."""

METRIC_CELL = 40
"""Columns a metric's name takes at most in the terminal report (its tags beside it)."""


def _pct_words(pct: float) -> str:
    """A size in % for people, without its sign: ``9.8%``, ``14%``."""
    size = abs(pct)
    return f"{size:.1f}%" if size < 10 else f"{size:.0f}%"


def _moved(c: Comparison, pct: float) -> str:
    """A change in plain words: ``9.8% slower``, ``14% higher``, ``more than 10× slower``."""
    up = pct > 0
    word = ("slower" if up else "faster") if is_time(c.unit) else ("higher" if up else "lower")
    if not math.isfinite(pct) or abs(pct) > UNBOUNDED_PCT:
        return f"more than 10× {word}"
    if abs(pct) < 0.05:
        return "no change seen"
    return f"{_pct_words(pct)} {word}"


def _interval_words(c: Comparison) -> str:
    """``interval +6.1% to +13.6%`` (an absurd end unbounded: ``to +∞``), or ""."""
    if c.ci_low_pct is None and c.ci_high_pct is None:
        return ""
    ends = (_end(c.ci_low_pct, -1.0), _end(c.ci_high_pct, 1.0))
    low, high = (end + "%" * ("∞" not in end) for end in ends)
    return f"interval {low} to {high}"


def _noise_words(c: Comparison) -> str:
    """What the noise lets this comparison see, from its smallest detectable change."""
    if c.mde_pct is None:
        if c.method == "paired":
            if c.p_value is None:
                return "one pair cannot show its own noise"
            return "too few pairs to show a change of any size"
        return "the noise here is not known"
    if not math.isfinite(c.mde_pct) or c.mde_pct > UNBOUNDED_PCT:
        return "this runner's noise hides a 10× change"
    return f"this runner's noise allows ±{_pct_words(c.mde_pct)}"


_MORE_PAIRS = re.compile(r"about (\d+) more pairs?\b")


def _more_words(c: Comparison) -> str:
    """What would settle an inconclusive comparison: more A/B pairs (how many, where the
    reason says) or more repeats."""
    if c.method != "paired":
        return "more repeats would tell"
    found = _MORE_PAIRS.search(c.reason)
    if found:
        return f"{plural(int(found.group(1)), 'more pair')} would tell"
    if "disagree too much" in c.reason:
        return "the pairs disagree too much for more to tell"
    return "more pairs would tell"


def plain_words(c: Comparison) -> str:
    """One comparison's verdict in plain words, from its fields: ``9.8% slower: regression
    (interval +6.1% to +13.6%)``, ``14% slower, not sure yet: this runner's noise allows
    ±21%; 40 more pairs would tell``, ``no change beyond ±3.2%``. No p-values, no method:
    those are for ``verbose`` (:func:`render_text`) and the JSON."""
    v = c.verdict
    if v is Verdict.NO_BASELINE:
        return f"not judged: {c.reason}"
    if v is Verdict.INCOMPARABLE:
        return f"not compared: {c.reason}"
    if decide.is_budget(c):
        return c.reason
    if c.change_pct is None:
        return f"{_MARK[v]}: {c.reason}"
    current, baseline = (format_value(x, c.unit) for x in (c.current_centre, c.baseline_centre))
    values = f"{current} against {baseline}"
    tolerance = "" if c.min_effect_pct is None else f", tolerance {c.min_effect_pct:g}%"
    if c.kind == "numerics":
        base, cur = c.baseline_centre, c.current_centre
        said = f"{cur:.6g} against {base:.6g}" if base is not None and cur is not None else values
        if v is Verdict.UNCHANGED:
            return f"the numerics held ({said}{tolerance})"
        return f"the numerics moved {fixed(c.change_pct, '+.2f')}%: {_MARK[v]} ({said}{tolerance})"
    if c.p_value is None and v is not Verdict.INCONCLUSIVE:
        # deterministic: no statistics, any change beyond the tolerance counts
        if v is Verdict.UNCHANGED:
            if c.change_pct == 0:
                return f"no change ({current})"
            return f"no change beyond the tolerance ({values}{tolerance})"
        return f"{_moved(c, c.change_pct)}: {_MARK[v]} ({values}{tolerance})"
    interval = _interval_words(c)
    if v in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
        said = f"{_moved(c, c.change_pct)}: {_MARK[v]}"
        return f"{said} ({interval})" if interval else said
    if v is Verdict.UNCHANGED:
        low, high = _bounded(c.ci_low_pct), _bounded(c.ci_high_pct)
        if low is None or high is None:
            if c.mde_pct is not None and c.mde_pct <= UNBOUNDED_PCT:
                return f"no change seen; a change of ±{_pct_words(c.mde_pct)} would have shown"
            return "no change seen"
        widest = max(abs(low), abs(high))
        limit = c.min_effect_pct if c.min_effect_pct is not None else widest
        if widest <= max(limit, 2.0 * min(abs(low), abs(high))):
            return f"no change beyond ±{_pct_words(widest)}"
        worse = high if c.direction.worse(1.0) else low
        if c.direction.worse(worse):
            return f"at most {_moved(c, worse)} ({interval})"
        return f"no worse ({interval})"
    # inconclusive
    return f"{_moved(c, c.change_pct)}, not sure yet: {_noise_words(c)}; {_more_words(c)}"


def _statistics_lines(c: Comparison) -> list[str]:
    """What ``verbose`` adds under a comparison: the test's numbers, then its reason whole."""
    parts = []
    if c.p_adjusted is not None:
        raw = "" if c.p_value is None else f" (raw {c.p_value:.2g})"
        parts.append(f"p={c.p_adjusted:.2g} after FDR adjustment{raw}")
    elif c.p_value is not None:
        parts.append(f"p={c.p_value:.2g}")
    if c.alpha is not None:
        parts.append(f"alpha {c.alpha:g}")
    if c.min_effect_pct is not None:
        parts.append(f"minimum effect {c.min_effect_pct:.3g}%")
    if c.mde_pct is not None:
        parts.append(f"detectable {decide.size_text(c.mde_pct)} at {decide.POWER:.0%} power")
    parts.append(f"method {c.method}" + (f", kind {c.kind}" if c.kind else ""))
    lines = ["; ".join(parts), f"reason: {c.reason}"]
    if c.baseline_run_ids:
        span = _commit_span([x[:8] for x in c.baseline_commits if x])
        lines.append(f"window: {plural(len(c.baseline_run_ids), 'run')}{span}")
    if c.fingerprint_differences:
        lines.append(f"environment differs: {'; '.join(c.fingerprint_differences)}")
    return lines


def _commit_span(commits: Sequence[str]) -> str:
    """``, commits a..b`` (``, commit a`` for one), or "" for none."""
    if not commits:
        return ""
    if commits[0] == commits[-1]:
        return f", commit {commits[0]}"
    return f", commits {commits[0]}..{commits[-1]}"


def _benchmark_head(name: str, compared: Sequence[Comparison], against: str) -> str:
    """A benchmark's line in the report: its name and what it was measured against."""
    shown = short_name(name, BENCHMARK_CELL)
    paired = [c for c in compared if c.method == "paired"]
    if paired:
        commit = next((x[:8] for c in paired for x in c.baseline_commits if x), "")
        return f"{shown} — A/B pairs against {against}" + (f" ({commit})" if commit else "")
    ids = max((c.baseline_run_ids for c in compared), key=len, default=())
    if not ids:
        return shown
    widest = next(c for c in compared if c.baseline_run_ids == ids)
    span = _commit_span([x[:8] for x in widest.baseline_commits if x])
    return f"{shown} — against {plural(len(ids), 'run')} of {against}{span}"


def _wrap(line: str, width: int = REPORT_WIDTH) -> list[str]:
    """``line`` cut at spaces into lines of at most ``width`` terminal columns, the
    continuation indented four more than the line; a word wider than a line is cut."""
    if display_width(line) <= width:
        return [line]
    indent = len(line) - len(line.lstrip(" "))
    hang = " " * (indent + 4)
    out: list[str] = []
    current = line[:indent]
    for word in line[indent:].split(" "):
        while True:
            lead = "" if current.strip() == "" else " "
            if display_width(current + lead + word) <= width:
                current += lead + word
                break
            if current.strip():
                out.append(current)
                current = hang
                continue
            # a word wider than the line: cut it where the line ends
            # nothing fits (a wide character in one column): take one
            head = _cut(word, width - display_width(current)) or word[0]
            out.append(current + head)
            current, word = hang, word[len(head) :]
            if not word:
                break
    if current.strip():
        out.append(current)
    return out


def render_text(result: GateResult, *, verbose: bool = False) -> str:
    """The terminal report, within :data:`REPORT_WIDTH` columns: the headline, the budgets,
    then per benchmark its comparisons, deciding ones first, in plain words (:func:`plain_words`).
    ``verbose`` adds each one's statistics and whole reason, as the JSON always has them."""
    budgets = budget_lines(result)
    compared = [c for c in result.comparisons if not decide.is_budget(c)]
    lines = [f"perfgate: {headline(result)}", ""]
    if budgets:
        lines += [*budgets, ""]
    deciding = {id(c) for c in decide.deciding(compared)}
    work: dict[str, list[WorkChange]] = {}
    for w in result.work_changes:
        work.setdefault(w.benchmark, []).append(w)
    for name in dict.fromkeys(c.benchmark for c in compared):
        mine = [c for c in compared if c.benchmark == name]
        mine.sort(key=lambda c: (id(c) not in deciding, decide.SEVERITY_ORDER.index(c.verdict)))
        lines.append(_benchmark_head(name, mine, result.against))
        for c in mine:
            head, said = f"  {short_name(c.metric, METRIC_CELL)}{metric_tags(c)}:", plain_words(c)
            if display_width(f"{head} {said}") > REPORT_WIDTH:  # the words on a line of their own
                lines += [head, f"      {said}"]
            else:
                lines.append(f"{head} {said}")
            statistical = c.p_value is not None or c.verdict is Verdict.INCONCLUSIVE
            if statistical and c.current_centre is not None and c.baseline_centre is not None:
                lines.append(
                    f"      {format_value(c.baseline_centre, c.unit)} -> "
                    f"{format_value(c.current_centre, c.unit)}, change {format_change(c)}"
                )
            if verbose:
                lines += [f"      {x}" for x in _statistics_lines(c)]
        lines += [f"  {work_text(w)}" for w in work.pop(name, [])]
        lines.append("")
    if not compared and not budgets:
        lines += ["nothing compared", ""]
    # work changes of a benchmark with no comparison shown (none today): still said
    for name, changes in work.items():
        lines += [f"{short_name(name, BENCHMARK_CELL)}: {work_text(w)}" for w in changes]
    if result.notes:
        lines += [*(f"note: {n}" for n in result.notes), ""]
    if result.attributions:
        lines += [*render_attribution_lines(result.attributions), ""]
    if result.findings:
        lines += render_findings_lines(result.findings)
        known = sum(1 for f in result.findings if f.known)
        if known:
            lines.append(f"({known} of these the base branch already had: not new here)")
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(part for line in lines for part in _wrap(line)) + "\n"


def render_findings_lines(findings: Sequence[Finding]) -> list[str]:
    """One block per finding: severity, source, rule and where; then message and advice."""
    lines = [f"findings ({len(findings)}):"]
    for f in findings:
        where = f" @ {f.location}" if f.location else ""
        lines.append(f"  [{f.severity.value}] {f.source}: {f.rule}{where}")
        if f.message:
            lines.append(f"      {f.message}")
        advice = " ".join(f.suggestion.split())
        if advice:
            lines.append(f"      suggestion: {short_name(advice, SUGGESTION_CELL)}")
    return lines


def gate_to_dict(result: GateResult, *, failed: bool) -> dict[str, Any]:
    """The versioned JSON of ``gate --json``: ``comparisons`` hold the budgets' (``kind``
    ``budget``, ``method`` ``budget``, with ``limit`` and ``budget``) first, and ``budgets``
    counts them (``judged``, ``over_budget``, ``within_budget``); ``summary`` counts every
    deciding comparison, budgets included; ``work_changed`` names, per benchmark, the
    operators whose calls per step changed (:func:`work_text` in ``text``)."""
    over, kept = budget_counts(result)
    return {
        "format_version": FORMAT_VERSION,
        "perfgate_version": __version__,
        "verdict": result.verdict.value,
        "failed": failed,
        "branch": result.branch,
        "against": result.against,
        "summary": {v.value: n for v, n in decide.verdict_counts(result.comparisons).items()},
        "budgets": {"judged": over + kept, "over_budget": over, "within_budget": kept},
        "comparisons": [c.to_dict() for c in result.comparisons],
        "findings": [f.to_dict() for f in result.findings],
        "attributions": [a.to_dict() for a in result.attributions],
        "work_changed": [{**w.to_dict(), "text": work_text(w)} for w in result.work_changes],
        "notes": list(result.notes),
    }


def render_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n"


def runs_to_dict(records: Sequence[RunRecord]) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "runs": [
            {
                **_run_head(r),
                "fingerprint": r.fingerprint.to_dict(),
                "started_at": r.started_at.isoformat(),
                "measurements": _measurements(r),
                "profile": None if r.profile is None else r.profile.to_dict(),
                "findings": [f.to_dict() for f in r.findings],
            }
            for r in records
        ],
    }


def render_runs_text(records: Sequence[RunRecord]) -> str:
    rows = [["run", "benchmark", "branch", "step time", "throughput", "peak memory"]]
    for r in records:
        ms = map(r.measurement, ("step_time_ms", "throughput_samples_per_s", "peak_memory_bytes"))
        cells = ["-" if m is None else format_value(m.summary.centre, m.unit) for m in ms]
        rows.append([r.id[:12], r.benchmark, r.git.branch, *cells])
    lines = _table(rows)
    for r in records:
        if r.findings:
            lines += ["", f"{r.benchmark}:", *render_findings_lines(r.findings)]
    return "\n".join(lines) + "\n"


_POINT_KEYS = ("run_id", "benchmark", "metric", "unit", "branch", "commit", "fingerprint_key")


def history_to_dict(points: Sequence[RunPoint]) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "points": [
            {
                **{k: getattr(p, k) for k in _POINT_KEYS},
                "started_at": p.started_at.isoformat(),
                "value": p.centre,
                "repeat_values": list(p.repeat_centres),
            }
            for p in points
        ],
    }


def render_history_text(points: Sequence[RunPoint]) -> str:
    if not points:
        return "no runs\n"
    rows = [["started (UTC)", "run", "benchmark", "branch", "commit", "value", "environment"]]
    for p in points:
        started = p.started_at.strftime("%Y-%m-%d %H:%M:%S")
        where = [p.run_id[:12], p.benchmark, p.branch, p.commit[:8]]
        rows.append([started, *where, format_value(p.centre, p.unit), p.fingerprint_key[:8]])
    return "\n".join(_table(rows)) + "\n"


def noise_to_dict(rows: Sequence[NoiseRow]) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "metrics": [{**to_dict(r), "too_noisy": r.too_noisy} for r in rows],
    }


def render_noise_text(rows: Sequence[NoiseRow]) -> str:
    table = [["benchmark", "metric", "runs", "detectable change", "minimum effect", "gate"]]
    for r in rows:
        mde = "-" if r.mde_pct is None else decide.size_text(r.mde_pct)
        effect = "-" if r.min_effect_pct is None else f"{r.min_effect_pct:g}%"
        status = "needs 3+ runs" if r.mde_pct is None else "TOO NOISY" if r.too_noisy else "ok"
        table.append([r.benchmark, r.metric, str(r.runs), mde, effect, status])
    noisy = sum(r.too_noisy for r in rows)
    judged = sum(r.mde_pct is not None for r in rows)
    if noisy:
        said = (
            f"{noisy} of {len(rows)} metrics would miss a change of twice their minimum "
            "effect (detectable change: caught with 80% power)"
        )
    elif judged:
        said = (
            f"each of the {judged} metrics with 3+ runs catches twice its minimum effect "
            "with 80% power"
        )
    else:
        said = "no metric has 3+ runs yet: how small a change each can detect is not known"
    return "\n".join([*_table(table), "", said]) + "\n"


_MOVED_KEYS = ("before", "after", "change_pct", "p_value", "confidence")


def _detected_head(c: DetectedChange, p: ChangePoint | Drift, **index: int) -> dict[str, Any]:
    """A detected change's series, ``index`` (a change point's), verdict and how it moved."""
    keys = ("benchmark", "metric", "unit", "branch", "fingerprint_key")
    return {
        **{k: getattr(c, k) for k in keys},
        **index,
        "runs_in_series": c.runs_in_series,
        "verdict": c.verdict.value,
        **{k: getattr(p, k) for k in _MOVED_KEYS},
    }


def changes_to_dict(changes: Sequence[DetectedChange]) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "change_points": [
            {
                **_detected_head(c, c.point, index=c.point.index),
                "last_run_before": c.last_run_before,
                "first_run_after": c.first_run_after,
                "commit_range": [c.commit_before, c.commit_after],
            }
            for c in changes
            if c.drift is None
        ],
        "drifts": [
            {
                **_detected_head(c, d),
                "horizon_runs": d.horizon_runs,
                "horizon_days": d.horizon_days,
                "baseline_runs": [d.baseline_first, d.baseline_last],
                "recent_runs": [d.recent_first, d.recent_last],
                "moved_over_runs": [d.start, d.end],
                "change_points_removed": d.steps_removed,
                "last_run_before": c.last_run_before,
                "alert_run": c.first_run_after,
                "commit_range": [c.commit_before, c.commit_after],
            }
            for c in changes
            if (d := c.drift) is not None
        ],
    }


def _commit_range(c: DetectedChange) -> str:
    return f"{c.commit_before[:8] or '?'}..{c.commit_after[:8] or '?'}"


def drift_headline(c: DetectedChange) -> str:
    """What a drift is, in words: 'main is 8.1% slower than 160 runs / 30 days ago'."""
    d = c.drift
    assert d is not None
    worse = c.direction.worse(d.change_pct)
    a_time = is_time(c.unit)
    word = ("slower" if worse else "faster") if a_time else ("worse" if worse else "better")
    ago = f"{d.horizon_runs} runs"
    if d.horizon_days is not None and d.horizon_days >= 1.0:
        ago += f" / {d.horizon_days:.0f} days"
    return f"{c.branch} is {fixed(abs(d.change_pct), '.1f')}% {word} than {ago} ago"


def _drift_line(c: DetectedChange) -> str:
    """'main is 8.1% slower than 160 runs / 30 days ago' and where, for one drift."""
    d = c.drift
    assert d is not None
    beyond = f", beyond {d.steps_removed} change point(s)" if d.steps_removed else ""
    return (
        f"{c.benchmark} {c.metric}: {drift_headline(c)} "
        f"({format_value(d.before, c.unit)} -> {format_value(d.after, c.unit)}{beyond}; "
        f"moved over runs {d.start}-{d.end}, commits {_commit_range(c)}; {c.verdict.value}, "
        f"confidence {d.confidence:.3f})"
    )


def render_changes_text(changes: Sequence[DetectedChange]) -> str:
    drifts = [_drift_line(c) for c in changes if c.drift is not None]
    changes = [c for c in changes if c.drift is None]
    tail = ["", "drifts (newest runs against a long horizon ago):", *drifts] if drifts else []
    if not changes:
        return "\n".join(["no change points", *tail]) + "\n"
    rows = [["benchmark", "metric", "commits", "before", "after", "change", "verdict", "conf."]]
    for c in changes:
        p = c.point
        moved = [format_value(p.before, c.unit), format_value(p.after, c.unit)]
        said = [f"{fixed(p.change_pct, '+.1f')}%", c.verdict.value, f"{p.confidence:.3f}"]
        rows.append([c.benchmark, c.metric, _commit_range(c), *moved, *said])
    note = (
        "a change lies in the commit range shown: after the first, up to and including the second"
    )
    return "\n".join([*_table(rows), "", note, *tail]) + "\n"


def _step_dict(profile: ProfileSummary) -> dict[str, float | None]:
    b = profile.breakdown
    if b is None:
        return {}
    return {
        "step_ms": b.step_ms,
        "computing_ms": b.compute_ms,
        "communication_not_overlapped_ms": b.communication_not_overlapped_ms,
        "communication_overlapped_ms": b.communication_overlapped_ms,
        "free_ms": b.free_ms,
        "bubble_ms": b.bubble_ms,
        "preparing_ms": b.preparing_ms,
        "data_loading_ms": b.data_loading_ms,
    }


NAME_CELL = 60
"""Widest op or kernel name a terminal table shows (the full name is in JSON and HTML)."""
SUGGESTION_CELL = 300
"""Longest suggestion a terminal finding shows (cut with an ellipsis; JSON has it whole)."""


def short_name(name: str, width: int = NAME_CELL) -> str:
    """``name`` cut to ``width`` terminal columns with an ellipsis (a CJK character takes two)."""
    return name if display_width(name) <= width else _cut(name, width - 1) + "…"


def _cut(text: str, width: int) -> str:
    """The longest start of ``text`` within ``width`` terminal columns."""
    out = ""
    for ch in text:
        if display_width(out + ch) > width:
            break
        out += ch
    return out


def _top_types(profile: ProfileSummary, n: int = TOP_OP_TYPES) -> list[OpStat]:
    """The op types that took most device time (Ascend's op types, where self and total time
    are one), else the ops ranked by self time: a torch trace's CPU ops nest, so inclusive
    time would count one piece of work once per level."""
    if profile.op_types:
        return sorted(profile.op_types, key=lambda o: -o.total_time_ms_per_step)[:n]
    return sorted(profile.ops, key=lambda o: -o.self_time_ms_per_step)[:n]


def _op_type_dict(o: OpStat) -> dict[str, Any]:
    return {
        "op_type": o.name,
        "core": o.core,
        "calls_per_step": o.calls_per_step,
        "self_time_ms": o.self_time_ms_per_step,
        "total_time_ms": o.total_time_ms_per_step,
    }


def _gated_step(result: IngestResult) -> tuple[float, str] | None:
    """The step time the gate compares for this run, and how it was summarised.

    That is the ``step_time_ms`` measurement's centre (the median of the profiled steps, of
    the slowest rank step by step for a multi-rank job), not the breakdown's mean: a mean
    over steps that include a slow first step reads well below what is gated.
    """
    m = result.record.measurement("step_time_ms")
    if m is None or result.profiled is None:
        return None
    n = m.summary.n
    if result.step_times_path is not None:
        how = f"median of {n} steps of {result.step_times_path.name}, timed apart"
    elif n > 1:
        how = f"median of {n} profiled steps"
        if sum(1 for p in result.profiled.ranks if p.step_times_ms) > 1:
            how += ", slowest rank per step"
    else:
        steps = result.profiled.slowest.steps
        how = f"mean of {steps} profiled steps" if steps > 1 else "1 profiled step"
    return m.summary.centre, how


def _measurements(r: RunRecord) -> dict[str, Any]:
    return {m.metric: {"unit": m.unit, **m.summary.to_dict()} for m in r.measurements}


def _run_head(r: RunRecord) -> dict[str, Any]:
    return {
        "id": r.id,
        "project": r.project,
        "benchmark": r.benchmark,
        "branch": r.git.branch,
        "commit": r.git.commit,
        "fingerprint_key": r.fingerprint.key(),
    }


def _result_run_dict(result: IngestResult) -> dict[str, Any]:
    """One run recorded from a result file: how it was measured, its measurements (with
    their samples: a harness's rounds or values, one list per repeat), findings and
    reference rows."""
    r = result.record
    return {
        "kind": r.spec.kind,
        "timing_method": r.fingerprint.timing_method,
        "params": dict(r.fingerprint.params),
        "measurements": {
            m.metric: {
                "unit": m.unit,
                "direction": m.direction.value,
                **m.summary.to_dict(),
                "repeats": [list(rep) for rep in m.repeats],
            }
            for m in r.measurements
        },
        "findings": [f.to_dict() for f in result.findings],
        "reference": _reference_dict(result),
    }


def _reference_dict(result: IngestResult) -> dict[str, Any] | None:
    """The run beside the official figures, when ``--reference`` was given."""
    if result.reference_path is None:
        return None
    from perfgate.reporters.reference import reference_to_dict

    return reference_to_dict(result.reference, result.reference_path)


def ingest_to_dict(result: IngestResult) -> dict[str, Any]:
    """The versioned JSON of ``perfgate ingest``: the run, the slowest rank's step and top op
    types, every rank, the cluster view, the advisor's findings, and what was missing; for a
    result file (ais_bench, pytest-benchmark, pyperf, asv, a metrics file) its first run at
    the top and ``runs``, every run it recorded (one per benchmark in the file), each with
    its measurements and samples, and what was missing. With ``--reference``, each run beside
    the official figures."""
    r = result.record
    head: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "perfgate_version": __version__,
        "run": _run_head(r),
    }
    if result.profiled is None:
        return {
            **head,
            "format": result.format,
            "path": None if result.path is None else str(result.path),
            **_result_run_dict(result),
            "runs": [
                {"run": _run_head(one.record), **_result_run_dict(one)} for one in result.runs
            ],
            "notes": list(result.notes),
        }
    slowest = result.profiled.slowest
    return {
        **head,
        "format": result.profiled.format,
        "source": slowest.source,
        "path": str(result.profiled.path),
        "rank": slowest.rank,
        "steps": slowest.steps,
        "step": _step_dict(slowest),
        "step_time": None
        if (gated := _gated_step(result)) is None
        else {"ms": gated[0], "summary": gated[1]},
        "top_op_types": [_op_type_dict(o) for o in _top_types(slowest)],
        "communication": None if slowest.communication is None else slowest.communication.to_dict(),
        "utilisation": dict(slowest.utilisation),
        "measurements": _measurements(r),
        "ranks": [
            {
                "rank": p.rank,
                "steps": p.steps,
                "step": _step_dict(p),
                "utilisation": dict(p.utilisation),
                "notes": list(p.notes),
            }
            for p in result.profiled.ranks
        ],
        "cluster": None if result.profiled.cluster is None else result.profiled.cluster.to_dict(),
        "collection": dict(slowest.collection),
        "findings": [f.to_dict() for f in result.findings],
        "advisor": {
            "tool": "msprof-analyze",
            "version": result.advisor_version,
            "problem": result.advisor_problem,
        }
        if result.profiled.format == "ascend"
        else None,
        "reference": _reference_dict(result),
        "notes": list(slowest.notes),
    }


def _utilisation_lines(ranks: Sequence[ProfileSummary]) -> list[str]:
    """The utilisation metrics of each rank that has any, one column per rank."""
    shown = [p for p in ranks if p.utilisation]
    if not shown:
        return []
    rows = [["utilisation", *(f"rank {p.rank}" if p.rank is not None else "" for p in shown)]]
    for metric, spec in CATALOGUE.items():
        if any(metric in p.utilisation for p in shown):
            suffix = "%" if spec.unit == "%" else f" {spec.unit}"
            values = [p.utilisation.get(metric) for p in shown]
            rows.append([metric, *("-" if v is None else f"{v:.1f}{suffix}" for v in values)])
    return [*_table(rows), ""]


def _figure(value: float) -> str:
    """A centre as a person reads it: a harness's sub-millisecond times keep four
    significant digits, larger figures their units and one decimal, and one beyond a
    billion its exponent (``1e+308``, not 309 digits)."""
    if abs(value) >= 1e9:
        return f"{value:.4g}"
    if abs(value) >= 100:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.3f}"
    return f"{value:.4g}"


def _render_results_text(result: IngestResult) -> str:
    """What ``ingest`` recorded from another harness's result file: one row per run and
    metric (its centre, the samples and repeats behind it), then findings, references and
    the file's notes."""
    runs = result.runs
    r = result.record
    commit = f" at {r.git.commit[:12]}" if r.git.commit else ""
    what = f"run {r.id} of {r.benchmark}" if len(runs) == 1 else f"{len(runs)} runs"
    lines = [
        f"perfgate: recorded {what} on {r.git.branch}{commit} from "
        f"{result.format.replace('_', '-')} results {result.path}",
        "",
    ]
    rows = [["benchmark", "metric", "value", "unit", "samples", "repeats", "run"]]
    for one in runs:
        for m in one.record.measurements:
            said = [m.metric, _figure(m.summary.centre), m.unit or "-", str(m.summary.n)]
            rows.append([one.record.benchmark, *said, str(len(m.repeats)), one.record.id[:12]])
    lines += [*_table(rows), ""]
    return _ingest_text(result, lines, result.notes)


def render_ingest_text(result: IngestResult) -> str:
    """What ``perfgate ingest`` recorded: the profile's step, top op types, cluster view and
    findings, or a result file's measurements; then the reference comparison, if asked."""
    if result.profiled is None and result.format != "ais_bench":
        return _render_results_text(result)
    r = result.record
    head = f"perfgate: recorded run {r.id} ({r.benchmark} on {r.git.branch}) from"
    if result.profiled is None:  # an ais_bench summary (no advisor, so no advisor_problem)
        said = f"{r.spec.kind}, {plural(r.spec.measured, 'inference')}"
        rows = [["metric", "value", "unit"]]
        rows += [[m.metric, f"{m.summary.centre:.3f}", m.unit] for m in r.measurements]
        lines = [f"{head} {result.format} summary, {said}", "", *_table(rows), ""]
        return _ingest_text(result, lines, result.notes)
    slowest = result.profiled.slowest
    rank = "" if slowest.rank is None else f", rank {slowest.rank}"
    lines = [f"{head} {result.profiled.format} profile, {slowest.steps} step(s){rank}", ""]
    gated = _gated_step(result)
    rows = [] if gated is None else [[f"step ({gated[1]})", f"{gated[0]:.3f}"]]
    for k, v in _step_dict(slowest).items():
        label = k.removesuffix("_ms")
        if v is not None and k == "step_ms" and rows:
            # the breakdown's rows below are means over the steps; so is this one, shown
            # where it differs from the gated step
            label = "mean step" if f"{v:.3f}" != rows[0][1] else ""
        if v is not None and label:
            rows.append([label, f"{v:.3f}"])
    if rows:
        lines += [*_table([["step", "ms"], *rows]), ""]
    lines += _utilisation_lines(result.profiled.ranks)
    top = _top_types(slowest)
    if top:
        rows = [["op type" if slowest.op_types else "op", "core", "calls/step", "self ms/step"]]
        rows += [
            [
                short_name(o.name),
                o.core or "-",
                f"{o.calls_per_step:g}",
                f"{o.self_time_ms_per_step:.3f}",
            ]
            for o in top
        ]
        lines += [*_table(rows), ""]
    cluster = result.profiled.cluster
    if cluster is not None:
        lines.append(
            f"cluster: {len(cluster.ranks)} ranks, slowest rank {cluster.slowest_rank}, "
            f"step spread {cluster.step_spread_pct:.1f}%"
        )
        lines += [f"  slow link: {link}" for link in cluster.slow_links]
        lines.append("")
    return _ingest_text(result, lines, slowest.notes)


def _ingest_text(result: IngestResult, lines: list[str], notes: Sequence[str]) -> str:
    """``lines`` and what follows them as text: each run's findings, the advisor's problem, each
    run's reference comparison (if asked), then ``notes``; a run is named when the file
    recorded several."""
    from perfgate.reporters.reference import render_reference_lines

    runs = result.runs
    for one in runs:
        if one.findings:
            head = [f"{one.record.benchmark}:"] * (len(runs) > 1)
            lines += [*head, *render_findings_lines(one.findings), ""]
    if result.advisor_problem:
        lines += [f"advisor: {result.advisor_problem}", ""]
    for one in runs:
        if one.reference_path is not None:
            head = [f"{one.record.benchmark}:"] * (len(runs) > 1)
            lines += [*head, *render_reference_lines(one.reference, one.reference_path), ""]
    return "\n".join([*lines, *(f"note: {n}" for n in notes)]).rstrip("\n") + "\n"


# --- advice and attribution ----------------------------------------------------------------


def op_delta_text(op: OpDelta, name: str | None = None) -> str:
    """The one attribution notation (README, "Attribution"): ``NAME +2.80 ms (+32%, 51% of
    the change)`` — the op's change in time per step, its own relative change (or ``new`` /
    ``vanished``) and its share of the metric's change. ``name`` replaces the op's name (an
    escaped one, for markdown)."""
    words = []
    if op.status != "changed":
        words.append(op.status)
    elif op.baseline_ms > 0:
        words.append(f"{fixed(op.delta_ms / op.baseline_ms * 100, '+.0f')}%")
    if op.share is not None:
        words.append(f"{fixed(op.share * 100, '.0f')}% of the change")
    detail = f" ({', '.join(words)})" if words else ""
    return f"{op.name if name is None else name} {fixed(op.delta_ms, '+.2f')} ms{detail}"


WORK_OPS_SAID = 3
"""Changed operators the "work changed" words name at most (the JSON lists them all)."""


def work_text(w: WorkChange) -> str:
    """The one "work changed" notation, beside a time verdict in every report: ``work
    changed: +1 aten::clone (new), -2 aten::add per step; 3 more ops changed`` — the
    operators whose calls per step changed against the baseline's profile, largest time
    first, ``(new)`` for one the baseline did not call, ``(gone)`` for one no longer
    called. Plain text: a renderer escapes it whole."""
    parts = []
    for op in w.ops[:WORK_OPS_SAID]:
        mark = {"new": " (new)", "vanished": " (gone)"}.get(op.status, "")
        calls = f"{op.delta_calls:+.2f}".rstrip("0").rstrip(".")  # +1, -2, +0.5
        parts.append(f"{calls} {op.name}{mark}")
    text = f"work changed: {', '.join(parts)} per step"
    more = len(w.ops) - len(parts) + w.more
    if more:
        text += f"; {plural(more, 'more op')} changed"
    return text


def render_attribution_lines(attributions: Sequence[Attribution]) -> list[str]:
    """``why`` block: per attributed metric, its change and the ops that explain it."""
    lines = [f"why ({plural(len(attributions), 'attributed change')}):"]
    for a in attributions:
        share = a.explained_share
        explained = (
            "" if share is None else f" — explains {fixed(share * 100, '.0f')}% of the change"
        )
        listed = (
            ", ".join(map(op_delta_text, a.ops)) or "no op moved beyond the baseline's own spread"
        )
        lines.append(
            f"  {a.benchmark} {a.metric} {fixed(a.delta_ms, '+.2f')} ms: {listed}{explained}"
        )
        for o in a.ops:
            if o.baseline_shapes and o.current_shapes:
                lines.append(
                    f"      {o.name} input shapes: {'; '.join(o.baseline_shapes)} -> "
                    f"{'; '.join(o.current_shapes)}"
                )
    return lines


_PROFILE_RATES = ("device_busy_fraction", "op_calls_per_step", "kernel_launches_per_step")


def advise_to_dict(advice: Advice) -> dict[str, Any]:
    """The versioned JSON of ``perfgate advise --json``.

    Keys:
        format_version, perfgate_version: the document's and the tool's versions.
        kind: ``profile`` (TARGET was a path) or ``run`` (a stored run id).
        target: the path or run id as given.
        run: for a run, ``{id, benchmark, branch, commit}``; null for a path.
        baseline_run_id: the base branch run whose findings are marked ``known`` (runs only).
        format: the profile format of a path (``ascend`` / ``torch_trace``), else "".
        source, rank, steps: of the judged profile (the slowest rank's of a multi-rank job).
        ranks: how many ranks the profile or run has.
        step: the step breakdown in ms per step (step, computing, communication not
            overlapped / overlapped, free, bubble, preparing, data loading; null when unknown).
        device_busy_fraction, op_calls_per_step, kernel_launches_per_step: as profiled.
        cluster: the ClusterView of a multi-rank profile (ranks, step_ms, slowest_rank, ...).
        findings: every finding, most severe first: ``{source, rule, severity, location,
            message, suggestion, evidence, impact_ms, known}``; ``source`` is ``perfgate``
            for perfgate's rules and ``msprof-analyze`` for the Ascend advisor's;
            ``impact_ms`` estimates the step time the suggestion could save (null when the
            rule cannot tell).
        summary: the number of findings per severity.
        advisor: for an Ascend path, ``{tool, ran, version, problem}`` of msprof-analyze;
            null otherwise.
        notes: what the profile could not provide, and why.
    """
    p = advice.profile
    run = advice.run
    counts = {s.value: sum(1 for f in advice.findings if f.severity is s) for s in Severity}
    return {
        "format_version": FORMAT_VERSION,
        "perfgate_version": __version__,
        "kind": advice.kind,
        "target": advice.target,
        "run": None
        if run is None
        else {
            "id": run.id,
            "benchmark": run.benchmark,
            "branch": run.git.branch,
            "commit": run.git.commit,
        },
        "baseline_run_id": advice.baseline_run_id,
        "format": advice.format,
        **{k: getattr(p, k, None) for k in ("source", "rank", "steps")},  # null without one
        "ranks": advice.ranks,
        "step": {} if p is None else _step_dict(p),
        **{k: getattr(p, k, None) for k in _PROFILE_RATES},
        "cluster": None if advice.cluster is None else advice.cluster.to_dict(),
        "summary": counts,
        "findings": [f.to_dict() for f in advice.findings],
        "advisor": {
            "tool": "msprof-analyze",
            "ran": advice.advisor_ran,
            "version": advice.advisor_version,
            "problem": advice.advisor_problem,
        }
        if advice.format == "ascend"
        else None,
        "notes": [] if p is None else list(p.notes),
    }


def render_advise_text(advice: Advice) -> str:
    """The terminal report of ``perfgate advise``: what was judged, then each finding."""
    p = advice.profile
    if advice.run is not None:
        r = advice.run
        head = f"perfgate: advice for run {r.id[:12]} ({r.benchmark} on {r.git.branch})"
    else:
        head = f"perfgate: advice for {advice.target} ({advice.format} profile)"
    lines = [head]
    if p is None:
        lines.append("the run has no profile: only its stored advisor findings are shown")
    else:
        rank = "" if p.rank is None else f", rank {p.rank}"
        ranks = f" of {advice.ranks} ranks" if advice.ranks > 1 else ""
        lines.append(f"{p.steps} profiled step(s){rank}{ranks}")
        # how the steps were counted, when not from step markers (no ProfilerStep# spans)
        lines += [f"note: {n}" for n in p.notes if n.startswith("steps:")]
        b = p.breakdown
        if b is not None:
            parts = [f"step {b.step_ms:.3g} ms"]
            for label, value in (
                ("computing", b.compute_ms),
                ("communication not overlapped", b.communication_not_overlapped_ms),
                ("free", b.free_ms),
            ):
                if value is not None and b.step_ms > 0:
                    parts.append(f"{label} {value / b.step_ms * 100:.0f}%")
            lines.append(", ".join(parts))
    lines.append("")
    if advice.findings:
        lines += render_findings_lines(advice.findings)
        known = sum(1 for f in advice.findings if f.known)
        if known:
            lines += ["", f"{known} finding(s) the base branch already had (known)"]
    elif p is None:
        lines.append("no findings stored with the run")
    else:
        lines.append("no findings: nothing in this profile crosses a rule's threshold")
    if advice.advisor_problem:
        lines += ["", f"advisor: {advice.advisor_problem}"]
    return "\n".join(lines).rstrip("\n") + "\n"


# --- compare --across ------------------------------------------------------------------------


def across_to_dict(report: AcrossReport) -> dict[str, Any]:
    """``perfgate compare --across A B --json``: versioned, numbers unrounded."""
    return {
        "format_version": FORMAT_VERSION,
        "perfgate_version": __version__,
        "kind": "across",
        "a": report.a,
        "b": report.b,
        "fingerprint_a": None if report.fingerprint_a is None else report.fingerprint_a.to_dict(),
        "fingerprint_b": None if report.fingerprint_b is None else report.fingerprint_b.to_dict(),
        "fingerprint_a_key": None if report.fingerprint_a is None else report.fingerprint_a.key(),
        "fingerprint_b_key": None if report.fingerprint_b is None else report.fingerprint_b.key(),
        "differences": list(report.differences),
        "benchmarks": [
            {
                "benchmark": b.benchmark,
                "run_a": b.run_a,
                "run_b": b.run_b,
                "metrics": [
                    {**to_dict(m), "ratio": m.ratio, "better": m.better} for m in b.metrics
                ],
                "top_ops_a": [to_dict(o) for o in b.top_ops_a],
                "top_ops_b": [to_dict(o) for o in b.top_ops_b],
            }
            for b in report.benchmarks
        ],
        "only_a": list(report.only_a),
        "only_b": list(report.only_b),
    }


def _side(fp: Fingerprint | None) -> str:
    if fp is None:
        return "-"
    count = f"{fp.device_count}x " if fp.device_count > 1 else ""
    return f"{count}{fp.device_kind} {fp.device_model} [{fp.key()}]"


def render_across_text(report: AcrossReport) -> str:
    """The cross-device report for a terminal: ratios B / A per metric, top ops per side."""
    lines = [
        f"perfgate: {report.a} (A) against {report.b} (B) — a report, not a gate",
        f"A: {_side(report.fingerprint_a)}",
        f"B: {_side(report.fingerprint_b)}",
    ]
    if report.differences:
        lines.append(f"differs: {'; '.join(report.differences)}")
    for b in report.benchmarks:
        lines += ["", f"{b.benchmark}  (A run {b.run_a[:12]}, B run {b.run_b[:12]})"]
        rows = [["metric", "A", "B", "B / A", "better"]]
        for m in b.metrics:
            ratio = "-" if m.ratio is None else f"{m.ratio:.3g}x"
            better = {"a": "A", "b": "B", "same": "="}[m.better]
            rows.append(
                [m.metric, format_value(m.a, m.unit), format_value(m.b, m.unit), ratio, better]
            )
        lines += _table(rows)
        for label, ops in (("A", b.top_ops_a), ("B", b.top_ops_b)):
            if not ops:
                continue
            lines += ["", f"top ops on {label} (self time per step; the other side by name)"]
            op_rows = [
                [short_name(o.name), format_value(o.a_ms, "ms"), format_value(o.b_ms, "ms")]
                for o in ops
            ]
            lines += _table([["op", "A", "B"], *op_rows])
    if report.only_a:
        lines += ["", f"only on A: {', '.join(report.only_a)}"]
    if report.only_b:
        lines += ["", f"only on B: {', '.join(report.only_b)}"]
    if not report.benchmarks:
        lines += ["", "no benchmark has a run on both sides"]
    return "\n".join(lines) + "\n"


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _moved_json(p: ChangePoint | Drift, direction: Direction) -> dict[str, object]:
    """A change point's or drift's levels, change, test and verdict for ``direction``."""
    return {
        "before": _finite_or_none(p.before),
        "after": _finite_or_none(p.after),
        "change_pct": _finite_or_none(p.change_pct),
        "p_value": p.p_value,
        "confidence": p.confidence,
        "verdict": decide.change_verdict(direction, p.change_pct).value,
    }


def change_points_to_json(
    points: Sequence[ChangePoint],
    direction: Direction = Direction.LOWER_IS_BETTER,
    drift: Drift | None = None,
) -> dict[str, object]:
    """The object ``perfgate detect --json`` prints (non-finite numbers become null); each
    change point's verdict, and the drift's, follows ``direction``. ``drift`` is null when
    there is none: runs ``start..end`` are those it moved over."""
    return {
        "change_points": [p.index for p in points],
        "details": [{"index": p.index, **_moved_json(p, direction)} for p in points],
        "drift": None
        if drift is None
        else {"start": drift.start, "end": drift.end, **_moved_json(drift, direction)},
    }
