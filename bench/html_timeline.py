"""The run page at its largest: one profiled step of 10,000 ops and an 8x8 rank-pair matrix.

A synthetic step of an 8-rank Ascend job (fixed seed): two compute streams (many short
kernels, a few long matmuls), an HCCL communication plane, a memcpy stream and two host
threads, with device idle gaps where the compute stream waits for an all-reduce and for the
host; plus the job's rank-to-rank traffic (HCCS inside a node of 4, RDMA across the two
nodes, one degraded HCCS link, one late peer). The page must stay readable (spans narrower
than a pixel binned, and the page says so) and quick to render.

Prints the median time of :func:`perfgate.reporters.html.render_run` over ``--repeats``
renders, the page's size and what the timeline drew; writes the page (with the plotly
bundle beside it, as ``perfgate report --html`` does) and takes headless-Chromium
screenshots of it when ``chromium`` is installed.

Run from the repository root with the virtual environment active::

    python bench/html_timeline.py                       # page + shots under /tmp/pg/shots
    python bench/html_timeline.py --out DIR --repeats 9
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path

import numpy as np

from perfgate.advisor.cluster import pair_utilisation
from perfgate.models import (
    BenchmarkSpec,
    CIContext,
    Direction,
    Fingerprint,
    GitContext,
    Measurement,
    ProfileSummary,
    RankPair,
    RunRecord,
    SpanKind,
    StepBreakdown,
    Thresholds,
    Timeline,
    TimelineLane,
    TimelineSpan,
)
from perfgate.reporters.html import (
    PLOTLY_JS,
    UtilisationOf,
    plotly_js,
    render_run,
    timeline_svg,
)
from perfgate.stats import summarize

STEP_US = 120_000.0
"""A 120 ms step."""


def _lane(
    rng: np.random.Generator,
    name: str,
    device: bool,
    n: int,
    kind: SpanKind,
    median_us: float,
    holes: tuple[tuple[float, float], ...] = (),
    names: tuple[str, ...] = ("op",),
) -> TimelineLane:
    """``n`` spans laid end to end with short gaps, skipping the ``holes`` (start, end)."""
    durations = rng.lognormal(np.log(median_us), 0.8, n)
    free = STEP_US - sum(b - a for a, b in holes)
    # the gaps between spans share what the durations leave of the step
    slack = max(free - durations.sum(), 0.0)
    gaps = rng.exponential(1.0, n)
    gaps *= slack * 0.98 / gaps.sum()
    spans = []
    t = 0.0
    for i in range(n):
        t += gaps[i]
        for a, b in holes:
            if a <= t < b:
                t = b
        spans.append(TimelineSpan(t, float(durations[i]), names[i % len(names)], kind))
        t += durations[i]
    return TimelineLane(name, device, tuple(spans))


def synthetic_timeline(seed: int = 0) -> Timeline:
    """10,000 spans on six lanes, two long device idle gaps on the compute stream."""
    rng = np.random.default_rng(seed)
    kernels = ("MatMulV2", "Add", "LayerNorm", "GeLU", "Cast", "TransData", "Softmax", "Mul")
    lanes = (
        _lane(
            rng,
            "Stream 2 (compute)",
            True,
            5200,
            SpanKind.COMPUTE,
            6.0,
            holes=((40_000.0, 47_000.0), (96_000.0, 101_500.0)),
            names=kernels,
        ),
        _lane(rng, "Stream 3 (compute)", True, 180, SpanKind.COMPUTE, 260.0, names=("MatMulV3",)),
        _lane(
            rng,
            "HCCL Plane 0 (communication)",
            True,
            240,
            SpanKind.COMMUNICATION,
            120.0,
            holes=((0.0, 30_000.0),),
            names=("hcom_allReduce_", "hcom_allGather_", "hcom_reduceScatter_"),
        ),
        _lane(rng, "Stream 5 (memcpy)", True, 380, SpanKind.MEMCPY, 15.0, names=("MEMCPY_ASYNC",)),
        _lane(
            rng,
            "thread 4242 (python)",
            False,
            3600,
            SpanKind.HOST,
            9.0,
            names=("aten::linear", "aten::add", "aten::layer_norm", "aclnnMatmul"),
        ),
        _lane(
            rng,
            "thread 4250 (dataloader)",
            False,
            400,
            SpanKind.HOST,
            40.0,
            names=("DataLoader.__next__", "collate", "pin_memory"),
        ),
    )
    return Timeline(step="ProfilerStep#5", duration_us=STEP_US, lanes=lanes, dropped_spans=1234)


def synthetic_pairs(ranks: int = 8, seed: int = 1) -> tuple[RankPair, ...]:
    """An 8-rank job on two nodes of four: HCCS inside a node, RDMA across; rank 2 -> 3's
    HCCS link degraded, rank 6 waits long for its peers."""
    rng = np.random.default_rng(seed)
    pairs = []
    for src in range(ranks):
        for dst in range(ranks):
            if src == dst:
                link, bw = "LOCAL", float(rng.uniform(40, 60))
            elif src // 4 == dst // 4:
                link, bw = "HCCS", float(rng.uniform(17, 27))
            else:
                link, bw = "RDMA", float(rng.uniform(9, 23))
            if (src, dst) == (2, 3):
                bw = 3.1
            size = 64.0 if link != "LOCAL" else 16.0
            wait = float(rng.uniform(0.05, 1.5)) + (8.0 if src == 6 else 0.0)
            pairs.append(
                RankPair(src, dst, link, size, size / bw, bw, None if link == "LOCAL" else wait, 24)
            )
    return tuple(pairs)


def synthetic_run(seed: int = 0) -> RunRecord:
    t0 = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
    reps = [tuple(120.0 * np.random.default_rng(seed + i).lognormal(0, 0.01, 30)) for i in range(3)]
    step = Measurement(
        "step_time_ms", "ms", Direction.LOWER_IS_BETTER, tuple(reps), summarize(reps, steady=True)
    )
    profile = ProfileSummary(
        source="ascend",
        steps=3,
        breakdown=StepBreakdown(step_ms=120.0, compute_ms=96.0, free_ms=14.0),
        rank=0,
        utilisation={"device_busy_pct": 88.5, "aicore_util_pct": 61.2, "cube_util_pct": 43.0},
        notes=(
            "vector_util_pct: the profile was collected without aic_metrics=PipeUtilization",
            "l2_hit_pct: no l2_cache.csv (collect with l2_cache=True)",
            "hbm_bandwidth_gb_s: no hbm.csv in the profile (sys_hardware_mem_freq not set)",
            "sm_occupancy_pct: a CUDA metric; this is an Ascend profile",
        ),
        rank_pairs=synthetic_pairs(),
        timeline=synthetic_timeline(seed),
    )
    return RunRecord(
        id="bench-timeline-001",
        project="bench",
        benchmark="llama-8rank",
        fingerprint=Fingerprint(
            device_kind="npu",
            device_model="Ascend910B3",
            device_count=8,
            cpu_model="Kunpeng 920",
            cpu_cores=192,
            os="Linux-aarch64",
            python_version="3.11",
            torch_version="2.5.1",
            timing_method="device-event-v1",
        ),
        git=GitContext(commit="0" * 40, branch="main"),
        ci=CIContext(),
        started_at=t0,
        finished_at=t0 + timedelta(minutes=3),
        measurements=(step,),
        spec=BenchmarkSpec(name="llama-8rank", workload="external"),
        profile=profile,
    )


def _utilisation() -> UtilisationOf:
    """The app's wiring (:func:`perfgate.app.site.gather_site`): the advisor's pair
    utilisation, here with the default thresholds."""
    return partial(pair_utilisation, thresholds=Thresholds())


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _shoot(page: Path, shot: Path, size: str) -> float:
    browser = _chromium()
    assert browser is not None
    began = time.perf_counter()
    subprocess.run(
        [
            browser,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
            "--allow-file-access-from-files",
            "--virtual-time-budget=5000",
            f"--screenshot={shot}",
            f"--window-size={size}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/pg/shots"))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    run = synthetic_run()
    utilisation = _utilisation()
    timeline = run.profile.timeline if run.profile else None
    assert timeline is not None
    times, svg_times = [], []
    page = ""
    for _ in range(args.repeats):
        began = time.perf_counter()
        page = render_run(run, utilisation)
        times.append(time.perf_counter() - began)
        began = time.perf_counter()
        drawing = timeline_svg(timeline)
        svg_times.append(time.perf_counter() - began)
    spans = sum(len(lane.spans) for lane in timeline.lanes)
    pairs = len(run.profile.rank_pairs) if run.profile else 0
    print(f"timeline: {spans:,} spans on {len(timeline.lanes)} lanes, {pairs} rank pairs")
    print(
        f"render_run: median {statistics.median(times) * 1000:.0f} ms over {args.repeats} "
        f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}); timeline SVG alone "
        f"median {statistics.median(svg_times) * 1000:.0f} ms"
    )
    print(
        f"drawn one by one {drawing.drawn:,}, binned {drawing.binned:,} into {drawing.bins:,} "
        f"pixel bins, {drawing.gaps} idle gaps; timeline SVG {len(drawing.svg) / 1024:.0f} KiB, "
        f"page {len(page.encode()) / 1024:.0f} KiB"
    )
    site = args.out / "site"
    (site / "runs").mkdir(parents=True, exist_ok=True)
    (site / PLOTLY_JS).write_bytes(plotly_js())
    target = site / "runs" / "timeline.html"
    target.write_text(page, encoding="utf-8")
    print(f"page: {target}")
    if _chromium() is None:
        print("chromium is not installed: no screenshots")
        return 0
    for name, size in (("run_page_full.png", "1400,3400"), ("run_page_top.png", "1400,1800")):
        shot = args.out / name
        took = _shoot(target, shot, size)
        print(f"screenshot: {shot} ({took:.1f} s in chromium)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
