"""The gate's terminal report is read by a person (issue 40, item 5): it fits 100 columns,
says each comparison's verdict in one line of plain words first, keeps the statistics for
``verbose`` (and the JSON), shows an absurd interval end as unbounded, and never mixes points
and percentages in one phrase."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

import perfgate
from perfgate.models import Comparison, Direction, GateResult, OpCountChange, Verdict, WorkChange
from perfgate.reporters.render import (
    REPORT_WIDTH,
    display_width,
    format_change,
    gate_to_dict,
    plain_words,
    render_text,
)

LONG = "transformer_encoder_with_rotary_embeddings_and_flash_attention_bf16_seq4096_batch64"
CJK = "训练_基准_大模型_混合精度_长序列_多卡_数据并行_流水线并行_张量并行_重计算"


def comparison(verdict: Verdict, **kw: object) -> Comparison:
    fields: dict[str, object] = {
        "benchmark": "mlp",
        "metric": "step_cpu_ms",
        "unit": "ms",
        "direction": Direction.LOWER_IS_BETTER,
        "verdict": verdict,
        "reason": "a reason",
        "current_run_id": "run-now",
        "current_centre": 11.0,
        "baseline_centre": 10.0,
        "baseline_run_ids": ("r1", "r2", "r3"),
        "baseline_commits": ("aaaaaaaa11", "bbbbbbbb22", "cccccccc33"),
        "min_effect_pct": 3.0,
        "alpha": 0.01,
    }
    fields.update(kw)
    return Comparison(**fields)  # type: ignore[arg-type]


REGRESSION = comparison(
    Verdict.REGRESSION,
    change_pct=9.8,
    ci_low_pct=6.1,
    ci_high_pct=13.6,
    p_value=0.0004,
    p_adjusted=0.0012,
    mde_pct=4.2,
    reason="9.8% slower than the level of its 3 baseline runs, p=0.0012 after FDR adjustment "
    "(raw 0.0004, alpha 0.01), beyond the 3% minimum effect",
)
IMPROVEMENT = comparison(
    Verdict.IMPROVEMENT,
    metric="throughput_samples_per_s",
    unit="1/s",
    direction=Direction.HIGHER_IS_BETTER,
    current_centre=1200.0,
    baseline_centre=1000.0,
    change_pct=20.0,
    ci_low_pct=15.0,
    ci_high_pct=25.0,
    p_value=0.0001,
    p_adjusted=0.0002,
    mde_pct=5.0,
)
UNCHANGED = comparison(
    Verdict.UNCHANGED,
    metric="peak_memory_bytes",
    unit="bytes",
    current_centre=263.5 * 2**20,
    baseline_centre=261.0 * 2**20,
    change_pct=1.1,
    ci_low_pct=-0.3,
    ci_high_pct=2.6,
    p_value=0.016,
    p_adjusted=0.032,
    mde_pct=5.3,
    min_effect_pct=5.0,
)
PAIRED = comparison(
    Verdict.INCONCLUSIVE,
    method="paired",
    change_pct=14.0,
    ci_low_pct=-7.0,
    ci_high_pct=35.0,
    p_value=0.09,
    p_adjusted=0.09,
    mde_pct=21.0,
    baseline_run_ids=("base",),
    baseline_commits=("dddddddd44",),
    reason="14.0% slower than the base measured alongside it (8 pairs), but not significant "
    "(p=0.09 after FDR adjustment (raw: t test 0.09, pair-order test 0.2; alpha 0.01)); "
    "with this noise a change of 21.0% is caught with 80% power; about 40 more pairs "
    "(48 in all) would settle a change this size",
)
HUGE = comparison(
    Verdict.INCONCLUSIVE,
    metric="step_time_ms",
    change_pct=-4.9,
    ci_low_pct=-92.2,
    ci_high_pct=2227112843.9,
    p_value=0.93,
    p_adjusted=0.93,
    mde_pct=5.0e9,
    decides=False,
)
OPEN = comparison(
    Verdict.INCONCLUSIVE,
    metric="latency_p99_ms",
    change_pct=23.7,
    ci_low_pct=None,
    ci_high_pct=float("inf"),
    p_value=0.3,
    p_adjusted=0.3,
    mde_pct=None,
)
NO_BASELINE = comparison(
    Verdict.NO_BASELINE,
    metric="latency_p50_ms",
    baseline_centre=None,
    baseline_run_ids=("r1",),
    reason="only 1 comparable baseline run (at least 3 needed): 2 more runs would judge it",
)
INCOMPARABLE = comparison(
    Verdict.INCOMPARABLE,
    baseline_centre=None,
    baseline_run_ids=(),
    reason="no run on main with this environment; 1 other environment not compared "
    "(device model: Ascend910B1 -> Ascend910B3; torch 2.13.0 -> 2.14.0; driver 24.1 -> 25.0)",
)
DETERMINISTIC = comparison(
    Verdict.REGRESSION,
    metric="kernel_launches_per_step",
    unit="count",
    current_centre=46.0,
    baseline_centre=44.0,
    change_pct=4.5,
    min_effect_pct=0.0,
    reason="deterministic metric changed from 44 to 46 (+4.5%, tolerance 0%)",
)
NUMERICS = comparison(
    Verdict.REGRESSION,
    metric="loss.step35",
    unit="loss",
    kind="numerics",
    current_centre=1.32,
    baseline_centre=1.31776,
    change_pct=0.17,
    min_effect_pct=0.1,
    reason="loss.step35 1.32 vs 1.31776 in the newest baseline run (+0.17%, tolerance 0.1%): "
    "the numerics changed — a result that must not move moved, whatever the speed did",
)
POINTS = comparison(
    Verdict.UNCHANGED,
    metric="peak_memory_pct_of_capacity",
    unit="%",
    current_centre=1.093,
    baseline_centre=1.083,
    change_pct=1.1,
    ci_low_pct=-0.5,
    ci_high_pct=2.7,
    p_value=0.016,
    p_adjusted=0.048,
    mde_pct=463.5,
    min_effect_pct=462.0,
    decides=False,
    reason="1.1% higher: at most 2.2% worse (bound at alpha 0.01), within the minimum effect "
    "of 5 points (p=0.048 after FDR adjustment (raw 0.016, alpha 0.01)); a change of 463.5% is "
    "caught with 80% power",
)
BUDGET = comparison(
    Verdict.OVER_BUDGET,
    benchmark=LONG,
    metric="latency_p99_ms",
    kind="budget",
    method="budget",
    current_centre=140.0,
    baseline_centre=None,
    baseline_run_ids=(),
    change_pct=40.0,
    limit=100.0,
    budget="<= 100",
    reason="latency_p99_ms 140.0 ms is over its budget <= 100 ms (by 40.0%)",
)

EVERY = (
    REGRESSION,
    IMPROVEMENT,
    UNCHANGED,
    PAIRED,
    HUGE,
    OPEN,
    NO_BASELINE,
    INCOMPARABLE,
    DETERMINISTIC,
    NUMERICS,
    POINTS,
    BUDGET,
)


def every_kind(name: str) -> tuple[Comparison, ...]:
    return tuple(c if c.kind == "budget" else replace(c, benchmark=name) for c in EVERY)


def result(*comparisons: Comparison, **kw: object) -> GateResult:
    return GateResult(
        branch=str(kw.pop("branch", "feat")),
        against="main",
        verdict=Verdict.REGRESSION,
        comparisons=comparisons,
        **kw,  # type: ignore[arg-type]
    )


def widths(text: str) -> list[int]:
    return [display_width(line) for line in text.splitlines()]


WORK = WorkChange(
    benchmark="mlp",
    ops=(OpCountChange("aten::clone", "cpu", 0.0, 1.0, 0.4),),
    baseline_run_id="r3",
)


@pytest.mark.parametrize("verbose", [False, True])
@pytest.mark.parametrize("name", ["mlp", LONG, CJK, LONG * 3 + CJK])
def test_every_line_fits_100_columns(name: str, verbose: bool) -> None:
    text = render_text(
        result(
            *every_kind(name),
            work_changes=(replace(WORK, benchmark=name),),
            notes=(f"{name}: main is 10.0% slower on step_time_ms since your branch point " * 2,),
            branch=f"feature/{LONG}",
        ),
        verbose=verbose,
    )
    assert max(widths(text)) <= REPORT_WIDTH, text
    assert "2227112843" not in text and "inf%" not in text and "+inf" not in text


def test_a_long_name_is_cut_with_an_ellipsis() -> None:
    text = render_text(result(*every_kind(LONG * 2)))
    head = next(line for line in text.splitlines() if line.startswith(LONG[:30]))
    assert "…" in head and LONG * 2 not in text


def test_cjk_names_take_two_columns_each() -> None:
    text = render_text(result(*every_kind(CJK * 2)))
    head = next(line for line in text.splitlines() if line.startswith(CJK[:5]))
    assert "…" in head.split(" — ")[0]
    assert display_width(head.split(" — ")[0]) <= 40


@pytest.mark.parametrize(
    ("c", "words"),
    [
        (REGRESSION, "9.8% slower: REGRESSION (interval +6.1% to +13.6%)"),
        (IMPROVEMENT, "20% higher: improvement (interval +15.0% to +25.0%)"),
        (UNCHANGED, "no change beyond ±2.6%"),
        (
            PAIRED,
            "14% slower, not sure yet: this runner's noise allows ±21%; 40 more pairs would tell",
        ),
        (
            HUGE,
            "4.9% faster, not sure yet: this runner's noise hides a 10× change; "
            "more repeats would tell",
        ),
        (OPEN, "24% slower, not sure yet: the noise here is not known; more repeats would tell"),
        (NO_BASELINE, f"not judged: {NO_BASELINE.reason}"),
        (INCOMPARABLE, f"not compared: {INCOMPARABLE.reason}"),
        (DETERMINISTIC, "4.5% higher: REGRESSION (46 against 44, tolerance 0%)"),
        (NUMERICS, "the numerics moved +0.17%: REGRESSION (1.32 against 1.31776, tolerance 0.1%)"),
        (POINTS, "no change beyond ±2.7%"),
        (BUDGET, BUDGET.reason),
    ],
)
def test_each_verdict_in_plain_words(c: Comparison, words: str) -> None:
    assert plain_words(c) == words
    said = plain_words(c)
    assert "p=" not in said and "FDR" not in said and "alpha" not in said


def test_plain_words_come_first_and_statistics_only_when_verbose() -> None:
    ab = replace(PAIRED, benchmark="ab")
    gate = result(REGRESSION, UNCHANGED, ab, work_changes=(WORK,))
    text = render_text(gate)
    lines = text.splitlines()
    assert lines[0] == (
        "perfgate: 1 regression, 1 unchanged, 1 inconclusive in 2 benchmarks — feat vs main"
    )
    # each benchmark's line, then its comparisons in words (the worst first), then the work
    mlp = lines.index("mlp — against 3 runs of main, commits aaaaaaaa..cccccccc")
    assert lines[mlp + 1] == f"  step_cpu_ms: {plain_words(REGRESSION)}"
    assert lines[mlp + 2] == "      10 ms -> 11 ms, change +9.8% [+6.1, +13.6]"
    assert lines[mlp + 3] == f"  peak_memory_bytes: {plain_words(UNCHANGED)}"
    assert lines[mlp + 5] == "  work changed: +1 aten::clone (new) per step"
    ab_at = lines.index("ab — A/B pairs against main (dddddddd)")
    assert lines[ab_at + 1 : ab_at + 3] == ["  step_cpu_ms (A/B):", f"      {plain_words(ab)}"]
    for word in ("p=", "FDR", "alpha", "method", "reason:"):
        assert word not in text
    verbose = render_text(gate, verbose=True)
    flat = " ".join(verbose.split())
    assert "p=0.0012 after FDR adjustment (raw 0.0004)" in flat
    assert "alpha 0.01" in flat and "method paired" in flat
    assert "detectable 21.0% at 80% power" in flat
    assert "window: 3 runs, commits aaaaaaaa..cccccccc" in verbose
    assert "window: 1 run, commit dddddddd\n" in verbose
    assert f"reason: {' '.join(PAIRED.reason.split())}" in flat
    assert max(widths(verbose)) <= REPORT_WIDTH


def test_the_words_line_stays_one_line_when_the_metric_name_is_long() -> None:
    c = replace(PAIRED, metric="throughput_samples_per_s", decides=False)
    lines = render_text(result(c)).splitlines()
    at = lines.index("  throughput_samples_per_s (A/B) (shown, not deciding):")
    assert lines[at + 1] == f"      {plain_words(c)}"


def test_absurd_interval_ends_are_unbounded() -> None:
    assert format_change(HUGE) == "-4.9% [-92.2, +∞]"
    assert format_change(OPEN) == "+23.7% [-∞, +∞]"
    assert format_change(REGRESSION) == "+9.8% [+6.1, +13.6]"
    no_interval = replace(REGRESSION, ci_low_pct=None, ci_high_pct=None)
    assert format_change(no_interval) == "+9.8%"
    wide = replace(REGRESSION, change_pct=1500.0, ci_high_pct=5e6)
    assert plain_words(wide) == "more than 10× slower: REGRESSION (interval +6.1% to +∞)"


def test_json_keeps_its_keys_and_the_statistics() -> None:
    gate = result(REGRESSION, PAIRED, BUDGET)
    data = gate_to_dict(gate, failed=True)
    assert set(data) == {
        *("format_version", "perfgate_version", "verdict", "failed", "branch", "against"),
        *("summary", "budgets", "comparisons", "findings", "attributions", "work_changed"),
        "notes",
    }
    row = data["comparisons"][0]
    assert row["p_adjusted"] == 0.0012 and row["reason"] == REGRESSION.reason


def test_points_and_percentages_are_never_in_one_phrase() -> None:
    """A utilisation-like metric near 0 (minimum effect in points): the reason states the
    minimum effect in points alone, and the report keeps it that way."""
    base = [[1.0, 1.1, 0.9], [1.05, 0.95, 1.0], [1.0, 1.02, 0.98], [0.97, 1.03, 1.0]]
    got = perfgate.judge({"job": base}, {"job": [1.01, 0.99, 1.02]}, metric="rank_spread_pct")
    reason = got["job"].reason
    assert "minimum effect of 5 points" in reason, reason
    assert "% minimum effect (" not in reason
    for phrase in re.split(r"[;,()]", reason):
        assert not ("%" in phrase and "point" in phrase), phrase
    text = render_text(result(POINTS), verbose=True)
    for line in text.splitlines():
        for phrase in re.split(r"[;,()]", line):
            assert not ("%" in phrase and "point" in phrase), phrase
