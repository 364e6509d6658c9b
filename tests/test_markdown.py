"""The PR/MR comment: golden files for each kind of gate, escaping of hostile names, size
limits and comment modes. Regenerate the goldens with PERFGATE_UPDATE_GOLDEN=1 and read
them before committing."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from perfgate.models import (
    Attribution,
    Comparison,
    Direction,
    Finding,
    Fingerprint,
    GateResult,
    OpDelta,
    Severity,
    Verdict,
)
from perfgate.reporters.forges.github import MAX_CHARS as GITHUB_MAX_CHARS
from perfgate.reporters.markdown import (
    ZWJ,
    CommentMode,
    ReportContext,
    escape,
    marker,
    render_comment,
    should_post,
    sparkline,
    status_description,
)

GOLDEN = Path(__file__).parent / "data" / "comments"
V = Verdict


def sha(i: int) -> str:
    return hashlib.sha1(str(i).encode()).hexdigest()


def comp(
    benchmark: str,
    verdict: Verdict = V.UNCHANGED,
    *,
    metric: str = "step_time_ms",
    base: float | None = 20.0,
    cur: float = 20.1,
    change: float | None = 0.5,
    ci: tuple[float, float] | None = (-1.2, 2.1),
    runs: int = 30,
    reason: str = "within noise",
    unit: str = "ms",
    diffs: tuple[str, ...] = (),
) -> Comparison:
    return Comparison(
        benchmark=benchmark,
        metric=metric,
        unit=unit,
        direction=Direction.LOWER_IS_BETTER if unit != "1/s" else Direction.HIGHER_IS_BETTER,
        verdict=verdict,
        reason=reason,
        current_run_id=f"{benchmark}-feat-001",
        current_centre=cur,
        baseline_centre=base,
        baseline_run_ids=tuple(f"{benchmark}-main-{i:03d}" for i in range(runs)),
        baseline_commits=tuple(sha(i) for i in range(runs)),
        change_pct=change,
        ci_low_pct=None if ci is None else ci[0],
        ci_high_pct=None if ci is None else ci[1],
        ci_level=None if ci is None else 0.99,
        min_effect_pct=3.0,
        mde_pct=1.4,
        fingerprint_differences=diffs,
    )


def result(*comparisons: Comparison, **kw: object) -> GateResult:
    worst = min((c.verdict for c in comparisons), key=lambda v: list(Verdict).index(v))
    return GateResult(branch="feat", against="main", verdict=worst, comparisons=comparisons, **kw)  # type: ignore[arg-type]


FP = Fingerprint(
    device_kind="npu",
    device_model="Ascend910B3",
    device_count=8,
    cpu_model="Kunpeng-920",
    cpu_cores=192,
    os="Linux-aarch64",
    python_version="3.11",
    torch_version="2.5.1",
    torch_npu_version="2.5.1",
    cann_version="8.0.RC3",
    timing_method="wall-sync-v1",
    params={"batch_size": 64, "dtype": "bf16"},
)


def ctx(**kw: object) -> ReportContext:
    base: dict[str, object] = dict(
        project="llama-train",
        suite="perfgate.toml",
        testbed="ascend-910b",
        commit="f00dfacecafe0123",
        environments=[(FP.key(), FP.to_dict())],
        suite_path="perfgate.toml",
        job_url="https://github.com/o/r/actions/runs/42",
    )
    base.update(kw)
    return ReportContext(**base)  # type: ignore[arg-type]


def trend(values: list[float]) -> dict[tuple[str, str], list[float]]:
    return {("mlp", "step_time_ms"): values}


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.md"
    if os.environ.get("PERFGATE_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"missing golden {path}: run with PERFGATE_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (PERFGATE_UPDATE_GOLDEN=1)"


def unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def table_rows(text: str) -> list[str]:
    """The lines of the comment's first table (the verdicts)."""
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("| benchmark |"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("| ")), len(lines))
    return lines[start:end]


def test_all_pass() -> None:
    r = result(
        comp("cnn"),
        comp("cnn", metric="throughput_samples_per_s", base=3200, cur=3190, unit="1/s"),
        comp("mlp", change=-0.4, cur=19.9),
        comp("transformer", base=41.0, cur=41.2),
    )
    text = render_comment(r, ctx(trends=trend([20.0, 20.2, 19.9, 20.1, 20.0, 19.8, 20.3, 19.9])))
    check_golden("all_pass", text)
    assert text.splitlines()[1].startswith("### ✅ perfgate: no change in 3 benchmarks (4 metrics)")
    assert "vs main @ " + sha(29)[:7] + ", 30 runs" in text


