"""Budgets: the suite's absolute limits, judged on every run, history or not.

Runs are synthetic (helpers' ``record`` plus a latency P99 per repeat), saved to a real
SQLite store and gated through the real CLI; the PR comment is the ``report.md`` that
``gate --report-dir`` writes.
"""

from __future__ import annotations

import json
import textwrap
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import Done, fill, perfgate, record

from perfgate.app import compare_records
from perfgate.app.gate import gate_failed
from perfgate.config import Budget, config_from_mapping, load_config
from perfgate.errors import ConfigError
from perfgate.models import Comparison, Direction, Measurement, RunRecord, Verdict
from perfgate.reporters.markdown import CommentMode, should_post
from perfgate.stats import decide, summarize
from perfgate.stats.budget import budget_verdict, judge_budgets
from perfgate.store import open_store

P99_BREACH = "latency_p99_ms 140.0 ms is over its budget <= 100 ms (by 40.0%)"


def with_metric(
    run: RunRecord, metric: str, level: float, unit: str = "ms", noise: float = 0.0001
) -> RunRecord:
    """``run`` with one more metric: one value per repeat around ``level`` (log-normal noise
    ``noise``, seeded by the run and the metric)."""
    rng = np.random.default_rng(zlib.crc32(f"{run.id} {metric}".encode()))
    reps = [(float(level * rng.lognormal(0, noise)),) for _ in range(3)]
    direction = Direction.HIGHER_IS_BETTER if unit in ("%", "1/s") else Direction.LOWER_IS_BETTER
    m = Measurement(metric, unit, direction, tuple(reps), summarize(reps))
    return replace(run, measurements=(*run.measurements, m))


def service(i: int, p99: float, *, branch: str = "main", benchmark: str = "svc") -> RunRecord:
    return with_metric(record(i, 20.0, branch=branch, benchmark=benchmark), "latency_p99_ms", p99)


