"""The baseline store against real SQLite files and, when PERFGATE_TEST_POSTGRES_URL is set,
the same tests against a real PostgreSQL server (each test in a fresh schema)."""

from __future__ import annotations

import random
import sqlite3
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from helpers import (
    RUN_T0,
    count,
    default_measurements,
    is_sqlite,
    make_fingerprint,
    make_measurement,
    make_profile,
    make_run,
    snapshot,
)
from sqlalchemy import Engine, create_engine, inspect

from perfgate.errors import ConfigError, ExitCode, StoreError
from perfgate.models import (
    Direction,
    Finding,
    GitContext,
    RunRecord,
    Severity,
)
from perfgate.store import SqlStore, open_store
from perfgate.store.migrate import head_revision
from perfgate.store.schema import metadata

UTC = timezone.utc
T0 = RUN_T0  # make_run's default start
PERFGATE_TABLES = {
    "alembic_version",
    "alerts",
    "baseline_resets",
    "findings",
    "measurements",
    "perfgate_meta",
    "profiles",
    "rank_profiles",
    "runs",
    "triage_events",
}


# -- round trips ------------------------------------------------------------------------


def test_full_record_round_trips(store: SqlStore) -> None:
    started = datetime(2024, 3, 1, 14, 30, 15, 654321, tzinfo=timezone(timedelta(hours=2)))
    run = replace(
        make_run("a1b2c3d4e5f6", started_at=started, profile=make_profile()),
        git=GitContext(commit="deadbeef", branch="feature/x", base_branch="main", pr_number=17),
    )
    store.save_run(run)

    loaded = store.get_run("a1b2c3d4e5f6")

    assert loaded == run
    assert loaded.started_at.tzinfo == UTC
    assert loaded.started_at == datetime(2024, 3, 1, 12, 30, 15, 654321, tzinfo=UTC)
    assert loaded.fingerprint.key() == run.fingerprint.key()
    assert loaded.measurements[0].repeats == run.measurements[0].repeats
    assert loaded.profile == make_profile()


def test_multi_rank_profiles_and_findings_round_trip(store: SqlStore) -> None:
    ranks = (
        replace(make_profile(), rank=0, collection={"profiler_level": "Level1"}),
        replace(make_profile(), rank=1, peak_reserved_bytes=7 << 20, memory_growth_bytes=-4096),
    )
    found = (
        Finding(
            rule="Byte Alignment Analysis",
            severity=Severity.WARNING,
            location="rank 0",
            message="2 communication operators are not aligned",
            suggestion="align the data size to 512 bytes",
            evidence={"problem_count": 2.0, "total_time_us": 13.5, "note": "from --agent"},
            source="msprof-analyze",
        ),
        Finding(
            "comm_not_overlapped",
            Severity.CRITICAL,
            "step",
            "74% of the step",
            "overlap",
            impact_ms=0.4,
        ),
    )
    run = replace(make_run("ranks-000001", profile=ranks[1]), rank_profiles=ranks, findings=found)
    store.save_run(run)

    loaded = store.get_run("ranks-000001")

    assert loaded == run
    assert [p.rank for p in loaded.rank_profiles] == [0, 1]
    assert loaded.findings[0].evidence["total_time_us"] == 13.5
    assert loaded.findings[1].impact_ms == 0.4  # kept since migration 0006


def test_finding_with_unstorable_evidence_writes_nothing(store: SqlStore, raw: Engine) -> None:
    bad = Finding("r", Severity.INFO, "", "m", "s", evidence={"ratio": float("nan")})
    with pytest.raises(StoreError, match="finding r"):
        store.save_run(replace(make_run("badfnd-00001"), findings=(bad,)))
    assert count(raw, "runs") == 0
    assert count(raw, "findings") == 0


def test_run_without_profile_round_trips(store: SqlStore) -> None:
    run = make_run("nopro-000001", measurements=(), excluded=True)
    store.save_run(run)
    assert store.get_run("nopro-000001") == run


def test_get_run_accepts_a_unique_prefix_of_six_or_more(store: SqlStore) -> None:
    store.save_run(make_run("abcdef111111"))
    store.save_run(make_run("abcdef222222"))

    assert store.get_run("abcdef1").id == "abcdef111111"
    with pytest.raises(StoreError, match="ambiguous"):
        store.get_run("abcdef")
    with pytest.raises(StoreError, match="no run 'abcde'"):
        store.get_run("abcde")
    with pytest.raises(StoreError, match="no run 'zzzzzzzz'"):
        store.get_run("zzzzzzzz")
    with pytest.raises(StoreError) as info:
        store.get_run("abc%__")  # LIKE wildcards are matched literally
    assert info.value.exit_code is ExitCode.USAGE  # a wrong id is the caller's mistake


