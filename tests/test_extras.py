"""A command whose optional extra is not installed exits 2 with one line naming the extra
(``pip install 'perfgate[export]'``), never an internal error or a traceback.

Each case runs the real CLI in a fresh interpreter with the extra's top-level module set to
``None`` in ``sys.modules`` (so importing it raises ``ImportError``, as when it is absent).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import fill, record

from perfgate.errors import ExitCode, MissingExtra, require

# Blocks the comma-separated modules in argv[1], then runs `perfgate` with the rest of argv.
BLOCKED_CLI = """
import runpy, sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
sys.argv = ["perfgate", *sys.argv[2:]]
runpy.run_module("perfgate", run_name="__main__", alter_sys=True)
"""


def perfgate_without(
    blocked: str, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERFGATE_")}
    return subprocess.run(
        [sys.executable, "-c", BLOCKED_CLI, blocked, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def assert_missing(proc: subprocess.CompletedProcess[str], message: str) -> None:
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    assert f"perfgate: error: {message}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "internal error" not in proc.stderr


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('extras') / 's.db'}"
    fill(url, [record(i, 20.0 + i) for i in range(3)])
    return url


def test_report_html_without_plotly_names_the_export_extra(db: str, tmp_path: Path) -> None:
    out = tmp_path / "site"
    proc = perfgate_without("plotly", "report", "--html", str(out), "--db", db, "--jobs", "1")
    assert_missing(proc, "perfgate report --html needs plotly: pip install 'perfgate[export]'")
    assert not out.exists()  # checked before anything is written


def test_export_tensorboard_without_tensorboard(db: str, tmp_path: Path) -> None:
    logdir = tmp_path / "tb"
    proc = perfgate_without("tensorboard", "export", "tensorboard", str(logdir), "--db", db)
    assert_missing(
        proc, "perfgate export tensorboard needs tensorboard: pip install 'perfgate[export]'"
    )
    assert not list(logdir.rglob("events.out.tfevents.*"))


@pytest.mark.parametrize("push", [False, True])
def test_export_prometheus_without_prometheus_client(db: str, push: bool) -> None:
    args = ["--push-gateway", "http://127.0.0.1:9/"] if push else []
    proc = perfgate_without("prometheus_client", "export", "prometheus", "--db", db, *args)
    assert_missing(
        proc,
        "perfgate export prometheus needs prometheus_client: pip install 'perfgate[export]'",
    )
    assert proc.stdout == ""


def test_run_without_torch_names_the_torch_extra(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    proc = perfgate_without(
        "torch",
        "run",
        "--workload",
        "mlp",
        "--repeats",
        "1",
        "--db",
        url,
        "--branch",
        "main",
        "--commit",
        "0" * 40,
        cwd=tmp_path,
    )
    assert_missing(proc, "perfgate run needs torch: pip install 'perfgate[torch]'")
    # one line, naming what a CI template's user sets (the action's input, the variable)
    (line,) = [x for x in proc.stderr.splitlines() if "needs torch" in x]
    assert "the action's `torch` input" in line and "PERFGATE_TORCH" in line


def test_postgresql_url_without_psycopg_names_the_postgres_extra() -> None:
    # Nothing listens on port 9: the driver check comes before any connection is tried.
    url = "postgresql://perfgate:secret@127.0.0.1:9/perf"
    proc = perfgate_without("psycopg", "history", "--db", url)
    assert_missing(
        proc,
        "the store postgresql+psycopg://perfgate:***@127.0.0.1:9/perf needs psycopg: "
        "pip install 'perfgate[postgres]'",
    )
    assert "secret" not in proc.stderr


def test_help_works_without_any_extra() -> None:
    proc = perfgate_without("torch,plotly,tensorboard,prometheus_client,psycopg", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Usage:" in proc.stdout


def test_require_imports_or_looks_up_and_raises_missing_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require("json", extra="x", feature="f")  # installed: nothing happens
    require("json", extra="x", feature="f", load=False)
    monkeypatch.setitem(sys.modules, "plotly", None)
    # an earlier test in this worker may have imported plotly.graph_objects: its cached
    # entry would import whatever "plotly" is
    for name in [m for m in sys.modules if m.startswith("plotly.")]:
        monkeypatch.delitem(sys.modules, name)
    for load in (True, False):
        with pytest.raises(MissingExtra) as caught:
            require("plotly.graph_objects", extra="export", feature="drawing", load=load)
        assert str(caught.value) == "drawing needs plotly: pip install 'perfgate[export]'"
        assert caught.value.exit_code == ExitCode.USAGE
    with pytest.raises(MissingExtra):
        require("perfgate_no_such_module", extra="x", feature="f", load=False)


def test_missing_extra_survives_a_worker_process() -> None:
    # The HTML site renders in a process pool; the error comes back to the parent pickled.
    back = pickle.loads(pickle.dumps(MissingExtra("perfgate report --html", "plotly", "export")))
    assert isinstance(back, MissingExtra)
    assert str(back) == "perfgate report --html needs plotly: pip install 'perfgate[export]'"
    assert (back.package, back.extra) == ("plotly", "export")