def suite(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "perfgate.toml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def gate(url: str, suite_file: Path, *args: str) -> Done:
    return perfgate(None, "gate", "--db", url, "--suite", str(suite_file), *args)


def gate_json(url: str, suite_file: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = gate(url, suite_file, "--json", *args)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    return result.returncode, json.loads(result.stdout)


def budget_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    rows = data["comparisons"]
    assert isinstance(rows, list)
    return [c for c in rows if c["kind"] == "budget"]


@pytest.fixture
def steady_history(tmp_path: Path) -> str:
    """``svc`` on main: eight runs with a P99 of 140 ms, and a PR run with the same."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, [service(i, 140.0) for i in range(8)] + [service(20, 140.0, branch="feat")])
    return url


def test_a_breach_on_an_unchanged_run_fails_the_gate_in_its_own_words(
    tmp_path: Path, steady_history: str
) -> None:
    budgets = suite(tmp_path, '[budgets]\nlatency_p99_ms = "<= 100"\n')
    code, data = gate_json(steady_history, budgets, "--branch", "feat", "--against", "main")
    assert code == 1
    assert data["verdict"] == "over_budget" and data["failed"] is True
    (row,) = budget_rows(data)
    assert row["verdict"] == "over_budget" and row["method"] == "budget"
    assert row["reason"] == P99_BREACH
    assert (row["current"], row["limit"], row["budget"]) == (
        pytest.approx(140, 0.01),
        100,
        "<= 100",
    )
    assert data["comparisons"][0] == row  # budgets first
    history = {c["metric"]: c for c in data["comparisons"] if c["kind"] == ""}
    assert history["latency_p99_ms"]["verdict"] == "unchanged"  # history sees nothing
    assert data["summary"]["regression"] == 0  # not a regression
    assert data["budgets"] == {"judged": 1, "over_budget": 1, "within_budget": 0}

    text = gate(steady_history, budgets, "--branch", "feat", "--against", "main")
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert lines[0].startswith("perfgate: 1 over budget; 2 unchanged in 1 benchmark")
    assert lines[2] == "budgets:"
    assert lines[3].split()[:2] == ["OVER", "BUDGET"] and lines[3].endswith(P99_BREACH)
    assert lines.index("budgets:") < next(i for i, x in enumerate(lines) if x.startswith("svc —"))
    assert "REGRESSION" not in text.stdout

    out = tmp_path / "report"
    comment = gate(
        steady_history, budgets, "--branch", "feat", "--against", "main", "--report-dir", str(out)
    )
    assert comment.returncode == 1
    md = (out / "report.md").read_text(encoding="utf-8")
    assert md.splitlines()[1].startswith("### ❌ perfgate: 1 over budget in 1 benchmark")
    assert "regression" not in md.splitlines()[1]
    line = "- ❌ over budget: **svc** latency\\_p99\\_ms 140.0 ms is over its budget &lt;= 100 ms"
    assert line in md
    assert md.index("#### Budgets") < md.index("| benchmark | metric |")
    assert "(fails on: over\\_budget, regression)" in md

    # a history gate's breach is no A/B result in the JUnit file (it read "(A/B) 140 ms")
    junit = tmp_path / "junit.xml"
    gate(steady_history, budgets, "--branch", "feat", "--against", "main", "--junit", str(junit))
    failure = junit.read_text(encoding="utf-8")
    assert "over its budget" in failure and "(A/B)" not in failure


def test_the_same_run_within_its_budget_passes(tmp_path: Path, steady_history: str) -> None:
    budgets = suite(tmp_path, '[budgets]\nlatency_p99_ms = "<= 150 ms"\n')
    code, data = gate_json(steady_history, budgets, "--branch", "feat", "--against", "main")
    assert code == 0
    (row,) = budget_rows(data)
    assert row["verdict"] == "unchanged"
    assert row["reason"] == "latency_p99_ms 140.0 ms is within its budget <= 150 ms (6.7% to spare)"
    assert data["verdict"] == "unchanged"
    text = gate(steady_history, budgets, "--branch", "feat", "--against", "main").stdout
    assert "1 within budget; 2 unchanged" in text and "OVER BUDGET" not in text


def test_a_breach_on_the_first_run_fails_with_no_history_at_all(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, [service(0, 140.0)])
    budgets = suite(tmp_path, '[budgets]\nlatency_p99_ms = "<= 100"\n')
    code, data = gate_json(url, budgets, "--branch", "main", "--against", "main")
    assert code == 1
    assert data["verdict"] == "over_budget"
    (row,) = budget_rows(data)
    assert row["reason"] == P99_BREACH
    others = {c["verdict"] for c in data["comparisons"] if c["kind"] != "budget"}
    assert others == {"no_baseline"}
    # within budget, a first run still has no baseline (a budget kept is not "unchanged")
    kept = suite(tmp_path, '[budgets]\nlatency_p99_ms = "<= 200"\n')
    code, data = gate_json(url, kept, "--branch", "main", "--against", "main")
    assert (code, data["verdict"]) == (0, "no_baseline")


def test_a_benchmark_budget_overrides_the_one_for_every_benchmark(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, [service(0, 140.0), service(1, 140.0, benchmark="batch")])
    budgets = suite(
        tmp_path,
        """
        [budgets]
        latency_p99_ms = "<= 100"

        [budgets.batch]
        latency_p99_ms = "<= 200"
        """,
    )
    code, data = gate_json(url, budgets, "--branch", "main", "--against", "main")
    assert code == 1
    verdicts = {(c["benchmark"], c["budget"]): c["verdict"] for c in budget_rows(data)}
    assert verdicts == {("batch", "<= 200"): "unchanged", ("svc", "<= 100"): "over_budget"}


def test_fail_on_without_over_budget_shows_the_breach_and_passes(
    tmp_path: Path, steady_history: str
) -> None:
    budgets = suite(tmp_path, 'fail_on = ["regression"]\n[budgets]\nlatency_p99_ms = "<= 100"\n')
    code, data = gate_json(steady_history, budgets, "--branch", "feat", "--against", "main")
    assert code == 0 and data["failed"] is False
    assert data["verdict"] == "over_budget"
    assert [r["reason"] for r in budget_rows(data)] == [P99_BREACH]
    text = gate(steady_history, budgets, "--branch", "feat", "--against", "main")
    assert text.returncode == 0 and P99_BREACH in text.stdout
    # --fail-on on the command line asks the same
    loud = suite(tmp_path, '[budgets]\nlatency_p99_ms = "<= 100"\n')
    code, _ = gate_json(
        steady_history, loud, "--branch", "feat", "--against", "main", "--fail-on", "regression"
    )
    assert code == 0


@pytest.mark.parametrize(
    ("body", "key", "expected"),
    [
        ('latency_p99_ms = "=< 100"', "budgets.latency_p99_ms", "expected a budget like"),
        ("latency_p99_ms = 100", "budgets.latency_p99_ms", "expected a budget like"),
        ('latency_p99_ms = "<= 100 s"', "budgets.latency_p99_ms", "the metric's unit is 'ms'"),
        (
            'throughput_requests_per_s = ">= 95% of reference"',
            "budgets.throughput_requests_per_s",
            "needs the reference file",
        ),
        ('[budgets.svc]\n"latency_p99_ms" = ">= nan"', "budgets.svc.latency_p99_ms", "expected"),
    ],
)
def test_bad_budget_text_is_one_line_naming_the_file_and_key(
    tmp_path: Path, steady_history: str, body: str, key: str, expected: str
) -> None:
    budgets = suite(tmp_path, "[budgets]\n" + body + "\n")
    result = gate(steady_history, budgets, "--branch", "feat", "--against", "main")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"perfgate: error: {budgets}: {key}: ")
    assert expected in lines[0]


def test_a_budget_on_a_metric_the_run_lacks_is_a_note_not_a_failure(
    tmp_path: Path, steady_history: str
) -> None:
    budgets = suite(tmp_path, '[budgets]\naicore_util_pct = ">= 70"\nlatency_p99 = "<= 100"\n')
    code, data = gate_json(steady_history, budgets, "--branch", "feat", "--against", "main")
    assert code == 0
    assert budget_rows(data) == []
    assert data["notes"] == [
        "svc: budget aicore_util_pct >= 70: the run has no aicore_util_pct (it has no profile)",
        "svc: budget latency_p99 <= 100: the run has no latency_p99 (not a metric perfgate "
        "records; did you mean latency_p99_ms?)",
    ]
    text = gate(steady_history, budgets, "--branch", "feat", "--against", "main").stdout
    assert f"note: {data['notes'][0]}" in text
    out = tmp_path / "report"
    gate(steady_history, budgets, "--branch", "feat", "--against", "main", "--report-dir", str(out))
    assert "budget aicore\\_util\\_pct &gt;= 70: the run has no aicore\\_util\\_pct" in (
        out / "report.md"
    ).read_text(encoding="utf-8")


def test_a_profile_note_says_why_the_metric_is_missing(tmp_path: Path) -> None:
    from helpers import make_profile

    run = replace(
        service(0, 50.0),
        profile=replace(make_profile(), notes=("aicore_util_pct: no aic_metrics collected",)),
    )
    judged = judge_budgets(
        run, {"aicore_util_pct": Budget("aicore_util_pct", ">=", 70.0, text=">= 70")}
    )
    assert judged.notes == (
        "budget aicore_util_pct >= 70: the run has no aicore_util_pct (no aic_metrics collected)",
    )


def test_each_rank_is_judged_by_the_budget_on_its_base_name(tmp_path: Path) -> None:
    run = record(0, 20.0)
    run = with_metric(run, "step_time_ms.rank0", 20.0)
    run = with_metric(run, "step_time_ms.rank1", 30.0)
    budgets = config_from_mapping({"budgets": {"step_time_ms": "<= 25"}}).budgets_for("mlp")
    judged = judge_budgets(run, budgets)
    verdicts = {c.metric: c.verdict for c in judged.comparisons}
    assert verdicts == {
        "step_time_ms": Verdict.UNCHANGED,
        "step_time_ms.rank0": Verdict.UNCHANGED,
        "step_time_ms.rank1": Verdict.OVER_BUDGET,
    }
    # a budget on one rank's own name is that rank's, over its base's
    own = config_from_mapping(
        {"budgets": {"step_time_ms": "<= 25", "step_time_ms.rank1": "<= 35"}}
    ).budgets_for("mlp")
    assert {c.metric: c.verdict for c in judge_budgets(run, own).comparisons}[
        "step_time_ms.rank1"
    ] is Verdict.UNCHANGED


def test_a_percentage_budget_says_its_margin_in_points() -> None:
    run = with_metric(record(0, 20.0), "aicore_util_pct", 55.0, unit="%", noise=0.0)
    budgets = config_from_mapping({"budgets": {"aicore_util_pct": ">= 70%"}}).budgets_for("x")
    (c,) = judge_budgets(run, budgets).comparisons
    assert c.verdict is Verdict.OVER_BUDGET
    assert c.reason == "aicore_util_pct 55.0% is under its budget >= 70% (by 15.0 points)"
    assert c.direction is Direction.HIGHER_IS_BETTER


def test_the_operators_and_the_limit_itself() -> None:
    def verdict(op: str, value: float) -> Verdict:
        return budget_verdict(Budget("m", op, 100.0), value, 100.0)

    assert [verdict(op, 100.0) for op in ("<=", "<", ">=", ">")] == [
        Verdict.UNCHANGED,
        Verdict.OVER_BUDGET,
        Verdict.UNCHANGED,
        Verdict.OVER_BUDGET,
    ]
    assert (
        verdict("<=", 100.5) is Verdict.OVER_BUDGET and verdict(">=", 99.5) is Verdict.OVER_BUDGET
    )
    run = with_metric(record(0, 20.0), "latency_p99_ms", 100.0, noise=0.0)
    (c,) = judge_budgets(
        run, {"latency_p99_ms": Budget("latency_p99_ms", "<", 100.0, text="< 100")}
    ).comparisons
    assert (
        c.reason
        == "latency_p99_ms 100.0 ms is at the limit of its budget < 100 ms, which excludes it"
    )


def test_a_budget_relative_to_the_reference_takes_its_limit_from_it() -> None:
    run = with_metric(
        record(0, 20.0, benchmark="resnet"),
        "throughput_requests_per_s",
        90.0,
        unit="1/s",
        noise=0.0,
    )
    budgets = config_from_mapping(
        {
            "budgets": {
                "reference": "official.json",
                "resnet": {"throughput_requests_per_s": ">= 95% of reference"},
            }
        }
    ).budgets_for("resnet")
    (c,) = judge_budgets(run, budgets, {"*": {"throughput_requests_per_s": 100.0}}).comparisons
    assert c.verdict is Verdict.OVER_BUDGET and c.limit == pytest.approx(95.0)
    assert c.reason == (
        "throughput_requests_per_s 90.0/s is under its budget >= 95/s (95% of the reference "
        "100/s) (by 5.3%)"
    )
    # the benchmark's own reference value over the one for every benchmark
    (c,) = judge_budgets(
        run,
        budgets,
        {"*": {"throughput_requests_per_s": 100.0}, "resnet": {"throughput_requests_per_s": 90.0}},
    ).comparisons
    assert c.verdict is Verdict.UNCHANGED
    missing = judge_budgets(run, budgets, {"other": {"throughput_requests_per_s": 1.0}})
    assert missing.comparisons == ()
    assert "the reference has no throughput_requests_per_s for resnet" in missing.notes[0]


def test_the_reference_file_is_named_relative_to_the_suite_file(tmp_path: Path) -> None:
    (tmp_path / "ci").mkdir()
    path = suite(tmp_path / "ci", '[budgets]\nreference = "official.json"\n')
    assert load_config(path, env={}).budget_reference == tmp_path / "ci" / "official.json"


def test_the_reference_file_is_read_at_gate_time(tmp_path: Path) -> None:
    pytest.importorskip("perfgate.app.reference")
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url, [service(0, 140.0)])
    budgets = suite(
        tmp_path,
        '[budgets]\nreference = "official.json"\nlatency_p99_ms = "<= 105% of reference"\n',
    )
    missing = gate(url, budgets, "--branch", "main", "--against", "main")
    assert missing.returncode == 2
    assert len(missing.stderr.strip().splitlines()) == 1
    assert str(tmp_path / "official.json") in missing.stderr
    (tmp_path / "official.json").write_text('{"svc": {"latency_p99_ms": 130.0}}')
    code, data = gate_json(url, budgets, "--branch", "main", "--against", "main")
    assert code == 1
    (row,) = budget_rows(data)
    assert row["limit"] == pytest.approx(136.5) and row["budget"] == "<= 105% of reference"
    assert row["reason"] == (
        "latency_p99_ms 140.0 ms is over its budget <= 136.5 ms (105% of the reference "
        "130 ms) (by 2.6%)"
    )


def test_budgets_decide_beside_ab_pairs(tmp_path: Path) -> None:
    """A benchmark measured in A/B pairs is decided by its pairs, and by its budgets."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    base = service(1, 140.0)
    head = replace(service(2, 140.0, branch="feat"), paired_with=base.id)
    fill(url, [base])
    config = config_from_mapping({"budgets": {"latency_p99_ms": "<= 100"}})
    store = open_store(url)
    try:
        result = compare_records(config, store, [head], branch="feat", against="main")
    finally:
        store.close()
    methods = {(c.metric, c.method): c.verdict for c in decide.deciding(result.comparisons)}
    assert methods[("latency_p99_ms", "budget")] is Verdict.OVER_BUDGET
    assert ("latency_p99_ms", "paired") in methods
    assert not any(c.method == "history" for c in decide.deciding(result.comparisons))
    assert result.verdict is Verdict.OVER_BUDGET and gate_failed(config, result)


def _c(verdict: Verdict, kind: str = "", method: str = "history") -> Comparison:
    return Comparison(
        "b", "m", "ms", Direction.LOWER_IS_BETTER, verdict, "", "r", 1.0, method=method, kind=kind
    )


def test_over_budget_ranks_first_and_a_kept_budget_counts_for_nothing() -> None:
    over = _c(Verdict.OVER_BUDGET, "budget", "budget")
    kept = _c(Verdict.UNCHANGED, "budget", "budget")
    assert decide.overall_verdict([_c(Verdict.REGRESSION), over]) is Verdict.OVER_BUDGET
    assert decide.overall_verdict([_c(Verdict.NO_BASELINE), kept]) is Verdict.NO_BASELINE
    assert decide.overall_verdict([_c(Verdict.IMPROVEMENT), kept]) is Verdict.IMPROVEMENT
    assert decide.gate_fails([over], {Verdict.REGRESSION, Verdict.OVER_BUDGET})
    assert not decide.gate_fails([over], {Verdict.REGRESSION})
    assert decide.verdict_counts([over, kept])[Verdict.OVER_BUDGET] == 1


def test_a_breach_asks_for_a_comment_in_every_mode() -> None:
    from perfgate.models import GateResult

    result = GateResult(
        "feat", "main", Verdict.OVER_BUDGET, (_c(Verdict.OVER_BUDGET, "budget", "budget"),)
    )
    assert all(should_post(mode, result) for mode in CommentMode)


def test_the_default_fail_on_holds_over_budget_and_an_explicit_one_is_kept(tmp_path: Path) -> None:
    assert load_config(env={}, cwd=tmp_path).fail_on == {Verdict.REGRESSION, Verdict.OVER_BUDGET}
    path = suite(tmp_path, 'fail_on = ["regression"]\n')
    assert load_config(path, env={}).fail_on == {Verdict.REGRESSION}
    with pytest.raises(ConfigError, match="^s.toml: budgets: expected a table$"):
        config_from_mapping({"budgets": "<= 100"}, "s.toml")


def test_a_gate_against_baseline_files_judges_the_budgets_too(
    tmp_path: Path, steady_history: str
) -> None:
    out = tmp_path / "baselines"
    exported = perfgate(
        None, "baseline", "export", "--db", steady_history, "--branch", "main", "--out", str(out)
    )
    assert exported.returncode == 0, exported.stdout + exported.stderr
    budgets = suite(tmp_path, '[budgets]\nlatency_p99_ms = "<= 100"\n')
    code, data = gate_json(steady_history, budgets, "--branch", "feat", "--baseline-file", str(out))
    assert code == 1
    assert [r["reason"] for r in budget_rows(data)] == [P99_BREACH]
    history = {c["metric"]: c["verdict"] for c in data["comparisons"] if c["kind"] == ""}
    assert history["latency_p99_ms"] == "unchanged"


def test_a_breach_is_nothing_to_re_measure() -> None:
    """``check`` and ``run --confirm`` re-measure only history or paired verdicts: a budget
    breach is the run's own value, and more repeats of it are no news."""
    from perfgate.stats.sequential import needs_confirming

    over = _c(Verdict.OVER_BUDGET, "budget", "budget")
    assert needs_confirming([over]) == "nothing to confirm"
    assert needs_confirming([over], method="paired") == "nothing to confirm"


def test_an_unquoted_per_rank_budget_and_a_misspelt_benchmark_are_not_silent(
    tmp_path: Path,
) -> None:
    """``step_time_ms.rank1 = ...`` unquoted is a TOML table ``step_time_ms``: an error that
    says to quote it. A ``[budgets.NAME]`` for no benchmark: a note in the gate."""
    from perfgate.config import load_config
    from perfgate.errors import ConfigError

    suite = tmp_path / "perfgate.toml"
    suite.write_text('[budgets]\nstep_time_ms.rank1 = "<= 100"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r'quoted \("step_time_ms.rank1"'):
        load_config(env={}, cwd=tmp_path)
    suite.write_text('[budgets.mlp_tpyo]\nstep_time_ms = "<= 1"\n', encoding="utf-8")
    config = load_config(env={}, cwd=tmp_path)
    from helpers import record

    from perfgate.app.gate import budget_comparisons

    comparisons, notes = budget_comparisons(config, [record(0, 20.0)])
    assert comparisons == ()
    assert notes == [
        ("mlp_tpyo", "[budgets.mlp_tpyo]: no benchmark of that name in the suite or this gate")
    ]


def test_a_misspelt_metrics_table_is_a_note_in_the_gate(tmp_path: Path) -> None:
    """``[metrics.step_tme_ms]`` applied to nothing, silently: the gate ran as if it were
    absent. A table for a metric of the catalogue that these runs lack (an NPU metric on a
    CPU gate) is not a misspelling and says nothing."""
    from helpers import record

    from perfgate.app.gate import with_budgets
    from perfgate.config import load_config
    from perfgate.models import GateResult

    suite = tmp_path / "perfgate.toml"
    suite.write_text(
        "[metrics.step_tme_ms]\nmin_effect_pct = 50\n"
        "[metrics.hbm_bandwidth_gb_s]\nmin_effect_pct = 10\n"
        "[metrics.step_time_ms]\nmin_effect_pct = 5\n",
        encoding="utf-8",
    )
    config = load_config(env={}, cwd=tmp_path)
    empty = GateResult("feat", "main", Verdict.UNCHANGED, ())
    notes = with_budgets(config, [record(0, 20.0)], empty).notes
    assert notes == (
        "[metrics.step_tme_ms]: no run of this gate has that metric, nor does perfgate's "
        "catalogue know it (a misspelt name applies to nothing)",
    )
