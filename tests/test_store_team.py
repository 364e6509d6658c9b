"""The team store on SQLite and PostgreSQL, the same tests on both (the ``store_url``
fixture of conftest.py: a SQLite file, or a fresh PostgreSQL schema when
PERFGATE_TEST_POSTGRES_URL is set): explicit upgrades and status, migrations that fail
half-way, parallel and killed recorders, triage, baseline resets, exclusion, retention and
baselines as code."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers import (
    T0,
    count,
    fingerprint,
    is_sqlite,
    make_measurement,
    make_profile,
    make_run,
    perfgate,
    record,
    snapshot,
)
from sqlalchemy import Engine, inspect

from perfgate import app
from perfgate.app.baselines import (
    export_baselines,
    gate_from_baseline_files,
    import_baselines,
    read_baseline,
)
from perfgate.config import Config
from perfgate.errors import StoreError
from perfgate.models import Finding, NewAlert, RunRecord, Severity, Verdict
from perfgate.store import SqlStore, open_store
from perfgate.store import migrate as migrate_module
from perfgate.store import runs as runs_module

UTC = timezone.utc
NOW = T0 + timedelta(days=400)


def config_for(url: str, **changes: object) -> Config:
    return replace(Config(), database_url=url, **changes)  # type: ignore[arg-type]


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = perfgate(None, *args, env=env)
    return result.returncode, result.stdout, result.stderr


def save_all(url: str, runs: list[RunRecord]) -> None:
    with open_store(url) as s:
        s.save_runs(runs)


# -- db status / upgrade --------------------------------------------------------------------


def test_db_status_reads_only_and_db_upgrade_creates_the_schema(
    store_url: str, raw: Engine
) -> None:
    code, out, _ = invoke("db", "status", "--db", store_url, "--json")
    assert code == 0, out
    status = json.loads(out)["store"]
    assert status["state"] == "empty" and status["revision"] is None and status["runs"] is None
    assert status["head"] == migrate_module.head_revision()
    with raw.connect() as conn:
        assert inspect(conn).get_table_names() == []  # status created nothing

    code, out, _ = invoke("db", "upgrade", "--db", store_url)
    assert code == 0, out
    assert f"empty -> {migrate_module.head_revision()}" in out
    code, out, _ = invoke("db", "upgrade", "--db", store_url)
    assert "already at revision" in out

    save_all(store_url, [make_run("status-0001"), make_run("status-0002")])
    code, out, _ = invoke("db", "status", "--db", store_url, "--json")
    status = json.loads(out)["store"]
    assert status["state"] == "current"
    assert status["runs"] == 2
    assert status["engine"] == ("sqlite" if is_sqlite(store_url) else "postgresql")


def test_newer_schema_is_refused_by_db_upgrade_untouched_and_shown_by_status(
    store_url: str, raw: Engine
) -> None:
    save_all(store_url, [make_run("newer-0001")])
    with raw.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0999_future'")
    raw.dispose()
    before = snapshot(store_url, raw)

    code, _, err = invoke("db", "upgrade", "--db", store_url)
    assert code == 3
    assert "schema revision 0999_future is newer than this perfgate" in err
    assert "left as it is" in err
    code, out, _ = invoke("db", "status", "--db", store_url, "--json")
    assert code == 0 and json.loads(out)["store"]["state"] == "newer"

    raw.dispose()
    assert snapshot(store_url, raw) == before


BROKEN_REVISION = '''"""A revision that fails half-way (test only).

