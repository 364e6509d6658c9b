"""The docs' install recipes run as written and leave the machine as it was (docs/ci.md).

* Offline runners: the download block builds perfgate's wheel and downloads it with every
  extra's dependencies into ``wheels/`` (in a venv of its own), then the install block puts
  perfgate into a fresh venv from ``wheels/`` alone: no index, no pip configuration. torch
  is the CPU build of 2.13.0, which this machine's pip finds on its disk (the README's test
  command installs the same). Downloads from PyPI: skips only when PyPI is unreachable.
  Takes 2-4 minutes.
* Trying the GitLab template locally: the gitlab-ci-local block in a throwaway project (the
  one ``bench/ci_local.py`` makes), perfgate going into the recipe's venv. The venv is made
  beforehand with this interpreter's packages on a path line, so torch and perfgate's
  dependencies are not downloaded again; the job's own ``pip install`` puts perfgate there.
  Skips without gitlab-ci-local (``.ci/run`` installs it where npm is).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import site
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import perfgate

ROOT = Path(__file__).resolve().parent.parent
CI_PAGE = ROOT / "docs" / "ci.md"

pytestmark = pytest.mark.slow


def recipe(name: str) -> str:
    text = CI_PAGE.read_text("utf-8")
    match = re.search(
        rf"^<!-- recipe: {re.escape(name)} -->\n```bash\n(.*?)^```", text, flags=re.S | re.M
    )
    assert match, f"docs/ci.md has no '{name}' recipe"
    return match.group(1)


def bash(script: str, cwd: Path, env: dict[str, str], timeout: int) -> str:
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-6000:]
    return log


def plain_env() -> dict[str, str]:
    """This environment outside any venv and any CI."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_", "GITLAB"))}
    for key in ("CI", "PERFGATE_DATABASE_URL", "VIRTUAL_ENV", "PYTHONPATH"):
        env.pop(key, None)
    venv_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=10).close()
    except OSError:
        return False
    return True


def test_the_offline_recipe_installs_every_extra_from_the_wheelhouse(tmp_path: Path) -> None:
    if not pypi_reachable():
        pytest.skip("PyPI (pypi.org:443) is unreachable: the download step needs it")
    if shutil.which("python3", path=plain_env()["PATH"]) is None:
        pytest.skip("no python3 outside this venv")
    src = tmp_path / "perfgate"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "perfgate", src / "perfgate", ignore=shutil.ignore_patterns("__pycache__")
    )

    bash(recipe("offline-download"), src, plain_env(), timeout=1200)
    wheels = {p.name.lower() for p in (src / "wheels").iterdir()}
    for needed in ("perfgate-", "msprof_analyze-", "plotly-", "tensorboard-", "psycopg-", "torch-"):
        assert any(w.startswith(needed) for w in wheels), f"no {needed}* in wheels/"

    # the runner: no index, no pip configuration, nothing but wheels/
    offline = plain_env()
    for key in list(offline):
        if key.startswith("PIP_"):
            del offline[key]
    offline["PIP_CONFIG_FILE"] = os.devnull
    log = bash(recipe("offline-install"), src, offline, timeout=1200)
    assert f"perfgate, version {perfgate.__version__}" in log
    imported = subprocess.run(
        [str(src / ".venv" / "bin" / "python"), "-c",
         "import perfgate, torch, msprof_analyze, plotly, psycopg; print(perfgate.__file__)"],
        cwd=tmp_path, env=offline, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    assert str(src / ".venv") in imported.stdout  # installed into the venv, not from src/


def load_ci_local() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_local", ROOT / "bench" / "ci_local.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ci_local"] = module
    spec.loader.exec_module(module)
    return module


def test_the_local_try_recipe_runs_the_mr_job_in_a_venv(tmp_path: Path) -> None:
    ci_local = load_ci_local()
    exe = ci_local.find_gitlab_ci_local(None)
    if exe is None and (ROOT / ".ci/node/node_modules/.bin/gitlab-ci-local").exists():
        exe = str(ROOT / ".ci/node/node_modules/.bin/gitlab-ci-local")
    if exe is None:
        pytest.skip("gitlab-ci-local is not installed (npm install gitlab-ci-local@4.65.1)")
    project, _ = ci_local.make_project(tmp_path)
    try_dir = project / ".perfgate-try"

    # the recipe's venv, made first with this interpreter's packages on a path line
    venv = try_dir / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (purelib,) = venv.glob("lib/python*/site-packages")
    (purelib / "_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")

    lines = recipe("gitlab-ci-local").splitlines()
    npm = [line for line in lines if line.startswith("npm install")]
    assert npm == ["npm install --prefix .perfgate-try/gcl gitlab-ci-local@4.65.1"]
    # gitlab-ci-local is here already: where the recipe's npm install puts it
    bin_dir = try_dir / "gcl" / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "gitlab-ci-local").symlink_to(Path(exe).resolve())
    script = "\n".join(line for line in lines if line not in npm)
    assert "/path/to/perfgate" in script
    script = script.replace("/path/to/perfgate", str(ROOT))

    env = plain_env()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # python3 -m venv
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script], cwd=project, env=env,
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    log = done.stdout + done.stderr
    # exit 1 is the gate's own verdict failing the job; anything else did not run
    assert done.returncode in (0, 1), log[-6000:]
    assert "Successfully installed perfgate" in log, log[-6000:]
    assert list(purelib.glob("perfgate-*.dist-info")), "perfgate went somewhere else"
    for name in ("report.md", "junit.xml", "metrics.txt"):
        assert (project / "perfgate-report" / name).is_file(), f"no perfgate-report/{name}"
    assert (try_dir / "perfgate.db").is_file()
