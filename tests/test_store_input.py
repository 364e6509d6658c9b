"""Store URLs and store commands given what a newcomer gives them: a password in the URL's
query, a SQLite URL without a file or with query arguments, a read-only command on a store
that is not there, a cutoff before any date, a run of another project. Each is one line and
the right exit code, and leaves the store (or the directory) as it was.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers import PG_ENV, count, make_run, perfgate, snapshot
from sqlalchemy import Engine
from sqlalchemy.engine import URL, make_url

from perfgate.models import NewAlert, Verdict
from perfgate.store import open_store
from perfgate.store.connect import mask_url

UTC = timezone.utc
NOW = datetime(2026, 6, 1, tzinfo=UTC)
SECRET = "s3cr3tPW-q9"

METRICS = {
    "metrics": [
        {
            "name": "tokens_per_s",
            "values": [1500, 1490, 1502],
            "unit": "1/s",
            "direction": "higher",
        }
    ]
}


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("perfgate: error: "), stderr
    return lines[0]


def metrics_file(directory: Path) -> Path:
    path = directory / "m.json"
    path.write_text(json.dumps(METRICS))
    return path


# -- a password in the query -------------------------------------------------------------------


def _missing_database(query_only: bool) -> str:
    """A URL to a database the test server does not have, with ``SECRET`` as the password
    in its query (the host and user too with ``query_only``)."""
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} is not set")
    pytest.importorskip("psycopg")
    url = make_url(base).set(drivername="postgresql", database=f"nosuch_{uuid.uuid4().hex[:8]}")
    if query_only:
        query = {"host": url.host or "127.0.0.1", "user": url.username or "postgres"}
        query |= {"port": str(url.port)} if url.port else {}
        url = URL.create("postgresql", database=url.database, query=query)
    return url.update_query_dict({"password": SECRET}).render_as_string(hide_password=False)


@pytest.mark.parametrize("query_only", [False, True], ids=["userinfo", "query-only"])
def test_a_password_in_the_query_never_shows_when_the_connection_fails(query_only: bool) -> None:
    """It printed "cannot connect to postgresql+psycopg://...?password=s3cr3tPW: ..."."""
    db = _missing_database(query_only)
    assert SECRET in db
    for args in (["alerts", "list"], ["db", "status"], ["history"]):
        result = perfgate(None, *args, "--db", db)
        assert result.returncode == 3, (args, result.stdout + result.stderr)
        line = one_line(result.stderr)
        assert "cannot connect to postgresql+psycopg://" in line and "password=***" in line, line
        assert SECRET not in result.stdout + result.stderr, line


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (
            f"postgresql://u@h/db?sslmode=require&password={SECRET}&sslpassword={SECRET}",
            "postgresql://u@h/db?password=***&sslmode=require&sslpassword=***",
        ),
        (f"postgresql://h/db?PassWord={SECRET}", "postgresql://h/db?PassWord=***"),
        (
            f"postgresql://h/db?oauth_client_secret={SECRET}&passfile=/p",
            "postgresql://h/db?oauth_client_secret=***&passfile=%2Fp",
        ),
        # does not parse (a port that is no number): the query is masked all the same
        (
            f"postgresql://u@h:port/db?password={SECRET}&x=1",
            "postgresql://***@h:port/db?password=***&x=1",
        ),
        (f"postgresql://h:port/db?password={SECRET}", "postgresql://***"),
        # a libpq key=value string, which no URL parser reads, was shown as given
        (
            f"host=127.0.0.1 user=alice password={SECRET} sslpassword='{SECRET} x' dbname=x",
            "host=127.0.0.1 user=alice password=*** sslpassword=*** dbname=x",
        ),
    ],
)
def test_every_secret_query_parameter_is_masked(raw: str, shown: str) -> None:
    assert mask_url(raw) == shown


# -- a SQLite URL without a file, or with query arguments ---------------------------------------


@pytest.mark.parametrize("db", ["sqlite://", "sqlite:///", "sqlite:///:memory:"])
def test_an_in_memory_sqlite_url_is_refused_not_recorded_into(tmp_path: Path, db: str) -> None:
    """It printed "recorded run ...", exit 0, and kept nothing; ``db upgrade`` said
    "already at revision None"."""
    data = metrics_file(tmp_path)
    commands = [
        ["ingest", str(data), "--benchmark", "x", "--branch", "main"],
        ["db", "upgrade"],
        ["db", "status"],
        ["alerts", "list"],
    ]
    for args in commands:
        result = perfgate(tmp_path, *args, "--db", db)
        assert result.returncode == 2, (args, result.stdout + result.stderr)
        line = one_line(result.stderr)
        assert "no database file path (an in-memory store would keep nothing)" in line, line
        assert "recorded" not in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


@pytest.mark.parametrize(
    "query", ["mode=ro", "uri=true&mode=memory", "timeout=5", "isolation_level=SERIALIZABLE"]
)
def test_a_sqlite_url_with_query_arguments_is_refused_in_one_line(
    tmp_path: Path, query: str
) -> None:
    """``?mode=ro`` printed SQLAlchemy's SAWarning with a source line and was ignored;
    ``uri=true&mode=memory`` would keep nothing."""
    db = f"sqlite:///{tmp_path / 'a.db'}?{query}"
    for args in (["db", "status"], ["db", "upgrade"]):
        result = perfgate(tmp_path, *args, "--db", db)
        assert result.returncode == 2, (args, result.stdout + result.stderr)
        line = one_line(result.stderr)
        assert "a SQLite store URL takes no query arguments" in line, line
    assert not (tmp_path / "a.db").exists()


def test_a_sqlite_query_argument_prints_no_warning_from_a_real_process(tmp_path: Path) -> None:
    """The installed command, warnings as a user sees them (no pytest filter)."""
    db = f"sqlite:///{tmp_path / 'a.db'}?mode=ro"
    result = perfgate(tmp_path, "db", "status", "--db", db, spawn=True)
    assert result.returncode == 2, result.stdout + result.stderr
    line = one_line(result.stderr)
    assert line == (
        f"perfgate: error: sqlite:///{tmp_path / 'a.db'}: a SQLite store URL takes no query "
        "arguments (mode); perfgate sets the connection's options itself: give sqlite:///PATH"
    )
    assert "Warning" not in result.stderr and "create_engine" not in result.stderr


# -- db status reads only ----------------------------------------------------------------------


def test_db_status_on_no_store_creates_no_directory_and_no_file(tmp_path: Path) -> None:
    """It left ``.perfgate/`` behind, and ``no/such/dir/`` for ``sqlite:///no/such/dir/x.db``."""
    result = perfgate(tmp_path, "db", "status", "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)["store"]
    assert status["state"] == "empty" and status["url"].endswith("/.perfgate/perfgate.db")
    result = perfgate(tmp_path, "db", "status", "--db", "sqlite:///no/such/dir/x.db")
    assert result.returncode == 0, result.stderr
    assert "no/such/dir/x.db" in result.stdout
    absolute = tmp_path / "abs" / "x.db"
    result = perfgate(tmp_path, "db", "status", "--db", f"sqlite:///{absolute}")
    assert result.returncode == 0, result.stderr
    assert list(tmp_path.iterdir()) == []
    # what writes still makes the directories it needs
    result = perfgate(tmp_path, "db", "upgrade", "--db", "sqlite:///no/such/dir/x.db")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "no" / "such" / "dir" / "x.db").is_file()


