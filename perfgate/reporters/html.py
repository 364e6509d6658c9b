"""The HTML history report: a static site, pure given its data (see :mod:`perfgate.app.site`).

:func:`render_index` and :func:`render_benchmark_pages` return the pages as text, the latter
keyed by its path relative to the site root:

* ``index.html``: every benchmark's latest verdict on the base branch, the metric that decides
  it (:func:`headline_comparison`) with its change, interval and trend (the series of
  :func:`perfgate.reporters.series.trend_values`, as the PR comment's); other branches' latest
  runs likewise, each judged against the base branch.
* ``benchmarks/<name>.html``: per metric, the history plot: the base branch's runs in order,
  the current baseline window's noise band (:func:`perfgate.stats.band.prediction_band`, what
  the gate judges against) drawn faint behind them, the change points with their commit ranges,
  and other branches' (PR) runs as diamonds beside the base-branch run they followed.
* ``runs/<id>.html``: one run, headed by its verdict and deciding metric, then its profile: top
  ops, step breakdown, memory curve, per-rank communication, utilisation (or why each could not
  be computed), one step as a timeline and the rank-to-rank traffic matrix (inline SVG: no
  script, fast at 10^4 spans), and the advisor's findings.

A budget breach (verdict ``over_budget``) is shown first wherever a verdict is, in its own
words and style, never as a regression.

Pages load ``plotly.min.js`` from the site root by a relative path, so the site works from
``file://`` without a server. Every name from data is HTML-escaped, in pages and plot labels.
To keep 100 benchmarks x 1,000 runs small, a history trace holds only x (the run's row in the
page's run table), y and the interval; a small script fills in the hover texts from the run
table, which each page holds once.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from hashlib import sha256
from importlib import resources
from itertools import groupby
from typing import TYPE_CHECKING, Any

import numpy as np

from perfgate import __version__
from perfgate.errors import require
from perfgate.metrics import PRIMARY_TIME, WALL_TIMES, lookup
from perfgate.models import (
    Comparison,
    Direction,
    Finding,
    Fingerprint,
    ProfileSummary,
    RankPair,
    RunPoint,
    RunRecord,
    SpanKind,
    Timeline,
    TimelineLane,
    TimelineSpan,
    Verdict,
    WorkChange,
)
from perfgate.reporters.render import (
    byte_unit,
    format_change,
    format_value,
    interval_label,
    metric_tags,
    plural,
    work_text,
)
from perfgate.stats import decide
from perfgate.stats.decide import SCIENTIFIC_FROM, fixed

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from perfgate.models import Band, DetectedChange

PLOTLY_JS = "plotly.min.js"
TOP_OPS = 15
MAX_LABEL = 60
RUN_ID_CHARS = 12
COMMIT_CHARS = 10
PRIMARY_METRICS = ("step_time_ms", "throughput_samples_per_s")

BAND_ALPHA = 0.12
"""Opacity of the noise band's fill: faint, so that it sits behind the points, never a
filled chart."""
_COLOURS = {
    "base": "#1f77b4",
    "other": "#ff7f0e",
    "band": f"rgba(31,119,180,{BAND_ALPHA})",
    "regression": "#d62728",
    "improvement": "#2ca02c",
}
_CHANGE_COLOURS: dict[Verdict | None, str] = {
    Verdict.REGRESSION: _COLOURS["regression"],
    Verdict.IMPROVEMENT: _COLOURS["improvement"],
}
_TESTBED_COLOURS = ("#1f77b4", "#9467bd", "#17becf", "#8c564b")
_VERDICT_CLASS = {
    Verdict.OVER_BUDGET: "over",
    Verdict.REGRESSION: "bad",
    Verdict.INCONCLUSIVE: "warn",
    Verdict.INCOMPARABLE: "warn",
    Verdict.IMPROVEMENT: "good",
    Verdict.UNCHANGED: "ok",
    Verdict.NO_BASELINE: "ok",
}
_PLOT_CONFIG = {"displaylogo": False, "responsive": True}
_LEGEND_BELOW = {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom"}
"""A legend in the bottom margin, below the x axis title."""
_GRID = {"gridcolor": "#e5e5e5", "zerolinecolor": "#cccccc"}
_LAYOUT: dict[str, Any] = {
    "template": {"layout": {}},  # plotly's default template adds ~7 KB to every plot
    "paper_bgcolor": "white",
    "plot_bgcolor": "white",
    "font": {"family": "system-ui, sans-serif", "size": 12},
}


# --- the data a site is rendered from (built by perfgate.app.site) -----------------------------


@dataclass(frozen=True)
class MetricView:
    """One metric of one benchmark: its stored points and what was found in them.

    ``base`` holds the base branch's points, ``others`` the other branches', both oldest
    first; ``base_ci`` / ``other_ci`` the half-widths of their centres' 95% intervals
    (``None`` where unknown). ``band`` is the current baseline window's noise band and
    ``window_run_ids`` its runs; ``trend`` the overview's sparkline series.
    """

    metric: str
    unit: str
    direction: Direction
    base: tuple[RunPoint, ...]
    others: tuple[RunPoint, ...] = ()
    base_ci: tuple[float | None, ...] = ()
    other_ci: tuple[float | None, ...] = ()
    changes: tuple[DetectedChange, ...] = ()
    band: Band | None = None
    window_run_ids: tuple[str, ...] = ()
    comparison: Comparison | None = None
    trend: tuple[float, ...] = ()
    branch_comparisons: tuple[Comparison, ...] = ()
    """Other branches' latest runs judged against the base branch's window (as the gate
    judges a PR), one per branch shown."""


@dataclass(frozen=True)
class BranchVerdict:
    """The latest run of a benchmark on another branch (a PR), judged as the gate judges it:
    ``perfgate compare --branch BRANCH --against BASE``."""

    branch: str
    run_id: str
    verdict: Verdict | None
    comparison: Comparison | None = None
    """The comparison that decides ``verdict`` (:func:`headline_comparison`), shown beside it."""
    budgets: tuple[Comparison, ...] = ()
    """The run's budget comparisons (``kind == "budget"``), apart from ``verdict``."""


@dataclass(frozen=True)
class BenchmarkView:
    """One benchmark: its metrics, the latest base-branch verdict and the runs with a page."""

    name: str
    metrics: tuple[MetricView, ...]
    verdict: Verdict | None = None
    runs: tuple[RunRecord, ...] = ()
    """Runs that get a page: the latest on the base branch first, then other branches'."""
    branches: tuple[BranchVerdict, ...] = ()
    """The newest other branches' latest runs, judged against the base branch, newest first."""
    budgets: tuple[Comparison, ...] = ()
    """The latest base-branch run's budget comparisons (``kind == "budget"``): shown before
    ``verdict``, which they are no part of (a breach is not a regression)."""
    work: WorkChange | None = None
    """The operators whose calls per step the latest base-branch run changed against the
    runs before it: shown beside ``verdict``, which it explains and is no part of."""


@dataclass(frozen=True)
class SiteView:
    project: str
    branch: str
    generated_at: datetime
    benchmarks: tuple[BenchmarkView, ...]
    utilisation: UtilisationOf | None = None
    """How the run pages' rank-pair matrices judge a pair against its link's nominal
    bandwidth (None: GB/s only)."""


# --- small helpers ---------------------------------------------------------------------------


def esc(text: object) -> str:
    """``text`` for HTML (element content and quoted attributes)."""
    return html.escape(str(text), quote=True)


_PLACEHOLDERS = str.maketrans({"{": "&#123;", "}": "&#125;", "%": "&#37;"})


