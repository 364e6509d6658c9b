"""``perfgate check``: run, gate and settle inside the job.

Real worker processes running a small torch kernel (one thread: its CPU time decides), real
SQLite files, a real git repository for ``--mode ab``. Where a test needs the first look to
be inconclusive for sure, the baseline is built from a real run copied with a fixed, wide
spread, so nothing depends on how busy the machine is.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from helpers import perfgate as run_perfgate
from helpers import record, seed_main

import perfgate.app.check as check_app
from perfgate.app import compare_records
from perfgate.app.check import MAX_EXTRA, Budget, parse_budget
from perfgate.config import Config
from perfgate.errors import ConfigError
from perfgate.models import (
    BenchmarkSpec,
    CIContext,
    Comparison,
    Confirmation,
    Direction,
    GateResult,
    GitContext,
    RunRecord,
    Verdict,
)
from perfgate.stats.decide import ALPHA
from perfgate.stats.looks import BUDGET, CAP, DECIDED, Look, Stop
from perfgate.store import SqlStore, open_store


@pytest.mark.parametrize(
    ("text", "budget"),
    [
        ("10m", Budget(seconds=600.0)),
        ("600s", Budget(seconds=600.0)),
        ("1.5h", Budget(seconds=5400.0)),
        (" 90S ", Budget(seconds=90.0)),
        ("8", Budget(repeats=8)),
    ],
)
def test_a_budget_is_a_time_or_a_number_of_repeats(text: str, budget: Budget) -> None:
    assert parse_budget(text) == budget


@pytest.mark.parametrize("text", ["", "10x", "-5", "0", "0s", "2.5", "m", "10 minutes"])
def test_a_bad_budget_says_what_is_expected(text: str) -> None:
    with pytest.raises(ConfigError, match="--budget"):
        parse_budget(text)


def test_a_time_budget_buys_whole_rounds_of_the_open_benchmarks() -> None:
    # two open benchmarks of 4 s and 6 s a repeat: 10 s a round
    assert Budget(seconds=60.0).extra([4.0, 6.0]) == 6
    assert Budget(seconds=9.0).extra([4.0, 6.0]) == 0
    assert Budget(seconds=3600.0).extra([4.0, 6.0]) == MAX_EXTRA
    assert Budget(repeats=3).extra([100.0]) == 3
    assert Budget(repeats=50).extra([1.0]) == MAX_EXTRA


# --- what re-measuring may spend: fakes for the measuring, seconds fixed by the test --------


def _row(benchmark: str, verdict: Verdict, method: str, run_id: str) -> Comparison:
    return Comparison(
        benchmark=benchmark,
        metric="step_cpu_ms",
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        verdict=verdict,
        reason="",
        current_run_id=run_id,
        current_centre=10.0,
        p_value=0.5,
        method=method,
    )


def _lasting(run: RunRecord, benchmark: str, seconds: float) -> RunRecord:
    """``run`` as one of ``benchmark`` (3 repeats, or pairs) that took ``seconds``."""
    return replace(
        run,
        benchmark=benchmark,
        spec=replace(run.spec, name=benchmark, repeats=3),
        finished_at=run.started_at + timedelta(seconds=seconds),
    )


def _fake_gate(plain: dict[str, Verdict], method: str) -> Callable[..., GateResult]:
    """The gate as ``check`` sees it: ``plain`` verdicts at the plain level, every benchmark
    inconclusive at the looks' stricter level (a run judged at a level of its own, by
    benchmark in ``alpha``): the case where look 0 opens more than the plain gate did."""

    def judge(
        config: object,
        store: object,
        runs: Sequence[RunRecord],
        alpha: float | Mapping[str, float] = ALPHA,
        **_: object,
    ) -> GateResult:
        looked = alpha if isinstance(alpha, Mapping) else {}
        rows = tuple(
            _row(
                r.benchmark,
                Verdict.INCONCLUSIVE if r.benchmark in looked else plain[r.benchmark],
                method,
                r.id,
            )
            for r in runs
        )
        return GateResult("feat", "main", Verdict.INCONCLUSIVE, rows)

    return judge


def _check_args(budget: Budget) -> dict[str, Any]:
    return dict(
        budget=budget,
        git=GitContext(commit="f" * 40, branch="feat"),
        ci=CIContext(),
        against="main",
        trace_root=Path("traces"),
        repo=Path("."),
    )


def test_history_mode_re_measures_only_what_the_budget_was_sized_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Benchmark a is inconclusive at the plain gate, b unchanged there but open at look 0's
    stricter level; a repeat takes 10 s each. A 60 s budget buys a 6 extra repeats, and b
    gets none (which would spend 120 s)."""
    runs = [_lasting(record(1, 10.0, branch="feat"), name, 30.0) for name in ("a", "b")]
    confirmed: list[tuple[list[str], int]] = []

    def confirm(*args: object, **kw: Any) -> list[Confirmation]:
        specs = cast(Sequence[BenchmarkSpec], args[1])
        confirmed.append(([s.name for s in specs], kw["extra"]))
        return []

    monkeypatch.setattr(check_app, "run_and_record", lambda *a, **k: runs)
    monkeypatch.setattr(
        check_app,
        "compare_records",
        _fake_gate({"a": Verdict.INCONCLUSIVE, "b": Verdict.UNCHANGED}, "history"),
    )
    monkeypatch.setattr(check_app, "confirm_and_record", confirm)
    monkeypatch.setattr(check_app, "check_base_branch", lambda *a, **k: None)  # no store here
    specs = [BenchmarkSpec(name=n, workload="mlp") for n in ("a", "b")]
    check_app.run_check(
        Config(), specs, cast(SqlStore, None), mode="history", **_check_args(Budget(seconds=60.0))
    )
    assert confirmed == [(["a"], 6)]  # 6 x 10 s: within the 60 s


