"""The run page's timeline, rank-pair matrix and utilisation, and budgets wherever the HTML
report shows a verdict: rendered from hand-built profiles (a few spans whose pixels are
known; a 10,000-span step with a fixed seed), a real store for the budget's way from the
suite to the page, and a real headless Chromium (skipped only without ``chromium``)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from helpers import fill, make_run, record

from perfgate.advisor.cluster import pair_utilisation
from perfgate.app.site import gather_site, write_site
from perfgate.config import ALL_BENCHMARKS, Budget, Config
from perfgate.models import (
    Comparison,
    Direction,
    ProfileSummary,
    RankPair,
    SpanKind,
    StepBreakdown,
    Thresholds,
    Timeline,
    TimelineLane,
    TimelineSpan,
    Verdict,
)
from perfgate.parsers import read_profile
from perfgate.reporters.html import (
    PLOTLY_JS,
    TIMELINE_WIDTH,
    BenchmarkView,
    BranchVerdict,
    SiteView,
    benchmark_path,
    idle_gaps,
    index_row,
    plotly_js,
    rank_pair_heatmap,
    render_benchmark,
    render_index,
    render_run,
    run_path,
    timeline_html,
    timeline_svg,
    utilisation_colour,
)
from perfgate.store import open_store

DATA = Path(__file__).parent / "data"
C, M, H = SpanKind.COMPUTE, SpanKind.COMMUNICATION, SpanKind.HOST


def span(start: float, dur: float, name: str = "op", kind: SpanKind = C) -> TimelineSpan:
    return TimelineSpan(start, dur, name, kind)


def small_timeline() -> Timeline:
    """A 1,000 µs step: a host thread listed first, then three device lanes; stream 1 idles
    200 µs (20%) mid-step and 5 µs (0.5%) near its end; the HCCL plane only communicates."""
    return Timeline(
        step="ProfilerStep#3",
        duration_us=1000.0,
        lanes=(
            TimelineLane("thread 7 (python)", False, (span(0, 300, "aten::linear", H),)),
            TimelineLane(
                "Stream 1",
                True,
                (
                    span(0, 400, "MatMulV2"),
                    span(600, 300, "hcom_allReduce_", M),
                    span(905, 95, "Add"),
                ),
            ),
            TimelineLane("Stream 2", True, (span(0, 1000, "LongKernel"),)),
            TimelineLane("HCCL Plane 0", True, (span(600, 100, "hcom_allReduce_", M),)),
        ),
    )


def big_timeline(seed: int = 0) -> Timeline:
    """10,000 spans on three device streams and a host thread over a 100 ms step: mostly
    kernels of a few µs (far below one pixel of ~93 µs), some long ones, and a 6 ms idle gap
    on the compute stream."""
    rng = np.random.default_rng(seed)
    lanes = []
    for name, device, n, median, kind in (
        ("Stream 2", True, 6000, 4.0, C),
        ("HCCL Plane 0", True, 1000, 30.0, M),
        ("Stream 5", True, 500, 60.0, SpanKind.MEMCPY),
        ("thread 11 (python)", False, 2500, 8.0, H),
    ):
        starts = np.sort(rng.uniform(0, 100_000, n))
        if name == "Stream 2":
            starts = starts[(starts < 40_000) | (starts > 46_000)]
            starts = np.concatenate([starts, rng.uniform(0, 40_000, n - len(starts))])
            starts.sort()
        durs = rng.lognormal(np.log(median), 0.7, n)
        durs = np.minimum(durs, np.maximum(np.diff(np.append(starts, 100_000.0)), 0.5))
        spans = tuple(
            span(float(s), float(d), f"k{i}", kind)
            for i, (s, d) in enumerate(zip(starts, durs, strict=True))
        )
        lanes.append(TimelineLane(name, device, spans))
    return Timeline("ProfilerStep#9", 100_000.0, tuple(lanes), dropped_spans=321)


def test_lanes_device_streams_first_each_span_with_its_hover_text() -> None:
    d = timeline_svg(small_timeline())
    lanes = re.findall(r'data-lane="([^"]+)"', d.svg)
    assert lanes == ["Stream 1", "Stream 2", "HCCL Plane 0", "thread 7 (python)"]
    assert d.svg.index("device streams") < d.svg.index("host threads")
    # every span here is wider than a pixel: drawn one by one, name and duration on hover
    assert (d.drawn, d.binned, d.bins) == (6, 0, 0)
    assert "<title>hcom_allReduce_ · 300 µs · communication</title>" in d.svg
    # placed at its start: 600 µs of a 1,000 µs step at 1080 px
    assert f'x="{600 * TIMELINE_WIDTH / 1000:.1f}"' in d.svg
    # communication and compute are drawn in different colours
    comm = re.search(r'<g fill="(#[0-9a-f]{6})"><rect[^>]*><title>hcom_', d.svg)
    comp = re.search(r'<g fill="(#[0-9a-f]{6})"><rect[^>]*><title>MatMulV2', d.svg)
    assert comm and comp and comm.group(1) != comp.group(1)
    assert "Every span is drawn one by one" in timeline_html(small_timeline())


def test_idle_gaps_over_one_percent_of_the_step_are_marked_on_device_lanes_only() -> None:
    t = small_timeline()
    stream1 = t.lanes[1]
    # 400..600 is 20% of the step; 900..905 (0.5%) is below the 1% threshold
    assert idle_gaps(stream1, 1000.0, 10.0) == [(400.0, 200.0)]
    assert idle_gaps(stream1, 1000.0, 1.0) == [(400.0, 200.0), (900.0, 5.0)]
    # overlapping spans are one busy stretch; the lane's end counts
    lane = TimelineLane("s", True, (span(0, 50), span(10, 100), span(300, 10)))
    assert idle_gaps(lane, 500.0, 5.0) == [(110.0, 190.0), (310.0, 190.0)]
    d = timeline_svg(t)
    assert d.gaps == 1 and d.idle_us == 200.0
    assert "<title>idle 200 µs (20.0% of the step) from 400 µs</title>" in d.svg
    assert ">idle 200 µs</text>" in d.svg  # 216 px wide: labelled in the lane
    # the HCCL plane (communication only) idles 90% of the step, the host thread 70%: neither
    # is marked
    rest = d.svg[d.svg.index('data-lane="HCCL Plane 0') :]
    assert "idle" not in rest


def test_the_device_idle_time_is_when_no_stream_runs_not_the_lanes_gaps_summed() -> None:
    """Two compute streams over a 1,000 µs step, busy 0-400 and 300-600: their own gaps add
    up to 1,300 µs, more than the step; the device ran nothing for 400 µs (600-1,000). A
    communication-only lane does not count as the device working."""
    t = Timeline(
        "ProfilerStep#1",
        1000.0,
        (
            TimelineLane("Stream 1", True, (span(0, 400),)),
            TimelineLane("Stream 2", True, (span(300, 300),)),
            TimelineLane("HCCL Plane 0", True, (span(600, 400, "hcom_allReduce_", M),)),
            TimelineLane("thread 1", False, (span(0, 1000, "aten::mm", H),)),
        ),
    )
    d = timeline_svg(t)
    assert (d.gaps, d.idle_lanes, d.idle_us, d.device_idle_us) == (3, 2, 1300.0, 400.0)
    page = timeline_html(t)
    assert "3 gaps on 2 lanes." in page
    assert "No stream that computes or copies ran anything for 400 µs (40% of the step)." in page


def test_a_real_ascend_step_s_device_idle_is_within_the_step() -> None:
    """The MindStudio Insight text export's step: four compute streams, two of them nearly
    empty (one op at the step's end), whose own gaps add up to more than the step."""
    profile = read_profile(DATA / "ascend" / "msinsight_pt_text_level1_2rank" / "rank0_ascend_pt")
    timeline = profile.ranks[0].timeline
    assert timeline is not None
    d = timeline_svg(timeline)
    assert d.idle_us > d.duration_us  # the lanes' gaps summed
    assert 0.0 < d.device_idle_us < d.duration_us
    assert f"({d.device_idle_us / d.duration_us:.0%} of the step)" in timeline_html(timeline)


def test_ten_thousand_spans_are_binned_per_pixel_and_the_page_says_so() -> None:
    t = big_timeline()
    spans = [s for lane in t.lanes for s in lane.spans]
    assert len(spans) == 10_000
    narrow = sum(1 for s in spans if s.dur_us * TIMELINE_WIDTH / t.duration_us < 1.0)
    d = timeline_svg(t)
    assert d.binned == narrow and narrow > 9_000 and d.drawn == 10_000 - narrow
    # at most one bin per pixel column of each lane
    assert 0 < d.bins <= TIMELINE_WIDTH * len(t.lanes)
    # what the browser gets: the drawn spans and the merged bins, far fewer than 10,000
    assert d.svg.count("<rect") < 10_000 // 2
    text = timeline_html(t)
    assert f"{narrow:,} spans narrower than a pixel drawn as {d.bins:,} aggregated bins" in text
    assert "321 spans were left out</b> when the profile was stored" in text
    # the 6 ms hole of the compute stream is marked
    assert d.gaps >= 1
    assert re.search(r"<title>idle 6(\.\d+)? ms \(6\.\d% of the step\) from 40", d.svg)


def test_heatmap_colours_utilisation_on_the_fixed_zero_to_hundred_percent_scale() -> None:
    share = utilisation_colour(0.5)
    assert share == "#6baed6"  # the scale's middle stop
    assert utilisation_colour(0.0) == "#f7fbff" and utilisation_colour(1.0) == "#08306b"
    assert utilisation_colour(1.7) == utilisation_colour(1.0)
    assert utilisation_colour(0.2) != utilisation_colour(0.3)

    def utilisation(pair: RankPair) -> float | None:
        return pair_utilisation(pair, Thresholds(link_nominal_gb_s=(("HCCS", 28.0),)))

    half = RankPair(0, 1, "HCCS", 14.0, 1.0, 14.0, wait_ms=1.5, ops=3)
    local = RankPair(0, 0, "LOCAL", 8.0, 0.2, 40.0)
    unknown = RankPair(1, 0, "PCIE", 2.0, 1.0, 2.0)
    for other_bw in (27.0, 3.0):  # the other pairs do not stretch the scale
        other = RankPair(1, 1, "HCCS", 1.0, 1.0 / other_bw, other_bw)
        svg = rank_pair_heatmap([half, local, unknown, other], utilisation)
        cell = re.search(
            r'<rect x="\d+" y="\d+" [^>]*fill="([^"]+)"[^>]*><title>rank 0 → rank 1', svg
        )
        assert cell and cell.group(1) == share, other_bw
        for line in ("HCCS", "14 GB/s", "50% of nominal", "wait 1.5 ms"):
            assert f">{line}</text>" in svg
    local_cell = re.search(r'fill="([^"]+)"[^>]*><title>rank 0 → rank 0 LOCAL', svg)
    assert local_cell and local_cell.group(1) == "#e3e3e3"
    assert ">nominal unknown</text>" in svg  # PCIE has no nominal figure here
    # rows are sources, columns destinations: rank 1 -> 0 sits in the second row, first column
    row1 = re.search(r'<rect x="(\d+)" y="(\d+)"[^>]*><title>rank 1 → rank 0', svg)
    row0 = re.search(r'<rect x="(\d+)" y="(\d+)"[^>]*><title>rank 0 → rank 1', svg)
    assert row1 and row0
    assert int(row1.group(2)) > int(row0.group(2)) and int(row1.group(1)) < int(row0.group(1))


def _profiled_run() -> ProfileSummary:
    pairs = tuple(
        RankPair(s, d, "LOCAL" if s == d else "HCCS", 64.0, 64.0 / 20.0, 20.0, 0.5, 4)
        for s in range(4)
        for d in range(4)
    )
    return ProfileSummary(
        source="ascend",
        steps=3,
        breakdown=StepBreakdown(step_ms=100.0, compute_ms=80.0, free_ms=20.0),
        rank=0,
        utilisation={"device_busy_pct": 88.5, "aicore_util_pct": 61.24},
        notes=("l2_hit_pct: no l2_cache.csv in the profile (collect with l2_cache=True)",),
        rank_pairs=pairs,
        timeline=big_timeline(),
    )


def test_run_page_has_utilisation_timeline_and_matrix_instead_of_no_matrix() -> None:
    run = make_run("r-1", profile=_profiled_run())
    page = render_run(run, lambda p: pair_utilisation(p, Thresholds()))
    assert "no rank-to-rank matrix" not in page
    assert '<svg class="timeline"' in page and '<svg class="rank-pairs"' in page
    assert 'data-ranks="4"' in page and ">71% of nominal</text>" in page  # 20 of 28 GB/s
    assert "<td class='num'>88.5%</td>" in page and "<td class='num'>61.2%</td>" in page
    assert "not computed: no l2_cache.csv in the profile" in page
    # only the device's own rows: no CUDA sm_occupancy_pct "not computed" on an Ascend run
    assert "not computed: not in this profile" not in page
    assert "<code>sm_occupancy_pct</code>" not in page
    # without a way to judge utilisation the matrix says so, and shows GB/s
    bare = render_run(run)
    assert ">nominal unknown</text>" in bare and "the cells show GB/s only" in bare


def _budget(verdict: Verdict, value: float, benchmark: str = "mlp") -> Comparison:
    return Comparison(
        benchmark=benchmark,
        metric="latency_p99_ms",
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        verdict=verdict,
        reason="",
        current_run_id="mlp-main-009",
        current_centre=value,
        kind="budget",
        method="budget",
        limit=100.0,
        budget="<= 100 ms",
    )


def test_over_budget_comes_first_in_its_own_words_never_as_a_regression() -> None:
    site = SiteView("demo", "main", datetime(2026, 12, 1, tzinfo=timezone.utc), ())
    breached = _budget(Verdict.OVER_BUDGET, 140.0)
    kept = replace(_budget(Verdict.UNCHANGED, 80.0), metric="latency_p50_ms")
    view = BenchmarkView(
        "mlp",
        (),
        verdict=Verdict.UNCHANGED,
        budgets=(kept, breached),
        branches=(BranchVerdict("feat", "mlp-feat-001", Verdict.REGRESSION, budgets=(breached,)),),
    )
    page = render_benchmark(view, site)
    said = "over budget: latency_p99_ms 140 ms &gt; 100 ms"
    verdict_line = page[page.index("Latest verdict on") :]
    verdict_line = verdict_line[: verdict_line.index("</p>")]
    assert verdict_line.index(f"<span class='over'>{said}</span>") < verdict_line.index(
        '<span class="ok">unchanged</span>'
    )
    assert '<span class="bad">' not in verdict_line
    # the budgets table lists the breach first, the kept one after, in its own words
    table = page[page.index("<table id='budgets'>") :]
    assert table.index(said) < table.index("within budget: latency_p50_ms 80 ms &lt; 100 ms")
    # the other branch: its breach before its regression
    branch = page[page.index("<div id='branches'>") :]
    assert branch.index(said) < branch.index('<span class="bad">regression</span>')
    # every verdict has its style on the overview; over budget never reads as a regression
    for v in Verdict:
        cell = index_row(replace(view, budgets=(), branches=(), verdict=v), "main").html
        assert f">{v.value.replace('_', ' ')}</span>" in cell
    alone = index_row(replace(view, budgets=(), verdict=Verdict.OVER_BUDGET), "main").html
    assert '<span class="over">over budget</span>' in alone
    index = render_index(site, [index_row(view, "main")])
    assert "<span class='over'>1 over budget</span>" in index
    row = index[index.index('<td class="verdict">') :]
    assert row.index(said) < row.index("unchanged")


def test_a_suite_budget_reaches_the_pages_through_the_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, [record(i, 20.0) for i in range(6)])
    config = Config(
        budgets={ALL_BENCHMARKS: {"step_time_ms": Budget("step_time_ms", "<=", 15.0, text="<= 15")}}
    )
    store = open_store(url)
    try:
        site = gather_site(config, store, now=datetime(2026, 12, 1, tzinfo=timezone.utc))
    finally:
        store.close()
    (view,) = site.benchmarks
    assert [c.verdict for c in view.budgets] == [Verdict.OVER_BUDGET]
    # the history comparison of the same metric is still there, and decides the verdict
    (metric,) = view.metrics
    assert metric.comparison is not None and metric.comparison.kind == ""
    assert view.verdict is Verdict.UNCHANGED
    page = render_benchmark(view, site)
    assert re.search(
        r"<span class='over'>over budget: step_time_ms (19|20)\.\d ms &gt; 15 ms</span>", page
    )


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