def test_latest_run_skips_excluded_runs(store: SqlStore) -> None:
    assert store.latest_run(project="demo", benchmark="mlp", branch="main") is None
    store.save_run(make_run("run-old", started_at=T0))
    store.save_run(make_run("run-new", started_at=T0 + timedelta(hours=2), excluded=True))
    store.save_run(make_run("run-mid", started_at=T0 + timedelta(hours=1)))
    store.save_run(make_run("run-other", started_at=T0 + timedelta(hours=3), branch="dev"))

    latest = store.latest_run(project="demo", benchmark="mlp", branch="main")

    assert latest is not None
    assert latest.id == "run-mid"


# -- history ----------------------------------------------------------------------------


FP_A = make_fingerprint()
FP_B = make_fingerprint(torch_version="2.5.0")


def seed_history(store: SqlStore) -> None:
    hour = timedelta(hours=1)
    for i in range(6):
        store.save_run(
            make_run(
                f"main-{i}",
                started_at=T0 + i * hour,
                measurements=default_measurements(scale=1 + i / 10),
                excluded=(i == 3),
            )
        )
    store.save_run(make_run("main-fpb", started_at=T0 + 6 * hour, fingerprint=FP_B))
    store.save_run(make_run("feature-0", started_at=T0 + 2.5 * hour, branch="feature"))
    store.save_run(make_run("cnn-0", started_at=T0 + 2 * hour, benchmark="cnn"))
    store.save_run(make_run("other-project", started_at=T0 + 2 * hour, project="elsewhere"))


def run_ids(points: Sequence[object]) -> list[str]:
    out: list[str] = []
    for p in points:
        run_id = p.run_id  # type: ignore[attr-defined]
        if not out or out[-1] != run_id:
            out.append(run_id)
    return out


def test_history_returns_points_oldest_run_first(store: SqlStore) -> None:
    seed_history(store)

    points = store.history(project="demo", benchmark="mlp", branch="main")

    assert run_ids(points) == ["main-0", "main-1", "main-2", "main-4", "main-5", "main-fpb"]
    assert len(points) == 12
    assert [p.metric for p in points[:2]] == ["step_time_ms", "throughput_samples_per_s"]
    first = points[0]
    expected = default_measurements(scale=1.0)[0]
    assert first.centre == expected.summary.centre
    assert first.repeat_centres == (10.0, 10.625)
    assert first.unit == "ms"
    assert first.direction is Direction.LOWER_IS_BETTER
    assert first.benchmark == "mlp"
    assert first.branch == "main"
    assert first.commit == "c0ffeemain-0"
    assert first.fingerprint_key == FP_A.key()
    assert first.started_at == T0
    assert first.started_at.tzinfo == UTC
    assert points[1].direction is Direction.HIGHER_IS_BETTER


def test_history_limit_counts_runs_not_rows(store: SqlStore) -> None:
    seed_history(store)
    points = store.history(project="demo", benchmark="mlp", branch="main", limit=2)
    assert run_ids(points) == ["main-5", "main-fpb"]
    assert len(points) == 4
    assert store.history(project="demo", benchmark="mlp", branch="main", limit=0) == []


def test_history_filters(store: SqlStore) -> None:
    seed_history(store)

    def ids(**kwargs: object) -> list[str]:
        args: dict[str, object] = {"project": "demo", "benchmark": "mlp", "branch": "main"}
        args.update(kwargs)
        return run_ids(store.history(**args))  # type: ignore[arg-type]

    # strictly before
    assert ids(before=T0 + timedelta(hours=5)) == ["main-0", "main-1", "main-2", "main-4"]
    assert ids(before=T0 + timedelta(hours=5, microseconds=1))[-1] == "main-5"
    assert ids(exclude_run_ids=["main-1", "main-5"]) == ["main-0", "main-2", "main-4", "main-fpb"]
    assert ids(fingerprint_key=FP_A.key()) == ["main-0", "main-1", "main-2", "main-4", "main-5"]
    assert ids(fingerprint_key=FP_B.key()) == ["main-fpb"]
    assert ids(fingerprint_key="0" * 16) == []
    assert ids(branch=None, fingerprint_key=FP_A.key(), limit=4) == [
        "main-2",
        "feature-0",
        "main-4",
        "main-5",
    ]
    assert ids(branch="feature") == ["feature-0"]
    assert ids(benchmark="cnn") == ["cnn-0"]
    assert ids(project="elsewhere") == ["other-project"]
    assert ids(benchmark="nope") == []
    with pytest.raises(StoreError, match="naive"):
        ids(before=datetime(2024, 3, 1))