def test_ab_mode_buys_pairs_at_their_own_duration_and_never_past_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three pairs of a and of b took 60 s each (20 s a pair, both sides; the head run's
    span). a is inconclusive at the plain gate and at every look, b unchanged at the plain
    gate. A 100 s budget on a clock the measuring moves buys a 5 more pairs (100 s), b none;
    a's looks end because no further pair fits, and the note says so in words."""
    pairs = []
    for name in ("a", "b"):
        base = _lasting(record(1, 10.0, branch="feat:base"), name, 60.0)
        head = _lasting(record(2, 10.0, branch="feat"), name, 60.0)
        pairs.append((base, head))
    extended: list[tuple[str, int]] = []
    now = [0.0]

    def extend(
        config: Config, store: object, pair: tuple[RunRecord, RunRecord], **kw: Any
    ) -> object:
        extended.append((kw["spec"].name, kw["extra"]))
        now[0] += 20.0 * kw["extra"]
        base, head = pair
        spec = replace(head.spec, repeats=head.spec.repeats + 5)
        return base, replace(head, spec=spec, alpha=kw["alpha"])

    monkeypatch.setattr(check_app, "run_ab_and_record", lambda *a, **k: pairs)
    monkeypatch.setattr(
        check_app,
        "compare_records",
        _fake_gate({"a": Verdict.INCONCLUSIVE, "b": Verdict.UNCHANGED}, "paired"),
    )
    monkeypatch.setattr(check_app, "extend_pairs_and_record", extend)
    specs = [BenchmarkSpec(name=n, workload="mlp") for n in ("a", "b")]
    outcome = check_app.run_check(
        Config(),
        specs,
        cast(SqlStore, None),
        mode="ab",
        ab_ref="HEAD~1",
        clock=lambda: now[0],
        **_check_args(Budget(seconds=100.0)),
    )
    assert extended == [("a", 5)]  # 5 pairs x 20 s
    assert now[0] <= 100.0
    assert outcome.remeasured == ("a",) and outcome.extra == 5
    (stop,) = outcome.stops
    assert (stop.benchmark, stop.why, stop.pairs, stop.extra) == ("a", BUDGET, 8, 5)
    assert stop.spent <= ALPHA
    assert "budget spent at look 2, 8 pairs (5 added)" in check_app.remeasured_line(outcome)


