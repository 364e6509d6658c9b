"""The HTML history report: a static site, pure given its data (see :mod:`perfgate.app.site`).

``render_site`` returns every page as text, keyed by its path relative to the site root:

* ``index.html``: every benchmark with the latest verdict on the base branch and a sparkline
  of its primary metric's trend (:func:`perfgate.reporters.series.trend_values`, the same
  series as the PR comment's trend column).
* ``benchmarks/<name>.html``: per metric, the history plot: the base branch's run centres in
  run order, the noise band of the current baseline window (its median and the prediction
  band of :func:`perfgate.stats.band.prediction_band`, the band the gate judges against),
  the change points with their commit ranges, and other branches' (PR) runs apart as
  diamonds placed beside the base-branch run they followed. Hovering a run shows its value,
  the 95% interval of its centre, run id and commit.
* ``runs/<id>.html``: one run's profile: top ops, the step breakdown (compute /
  communication not overlapped / free, per rank for a multi-device job), the memory curve
  over the profiled steps, per-rank communication heatmaps and the advisor's findings.

Pages load ``plotly.min.js`` from the site root by a relative path: the site works from
``file://``, as a CI artifact, without a server or the internet. Every name that comes from
data is HTML-escaped, in the page and in plot labels.

To keep 100 benchmarks x 1,000 runs small, a history plot carries no per-point strings:
the base-branch trace holds x (the run's row in the page's run table), y and the interval;
a small script fills in the hover texts from the run table, which each page holds once.
"""

from __future__ import annotations

import base64
import html
import math
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from hashlib import sha256
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from perfgate import __version__
from perfgate.errors import require
from perfgate.models import (
    Comparison,
    Direction,
    Finding,
    ProfileSummary,
    RunPoint,
    RunRecord,
    Verdict,
)
from perfgate.reporters.render import format_change, format_value

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from perfgate.models import Band, DetectedChange

PLOTLY_JS = "plotly.min.js"
TOP_OPS = 15
MAX_LABEL = 60
RUN_ID_CHARS = 12
COMMIT_CHARS = 10
PRIMARY_METRICS = ("step_time_ms", "throughput_samples_per_s")

_COLOURS = {
    "base": "#1f77b4",
    "other": "#ff7f0e",
    "band": "rgba(31,119,180,0.13)",
    "regression": "#d62728",
    "improvement": "#2ca02c",
}
_TESTBED_COLOURS = ("#1f77b4", "#9467bd", "#17becf", "#8c564b")
_VERDICT_CLASS = {
    Verdict.REGRESSION: "bad",
    Verdict.INCONCLUSIVE: "warn",
    Verdict.INCOMPARABLE: "warn",
    Verdict.IMPROVEMENT: "good",
    Verdict.UNCHANGED: "ok",
    Verdict.NO_BASELINE: "ok",
}
_PLOT_CONFIG = {"displaylogo": False, "responsive": True}
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
    """The primary metric's comparison, when it was judged."""


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


@dataclass(frozen=True)
class SiteView:
    project: str
    branch: str
    generated_at: datetime
    benchmarks: tuple[BenchmarkView, ...]


# --- small helpers ---------------------------------------------------------------------------


def esc(text: object) -> str:
    """``text`` for HTML (element content and quoted attributes)."""
    return html.escape(str(text), quote=True)


def _label(text: str, limit: int = MAX_LABEL) -> str:
    """A data string for a plot label or hover text: short, HTML-escaped, no template
    placeholders (plotly reads ``%{...}`` in hover templates)."""
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return esc(flat).replace("{", "&#123;").replace("}", "&#125;").replace("%", "&#37;")


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
    import json

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


