"""Paired A/B in one job: a real git repository, a base commit checked out into a worktree,
base and head repeats alternating in real worker processes."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from helpers import perfgate

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

BENCH = """
import torch

WORK = {work}

def build(device="cpu", size=96):
    a = torch.randn(size, size)
    def step():
        x = a
        for _ in range(WORK):
            x = torch.tanh(x @ a)
        return x.sum()
    return {{"step": step, "batch_size": 1}}
"""

SUITE = """
[defaults]
repeats = 3
warmup = 3
measured = 15
profiled = 0

[[benchmarks]]
name = "kernel"
entry = "bench_ab:build"
"""


def sh(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_", "GITLAB"))}
    env.pop("CI", None)
    env.pop("PERFGATE_DATABASE_URL", None)
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def git(cwd: Path, *args: str) -> None:
    out = sh(cwd, "git", "-c", "user.email=t@t", "-c", "user.name=t", *args)
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("abrepo")
    git(root, "init", "-q", "-b", "main")
    (root / "bench").mkdir()
    (root / "bench" / "bench_ab.py").write_text(textwrap.dedent(BENCH.format(work=40)))
    (root / "bench" / "perfgate.toml").write_text(textwrap.dedent(SUITE))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    # the head: 60% more work in every step
    (root / "bench" / "bench_ab.py").write_text(textwrap.dedent(BENCH.format(work=64)))
    git(root, "commit", "-q", "-am", "slower")
    return root


def test_paired_run_records_both_sides_and_the_gate_decides_on_pairs(repo: Path) -> None:
    bench = repo / "bench"
    run = perfgate(bench, "run", "--ab", "HEAD~1", "--branch", "feat", "--json")
    assert run.returncode == 0, run.stderr
    runs = json.loads(run.stdout)["runs"]
    assert [r["branch"] for r in runs] == ["feat:base", "feat"]
    base_commit = sh(repo, "git", "rev-parse", "HEAD~1").stdout.strip()
    assert runs[0]["commit"] == base_commit
    assert runs[0]["fingerprint_key"] == runs[1]["fingerprint_key"]
    # the worktree is gone again
    assert sh(repo, "git", "worktree", "list").stdout.count("\n") == 1

    gate = perfgate(bench, "gate", "--branch", "feat", "--against", "main", "--json")
    data = json.loads(gate.stdout)
    paired = [c for c in data["comparisons"] if c["method"] == "paired"]
    history = [c for c in data["comparisons"] if c["method"] == "history"]
    # on the CPU the pairs' CPU times decide; their wall times are shown beside, not deciding
    step = next(c for c in paired if c["metric"] == "step_cpu_ms")
    wall = next(c for c in paired if c["metric"] == "step_time_ms")
    assert step["decides"] is True and wall["decides"] is False
    assert step["baseline_runs"] == [runs[0]["id"]]
    assert step["change_pct"] > 0  # 60% more work: far above this machine's CPU-time noise
    # no history on main yet: history says so, and the pairs decide
    assert {c["verdict"] for c in history} == {"no_baseline"}
    # three pairs are three coin flips of which member ran as the head: whatever they show,
    # no verdict can rest on them, and the gate says how many pairs could (check --mode ab
    # measures them; test_check decides a regression that way)
    assert step["verdict"] == "inconclusive", step["reason"]
    assert step["mde_pct"] is None
    assert "no change of any size can be shown with fewer than 8 pairs" in step["reason"]
    # (the loss, a result that must not move, moved with the work: that is compared exactly)
    loss = next(c for c in paired if c["metric"].startswith("loss"))
    assert loss["verdict"] == "regression" and data["verdict"] == "regression"
    assert gate.returncode == 1, gate.stdout


def test_bad_ref_is_a_usage_error(repo: Path) -> None:
    out = perfgate(repo / "bench", "run", "--ab", "no-such-ref", "--branch", "feat")
    assert out.returncode == 2
    assert "--ab no-such-ref: no such commit" in out.stderr


def test_paired_run_with_the_default_trace_dir_profiles_both_sides(repo: Path) -> None:
    """``run --ab`` with the default, relative ``--trace-dir``: the base side runs inside its
    worktree, and its profiled window must still land under this directory (issue 2.3)."""
    bench = repo / "bench"
    run = perfgate(bench, "run", "--ab", "HEAD~1", "--branch", "prof", "--profiled", "2", "--json")
    assert run.returncode == 0, run.stderr
    head = json.loads(run.stdout)["runs"][1]
    traces = bench / ".perfgate" / "traces" / head["id"]
    written = sorted(p.relative_to(traces).parts[0] for p in traces.rglob("*.json"))
    assert written == ["base", "head"], list(traces.rglob("*"))


def test_a_change_only_to_the_suites_params_is_measured_as_that_change(
    tmp_path: Path,
) -> None:
    """Each side runs the benchmark as its own commit's suite file defines it: a PR that
    changes only a suite entry's ``params`` is not measured as an A/A."""
    root = tmp_path / "repo"
    (root / "bench").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "bench" / "bench_ab.py").write_text(textwrap.dedent(BENCH.format(work=8)))
    suite = textwrap.dedent(SUITE).replace("repeats = 3", "repeats = 1")
    (root / "bench" / "perfgate.toml").write_text(suite + "params = { size = 32 }\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    (root / "bench" / "perfgate.toml").write_text(suite + "params = { size = 48 }\n")
    git(root, "commit", "-q", "-am", "bigger")
    run = perfgate(root / "bench", "run", "--ab", "HEAD~1", "--branch", "feat", "--json")
    assert run.returncode == 0, run.stderr
    base, head = json.loads(run.stdout)["runs"]
    assert base["fingerprint"]["params"]["size"] == 32
    assert head["fingerprint"]["params"]["size"] == 48
