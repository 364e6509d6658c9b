"""Output files survive a failed write, read-only stores can be read, credentials stay hidden.

* Every output file is replaced atomically (``perfgate.app.files.write_atomic``): a real
  file-size limit (``RLIMIT_FSIZE``, with ``SIGXFSZ`` ignored so writes fail with EFBIG) or a
  really full disk (a small tmpfs, where mounting is permitted) fails the command with one
  line, and the previous file is byte-identical.
* A store on a read-only mount is opened ``mode=ro`` (``immutable`` in WAL mode, where the
  ``-shm`` file cannot be created): ``history``, ``gate`` and ``compare`` work on it.
* A password with an unencoded ``@`` (and ``:`` or ``/``) is masked whole, in messages
  and when the URL does not parse at all; a Pushgateway URL with credentials
  sends them as HTTP basic auth and never prints them.
"""

from __future__ import annotations

import base64
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import helpers
import pytest
from helpers import fill, record

from perfgate.app.files import write_atomic
from perfgate.exporters.prometheus import split_credentials
from perfgate.models import BenchmarkSpec, RunRecord
from perfgate.store.connect import make_target, mask_url, parse_url

LIMIT = 40_000
"""The file-size limit: above SQLite's 32 KiB ``-shm`` index, below the files written."""


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "CI_", "GITLAB", "PERFGATE_"))
    }
    env.pop("CI", None)
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "ALL_PROXY"):
        env.pop(name, None)
    return env


def _file_size_limit(nbytes: int) -> Callable[[], None]:
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))

    return limit


