"""The HTML report as a new user reads it after a failed PR gate: the PR branch's verdict on
the overview and as labelled points in the history, whole run numbers on the x axis, bytes
in the tables' binary units, no ``main @ ·`` for an unknown commit, the findings' "could
save" filled in; and a headless-Chromium screenshot of the overview (skipped only without
``chromium``)."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import fill, perfgate, record

from perfgate.app.site import gather_site, write_site
from perfgate.config import Config
from perfgate.models import Direction, GitContext, Measurement, RunRecord, Verdict
from perfgate.parsers.torch_trace import parse_torch_trace
from perfgate.reporters.html import (
    SiteView,
    _run_table,
    benchmark_path,
    history_figure,
    run_path,
)
from perfgate.stats import summarize
from perfgate.store import open_store

DATA = Path(__file__).parent / "data"
MIB = 1 << 20


def _memory(run: RunRecord, value: float) -> RunRecord:
    reps = [(value,), (value,), (value,)]
    m = Measurement(
        "peak_memory_bytes", "bytes", Direction.LOWER_IS_BETTER, tuple(reps), summarize(reps)
    )
    return replace(run, measurements=(*run.measurements, m))


def build_runs() -> list[RunRecord]:
    """Five runs on main at 20 ms (the latest profiled, its commit unknown) and one on
    ``feat`` 30% slower."""
    profile = parse_torch_trace(DATA / "torch_trace" / "mlp_cpu.pt.trace.json.gz")
    runs = [_memory(record(i, 20.0), 345e6) for i in range(5)]
    runs[-1] = replace(runs[-1], profile=profile, git=GitContext(commit="", branch="main"))
    runs.append(_memory(record(10, 26.0, branch="feat", seed=7), 350e6))
    return runs


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('reading') / 's.db'}"
    fill(url, build_runs())
    return url


@pytest.fixture(scope="module")
def site(store_url: str) -> SiteView:
    # the PR gate fails first, as in CI
    gate = perfgate(None, "gate", "--branch", "feat", "--against", "main", "--db", store_url)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    store = open_store(store_url)
    try:
        return gather_site(Config(), store)
    finally:
        store.close()


@pytest.fixture(scope="module")
def site_dir(site: SiteView, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("html") / "report"
    write_site(out, site)
    return out


def test_the_overview_shows_the_pr_branch_verdict_labelled(site: SiteView, site_dir: Path) -> None:
    (mlp,) = site.benchmarks
    (feat,) = mlp.branches
    assert (feat.branch, feat.run_id, feat.verdict) == ("feat", "mlp-feat-010", Verdict.REGRESSION)
    # no CPU time measured: the wall time decides, and the headline shows it
    assert feat.comparison is not None and feat.comparison.metric == "step_time_ms"
    assert feat.comparison.change_pct is not None and 25 < feat.comparison.change_pct < 35
    assert mlp.verdict is not Verdict.NO_BASELINE  # main's own verdict still stands beside it
    index = (site_dir / "index.html").read_text(encoding="utf-8")
    cell = re.search(r'<td class="branches">(.*?)</td>', index)
    assert cell is not None
    assert re.search(
        r"<code>feat</code>: <span class=\"bad\">regression</span> "
        r"<span class='deciding' title='[\d.]+% CI'>"
        r"<code>step_time_ms</code> \+[23]\d\.\d% \[\+[23]\d\.\d, \+[23]\d\.\d\]</span>",
        cell[1],
    ), cell[1]
    assert f"href='{run_path('mlp-feat-010')}'" in cell[1]
    assert "other branches vs main" in index and "1 regression" in index


def test_an_unknown_commit_is_not_main_at_nothing(site_dir: Path) -> None:
    for rel in ("index.html", benchmark_path("mlp"), run_path("mlp-main-004")):
        text = (site_dir / rel).read_text(encoding="utf-8")
        assert "<code></code>" not in text, rel
        flat = re.sub(r"<[^>]+>", "", text)
        assert not re.search(r"@\s*·", flat) and not re.search(r"@\s*\(", flat), rel
    page = (site_dir / run_path("mlp-main-004")).read_text(encoding="utf-8")
    assert "<b>main</b> <span class='muted'>(commit unknown)</span>" in page


def test_could_save_shows_the_findings_impact(site_dir: Path) -> None:
    page = (site_dir / run_path("mlp-main-004")).read_text(encoding="utf-8")
    table = re.search(r"<table id='findings'>.*?</table>", page, re.S)
    assert table is not None
    cells = dict(re.findall(r"<td>(host_\w+)</td>.*?<td class='num'>([^<]*)</td></tr>", table[0]))
    assert re.fullmatch(r"\d+(\.\d+)? ms", cells["host_bound"]), cells  # impact estimated
    assert cells["host_sync"] == "-", cells  # the rule cannot tell


def _decoded(y: object) -> list[float]:
    assert isinstance(y, dict)
    return list(np.frombuffer(base64.b64decode(y["bdata"]), dtype=f"<{y['dtype']}"))


def test_history_charts_use_whole_run_ticks_mib_and_label_pr_runs(site: SiteView) -> None:
    import plotly.graph_objects as go

    (mlp,) = site.benchmarks
    _, rows, starts = _run_table(mlp)
    _, other_rows, _ = _run_table(mlp, others=True)
    figs = {m.metric: history_figure(m, "main", rows, starts, other_rows) for m in mlp.metrics}
    for fig in figs.values():
        go.Figure(fig)  # a valid plotly figure
        xaxis = fig["layout"]["xaxis"]
        assert xaxis["tickformat"] == "d" and xaxis["dtick"] == 1
        legend = fig["layout"]["legend"]
        assert legend["yref"] == "container" and legend["yanchor"] == "bottom"
    memory = figs["peak_memory_bytes"]
    assert memory["layout"]["yaxis"]["title"]["text"] == "MiB"
    assert "MiB" in memory["layout"]["title"]["text"]
    base = next(t for t in memory["data"] if t.get("meta") == "base")
    assert all(abs(v - 345e6 / MIB) < 0.01 for v in _decoded(base["y"]))
    assert ".1f} MiB" in base["hovertemplate"]
    step = figs["step_time_ms"]
    (pr,) = [t for t in step["data"] if t.get("meta") == "other"]
    assert pr["name"] == "feat: regression"
    assert pr["hovertext"][0].startswith("regression +") and "vs main" in pr["hovertext"][0]
    assert "%{hovertext}" in pr["hovertemplate"]


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed")
def test_screenshot_of_the_overview_after_a_failed_pr_gate(site_dir: Path, tmp_path: Path) -> None:
    browser = _chromium()
    assert browser is not None
    artifacts = os.environ.get("PERFGATE_ARTIFACTS")
    target = Path(artifacts) / "html-report" if artifacts else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    shot = target / "index_after_pr_gate.png"
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--allow-file-access-from-files",
            "--virtual-time-budget=5000",
            f"--screenshot={shot}",
            "--window-size=1400,700",
            (site_dir / "index.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.stat().st_size > 10_000  # a drawn page, not a blank one
