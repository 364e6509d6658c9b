"""What a verdict leads to, decided once in :mod:`perfgate.stats.decide`: whether it fails the
gate, raises an alert, posts a new comment, earns a second look. One table of verdict x policy,
and the same answers from the places that act on them (JUnit, annotations, the comment, the
alerts, ``run --confirm``)."""

from __future__ import annotations

from collections.abc import Collection

import pytest

from perfgate.config import DEFAULT_FAIL_ON
from perfgate.models import Comparison, Direction, GateResult, Verdict
from perfgate.reporters.annotations import github_annotations
from perfgate.reporters.junit import render_junit
from perfgate.reporters.markdown import should_post
from perfgate.stats import decide
from perfgate.stats.decide import CommentMode
from perfgate.stats.sequential import needs_confirming

V = Verdict
EVERY = tuple(Verdict)


def row(
    verdict: Verdict,
    benchmark: str = "mlp",
    *,
    method: str = "history",
    decides: bool = True,
    kind: str = "",
) -> Comparison:
    return Comparison(
        benchmark=benchmark,
        metric="step_time_ms",
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        verdict=verdict,
        reason="because",
        current_run_id=f"{benchmark}-run",
        current_centre=10.0,
        baseline_centre=9.0,
        change_pct=11.1,
        method=method,
        decides=decides,
        kind=kind,
    )


# verdict: (fails under the default fail_on, raises an alert on the base branch,
#           new comment under change, under regression, second look in check, in run --confirm)
TABLE: dict[Verdict, tuple[bool, bool, bool, bool, bool, bool]] = {
    V.REGRESSION: (True, True, True, True, True, False),
    V.OVER_BUDGET: (True, False, True, True, False, False),
    V.INCONCLUSIVE: (False, False, True, False, True, True),
    V.IMPROVEMENT: (False, False, True, False, False, False),
    V.UNCHANGED: (False, False, False, False, False, False),
    V.NO_BASELINE: (False, False, False, False, False, False),
    V.INCOMPARABLE: (False, False, False, False, False, False),
}


def test_the_table_covers_every_verdict() -> None:
    assert set(TABLE) == set(Verdict)


@pytest.mark.parametrize("verdict", EVERY)
def test_what_one_deciding_verdict_leads_to(verdict: Verdict) -> None:
    fails, alerts, on_change, on_regression, in_check, in_confirm = TABLE[verdict]
    comparisons = (row(verdict),)
    assert decide.fails_gate(verdict, DEFAULT_FAIL_ON) is fails
    assert decide.gate_fails(comparisons, DEFAULT_FAIL_ON) is fails
    assert decide.raises_alert(verdict) is alerts
    assert decide.alerts_raised(comparisons, on_base_branch=True) == (comparisons if alerts else ())
    assert decide.alerts_raised(comparisons, on_base_branch=False) == ()
    assert decide.posts_comment(CommentMode.ALWAYS, comparisons) is True
    assert decide.posts_comment(CommentMode.CHANGE, comparisons) is on_change
    assert decide.posts_comment(CommentMode.REGRESSION, comparisons) is on_regression
    assert decide.second_look(comparisons, regression_stands=False) == (
        {"mlp"} if in_check else set()
    )
    assert decide.second_look(comparisons, regression_stands=True) == (
        {"mlp"} if in_confirm else set()
    )


@pytest.mark.parametrize("verdict", EVERY)
@pytest.mark.parametrize(
    "fail_on",
    [DEFAULT_FAIL_ON, {V.REGRESSION}, {V.REGRESSION, V.INCONCLUSIVE}, {V.NO_BASELINE}],
    ids=["default", "regression", "regression+inconclusive", "no_baseline"],
)
def test_the_policy_alone_says_what_fails(verdict: Verdict, fail_on: Collection[Verdict]) -> None:
    assert decide.fails_gate(verdict, fail_on) is (verdict in fail_on)


def test_only_deciding_comparisons_lead_anywhere() -> None:
    """A regression only shown beside the deciding metrics, or a history one of a benchmark
    measured in A/B pairs (its pairs decide), fails nothing, alerts nothing, posts nothing
    and earns no second look."""
    quiet = (
        row(V.REGRESSION, decides=False),
        row(V.REGRESSION, "cnn"),
        row(V.UNCHANGED, "cnn", method="paired"),
    )
    assert not decide.gate_fails(quiet, DEFAULT_FAIL_ON)
    assert decide.alerts_raised(quiet, on_base_branch=True) == ()
    assert not decide.posts_comment(CommentMode.REGRESSION, quiet)
    assert decide.second_look(quiet, regression_stands=False) == set()


def test_a_second_look_is_per_benchmark_and_per_method() -> None:
    """``check`` sends a benchmark with a regression or an inconclusive comparison of the
    method it measures; ``run --confirm`` only one with no regression that stands."""
    comparisons = (
        row(V.INCONCLUSIVE, "a"),
        row(V.REGRESSION, "a"),
        row(V.INCONCLUSIVE, "b"),
        row(V.UNCHANGED, "c"),
        row(V.INCONCLUSIVE, "d", method="paired"),
    )
    assert decide.second_look(comparisons, method="history", regression_stands=False) == {
        "a",
        "b",
    }
    assert decide.second_look(comparisons, method="history", regression_stands=True) == {"b"}
    assert decide.second_look(comparisons, method="paired", regression_stands=True) == {"d"}
    assert decide.second_look(comparisons, regression_stands=True) == {"b", "d"}


@pytest.mark.parametrize("verdict", EVERY)
@pytest.mark.parametrize("regressed_too", [False, True])
def test_run_confirm_asks_the_same_question(verdict: Verdict, regressed_too: bool) -> None:
    """:func:`perfgate.stats.sequential.needs_confirming` (one benchmark's look 0) agrees with
    :func:`decide.second_look` with the regression standing."""
    look0 = (row(verdict), *([row(V.REGRESSION)] if regressed_too else []))
    confirms = needs_confirming(look0) == ""
    assert confirms is ("mlp" in decide.second_look(look0, regression_stands=True))


@pytest.mark.parametrize("verdict", EVERY)
@pytest.mark.parametrize("fail_on", [DEFAULT_FAIL_ON, {V.INCONCLUSIVE, V.NO_BASELINE}])
def test_junit_and_annotations_fail_what_decide_fails(
    verdict: Verdict, fail_on: Collection[Verdict]
) -> None:
    result = GateResult("feat", "main", verdict, (row(verdict),))
    fails = decide.fails_gate(verdict, fail_on)
    xml = render_junit(result, fail_on).decode()
    assert ("<failure " in xml) is fails
    for line in github_annotations(result, fail_on):
        assert line.startswith("::error " if fails else "::warning ")


@pytest.mark.parametrize("verdict", EVERY)
@pytest.mark.parametrize("mode", list(CommentMode))
def test_the_comment_asks_decide(verdict: Verdict, mode: CommentMode) -> None:
    result = GateResult("feat", "main", verdict, (row(verdict),))
    assert should_post(mode, result) is decide.posts_comment(mode, result.comparisons)


def test_a_budget_breach_counts_for_both_filtering_comment_modes_and_fails() -> None:
    budget = (row(V.OVER_BUDGET, kind="budget"),)
    assert decide.posts_comment(CommentMode.REGRESSION, budget)
    assert decide.posts_comment(CommentMode.CHANGE, budget)
    assert decide.gate_fails(budget, DEFAULT_FAIL_ON)
    assert decide.alerts_raised(budget, on_base_branch=True) == ()