def test_one_regression_with_attribution_and_findings() -> None:
    r = result(
        comp(
            "mlp",
            V.REGRESSION,
            base=20.0,
            cur=26.1,
            change=30.5,
            ci=(27.9, 33.0),
            reason="+30.5% [+27.9, +33.0] beyond the 3% minimum effect (p=0.0004, adjusted 0.0012)",
        ),
        comp("cnn"),
        attributions=(
            Attribution(
                benchmark="mlp",
                metric="step_time_ms",
                delta_ms=6.1,
                ops=(
                    OpDelta("aten::mm", "npu", 8.0, 12.1, share=0.67),
                    OpDelta("HcclAllReduce", "npu", 0.0, 1.4, share=0.23, status="new"),
                    OpDelta("TransData", "npu", 0.9, 1.2, share=0.05),
                ),
                explained_share=0.95,
            ),
        ),
        findings=(
            Finding(
                rule="comm_not_overlapped",
                severity=Severity.WARNING,
                location="mlp: rank 0",
                message="32% of the step is communication not overlapped with compute",
                suggestion="Enable gradient bucketing overlap (HCCL_OP_EXPANSION_MODE=AIV).",
                impact_ms=4.2,
            ),
            Finding(
                rule="aicpu_ops",
                severity=Severity.INFO,
                location="mlp",
                message="2 ops ran on AI CPU",
                suggestion="Cast inputs to supported dtypes.",
                known=True,
            ),
        ),
    )
    text = render_comment(r, ctx(failed=True, trends=trend([20.0, 20.1, 19.9, 20.2, 26.1])))
    check_golden("regression", text)
    assert "### ❌ perfgate: 1 regression in 2 benchmarks" in text
    assert "comm\\_not\\_overlapped" in text and "2 ops ran on AI CPU" not in text
    assert "1 advisor finding already present on main not repeated here." in text
    rows = table_rows(text)
    assert "regression" in rows[2]  # worst first


def test_inconclusive() -> None:
    r = result(
        comp(
            "mlp",
            V.INCONCLUSIVE,
            cur=21.0,
            change=5.0,
            ci=(-0.5, 10.4),
            reason="+5.0% looks beyond the 3% minimum effect but the data cannot tell "
            "(detectable 9.8%); about 4 more repeats would settle it: perfgate run --confirm 4",
        ),
        comp("cnn"),
    )
    text = render_comment(r, ctx(trends=trend([20.0, 22.0, 19.0, 21.5, 21.0])))
    check_golden("inconclusive", text)
    assert "### ⚠️ perfgate: 1 inconclusive in 2 benchmarks" in text
    assert should_post(CommentMode.CHANGE, r) and not should_post(CommentMode.REGRESSION, r)


def test_no_baseline_yet() -> None:
    r = result(
        comp(
            "mlp",
            V.NO_BASELINE,
            base=None,
            change=None,
            ci=None,
            runs=0,
            reason="1 run on main; 3 needed",
        ),
        comp(
            "cnn", V.NO_BASELINE, base=None, change=None, ci=None, runs=0, reason="no run on main"
        ),
    )
    text = render_comment(r, ctx())
    check_golden("no_baseline", text)
    assert (
        "### ℹ️ perfgate: 2 without baseline in 2 benchmarks (2 metrics) — vs main, no baseline yet"
        in text
    )
    assert not should_post(CommentMode.CHANGE, r) and should_post(CommentMode.ALWAYS, r)


def test_incomparable_environment() -> None:
    r = result(
        comp(
            "mlp",
            V.INCOMPARABLE,
            base=None,
            change=None,
            ci=None,
            runs=0,
            reason="no run on main with this environment; 1 other environment not compared "
            "(cann_version: '8.0.RC2' in baseline, '8.0.RC3' now)",
            diffs=("cann_version: '8.0.RC2' in baseline, '8.0.RC3' now",),
        ),
    )
    text = render_comment(r, ctx())
    check_golden("incomparable", text)
    assert "🟠 incomparable" in text and "cann\\_version" in text


def sixty() -> GateResult:
    rows = [comp(f"bench-{i:02d}", cur=20.0 + i / 100, change=i / 50) for i in range(55)]
    rows += [
        comp(f"fast-{i}", V.IMPROVEMENT, cur=15.0, change=-25.0 - i, ci=(-30.0, -20.0))
        for i in range(3)
    ]
    rows += [
        comp(f"slow-{i}", V.REGRESSION, cur=26.0, change=30.0 + i, ci=(25.0, 35.0))
        for i in range(2)
    ]
    return result(*rows)


def test_sixty_benchmarks_truncated_least_important_first() -> None:
    r = sixty()
    full = render_comment(r, ctx(failed=True))
    assert len(table_rows(full)) == 62  # header, rule, 60 rows: fits GitHub's limit
    text = render_comment(r, ctx(failed=True), max_chars=6000)
    check_golden("sixty_truncated", text)
    assert len(text) <= 6000
    shown = table_rows(text)[2:]
    assert any("slow-0" in x for x in shown) and any("fast-2" in x for x in shown)
    dropped = 60 - len(shown)
    assert f"*{dropped} rows not shown ({dropped} unchanged)" in text
    # the smallest unchanged changes go first
    assert any("bench-54" in x for x in shown) and not any("bench-00 " in x for x in shown)
    tiny = render_comment(r, ctx(failed=True), max_chars=1500)
    assert len(tiny) <= 1500 and tiny.startswith("<!-- perfgate:report ")