Revision ID: 0999
Revises: {head}
"""

import sqlalchemy as sa
from alembic import op

revision = "0999"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("half_done", sa.Column("id", sa.Integer(), primary_key=True))
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("half_column", sa.Text(), nullable=True))
    op.execute("UPDATE runs SET excluded = true")
    raise RuntimeError("revision 0999 failed half-way")


def downgrade() -> None:
    pass
'''


@pytest.fixture
def broken_migrations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    copy = tmp_path / "migrations"
    shutil.copytree(
        migrate_module.MIGRATIONS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    head = migrate_module.head_revision()
    (copy / "versions" / "0999_broken.py").write_text(BROKEN_REVISION.format(head=head))
    monkeypatch.setattr(migrate_module, "MIGRATIONS_DIR", copy)
    migrate_module._revisions.cache_clear()
    yield
    monkeypatch.undo()
    migrate_module._revisions.cache_clear()


def test_a_migration_failing_half_way_leaves_the_database_as_it_was(
    store_url: str, raw: Engine, request: pytest.FixtureRequest
) -> None:
    """Every revision runs in one transaction: PostgreSQL rolls the DDL back, and so does
    SQLite (the file's bytes are identical afterwards)."""
    save_all(store_url, [make_run("mig-000001", profile=make_profile())])
    raw.dispose()
    before = snapshot(store_url, raw)
    shipped_head = migrate_module.head_revision()

    request.getfixturevalue("broken_migrations")
    with pytest.raises(StoreError, match=r"cannot migrate store .*0999 failed half-way.*rolled"):
        open_store(store_url)
    raw.dispose()
    assert snapshot(store_url, raw) == before
    with raw.connect() as conn:
        assert "half_done" not in inspect(conn).get_table_names()
        assert "half_column" not in {c["name"] for c in inspect(conn).get_columns("runs")}
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one() == (
            shipped_head
        )


# -- concurrency ------------------------------------------------------------------------------

WRITERS = 8
RUNS_EACH = 50


def _record_many(url: str, writer: int) -> None:
    with open_store(url) as s:
        for i in range(RUNS_EACH):
            s.save_run(make_run(f"w{writer}-{i:03d}", started_at=T0 + timedelta(seconds=i)))
        # A retried CI job: the same run saved again, here and by every other writer.
        s.save_run(make_run(f"w{writer}-000", started_at=T0))
        s.save_run(make_run("shared-000001", started_at=T0))


def test_eight_parallel_recorders_store_every_run_exactly_once(store_url: str, raw: Engine) -> None:
    open_store(store_url).close()  # schema first, as `db upgrade` in a deploy step would
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_record_many, args=(store_url, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    with raw.connect() as conn:
        ids = list(conn.exec_driver_sql("SELECT id FROM runs").scalars())
    assert len(ids) == len(set(ids)) == WRITERS * RUNS_EACH + 1
    assert set(ids) == {f"w{w}-{i:03d}" for w in range(WRITERS) for i in range(RUNS_EACH)} | {
        "shared-000001"
    }
    assert count(raw, "measurements") == 2 * len(ids)


def _block_mid_save(url: str, ready: str) -> None:
    def hold(run_id: str) -> None:
        # written whole, then renamed into place: the parent polls for the file and must
        # never see it created but not yet written (it read '' once on a busy machine)
        partial = Path(ready + ".partial")
        partial.write_text(run_id)
        os.replace(partial, ready)
        time.sleep(600)

    runs_module._SAVE_HOOK = hold
    many = tuple(make_measurement(f"metric_{i:03d}", [[1.0 + i, 2.0]]) for i in range(300))
    with open_store(url) as s:
        s.save_run(make_run("killed-0001", measurements=many, profile=make_profile()))


def test_a_recorder_killed_mid_transaction_leaves_no_partial_run(
    store_url: str, raw: Engine, tmp_path: Path
) -> None:
    open_store(store_url).close()
    ready = tmp_path / "ready"
    child = multiprocessing.get_context("fork").Process(
        target=_block_mid_save, args=(store_url, str(ready))
    )
    child.start()
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ready.read_text() == "killed-0001"  # its rows are inserted, not committed
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join(10)
    assert child.exitcode == -signal.SIGKILL

    with open_store(store_url) as s:  # the store still works, and the run can be re-recorded
        s.save_run(make_run("after-00001"))
        s.save_run(make_run("killed-0001"))
        assert s.get_run("killed-0001") == make_run("killed-0001")
    assert count(raw, "runs") == 2
    assert count(raw, "measurements") == 4
    assert count(raw, "profiles") == 0


def test_sqlite_locked_writes_are_retried_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from perfgate.store import connect

    path = tmp_path / "locked.db"
    monkeypatch.setattr(connect, "SQLITE_BUSY_TIMEOUT_MS", 20)
    url = f"sqlite:///{path}"
    with open_store(url) as s:

        def hold_lock(seconds: float) -> threading.Thread:
            started = threading.Event()

            def hold() -> None:
                other = sqlite3.connect(path, isolation_level=None)
                other.execute("BEGIN IMMEDIATE")
                started.set()
                time.sleep(seconds)
                other.execute("ROLLBACK")
                other.close()

            t = threading.Thread(target=hold)
            t.start()
            started.wait()
            return t

        t = hold_lock(0.15)  # longer than busy_timeout, shorter than the retries
        s.save_run(make_run("retry-00001"))
        t.join()
        assert s.has_run("retry-00001")

        t = hold_lock(3.0)  # longer than every retry together
        with pytest.raises(StoreError, match="database is locked"):
            s.save_run(make_run("retry-00002"))
        t.join()
        assert not s.has_run("retry-00002")


# -- triage -----------------------------------------------------------------------------------


def _step_series(levels: list[float], start: int = 0) -> list[RunRecord]:
    return [record(start + i, ms, noise=0.005, seed=3) for i, ms in enumerate(levels)]


def test_alerts_from_history_are_recorded_once_triaged_with_who_and_why_and_honoured(
    store_url: str,
) -> None:
    save_all(store_url, _step_series([20.0] * 10 + [26.0] * 10))
    config = config_for(store_url)
    env = {"GITHUB_ACTOR": "octocat", "USER": "someone-else"}
    with open_store(store_url) as s:
        changes = app.analyze_history(config, s, branch="main", now=NOW)
        assert [(c.metric, c.verdict, c.triage) for c in changes] == [
            ("step_time_ms", Verdict.REGRESSION, "untriaged")
        ]
        again = app.analyze_history(config, s, branch="main", now=NOW)
        assert [c.first_run_after for c in again] == [changes[0].first_run_after]
        assert len(s.alerts(project="default")) == 1  # found twice, recorded once

        new = record(30, 26.0, noise=0.005, seed=3)
        judged = app.compare_records(config, s, [new], branch="main", against="main")
        (c,) = judged.comparisons
        assert len(c.baseline_run_ids) == 10  # the window starts at the change point

    code, out, _ = invoke("alerts", "list", "--db", store_url, "--json")
    assert code == 0, out
    (alert,) = json.loads(out)["alerts"]
    assert alert["status"] == "untriaged" and alert["source"] == "history"
    assert alert["run_id"] == changes[0].first_run_after

    code, out, _ = invoke(
        "alerts", "ack", str(alert["id"]), "--db", store_url, "--reason", "on it", env=env
    )
    assert code == 0 and "is now acknowledged" in out
    code, out, _ = invoke(
        "alerts",
        "ignore",
        str(alert["id"]),
        "--as",
        "invalid",
        "--reason",
        "runner swap",
        "--by",
        "ada",
        "--db",
        store_url,
    )
    assert code == 0 and "is now invalid" in out
    code, out, _ = invoke("alerts", "list", "--db", store_url)
    assert out.strip() == "no alerts"  # open ones only, by default

    with open_store(store_url) as s:
        trail = s.triage_events(project="default")
        assert [(e.action, e.state, e.by, e.reason) for e in trail] == [
            ("ignore", "invalid", "ada", "runner swap"),
            ("ack", "acknowledged", "octocat", "on it"),
        ]
        # Honoured: an invalid change point is dropped from history analysis and no longer
        # starts the baseline window.
        assert app.analyze_history(config, s, branch="main", now=NOW) == []
        judged = app.compare_records(config, s, [new], branch="main", against="main")
        assert len(judged.comparisons[0].baseline_run_ids) == 20

    code, _, err = invoke("alerts", "ack", "999", "--db", store_url, "--reason", "x")
    assert code == 2 and "no alert 999" in err


def test_gate_regressions_on_the_base_branch_become_alerts_once(store_url: str) -> None:
    save_all(store_url, _step_series([20.0] * 10))
    head = record(10, 27.0, noise=0.005, seed=3)
    # the PR is slower still than main's regressed head (a PR equal to it would be main's
    # change, not the PR's: inconclusive, see test_noise_model)
    pr = record(11, 34.0, branch="feat", noise=0.005, seed=3)
    save_all(store_url, [head, pr])
    config = config_for(store_url)
    with open_store(store_url) as s:
        on_pr = app.compare(config, s, branch="feat", against="main")
        assert on_pr.verdict is Verdict.REGRESSION
        assert app.record_alerts(config, s, result=on_pr, now=NOW) == []  # PRs do not alert

        on_main = app.compare(config, s, branch="main", against="main")
        assert on_main.verdict is Verdict.REGRESSION
        (alert,) = app.record_alerts(config, s, result=on_main, now=NOW)
        assert (alert.run_id, alert.source, alert.status) == (head.id, "gate", "untriaged")
        assert alert.commit_before == f"{9:040x}" and alert.change_pct is not None
        assert app.record_alerts(config, s, result=on_main, now=NOW) == []


def test_baseline_reset_starts_the_window_at_the_commits_first_run(store_url: str) -> None:
    save_all(store_url, _step_series([20.0] * 12))
    config = config_for(store_url)
    commit = f"{8:040x}"
    code, out, err = invoke(
        "baseline", "reset", "mlp", "--at", commit, "--reason", "new loader", "--db",
        store_url, env={"GITLAB_USER_LOGIN": "gitlab-user"},
    )  # fmt: skip
    assert code == 0, err
    assert "now starts at run mlp-main-008" in out
    with open_store(store_url) as s:
        judged = app.compare(config, s, branch="main", against="main")
        (c,) = judged.comparisons
        assert c.baseline_run_ids == ("mlp-main-008", "mlp-main-009", "mlp-main-010")
        (event,) = s.triage_events(project="default")
        assert (event.action, event.by, event.reason) == ("reset", "gitlab-user", "new loader")
    code, _, err = invoke(
        "baseline", "reset", "mlp", "--at", "deadbeef", "--reason", "x", "--db", store_url
    )
    assert code == 2 and "no run of mlp at commit 'deadbeef'" in err


def test_excluded_runs_leave_history_and_windows(store_url: str) -> None:
    save_all(store_url, _step_series([20.0] * 6))
    code, out, err = invoke(
        "runs", "exclude", "mlp-main-00", "--db", store_url, "--reason", "x", "--by", "me"
    )
    assert code == 2 and "ambiguous" in err  # a prefix must name one run
    code, out, err = invoke(
        "runs", "exclude", "mlp-main-002", "--db", store_url, "--reason", "throttled", "--by", "me"
    )
    assert code == 0, err
    config = config_for(store_url)
    with open_store(store_url) as s:
        ids = {p.run_id for p in s.history(project="default", benchmark="mlp", branch="main")}
        assert "mlp-main-002" not in ids and len(ids) == 5
        (c,) = app.compare(config, s, branch="main", against="main").comparisons
        assert "mlp-main-002" not in c.baseline_run_ids
        assert [(e.action, e.run_id, e.reason) for e in s.triage_events(project="default")] == [
            ("exclude", "mlp-main-002", "throttled")
        ]


# -- retention --------------------------------------------------------------------------------


def _daily(i: int, *, branch: str = "main", level: float = 20.0) -> RunRecord:
    run = record(i, level, branch=branch, noise=0.005, seed=5)
    finding = Finding(rule="r", severity=Severity.INFO, location="x", message="m", suggestion="s")
    return replace(
        run,
        started_at=NOW - timedelta(days=100 - i),
        finished_at=NOW - timedelta(days=100 - i),
        profile=make_profile(),
        findings=(finding,),
    )


def test_prune_keeps_windows_change_points_resets_and_open_alerts(
    store_url: str, raw: Engine
) -> None:
    runs = [_daily(i) for i in range(60)] + [_daily(i, branch="feat") for i in range(5)]
    save_all(store_url, runs)
    config = config_for(store_url, baseline_window=10)
    with open_store(store_url) as s:
        s.reset_baseline(
            project="default", benchmark="mlp", commit=f"{3:040x}", by="a", reason="r", now=NOW,
            branch="main",
        )  # fmt: skip
        alert_runs = [runs[5], runs[6], runs[7]]
        created = s.record_alerts(
            [
                NewAlert(
                    project="default", benchmark="mlp", metric="step_time_ms", run_id=r.id,
                    branch="main", fingerprint_key=r.fingerprint.key(),
                    verdict=Verdict.REGRESSION, source="gate", commit_after=r.git.commit,
                )
                for r in alert_runs
            ],
            now=NOW,
        )  # fmt: skip
        s.triage_alert(
            created[2].id, project="default", state="fixed", action="fixed", by="a",
            reason="r", now=NOW,
        )  # fmt: skip
        change = NewAlert(
            project="default", benchmark="mlp", metric="step_time_ms", run_id=runs[21].id,
            previous_run_id=runs[20].id, branch="main", fingerprint_key=runs[0].fingerprint.key(),
            verdict=Verdict.REGRESSION, source="history", commit_after=runs[21].git.commit,
        )  # fmt: skip
        s.record_alerts([change], now=NOW)
        s.triage_alert(
            s.alerts(project="default", status=["untriaged"])[0].id, project="default",
            state="wontfix", action="ignore", by="a", reason="r", now=NOW,
        )  # fmt: skip

    code, out, err = invoke("db", "prune", "--db", store_url, "--keep-days", "60", "--dry-run")
    assert code == 0, err
    assert count(raw, "runs") == 65
    code, out, err = invoke(
        "db", "prune", "--db", store_url, "--keep-days", "60", "--json", "--suite", "x.toml"
    )
    assert code == 2  # a missing suite is a usage error, and nothing ran
    with open_store(store_url) as s:
        plan = app.prune(config, s, keep_days=60, keep_runs=None, dry_run=False, now=NOW)
    # Runs 0..39 of main and all 5 of feat are older than 60 days (feat's are its window).
    expected_kept = {runs[3].id, runs[5].id, runs[6].id, runs[20].id, runs[21].id}
    doomed = {r.id for r in runs[:40]} - expected_kept
    assert set(plan.deleted_run_ids) == doomed
    assert plan.reasons == {"reset": 1, "alert": 2, "change_point": 2, "baseline": 5}
    with raw.connect() as conn:
        left = set(conn.exec_driver_sql("SELECT id FROM runs").scalars())
    assert left == {r.id for r in runs} - doomed
    assert count(raw, "measurements") == len(left)
    assert count(raw, "profiles") == len(left)
    assert count(raw, "findings") == len(left)
    assert count(raw, "alerts") == 3  # the fixed alert's run went, and its alert with it

    code, out, err = invoke("db", "prune", "--db", store_url, "--keep-runs", "25", "--dry-run")
    assert code == 0, err
    assert "would delete" in out and count(raw, "runs") == len(left)
    code, _, err = invoke("db", "prune", "--db", store_url)
    assert code == 2 and "exactly one of" in err


# -- baselines as code ------------------------------------------------------------------------


def test_baselines_export_stably_import_idempotently_and_gate_without_a_database(
    store_url: str, tmp_path: Path
) -> None:
    source = f"sqlite:///{tmp_path / 'source.db'}"
    save_all(source, _step_series([20.0] * 8))
    other = fingerprint(torch_version="2.12.0")
    save_all(
        source, [replace(r, id=f"x-{r.id}", fingerprint=other) for r in _step_series([5.0] * 4)]
    )
    config = config_for(source)
    out = tmp_path / "baselines"
    with open_store(source) as s:
        first = export_baselines(config, s, out, branch="main")
        bytes_before = {p.name: p.read_bytes() for p in first}
        again = export_baselines(config, s, out, branch="main")
    assert {p.name for p in again} == set(bytes_before) and len(first) == 2
    assert {p.name: p.read_bytes() for p in again} == bytes_before  # diff-friendly: stable
    key = fingerprint().key()
    doc = json.loads((out / f"mlp.{key}.json").read_text())
    assert doc["format_version"] == 1 and doc["fingerprint_key"] == key
    assert [r["id"] for r in doc["runs"]] == [f"mlp-main-{i:03d}" for i in range(8)]
    step = doc["runs"][0]["metrics"]["step_time_ms"]
    assert set(step) == {"unit", "direction", "deterministic", "centre", "n", "centre_se",
                         "repeat_centres"}  # fmt: skip
    assert doc["noise"]["step_time_ms"]["runs"] == 8

    # No database: same verdicts as the store's gate.
    slow = record(20, 27.0, noise=0.005, seed=3)
    same = record(21, 20.0, noise=0.005, seed=3)
    foreign = replace(record(22, 20.0, noise=0.005, seed=3), fingerprint=fingerprint(cpu_cores=64))
    unknown = replace(record(23, 20.0, noise=0.005, seed=3), benchmark="cnn")
    result = gate_from_baseline_files(config, [slow], out)
    assert result.verdict is Verdict.REGRESSION
    verdicts = {
        r.benchmark + str(r.fingerprint.cpu_cores): gate_from_baseline_files(config, [r], out)
        .comparisons[0]
        .verdict
        for r in (same, foreign, unknown)
    }
    assert verdicts == {
        "mlp2": Verdict.UNCHANGED,
        "mlp64": Verdict.INCOMPARABLE,
        "cnn2": Verdict.NO_BASELINE,
    }
    with open_store(source) as s:
        from_store = app.compare_records(config, s, [slow], branch="feat", against="main")
    (a,) = from_store.comparisons
    (b,) = result.comparisons
    assert (a.verdict, a.baseline_run_ids, a.change_pct) == (
        b.verdict,
        b.baseline_run_ids,
        b.change_pct,
    )

    # Import into the parametrised store (SQLite or PostgreSQL), twice.
    with open_store(store_url) as s:
        done = import_baselines(s, out)
        assert (done.files, done.added, done.already_stored) == (2, 12, 0)
        done = import_baselines(s, out)
        assert (done.added, done.already_stored) == (0, 12)
        imported = s.get_run("mlp-main-000")
        assert imported.ci.provider == "baseline-import"
        assert s.count_runs() == 12
        judged = app.compare_records(
            config_for(store_url), s, [slow], branch="feat", against="main"
        )
    assert judged.comparisons[0].verdict is Verdict.REGRESSION
    assert judged.comparisons[0].baseline_run_ids == b.baseline_run_ids

    (out / "broken.json").write_text('{"kind": "perfgate-baseline", "format_version": 2}')
    with pytest.raises(Exception, match="format_version 2"):
        read_baseline(out / "broken.json")


def test_store_fixture_is_the_team_store(store: SqlStore) -> None:
    assert store.count_runs() == 0
    assert store.alerts(project="default") == []
    assert store.baseline_reset(project="default", benchmark="mlp") is None
    with pytest.raises(StoreError, match="prune needs"):
        store.prune(project="default", baseline_window=30, now=datetime.now(UTC))


def test_gate_cli_against_baseline_files_and_alerts_from_a_base_branch_gate(
    tmp_path: Path,
) -> None:
    team = f"sqlite:///{tmp_path / 'team.db'}"
    save_all(team, _step_series([20.0] * 8))
    out = tmp_path / "baselines"
    code, _, err = invoke("baseline", "export", "--db", team, "--out", str(out))
    assert code == 0, err
    # A runner with only its own local store and the committed baseline files.
    local = f"sqlite:///{tmp_path / 'local.db'}"
    save_all(local, [record(30, 27.0, branch="feat", noise=0.005, seed=3)])
    code, out_text, err = invoke(
        "gate", "--db", local, "--branch", "feat", "--baseline-file", str(out), "--json"
    )
    assert code == 1, err
    doc = json.loads(out_text)
    step = next(c for c in doc["comparisons"] if c["metric"] == "step_time_ms")
    assert step["verdict"] == "regression"
    assert len(step["baseline_runs"]) == 8

    # A gate of main against itself (nightly) records its regression as an alert, once.
    save_all(team, [record(40, 27.0, noise=0.005, seed=3)])
    for _ in range(2):
        code, _, err = invoke("gate", "--db", team, "--branch", "main", "--against", "main")
        assert code == 1, err
    code, listed, err = invoke("alerts", "list", "--db", team, "--json")
    assert code == 0, err
    alerts = json.loads(listed)["alerts"]
    assert [(a["benchmark"], a["metric"], a["source"]) for a in alerts] == [
        ("mlp", "step_time_ms", "gate")
    ]
