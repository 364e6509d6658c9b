"""The gate's lighter reads give what the full reads they replace would have: every
benchmark's latest run in a few queries, the window runs' profiles alone for an attribution,
and no base run read for a benchmark without findings. On SQLite and, with
PERFGATE_TEST_POSTGRES_URL, PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from helpers import RUN_T0, make_profile, make_run, record
from sqlalchemy import event

from perfgate import app
from perfgate.app.advise import findings_for
from perfgate.app.gate import GateReads, gate_window
from perfgate.config import Config
from perfgate.errors import NotFoundError
from perfgate.models import Finding, RunRecord, Severity
from perfgate.store import SqlStore, open_store


def _fill(store: SqlStore) -> list[RunRecord]:
    saved = []
    for i in range(14):
        run = make_run(
            f"run{i:02d}",
            started_at=RUN_T0 + timedelta(minutes=i // 2),  # pairs share a start: ids break ties
            branch="feat" if i == 5 else "main",
            measurements=() if i == 7 else None,  # a run without measurements takes its place
            profile=make_profile() if i % 3 == 0 else None,
            excluded=i == 9,
        )
        store.save_run(run)
        saved.append(run)
    return saved


def test_latest_runs_are_each_benchmarks_latest_run(store: SqlStore) -> None:
    finding = Finding(
        rule="x", severity=Severity.WARNING, location="op", message="m", suggestion="s"
    )
    for i in range(12):
        run = make_run(
            f"l{i:02d}",
            benchmark=f"b{i % 4}",
            branch="feat" if i == 10 else "main",
            started_at=RUN_T0 + timedelta(minutes=i // 4),  # b0..b3 tie at each minute
            profile=make_profile() if i % 2 else None,
            excluded=i == 11,  # b3's newest is excluded: its latest is l07
        )
        if i == 9:
            run = replace(run, rank_profiles=(make_profile(), make_profile()), findings=(finding,))
        store.save_run(run)
    names = ["b0", "b1", "b2", "b3", "missing"]
    latest = store.latest_runs(project="demo", benchmarks=names, branch="main")
    expected = {
        n: r
        for n in names
        if (r := store.latest_run(project="demo", benchmark=n, branch="main")) is not None
    }
    assert latest == expected
    assert {n: r.id for n, r in latest.items()} == {
        "b0": "l08",
        "b1": "l09",
        "b2": "l06",  # l10 is on feat
        "b3": "l07",
    }
    assert latest["b1"].findings == (finding,) and len(latest["b1"].rank_profiles) == 2
    assert store.latest_runs(project="demo", benchmarks=[], branch="main") == {}


def test_profiles_reads_the_profiles_of_the_runs_named(store: SqlStore) -> None:
    saved = _fill(store)
    ids = ["run00", "run01", "run03", "run09", "no-such-run", "run03"]
    found = store.profiles(ids)
    assert sorted(found) == ["run00", "run03", "run09"]  # excluded runs' profiles too
    by_id = {r.id: r for r in saved}
    assert all(found[i] == by_id[i].profile for i in found)
    assert store.profiles([]) == {}


def test_findings_read_no_base_run_without_findings_to_mark() -> None:
    config = Config()
    plain = make_run("plain")  # no profile, no stored findings: nothing to mark known
    asked: list[str] = []

    def base() -> RunRecord:
        asked.append("base")
        return make_run("base")

    assert findings_for(config, plain, base) == ()
    assert asked == []
    finding = Finding(rule="x", severity=Severity.WARNING, location="", message="m", suggestion="s")
    noted = replace(plain, findings=(finding,))
    known = replace(make_run("base"), findings=(finding,))
    assert findings_for(config, noted, lambda: known) == findings_for(config, noted, known)
    assert [f.known for f in findings_for(config, noted, lambda: known)] == [True]


def test_a_gates_shared_reads_draw_every_window_as_its_own_reads_would(store: SqlStore) -> None:
    # mlp: a change point whose alert is triaged invalid; cnn: a baseline reset; plain: none
    levels = {"mlp": [20.0] * 10 + [26.0] * 10, "cnn": [30.0] * 12, "plain": [10.0] * 8}
    for name, series in levels.items():
        store.save_runs(
            [record(i, ms, benchmark=name, noise=0.005, seed=3) for i, ms in enumerate(series)]
        )
    config = Config()
    now = RUN_T0 + timedelta(days=400)
    (change,) = app.analyze_history(config, store, branch="main", now=now)
    assert change.benchmark == "mlp"
    (alert,) = store.alerts(project="default")
    app.triage_alert(
        config, store, alert.id, action="ignore", state="invalid", by="a", reason="r", now=now
    )
    for benchmark, commit in (("cnn", f"{8:040x}"), ("cnn", f"{5:040x}")):  # the latest counts
        app.reset_baseline(
            config, store, benchmark=benchmark, commit=commit, branch="main", by="a", reason="r"
        )
    shared = GateReads.read(config, store)
    assert set(shared.resets) == {"cnn"} and shared.invalid
    for name, series in levels.items():
        head = record(len(series), series[-1], benchmark=name, noise=0.005, seed=4)
        for branch in ("main", "feat"):
            own = gate_window(config, store, head, branch=branch, against="main")
            assert (
                gate_window(config, store, head, branch=branch, against="main", reads=shared) == own
            )
    cnn = record(12, 30.0, benchmark="cnn", noise=0.005, seed=4)
    window, _, _ = gate_window(config, store, cnn, branch="main", against="main", reads=shared)
    assert {p.run_id for p in window.points["step_time_ms"]} == {
        f"cnn-main-{i:03d}" for i in range(5, 12)
    }


def test_one_read_gives_the_window_points_and_the_scanned_centres(store: SqlStore) -> None:
    """history_and_centres (the gate's one query per benchmark) gives history()'s points of
    the newest ``limit`` runs and every metric's centres of the newest ``scan`` runs, oldest
    first, whichever of the two limits is larger; excluded runs are in neither."""
    saved = _fill(store)
    # a run without measurements (run07) still counts in the limits, as in history()
    eligible = [r for r in saved if r.git.branch == "main" and not r.excluded]
    eligible.sort(key=lambda r: (r.started_at, r.id))
    assert not eligible[-6].measurements
    # (limits past the 12 eligible runs: all of them, not a wrapped-around slice)
    for limit, scan in ((6, 9), (9, 6), (6, 0), (0, 6), (2, 7), (20, 100), (100, 20), (50, 50)):
        points, centres = store.history_and_centres(
            project="demo", benchmark="mlp", branch="main", limit=limit, scan=scan
        )
        assert points == store.history(project="demo", benchmark="mlp", branch="main", limit=limit)
        assert [p.run_id for p in points] == [
            r.id for r in eligible[max(len(eligible) - limit, 0) :] if limit for _ in r.measurements
        ]
        scanned = eligible[max(len(eligible) - scan, 0) :] if scan else []
        assert set(centres) == ({m.metric for r in scanned for m in r.measurements})
        for metric, series in centres.items():
            of_runs = [(r.id, r.measurement(metric)) for r in scanned]
            assert series == [(i, m.summary.centre) for i, m in of_runs if m is not None]


def test_a_gate_reads_in_one_transaction_whatever_its_benchmarks(store: SqlStore) -> None:
    """A gate's time on a team's server (a network hop away) is its round trips: a gate over
    two benchmarks or six, with or without a PR's merge-base to anchor each window at (main
    moved twice since), takes one connection from the pool for all its reads, one
    transaction: not a checkout, BEGIN and COMMIT (and on PostgreSQL a ping) per read."""
    names = [f"b{i}" for i in range(6)]
    for name in names:
        store.save_runs([record(i, 20.0, benchmark=name) for i in range(12)])
        store.save_run(record(12, 20.0, benchmark=name, branch="feat"))
    checkouts: list[object] = []

    def count(*args: object) -> None:
        checkouts.append(args)

    config = Config()
    event.listen(store.engine, "checkout", count)
    try:
        for base_sha in ("", f"{9:040x}"):
            for chosen in (names[:2], names):
                checkouts.clear()
                result = app.compare(
                    config,
                    store,
                    branch="feat",
                    against="main",
                    benchmarks=chosen,
                    base_sha=base_sha,
                )
                assert {c.benchmark for c in result.comparisons} == set(chosen)
                # anchored at the merge-base run 9: runs 10 and 11 are not in any window
                newest = max(c.baseline_commits[-1] for c in result.comparisons)
                assert newest == (base_sha or f"{11:040x}")
                assert len(checkouts) == 1, (base_sha, chosen, len(checkouts))
    finally:
        event.remove(store.engine, "checkout", count)


def test_reads_in_a_snapshot_agree_and_a_write_there_is_refused(store_url: str) -> None:
    """Every read of a gate sees one state of the store, while another job commits a run
    between them; a write inside the snapshot (which it would not see) is a programming
    error, refused before it touches the store."""
    reader, writer = open_store(store_url), open_store(store_url)
    try:
        writer.save_runs([make_run(f"r{i}", started_at=RUN_T0 + timedelta(i)) for i in range(3)])
        args: dict[str, Any] = {"project": "demo", "benchmark": "mlp", "branch": "main"}
        with reader.snapshot():
            before = reader.history(**args)
            writer.save_run(make_run("late", started_at=RUN_T0 + timedelta(9)))
            assert reader.history(**args) == before
            latest = reader.latest_run(project="demo", benchmark="mlp", branch="main")
            assert latest is not None and latest.id == "r2"
            with pytest.raises(RuntimeError, match="inside a read snapshot"):
                reader.save_run(make_run("refused", started_at=RUN_T0 + timedelta(10)))
        assert [p.run_id for p in reader.history(**args)][-1] == "late"
        assert writer.get_run("late").id == "late"
        with pytest.raises(NotFoundError):
            writer.get_run("refused")
    finally:
        reader.close()
        writer.close()


def test_only_a_step_timed_with_the_profiler_off_measures_the_profiler_s_overhead() -> None:
    # an ingested profile's step_time_ms is the median of its own profiled steps: against
    # their mean, one slow step read as "profiled steps take 2.0x the timed step"
    from helpers import default_measurements, fingerprint

    from perfgate.app.advise import run_findings
    from perfgate.runner.fingerprint import TIMING_METHOD

    run = make_run(
        "r",
        profile=make_profile(),
        measurements=default_measurements(scale=0.4),
        fingerprint=fingerprint(timing_method=TIMING_METHOD),  # perfgate's runner
    )
    timed = {f.rule for f in run_findings(Config(), run)}
    assert "profiler_overhead" in timed  # 10 ms profiled against a 5.7 ms timed step
    ingested = replace(run, fingerprint=fingerprint(timing_method="torch-trace-v1"))
    assert "profiler_overhead" not in {f.rule for f in run_findings(Config(), ingested)}