# -- prune with a cutoff before any date -------------------------------------------------------


def _old_runs(store_url: str) -> None:
    """Six runs of project ``default``, a day apart, the newest 2995 days before ``NOW``."""
    with open_store(store_url) as store:
        for i in range(6):
            at = NOW - timedelta(days=3000 - i)
            store.save_run(make_run(f"old-{i:04d}", project="default", started_at=at))


@pytest.mark.parametrize("days", ["1000000", "999999999", "99999999999"])
def test_prune_with_a_cutoff_before_any_date_keeps_every_run(
    store_url: str, raw: Engine, days: str
) -> None:
    """It was "internal error: OverflowError: date value out of range", exit 4."""
    _old_runs(store_url)
    for dry in (["--dry-run"], []):
        result = perfgate(None, "db", "prune", "--keep-days", days, "--json", *dry, db=store_url)
        assert result.returncode == 0, result.stdout + result.stderr
        plan = json.loads(result.stdout)
        deleted = plan["would_delete" if dry else "deleted"]
        assert deleted == [] and plan["candidates"] == 0, plan
        assert count(raw, "runs") == 6


def test_prune_dry_run_and_prune_agree_around_the_earliest_date(store_url: str) -> None:
    """A cutoff a day after the earliest date a datetime holds, at it and before it: no run
    is that old; a cutoff among the runs: the dry run names what the prune deletes."""
    _old_runs(store_url)
    span = (NOW - datetime.min.replace(tzinfo=UTC)).days
    with open_store(store_url) as store:
        for keep_days, doomed in [(span - 1, ()), (span, ()), (span + 1, ()), (2997, (0, 1, 2))]:
            kwargs = dict(project="default", baseline_window=2, now=NOW, keep_days=keep_days)
            dry = store.prune(**kwargs, dry_run=True)  # type: ignore[arg-type]
            assert store.count_runs() == 6
            real = store.prune(**kwargs)  # type: ignore[arg-type]
            expected = tuple(f"old-{i:04d}" for i in doomed)
            assert sorted(dry.deleted_run_ids) == sorted(real.deleted_run_ids), keep_days
            assert sorted(real.deleted_run_ids) == list(expected), keep_days
            assert dry.candidates == real.candidates == len(doomed), keep_days
        assert store.count_runs() == 3