HOSTILE = [
    "<script>alert(1)</script>",
    "@everyone",
    "#1",
    "| pipes |",
    "[x](http://evil)",
    "`rm -rf /`",
    "!42 and ~bug and %v1",
    "line\nbreak\u202eevil www.evil.com",
]


def test_hostile_names_are_inert() -> None:
    comps = [
        comp(name, V.REGRESSION if i == 0 else V.UNCHANGED, metric=HOSTILE[(i + 1) % len(HOSTILE)])
        for i, name in enumerate(HOSTILE)
    ]
    r = GateResult(
        branch="feat/@admin #2 ![img](http://x/y.png)",
        against="main<b>",
        verdict=V.REGRESSION,
        comparisons=tuple(comps),
        attributions=(
            Attribution(
                HOSTILE[0],
                HOSTILE[1],
                3.0,
                ops=(OpDelta("<img src=x onerror=alert(1)>", "npu", 1.0, 4.0, share=1.0),),
            ),
        ),
        findings=(
            Finding(
                rule="@team",
                severity=Severity.CRITICAL,
                location="#7",
                message="see [here](javascript:alert(1)) <!-- -->",
                suggestion="ping @octocat about !5",
            ),
        ),
    )
    text = render_comment(
        r,
        ctx(
            project="p-->x",
            testbed="@t",
            environments=[("k", {"host_label": "@admin <b>"})],
            trends={(HOSTILE[0], HOSTILE[1]): [1.0, 2.0]},
        ),
    )
    check_golden("hostile", text)
    body = text.split("\n", 1)[1]
    assert "<script" not in text and "<img" not in text and "<b>" not in text
    assert "<!--" not in body  # only the marker opens an HTML comment
    assert re.search(r"@\w", text) is None  # no mention survives
    assert re.search(r"(?<![&\w])[#!]\d", text.replace("&#", "")) is None  # no #1 / !42
    unlinked = text.replace("[CI job](https://github.com/o/r/actions/runs/42)", "")
    assert re.search(r"(?<!\\)\]\(", unlinked) is None  # no link syntax survives
    assert re.search(r"https?://", unlinked) is None  # no autolink either
    assert "www." not in text and "\u202e" not in text
    for row in [x for x in text.splitlines() if x.startswith("| ")]:
        assert unescaped_pipes(row) in (3, 8), row
    assert text.splitlines()[0] == marker("p-->x", "perfgate.toml", "@t")
    assert "-->" not in text.splitlines()[0][:-3]


def test_the_table_says_the_level_its_intervals_were_computed_at() -> None:
    # "95% CI" headed intervals at 1 - alpha * called / tested (99%-99.75% at alpha 0.01)
    mixed = [comp("a"), replace(comp("b"), ci_level=0.9975), replace(comp("c"), ci_level=None)]
    assert "| change [99-99.75% CI] |" in render_comment(result(*mixed), ctx())
    assert "| change [99.75% CI] |" in render_comment(result(mixed[1]), ctx())
    assert "| change [CI] |" in render_comment(result(mixed[2]), ctx())


def test_escape_and_marker_units() -> None:
    assert escape("@everyone") == "@" + ZWJ + "everyone"
    assert escape("a|b") == "a\\|b"
    assert escape("<b>&") == "&lt;b&gt;&amp;"
    assert escape("x" * 300).endswith("…") and len(escape("x" * 300)) == 200
    assert marker("p", "s", "t") == "<!-- perfgate:report project=p suite=s testbed=t -->"
    assert (
        marker("a b", "", "x-->") == "<!-- perfgate:report project=a%20b suite=- testbed=x--%3E -->"
    )
    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8]) == "▁▂▃▄▄▅▆▇"[:0] + "▁▂▃▄▅▆▇█"
    assert sparkline([5, 5, 5]) == "▄▄▄" and sparkline([]) == ""


def test_comment_modes() -> None:
    unchanged = result(comp("a"))
    improved = result(comp("a", V.IMPROVEMENT, change=-10.0))
    regressed = result(comp("a", V.REGRESSION, change=10.0), comp("b"))
    assert [should_post(m, unchanged) for m in CommentMode] == [True, False, False]
    assert [should_post(m, improved) for m in CommentMode] == [True, True, False]
    assert [should_post(m, regressed) for m in CommentMode] == [True, True, True]


def test_status_description_is_short() -> None:
    r = sixty()
    text = status_description(r)
    assert text.startswith("2 regressions, 3 improvements in 60 benchmarks")
    assert len(status_description(result(comp("x" * 300)))) <= 140


@pytest.mark.parametrize("limit", [GITHUB_MAX_CHARS, 1_000_000])
def test_default_limits_hold_a_large_gate(limit: int) -> None:
    rows = [comp(f"b{i:04d}-" + "n" * 150, cur=20.0, change=0.1) for i in range(800)]
    text = render_comment(result(*rows), ctx(), max_chars=limit)
    assert len(text) <= limit
    if limit == GITHUB_MAX_CHARS:
        assert "rows not shown" in text