_CONSOLE = re.compile(r":CONSOLE[:(]|Uncaught ")


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed")
def test_chromium_opens_the_run_page_with_a_10k_span_timeline_without_errors(
    tmp_path: Path,
) -> None:
    run = make_run("r-10k", profile=_profiled_run())
    site = tmp_path / "site"
    (site / "runs").mkdir(parents=True)
    (site / PLOTLY_JS).write_bytes(plotly_js())
    page = site / run_path(run.id)
    page.write_text(render_run(run, lambda p: pair_utilisation(p, Thresholds())), encoding="utf-8")
    browser = _chromium()
    assert browser is not None
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--allow-file-access-from-files",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if _CONSOLE.search(line)]
    assert not errors, errors
    dom = done.stdout
    # the parsed page holds the drawing: four lanes, the 4x4 matrix, the breakdown plot drawn
    assert re.search(r'<svg class="timeline"[^>]*data-lanes="4"', dom)
    assert len(re.findall(r'<g class="lane"', dom)) == 4
    assert re.search(r'<svg class="rank-pairs"[^>]*data-ranks="4"', dom)
    assert 'class="main-svg"' in dom


def test_the_written_site_links_the_run_page_with_its_timeline(tmp_path: Path) -> None:
    runs = [record(i, 20.0) for i in range(4)]
    runs[-1] = replace(runs[-1], profile=_profiled_run())
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, runs)
    store = open_store(url)
    try:
        site = gather_site(Config(), store, now=datetime(2026, 12, 1, tzinfo=timezone.utc))
    finally:
        store.close()
    write_site(tmp_path / "html", site)
    page = (tmp_path / "html" / run_path(runs[-1].id)).read_text(encoding="utf-8")
    # the stored timeline came back whole and the app judged the pairs with the thresholds
    assert "10,000 spans on 4 lanes" in page
    assert ">71% of nominal</text>" in page
    assert (tmp_path / "html" / benchmark_path("mlp")).exists()
