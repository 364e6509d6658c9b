"""The one decision rule: every view of a gate (terminal headline, JSON summary, PR comment,
exit code, overall verdict) asks :mod:`perfgate.stats.decide`, so they cannot disagree."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from helpers import fill, perfgate, record

from perfgate.models import Comparison, Direction, GateResult, Verdict
from perfgate.reporters.markdown import ReportContext, verdict_line
from perfgate.reporters.render import gate_to_dict, headline
from perfgate.stats import decide


def _ab_store(tmp_path: Path) -> str:
    """main's history at 20 ms; a feat run 30% slower than it (history says regression), but
    measured in A/B pairs beside a base run that was just as slow (pairs say unchanged)."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    history = [record(i, 20.0, noise=0.01) for i in range(10)]
    base = replace(
        record(40, 26.0, branch="feat:base", noise=0.01, seed=1, repeats=10), id="base-run"
    )
    head = replace(
        record(41, 26.0, branch="feat", noise=0.01, seed=2, repeats=10), paired_with="base-run"
    )
    fill(url, [*history, base, head])
    return url


def test_ab_headline_summary_comment_and_exit_code_agree(tmp_path: Path) -> None:
    url = _ab_store(tmp_path)
    as_json = perfgate(None, "gate", "--db", url, "--branch", "feat", "--json")
    data = json.loads(as_json.stdout)
    methods = {(c["method"], c["verdict"]) for c in data["comparisons"]}
    # The premise: history alone would call it a regression, the pairs do not.
    assert ("history", "regression") in methods
    assert ("paired", "unchanged") in methods
    assert data["verdict"] == "unchanged"
    assert data["summary"]["regression"] == 0
    assert data["summary"]["unchanged"] == 1
    assert data["failed"] is False
    assert as_json.returncode == 0

    text = perfgate(None, "gate", "--db", url, "--branch", "feat")
    assert text.returncode == 0
    first = text.stdout.splitlines()[0]
    assert "regression" not in first.lower(), first
    assert "1 unchanged" in first

    out = tmp_path / "report"
    posted = perfgate(None, "gate", "--db", url, "--branch", "feat", "--report-dir", str(out))
    assert posted.returncode == 0
    comment = (out / "report.md").read_text()
    line = next(x for x in comment.splitlines() if "perfgate:" in x and not x.startswith("<!--"))
    assert "regression" not in line, line
    assert "no change" in line


def _c(verdict: Verdict, method: str = "history", benchmark: str = "b") -> Comparison:
    return Comparison(
        benchmark=benchmark,
        metric="step_time_ms",
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        verdict=verdict,
        reason="",
        current_run_id="r",
        current_centre=1.0,
        method=method,
    )


def test_every_view_counts_only_the_deciding_comparisons() -> None:
    comparisons = (
        _c(Verdict.REGRESSION, "history", "ab"),
        _c(Verdict.UNCHANGED, "paired", "ab"),
        _c(Verdict.INCONCLUSIVE, "history", "plain"),
    )
    result = GateResult(
        branch="feat",
        against="main",
        verdict=decide.overall_verdict(comparisons),
        comparisons=comparisons,
    )
    assert result.verdict is Verdict.INCONCLUSIVE
    assert decide.verdict_counts(comparisons)[Verdict.REGRESSION] == 0
    assert not decide.gate_fails(comparisons, {Verdict.REGRESSION})
    assert decide.gate_fails(comparisons, {Verdict.INCONCLUSIVE})
    assert headline(result) == "1 unchanged, 1 inconclusive in 2 benchmarks — feat vs main"
    assert gate_to_dict(result, failed=False)["summary"]["regression"] == 0
    assert "regression" not in verdict_line(result, ReportContext(project="demo", failed=False))


def test_direction_decides_worse_in_one_place() -> None:
    assert Direction.LOWER_IS_BETTER.worse(3.0)
    assert not Direction.LOWER_IS_BETTER.worse(-3.0)
    assert Direction.HIGHER_IS_BETTER.worse(-3.0)
    assert decide.change_verdict(Direction.HIGHER_IS_BETTER, 5.0) is Verdict.IMPROVEMENT
    assert decide.deterministic_verdict(Direction.LOWER_IS_BETTER, 0.5, 1.0) is Verdict.UNCHANGED
    assert decide.deterministic_verdict(Direction.LOWER_IS_BETTER, 2.0, 1.0) is Verdict.REGRESSION