def _typed(values: Sequence[float], dtype: str = "f8") -> dict[str, str]:
    """A plotly.js typed-array spec: the numbers in base64 (about 11 bytes per float64,
    against 18 or more as JSON text)."""
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
footer{margin-top:2rem;color:#888;font-size:.85rem}
code{background:#f4f4f4;padding:0 .2rem}
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
    use (:func:`perfgate.reporters.render.format_value`: KiB, MiB, GiB by the largest value),
    any other unit as is."""
    if unit != "bytes":
        return 1.0, unit
    top = max((abs(v) for v in values if math.isfinite(v)), default=0.0)
    for scale, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if top >= scale:
            return float(scale), name
    return 1.0, "B"


def _verdict_html(verdict: Verdict | None) -> str:
    if verdict is None:
        return '<span class="muted">no run</span>'
    return f'<span class="{_VERDICT_CLASS[verdict]}">{esc(verdict.value.replace("_", " "))}</span>'


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


def primary_metric(view: BenchmarkView) -> MetricView | None:
    """The metric the overview shows: step time, else throughput, else the first."""
    by_name = {m.metric: m for m in view.metrics}
    for name in PRIMARY_METRICS:
        if name in by_name:
            return by_name[name]
    return view.metrics[0] if view.metrics else None


# --- the overview ----------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexRow:
    """One benchmark's row of the overview, rendered."""

    name: str
    verdict: Verdict | None
    html: str
    branch_verdicts: tuple[Verdict | None, ...] = ()
    """The verdicts of the other branches shown in the row (for the overview's summary)."""


def _branches_html(b: BenchmarkView, base: str, root: str = "") -> str:
    """The newest other branches' verdicts against ``base``, each labelled with its branch
    and linked to the run's page."""
    items = []
    for v in b.branches:
        c = v.comparison
        change = f" {esc(format_change(c))}" if c is not None and c.change_pct is not None else ""
        items.append(
            f"<div class='branch'><code>{esc(v.branch)}</code>: "
            f"{_verdict_html(v.verdict) if v.verdict else '<span class=muted>not judged</span>'}"
            f"{change} <a href='{esc(root + run_path(v.run_id))}' title='vs {esc(base)}'>"
            f"{esc(v.run_id[:RUN_ID_CHARS])}</a></div>"
        )
    return "".join(items) or "<span class='muted'>none</span>"


def index_row(b: BenchmarkView, branch: str) -> IndexRow:
    primary = primary_metric(b)
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
        f'<td class="verdict">{_verdict_html(b.verdict)}</td>'
        f'<td class="branches">{_branches_html(b, branch)}</td>'
        f"<td>{metric}</td><td class='num'>{value}</td><td class='num'>{change}</td>"
        f"<td>{spark}</td><td class='num'>{runs}</td><td class='num'>{changes}</td>"
        f"<td>{run_link}</td></tr>",
        tuple(v.verdict for v in b.branches),
    )


def render_index(site: SiteView, rows: Sequence[IndexRow] | None = None) -> str:
    """The overview; ``rows`` (default: those of ``site.benchmarks``) in name order."""
    if rows is None:
        rows = [index_row(b, site.branch) for b in site.benchmarks]
    rows = sorted(rows, key=lambda r: r.name)
    counts: dict[str, int] = {}
    for r in rows:
        key = r.verdict.value if r.verdict else "no run"
        counts[key] = counts.get(key, 0) + 1
    summary = ", ".join(f"{n} {esc(k.replace('_', ' '))}" for k, n in sorted(counts.items()))
    theirs: dict[str, int] = {}
    for r in rows:
        for v in r.branch_verdicts:
            key = v.value if v else "not judged"
            theirs[key] = theirs.get(key, 0) + 1
    other = ", ".join(f"{n} {esc(k.replace('_', ' '))}" for k, n in sorted(theirs.items()))
    body = f"""<h1>perfgate: {esc(site.project)}</h1>
<p>Latest verdict of each benchmark on <b>{esc(site.branch)}</b> (its latest run against the
runs before it) · {len(rows)} benchmarks: {summary or "none"} ·
generated {esc(site.generated_at.strftime("%Y-%m-%d %H:%M %Z"))}</p>
<p>Other branches (PRs): the latest run of the newest branches of each benchmark, judged
against {esc(site.branch)}'s baseline window as the gate judges a PR: {other or "none"}</p>
<p class="muted">Trend: the baseline window of the latest run, oldest first, then that run
(the PR comment's trend column draws the same series).</p>
<table id="overview">
<thead><tr><th>benchmark</th><th>verdict on {esc(site.branch)}</th>
<th>other branches vs {esc(site.branch)}</th><th>metric</th><th>latest</th>
<th>change [95% CI]</th><th>trend</th><th>runs</th><th>change points</th><th>latest run</th></tr>
</thead>
<tbody>
{"".join(r.html for r in rows)}
</tbody></table>"""
    return _page(f"perfgate: {site.project}", body, depth=0)


# --- a benchmark's history -------------------------------------------------------------------


def _run_table(view: BenchmarkView) -> tuple[list[list[str]], dict[str, int], list[datetime]]:
    """The page's base-branch runs, oldest first: [[run id, commit]], row of each id, and
    their start times (to place other branches' runs beside them)."""
    seen: dict[str, RunPoint] = {}
    for m in view.metrics:
        for p in m.base:
            seen.setdefault(p.run_id, p)
    ordered = sorted(seen.values(), key=lambda p: (p.started_at, p.run_id))
    table = [[p.run_id[:RUN_ID_CHARS], p.commit[:COMMIT_CHARS] or "unknown"] for p in ordered]
    rows = {p.run_id: i for i, p in enumerate(ordered)}
    return table, rows, [p.started_at for p in ordered]


def _other_table(view: BenchmarkView) -> tuple[list[list[str]], dict[str, int]]:
    """The page's other-branch runs: [[run id, commit, branch]] and the row of each id."""
    seen: dict[str, RunPoint] = {}
    for m in view.metrics:
        for p in m.others:
            seen.setdefault(p.run_id, p)
    ordered = sorted(seen.values(), key=lambda p: (p.started_at, p.run_id))
    table = [
        [p.run_id[:RUN_ID_CHARS], p.commit[:COMMIT_CHARS] or "unknown", _label(p.branch, 40)]
        for p in ordered
    ]
    return table, {p.run_id: i for i, p in enumerate(ordered)}


def history_figure(
    m: MetricView,
    branch: str,
    rows: Mapping[str, int],
    starts: Sequence[datetime],
    other_rows: Mapping[str, int],
) -> dict[str, Any]:
    """The history plot of one metric as a plain plotly figure dict.

    Built as a dict, not with graph_objects: a site has hundreds of these and validating
    each costs more than the rest of the report (tests validate them with ``go.Figure``).
    """
    scale, shown_unit = chart_scale(m.unit, [p.centre for p in (*m.base, *m.others)])
    unit = _label(shown_unit, 20)
    fmt = ".1f" if m.unit == "bytes" else ".4g"  # as format_value writes bytes in tables

    def scaled(v: float | None) -> float | None:
        return None if v is None else v / scale

    traces: list[dict[str, Any]] = []
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    cis = m.base_ci or (None,) * len(m.base)
    testbeds: dict[str, list[int]] = {}
    for i, p in enumerate(m.base):
        testbeds.setdefault(p.fingerprint_key, []).append(i)
    for n, (key, idx) in enumerate(testbeds.items()):
        name = _label(branch, 40)
        if len(testbeds) > 1:
            name += f" · testbed {_label(key[:8])}"
        colour = _TESTBED_COLOURS[n % len(_TESTBED_COLOURS)]
        xs = [rows[m.base[i].run_id] for i in idx]
        contiguous = xs == list(range(xs[0], xs[0] + len(xs)))
        traces.append(
            {
                "type": "scatter",
                **({"x0": xs[0], "dx": 1} if contiguous else {"x": xs}),
                "y": _typed([m.base[i].centre / scale for i in idx], "f4"),
                "customdata": [
                    None if (ci := cis[i]) is None else float(f"{ci / scale:.3g}") for i in idx
                ],
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
    if m.others:
        other_cis = m.other_ci or (None,) * len(m.others)
        judged = {c.current_run_id: c for c in m.branch_comparisons}
        by_branch: dict[str, list[tuple[RunPoint, float | None]]] = {}
        for p, half in zip(m.others, other_cis, strict=True):
            by_branch.setdefault(p.branch, []).append((p, half))
        # newest branch first in the legend
        order = sorted(by_branch, key=lambda b: max(p.started_at for p, _ in by_branch[b]))
        for name in reversed(order):
            points = by_branch[name]
            latest = judged.get(points[-1][0].run_id) if points else None
            texts = []
            for p, _ in points:
                judged_c = judged.get(p.run_id)
                if judged_c is None:
                    texts.append("not judged (an earlier run of the branch)")
                else:
                    said = f"{_verdict_text(judged_c.verdict)} {format_change(judged_c)}"
                    texts.append(_label(f"{said} vs {branch}", 80))
            verdict = f": {_verdict_text(latest.verdict)}" if latest is not None else ""
            bad = latest is not None and latest.verdict is Verdict.REGRESSION
            good = latest is not None and latest.verdict is Verdict.IMPROVEMENT
            colour = _COLOURS["regression" if bad else "improvement" if good else "other"]
            traces.append(
                {
                    "type": "scatter",
                    "x": [bisect_right(starts, p.started_at) - 0.5 for p, _ in points],
                    "y": _typed([p.centre / scale for p, _ in points], "f4"),
                    "customdata": [
                        [
                            other_rows[p.run_id],
                            None if half is None else float(f"{half / scale:.3g}"),
                        ]
                        for p, half in points
                    ],
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
    if m.band is not None and m.window_run_ids:
        xs = [rows[r] for r in m.window_run_ids if r in rows]
        if xs:
            x0, x1 = min(xs) - 0.5, max(len(rows) - 1, max(xs)) + 0.5
            shapes.append(
                {
                    "type": "rect",
                    "x0": x0,
                    "x1": x1,
                    "y0": m.band.low / scale,
                    "y1": m.band.high / scale,
                    "fillcolor": _COLOURS["band"],
                    "line": {"width": 0},
                    "layer": "below",
                    "name": f"noise band ({m.band.level:.0%} prediction, {m.band.runs} runs)",
                    "showlegend": True,
                }
            )
            shapes.append(
                {
                    "type": "line",
                    "x0": x0,
                    "x1": x1,
                    "y0": m.band.centre / scale,
                    "y1": m.band.centre / scale,
                    "line": {"width": 1, "dash": "dash", "color": _COLOURS["base"]},
                    "name": "baseline median",
                    "showlegend": True,
                }
            )
    marks_x, marks_y, marks_text, marks_colour = [], [], [], []
    for c in m.changes:
        if c.first_run_after not in rows:
            continue
        at = rows[c.first_run_after]
        colour = _COLOURS["regression" if c.verdict is Verdict.REGRESSION else "improvement"]
        commits = f"{_label(c.commit_before[:8] or '?')}..{_label(c.commit_after[:8] or '?')}"
        shapes.append(
            {
                "type": "line",
                "x0": at - 0.5,
                "x1": at - 0.5,
                "yref": "paper",
                "y0": 0,
                "y1": 1,
                "line": {"width": 1.5, "dash": "dot", "color": colour},
            }
        )
        annotations.append(
            {
                "x": at - 0.5,
                "yref": "paper",
                "y": 1.0,
                "text": f"{commits} {c.point.change_pct:+.1f}%",
                "showarrow": False,
                "xanchor": "left",
                "yanchor": "bottom",
                "font": {"size": 10, "color": colour},
            }
        )
        marks_x.append(at)
        marks_y.append(scaled(c.point.after))
        marks_colour.append(colour)
        triage = f"<br>alert: {_label(c.triage)}" if c.triage else ""
        marks_text.append(
            f"<b>change point {c.point.change_pct:+.1f}% ({c.verdict.value})</b><br>"
            f"commits {commits}<br>"
            f"{_label(format_value(c.point.before, c.unit))} → "
            f"{_label(format_value(c.point.after, c.unit))}<br>"
            f"confidence {c.point.confidence:.3f}{triage}"
        )
    if marks_x:
        traces.append(
            {
                "type": "scatter",
                "x": marks_x,
                "y": marks_y,
                "mode": "markers",
                "marker": {"size": 12, "symbol": "x", "color": marks_colour},
                "name": "change points",
                "hovertext": marks_text,
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
        "title": {"text": f"{_label(m.metric)} ({unit}, {better} is better)", "font": {"size": 14}},
        "xaxis": xaxis,
        "yaxis": {"title": {"text": unit}, "exponentformat": "none", **_GRID},
        "hovermode": "closest",
        "legend": {
            "orientation": "h",
            "yref": "container",
            "y": 0,
            "yanchor": "bottom",
            "x": 0,
            "xanchor": "left",
        },
        "shapes": shapes,
        "annotations": annotations,
        **_LAYOUT,
    }
    return {"data": traces, "layout": layout}


def _changes_table(view: BenchmarkView) -> str:
    rows = []
    for m in view.metrics:
        for c in m.changes:
            rows.append(
                f"<tr><td>{esc(c.metric)}</td>"
                f"<td><code>{esc(c.commit_before[:10] or '?')}</code>..<code>"
                f"{esc(c.commit_after[:10] or '?')}</code></td>"
                f"<td class='num'>{esc(format_value(c.point.before, c.unit))}</td>"
                f"<td class='num'>{esc(format_value(c.point.after, c.unit))}</td>"
                f"<td class='num'>{c.point.change_pct:+.1f}%</td>"
                f"<td>{_verdict_html(c.verdict)}</td>"
                f"<td class='num'>{c.point.confidence:.3f}</td>"
                f"<td>{esc(c.triage or '')}</td></tr>"
            )
    if not rows:
        return "<p class='muted'>No change points in the stored history.</p>"
    return (
        "<table id='changes'><thead><tr><th>metric</th><th>commits (after first, up to "
        "second)</th><th>before</th><th>after</th><th>change</th><th>verdict</th>"
        "<th>confidence</th><th>alert</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _metric_table(view: BenchmarkView) -> str:
    rows = []
    for m in view.metrics:
        c = m.comparison
        rows.append(
            f"<tr><td><a href='#metric-{esc(slug(m.metric))}'>{esc(m.metric)}</a></td>"
            f"<td class='num'>{esc(format_value(c.baseline_centre if c else None, m.unit))}</td>"
            f"<td class='num'>{esc(format_value(c.current_centre if c else None, m.unit))}</td>"
            f"<td class='num'>{esc(format_change(c) if c else '-')}</td>"
            f"<td>{_verdict_html(c.verdict if c else None)}</td>"
            f"<td>{esc(c.reason if c else '')}</td></tr>"
        )
    return (
        "<table id='metrics'><thead><tr><th>metric</th><th>baseline</th><th>latest</th>"
        "<th>change [95% CI]</th><th>verdict</th><th>why</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )


def _branch_list(view: BenchmarkView, base: str) -> str:
    if not view.branches:
        return ""
    return (
        f"<p>Other branches, latest run against {esc(base)}:</p>"
        f"<div id='branches'>{_branches_html(view, base, '../')}</div>"
    )


def render_benchmark(view: BenchmarkView, site: SiteView) -> str:
    table, rows, starts = _run_table(view)
    other_table, other_rows = _other_table(view)
    plots = []
    for i, m in enumerate(view.metrics):
        fig = history_figure(m, site.branch, rows, starts, other_rows)
        anchor = f"metric-{slug(m.metric)}"
        plots.append(
            f'<section class="plot" id="{esc(anchor)}">'
            + _plot(fig, f"history-{i}", post_script="pgHover('{plot_id}');")
            + "</section>"
        )
    runs = "".join(
        f"<li><a href='../{esc(run_path(r.id))}'>{esc(r.id)}</a> on "
        f"{_at_commit(r.git.branch, r.git.commit)} ({esc(r.started_at.isoformat())})</li>"
        for r in view.runs
    )
    body = f"""<h1>{esc(view.name)}</h1>
<p>Latest verdict on <b>{esc(site.branch)}</b>: {_verdict_html(view.verdict)} ·
{len(table)} runs on {esc(site.branch)}</p>
{_branch_list(view, site.branch)}
{_metric_table(view)}
<h2>History</h2>
<p class="muted">Blue: runs on {esc(site.branch)}, oldest first; shaded: the noise band of the
current baseline window (median ± 95% prediction band: where the next run falls if nothing
changed); dotted lines: change points, labelled with the commits they lie between; diamonds:
runs on other branches (PRs), one legend entry per branch with its latest run's verdict against
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
    out: list[str] = []
    seen: dict[str, int] = {}
    for name in names:
        label = _label(name)
        n = seen.get(label, 0)
        seen[label] = n + 1
        out.append(label if n == 0 else f"{label} ({n + 1})")
    return out


def _ops_figure(profile: ProfileSummary) -> go.Figure | None:
    need_plotly()
    import plotly.graph_objects as go

    ops = list(profile.top_ops(TOP_OPS))
    if not ops:
        return None
    ops.reverse()  # largest on top
    labels = _unique_labels([f"{o.name} [{o.device}]" if o.device else o.name for o in ops])
    fig = go.Figure(
        go.Bar(
            x=[o.self_time_ms_per_step for o in ops],
            y=labels,
            orientation="h",
            customdata=[[o.calls_per_step, o.total_time_ms_per_step] for o in ops],
            hovertemplate=(
                "%{y}<br>self %{x:.4g} ms/step<br>total %{customdata[1]:.4g} ms/step<br>"
                "%{customdata[0]:.3g} calls/step<extra></extra>"
            ),
            marker={"color": _COLOURS["base"]},
        )
    )
    fig.update_layout(
        title={"text": f"top {len(ops)} ops by self time per step", "font": {"size": 14}},
        xaxis={"title": {"text": "ms per step"}},
        height=120 + 24 * len(ops),
        margin={"l": 320, "r": 20, "t": 40, "b": 40},
        **_LAYOUT,
    )
    return fig


_BREAKDOWN = (
    ("compute_ms", "compute", "#1f77b4"),
    ("communication_not_overlapped_ms", "communication (not overlapped)", "#d62728"),
    ("free_ms", "free", "#bbbbbb"),
)


def _breakdown_figure(profiles: Sequence[ProfileSummary]) -> go.Figure | None:
    need_plotly()
    import plotly.graph_objects as go

    shown = [p for p in profiles if p.breakdown is not None]
    if not shown:
        return None
    names = [f"rank {p.rank}" if p.rank is not None else "step" for p in shown]
    names = _unique_labels(names)
    fig = go.Figure()
    for field, label, colour in _BREAKDOWN:
        values = [getattr(p.breakdown, field) for p in shown]
        if all(v is None for v in values):
            continue
        fig.add_trace(
            go.Bar(
                x=[0.0 if v is None else v for v in values],
                y=names,
                orientation="h",
                name=label,
                marker={"color": colour},
                hovertemplate=f"{label}: %{{x:.4g}} ms/step<extra>%{{y}}</extra>",
            )
        )
    step = ", ".join(
        f"{n}: {p.breakdown.step_ms:.4g} ms"
        for n, p in zip(names, shown, strict=True)
        if p.breakdown is not None
    )
    fig.update_layout(
        barmode="stack",
        title={"text": f"step breakdown ({step})", "font": {"size": 14}},
        xaxis={"title": {"text": "ms per step"}},
        height=190 + 40 * len(shown),
        # the legend sits below the x axis title, in the bottom margin
        margin={"l": 90, "r": 20, "t": 40, "b": 90},
        yaxis={"autorange": "reversed"},
        legend={"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom"},
        **_LAYOUT,
    )
    return fig


def _memory_figure(profiles: Sequence[ProfileSummary]) -> go.Figure | None:
    need_plotly()
    import plotly.graph_objects as go

    shown = [p for p in profiles if p.memory_per_step_bytes]
    if not shown:
        return None
    fig = go.Figure()
    for p in shown:
        name = f"rank {p.rank}" if p.rank is not None else "allocated"
        fig.add_trace(
            go.Scatter(
                x=list(range(1, len(p.memory_per_step_bytes) + 1)),
                y=[b / (1 << 20) for b in p.memory_per_step_bytes],
                mode="lines+markers",
                name=name,
                hovertemplate="step %{x}: %{y:.4g} MiB<extra></extra>",
            )
        )
    fig.update_layout(
        title={"text": "memory over the profiled steps", "font": {"size": 14}},
        xaxis={"title": {"text": "profiled step"}, "dtick": 1},
        yaxis={"title": {"text": "MiB"}},
        height=320,
        margin={"l": 60, "r": 20, "t": 40, "b": 40},
        **_LAYOUT,
    )
    return fig


def _communication_figures(profiles: Sequence[ProfileSummary]) -> list[go.Figure]:
    """Per-rank heatmaps: communication time by kind, and link bandwidth by link type (the
    profiles summarise each rank's communication; they hold no rank-to-rank matrix)."""
    need_plotly()
    import plotly.graph_objects as go

    ranks = [p for p in profiles if p.communication is not None]
    if len(ranks) < 2:
        return []
    names = _unique_labels([f"rank {p.rank}" if p.rank is not None else "?" for p in ranks])
    kinds = ("transit_ms", "wait_ms", "synchronization_ms", "idle_ms")
    z = [[getattr(p.communication, k) for k in kinds] for p in ranks]
    times = go.Figure(
        go.Heatmap(
            z=z,
            x=[k.removesuffix("_ms") for k in kinds],
            y=names,
            colorscale="Reds",
            texttemplate="%{z:.3g}",
            hovertemplate="%{y} %{x}: %{z:.4g} ms/step<extra></extra>",
            colorbar={"title": {"text": "ms"}},
        )
    )
    times.update_layout(
        title={"text": "communication per rank (ms per step)", "font": {"size": 14}},
        height=140 + 40 * len(ranks),
        margin={"l": 90, "r": 20, "t": 40, "b": 40},
        yaxis={"autorange": "reversed"},
        **_LAYOUT,
    )
    out = [times]
    links = sorted({link.link for p in ranks if p.communication for link in p.communication.links})
    if links:
        bw: list[list[float | None]] = []
        for p in ranks:
            held = p.communication.links if p.communication else ()
            by = {x.link: x.bandwidth_gb_s for x in held}
            bw.append([by.get(link) for link in links])
        band = go.Figure(
            go.Heatmap(
                z=bw,
                x=[_label(link) for link in links],
                y=names,
                colorscale="Blues",
                texttemplate="%{z:.3g}",
                hovertemplate="%{y} %{x}: %{z:.4g} GB/s<extra></extra>",
                colorbar={"title": {"text": "GB/s"}},
            )
        )
        band.update_layout(
            title={"text": "link bandwidth per rank (GB/s)", "font": {"size": 14}},
            height=140 + 40 * len(ranks),
            margin={"l": 90, "r": 20, "t": 40, "b": 40},
            yaxis={"autorange": "reversed"},
            **_LAYOUT,
        )
        out.append(band)
    return out


def _findings_html(findings: Sequence[Finding]) -> str:
    if not findings:
        return "<p class='muted'>No findings recorded for this run.</p>"
    rows = "".join(
        f"<tr><td>{esc(f.severity.value)}</td><td>{esc(f.source)}</td><td>{esc(f.rule)}</td>"
        f"<td>{esc(f.location)}</td><td>{esc(f.message)}</td><td>{esc(f.suggestion)}</td>"
        f"<td class='num'>{esc(format_value(f.impact_ms, 'ms'))}</td></tr>"
        for f in findings
    )
    return (
        "<table id='findings'><thead><tr><th>severity</th><th>source</th><th>rule</th>"
        "<th>where</th><th>what</th><th>suggestion</th><th>could save</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def render_run(run: RunRecord) -> str:
    profiles: list[ProfileSummary] = list(run.rank_profiles)
    if not profiles and run.profile is not None:
        profiles = [run.profile]
    figures: list[tuple[str, go.Figure | None, str]] = []
    main = run.profile or (profiles[0] if profiles else None)
    if main is not None:
        figures.append(("ops", _ops_figure(main), "The profile lists no ops."))
    figures.append(("breakdown", _breakdown_figure(profiles), "No step breakdown in the profile."))
    figures.append(
        ("memory", _memory_figure(profiles), "The profile has no per-step memory readings.")
    )
    comm = _communication_figures(profiles)
    for i, fig in enumerate(comm):
        figures.append((f"comm-{i}", fig, ""))
    plots = []
    for name, fig, missing in figures:
        if fig is not None:
            plots.append(f'<section class="plot">{_plot(fig, f"run-{name}")}</section>')
        elif missing and profiles:
            plots.append(f"<p class='muted'>{esc(missing)}</p>")
    measurements = "".join(
        f"<tr><td>{esc(m.metric)}</td>"
        f"<td class='num'>{esc(format_value(m.summary.centre, m.unit))}</td>"
        f"<td class='num'>{m.summary.n}</td>"
        f"<td class='num'>{esc(format_value(m.summary.p10, m.unit))} – "
        f"{esc(format_value(m.summary.p90, m.unit))}</td></tr>"
        for m in run.measurements
    )
    notes = "".join(f"<li>{esc(n)}</li>" for p in profiles for n in p.notes)
    profile_part = (
        "".join(plots)
        if profiles
        else "<p class='muted'>This run was recorded without a profile.</p>"
    )
    fp = run.fingerprint
    body = f"""<h1>{esc(run.benchmark)} · run <code>{esc(run.id)}</code></h1>
<p><a href="../{esc(benchmark_path(run.benchmark))}">history of {esc(run.benchmark)}</a> ·
branch {_at_commit(run.git.branch, run.git.commit, 12)} ·
started {esc(run.started_at.isoformat())} · {esc(fp.device_kind)} {esc(fp.device_model)}
x{fp.device_count} · testbed <code>{esc(fp.key())}</code></p>
<table id="measurements"><thead><tr><th>metric</th><th>centre</th><th>samples</th>
<th>p10 – p90</th></tr></thead><tbody>{measurements}</tbody></table>
<h2>Profile</h2>
{profile_part}
{f"<ul class='muted'>{notes}</ul>" if notes else ""}
<h2>Findings</h2>
{_findings_html(run.findings)}"""
    return _page(f"{run.benchmark} {run.id} · perfgate", body, depth=1)


def render_site(site: SiteView) -> dict[str, str]:
    """Every page of the site, by its path relative to the site root (``plotly.min.js``,
    which every page loads from the root, is not included: see :func:`plotly_js`)."""
    pages = {"index.html": render_index(site)}
    for b in site.benchmarks:
        pages.update(render_benchmark_pages(b, site))
    return pages


def render_benchmark_pages(view: BenchmarkView, site: SiteView) -> dict[str, str]:
    """A benchmark's history page and its runs' pages, by path."""
    pages = {benchmark_path(view.name): render_benchmark(view, site)}
    for run in view.runs:
        pages.setdefault(run_path(run.id), render_run(run))
    return pages