def perfgate(
    cwd: Path, *args: str, file_size_limit: int | None = None
) -> subprocess.CompletedProcess[str]:
    # A process of its own, not helpers.perfgate: the file-size limit (RLIMIT_FSIZE) is set
    # in the child before it starts and must not bind the test's own process.
    return subprocess.run(
        [sys.executable, "-m", "perfgate", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        preexec_fn=None if file_size_limit is None else _file_size_limit(file_size_limit),
    )


def _padded(r: RunRecord, pad: int = 60_000) -> RunRecord:
    """``r`` with a spec big enough that its baseline file is larger than :data:`LIMIT`."""
    return replace(
        r, spec=BenchmarkSpec(name=r.benchmark, workload="mlp", params={"pad": "x" * pad})
    )


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def _no_temp_files(directory: Path) -> None:
    assert not [p for p in directory.rglob("*.tmp")], "a temporary file was left behind"


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "Exception in thread" not in stderr
    return lines[0]


# --- the helper --------------------------------------------------------------------------------


def test_write_atomic_replaces_keeping_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    assert write_atomic(path, "first\n") == 6
    path.chmod(0o640)
    write_atomic(path, b"second\n")
    assert path.read_bytes() == b"second\n"
    assert path.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_write_atomic_failure_names_the_target(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "out.json"
    with pytest.raises(FileNotFoundError) as caught:
        write_atomic(missing, "x")
    assert caught.value.filename == str(missing)


# --- a real file-size limit --------------------------------------------------------------------


@pytest.fixture
def padded_store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'store' / 's.db'}"
    fill(url, [_padded(record(i, 20.0)) for i in range(5)])
    return url


def test_baseline_export_past_the_file_size_limit_keeps_the_previous_file(
    tmp_path: Path, padded_store: str
) -> None:
    out = tmp_path / "baselines"
    first = perfgate(tmp_path, "baseline", "export", "--db", padded_store, "--out", str(out))
    assert first.returncode == 0, first.stderr
    (path,) = out.glob("*.json")
    before = path.read_bytes()
    assert len(before) > LIMIT
    fill(padded_store, [_padded(record(5, 20.5))])  # the next export differs

    failed = perfgate(
        tmp_path,
        "baseline",
        "export",
        "--db",
        padded_store,
        "--out",
        str(out),
        file_size_limit=LIMIT,
    )
    assert failed.returncode == 3, failed.stderr
    line = _one_line(failed.stderr)
    assert line.startswith(f"perfgate: error: cannot write {path}: "), line
    assert "File too large" in line
    assert path.read_bytes() == before
    _no_temp_files(out)

    again = perfgate(tmp_path, "baseline", "export", "--db", padded_store, "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert path.read_bytes() != before


def test_html_site_past_the_file_size_limit_keeps_the_previous_site(
    tmp_path: Path, padded_store: str
) -> None:
    pytest.importorskip("plotly")
    site = tmp_path / "site"
    first = perfgate(tmp_path, "report", "--html", str(site), "--db", padded_store)
    assert first.returncode == 0, first.stderr
    before = _snapshot(site)
    assert len(before["plotly.min.js"]) > LIMIT

    failed = perfgate(
        tmp_path,
        "report",
        "--html",
        str(site),
        "--db",
        padded_store,
        file_size_limit=LIMIT,
    )
    assert failed.returncode == 3, failed.stderr
    line = _one_line(failed.stderr)
    assert line.startswith("perfgate: error: cannot write "), line
    after = _snapshot(site)
    # every page of the previous report is still there and whole; the entry page and the
    # script it loads are exactly as they were
    assert set(after) == set(before)
    assert after["index.html"] == before["index.html"]
    assert after["plotly.min.js"] == before["plotly.min.js"]
    for name, data in after.items():
        if name.endswith(".html"):
            assert data.rstrip().endswith(b"</html>"), name
    _no_temp_files(site)


# --- a really full disk (a small tmpfs) ----------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, unmounted afterwards; skipped where mounting is not permitted."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or 'not permitted'}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill_up(disk: Path) -> None:
    """Write a filler file until the tmpfs is full."""
    with open(disk / f"filler-{uuid.uuid4().hex}", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'store' / 's.db'}"
    runs = [record(i, 20.0) for i in range(6)]
    runs += [record(10, 40.0, branch="feat"), record(12, 22.0)]  # a regression on each
    fill(url, runs)
    return url


def test_report_dir_on_a_full_disk_keeps_the_previous_report(
    tmp_path: Path, store: str, small_disk: Path
) -> None:
    report = small_disk / "report"
    args = ("gate", "--branch", "feat", "--db", store, "--report-dir", str(report))
    first = perfgate(tmp_path, *args)
    assert first.returncode == 1, first.stderr  # the regression on feat
    before = _snapshot(report)
    assert set(before) == {"report.md", "target.json"}
    fill(store, [record(11, 44.0, branch="feat")])  # the next report differs
    _fill_up(small_disk)

    failed = perfgate(tmp_path, *args)
    # delivery problems are warnings: the verdict (and its exit code) stands
    assert failed.returncode == 1, failed.stderr
    (warning,) = [line for line in failed.stderr.splitlines() if "warning" in line]
    assert "cannot write" in warning and "No space left on device" in warning, warning
    assert "Traceback" not in failed.stderr
    assert _snapshot(report) == before
    _no_temp_files(report)


def test_tensorboard_reexport_on_a_full_disk_keeps_the_previous_events(
    tmp_path: Path, store: str, small_disk: Path
) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = small_disk / "tb"
    args = ("export", "tensorboard", str(logdir), "--db", store, "--benchmark", "mlp")
    first = perfgate(tmp_path, *args)
    assert first.returncode == 0, first.stderr
    before = _snapshot(logdir)
    assert len(before) == 2  # main and feat
    fill(store, [record(13, 21.0)])
    _fill_up(small_disk)

    failed = perfgate(tmp_path, *args)
    assert failed.returncode == 3, failed.stderr
    line = _one_line(failed.stderr)
    assert line.startswith("perfgate: error: cannot write ") and "No space left" in line, line
    assert _snapshot(logdir) == before
    _no_temp_files(logdir)
    (main,) = [p for p in before if p.startswith("mlp/main/")]
    events = EventAccumulator(str((logdir / main).parent))
    events.Reload()
    assert len(events.Scalars("metrics/step_time_ms")) == 7

    for filler in small_disk.glob("filler-*"):
        filler.unlink()
    again = perfgate(tmp_path, *args)
    assert again.returncode == 0, again.stderr
    files = sorted((logdir / main).parent.iterdir())
    assert len(files) == 1  # the new file replaced the old one
    events = EventAccumulator(str((logdir / main).parent))
    events.Reload()
    assert len(events.Scalars("metrics/step_time_ms")) == 8


# --- read-only stores -----------------------------------------------------------------------------


@pytest.fixture(params=["wal", "delete"])
def read_only_store(request: pytest.FixtureRequest, tmp_path: Path, store: str) -> Iterator[str]:
    """The store copied onto a tmpfs that is then remounted read-only (root can write
    through ``chmod``, not through a read-only mount); in WAL or rollback-journal mode."""
    where = tmp_path / "ro"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or 'not permitted'}")
    try:
        source = Path(store.removeprefix("sqlite:///"))
        target = where / "s.db"
        shutil.copyfile(source, target)
        conn = sqlite3.connect(target)
        try:
            mode = conn.execute(f"PRAGMA journal_mode = {request.param.upper()}").fetchone()[0]
        finally:
            conn.close()
        assert mode == request.param
        remount = subprocess.run(
            ["mount", "-o", "remount,ro", str(where)], capture_output=True, check=False
        )
        if remount.returncode != 0:
            pytest.skip("cannot remount the tmpfs read-only here")
        yield f"sqlite:///{target}"
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_reading_commands_work_on_a_read_only_store(tmp_path: Path, read_only_store: str) -> None:
    store_dir = Path(read_only_store.removeprefix("sqlite:///")).parent
    before = _snapshot(store_dir)
    assert make_target(read_only_store, create=False).read_only

    history = perfgate(tmp_path, "history", "--benchmark", "mlp", "--db", read_only_store)
    assert history.returncode == 0, history.stderr
    assert "mlp-feat-010" in history.stdout

    gate = perfgate(tmp_path, "gate", "--branch", "feat", "--db", read_only_store)
    assert gate.returncode == 1, gate.stderr  # the regression, not an infrastructure error
    assert "REGRESSION" in gate.stdout

    compare = perfgate(tmp_path, "compare", "--branch", "main", "--db", read_only_store)
    assert compare.returncode == 0, compare.stderr
    assert "REGRESSION" in compare.stdout

    prom = perfgate(tmp_path, "export", "prometheus", "--db", read_only_store)
    assert prom.returncode == 0, prom.stderr
    assert _snapshot(store_dir) == before


def test_gate_with_a_report_on_a_read_only_store_warns_about_alerts(
    tmp_path: Path, read_only_store: str
) -> None:
    """On the base branch the gate records its regressions as alerts; on a read-only store
    it says it cannot, and still gives its verdict and writes its report."""
    report = tmp_path / "report"
    args = ("gate", "--branch", "main", "--db", read_only_store, "--report-dir", str(report))
    gate = perfgate(tmp_path, *args)
    assert gate.returncode == 1, gate.stderr
    assert (report / "report.md").is_file()
    (warning,) = [line for line in gate.stderr.splitlines() if "warning" in line]
    assert "read-only" in warning and "not recorded as alerts" in warning, warning
    assert "Traceback" not in gate.stderr


def test_writing_to_a_read_only_store_is_one_line(tmp_path: Path, read_only_store: str) -> None:
    exported = perfgate(
        tmp_path, "baseline", "export", "--db", read_only_store, "--out", str(tmp_path / "b")
    )
    assert exported.returncode == 0, exported.stderr
    exclude = perfgate(
        tmp_path, "runs", "exclude", "mlp-main-001", "--reason", "noisy", "--db", read_only_store
    )
    assert exclude.returncode == 3, exclude.stderr
    line = _one_line(exclude.stderr)
    assert line.startswith("perfgate: error: ") and "readonly database" in line, line


# --- credentials ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "postgresql://postgres:se@cret@127.0.0.1:5432/test",
        "postgresql://postgres:a@b@c@127.0.0.1/test",
        "postgresql+psycopg://postgres:se@cret@127.0.0.1:5432/test?sslmode=disable",
    ],
)
def test_password_with_an_unencoded_at_is_masked_whole(raw: str) -> None:
    masked = mask_url(raw)
    assert "***@127.0.0.1" in masked
    assert "cret" not in masked and "@b" not in masked
    target = make_target(raw)
    try:
        assert target.engine.url.host == "127.0.0.1"
        assert "cret" not in target.url and "cret" not in target.where
    finally:
        target.engine.dispose()


