"""Reports at the edges: the reproduce steps of ingested runs, numbers float32 cannot hold,
huge changes, and a run with no device count (the PR comment and the HTML report)."""

from __future__ import annotations

import base64
import json
import re
import shlex
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import make_fingerprint, make_run, perfgate

from perfgate.models import (
    INGESTED_TIMING,
    ChangePoint,
    Comparison,
    DetectedChange,
    Direction,
    GateResult,
    Verdict,
)
from perfgate.parsers.results import FORMAT_METRICS, RESULT_FORMATS
from perfgate.reporters.html import render_run
from perfgate.reporters.markdown import ReportContext, render_alert_issue, render_comment
from perfgate.reporters.render import render_changes_text

BENCH = "my bench"
"""A benchmark name with a space: the shell needs it quoted."""


def metrics_file(path: Path, values: dict[str, float]) -> Path:
    doc = {
        "metrics": [
            {"name": k, "values": [v, v], "unit": "", "direction": "lower"}
            if k != "step_time_ms"
            else {"name": k, "values": [v, v]}
            for k, v in values.items()
        ]
    }
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A store of a metrics file ingested 3 times on main and once on feat, its step time
    beyond float32 (1e39 ms, then 1e300 ms) and a metric below it (1e-50, then 2e-50)."""
    tmp = tmp_path_factory.mktemp("edges")
    url = f"sqlite:///{tmp / 's.db'}"
    for i, (step, tiny) in enumerate([(1e39, 1e-50)] * 3 + [(1e300, 2e-50)]):
        path = metrics_file(tmp / f"m{i}.json", {"step_time_ms": step, "tiny": tiny})
        branch = "main" if i < 3 else "feat"
        done = perfgate(None, "ingest", str(path), "--benchmark", BENCH, "--branch", branch, db=url)
        assert done.returncode == 0, done.stderr
    return url, tmp


@pytest.fixture(scope="module")
def comment(store: tuple[str, Path]) -> str:
    url, tmp = store
    out = tmp / "out"
    done = perfgate(
        None, "gate", "--branch", "feat", "--against", "main", "--report-dir", str(out), db=url
    )
    assert done.returncode == 1, done.stderr
    return (out / "report.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def site(store: tuple[str, Path]) -> Path:
    url, tmp = store
    done = perfgate(None, "report", "--html", str(tmp / "site"), db=url)
    assert done.returncode == 0, done.stderr
    return tmp / "site"


# --- bug 1: the reproduce steps of an ingested run ----------------------------------------


def test_reproduce_steps_of_an_ingested_metrics_file_can_be_pasted(
    store: tuple[str, Path], comment: str
) -> None:
    """The steps said `perfgate ingest FILE --branch feat`, which fails (a metrics file does
    not name its benchmark) or records a run of another name."""
    url, tmp = store
    lines = comment.splitlines()
    assert "git checkout main && perfgate ingest FILE --branch main --benchmark 'my bench'" in lines
    line = next(x for x in lines if x.startswith("git checkout feat && "))
    assert line == "git checkout feat && perfgate ingest FILE --branch feat --benchmark 'my bench'"
    # pasted, with the file the job wrote, it records a run of the same benchmark
    words = shlex.split(line.split(" && ", 1)[1])
    path = metrics_file(tmp / "again.json", {"step_time_ms": 1e300, "tiny": 2e-50})
    assert words[:3] == ["perfgate", "ingest", "FILE"]
    done = perfgate(None, "ingest", str(path), *words[3:], db=url)
    assert done.returncode == 0, done.stderr
    assert f"of {BENCH} on feat" in done.stdout


def gate_of(*names: str) -> GateResult:
    comparisons = tuple(
        Comparison(
            benchmark=name,
            metric="step_time_ms",
            unit="ms",
            direction=Direction.LOWER_IS_BETTER,
            verdict=Verdict.REGRESSION,
            reason="slower",
            current_run_id=f"{name}-feat",
            current_centre=12.0,
            baseline_centre=10.0,
            baseline_run_ids=("r1", "r2", "r3"),
            change_pct=20.0,
        )
        for name in names
    )
    return GateResult("feat", "main", Verdict.REGRESSION, comparisons)


def ingested(timing_method: str) -> ReportContext:
    fields = {"timing_method": timing_method, "device_count": 0}
    return ReportContext(project="p", ingested=True, environments=[("k", fields)])


@pytest.mark.parametrize("fmt", sorted(INGESTED_TIMING))
def test_reproduce_steps_pass_benchmark_where_ingest_named_the_run(fmt: str) -> None:
    """A profile, an ais_bench summary or a metrics file is one run, named by `--benchmark`;
    a pytest-benchmark, pyperf or asv file names its own (`--benchmark` is only a prefix)."""
    text = render_comment(gate_of("llama"), ingested(INGESTED_TIMING[fmt]))
    named = fmt not in RESULT_FORMATS or fmt == FORMAT_METRICS
    tail = " --benchmark llama" if named else ""
    assert f"git checkout main && perfgate ingest FILE --branch main{tail}\n" in text
    assert f"git checkout feat && perfgate ingest FILE --branch feat{tail}\n" in text


def test_reproduce_steps_ingest_each_benchmarks_file() -> None:
    text = render_comment(gate_of("a", "b c"), ingested(INGESTED_TIMING[FORMAT_METRICS]))
    assert "after the job wrote each benchmark's FILE:" in text
    assert (
        "git checkout feat && perfgate ingest FILE --branch feat --benchmark a && "
        "perfgate ingest FILE --branch feat --benchmark 'b c'\n"
    ) in text


def test_a_name_the_shell_cannot_take_safely_stays_a_placeholder() -> None:
    text = render_comment(gate_of("$(rm -rf ~) @x"), ingested(INGESTED_TIMING[FORMAT_METRICS]))
    assert "perfgate ingest FILE --branch feat --benchmark NAME\n" in text
    assert "rm -rf" not in text.split("**Reproduce locally**")[1]


# --- bug 2: chart values float32 cannot hold -----------------------------------------------


def plotted(page: str) -> list[np.ndarray]:
    """Every typed array of the page's charts, decoded."""
    found = re.findall(r'"dtype":"(f[48])","bdata":"([A-Za-z0-9+/=]*)"', page)
    found += [(d, b) for b, d in re.findall(r'"bdata":"([A-Za-z0-9+/=]*)","dtype":"(f[48])"', page)]
    return [np.frombuffer(base64.b64decode(b), dtype=f"<{d}") for d, b in found]


