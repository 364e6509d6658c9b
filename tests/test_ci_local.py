"""The GitLab template as shipped, under gitlab-ci-local's shell executor (bench/ci_local.py):
install from this checkout through PERFGATE_INSTALL, ``perfgate check`` in ab mode, the MR
note on a loopback GitLab, twice, and still one note. Skips without gitlab-ci-local (npm
``gitlab-ci-local``; 4.65.x is the last line that runs on Node 20; point GITLAB_CI_LOCAL at
it when it is not on PATH)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_local", ROOT / "bench" / "ci_local.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ci_local"] = module
    spec.loader.exec_module(module)
    return module


def test_the_gitlab_template_runs_twice_under_gitlab_ci_local_with_one_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_bench()
    exe = bench.find_gitlab_ci_local(None)
    if exe is None:
        pytest.skip("gitlab-ci-local is not installed (npm install gitlab-ci-local@4.65.1)")
    for module in ("pip", "setuptools"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not importable here")
    code = bench.main(["--gitlab-ci-local", exe, "--keep", str(tmp_path / "work")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count("comment created on MR !7") == 1
    assert out.count("comment updated on MR !7") == 1
    assert out.rstrip().endswith("ci_local: ok")
