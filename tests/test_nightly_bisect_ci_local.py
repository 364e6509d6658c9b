"""The GitLab template's nightly job names the culprit on the tracking issue of a loopback forge.

bench/nightly_ci_local.py: a throwaway repository of 8 commits (one doubles a CPU loop's
work), history recorded on main at the first and the last commit, then gitlab-ci-local runs
``perfgate-nightly`` as a schedule on the default branch against tests/fake_forge.py's
GitLab API: ``history analyze --alert --json`` opens the tracking issue, ``bisect --changes
--alert`` comments on it with the first bad commit, its author line and the measured change.
Skips without gitlab-ci-local (npm ``gitlab-ci-local@4.65.1``; GITLAB_CI_LOCAL when it is not
on PATH). Slow: about ten minutes on a busy 2-core machine (30 recorded runs, then 3
bisect rounds of 10 A/B pairs in fresh processes). Beside it, a fast test of what that run
found broken: the comment after a search longer than one client's HTTP budget.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fake_forge import FakeForge
from helpers import perfgate

from perfgate.app import bisect as bisect_app
from perfgate.models import ChangePoint, DetectedChange, Direction
from perfgate.reporters.markdown import escape

ROOT = Path(__file__).resolve().parent.parent


def load_bench(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("PERFGATE_TEST_LONG") != "1",
    reason="the nightly job under gitlab-ci-local builds a venv, records 30 runs and bisects: "
    "about 8 minutes on 2 cores; set PERFGATE_TEST_LONG=1 to run it (before a release, or "
    "when the nightly template changes)",
)
def test_the_nightly_job_names_the_doubling_commit_on_the_tracking_issue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_bench("nightly_ci_local")
    exe = bench.ci_local.find_gitlab_ci_local(None)
    if exe is None:
        pytest.skip("gitlab-ci-local is not installed (npm install gitlab-ci-local@4.65.1)")
    for module in ("pip", "setuptools"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not importable here")
    code = bench.main(["--gitlab-ci-local", exe, "--keep", str(tmp_path / "work")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "perfgate: tracking issue 1 opened with 1 change point(s)" in out
    assert "perfgate: tracking issue 1: culprit named in a comment" in out
    assert "=== tracking issues: 1" in out
    assert "revision 5 (the slow one)" in out.split("=== tracking issues: 1", 1)[1]
    # the job log's text report, and the comment (escaped: no mention, no HTML)
    assert "  author: A Developer <dev@example.com>" in out
    assert f"- author: {escape('A Developer <dev@example.com>')}" in out
    assert "- measured change: +" in out
    assert out.rstrip().endswith("nightly: ok")


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.email=a@example.com", "-c", "user.name=A U Thor", *args],
        cwd=cwd, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_a_search_longer_than_the_http_budget_still_names_the_culprit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look-up of the tracking issue's keys starts a client's delivery budget
    (PERFGATE_HTTP_BUDGET_S); the comment after a search that outlasts it goes through a
    fresh client (the nightly under gitlab-ci-local said "gave up: no time left of the 60 s
    budget" after a 4-minute search)."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    (root / "perfgate.toml").write_text(
        '[[benchmarks]]\nname = "loop"\nentry = "bench_step:build"\n'
    )
    shas = []
    for i in range(5):
        (root / "bench_step.py").write_text(f"# revision {i}\n")
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", f"revision {i}")
        shas.append(_git(root, "rev-parse", "HEAD"))
    from perfgate.reporters.render import changes_to_dict

    change = DetectedChange(
        benchmark="loop", metric="step_cpu_ms", unit="ms", direction=Direction.LOWER_IS_BETTER,
        branch="main", fingerprint_key="fp", point=ChangePoint(5, 2.0, 4.0, 100.0, 1e-6, 0.999),
        last_run_before="run-4", first_run_after="run-5", commit_before=shas[0],
        commit_after=shas[4], runs_in_series=12,
    )  # fmt: skip
    changes = tmp_path / "changes.json"
    changes.write_text(json.dumps(changes_to_dict([change])))

    def slow_measure(*_: Any, chain: Any, **__: Any) -> bisect_app.MeasureFn:
        index = {c.sha: i for i, c in enumerate(chain)}

        def measure(sha: str, against: str, seconds: float) -> bisect_app.Step:
            time.sleep(0.7)  # three rounds: past the 1 s budget of the first client
            bad = index[sha] >= 3
            verdict = bisect_app.BAD if bad else bisect_app.GOOD
            return bisect_app.Step(sha, "", verdict, against, change_pct=100.0 if bad else 0.0)

        return measure

    monkeypatch.setattr(bisect_app, "paired_measure", slow_measure)
    for name in list(__import__("os").environ):
        if name.startswith(("CI", "GITHUB", "GITLAB", "PERFGATE_")):
            monkeypatch.delenv(name)
    with FakeForge() as forge:
        env = {
            "GITLAB_CI": "true",
            "CI_API_V4_URL": forge.gitlab_url,
            "CI_PROJECT_ID": "42",
            "GITLAB_TOKEN": "good-token-123",
            "PERFGATE_HTTP_BACKOFF_S": "0.01",
            "PERFGATE_HTTP_TIMEOUT_S": "1",
            "PERFGATE_HTTP_BUDGET_S": "1",
        }
        result = perfgate(
            None, "bisect", "--suite", str(root / "perfgate.toml"), "--changes", str(changes),
            "--branch", "main", "--budget", "10m", "--alert", env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        (issue,) = forge.issues["42"]
        (comment,) = issue["comments"]
    assert f"first bad commit **{shas[3][:12]}** revision 3" in comment
    said = "perfgate: tracking issue 1 opened, culprit named in a comment"
    assert said in result.stdout + result.stderr
