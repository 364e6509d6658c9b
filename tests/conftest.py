"""pytest fixtures and hooks for the tests; the plain builders are in helpers.py.

The fixtures ``store_url``, ``store`` and ``raw`` run a test on a fresh SQLite file and, when
PERFGATE_TEST_POSTGRES_URL is set, on a fresh PostgreSQL schema. ``cli`` runs ``perfgate``
(helpers.perfgate) in the test's temporary directory.
"""

from __future__ import annotations

import functools
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import PG_ENV, perfgate
from sqlalchemy import Engine, create_engine, make_url

from perfgate.store import SqlStore, open_store


def _libpq_url(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to a fresh, empty database: a SQLite file, or a new PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} is not set")
    psycopg = pytest.importorskip("psycopg")
    schema = f"perfgate_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_libpq_url(base), autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with psycopg.connect(_libpq_url(base), autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    opened = open_store(store_url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def raw(store_url: str) -> Iterator[Engine]:
    """A plain engine on the same database, for looking and tampering behind the store."""
    url = make_url(store_url)
    if url.get_backend_name() == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    engine = create_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def cli(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``cli(*args, db=None, env=None, input=None, spawn=False)``: ``perfgate ARGS`` run in the
    test's ``tmp_path`` (helpers.perfgate: the one way a test runs the command line)."""
    return functools.partial(perfgate, tmp_path)