def test_ab_mode_s_budget_is_the_whole_check_s_the_first_pairs_spend_it_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same check, but the first pairs (and the base's worktree) took 60 s of the 100 s
    budget: the looks get the 40 s left, 2 more pairs of a, so the check ends within its
    budget (on the tree before, the looks had the whole 100 s again: 5 pairs, 160 s)."""
    pairs = [
        (
            _lasting(record(1, 10.0, branch="feat:base"), name, 60.0),
            _lasting(record(2, 10.0, branch="feat"), name, 60.0),
        )
        for name in ("a", "b")
    ]
    extended: list[tuple[str, int]] = []
    now = [0.0]

    def first_pairs(*a: Any, **k: Any) -> object:
        now[0] += 60.0
        return pairs

    def extend(
        config: Config, store: object, pair: tuple[RunRecord, RunRecord], **kw: Any
    ) -> object:
        extended.append((kw["spec"].name, kw["extra"]))
        now[0] += 20.0 * kw["extra"]
        base, head = pair
        spec = replace(head.spec, repeats=head.spec.repeats + 2)
        return base, replace(head, spec=spec, alpha=kw["alpha"])

    monkeypatch.setattr(check_app, "run_ab_and_record", first_pairs)
    monkeypatch.setattr(
        check_app,
        "compare_records",
        _fake_gate({"a": Verdict.INCONCLUSIVE, "b": Verdict.UNCHANGED}, "paired"),
    )
    monkeypatch.setattr(check_app, "extend_pairs_and_record", extend)
    specs = [BenchmarkSpec(name=n, workload="mlp") for n in ("a", "b")]
    check_app.run_check(
        Config(),
        specs,
        cast(SqlStore, None),
        mode="ab",
        ab_ref="HEAD~1",
        clock=lambda: now[0],
        **_check_args(Budget(seconds=100.0)),
    )
    assert extended == [("a", 2)]
    assert now[0] <= 100.0


def test_each_look_is_judged_at_the_level_it_is_given_not_one_stored_in_a_spec(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Ten pairs 5% slower (the pair-order test's p is 1/512): a regression at the plain
    gate's alpha, so ``check --mode ab`` looks again. The gate is the real one: the plain
    gate is judged at ALPHA, each look at the level the looks gave it (passed as
    ``alpha``, by benchmark), the final gate at the last look's, and the comparison says
    which. The fake adds no pairs: the same ten stay open at a look's level below 1/512."""
    base = record(1, 20.0, branch="feat:base", noise=0.002, repeats=10)
    head = replace(record(2, 21.0, branch="feat", noise=0.002, repeats=10), paired_with=base.id)
    judged_at: list[object] = []

    def judge(*args: Any, **kw: Any) -> GateResult:
        alpha = kw.get("alpha", ALPHA)
        judged_at.append(dict(alpha) if isinstance(alpha, Mapping) else alpha)
        return compare_records(*args, **kw)

    def extend(config: Config, store: object, pair: tuple[RunRecord, RunRecord], **kw: Any) -> Any:
        return pair[0], replace(pair[1], alpha=kw["alpha"])

    monkeypatch.setattr(check_app, "run_ab_and_record", lambda *a, **k: [(base, head)])
    monkeypatch.setattr(check_app, "compare_records", judge)
    monkeypatch.setattr(check_app, "extend_pairs_and_record", extend)
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        store.save_runs([base, head])
        outcome = check_app.run_check(
            Config(),
            [BenchmarkSpec(name="mlp", workload="mlp")],
            store,
            mode="ab",
            ab_ref="HEAD~1",
            clock=lambda: 0.0,
            **_check_args(Budget(repeats=20)),
        )
    (stop,) = outcome.stops
    assert judged_at == [ALPHA, *({"mlp": look.level} for look in stop.looks), {"mlp": stop.level}]
    # the looks below 1/512 left it open; the first above it decided it
    assert stop.why == DECIDED and stop.looks[-2].level < 1 / 512 < stop.level < ALPHA
    (paired,) = (c for c in outcome.result.comparisons if c.method == "paired" and c.decides)
    assert (paired.verdict, paired.alpha) == (Verdict.REGRESSION, stop.level)


def test_what_would_settle_pairs_left_open_says_what_was_spent_and_what_is_missing() -> None:
    """A paired benchmark the looks left open: the note says the pairs spent, the smallest
    change they can see, what stopped them, and about how many more pairs would settle it
    (from the spread its interval implies: 42 in all for a 10% change)."""
    head = record(1, 10.0, branch="feat")
    row = replace(
        _row("mlp", Verdict.INCONCLUSIVE, "paired", head.id),
        mde_pct=14.4,
        min_effect_pct=3.0,
        change_pct=10.0,
        ci_low_pct=2.0,
        ci_high_pct=18.0,
    )
    result = GateResult("feat", "main", Verdict.INCONCLUSIVE, (row,))
    looks_done = (Look(3, 0.0001, False), Look(6, 0.0004, False), Look(24, 0.0096, True))
    stop = Stop("mlp", BUDGET, 24, 21, 250.0, looks_done, 0.0096, 0.0096)
    (note,) = check_app.unsettled_notes(result, [head], (), 0, stops=[stop])
    assert note.startswith("mlp: still inconclusive: step_cpu_ms: 24 pairs measured"), note
    assert "21 added in 250 s over 3 looks" in note
    assert "can see a change of 14.4%" in note and "minimum effect of 3%" in note
    assert "the budget was spent" in note and "raise --budget" in note
    assert "about 18 more pairs (42 in all) would likely settle a change of 10.0%" in note
    assert "not possible here" not in note
    capped = replace(stop, why=CAP)
    (note,) = check_app.unsettled_notes(result, [head], (), 0, stops=[capped])
    assert "cap of" in note and "--budget" not in note


def test_pairs_too_few_to_decide_are_said_to_be_too_few() -> None:
    """A paired benchmark left open with fewer pairs than the pair-order test needs (a budget
    that bought 2 more than the first 3): no detectable change to quote, and the note says
    why instead of an 'unknown' one."""
    head = record(1, 10.0, branch="feat")
    row = replace(_row("mlp", Verdict.INCONCLUSIVE, "paired", head.id), min_effect_pct=3.0)
    result = GateResult("feat", "main", Verdict.INCONCLUSIVE, (row,))
    (note,) = check_app.unsettled_notes(result, [head], (), 2, remeasured=["mlp"])
    assert "can see no change of any size yet: fewer than 8 pairs" in note, note
    assert "unknown" not in note


def test_the_report_names_the_commit_it_is_given_not_the_checkouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``check --commit SHA`` hands its commit to the report: where the judged runs do not
    name one, the report says SHA, not the commit checked out where the job runs."""
    from perfgate import app
    from perfgate.app.gate_job import CiOutputs
    from perfgate.cli.gate import delivery_options

    checkout = tmp_path / "repo"
    checkout.mkdir()
    git(checkout, "init", "-q", "-b", "feat")
    git(checkout, "commit", "-q", "--allow-empty", "-m", "what is checked out")
    monkeypatch.chdir(checkout)
    for name in [n for n in os.environ if n.startswith(("GITHUB_", "CI_", "GITLAB"))]:
        monkeypatch.delenv(name)
    config = Config(database_url=f"sqlite:///{tmp_path / 'perfgate.db'}")
    delivery = delivery_options(
        None,
        comment=False,
        comment_mode="always",
        forge=None,
        forge_url=None,
        repo=None,
        pr_number=None,
        sha=None,
        report_dir=tmp_path / "report",
        status=None,
        summary=False,
        testbed=None,
        report_url=None,
    )
    result = GateResult("feat", "main", Verdict.NO_BASELINE, ())
    app.conclude_gate(
        config,
        result,
        delivery=delivery,
        outputs=CiOutputs(annotations=False),
        commit="abcdef0123456789",
        branch="feat",
    )
    report = (tmp_path / "report" / "report.md").read_text()
    assert "@ abcdef0" in report, report


torch = pytest.importorskip("torch")

BENCH = """
import torch

def build(device="cpu", size=96, slowdown=0.0):
    a = torch.randn(size, size)
    extra = int(round(40 * slowdown))
    def step():
        x = a
        for _ in range(40):
            x = torch.tanh(x @ a)
        y = a
        for _ in range(extra):  # the slowdown: more work, the same result
            y = torch.tanh(y @ a)
        return x.sum()
    return {"step": step, "batch_size": 1}
"""

SUITE = """
[defaults]
repeats = 3
warmup = 3
measured = 10
profiled = 0

[[benchmarks]]
name = "kernel"
entry = "bench_check:build"
"""


def sh(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_", "GITLAB"))}
    env.pop("CI", None)
    env.pop("PERFGATE_DATABASE_URL", None)
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False
    )


def perfgate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # spawn: run in this test process, ``check`` left two re-measuring tests un-re-measured
    # (test_noise_between_*; not yet understood), so these keep a process of their own.
    return run_perfgate(cwd, *args, spawn=True)


def project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "bench_check.py").write_text(textwrap.dedent(BENCH))
    (root / "perfgate.toml").write_text(textwrap.dedent(SUITE))
    return root


def store_path(root: Path) -> Path:
    return root / ".perfgate" / "perfgate.db"


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--budget", "10x", "--budget '10x': expected a time"),
        ("--fail-on", "regresion", "--fail-on 'regresion': expected verdicts"),
    ],
)
def test_bad_input_fails_before_anything_runs(
    tmp_path: Path, flag: str, value: str, says: str
) -> None:
    root = project(tmp_path)
    done = perfgate(root, "check", "--branch", "feat", "--against", "main", flag, value)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert not (root / ".perfgate").exists()  # nothing ran, no store file was made


def test_ab_mode_outside_a_git_checkout_is_a_usage_error(tmp_path: Path) -> None:
    root = project(tmp_path)
    done = perfgate(root, "check", "--branch", "feat", "--against", "main", "--mode", "ab")
    assert done.returncode == 2, done.stderr
    assert "--mode ab needs a git checkout" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (root / ".perfgate").exists()  # no store file made for a usage error


def gate_json(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.returncode in (0, 1), done.stderr
    out: dict[str, object] = json.loads(done.stdout)
    return out


def deciding_rows(out: dict[str, object]) -> dict[str, dict[str, object]]:
    rows = out["comparisons"]
    assert isinstance(rows, list)
    return {str(c["metric"]): c for c in rows if c["decides"]}


@pytest.mark.slow
def test_history_mode_fails_a_much_slower_step_on_its_cpu_time(tmp_path: Path) -> None:
    """Main's history, then ``check`` of a step with four times the work: a regression
    decided by the CPU time (an effect far above any runner noise: under two busy
    neighbours this kernel's CPU time scattered by 19% between repeats), exit 1."""
    root = project(tmp_path)
    seed_main(root, jobs=(1.0, 1.05, 0.95, 1.02), repeats=(0.9, 1.0, 1.1))
    done = perfgate(
        root, "check", "--branch", "feat", "--against", "main",
        "--param", "slowdown=3.0", "--budget", "2", "--json",
    )  # fmt: skip
    out = gate_json(done)
    assert done.returncode == 1, done.stdout
    rows = deciding_rows(out)
    assert rows["step_cpu_ms"]["verdict"] == "regression"
    assert "step_time_ms" not in rows  # shown beside it, not deciding
    assert out["verdict"] == "regression" and out["failed"] is True


@pytest.mark.slow
def test_a_regression_on_the_base_branch_is_recorded_as_an_alert(tmp_path: Path) -> None:
    """``check`` of main itself (four times the work against main's history): its
    regression becomes an untriaged alert, as a base-branch ``gate`` records it."""
    root = project(tmp_path)
    seed_main(root, jobs=(1.0, 1.05, 0.95, 1.02), repeats=(0.9, 1.0, 1.1))
    done = perfgate(
        root, "check", "--branch", "main", "--against", "main",
        "--param", "slowdown=3.0", "--budget", "2", "--json",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    store = open_store(f"sqlite:///{store_path(root)}")
    try:
        alerts = store.alerts(project="default")
        latest = store.latest_run(project="default", benchmark="kernel", branch="main")
    finally:
        store.close()
    assert latest is not None
    regressions = {(a.benchmark, a.metric, a.source, a.status) for a in alerts}
    assert ("kernel", "step_cpu_ms", "gate", "untriaged") in regressions, alerts
    assert {a.run_id for a in alerts} == {latest.id}


@pytest.mark.slow
def test_noise_between_jobs_is_not_re_measured_and_the_report_says_why(tmp_path: Path) -> None:
    """Main's runs disagree by +-30% while each run's repeats agree: the noise is between
    jobs, more repeats in this job cannot settle it. ``check`` leaves the benchmark
    inconclusive without re-measuring it, says so, and what would settle it."""
    root = project(tmp_path)
    seed_main(root, jobs=(0.7, 1.3, 0.85, 1.15, 1.0), repeats=(1.0, 1.0, 1.0))
    done = perfgate(root, "check", "--branch", "feat", "--against", "main", "--json")
    out = gate_json(done)
    assert done.returncode == 0
    assert deciding_rows(out)["step_cpu_ms"]["verdict"] == "inconclusive"
    notes = [str(n) for n in out["notes"]]  # type: ignore[attr-defined]
    why = [n for n in notes if "still inconclusive" in n]
    assert len(why) == 1 and why[0].startswith("kernel: "), notes
    assert "job-level noise dominates" in why[0] and "--ab" in why[0], (why, done.stderr[-3000:])
    assert "check: nothing re-measured" in done.stderr
    store = open_store(f"sqlite:///{store_path(root)}")
    try:
        latest = store.latest_run(project="default", benchmark="kernel", branch="feat")
    finally:
        store.close()
    assert latest is not None and latest.spec.looks == 0


@pytest.mark.slow
def test_noise_between_repeats_is_re_measured_within_the_budget(tmp_path: Path) -> None:
    """Main's runs agree while their repeats scatter by +-30%: more repeats do shrink the
    noise. ``check --budget 2`` gives the inconclusive benchmark 2 more repeats in fresh
    processes, records the run with all of them in place of the first (one run on the
    branch, marked as confirmed) and judges it at the two looks' common level.

    The branch's run is measured, main's is a copy of a run measured seconds earlier: the
    scatter is wide enough (an interval of about -50..+80% after both looks) that CPU time
    which moved between the two under a busy neighbour does not decide the first look."""
    root = project(tmp_path)
    seed_main(root, jobs=(1.0, 1.01, 0.99, 1.0, 1.005), repeats=(0.7, 1.0, 1.3))
    done = perfgate(
        root, "check", "--branch", "feat", "--against", "main", "--budget", "2", "--json"
    )
    out = gate_json(done)
    assert "check: re-measured kernel with 2 extra repeats" in done.stderr, done.stderr
    store = open_store(f"sqlite:///{store_path(root)}")
    try:
        latest = store.latest_run(project="default", benchmark="kernel", branch="feat")
        runs = store.history(
            project="default",
            benchmark="kernel",
            branch="feat",
            fingerprint_key=latest.fingerprint.key() if latest else "",
            limit=10,
        )
    finally:
        store.close()
    assert latest is not None and latest.spec.looks == 2
    cpu = latest.measurement("step_cpu_ms")
    assert cpu is not None and len(cpu.repeats) == 5
    assert {p.run_id for p in runs} == {latest.id}  # the first run is superseded
    rows = deciding_rows(out)
    alpha = rows["step_cpu_ms"]["alpha"]
    assert isinstance(alpha, float) and alpha < 0.01  # both looks share the level
    assert rows["step_cpu_ms"]["current_run_id"] == latest.id


def git(cwd: Path, *args: str) -> None:
    done = sh(cwd, "git", "-c", "user.email=t@t", "-c", "user.name=t", *args)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_ab_mode_measures_the_merge_base_in_the_same_job(tmp_path: Path) -> None:
    """``check --mode ab`` in a PR checkout: the merge-base with main found by itself, base
    and head measured in pairs, the pairs decide (four times the work: a regression, exit
    1, far above what a few pairs on a busy machine can mistake)."""
    root = project(tmp_path / "repo")
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text(".perfgate/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    git(root, "checkout", "-q", "-b", "feat")
    (root / "bench_check.py").write_text(
        textwrap.dedent(BENCH).replace("slowdown=0.0", "slowdown=3.0")
    )
    git(root, "commit", "-q", "-am", "four times the work")
    done = perfgate(
        root, "check", "--against", "main", "--mode", "ab", "--repeats", "3",
        "--budget", "7", "--json",
    )  # fmt: skip
    out = gate_json(done)
    assert done.returncode == (1 if out["verdict"] == "regression" else 0), done.stderr
    rows = out["comparisons"]
    assert isinstance(rows, list)
    paired = {c["metric"]: c for c in rows if c["method"] == "paired" and c["decides"]}
    cpu = paired["step_cpu_ms"]
    if cpu["verdict"] == "regression":
        assert done.returncode == 1
    assert str(cpu["reason"]).count("pairs") >= 1
    # four times the work is far above the noise of a quiet machine, but a few pairs beside
    # another test process can still leave it open: a decision is demanded only when the
    # change is well past what the pairs could tell apart
    assert cpu["change_pct"] > 0
    # (3 pairs cannot decide: the first look leaves every benchmark open; the budget's 7
    # pairs come in steps to the last look, at 10 pairs)
    assert "check: measured until decided (kernel: " in done.stderr, done.stderr[-2000:]
    assert ", 10 pairs (7 added)" in done.stderr, done.stderr[-2000:]
    assert cpu["mde_pct"] is not None, cpu["reason"]
    if float(cpu["change_pct"]) > 2.5 * float(cpu["mde_pct"]):
        assert cpu["verdict"] == "regression", cpu["reason"]
    assert cpu["verdict"] in ("regression", "inconclusive"), cpu["reason"]
    assert "check: " in done.stderr  # what it re-measured, if anything, is said


def test_ab_mode_refuses_to_measure_the_base_against_itself(tmp_path: Path) -> None:
    """A ``pull_request_target`` job checks out the base branch: HEAD is the merge-base, and
    pairs of it with itself would pass any PR as unchanged. It stops before measuring."""
    root = project(tmp_path / "repo")
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text(".perfgate/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    done = perfgate(root, "check", "--branch", "feat", "--against", "main", "--mode", "ab")
    assert done.returncode == 2, done.stderr
    assert "is the base commit" in done.stderr and "--mode history" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (root / ".perfgate").exists()  # nothing measured, no store
