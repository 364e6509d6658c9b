""" "The latest run" of a branch is the latest the store recorded (its ``recorded_seq``), not
the latest ``started_at``: a run stamped by a runner whose clock said 2099 does not stay the
branch's latest run, and is judged once, not on every later gate (issue 3.5). A run whose
start is far from the store's clock gets a note when it is saved. Real SQLite and, with
PERFGATE_TEST_POSTGRES_URL, real PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from helpers import fill, perfgate, record
from sqlalchemy import Engine, insert, select

from perfgate.store import SqlStore, open_store
from perfgate.store.schema import runs

UTC = timezone.utc
FUTURE = datetime(2099, 1, 1, tzinfo=UTC)


def _now(i: int) -> datetime:
    return datetime.now(UTC) - timedelta(minutes=30 - i)


def test_a_run_stamped_in_the_future_is_judged_once_not_for_ever(
    tmp_path: Path, store_url: str
) -> None:
    base = [replace(record(i, 10.0), started_at=_now(i)) for i in range(6)]
    slow_from_the_future = replace(record(6, 15.0, branch="feat"), started_at=FUTURE)
    fill(store_url, [*base, slow_from_the_future])
    gate = ("gate", "--branch", "feat", "--against", "main")
    first = perfgate(tmp_path, *gate, db=store_url)
    assert first.returncode == 1, first.stdout + first.stderr  # the slow run is judged

    # a fixed run is recorded after it, stamped by a runner with the right clock
    fill(store_url, [replace(record(7, 10.0, branch="feat"), started_at=_now(7))])
    later = perfgate(tmp_path, *gate, db=store_url)
    assert later.returncode == 0, later.stdout + later.stderr
    assert "1 unchanged in 1 benchmark" in later.stdout, later.stdout


def test_latest_run_is_the_latest_recorded(store: SqlStore) -> None:
    store.save_run(replace(record(1, 10.0, branch="feat"), started_at=FUTURE))
    store.save_run(replace(record(2, 11.0, branch="feat"), started_at=_now(2)))
    store.save_run(replace(record(3, 12.0, branch="other"), started_at=_now(3)))
    latest = store.latest_run(project="default", benchmark="mlp", branch="feat")
    assert latest is not None and latest.id == "mlp-feat-002"
    both = store.latest_runs(project="default", benchmarks=["mlp", "nope"], branch="feat")
    assert {name: run.id for name, run in both.items()} == {"mlp": "mlp-feat-002"}
    # an older start recorded later is still the latest recorded
    store.save_run(replace(record(4, 13.0, branch="feat"), started_at=_now(0) - timedelta(days=3)))
    latest = store.latest_run(project="default", benchmark="mlp", branch="feat")
    assert latest is not None and latest.id == "mlp-feat-004"


def test_saving_a_run_far_from_the_store_clock_says_so(store: SqlStore) -> None:
    assert store.save_run(replace(record(1, 10.0), started_at=_now(29))) == ()
    (ahead,) = store.save_run(replace(record(2, 10.0), started_at=FUTURE))
    assert ahead.startswith("run mlp-main-002 is stamped 2099-01-01 00:00 UTC, ")
    assert "days ahead of the store's clock" in ahead
    (behind,) = store.save_run(replace(record(3, 10.0), started_at=_now(0) - timedelta(days=9)))
    assert "9 days behind the store's clock" in behind
    assert store.save_run(replace(record(2, 10.0), started_at=FUTURE)) == ()  # already stored


def test_a_batch_notes_only_its_run_far_from_the_clock(tmp_path: Path, store_url: str) -> None:
    fill(store_url, [replace(record(i, 10.0), started_at=_now(i)) for i in range(3)])
    store = open_store(store_url)
    try:
        notes = store.save_runs(
            [
                replace(record(8, 10.0, branch="feat"), started_at=FUTURE),
                replace(record(9, 10.0, branch="feat"), started_at=_now(9)),
            ]
        )
    finally:
        store.close()
    assert len(notes) == 1 and "mlp-feat-008" in notes[0]


def test_the_migration_numbers_existing_runs_by_their_start(store_url: str, raw: Engine) -> None:
    """A store at revision 0006 (before the sequence) upgraded: its runs are numbered in the
    order the old query took them (start, then id), and new runs come after them."""
    from alembic import command

    from perfgate.store.migrate import alembic_config

    with raw.begin() as conn:
        command.upgrade(alembic_config(conn), "0006")
        for run_id, day in (("r-b", 3), ("r-a", 1), ("r-c", 3), ("r-future", 9000)):
            started = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=day)
            conn.execute(
                insert(runs).values(
                    id=run_id,
                    project="default",
                    benchmark="mlp",
                    branch="main",
                    commit="c1",
                    base_branch="",
                    pr_number=None,
                    fingerprint_key="k",
                    fingerprint="{}",
                    spec="{}",
                    ci="{}",
                    started_at=started,
                    finished_at=started,
                    excluded=False,
                    perfgate_version="0.1.0",
                    paired_with=None,
                )
            )
    store = open_store(store_url)
    try:
        store.save_run(replace(record(1, 10.0), id="r-new", started_at=_now(1)))
    finally:
        store.close()
    with raw.connect() as conn:
        order = conn.execute(select(runs.c.id).order_by(runs.c.recorded_seq)).scalars().all()
        numbers = conn.execute(select(runs.c.recorded_seq).order_by(runs.c.recorded_seq)).all()
    assert order == ["r-a", "r-b", "r-c", "r-future", "r-new"]
    assert [n for (n,) in numbers] == [1, 2, 3, 4, 5]