def test_benchmarks_and_fingerprints(store: SqlStore) -> None:
    seed_history(store)

    assert store.benchmarks(project="demo") == ["cnn", "mlp"]
    assert store.benchmarks(project="demo", branch="feature") == ["mlp"]
    assert store.benchmarks(project="nobody") == []

    fps = store.fingerprints(project="demo", benchmark="mlp", branch="main")
    assert fps == {FP_A.key(): FP_A, FP_B.key(): FP_B}
    assert store.fingerprints(project="demo", benchmark="mlp", branch="feature") == {
        FP_A.key(): FP_A
    }
    assert store.fingerprints(project="demo", benchmark="nope", branch=None) == {}


def test_fingerprints_come_from_the_most_recent_run(store: SqlStore) -> None:
    # Fields outside the key (os_release, perfgate_version) may differ within one key.
    old = make_fingerprint(os_release="6.1.0")
    new = make_fingerprint(os_release="6.1.9", perfgate_version="0.2.0")
    assert old.key() == new.key()
    store.save_run(make_run("fp-new", started_at=T0 + timedelta(hours=1), fingerprint=new))
    store.save_run(make_run("fp-old", started_at=T0, fingerprint=old))

    assert store.fingerprints(project="demo", benchmark="mlp", branch=None) == {new.key(): new}


# -- writing is all or nothing ----------------------------------------------------------


def test_saving_the_same_run_twice_stores_it_once(store: SqlStore, raw: Engine) -> None:
    run = make_run("twice-000001", profile=make_profile())
    store.save_run(run)
    store.save_run(run)
    store.save_run(replace(run, benchmark="changed"))

    assert count(raw, "runs") == 1
    assert count(raw, "measurements") == 2
    assert count(raw, "profiles") == 1
    assert store.get_run(run.id) == run


def test_non_finite_sample_is_refused_and_nothing_is_written(store: SqlStore, raw: Engine) -> None:
    good = default_measurements()[0]
    bad = replace(default_measurements()[1], repeats=((3200.0, float("nan")), (3100.0, 3000.0)))
    run = make_run("nan-0000001", measurements=(good, bad), profile=make_profile())

    with pytest.raises(StoreError, match="throughput_samples_per_s' has a non-finite sample"):
        store.save_run(run)

    assert count(raw, "runs") == 0
    assert count(raw, "measurements") == 0
    with pytest.raises(StoreError, match="no run"):
        store.get_run("nan-0000001")


@pytest.mark.parametrize(
    ("run", "message"),
    [
        (
            make_run(
                "inf-summary",
                measurements=(
                    replace(
                        default_measurements()[0],
                        summary=replace(default_measurements()[0].summary, mad=float("inf")),
                    ),
                ),
            ),
            r"non-finite summary value \(mad\)",
        ),
        (
            make_run("twice-metric", measurements=default_measurements()[:1] * 2),
            "appears more than once",
        ),
        (
            make_run(
                "empty-repeat",
                measurements=(replace(make_measurement("x", [[1.0]]), repeats=((),)),),
            ),
            "repeat without samples",
        ),
        (
            make_run("naive-time", started_at=datetime(2024, 3, 1, 12)),
            "naive datetime",
        ),
        (
            replace(
                make_run("nan-profile"),
                profile=replace(make_profile(), device_busy_fraction=float("nan")),
            ),
            "profile summary holds a non-finite number",
        ),
    ],
    ids=["inf-summary", "duplicate-metric", "empty-repeat", "naive-time", "nan-profile"],
)
def test_invalid_runs_are_refused(tmp_path: Path, run: RunRecord, message: str) -> None:
    # Checked before anything is written, so one backend is enough.
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        with pytest.raises(StoreError, match=message):
            store.save_run(run)
        assert store.latest_run(project="demo", benchmark="mlp", branch="main") is None
        assert store.benchmarks(project="demo") == []