# -- runs exclude honours --project ------------------------------------------------------------


def test_runs_exclude_of_a_run_of_another_project_is_refused_and_writes_nothing(
    store_url: str, raw: Engine
) -> None:
    """It excluded the default project's run, exit 0."""
    with open_store(store_url) as store:
        store.save_run(make_run("3f9c2a1b0000", project="default"))
    before = snapshot(store_url, raw)
    for run_id in ("3f9c2a1b0000", "3f9c2a"):
        result = perfgate(
            None, "runs", "exclude", run_id, "--project", "someone-else", "--reason", "oops",
            db=store_url,
        )  # fmt: skip
        assert result.returncode == 2, result.stdout + result.stderr
        line = one_line(result.stderr)
        assert f"no run {run_id!r} in project 'someone-else'" in line, line
    assert snapshot(store_url, raw) == before
    result = perfgate(
        None, "runs", "exclude", "3f9c2a", "--project", "default", "--reason", "throttled",
        db=store_url,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    with open_store(store_url) as store:
        assert store.get_run("3f9c2a1b0000").excluded
        assert [e.run_id for e in store.triage_events(project="default")] == ["3f9c2a1b0000"]
        assert store.triage_events(project="someone-else") == []


# -- what prune deletes, as docs/stores.md says it --------------------------------------------


def test_prune_deletes_the_closed_alerts_of_its_runs_and_the_trail_keeps_its_lines(
    store_url: str, raw: Engine
) -> None:
    """docs/stores.md listed measurements, profiles and findings only; the alerts of the
    pruned runs went too."""
    _old_runs(store_url)
    with open_store(store_url) as store:
        found = [
            NewAlert(
                project="default", benchmark="mlp", metric="step_time_ms", run_id=f"old-{i:04d}",
                branch="main", fingerprint_key="k", verdict=Verdict.REGRESSION, source="gate",
                commit_after="c",
            )
            for i in (0, 1)
        ]  # fmt: skip
        closed, still_open = store.record_alerts(found, now=NOW)
        store.triage_alert(
            closed.id, project="default", state="fixed", action="fixed", by="a", reason="r",
            now=NOW,
        )  # fmt: skip
        plan = store.prune(project="default", baseline_window=2, now=NOW, keep_days=2997)
        assert sorted(plan.deleted_run_ids) == ["old-0000", "old-0002"]  # old-0001: open alert
        assert [a.id for a in store.alerts(project="default")] == [still_open.id]
        (line,) = store.triage_events(project="default")
        assert (line.action, line.run_id, line.alert_id) == ("fixed", "old-0000", None)
    assert count(raw, "alerts") == 1

    docs = Path(__file__).parents[1] / "docs" / "stores.md"
    retention = docs.read_text().split("* **Retention**")[1].split("* **")[0]
    assert "findings and alerts" in retention and "triage trail keeps its lines" in retention