def test_unreachable_postgres_error_never_shows_the_password() -> None:
    pytest.importorskip("psycopg")
    db = "postgresql://postgres:se@cret@127.0.0.1:9/test?connect_timeout=5"
    result = helpers.perfgate(None, "history", "--db", db)
    assert result.returncode == 3, result.stdout + result.stderr
    line = _one_line(result.stderr)
    assert "127.0.0.1" in line and "cret" not in line and "se@" not in line, line


SECRET = "Pa@ss:wo/rd9Z"
"""A password with an unencoded ``@``, ``:`` and ``/``: every fragment of it must stay hidden."""

_FRAGMENTS = ("Pa@", "ss:wo", "wo/rd", "rd9Z")


def _commands(db: str) -> list[list[str]]:
    trace = str(Path(__file__).parent / "data" / "torch_trace" / "mlp_cpu.pt.trace.json.gz")
    return [
        ["db", "status", "--db", db],
        ["ingest", trace, "--benchmark", "b", "--branch", "feat", "--db", db],
        ["gate", "--branch", "feat", "--db", db],
    ]


@pytest.mark.parametrize(
    "db",
    [
        f"postgresql://postgres:{SECRET}@127.0.0.1:9/test?connect_timeout=5",  # unreachable
        f"postgresql://postgres:{SECRET}@127.0.0.1:port/test",  # does not parse
        f"postgres:{SECRET}@127.0.0.1/test",  # no scheme
        f"mysql://postgres:{SECRET}@127.0.0.1/test",  # unsupported
    ],
)
def test_a_password_with_at_colon_and_slash_never_leaks(tmp_path: Path, db: str) -> None:
    pytest.importorskip("psycopg")
    for args in _commands(db):
        result = helpers.perfgate(None, *args)
        assert result.returncode in (2, 3), (args, result.stdout + result.stderr)
        line = _one_line(result.stderr)
        assert line.startswith("perfgate: error: ") and "***" in line, line
        for fragment in _FRAGMENTS:
            assert fragment not in result.stdout + result.stderr, (args, line)