def _clip(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _label(text: str, limit: int = MAX_LABEL) -> str:
    """A data string for a plot label or hover text: short, HTML-escaped, no template
    placeholders (plotly reads ``%{...}`` in hover templates)."""
    return esc(_clip(text, limit)).translate(_PLACEHOLDERS)


def slug(name: str) -> str:
    """A file name for ``name``: safe characters, with a short hash so distinct names never
    share a file."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[:60] or "x"
    return f"{safe}-{sha256(name.encode()).hexdigest()[:8]}"


def benchmark_path(name: str) -> str:
    return f"benchmarks/{slug(name)}.html"


def run_path(run_id: str) -> str:
    return f"runs/{slug(run_id)}.html"


def need_plotly() -> None:
    """Raise :class:`~perfgate.errors.MissingExtra` unless plotly (``perfgate[export]``) is
    installed; every function here that draws imports it through this."""
    require("plotly.graph_objects", extra="export", feature="perfgate report --html")


def plotly_js() -> bytes:
    """The plotly.js bundle shipped with the installed plotly package."""
    need_plotly()
    return (resources.files("plotly") / "package_data" / PLOTLY_JS).read_bytes()


def _json_script(name: str, value: object) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=True)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"<script>var {name}={text};</script>"


def _plot(fig: go.Figure | dict[str, Any], div_id: str, post_script: str | None = None) -> str:
    """A figure as an HTML fragment (plotly.js loaded by the page); a dict figure (see
    :func:`history_figure`) is not validated again."""
    need_plotly()
    import plotly.io as pio

    out: str = pio.to_html(
        fig,
        full_html=False,
        include_plotlyjs=False,
        div_id=div_id,
        config=_PLOT_CONFIG,
        post_script=post_script,
        validate=not isinstance(fig, dict),
    )
    return out


_F4_RANGE = (float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max))


def _typed(values: Sequence[float]) -> dict[str, str]:
    """A plotly.js typed-array spec: the numbers in base64, as float32 (about 5 bytes each,
    against 18 or more as JSON text) where it holds every value's magnitude, else as float64
    (a value beyond 3.4e38 would be inf in float32, one below 1.2e-38 lose its digits or be 0)."""
    low, high = _F4_RANGE  # Python floats: a comparison with numpy's casts (and overflows)
    fits = all(v == 0 or not math.isfinite(v) or low <= abs(v) <= high for v in values)
    dtype = "f4" if fits else "f8"
    data = np.asarray(values, dtype=f"<{dtype}").tobytes()
    return {"dtype": dtype, "bdata": base64.b64encode(data).decode("ascii")}


def _page(title: str, body: str, *, depth: int, head_extra: str = "") -> str:
    root = "../" * depth
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title>
<style>{_CSS}</style>
<script src="{root}{PLOTLY_JS}"></script>
<script>{_HOVER_JS}</script>
{head_extra}
</head>
<body>
<nav><a href="{root}index.html">perfgate report</a></nav>
{body}
<footer>perfgate {esc(__version__)}</footer>
</body>
</html>
"""


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 2rem 2rem;color:#222}
nav{padding:.6rem 0;border-bottom:1px solid #ddd;margin-bottom:1rem}
table{border-collapse:collapse;margin:.5rem 0 1rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.bad{color:#b00020;font-weight:600}.warn{color:#a15c00;font-weight:600}
.good{color:#1b7f2a;font-weight:600}.ok{color:#555}
.muted{color:#777}.plot{margin-bottom:1.5rem}
.headline{font-size:1.15rem}
footer{margin-top:2rem;color:#888;font-size:.85rem}
code{background:#f4f4f4;padding:0 .2rem}
.over{color:#6a1b9a;font-weight:600;background:#f3e5f5;border:1px solid #ce93d8;
border-radius:3px;padding:0 .3rem;display:inline-block;margin:0 .2rem .1rem 0}
.timeline-box{overflow-x:auto;margin:.5rem 0 1.5rem}
.legend span{margin-right:1rem;white-space:nowrap}
.legend i{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;
vertical-align:-.1rem;border:1px solid #999}
"""

# Fills the hover texts of the run traces from the page's run tables (PG_RUNS for the base
# branch, PG_OTHER for other branches): a base point carries only its row (x) and interval
# (customdata), another branch's point [row, interval]; marks the plot ``data-hover-runs``
# with the number of points filled in.
_HOVER_JS = """
function pgCi(c){return (c===null||c===undefined)?"n/a":"\\u00b1"+Number(c).toPrecision(3);}
function pgHover(id){
  var gd=document.getElementById(id), R=window.PG_RUNS||[], O=window.PG_OTHER||[];
  if(!gd||!gd.data){return;}
  var upd=[], idx=[], n=0;
  gd.data.forEach(function(t,i){
    if(t.meta!=="base"&&t.meta!=="other"){return;}
    var cd=t.customdata||[], xs=t.x, out=new Array(cd.length);
    for(var j=0;j<cd.length;j++){
      if(t.meta==="base"){
        var x=xs?xs[j]:(t.x0||0)+j*(t.dx||1), r=R[x]||["?","?"];
        out[j]=[r[0], r[1], pgCi(cd[j])];
      }else{
        var o=O[cd[j][0]]||["?","?","?"];
        out[j]=[o[0], o[1], o[2], pgCi(cd[j][1])];
      }
    }
    upd.push(out); idx.push(i); n+=cd.length;
  });
  if(idx.length){
    Plotly.restyle(gd,{customdata:upd},idx).then(function(){
      gd.setAttribute("data-hover-runs", String(n));
    });
  }
}
"""


def _verdict_text(verdict: Verdict) -> str:
    return verdict.value.replace("_", " ")


def _at_commit(branch: str, commit: str, chars: int = COMMIT_CHARS) -> str:
    """``branch @ commit`` as HTML; the branch alone, marked, when the commit is unknown."""
    if not commit:
        return f"<b>{esc(branch)}</b> <span class='muted'>(commit unknown)</span>"
    return f"<b>{esc(branch)}</b> @ <code>{esc(commit[:chars])}</code>"


def chart_scale(unit: str, values: Sequence[float]) -> tuple[float, str]:
    """The divisor and unit a chart plots ``values`` in: bytes in the binary unit the tables
    use, by the largest value (:func:`~perfgate.reporters.render.byte_unit`); others as is."""
    if unit != "bytes":
        return 1.0, unit
    return byte_unit(max((abs(v) for v in values if math.isfinite(v)), default=0.0))


def _verdict_html(verdict: Verdict | None) -> str:
    if verdict is None:
        return '<span class="muted">no run</span>'
    return f'<span class="{_VERDICT_CLASS[verdict]}">{esc(_verdict_text(verdict))}</span>'


def sparkline_svg(values: Sequence[float], width: int = 140, height: int = 28) -> str:
    """An inline SVG line of ``values`` scaled between their min and max (empty when none);
    the last point (the latest run) is marked."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return ""
    low, high = min(finite), max(finite)
    span = high - low or 1.0
    n = len(finite)
    step = (width - 4) / max(n - 1, 1)
    pts = [
        (2 + i * step, height - 2 - (v - low) / span * (height - 4) if high > low else height / 2)
        for i, v in enumerate(finite)
    ]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
    lx, ly = pts[-1]
    return (
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="trend of {n} runs">'
        f'<polyline fill="none" stroke="{_COLOURS["base"]}" stroke-width="1.5" points="{line}"/>'
        f'<circle cx="{lx:.1f}" cy="{ly:.1f}" r="2.5" fill="{_COLOURS["other"]}"/></svg>'
    )


_TIME_METRICS = frozenset(PRIMARY_TIME.values()) | frozenset(WALL_TIMES)


def headline_comparison(comparisons: Iterable[Comparison]) -> Comparison | None:
    """The comparison a run's headline shows: one that decides its verdict.

    Among the deciding comparisons (:func:`perfgate.stats.decide.deciding`: not a wall time
    shown beside the CPU or device time that decides, paired ones where the run was measured
    in A/B pairs; budgets apart, they are shown in their own words), one whose verdict is the
    overall verdict (:func:`perfgate.stats.decide.overall_verdict`); of several, a time metric
    first, then the largest change. None when nothing decides."""
    judged = [c for c in decide.deciding(comparisons) if not decide.is_budget(c)]
    if not judged:
        return None
    verdict = decide.overall_verdict(judged)
    same = [c for c in judged if c.verdict is verdict] or judged
    return min(
        same,
        key=lambda c: (
            c.metric not in _TIME_METRICS,
            -abs(c.change_pct) if c.change_pct is not None else math.inf,
            c.metric,
        ),
    )


def view_comparisons(view: BenchmarkView, run_id: str | None = None) -> list[Comparison]:
    """The view's comparisons of ``run_id``'s metrics: the latest base-branch run's (default),
    or another branch's run judged against the base branch."""
    out = []
    for m in view.metrics:
        if m.comparison is not None and run_id in (None, m.comparison.current_run_id):
            out.append(m.comparison)
        if run_id is not None:
            out += [c for c in m.branch_comparisons if c.current_run_id == run_id]
    return out


def headline_metric(view: BenchmarkView) -> MetricView | None:
    """The metric the overview shows: the one deciding the latest base-branch run's verdict
    (:func:`headline_comparison`), else step time, else throughput, else the first."""
    shown = headline_comparison(view_comparisons(view))
    by_name = {m.metric: m for m in view.metrics}
    names = (*([shown.metric] if shown else []), *PRIMARY_METRICS)
    first = view.metrics[0] if view.metrics else None
    return next((by_name[n] for n in names if n in by_name), first)


def headline_html(c: Comparison | None) -> str:
    """A deciding comparison's metric and change with its interval, as HTML
    (``step_cpu_ms +12.0% [+8.1, +16.0]``, the interval's level its tooltip); nothing when
    there is none or it has no change (no baseline)."""
    if c is None or c.change_pct is None:
        return ""
    level = f" title='{esc(interval_label([c]))}'" if c.ci_level is not None else ""
    return (
        f" <span class='deciding'{level}><code>{esc(c.metric)}</code> "
        f"{esc(format_change(c))}</span>"
    )


# --- the overview ----------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexRow:
    """One benchmark's row of the overview, rendered."""

    name: str
    verdict: Verdict | None
    html: str
    branch_verdicts: tuple[Verdict | None, ...] = ()
    """The verdicts of the other branches shown in the row (for the overview's summary)."""
    over_budget: bool = False
    """The latest base-branch run breached a budget."""
    branches_over_budget: int = 0
    """How many of the other branches shown breached a budget."""


def _branches_html(b: BenchmarkView, base: str, root: str = "") -> str:
    """The newest other branches' verdicts against ``base``, each labelled with its branch
    and linked to the run's page."""
    items = []
    for v in b.branches:
        if v.verdict is not None:
            judged = _verdict_html(v.verdict)
        else:  # only its budgets were judged, or nothing
            judged = "" if v.budgets else "<span class=muted>not judged</span>"
        items.append(
            f"<div class='branch'><code>{esc(v.branch)}</code>: {_budgets_html(v.budgets)}"
            f"{judged}{headline_html(v.comparison)} <a href='{esc(root + run_path(v.run_id))}' "
            f"title='vs {esc(base)}'>"
            f"{esc(v.run_id[:RUN_ID_CHARS])}</a></div>"
        )
    return "".join(items) or "<span class='muted'>none</span>"


def index_row(b: BenchmarkView, branch: str) -> IndexRow:
    """A benchmark's row of the overview: its verdict on ``branch`` and the metric that decides
    it (:func:`headline_metric`) with its latest value, change, interval and trend."""
    primary = headline_metric(b)
    latest = b.runs[0] if b.runs and b.runs[0].git.branch == branch else None
    value = change = spark = metric = ""
    if primary is not None:
        metric = esc(primary.metric)
        spark = sparkline_svg(primary.trend)
        c = primary.comparison
        if c is not None:
            value = esc(format_value(c.current_centre, c.unit))
            change = esc(format_change(c))
        elif primary.base:
            value = esc(format_value(primary.base[-1].centre, primary.unit))
    changes = sum(len(m.changes) for m in b.metrics)
    runs = max((len(m.base) for m in b.metrics), default=0)
    run_link = f'<a href="{esc(run_path(latest.id))}">{esc(latest.id[:12])}</a>' if latest else ""
    return IndexRow(
        b.name,
        b.verdict,
        "<tr>"
        f'<td><a href="{esc(benchmark_path(b.name))}">{esc(b.name)}</a></td>'
        f'<td class="verdict">{_budgets_html(b.budgets)}{_verdict_html(b.verdict)}</td>'
        f'<td class="branches">{_branches_html(b, branch)}</td>'
        f"<td>{metric}</td><td class='num'>{value}</td><td class='num'>{change}</td>"
        f"<td>{spark}</td><td class='num'>{runs}</td><td class='num'>{changes}</td>"
        f"<td>{run_link}</td></tr>",
        tuple(v.verdict for v in b.branches),
        over_budget=bool(breaches(b.budgets)),
        branches_over_budget=sum(1 for v in b.branches if breaches(v.budgets)),
    )


def render_index(site: SiteView, rows: Sequence[IndexRow]) -> str:
    """The overview, ``rows`` (:func:`index_row`) in name order."""
    rows = sorted(rows, key=lambda r: r.name)

    def tally(keys: Iterable[str], over: int) -> str:
        counts = sorted(Counter(keys).items())
        said = ", ".join(f"{n} {esc(k.replace('_', ' '))}" for k, n in counts)
        return f"<span class='over'>{over} over budget</span> · {said}" if over else said

    summary = tally(
        (r.verdict.value if r.verdict else "no run" for r in rows),
        sum(r.over_budget for r in rows),
    )
    other = tally(
        (v.value if v else "not judged" for r in rows for v in r.branch_verdicts),
        sum(r.branches_over_budget for r in rows),
    )
    body = f"""<h1>perfgate: {esc(site.project)}</h1>
<p>Latest verdict of each benchmark on <b>{esc(site.branch)}</b> (its latest run against the
runs before it) · {plural(len(rows), "benchmark")}: {summary or "none"} ·
generated {esc(site.generated_at.strftime("%Y-%m-%d %H:%M %Z"))}</p>
<p>Other branches (PRs): the latest run of the newest branches of each benchmark, judged
against {esc(site.branch)}'s baseline window as the gate judges a PR: {other or "none"}</p>
<p class="muted">Trend: the baseline window of the latest run, oldest first, then that run
(the PR comment's trend column draws the same series).</p>
<p class="muted">Metric: the one that decides the verdict (a training step's CPU time on the
CPU, its device time on an accelerator; the wall time shown beside them does not decide), with
its change and interval (its level in the tooltip: the level the verdict was decided at).</p>
<table id="overview">
<thead><tr><th>benchmark</th><th>verdict on {esc(site.branch)}</th>
<th>other branches vs {esc(site.branch)}</th><th>metric</th><th>latest</th>
<th>change [CI]</th><th>trend</th><th>runs</th><th>change points</th><th>latest run</th></tr>
</thead>
<tbody>
{"".join(r.html for r in rows)}
</tbody></table>"""
    return _page(f"perfgate: {site.project}", body, depth=0)


# --- a benchmark's history -------------------------------------------------------------------


def _run_table(
    view: BenchmarkView, *, others: bool = False
) -> tuple[list[list[str]], dict[str, int], list[datetime]]:
    """The page's base-branch runs (``others``: other branches' runs), one point per run,
    oldest first: [[run id, commit]] (and the branch, for ``others``), the row of each id,
    and their start times (to place other branches' runs beside the base branch's)."""
    seen: dict[str, RunPoint] = {}
    for m in view.metrics:
        for p in m.others if others else m.base:
            seen.setdefault(p.run_id, p)
    ordered = sorted(seen.values(), key=lambda p: (p.started_at, p.run_id))
    table = [[p.run_id[:RUN_ID_CHARS], p.commit[:COMMIT_CHARS] or "unknown"] for p in ordered]
    if others:
        table = [[*row, _label(p.branch, 40)] for row, p in zip(table, ordered, strict=True)]
    return table, {p.run_id: i for i, p in enumerate(ordered)}, [p.started_at for p in ordered]


def history_figure(
    m: MetricView,
    branch: str,
    rows: Mapping[str, int],
    starts: Sequence[datetime],
    other_rows: Mapping[str, int],
) -> dict[str, Any]:
    """The history plot of one metric as a plain plotly figure dict, not graph_objects: a site
    has hundreds, and validating each costs more than the rest of the report."""
    scale, shown_unit = chart_scale(m.unit, [p.centre for p in (*m.base, *m.others)])
    unit = _label(shown_unit, 20)
    fmt = ".1f" if m.unit == "bytes" else ".4g"  # as format_value writes bytes in tables

    def ci(half: float | None) -> float | None:
        return None if half is None else float(f"{half / scale:.3g}")

    def grouped(
        points: Sequence[RunPoint], cis: Sequence[float | None], key: str
    ) -> dict[str, list[tuple[RunPoint, float | None]]]:
        out: dict[str, list[tuple[RunPoint, float | None]]] = {}
        for p, half in zip(points, cis or (None,) * len(points), strict=False):
            out.setdefault(getattr(p, key), []).append((p, half))
        return out

    traces: list[dict[str, Any]] = []
    testbeds = grouped(m.base, m.base_ci, "fingerprint_key")
    for n, (key, held) in enumerate(testbeds.items()):
        name = _label(branch, 40) + (f" · testbed {_label(key[:8])}" if len(testbeds) > 1 else "")
        colour = _TESTBED_COLOURS[n % len(_TESTBED_COLOURS)]
        xs = [rows[p.run_id] for p, _ in held]
        contiguous = xs == list(range(xs[0], xs[0] + len(xs)))
        traces.append(
            {
                "type": "scatter",
                **({"x0": xs[0], "dx": 1} if contiguous else {"x": xs}),
                "y": _typed([p.centre / scale for p, _ in held]),
                "customdata": [ci(half) for _, half in held],
                "meta": "base",
                "mode": "lines+markers",
                "marker": {"size": 4, "color": colour},
                "line": {"width": 1, "color": colour},
                "name": name,
                "hovertemplate": (
                    f"<b>%{{y:{fmt}}} {unit}</b> %{{customdata[2]}} (95% CI)<br>"
                    "run %{customdata[0]}<br>commit %{customdata[1]}<br>run #%{x}"
                    f"<extra>{name}</extra>"
                ),
            }
        )
    judged = {c.current_run_id: c for c in m.branch_comparisons}
    by_branch = grouped(m.others, m.other_ci, "branch")
    order = sorted(by_branch, key=lambda b: max(p.started_at for p, _ in by_branch[b]))
    for name in reversed(order):  # newest branch first in the legend
        points = by_branch[name]
        latest = judged.get(points[-1][0].run_id)
        texts = [
            "not judged (an earlier run of the branch)"
            if (jc := judged.get(p.run_id)) is None
            else _label(f"{_verdict_text(jc.verdict)} {format_change(jc)} vs {branch}", 80)
            for p, _ in points
        ]
        verdict = f": {_verdict_text(latest.verdict)}" if latest is not None else ""
        colour = _CHANGE_COLOURS.get(latest.verdict if latest else None, _COLOURS["other"])
        traces.append(
            {
                "type": "scatter",
                "x": [bisect_right(starts, p.started_at) - 0.5 for p, _ in points],
                "y": _typed([p.centre / scale for p, _ in points]),
                "customdata": [[other_rows[p.run_id], ci(half)] for p, half in points],
                "hovertext": texts,
                "meta": "other",
                "mode": "markers",
                "marker": {
                    "size": 10,
                    "symbol": "diamond",
                    "color": colour,
                    "line": {"width": 1, "color": "#333"},
                },
                "name": f"{_label(name, 40)}{verdict}",
                "hovertemplate": (
                    f"<b>%{{y:{fmt}}} {unit}</b> %{{customdata[3]}} (95% CI)<br>"
                    "<b>%{hovertext}</b><br>"
                    "branch %{customdata[2]}<br>run %{customdata[0]}<br>"
                    f"commit %{{customdata[1]}}<extra>{_label(name, 40)}</extra>"
                ),
            }
        )
    shapes, annotations, marks = [], [], []
    for c in m.changes:
        if c.first_run_after not in rows:
            continue
        at = rows[c.first_run_after]
        x = at - 0.5  # before the first run after the change
        colour = _CHANGE_COLOURS.get(c.verdict, _COLOURS["improvement"])
        commits = f"{_label(c.commit_before[:8] or '?')}..{_label(c.commit_after[:8] or '?')}"
        dot = {"width": 1.5, "dash": "dot", "color": colour}
        shapes.append(
            {"type": "line", "x0": x, "x1": x, "yref": "paper", "y0": 0, "y1": 1, "line": dot}
        )
        annotations.append(
            {
                "x": x,
                "yref": "paper",
                "y": 1.0,
                "text": f"{commits} {fixed(c.point.change_pct, '+.1f')}%",
                "showarrow": False,
                "xanchor": "left",
                "yanchor": "bottom",
                "font": {"size": 10, "color": colour},
            }
        )
        triage = f"<br>alert: {_label(c.triage)}" if c.triage else ""
        said = (
            f"<b>change point {fixed(c.point.change_pct, '+.1f')}% ({c.verdict.value})</b><br>"
            f"commits {commits}<br>"
            f"{_label(format_value(c.point.before, c.unit))} → "
            f"{_label(format_value(c.point.after, c.unit))}<br>"
            f"confidence {c.point.confidence:.3f}{triage}"
        )
        marks.append((at, c.point.after / scale, said, colour))
    ys = [p.centre / scale for p in (*m.base, *m.others)]
    y_range = _band_range(m, scale, ys + [y for _, y, _, _ in marks])
    traces[:0] = _band_traces(m, rows, scale, clipped=bool(y_range))  # behind the points
    if marks:
        mx, my, mtext, mcolour = (list(v) for v in zip(*marks, strict=True))
        traces.append(
            {
                "type": "scatter",
                "x": mx,
                "y": my,
                "mode": "markers",
                "marker": {"size": 12, "symbol": "x", "color": mcolour},
                "name": "change points",
                "hovertext": mtext,
                "hoverinfo": "text",
            }
        )
    better = "lower" if m.direction is Direction.LOWER_IS_BETTER else "higher"
    xaxis: dict[str, Any] = {
        "title": {"text": f"run on {_label(branch, 40)} (oldest first)"},
        "tickformat": "d",  # a run index: whole numbers only
        **_GRID,
    }
    if len(rows) <= 20:
        xaxis.update(tick0=0, dtick=1)
    layout = {
        "height": 440,
        # the legend sits below the x axis title, in the bottom margin
        "margin": {"l": 70, "r": 20, "t": 50, "b": 120},
        "title": _title(f"{_label(m.metric)} ({unit}, {better} is better)"),
        "xaxis": xaxis,
        "yaxis": {"title": {"text": unit}, "exponentformat": _exponents(ys), **_GRID, **y_range},
        "hovermode": "closest",
        "legend": {**_LEGEND_BELOW, "x": 0, "xanchor": "left"},
        "shapes": shapes,
        "annotations": annotations,
        **_LAYOUT,
    }
    return {"data": traces, "layout": layout}


PLAIN_TICKS = (1e-6, SCIENTIFIC_FROM)
"""The magnitudes a chart's y axis writes in all their digits (``0.0042``, ``12000``);
beyond them, ``1e+39``: a tick is never dozens of digits."""


def _exponents(ys: Sequence[float]) -> str:
    """The y axis's ``exponentformat``: ``none`` (no SI suffix: ``12k ms`` reads wrong) while
    every value is within :data:`PLAIN_TICKS`, else ``e``."""
    low, high = PLAIN_TICKS
    sizes = [abs(y) for y in ys if y and math.isfinite(y)]
    return "none" if all(low <= x < high for x in sizes) else "e"


def _band_traces(
    m: MetricView, rows: Mapping[str, int], scale: float, *, clipped: bool = False
) -> list[dict[str, Any]]:
    """The current baseline window's noise band as a faint filled polygon and its median as a
    dashed line, from the window's first run to the latest: traces, so the legend names them
    (with the band's bounds, and whether it runs off the chart: ``clipped``)."""
    xs = [rows[r] for r in m.window_run_ids if r in rows]
    if m.band is None or not xs:
        return []
    x0, x1 = min(xs) - 0.5, max(len(rows) - 1, max(xs)) + 0.5
    low, high, centre = m.band.low / scale, m.band.high / scale, m.band.centre / scale
    lo_text, hi_text = format_value(m.band.low, m.unit), format_value(m.band.high, m.unit)
    name = (
        f"noise band {_label(lo_text, 20)} – {_label(hi_text, 20)} "
        f"({m.band.level:.0%} prediction, {m.band.runs} runs"
        f"{'; wider than the chart' if clipped else ''})"
    )
    return [
        {
            "type": "scatter",
            "x": [x0, x1, x1, x0, x0],
            "y": [low, low, high, high, low],
            "mode": "lines",
            "fill": "toself",
            "fillcolor": _COLOURS["band"],
            "line": {"width": 0},
            "hoverinfo": "skip",
            "meta": "band",
            "name": name,
        },
        {
            "type": "scatter",
            "x": [x0, x1],
            "y": [centre, centre],
            "mode": "lines",
            "line": {"width": 1, "dash": "dash", "color": _COLOURS["base"]},
            "hoverinfo": "skip",
            "meta": "median",
            "name": "baseline median",
        },
    ]


BAND_REACH = 0.5
"""How far past the runs' points the y axis follows a noise band, in spans of the points:
a band wider than that (a window of three noisy runs: 3 ms to 490 ms around points at 40 ms)
runs off the chart, its bounds in the legend, and leaves the points readable."""


def _band_range(m: MetricView, scale: float, ys: Sequence[float]) -> dict[str, Any]:
    """The y axis's range where the noise band reaches further than :data:`BAND_REACH` past
    the points ``ys`` (scaled); nothing (plotly's autorange) otherwise."""
    ys = [y for y in ys if math.isfinite(y)]
    if m.band is None or not m.window_run_ids or not ys:
        return {}
    lo, hi = min(ys), max(ys)
    span = hi - lo or abs(hi) * 0.1 or 1.0
    low, high = m.band.low / scale, m.band.high / scale
    if low >= lo - BAND_REACH * span and high <= hi + BAND_REACH * span:
        return {}
    bottom = max(min(lo, low), lo - BAND_REACH * span)
    top = min(max(hi, high), hi + BAND_REACH * span)
    pad = 0.05 * (top - bottom)
    return {"range": [bottom - pad, top + pad]}


def _table(table_id: str, heads: Iterable[str], rows: Iterable[str]) -> str:
    """A table of ``rows`` (``<tr>`` elements, HTML) under a row of ``heads`` (HTML)."""
    head = "".join(f"<th>{h}</th>" for h in heads)
    body = "".join(rows)
    return f"<table id='{table_id}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _changes_table(view: BenchmarkView) -> str:
    rows = [
        f"<tr><td>{esc(c.metric)}</td>"
        f"<td><code>{esc(c.commit_before[:10] or '?')}</code>..<code>"
        f"{esc(c.commit_after[:10] or '?')}</code></td>"
        f"<td class='num'>{esc(format_value(c.point.before, c.unit))}</td>"
        f"<td class='num'>{esc(format_value(c.point.after, c.unit))}</td>"
        f"<td class='num'>{fixed(c.point.change_pct, '+.1f')}%</td>"
        f"<td>{_verdict_html(c.verdict)}</td>"
        f"<td class='num'>{c.point.confidence:.3f}</td>"
        f"<td>{esc(c.triage or '')}</td></tr>"
        for m in view.metrics
        for c in m.changes
    ]
    if not rows:
        return "<p class='muted'>No change points in the stored history.</p>"
    heads = ("metric", "commits (after first, up to second)", "before", "after", "change")
    return _table("changes", (*heads, "verdict", "confidence", "alert"), rows)


def _metric_table(view: BenchmarkView) -> str:
    rows = []
    for m in view.metrics:
        c = m.comparison
        tags = f"<span class='muted'>{esc(metric_tags(c))}</span>" if c else ""
        rows.append(
            f"<tr><td><a href='#metric-{esc(slug(m.metric))}'>{esc(m.metric)}</a>{tags}</td>"
            f"<td class='num'>{esc(format_value(c.baseline_centre if c else None, m.unit))}</td>"
            f"<td class='num'>{esc(format_value(c.current_centre if c else None, m.unit))}</td>"
            f"<td class='num'>{esc(format_change(c) if c else '-')}</td>"
            f"<td>{_verdict_html(c.verdict if c else None)}</td>"
            f"<td>{esc(c.reason if c else '')}</td></tr>"
        )
    judged = [m.comparison for m in view.metrics if m.comparison is not None]
    heads = ("metric", "baseline", "latest", f"change [{interval_label(judged)}]", "verdict", "why")
    return _table("metrics", heads, rows)


def render_benchmark(view: BenchmarkView, site: SiteView) -> str:
    table, rows, starts = _run_table(view)
    other_table, other_rows, _ = _run_table(view, others=True)
    plots = []
    for i, m in enumerate(view.metrics):
        fig = history_figure(m, site.branch, rows, starts, other_rows)
        plot = _plot(fig, f"history-{i}", post_script="pgHover('{plot_id}');")
        plots.append(
            f'<section class="plot" id="{esc(f"metric-{slug(m.metric)}")}">{plot}</section>'
        )
    # the "work changed" words (:func:`work_text`) beside the verdict
    work = "" if view.work is None else f" · <span class='work'>{esc(work_text(view.work))}</span>"
    branches = (
        f"<p>Other branches, latest run against {esc(site.branch)}:</p>"
        f"<div id='branches'>{_branches_html(view, site.branch, '../')}</div>"
        if view.branches
        else ""
    )
    runs = "".join(
        f"<li><a href='../{esc(run_path(r.id))}'>{esc(r.id)}</a> on "
        f"{_at_commit(r.git.branch, r.git.commit)} ({esc(r.started_at.isoformat())})</li>"
        for r in view.runs
    )
    body = f"""<h1>{esc(view.name)}</h1>
<p class="headline">Latest verdict on <b>{esc(site.branch)}</b>: {_budgets_html(view.budgets)}
{_verdict_html(view.verdict)}{headline_html(headline_comparison(view_comparisons(view)))}\
{work} · {len(table)} runs on {esc(site.branch)}</p>
{branches}
{_budget_table(view.budgets)}
{_metric_table(view)}
<h2>History</h2>
<p class="muted">Blue: runs on {esc(site.branch)}, oldest first; the faint band behind
them: the noise band of the current baseline window (its median dashed, and the 95% prediction
band: where the next run falls if nothing changed); dotted lines: change points, labelled with
the commits they lie between; diamonds: runs on other branches (PRs), one legend entry per
branch with its latest run's verdict against
{esc(site.branch)} (red: regression, green: improvement), placed after the
{esc(site.branch)} run they followed.</p>
{"".join(plots)}
<h2>Change points</h2>
{_changes_table(view)}
<h2>Run profiles</h2>
<ul>{runs or "<li class='muted'>none</li>"}</ul>"""
    head = _json_script("PG_RUNS", table) + _json_script("PG_OTHER", other_table)
    return _page(f"{view.name} · perfgate", body, depth=1, head_extra=head)


# --- a run's profile -------------------------------------------------------------------------


def _unique_labels(names: Sequence[str]) -> list[str]:
    seen: Counter[str] = Counter()
    out = []
    for label in map(_label, names):
        seen[label] += 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def _rank_labels(profiles: Sequence[ProfileSummary], other: str) -> list[str]:
    """The profiles' labels, ``rank N`` (``other`` without a rank), each once."""
    return _unique_labels([f"rank {p.rank}" if p.rank is not None else other for p in profiles])


def _figure(traces: Sequence[dict[str, Any]], **layout: Any) -> go.Figure:
    """A plotly figure of ``traces`` (dicts, validated by plotly) in the report's style."""
    need_plotly()
    import plotly.graph_objects as go

    fig = go.Figure(list(traces))
    fig.update_layout(**layout, **_LAYOUT)
    return fig


def _title(text: str) -> dict[str, Any]:
    return {"text": text, "font": {"size": 14}}


def _ops_figure(profile: ProfileSummary) -> go.Figure | None:
    ops = list(profile.top_ops(TOP_OPS))[::-1]  # largest on top
    if not ops:
        return None
    bar = {
        "type": "bar",
        "x": [o.self_time_ms_per_step for o in ops],
        "y": _unique_labels([f"{o.name} [{o.device}]" if o.device else o.name for o in ops]),
        "orientation": "h",
        "customdata": [[o.calls_per_step, o.total_time_ms_per_step] for o in ops],
        "hovertemplate": (
            "%{y}<br>self %{x:.4g} ms/step<br>total %{customdata[1]:.4g} ms/step<br>"
            "%{customdata[0]:.3g} calls/step<extra></extra>"
        ),
        "marker": {"color": _COLOURS["base"]},
    }
    return _figure(
        [bar],
        title=_title(f"top {len(ops)} ops by self time per step"),
        xaxis={"title": {"text": "ms per step"}},
        height=120 + 24 * len(ops),
        margin={"l": 320, "r": 20, "t": 40, "b": 40},
    )


_BREAKDOWN = (
    ("compute_ms", "compute", "#1f77b4"),
    ("communication_not_overlapped_ms", "communication (not overlapped)", "#d62728"),
    ("free_ms", "free", "#bbbbbb"),
)


def _breakdown_figure(profiles: Sequence[ProfileSummary]) -> go.Figure | None:
    shown = [p.breakdown for p in profiles if p.breakdown is not None]
    if not shown:
        return None
    names = _rank_labels([p for p in profiles if p.breakdown is not None], "step")
    bars = []
    for field, label, colour in _BREAKDOWN:
        values = [getattr(b, field) for b in shown]
        if any(v is not None for v in values):
            bars.append(
                {
                    "type": "bar",
                    "x": [0.0 if v is None else v for v in values],
                    "y": names,
                    "orientation": "h",
                    "name": label,
                    "marker": {"color": colour},
                    "hovertemplate": f"{label}: %{{x:.4g}} ms/step<extra>%{{y}}</extra>",
                }
            )
    step = ", ".join(f"{n}: {b.step_ms:.4g} ms" for n, b in zip(names, shown, strict=True))
    return _figure(
        bars,
        barmode="stack",
        title=_title(f"step breakdown ({step})"),
        xaxis={"title": {"text": "ms per step"}},
        height=190 + 40 * len(shown),
        # the legend sits below the x axis title, in the bottom margin
        margin={"l": 90, "r": 20, "t": 40, "b": 90},
        yaxis={"autorange": "reversed"},
        legend=_LEGEND_BELOW,
    )


def _memory_figure(profiles: Sequence[ProfileSummary]) -> go.Figure | None:
    shown = [p for p in profiles if p.memory_per_step_bytes]
    if not shown:
        return None
    lines = [
        {
            "type": "scatter",
            "x": list(range(1, len(p.memory_per_step_bytes) + 1)),
            "y": [b / (1 << 20) for b in p.memory_per_step_bytes],
            "mode": "lines+markers",
            "name": f"rank {p.rank}" if p.rank is not None else "allocated",
            "hovertemplate": "step %{x}: %{y:.4g} MiB<extra></extra>",
        }
        for p in shown
    ]
    return _figure(
        lines,
        title=_title("memory over the profiled steps"),
        xaxis={"title": {"text": "profiled step"}, "dtick": 1},
        yaxis={"title": {"text": "MiB"}},
        height=320,
        margin={"l": 60, "r": 20, "t": 40, "b": 40},
    )


def _communication_figures(profiles: Sequence[ProfileSummary]) -> list[go.Figure]:
    """Per-rank heatmaps: communication time by kind, and link bandwidth by link type (each
    rank's own summary; the rank-to-rank matrix, where the profile has one, is drawn apart
    by :func:`rank_pair_heatmap`)."""
    ranks = [p for p in profiles if p.communication is not None]
    if len(ranks) < 2:
        return []
    names = _rank_labels(ranks, "?")

    def heatmap(
        z: Sequence[Sequence[float | None]], x: list[str], scale: str, unit: str, title: str
    ) -> go.Figure:
        cells = {
            "type": "heatmap",
            "z": z,
            "x": x,
            "y": names,
            "colorscale": scale,
            "texttemplate": "%{z:.3g}",
            "hovertemplate": f"%{{y}} %{{x}}: %{{z:.4g}} {unit}<extra></extra>",
            "colorbar": {"title": {"text": unit.removesuffix("/step")}},
        }
        return _figure(
            [cells],
            title=_title(title),
            height=140 + 40 * len(ranks),
            margin={"l": 90, "r": 20, "t": 40, "b": 40},
            yaxis={"autorange": "reversed"},
        )

    kinds = ("transit_ms", "wait_ms", "synchronization_ms", "idle_ms")
    comms = [p.communication for p in ranks if p.communication is not None]
    z = [[getattr(c, k) for k in kinds] for c in comms]
    x = [k.removesuffix("_ms") for k in kinds]
    out = [heatmap(z, x, "Reds", "ms/step", "communication per rank (ms per step)")]
    by_rank = [{lb.link: lb.bandwidth_gb_s for lb in c.links} for c in comms]
    links = sorted({link for by in by_rank for link in by})
    if links:
        bw = [[by.get(link) for link in links] for by in by_rank]
        x = [_label(link) for link in links]
        out.append(heatmap(bw, x, "Blues", "GB/s", "link bandwidth per rank (GB/s)"))
    return out


def _findings_html(findings: Sequence[Finding]) -> str:
    if not findings:
        return "<p class='muted'>No findings recorded for this run.</p>"
    rows = (
        f"<tr><td>{esc(f.severity.value)}</td><td>{esc(f.source)}</td><td>{esc(f.rule)}</td>"
        f"<td>{esc(f.location)}</td><td>{esc(f.message)}</td><td>{esc(f.suggestion)}</td>"
        f"<td class='num'>{esc(format_value(f.impact_ms, 'ms'))}</td></tr>"
        for f in findings
    )
    heads = ("severity", "source", "rule", "where", "what", "suggestion", "could save")
    return _table("findings", heads, rows)


# --- one profiled step as a timeline ---------------------------------------------------------

TIMELINE_WIDTH = 1080
"""Pixels of the timeline's time axis; a span narrower than one of them is binned."""
TIMELINE_GUTTER = 210
"""Pixels left of the axis for the lanes' names."""
LANE_PX = 22
IDLE_SHARE = 0.01
"""A device lane's idle gap is marked when longer than 1% of the step: the shorter ones are
the ordinary gaps between kernels (launch latency), and a mark on each would hide the long
ones. The short gaps are left inside the busy stretch around them."""
TIMELINE_LABEL = 30
"""Characters of a lane's name shown beside it (the whole name is its hover text)."""

_KIND_COLOURS: dict[SpanKind, str] = {
    SpanKind.COMPUTE: "#1f77b4",
    SpanKind.COMMUNICATION: "#d62728",
    SpanKind.MEMCPY: "#9467bd",
    SpanKind.HOST: "#17becf",
    SpanKind.OTHER: "#8c8c8c",
}
_IDLE_FILL = "#ffe9a8"


def duration_text(us: float) -> str:
    """A time given in µs, in the unit that suits it (µs, ms, s)."""
    scale, unit = next(((d, u) for d, u in ((1e6, "s"), (1e3, "ms")) if abs(us) >= d), (1, "µs"))
    return f"{us / scale:.3g} {unit}"


def idle_gaps(
    lane: TimelineLane, duration_us: float, threshold_us: float
) -> list[tuple[float, float]]:
    """The stretches of ``lane`` with nothing running that are longer than ``threshold_us``,
    as (start, length) in µs, over the whole step (before the first span and after the last
    count too). Overlapping spans make one busy stretch; a gap of ``threshold_us`` or less
    stays inside the busy stretch around it."""
    gaps: list[tuple[float, float]] = []
    at = 0.0
    for s in sorted(lane.spans, key=lambda s: s.start_us):
        if s.start_us - at > threshold_us:
            gaps.append((at, s.start_us - at))
        at = max(at, s.start_us + s.dur_us)
    if duration_us - at > threshold_us:
        gaps.append((at, duration_us - at))
    return gaps


def device_idle_us(lanes: Iterable[TimelineLane], duration_us: float) -> float:
    """The time in a step of ``duration_us`` when none of the ``lanes`` that compute or copy
    (:func:`marks_idle`) runs anything: what the device as a whole lost, where the lanes'
    own gaps add up to more than the step when one stream idles while another works."""
    busy = sorted(
        (max(s.start_us, 0.0), min(s.start_us + s.dur_us, duration_us))
        for lane in lanes
        if marks_idle(lane)
        for s in lane.spans
    )
    if not busy:
        return 0.0
    covered, at = 0.0, 0.0
    for start, end in busy:
        start = max(start, at)
        if end > start:
            covered += end - start
            at = end
    return duration_us - covered


@dataclass(frozen=True)
class TimelineDrawing:
    """A timeline drawn as SVG, and what the page says about the drawing."""

    svg: str
    lanes: int
    spans: int
    threshold_us: float
    duration_us: float
    device_idle_us: float
    """Time in the step when no lane that computes or copies runs anything
    (:func:`device_idle_us`)."""
    idle_us: float
    """The marked gaps' lengths summed over lanes: more than the step when several lanes idle
    at once."""
    drawn: int
    """Spans drawn one by one (a pixel wide or more), each with its hover text."""
    binned: int
    """Spans narrower than a pixel, drawn as ``bins``."""
    bins: int
    """Pixel columns (per lane) holding the binned spans."""
    gaps: int
    """Idle gaps marked on device lanes."""
    idle_lanes: int
    """Device lanes with at least one gap marked."""


def _tick_step(total_us: float) -> float:
    """The time between the axis's ticks: 1, 2 or 5 times a power of ten, for about 10 ticks."""
    raw = total_us / 10
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1.0, 2.0, 5.0, 10.0) if m * magnitude >= raw)


def _lane_bins(
    spans: Sequence[TimelineSpan], scale: float, width: int, y: float, h: float
) -> tuple[list[str], int]:
    """The spans narrower than a pixel as per-pixel bins: one column per pixel, coloured by
    the kind holding most of the column's time and shaded by how much of the pixel that time
    fills; neighbouring columns of the same colour and shade are one rect. Returns the rects
    and the number of columns."""
    columns: dict[int, dict[SpanKind, float]] = {}
    counts: Counter[int] = Counter()
    for s in spans:
        col = min(width - 1, max(0, int(s.start_us * scale)))
        per = columns.setdefault(col, {})
        per[s.kind] = per.get(s.kind, 0.0) + s.dur_us
        counts[col] += 1
    shaded = []  # (column - its place: equal along a run of neighbours, kind, shade, ...)
    for i, col in enumerate(sorted(columns)):
        per = columns[col]
        busy = sum(per.values())
        shade = 0.35 + 0.65 * round(min(1.0, busy * scale) * 4) / 4
        shaded.append((col - i, max(per, key=per.__getitem__), shade, col, counts[col], busy))
    out: list[str] = []
    for (_, kind, shade), group in groupby(shaded, key=lambda c: c[:3]):
        run = list(group)
        first, last, n = run[0][3], run[-1][3], sum(c[4] for c in run)
        out.append(
            f'<rect x="{first}" y="{y:.0f}" width="{last - first + 1}" height="{h:.0f}" '
            f'fill="{_KIND_COLOURS[kind]}" fill-opacity="{shade:.2f}"><title>{n} spans '
            f"narrower than a pixel, mostly {kind.value}: "
            f"{esc(duration_text(sum(c[5] for c in run)))}</title></rect>"
        )
    return out, len(columns)


def _idle_svg(start: float, length: float, total: float, scale: float, y: float, h: int) -> str:
    """One idle gap: shaded, with its length written in it when it fits."""
    x, w = start * scale, length * scale
    said = f"idle {duration_text(length)}"
    out = (
        f'<rect x="{x:.1f}" y="{y - 1:.0f}" width="{w:.1f}" height="{h + 2}" '
        f'fill="{_IDLE_FILL}" stroke="#c99a00" stroke-dasharray="3 2">'
        f"<title>{esc(said)} ({length / total:.1%} of the step) from "
        f"{esc(duration_text(start))}</title></rect>"
    )
    # the label where it fits (about 6 px a character at 10 px), the length alone if only it does
    label = next((t for t in (said, duration_text(length)) if w >= 6 * len(t) + 4), None)
    if label is not None:
        out += (
            f'<text x="{x + w / 2:.1f}" y="{y + h / 2 + 4:.0f}" text-anchor="middle" '
            f'font-size="10" fill="#6b5000" pointer-events="none">{esc(label)}</text>'
        )
    return out


def marks_idle(lane: TimelineLane) -> bool:
    """Whether a lane's idle gaps are marked: a device lane that computes or copies. Not a
    host thread, and not a lane of communication only (an HCCL plane waits between
    collectives by design; its gaps are no lost device time), nor an empty one."""
    return lane.device and any(s.kind is not SpanKind.COMMUNICATION for s in lane.spans)


def _lane_svg(
    lane: TimelineLane, y: float, total: float, scale: float, width: int, tally: dict[str, float]
) -> str:
    """One lane at height ``y``: its background, its idle gaps (:func:`marks_idle`), its spans a
    pixel wide or more one by one (grouped by kind) and the narrower ones binned; counted in
    ``tally`` (the fields of :class:`TimelineDrawing`)."""
    h = LANE_PX - 4
    parts = [f'<rect x="0" y="{y:.0f}" width="{width}" height="{h}" fill="#f5f5f5"/>']
    if marks_idle(lane):
        gaps = idle_gaps(lane, total, IDLE_SHARE * total)
        tally["gaps"] += len(gaps)
        tally["idle_lanes"] += bool(gaps)
        tally["idle_us"] += sum(length for _, length in gaps)
        parts += [_idle_svg(start, length, total, scale, y, h) for start, length in gaps]
    wide: dict[SpanKind, list[str]] = {}
    narrow: list[TimelineSpan] = []
    for s in lane.spans:
        w = s.dur_us * scale
        if w < 1.0:
            narrow.append(s)
            continue
        wide.setdefault(s.kind, []).append(
            f'<rect x="{s.start_us * scale:.1f}" y="{y + 1:.0f}" width="{w:.1f}" '
            f'height="{h - 2}"><title>{esc(_clip(s.name, 160))} · '
            f"{esc(duration_text(s.dur_us))} · {s.kind.value}</title></rect>"
        )
    rects, bins = _lane_bins(narrow, scale, width, y + 1, h - 2)
    parts += rects
    for kind, drawn in wide.items():
        parts.append(f'<g fill="{_KIND_COLOURS[kind]}">{"".join(drawn)}</g>')
    tally["bins"] += bins
    tally["binned"] += len(narrow)
    tally["drawn"] += sum(map(len, wide.values()))
    name = esc(" ".join(lane.name.split()))
    return f'<g class="lane" data-lane="{name}">{"".join(parts)}</g>'


def _time_axis(total: float, scale: float, top: int, bottom: int) -> str:
    step = _tick_step(total)
    ticks = []
    for i in range(int(total / step) + 1):
        x = i * step * scale
        label = "0" if i == 0 else esc(duration_text(i * step))
        ticks.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 4}" y2="{bottom}" stroke="#ddd"/>'
            f'<text x="{x:.1f}" y="{top - 8}" text-anchor="middle" fill="#555">{label}</text>'
        )
    return "".join(ticks)


def timeline_svg(timeline: Timeline, width: int = TIMELINE_WIDTH) -> TimelineDrawing:
    """``timeline`` as an inline SVG: device lanes, then host lanes (:func:`_lane_svg`); spans
    narrower than a pixel binned (:func:`_lane_bins`), so 10^4 spans stay a page that opens
    at once."""
    end = max((s.start_us + s.dur_us for lane in timeline.lanes for s in lane.spans), default=0)
    total = max(timeline.duration_us, end) or 1.0
    scale = width / total
    top = 26
    y = float(top)
    names: list[str] = []
    lanes: list[str] = []
    tally: dict[str, float] = defaultdict(float)
    for heading, device in (("device streams", True), ("host threads", False)):
        mine = [lane for lane in timeline.lanes if lane.device is device]
        if not mine:
            continue
        names.append(
            f'<text x="4" y="{y + LANE_PX - 6:.0f}" font-weight="600" fill="#444">{heading}</text>'
        )
        y += LANE_PX
        for lane in mine:
            name = " ".join(lane.name.split())
            names.append(
                f'<text x="12" y="{y + LANE_PX / 2 + 2:.0f}"><title>{esc(name)}</title>'
                f"{esc(_clip(name, TIMELINE_LABEL))}</text>"
            )
            lanes.append(_lane_svg(lane, y, total, scale, width, tally))
            y += LANE_PX
    height = int(y) + 6
    n_spans = sum(len(lane.spans) for lane in timeline.lanes)
    counts = {k: int(tally[k]) for k in ("drawn", "binned", "bins", "gaps", "idle_lanes")}
    svg = (
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" '
        f'width="{TIMELINE_GUTTER + width + 30}" height="{height}" '
        'font-family="system-ui,sans-serif" font-size="11" '
        f'data-lanes="{len(lanes)}" data-spans="{n_spans}" data-drawn="{counts["drawn"]}" '
        f'data-bins="{counts["bins"]}" role="img" aria-label="timeline of {esc(timeline.step)}">'
        f'{"".join(names)}<g transform="translate({TIMELINE_GUTTER},0)">'
        f"{_time_axis(total, scale, top, height - 6)}{''.join(lanes)}</g></svg>"
    )
    idle = device_idle_us(timeline.lanes, total)
    return TimelineDrawing(
        svg, len(lanes), n_spans, IDLE_SHARE * total, total, idle, tally["idle_us"], **counts
    )


def timeline_html(timeline: Timeline, width: int = TIMELINE_WIDTH) -> str:
    """The run page's timeline section: what is drawn and how, the legend, the SVG."""
    d = timeline_svg(timeline, width)
    if d.spans == 0:
        return f"<p class='muted'>The timeline of {esc(timeline.step)} holds no spans.</p>"
    said = [
        f"{esc(timeline.step)}: {esc(duration_text(d.duration_us))}, {d.spans:,} spans on "
        f"{plural(d.lanes, 'lane')} (device streams first, then host threads)."
    ]
    if d.binned:
        said.append(
            f"<b>{d.binned:,} spans narrower than a pixel drawn as {d.bins:,} aggregated "
            "bins</b> (one pixel column of a lane each, coloured by the kind holding most of "
            f"its time, darker the more of the pixel it fills); the other {d.drawn:,} are drawn "
            "one by one (hover: name, duration)."
        )
    else:
        said.append("Every span is drawn one by one (hover: name, duration).")
    said.append(
        f"Idle gaps longer than {IDLE_SHARE:.0%} of the step "
        f"({esc(duration_text(d.threshold_us))}) are shaded on the device lanes that compute "
        "or copy (a communication-only lane waits between collectives by design): "
        f"{plural(d.gaps, 'gap')} on {plural(d.idle_lanes, 'lane')}."
    )
    if d.gaps:  # one stream idles while another works: the lanes' gaps are not the device's
        said.append(
            "No stream that computes or copies ran anything for "
            f"{esc(duration_text(d.device_idle_us))} "
            f"({d.device_idle_us / d.duration_us:.0%} of the step)."
        )
    if timeline.dropped_spans > 0:
        said.append(
            f"<b>{timeline.dropped_spans:,} spans were left out</b> when the profile was "
            "stored (the shortest first, to keep it bounded): they are not drawn, and a gap "
            "may hold some of them."
        )
    keys = [(_KIND_COLOURS[k], k.value) for k in SpanKind] + [(_IDLE_FILL, "idle gap")]
    legend = "".join(f"<span><i style='background:{c}'></i>{esc(text)}</span>" for c, text in keys)
    return (
        f"<p id='timeline-about'>{' '.join(said)}</p><p class='legend'>{legend}</p>"
        f"<div class='timeline-box'>{d.svg}</div>"
    )


# --- rank-to-rank traffic --------------------------------------------------------------------

UtilisationOf = Callable[[RankPair], float | None]
"""A pair's bandwidth as a share of its link's nominal bandwidth (1.0 = nominal), None when
the nominal bandwidth of its link is not known (the app passes
:func:`perfgate.advisor.cluster.pair_utilisation` with the suite's thresholds)."""

_UTIL_STOPS = (0.0, 0.25, 0.5, 0.75, 1.0)
_UTIL_COLOURS = ("f7fbff", "c6dbef", "6baed6", "2171b5", "08306b")
"""The colours of the scale at :data:`_UTIL_STOPS`, linear between them."""
_LOCAL_FILL = "#e3e3e3"
HEATMAP_TEXT_RANKS = 16
"""Above this many ranks the cells are too small for text: hover text only."""


def utilisation_colour(share: float) -> str:
    """The colour of a bandwidth utilisation on the one fixed scale, 0 to 100% of the
    link's nominal bandwidth (above 100% is drawn as 100%): the same utilisation is the
    same colour on every page, whatever the other pairs did."""
    u = min(1.0, max(0.0, share))
    i = max(1, bisect_left(_UTIL_STOPS, u))
    f = (u - _UTIL_STOPS[i - 1]) / (_UTIL_STOPS[i] - _UTIL_STOPS[i - 1])
    low, high = (bytes.fromhex(_UTIL_COLOURS[k]) for k in (i - 1, i))
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(low, high, strict=True))


def rank_pairs_of(run: RunRecord) -> tuple[RankPair, ...]:
    """The run's rank-to-rank traffic: the job's (``run.profile``) when it has it, else the
    ranks' own rows together, each (src, dst, link) once."""
    if run.profile is not None and run.profile.rank_pairs:
        return run.profile.rank_pairs
    seen: dict[tuple[int, int, str], RankPair] = {}
    for p in run.rank_profiles:
        for pair in p.rank_pairs:
            seen.setdefault((pair.src, pair.dst, pair.link), pair)
    return tuple(seen.values())


def _is_local(pair: RankPair) -> bool:
    return pair.src == pair.dst or pair.link.upper() == "LOCAL"


def _share(pair: RankPair, utilisation: UtilisationOf | None) -> float | None:
    """``utilisation`` of a pair between two ranks, else None."""
    return None if utilisation is None or _is_local(pair) else utilisation(pair)


def rank_pair_heatmap(pairs: Sequence[RankPair], utilisation: UtilisationOf | None = None) -> str:
    """A src x dst matrix of the pairs as inline SVG, each cell coloured by its bandwidth's
    share of the link's nominal bandwidth on a fixed 0-100% scale (:func:`utilisation_colour`)
    and labelled with link, GB/s, % of nominal and wait; a rank to itself (LOCAL) greyed. A
    cell with several links shows the one that carried most; its hover text lists all."""
    ranks = sorted({p.src for p in pairs} | {p.dst for p in pairs})
    at = {r: i for i, r in enumerate(ranks)}
    cells: dict[tuple[int, int], list[RankPair]] = {}
    for p in pairs:
        cells.setdefault((p.src, p.dst), []).append(p)
    text = len(ranks) <= HEATMAP_TEXT_RANKS
    cw, ch = (122, 66) if text else (26, 26)
    left, top = 78, 34
    parts: list[str] = []
    for i, r in enumerate(ranks):
        parts.append(
            f'<text x="{left - 8}" y="{top + i * ch + ch / 2 + 4:.0f}" text-anchor="end">'
            f"rank {r}</text>"
            f'<text x="{left + i * cw + cw / 2:.0f}" y="{top - 8}" text-anchor="middle">'
            f"rank {r}</text>"
        )
    for (src, dst), held in sorted(cells.items()):
        held.sort(key=lambda p: -p.transit_size_mb)
        main = held[0]
        x, y = left + at[dst] * cw, top + at[src] * ch
        share = _share(main, utilisation)
        if _is_local(main):
            fill, ink = _LOCAL_FILL, "#777"
        elif share is None:
            fill, ink = "#ffffff", "#333"
        else:
            fill, ink = utilisation_colour(share), "#fff" if share >= 0.55 else "#111"
        title = []
        for p in held:
            u = _share(p, utilisation)
            pct = "" if u is None else f" ({u:.0%} of nominal)"
            wait = "" if p.wait_ms is None else f", wait {format_value(p.wait_ms, 'ms')}"
            title.append(
                f"rank {p.src} → rank {p.dst} {p.link}: {p.bandwidth_gb_s:.3g} GB/s{pct}, "
                f"{p.transit_size_mb:.4g} MB in {format_value(p.transit_time_ms, 'ms')}"
                f"{wait}, {p.ops} ops"
            )
        cell = [
            f'<rect x="{x}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="{fill}" '
            f'stroke="#bbb"><title>{esc("; ".join(title))}</title></rect>'
        ]
        if text:
            lines = [main.link + (f" +{len(held) - 1}" if len(held) > 1 else "")]
            lines.append(f"{main.bandwidth_gb_s:.3g} GB/s")
            if not _is_local(main):
                lines.append("nominal unknown" if share is None else f"{share:.0%} of nominal")
            if main.wait_ms is not None:
                lines.append(f"wait {format_value(main.wait_ms, 'ms')}")
            for k, line in enumerate(lines):
                weight = ' font-weight="600"' if k == 0 else ""
                cell.append(
                    f'<text x="{x + 6}" y="{y + 14 + k * 14}" fill="{ink}"{weight} '
                    f'pointer-events="none">{esc(line)}</text>'
                )
        parts.append("".join(cell))
    # the fixed colour scale, 0 to 100% of nominal
    sx, sy, sw = left + len(ranks) * cw + 24, top, 14
    sh = max(120, min(260, len(ranks) * ch))
    stops = "".join(
        f'<stop offset="{1 - u:.2f}" stop-color="{utilisation_colour(u)}"/>'
        for u in reversed(_UTIL_STOPS)
    )
    scale_bar = (
        f'<defs><linearGradient id="pg-util" x1="0" y1="0" x2="0" y2="1">{stops}'
        f'</linearGradient></defs><rect x="{sx}" y="{sy}" width="{sw}" height="{sh}" '
        f'fill="url(#pg-util)" stroke="#999"/>'
        + "".join(
            f'<text x="{sx + sw + 4}" y="{sy + (1 - u) * sh + 4:.0f}">{u:.0%}</text>'
            for u in _UTIL_STOPS
        )
        + f'<text x="{sx - 2}" y="{sy - 8}">of nominal</text>'
    )
    width = sx + sw + 80
    height = top + max(len(ranks) * ch, sh) + 28
    parts.append(
        f'<text x="{left}" y="{height - 8}" fill="#555">rows: source rank · columns: '
        "destination rank</text>"
    )
    return (
        f'<svg class="rank-pairs" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" font-family="system-ui,sans-serif" font-size="11" '
        f'data-ranks="{len(ranks)}" role="img" aria-label="rank-to-rank bandwidth">'
        f"{scale_bar}{''.join(parts)}</svg>"
    )


def rank_pairs_html(pairs: Sequence[RankPair], utilisation: UtilisationOf | None) -> str:
    known = any(_share(p, utilisation) is not None for p in pairs)
    why = (
        "Colour: the pair's bandwidth as a share of its link's nominal bandwidth, on a fixed "
        "0–100% scale (the same colour means the same utilisation on every page, it is not "
        "stretched to the values shown); white: the link's nominal bandwidth is not known; "
        "grey: a rank to itself (LOCAL)."
    )
    if not known:
        why += " No link here has a known nominal bandwidth: the cells show GB/s only."
    return (
        "<p class='muted'>Traffic of one profiled step from each rank (row) to each rank "
        f"(column). {esc(why)}</p><div class='timeline-box'>"
        f"{rank_pair_heatmap(pairs, utilisation)}</div>"
    )


# --- utilisation and budgets -----------------------------------------------------------------

UTILISATION_METRICS = (
    "device_busy_pct",
    "aicore_util_pct",
    "cube_util_pct",
    "vector_util_pct",
    "l2_hit_pct",
    "hbm_bandwidth_gb_s",
    "sm_occupancy_pct",
)


def _why_not(profile: ProfileSummary, metric: str) -> list[str]:
    """What the profile's notes say about ``metric``'s absence, each without the metric
    names it starts with (``device_busy_pct, sm_occupancy_pct: no kernels in the trace``)."""
    out = []
    for note in profile.notes:
        if metric in note:
            names, colon, said = note.partition(":")
            out.append(said.strip() if colon and metric in names else note)
    return out


def shown_utilisation(profiles: Sequence[ProfileSummary]) -> list[str]:
    """The utilisation metrics a run page shows: each one some profile holds, or whose absence
    its notes explain (``l2_hit_pct: no l2_cache.csv``). A CPU run has none: no rows of Ascend
    or CUDA metrics that could never be computed."""
    return [
        metric
        for metric in UTILISATION_METRICS
        if any(metric in p.utilisation or _why_not(p, metric) for p in profiles)
    ]


def utilisation_html(profiles: Sequence[ProfileSummary]) -> str:
    """The profiles' :func:`shown_utilisation` metrics, one column per rank: the value, or why
    it could not be computed (the notes that name it); one line in place of none."""
    metrics = shown_utilisation(profiles)
    if not metrics:
        return (
            "<p class='muted' id='utilisation'>No device utilisation: the profile holds no "
            "accelerator's metrics (a CPU run).</p>"
        )
    names = [esc(n) for n in _rank_labels(profiles, "profile")]
    rows = []
    for metric in metrics:
        spec = lookup(metric)
        unit = spec.unit if spec else ""
        cells = []
        for p in profiles:
            value = p.utilisation.get(metric)
            if value is not None:
                cells.append(f"<td class='num'>{esc(format_value(value, unit))}</td>")
                continue
            said = "; ".join(_why_not(p, metric)) or "not in this profile"
            cells.append(f"<td class='muted'>not computed: {esc(said)}</td>")
        about = esc(spec.description) if spec else ""
        rows.append(
            f"<tr><td><code>{esc(metric)}</code></td>{''.join(cells)}"
            f"<td class='muted'>{about}</td></tr>"
        )
    return _table("utilisation", ("utilisation", *names, "what"), rows)


def budget_text(c: Comparison) -> str:
    """A budget's comparison in its own words: ``over budget: latency_p99_ms 140 ms > 100 ms``,
    ``within budget: aicore_util_pct 72% > 70%`` (the sign compares the run's value with the
    limit); the suite's wording of the budget where the limit is missing or equals the value."""
    head = "over budget" if c.verdict is Verdict.OVER_BUDGET else "within budget"
    value = format_value(c.current_centre, c.unit)
    if c.limit is None or c.current_centre is None:
        stated = f" ({c.budget})" if c.budget else ""
        return f"{head}: {c.metric} {value}{stated}"
    v, limit = c.current_centre, c.limit
    sign = ">" if v > limit else "<" if v < limit else "="
    text = f"{head}: {c.metric} {value} {sign} {format_value(limit, c.unit)}"
    return text + (f" (budget {c.budget})" if sign == "=" and c.budget else "")


def breaches(budgets: Sequence[Comparison]) -> list[Comparison]:
    """The breached ones of a run's budget comparisons."""
    return [c for c in budgets if c.verdict is Verdict.OVER_BUDGET]


def _budgets_html(budgets: Sequence[Comparison]) -> str:
    """The breached budgets of a run, one each, in the over-budget style."""
    return "".join(f"<span class='over'>{esc(budget_text(c))}</span> " for c in breaches(budgets))


def _budget_table(budgets: Sequence[Comparison]) -> str:
    """Every budget of the latest run, the breached ones first."""
    budgets = sorted(budgets, key=lambda c: (c.verdict is not Verdict.OVER_BUDGET, c.metric))
    if not budgets:
        return ""
    rows = (
        f"<tr><td>{esc(c.metric)}</td><td class='num'>{esc(format_value(c.current_centre, c.unit))}"
        f"</td><td class='num'>{esc(c.budget or format_value(c.limit, c.unit))}</td>"
        f"<td><span class='{'over' if c.verdict is Verdict.OVER_BUDGET else 'ok'}'>"
        f"{esc(budget_text(c))}</span></td></tr>"
        for c in budgets
    )
    return (
        "<h2>Budgets</h2><p class='muted'>Absolute limits of the suite's [budgets], judged on "
        "the latest run alone (history or not); a breach is not a regression.</p>"
        + _table("budgets", ("metric", "latest", "budget", "verdict"), rows)
    )


@dataclass(frozen=True)
class RunVerdict:
    """How a run with a page was judged: the latest base-branch run against the runs before
    it, another branch's against the base branch's window (as the gate judges a PR)."""

    against: str
    verdict: Verdict | None
    deciding: Comparison | None = None
    """The comparison the headline shows (:func:`headline_comparison`)."""
    budgets: tuple[Comparison, ...] = ()
    beside: tuple[str, ...] = ()
    """The metrics judged and shown, not deciding (a wall time where the CPU time decides)."""


def run_verdicts(view: BenchmarkView, base: str) -> dict[str, RunVerdict]:
    """The verdict of each of the view's runs that was judged, by run id."""
    out: dict[str, RunVerdict] = {}

    def beside(judged: Iterable[Comparison]) -> tuple[str, ...]:
        return tuple(sorted({c.metric for c in judged if not c.decides}))

    mine = view_comparisons(view)
    if view.runs and view.runs[0].git.branch == base and (mine or view.budgets):
        out[view.runs[0].id] = RunVerdict(
            f"the runs before it on {base}",
            view.verdict,
            headline_comparison(mine),
            view.budgets,
            beside(mine),
        )
    for v in view.branches:
        out[v.run_id] = RunVerdict(
            f"{base}'s baseline window",
            v.verdict,
            v.comparison,
            v.budgets,
            beside(view_comparisons(view, v.run_id)),
        )
    return out


def _run_headline(judged: RunVerdict | None) -> str:
    """The run page's headline: its verdict, the metric that decides it with its change and
    interval, the metrics shown beside it; budgets first, in their own words."""
    if judged is None:
        return "<p class='headline muted' id='headline'>Not judged: no gate compared this run.</p>"
    verdict = _verdict_html(judged.verdict) if judged.verdict is not None else ""
    beside = (
        f" <span class='muted'>(shown, not deciding: {esc(', '.join(judged.beside))})</span>"
        if judged.beside
        else ""
    )
    return (
        f"<p class='headline' id='headline'>{_budgets_html(judged.budgets)}{verdict}"
        f"{headline_html(judged.deciding)} <span class='muted'>against "
        f"{esc(judged.against)}</span>{beside}</p>"
    )


def device_text(fp: Fingerprint) -> str:
    """A run's device in words: ``npu Ascend910B3 x8``; without a count where the run has
    none (an ingested file that names no device: ``host Intel Xeon``, never ``x0``)."""
    device = " ".join(x for x in (fp.device_kind, fp.device_model) if x)
    device = device or f"host {fp.cpu_model}".strip()
    return f"{device} x{fp.device_count}" if fp.device_count > 0 else device


def render_run(
    run: RunRecord,
    utilisation: UtilisationOf | None = None,
    judged: RunVerdict | None = None,
) -> str:
    """One run's page, headed by its verdict (``judged``; None: not judged); ``utilisation``
    judges its rank pairs against their links' nominal bandwidths (None: the matrix shows
    GB/s only)."""
    need_plotly()
    profiles = list(run.rank_profiles) or ([] if run.profile is None else [run.profile])
    main = run.profile or (profiles[0] if profiles else None)
    figures = [
        ("ops", None if main is None else _ops_figure(main), "The profile lists no ops."),
        ("breakdown", _breakdown_figure(profiles), "No step breakdown in the profile."),
        ("memory", _memory_figure(profiles), "The profile has no per-step memory readings."),
        *((f"comm-{i}", fig, "") for i, fig in enumerate(_communication_figures(profiles))),
    ]
    plots = []
    for name, fig, missing in figures:
        if fig is not None:
            plots.append(f'<section class="plot">{_plot(fig, f"run-{name}")}</section>')
        elif missing and profiles:
            plots.append(f"<p class='muted'>{esc(missing)}</p>")
    deciding = judged.deciding.metric if judged and judged.deciding else None
    beside = set(judged.beside) if judged else set()

    def role(metric: str) -> str:
        if metric == deciding:
            return " <b>(decides)</b>"
        return " <span class='muted'>(shown, not deciding)</span>" if metric in beside else ""

    measurements = "".join(
        f"<tr><td>{esc(m.metric)}{role(m.metric)}</td>"
        f"<td class='num'>{esc(format_value(m.summary.centre, m.unit))}</td>"
        f"<td class='num'>{m.summary.n}</td>"
        f"<td class='num'>{esc(format_value(m.summary.p10, m.unit))} – "
        f"{esc(format_value(m.summary.p90, m.unit))}</td></tr>"
        for m in run.measurements
    )
    notes = "".join(f"<li>{esc(n)}</li>" for p in profiles for n in p.notes)
    # with a profile there is a plot, or why not, for its breakdown and memory at least
    profile_part = "".join(plots) or "<p class='muted'>This run was recorded without a profile.</p>"
    extra = []
    if profiles:
        extra.append(f"<h3>Utilisation</h3>{utilisation_html(profiles)}")
    if main is not None and main.timeline is not None:
        extra.append(f"<h2>Timeline of one step</h2>{timeline_html(main.timeline)}")
    pairs = rank_pairs_of(run)
    if pairs:
        extra.append(f"<h2>Rank-to-rank traffic</h2>{rank_pairs_html(pairs, utilisation)}")
    fp = run.fingerprint
    body = f"""<h1>{esc(run.benchmark)} · run <code>{esc(run.id)}</code></h1>
{_run_headline(judged)}
<p><a href="../{esc(benchmark_path(run.benchmark))}">history of {esc(run.benchmark)}</a> ·
branch {_at_commit(run.git.branch, run.git.commit, 12)} ·
started {esc(run.started_at.isoformat())} · {esc(device_text(fp))}
· testbed <code>{esc(fp.key())}</code></p>
<table id="measurements"><thead><tr><th>metric</th><th>centre</th><th>samples</th>
<th>p10 – p90</th></tr></thead><tbody>{measurements}</tbody></table>
<h2>Profile</h2>
{profile_part}
{"".join(extra)}
{f"<ul class='muted'>{notes}</ul>" if notes else ""}
<h2>Findings</h2>
{_findings_html(run.findings)}"""
    return _page(f"{run.benchmark} {run.id} · perfgate", body, depth=1)


def render_benchmark_pages(view: BenchmarkView, site: SiteView) -> dict[str, str]:
    """A benchmark's history page and its runs' pages, by path."""
    pages = {benchmark_path(view.name): render_benchmark(view, site)}
    judged = run_verdicts(view, site.branch)
    for run in view.runs:
        pages.setdefault(run_path(run.id), render_run(run, site.utilisation, judged.get(run.id)))
    return pages
