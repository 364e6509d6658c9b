"""What ``perfgate gate`` and ``perfgate detect`` load: a gate's start-up is most of its wall
time, so the packages only some commands need (pandas for Ascend tables, requests for
posting to a forge, torch for running) stay out of the gate and of ``detect``; of scipy the
gate loads ``scipy.special`` alone, ``detect`` nothing.

Each case runs the real CLI in a fresh interpreter (helpers.perfgate's ``spawn``) that says
at exit which modules it imported (``sys.modules``); nothing here is timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import fill, perfgate, record

# First on a spawned interpreter's path, imported by ``site`` at start-up: at exit, the
# modules the interpreter imported (``sys.modules``) as the last line of its stderr.
MARK = "perfgate-test-modules: "
SITECUSTOMIZE = f"""
import atexit, json, sys
atexit.register(lambda: print({MARK!r} + json.dumps(sorted(sys.modules)), file=sys.stderr))
"""

NOT_FOR_THE_GATE = ("pandas", "requests", "urllib3", "torch")

# What ``import scipy.special`` loads of scipy. The gate's statistics need it (a t test's
# p-value per benchmark and metric; change points' normal tails): 0.15-0.25 s of import on a
# 2-core runner after numpy (``python -X importtime -c 'import numpy; import scipy.special'``,
# scipy 1.17), of which ~0.15 s is scipy's array-API layer importing numpy's lazy submodules
# (numpy.f2py, numpy.testing, numpy.ma). scipy.stats costs ten times that (2 s) and
# scipy.optimize is for confirmations only: neither may come on the gate's path.
SCIPY_SPECIAL = """
import json, sys
import scipy.special
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "scipy")))
"""


@pytest.fixture(scope="module")
def hook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("hook")
    (where / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return where


def loaded_after(hook: Path, modules: tuple[str, ...], *args: str) -> dict[str, object]:
    """``perfgate ARGS`` in a fresh interpreter: its exit code and output, which of
    ``modules`` it imported, and every scipy module it imported."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("PERFGATE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))
    done = perfgate(None, *args, env=env, spawn=True)
    said, _, listed = done.stderr.rpartition(MARK)
    imported = set(json.loads(listed))
    return {
        "exit": done.returncode,
        "output": done.stdout + said,
        "loaded": [m for m in modules if m in imported],
        "scipy": sorted(m for m in imported if m.split(".")[0] == "scipy"),
    }


@pytest.fixture(scope="module")
def scipy_special() -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-c", SCIPY_SPECIAL],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    loaded: list[str] = json.loads(proc.stdout)
    assert "scipy.special" in loaded and "scipy.stats" not in loaded
    return set(loaded)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('imports') / 's.db'}"
    main = [record(i, 20.0, noise=0.02) for i in range(12)]
    fill(url, [*main, record(20, 26.0, branch="feat", noise=0.02)])
    return url


@pytest.mark.parametrize("as_json", [False, True])
def test_gate_imports_no_pandas_requests_or_torch(
    hook: Path, db: str, as_json: bool, scipy_special: set[str]
) -> None:
    args = ["gate", "--branch", "feat", "--against", "main", "--db", db]
    found = loaded_after(hook, NOT_FOR_THE_GATE, *args, *(["--json"] if as_json else []))
    assert found["exit"] == 1, found["output"]  # a real verdict was reached: +30% fails
    assert found["loaded"] == []
    assert set(found["scipy"]) <= scipy_special, sorted(set(found["scipy"]) - scipy_special)


def test_detect_imports_no_store_pandas_requests_or_scipy(hook: Path, tmp_path: Path) -> None:
    series = tmp_path / "series.csv"
    rows = [f"{i},{10.0 if i < 20 else 12.0}" for i in range(40)]
    series.write_text("index,value\n" + "\n".join(rows) + "\n", encoding="utf-8")
    # the change points' statistics need the normal CDF alone (the standard library's erfc)
    modules = ("sqlalchemy", "perfgate.store", "perfgate.parsers.ascend", *NOT_FOR_THE_GATE)
    found = loaded_after(hook, modules, "detect", str(series))
    assert found["exit"] == 0, found["output"]
    assert "index 20" in str(found["output"])
    assert found["loaded"] == []
    assert found["scipy"] == []


def test_a_forge_client_loads_requests_only_when_one_is_built() -> None:
    code = (
        "import sys\n"
        "from perfgate.reporters.forges import forge_named\n"
        "from perfgate.reporters.forges.api import RetryPolicy\n"
        "assert 'requests' not in sys.modules\n"
        "poster = forge_named('github').poster(\n"
        "    'https://api.github.com', 'o/r', {'GITHUB_TOKEN': 't0ken'}, RetryPolicy()\n"
        ")\n"
        "print('requests' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


# pandas reads Ascend's tabular exports and scipy serves the statistics that need it (A/B
# pairs, change points); neither is loaded by a command that has no use
# for it (README: "Installing perfgate on a runner").
NOT_WITHOUT_USE = ("pandas", "scipy", "torch")


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("run", "--help"),
        ("check", "--help"),
        ("history",),
        ("ingest", "pytest_benchmark"),
        ("ingest", "torch_trace"),
    ],
    ids=lambda a: "-".join(a),
)
def test_commands_without_a_use_for_pandas_or_scipy_do_not_load_them(
    hook: Path, db: str, tmp_path: Path, args: tuple[str, ...]
) -> None:
    data = Path(__file__).parent / "data"
    files = {
        "pytest_benchmark": data / "results" / "pytest_benchmark" / "bench.json",
        "torch_trace": data / "torch_trace" / "mlp_cpu.pt.trace.json.gz",
    }
    if args[0] == "ingest":
        url = f"sqlite:///{tmp_path / 's.db'}"
        argv = ["ingest", str(files[args[1]]), "--benchmark", "b", "--branch", "main", "--db", url]
    elif args == ("history",):
        argv = ["history", "--db", db]
    else:
        argv = list(args)
    found = loaded_after(hook, NOT_WITHOUT_USE, *argv)
    assert found["exit"] == 0, found["output"]
    assert found["loaded"] == []