def test_a_password_with_at_colon_and_slash_is_read_as_the_driver_reads_it() -> None:
    url = mask_url(f"postgresql://postgres:{SECRET}@db.example:5432/test")
    assert url == "postgresql://postgres:***@db.example:5432/test"
    target = make_target(f"postgresql://postgres:{SECRET}@db.example:5432/test")
    try:
        assert target.engine.url.password == SECRET
        assert target.engine.url.host == "db.example" and target.engine.url.port == 5432
    finally:
        target.engine.dispose()
    # an @ in a path (no user name can hold a /) and in a SQLite path stays where it is
    assert parse_url("postgresql://host/db@x").database == "db@x"
    assert parse_url("sqlite:////tmp/a@b/store.db").database == "/tmp/a@b/store.db"


def test_a_password_with_at_colon_and_slash_connects_to_postgres(tmp_path: Path) -> None:
    base = os.environ.get("PERFGATE_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("PERFGATE_TEST_POSTGRES_URL is not set")
    pytest.importorskip("psycopg")
    from sqlalchemy import make_url

    url = make_url(base)
    if url.password:
        pytest.skip("the test server takes a password; this test needs trust authentication")
    port = f":{url.port}" if url.port else ""
    db = f"postgresql://{url.username}:{SECRET}@{url.host}{port}/{url.database}"
    result = helpers.perfgate(None, "db", "status", "--db", db)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{url.username}:***@{url.host}" in result.stdout, result.stdout
    for fragment in _FRAGMENTS:
        assert fragment not in result.stdout + result.stderr, result.stdout + result.stderr


class _Gateway(BaseHTTPRequestHandler):
    received: list[tuple[str, str, str | None]] = []

    def _record(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.received.append((self.command, self.path, self.headers.get("Authorization")))
        if self.headers.get("Authorization") is None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="pushgateway"')
        else:
            self.send_response(200)
        self.end_headers()

    do_PUT = do_POST = _record

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def gateway() -> Iterator[tuple[int, list[tuple[str, str, str | None]]]]:
    received: list[tuple[str, str, str | None]] = []
    handler = type("Handler", (_Gateway,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], received
    finally:
        server.shutdown()
        server.server_close()


def test_split_credentials_takes_the_last_at_of_the_authority() -> None:
    assert split_credentials("http://h:9091") == ("http://h:9091", None, None)
    assert split_credentials("http://u:p@ss@h:9091/x?a=b") == ("http://h:9091/x?a=b", "u", "p@ss")
    assert split_credentials("https://u:p%2F@h") == ("https://h", "u", "p/")
    assert split_credentials("http://h/a@b") == ("http://h/a@b", None, None)


def test_push_gateway_credentials_go_as_basic_auth(
    tmp_path: Path,
    store: str,
    gateway: tuple[int, list[tuple[str, str, str | None]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("prometheus_client")
    for name in ("http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    port, received = gateway
    url = f"http://pusher:se@cret@127.0.0.1:{port}"
    result = helpers.perfgate(
        None, "export", "prometheus", "--db", store, "--push-gateway", url, "--job", "nightly"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    ((method, path, auth),) = received
    assert (method, path) == ("PUT", "/metrics/job/nightly")
    assert auth == "Basic " + base64.b64encode(b"pusher:se@cret").decode()
    assert "cret" not in result.stderr and f"http://127.0.0.1:{port}" in result.stderr


def test_push_gateway_failure_with_credentials_never_shows_them(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("prometheus_client")
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    url = "http://pusher:se@cret@127.0.0.1:9"
    result = helpers.perfgate(None, "export", "prometheus", "--db", store, "--push-gateway", url)
    assert result.returncode == 3
    line = _one_line(result.stderr)
    assert "push to the Pushgateway http://127.0.0.1:9 failed" in line
    assert "cret" not in line and "pusher" not in line
