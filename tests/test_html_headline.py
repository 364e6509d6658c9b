"""The HTML report leads with what decides (issue 40, item 6): every headline (the overview's
row and branch cells, a benchmark's verdict, a run page's head) shows the verdict with the
metric that decides it and that metric's interval, the CPU time on a CPU run and the device
time on an accelerator, never the wall time shown beside them; the noise band is a faint fill
behind the points; a run page lists only the utilisation rows of a device the run has."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import fill, fingerprint, record

from perfgate.app.site import gather_site, write_site
from perfgate.config import Config
from perfgate.models import Comparison, Direction, Measurement, RunRecord, Verdict
from perfgate.parsers.ascend import parse_ascend
from perfgate.parsers.torch_trace import parse_torch_trace
from perfgate.reporters.html import (
    BAND_ALPHA,
    SiteView,
    _run_table,
    benchmark_path,
    headline_comparison,
    history_figure,
    render_run,
    run_path,
    shown_utilisation,
    utilisation_html,
)
from perfgate.stats import summarize
from perfgate.store import open_store

DATA = Path(__file__).parent / "data"


def _time(metric: str, level: float, noise: float, seed: int) -> Measurement:
    rng = np.random.default_rng(seed)
    reps = [tuple(level * rng.lognormal(0, noise, 30)) for _ in range(3)]
    return Measurement(
        metric, "ms", Direction.LOWER_IS_BETTER, tuple(reps), summarize(reps, steady=True)
    )


def _run(i: int, primary: str, level: float, *, branch: str = "main", device: str) -> RunRecord:
    """Run ``i``: ``primary`` (the CPU or device time) steady at ``level``, the wall time
    beside it twice as long and very noisy (a busy runner: its interval crosses zero)."""
    base = record(
        i, 2 * level, branch=branch, noise=0.6, seed=11, fp=fingerprint(device_kind=device)
    )
    step = _time(primary, level, 0.01, 1000 + i)
    return replace(base, measurements=(*base.measurements, step))


def _runs(primary: str, device: str) -> list[RunRecord]:
    """Eight runs on main at 10 ms, one on ``feat`` 25% slower in ``primary``."""
    runs = [_run(i, primary, 10.0, device=device) for i in range(8)]
    return [*runs, _run(20, primary, 12.5, branch="feat", device=device)]


def _site(tmp_path: Path, runs: list[RunRecord]) -> SiteView:
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, runs)
    store = open_store(url)
    try:
        return gather_site(Config(), store)
    finally:
        store.close()


@pytest.mark.parametrize(("primary", "device"), [("step_cpu_ms", "cpu"), ("step_device_ms", "npu")])
def test_every_headline_is_the_deciding_metric_with_its_interval(
    tmp_path: Path, primary: str, device: str
) -> None:
    site = _site(tmp_path, _runs(primary, device))
    (mlp,) = site.benchmarks
    (feat,) = mlp.branches
    # the verdict, and beside it the metric that decided it (not the noisy wall time)
    assert feat.verdict is Verdict.REGRESSION
    c = feat.comparison
    assert c is not None and c.metric == primary and c.decides
    assert c.ci_low_pct is not None and c.ci_low_pct > 0  # its interval does not cross zero
    wall = next(x for m in mlp.metrics for x in m.branch_comparisons if x.metric == "step_time_ms")
    assert not wall.decides and wall.ci_low_pct is not None and wall.ci_high_pct is not None
    assert wall.ci_low_pct < 0 < wall.ci_high_pct  # the wall time's interval crosses zero
    assert mlp.verdict is Verdict.UNCHANGED  # main's latest run, by the same rule
    out = tmp_path / "site"
    write_site(out, site)
    change = re.escape(f"{c.change_pct:+.1f}% [{c.ci_low_pct:+.1f}, ")
    # the overview: the branch cell and the row's metric
    index = (out / "index.html").read_text(encoding="utf-8")
    cell = re.search(r'<td class="branches">(.*?)</td>', index)
    assert cell is not None
    assert re.search(
        rf'<code>feat</code>: <span class="bad">regression</span> '
        rf"<span class='deciding' title='[\d.]+% CI'><code>{primary}</code> {change}",
        cell[1],
    ), cell[1]
    assert "step_time_ms" not in cell[1]
    row = re.search(r"<tr><td><a href=\"benchmarks/.*?</tr>", index)
    assert row is not None and f"<td>{primary}</td>" in row[0]
    # the run page of the PR run: its head is the verdict and the deciding metric
    page = (out / run_path(feat.run_id)).read_text(encoding="utf-8")
    head = re.search(r"<p class='headline' id='headline'>(.*?)</p>", page)
    assert head is not None
    assert re.match(
        rf"<span class=\"bad\">regression</span> <span class='deciding' title='[\d.]+% CI'>"
        rf"<code>{primary}"
        rf"</code> {change}",
        head[1],
    ), head[1]
    assert "shown, not deciding: " in head[1] and "step_time_ms" in head[1]
    assert f"<td>{primary} <b>(decides)</b></td>" in page
    # main's latest run: judged too, against the runs before it
    main_page = (out / run_path(mlp.runs[0].id)).read_text(encoding="utf-8")
    assert re.search(
        rf"<span class=\"ok\">unchanged</span> <span class='deciding' title='[\d.]+% CI'>"
        rf"<code>{primary}</code> ",
        main_page,
    )
    assert "against the runs before it on main" in main_page
    assert f"<td>{primary} <b>(decides)</b></td>" in main_page
    # the benchmark's page: the same headline
    history = (out / benchmark_path("mlp")).read_text(encoding="utf-8")
    head = re.search(r'<p class="headline">(.*?)</p>', history, re.S)
    assert head is not None
    assert re.search(
        rf"unchanged</span> <span class='deciding' title='[\d.]+% CI'><code>{primary}</code>",
        head[1],
    )
    # its plots, as the page hands them to plotly.js: each opens with the faint band
    for traces in _page_plots(history):
        band = traces[0]
        assert band["meta"] == "band" and band["fill"] == "toself", band
        assert "markers" not in band["mode"] and band["line"]["width"] == 0
        assert _alpha(band["fillcolor"]) <= 0.25
        assert traces[1]["meta"] == "median" and traces[2]["meta"] == "base"


def _page_plots(page: str) -> list[list[dict[str, Any]]]:
    """The traces of each history plot of a page, read from its ``Plotly.newPlot`` calls."""
    out = []
    for at in re.finditer(r'Plotly\.newPlot\(\s*"history-\d+",\s*', page):
        traces, _ = json.JSONDecoder().raw_decode(page, at.end())
        out.append(traces)
    assert out, "no history plot on the page"
    return out


def _alpha(colour: str) -> float:
    found = re.fullmatch(r"rgba\(\d+,\d+,\d+,([0-9.]+)\)", colour)
    assert found is not None, colour
    return float(found[1])


def _comparison(metric: str, verdict: Verdict, change: float, decides: bool = True) -> Comparison:
    return Comparison(
        benchmark="mlp",
        metric=metric,
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        verdict=verdict,
        reason="",
        current_run_id="r",
        current_centre=1.0,
        change_pct=change,
        ci_low_pct=change - 1,
        ci_high_pct=change + 1,
        decides=decides,
    )


def test_the_headline_comparison_is_one_that_decides_the_verdict() -> None:
    wall = _comparison("step_time_ms", Verdict.REGRESSION, 46.0, decides=False)
    cpu = _comparison("step_cpu_ms", Verdict.INCONCLUSIVE, 3.0)
    memory = _comparison("peak_memory_bytes", Verdict.UNCHANGED, 0.1)
    assert headline_comparison([wall, cpu, memory]) is cpu  # never the wall time shown beside
    grown = replace(memory, verdict=Verdict.REGRESSION, change_pct=20.0)
    assert headline_comparison([wall, cpu, grown]) is grown  # what made it a regression
    slower = replace(cpu, verdict=Verdict.REGRESSION, change_pct=5.0)
    assert headline_comparison([grown, slower]) is slower  # of two, the time metric
    assert headline_comparison([wall]) is None


def test_the_noise_band_is_a_faint_fill_behind_the_points(tmp_path: Path) -> None:
    import plotly.graph_objects as go

    site = _site(tmp_path, _runs("step_cpu_ms", "cpu"))
    (mlp,) = site.benchmarks
    _, rows, starts = _run_table(mlp)
    _, other_rows, _ = _run_table(mlp, others=True)
    m = next(x for x in mlp.metrics if x.metric == "step_cpu_ms")
    assert m.band is not None
    fig = history_figure(m, site.branch, rows, starts, other_rows)
    go.Figure(fig)  # a valid plotly figure
    metas = [t.get("meta") for t in fig["data"]]
    band = fig["data"][metas.index("band")]
    assert metas.index("band") < metas.index("base") and metas.index("band") < metas.index("other")
    assert band["fill"] == "toself" and "markers" not in band["mode"]
    assert band["line"]["width"] == 0 and band["hoverinfo"] == "skip"
    assert _alpha(band["fillcolor"]) == BAND_ALPHA <= 0.25
    assert min(band["y"]) == pytest.approx(m.band.low) and max(band["y"]) == pytest.approx(
        m.band.high
    )
    assert "noise band" in band["name"] and "95% prediction" in band["name"]
    # no filled layout rectangle over the chart any more
    assert not [s for s in fig["layout"]["shapes"] if s.get("type") == "rect"]
    assert "range" not in fig["layout"]["yaxis"]  # a band near the points: all of it shown
    # a band far wider than the points (three noisy runs) runs off the chart, which follows
    # the points, and its legend entry says so
    wide = replace(m, band=replace(m.band, low=m.band.low / 30, high=m.band.high * 30))
    fig = history_figure(wide, site.branch, rows, starts, other_rows)
    low, high = fig["layout"]["yaxis"]["range"]
    ys = [p.centre for p in (*m.base, *m.others)]
    assert low < min(ys) and high > max(ys)
    assert high - low < 3 * (max(ys) - min(ys))  # the points fill the chart, not the band
    band = next(t for t in fig["data"] if t.get("meta") == "band")
    assert "wider than the chart" in band["name"]


def test_a_cpu_run_lists_no_device_rows_and_a_device_run_lists_its_own() -> None:
    cpu = parse_torch_trace(DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz")
    assert shown_utilisation([cpu]) == []
    page = render_run(replace(record(1, 20.0), profile=cpu))
    assert "not computed" not in page
    for metric in ("aicore_util_pct", "sm_occupancy_pct", "device_busy_pct", "hbm_bandwidth_gb_s"):
        assert f"<code>{metric}</code>" not in page
    assert "No device utilisation" in page
    # an Ascend job: the rows it has a value of, and those its profiler says why it has not
    ranks = parse_ascend(DATA / "ascend" / "msinsight_pt_text_level1_2rank")
    shown = shown_utilisation(ranks)
    assert {"device_busy_pct", "aicore_util_pct", "cube_util_pct", "vector_util_pct"} <= set(shown)
    assert "sm_occupancy_pct" not in shown  # a CUDA metric: no CUDA device here
    table = utilisation_html(ranks)
    assert table.count("<tr><td><code>") == len(shown)
    assert "not computed: no l2_cache.csv (l2_cache=true)" in table
    assert "not in this profile" not in table