def test_a_failure_half_way_rolls_the_whole_run_back(
    store: SqlStore, raw: Engine, store_url: str
) -> None:
    # A trigger makes the last insert of save_run (the profile) fail inside the database.
    with raw.begin() as conn:
        if is_sqlite(store_url):
            conn.exec_driver_sql(
                "CREATE TRIGGER refuse_profiles BEFORE INSERT ON profiles "
                "BEGIN SELECT RAISE(ABORT, 'profiles refused by test trigger'); END"
            )
        else:
            conn.exec_driver_sql(
                "CREATE FUNCTION refuse_profiles() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'profiles refused by test trigger'; END $$"
            )
            conn.exec_driver_sql(
                "CREATE TRIGGER refuse_profiles BEFORE INSERT ON profiles "
                "FOR EACH ROW EXECUTE FUNCTION refuse_profiles()"
            )

    with pytest.raises(StoreError, match="cannot save run half-000001: .*refused by test trigger"):
        store.save_run(make_run("half-000001", profile=make_profile()))

    assert count(raw, "runs") == 0
    assert count(raw, "measurements") == 0
    store.save_run(make_run("whole-000001"))  # the store still works afterwards
    assert count(raw, "runs") == 1


def test_concurrent_saves_of_one_run_store_it_once(store_url: str, raw: Engine) -> None:
    stores = [open_store(store_url) for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    run = make_run("race-000001", profile=make_profile())

    def save(store: SqlStore) -> None:
        barrier.wait()
        store.save_run(run)

    try:
        with ThreadPoolExecutor(len(stores)) as pool:
            list(pool.map(save, stores))
    finally:
        for s in stores:
            s.close()
    assert count(raw, "runs") == 1
    assert count(raw, "measurements") == 2


# -- opening ----------------------------------------------------------------------------


def test_reopening_an_existing_store_keeps_its_runs(store_url: str) -> None:
    with open_store(store_url) as first:
        first.save_run(make_run("keep-000001"))
    with open_store(store_url) as second:
        assert second.get_run("keep-000001") == make_run("keep-000001")


def test_concurrent_first_opens_create_the_schema_once(store_url: str, raw: Engine) -> None:
    barrier = threading.Barrier(4)

    def open_and_close(_: int) -> str:
        barrier.wait()
        with open_store(store_url) as store:
            return store.url

    with ThreadPoolExecutor(4) as pool:
        assert len(list(pool.map(open_and_close, range(4)))) == 4
    assert count(raw, "perfgate_meta") == 1
    assert count(raw, "alembic_version") == 1


def test_new_store_is_at_head_and_marked_as_perfgate(store: SqlStore, raw: Engine) -> None:
    with raw.connect() as conn:
        assert set(inspect(conn).get_table_names()) == PERFGATE_TABLES
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one() == (
            head_revision()
        )
        marker = conn.exec_driver_sql(
            "SELECT value FROM perfgate_meta WHERE key = 'application'"
        ).scalar_one()
    assert marker == "perfgate"


def test_migrations_build_exactly_the_tables_the_code_queries(store: SqlStore) -> None:
    with store.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, metadata) == []


def test_database_of_another_application_is_refused_untouched(store_url: str, raw: Engine) -> None:
    with raw.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.exec_driver_sql("INSERT INTO users VALUES (1, 'ada')")
    before = snapshot(store_url, raw)

    with pytest.raises(StoreError, match="is not a perfgate store") as info:
        open_store(store_url)

    assert "users" in str(info.value)
    assert snapshot(store_url, raw) == before


def test_alembic_database_of_another_application_is_refused(store_url: str, raw: Engine) -> None:
    with raw.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        conn.exec_driver_sql("INSERT INTO alembic_version VALUES ('0001')")
        conn.exec_driver_sql("CREATE TABLE runs (id TEXT PRIMARY KEY)")
    before = snapshot(store_url, raw)

    with pytest.raises(StoreError, match="is not a perfgate store"):
        open_store(store_url)

    assert snapshot(store_url, raw) == before


def test_store_of_a_newer_schema_is_refused_untouched(store_url: str, raw: Engine) -> None:
    with open_store(store_url) as store:
        store.save_run(make_run("future-00001"))
    with raw.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    raw.dispose()
    before = snapshot(store_url, raw)

    with pytest.raises(StoreError, match="schema revision 9999_from_the_future is newer"):
        open_store(store_url)

    assert snapshot(store_url, raw) == before


def test_sqlite_corrupt_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    junk = random.Random(1234).randbytes(8192)
    path.write_bytes(junk)

    with pytest.raises(StoreError) as info:
        open_store(f"sqlite:///{path}")

    assert str(info.value) == (
        f"{path} is not a SQLite database (file is corrupt or of another kind)"
    )
    assert path.read_bytes() == junk


