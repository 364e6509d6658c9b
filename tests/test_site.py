"""`perfgate report --html`: a static site from a real SQLite store with several benchmarks,
change points, PR runs and real profiles (a torch trace; a 2-rank Ascend profile), checked
as data, as HTML, and drawn by a real headless Chromium (skipped only without `chromium`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import fill, perfgate, record

from perfgate import app
from perfgate.app import deliver as report
from perfgate.app.site import gather_site
from perfgate.config import Config
from perfgate.models import (
    Direction,
    Finding,
    Measurement,
    RunRecord,
    Severity,
    Verdict,
)
from perfgate.parsers.ascend import parse_ascend
from perfgate.parsers.torch_trace import parse_torch_trace
from perfgate.reporters.html import benchmark_path, run_path
from perfgate.reporters.markdown import escape, sparkline
from perfgate.stats import summarize
from perfgate.store import open_store

DATA = Path(__file__).parent / "data"
EVIL = 'ascend<img src=x onerror="alert(1)">'
"""A benchmark name that must come out inert everywhere."""


def _memory(run: RunRecord, value: float) -> RunRecord:
    reps = [(value,), (value,), (value,)]
    m = Measurement(
        "peak_memory_bytes", "bytes", Direction.LOWER_IS_BETTER, tuple(reps), summarize(reps)
    )
    return replace(run, measurements=(*run.measurements, m))


def build_runs() -> list[RunRecord]:
    torch_profile = parse_torch_trace(DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz")
    ranks = parse_ascend(DATA / "ascend" / "msinsight_pt_text_level1_2rank")
    finding = Finding(
        rule="host_bound<b>",
        severity=Severity.WARNING,
        location="step",
        message="the device waits for the host <script>alert(2)</script>",
        suggestion="launch fewer, larger kernels",
        impact_ms=0.4,
    )
    runs: list[RunRecord] = []
    # mlp: a 20% regression from run 20 on; the last run is profiled and has findings
    for i in range(32):
        r = _memory(record(i, 20.0 if i < 20 else 24.0, benchmark="mlp"), 1e8)
        if i == 31:
            r = replace(r, profile=torch_profile, findings=(finding,))
        runs.append(r)
    # the Ascend job: an improvement at run 12, two ranks on the last run
    for i in range(26):
        r = record(i, 130.0 if i < 12 else 110.0, benchmark=EVIL, seed=3)
        if i == 25:
            r = replace(r, profile=ranks[0], rank_profiles=ranks)
        runs.append(r)
    # steady: nothing happens
    runs += [record(i, 5.0, benchmark="steady", seed=5) for i in range(15)]
    # PR runs, on two branches, beside main
    runs += [
        _memory(record(40 + i, 26.0, branch="feat/slow", benchmark="mlp", seed=9), 1.2e8)
        for i in range(3)
    ]
    runs.append(record(45, 110.5, branch="feat/npu", benchmark=EVIL, seed=9))
    return runs


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('site') / 's.db'}"
    fill(url, build_runs())
    return url


@pytest.fixture(scope="module")
def site_dir(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("html") / "report"
    result = perfgate(None, "report", "--html", str(out), "--db", store_url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == str(out / "index.html")
    return out


def test_site_data_has_change_points_pr_runs_band_and_the_comment_trend(store_url: str) -> None:
    store = open_store(store_url)
    try:
        site = gather_site(Config(), store)
        by = {b.name: b for b in site.benchmarks}
        assert sorted(by) == sorted(["mlp", EVIL, "steady"])
        mlp = {m.metric: m for m in by["mlp"].metrics}["step_time_ms"]
        # the change point, with the commits it lies between
        (cp,) = mlp.changes
        assert (cp.commit_before, cp.commit_after) == (f"{19:040x}", f"{20:040x}")
        assert cp.verdict is Verdict.REGRESSION
        assert {c.verdict for m in by[EVIL].metrics for c in m.changes} == {Verdict.IMPROVEMENT}
        assert not any(m.changes for m in by["steady"].metrics)
        # PR runs are kept apart from main
        assert {p.branch for p in mlp.others} == {"feat/slow"} and len(mlp.others) == 3
        assert {p.branch for p in mlp.base} == {"main"} and len(mlp.base) == 32
        # the noise band is the latest run's window (after the change point) and holds it
        assert mlp.band is not None and mlp.band.low < 24.0 < mlp.band.high
        assert mlp.window_run_ids and all(int(r[-3:]) >= 20 for r in mlp.window_run_ids)
        assert all(c is not None and c > 0 for c in mlp.base_ci)
        # the pages: latest main run first, then the PR branch's
        assert [r.git.branch for r in by["mlp"].runs] == ["main", "feat/slow"]
        assert by[EVIL].runs[0].rank_profiles
        # the overview's trend is the PR comment's trend, run for run: the comment's trend
        # column draws the same series as the site's sparklines
        result = app.compare(Config(), store, branch="main", against="main")
        comment = report.build_report(Config(), store, result, failed=False).markdown
        for b in site.benchmarks:
            for m in b.metrics:
                if m.comparison is not None:
                    assert len(m.trend) == len(m.window_run_ids) + 1
                    row = next(
                        line
                        for line in comment.splitlines()
                        if line.startswith(f"| {escape(b.name)} | {escape(m.metric)} |")
                    )
                    assert row.rstrip(" |").endswith(sparkline(m.trend)), row
    finally:
        store.close()


def test_site_files_are_self_contained_and_escaped(site_dir: Path) -> None:
    assert (site_dir / "plotly.min.js").stat().st_size > 1_000_000
    pages = sorted(p.relative_to(site_dir).as_posix() for p in site_dir.rglob("*.html"))
    assert "index.html" in pages
    assert benchmark_path(EVIL) in pages and benchmark_path("mlp") in pages
    assert sum(p.startswith("runs/") for p in pages) >= 4
    for rel in pages:
        text = (site_dir / rel).read_text(encoding="utf-8")
        # no CDN, no network: only the local bundle, by a relative path
        assert "cdn.plot.ly" not in text and "https://" not in text, rel
        depth = rel.count("/")
        assert f'<script src="{"../" * depth}plotly.min.js"></script>' in text, rel
        # data never becomes markup, in the page or in the plots' JSON
        assert "<img src=x" not in text and "<script>alert" not in text, rel
    index = (site_dir / "index.html").read_text(encoding="utf-8")
    assert "ascend&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in index
    assert index.count('<svg class="spark"') == 3


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _browse(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    browser = _chromium()
    assert browser is not None
    return subprocess.run(
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
            *args,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


_CONSOLE = re.compile(r":CONSOLE[:(]|Uncaught ")
"""A line Chromium logs for any console message or uncaught exception: the pages log none."""


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if _CONSOLE.search(line)]


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed")
def test_chromium_draws_every_plot_without_console_errors(site_dir: Path, tmp_path: Path) -> None:
    # the console check itself sees errors
    broken = tmp_path / "broken.html"
    broken.write_text("<script>console.error('boom'); missing();</script>", encoding="utf-8")
    assert len(_console(_browse(broken, "--dump-dom").stderr)) == 2
    pages = {
        "index.html": 0,
        benchmark_path("mlp"): 2,  # step time and peak memory
        benchmark_path(EVIL): 1,
    }
    store_pages = sorted((site_dir / "runs").glob("*.html"))
    ascend_run = next(
        p for p in store_pages if "rank 1" in p.read_text(encoding="utf-8")
    )  # the 2-rank job: ops, breakdown per rank, two heatmaps
    pages[ascend_run.relative_to(site_dir).as_posix()] = 4
    mlp_run = site_dir / run_path("mlp-main-031")
    pages[mlp_run.relative_to(site_dir).as_posix()] = 3  # ops, breakdown, memory
    for rel, plots in pages.items():
        done = _browse(site_dir / rel, "--dump-dom")
        assert done.returncode == 0, done.stderr[-2000:]
        dom = done.stdout
        drawn = len(re.findall(r'class="main-svg"', dom))
        containers = len(re.findall(r'class="[^"]*js-plotly-plot', dom))
        assert containers == plots, (rel, containers)
        assert drawn >= plots, (rel, drawn)
        assert not _console(done.stderr), (rel, _console(done.stderr))
        if rel.startswith("benchmarks/"):
            # every history plot got its hover texts from the page's run table
            filled = [int(n) for n in re.findall(r'data-hover-runs="(\d+)"', dom)]
            assert len(filled) == plots and all(n > 0 for n in filled), (rel, filled)
    shots = []
    for rel in (benchmark_path("mlp"), ascend_run.relative_to(site_dir).as_posix()):
        shot = tmp_path / (rel.split("/")[0] + "-" + Path(rel).stem + ".png")
        done = _browse(site_dir / rel, f"--screenshot={shot}", "--window-size=1280,2000")
        assert done.returncode == 0, done.stderr[-2000:]
        assert shot.stat().st_size > 20_000  # a drawn page, not a blank one
        shots.append(shot)
    artifacts = os.environ.get("PERFGATE_ARTIFACTS")
    if artifacts:
        target = Path(artifacts) / "html-report"
        target.mkdir(parents=True, exist_ok=True)
        for shot in shots:
            shutil.copy(shot, target / shot.name)


def test_report_refuses_unknown_benchmarks(store_url: str, tmp_path: Path) -> None:
    result = perfgate(
        None, "report", "--html", str(tmp_path / "r"), "--db", store_url, "--benchmark", "nope"
    )
    assert result.returncode == 2
    assert "no runs of nope" in result.stderr


def test_history_plots_are_valid_plotly_figures(store_url: str) -> None:
    """History plots are built as plain dicts for speed; graph_objects still accepts them."""
    import plotly.graph_objects as go

    from perfgate.reporters.html import _run_table, history_figure

    store = open_store(store_url)
    try:
        site = gather_site(Config(), store)
    finally:
        store.close()
    for b in site.benchmarks:
        _, rows, starts = _run_table(b)
        _, other_rows, _ = _run_table(b, others=True)
        for m in b.metrics:
            fig = go.Figure(history_figure(m, site.branch, rows, starts, other_rows))
            metas = [t.meta for t in fig.data]
            # the noise band first, behind the points, where the metric was judged
            assert metas[: metas.index("base")] in ([], ["band", "median"]), metas


def test_worker_processes_write_the_same_site(
    store_url: str, site_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from perfgate.app import site as site_module

    monkeypatch.setattr(site_module, "PARALLEL_MIN_BENCHMARKS", 1)
    out = tmp_path / "parallel"
    result = perfgate(None, "report", "--html", str(out), "--db", store_url, "--jobs", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    serial = {p.relative_to(site_dir) for p in site_dir.rglob("*")}
    assert {p.relative_to(out) for p in out.rglob("*")} == serial
    for rel in serial:
        if rel.suffix == ".html" and rel.name != "index.html":
            assert (out / rel).read_text() == (site_dir / rel).read_text(), rel
    strip = re.compile(r"generated [^<]*")
    assert strip.sub("", (out / "index.html").read_text()) == strip.sub(
        "", (site_dir / "index.html").read_text()
    )


def test_report_into_a_project_directory_keeps_its_own_files(
    store_url: str, tmp_path: Path
) -> None:
    """``--html .`` in a repository replaces perfgate's pages only: a project's own
    ``benchmarks/`` folder (a likely name in a performance project) survives."""
    mine = tmp_path / "benchmarks" / "train_resnet.py"
    mine.parent.mkdir()
    mine.write_text("print('mine')\n")
    stale = tmp_path / "runs" / "gone-0123abcd.html"
    stale.parent.mkdir()
    stale.write_text("an old page")
    result = perfgate(None, "report", "--html", str(tmp_path), "--db", store_url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert mine.read_text() == "print('mine')\n"
    assert not stale.exists()
    assert (tmp_path / benchmark_path("mlp")).is_file()


def test_an_unwritable_report_directory_is_one_line_and_exit_3(
    store_url: str, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = blocker / "report"
    for args in (
        ["report", "--html", str(out)],
        ["baseline", "export", "--out", str(out)],
        ["export", "tensorboard", str(out)],
    ):
        result = perfgate(None, *args, "--db", store_url)
        assert result.returncode == 3, (args, result.stdout + result.stderr)
        assert result.stderr.startswith("perfgate: error: cannot write "), result.stderr
        assert "Not a directory" in result.stderr and len(result.stderr.splitlines()) == 1
