"""The adopter flow, twice, on a loopback forge: one PR/MR comment, posted then updated.

The GitLab template as shipped, under gitlab-ci-local's shell executor (bench/ci_local.py):
install from this checkout through PERFGATE_INSTALL, ``perfgate check`` in ab mode, the MR
note on a loopback GitLab, twice, and still one note. Skips without gitlab-ci-local (npm
``gitlab-ci-local``; 4.65.x is the last line that runs on Node 20; point GITLAB_CI_LOCAL at
it when it is not on PATH). Then the same on a clean CPU runner (``--torch cpu``: a bare
venv, the job's own lines install torch and perfgate), and the GitHub PR workflow's
composite action run step by step on one (bench/action_local.py). The clean-runner tests
skip where pip cannot find torch TORCH_PIN's CPU build (PyTorch's index, a mirror or
find-links); each installs it into a fresh venv (a few minutes)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

clean_runner = pytest.mark.skipif(
    os.environ.get("PERFGATE_TEST_LONG") != "1",
    reason="a clean runner installs torch and every dependency into a fresh venv, about 10 "
    "minutes each on 2 cores: set PERFGATE_TEST_LONG=1 to run it (before a release, or when "
    "a template changes)",
)


def load_bench(name: str = "ci_local") -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def skip_without_cpu_torch(bench: ModuleType, tmp_path: Path) -> None:
    """Skip unless pip, as the templates' ``cpu`` line calls it (PyTorch's CPU index, plus
    pip's configured find-links and mirrors), finds torch TORCH_PIN: a dry run, no download
    where a find-links directory has the wheel."""
    for module in ("pip", "setuptools"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not importable here")
    env = {**os.environ, **bench.pip_overrides(tmp_path)}
    found = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
         "--quiet", "--index-url", "https://download.pytorch.org/whl/cpu",
         f"torch=={bench.TORCH_PIN}"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if found.returncode != 0:
        pytest.skip(f"pip finds no torch {bench.TORCH_PIN} CPU build here: {found.stderr[-300:]}")


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


@clean_runner
def test_the_gitlab_template_on_a_clean_cpu_runner_installs_torch_and_keeps_one_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PERFGATE_TORCH=cpu and a bare venv: the job's own lines install torch and perfgate,
    ``check`` runs, the note is posted by the first pipeline and updated by the second."""
    bench = load_bench()
    exe = bench.find_gitlab_ci_local(None)
    if exe is None:
        pytest.skip("gitlab-ci-local is not installed (npm install gitlab-ci-local@4.65.1)")
    skip_without_cpu_torch(bench, tmp_path)
    code = bench.main(
        ["--gitlab-ci-local", exe, "--torch", "cpu", "--keep", str(tmp_path / "work")]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"torch-{bench.TORCH_PIN}" in out  # pip's "Successfully installed" line, run 1
    assert out.count("comment created on MR !7") == 1
    assert out.count("comment updated on MR !7") == 1
    assert '"notes": 1' in out and '"note_posts": 1' in out and '"note_updates": 1' in out
    assert "<!-- perfgate" in out  # the note's marker, by which run 2 found it
    assert out.rstrip().endswith("ci_local: ok")


@clean_runner
def test_the_github_action_on_a_clean_cpu_runner_keeps_one_pr_comment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The PR workflow as shipped, its action's composite steps run here (torch: cpu, a
    bare venv as the runner's python3): one PR comment, POSTed by run 1, PATCHed by run 2."""
    pytest.importorskip("yaml")
    bench = load_bench("action_local")
    skip_without_cpu_torch(bench.ci_local, tmp_path)
    code = bench.main(["--keep", str(tmp_path / "work")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"torch-{bench.TORCH_PIN}" in out
    assert '"comments": 1' in out and '"comment_posts": 1' in out
    assert '"comment_updates": 1' in out and '"status_sha_is_head": true' in out
    assert out.rstrip().endswith("action_local: ok")