def test_sqlite_store_uses_wal_and_sets_pragmas_on_every_connection(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    with open_store(f"sqlite:///{path}") as store:
        with sqlite3.connect(path) as other:
            assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        other.close()
        with store.engine.connect() as a, store.engine.connect() as b:
            for conn in (a, b):
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
                assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
                assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL


def test_sqlite_parent_directories_are_created_for_relative_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///nested/dir/perf.db") as store:
        store.save_run(make_run("rel-000001"))
        assert store.url == f"sqlite:///{tmp_path / 'nested' / 'dir' / 'perf.db'}"
    assert (tmp_path / "nested" / "dir" / "perf.db").is_file()


def test_unreachable_postgres_is_one_line_with_password_masked() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(StoreError) as info:
        open_store("postgresql://perfgate:s3cret-pw@127.0.0.1:1/perfgate")

    message = str(info.value)
    assert message.startswith("cannot connect to postgresql+psycopg://perfgate:***@127.0.0.1:1/")
    assert "s3cret-pw" not in message
    assert "\n" not in message


def test_postgres_url_uses_the_psycopg_driver(store: SqlStore, store_url: str) -> None:
    if is_sqlite(store_url):
        pytest.skip("PostgreSQL only")
    assert store.url.startswith("postgresql+psycopg://")
    assert store.engine.dialect.driver == "psycopg"


@pytest.mark.parametrize("url", ["mysql://root@localhost/perf", "not a url"])
def test_unsupported_urls_are_refused(url: str) -> None:
    """A URL perfgate cannot use is a configuration error (exit 2), not an outage (3)."""
    with pytest.raises(ConfigError, match="URL") as info:
        open_store(url)
    assert info.value.exit_code == ExitCode.USAGE


def test_a_store_of_an_older_revision_is_upgraded_and_keeps_its_runs(tmp_path: Path) -> None:
    """A store written at revision 0001 (before steady-state columns) opens, is upgraded to
    head in place, keeps its runs, and takes new ones."""
    from alembic import command

    from perfgate.store.migrate import alembic_config, head_revision

    path = tmp_path / "old.db"
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0001")
        conn.exec_driver_sql(
            "insert into runs values ('r-old', 'default', 'mlp', 'main', 'c1', '', null, 'k',"
            " '{}', '{}', '{}', '2026-01-01 00:00:00', '2026-01-01 00:00:01', 0, '0.1.0')"
        )
    engine.dispose()
    store = open_store(f"sqlite:///{path}")
    try:
        assert store.benchmarks(project="default") == ["mlp"]
        store.save_run(make_run("r-new"))
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        (version,) = conn.execute("select version_num from alembic_version").fetchone()
        columns = {r[1] for r in conn.execute("pragma table_info(measurements)")}
    assert version == head_revision() != "0001"
    assert {"dropped", "centre_se"} <= columns


def test_a_level_stored_in_the_spec_before_revision_0008_is_the_runs_own_after_it(
    tmp_path: Path,
) -> None:
    """Before 0008 the level a run's looks were judged at rode in its spec's
    ``confirm_alpha``: such a store upgrades, its specs load, and the level is the run's
    (``RunRecord.alpha``), the one a later gate judges it at, as before; a spec with
    ``null`` gives none (ALPHA)."""
    from alembic import command

    from perfgate.app import compare
    from perfgate.config import Config
    from perfgate.stats import ALPHA
    from perfgate.store.migrate import alembic_config

    path = tmp_path / "old.db"
    with open_store(f"sqlite:///{path}") as store:
        store.save_runs([make_run("r-looked"), make_run("r-plain", benchmark="cnn")])
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0007")
        for run_id, level in (("r-looked", "0.0125"), ("r-plain", "null")):
            conn.exec_driver_sql(
                "update runs set spec = substr(spec, 1, length(spec) - 1) || "
                f"',\"confirm_alpha\":{level}}}' where id = '{run_id}'"
            )
    engine.dispose()
    with sqlite3.connect(path) as conn:
        (spec,) = conn.execute("select spec from runs where id = 'r-looked'").fetchone()
    assert spec.endswith(',"confirm_alpha":0.0125}')
    with open_store(f"sqlite:///{path}") as store:
        looked, plain = store.get_run("r-looked"), store.get_run("r-plain")
        gate = compare(Config(project="demo"), store, branch="main", against="main")
    assert (looked.alpha, plain.alpha) == (0.0125, None)
    assert looked.spec == make_run("r").spec
    assert {(c.benchmark, c.alpha) for c in gate.comparisons} == {("mlp", 0.0125), ("cnn", ALPHA)}


def test_revisions_read_from_files_match_alembics_view() -> None:
    from alembic.script import ScriptDirectory

    from perfgate.store.migrate import _revisions, alembic_config

    script = ScriptDirectory.from_config(alembic_config())
    known, head = _revisions()
    assert head == script.get_current_head()
    assert known == {rev.revision for rev in script.walk_revisions()}