def test_history_chart_plots_values_float32_cannot_hold(site: Path) -> None:
    """1e39 ms was sent as float32 (inf) and 1e-50 as 0: the chart showed neither."""
    (page,) = [p.read_text(encoding="utf-8") for p in (site / "benchmarks").glob("*.html")]
    arrays = plotted(page)
    values = np.concatenate(arrays)
    assert arrays and np.isfinite(values).all()
    assert {1e39, 1e300, 1e-50, 2e-50} <= set(values.tolist())
    assert not re.search(r"\b(Infinity|NaN)\b", page)
    assert '"exponentformat":"e"' in page  # the axis writes 1e+39, not 40 digits


# --- bug 3: a run page's device count ------------------------------------------------------


def device_words(page: str) -> str:
    found = re.search(r"started [^·]+· (.+?)\s*· testbed", page, re.S)
    assert found, page
    return " ".join(found.group(1).split())


def test_an_ingested_runs_page_shows_no_device_count(site: Path) -> None:
    """A metrics file names no device: the page said ` x0`."""
    pages = [p.read_text(encoding="utf-8") for p in (site / "runs").glob("*.html")]
    assert len(pages) == 2
    for page in pages:
        words = device_words(page)
        assert words.startswith("host ") and "x0" not in words, words


@pytest.mark.parametrize(
    ("changes", "shown"),
    [
        (dict(device_kind="npu", device_model="Ascend910B3", device_count=8), "npu Ascend910B3 x8"),
        (dict(device_kind="cpu", device_model="", device_count=0), "cpu"),
        (dict(device_kind="", device_model="", device_count=0, cpu_model="EPYC"), "host EPYC"),
    ],
)
def test_a_runs_page_names_its_device(changes: dict[str, object], shown: str) -> None:
    run = make_run("r1", fingerprint=make_fingerprint(**changes))
    assert device_words(render_run(run)) == shown


# --- bug 4: huge numbers ------------------------------------------------------------------


LONG_NUMBER = re.compile(r"\d{20,}")


def test_a_huge_change_is_compact_in_the_comment_and_the_report(comment: str, site: Path) -> None:
    """A change of 1e39 ms to 1e300 ms printed a 264-digit percent."""
    row = next(x for x in comment.splitlines() if x.startswith("| my bench | step\\_time\\_ms |"))
    assert "| 1e+39 ms | 1e+300 ms | +1e+263% |" in row
    for page in [*(site / "benchmarks").glob("*.html"), site / "index.html"]:
        found = LONG_NUMBER.search(page.read_text(encoding="utf-8"))
        assert found is None, found


def test_huge_values_and_change_points_are_compact() -> None:
    c = gate_of("b").comparisons[0]
    huge = replace(c, unit="1/s", current_centre=1e300, baseline_centre=2e12, change_pct=5e289)
    text = render_comment(GateResult("feat", "main", Verdict.REGRESSION, (huge,)), ingested("x"))
    assert "| 2e+12/s | 1e+300/s | +5e+289% |" in text
    point = DetectedChange(
        benchmark="b",
        metric="step_time_ms",
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        branch="main",
        fingerprint_key="fp",
        point=ChangePoint(5, 1.0, 1e300, 1e302, 1e-6, 0.999),
        last_run_before="r4",
        first_run_after="r5",
        commit_before="a" * 40,
        commit_after="b" * 40,
        runs_in_series=12,
    )
    for said in (render_alert_issue("p", "main", [point]), render_changes_text([point])):
        assert "+1e+302%" in said and not LONG_NUMBER.search(said), said
