"""Configuration: files, precedence, validation; git and CI context detection."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from perfgate.app import detect_ci_context, detect_git_context
from perfgate.config import DEFAULT_DATABASE_URL, load_config
from perfgate.errors import ConfigError
from perfgate.models import Direction, Verdict


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_defaults_without_any_file(tmp_path: Path) -> None:
    config = load_config(env={}, cwd=tmp_path)
    assert config.database_url == DEFAULT_DATABASE_URL
    assert config.base_branch == "main"
    assert config.fail_on == frozenset({Verdict.REGRESSION, Verdict.OVER_BUDGET})
    assert config.policy("step_time_ms").min_effect_pct == 3.0
    assert config.policy("throughput_samples_per_s").direction is Direction.HIGHER_IS_BETTER


def test_precedence_flag_over_env_over_file(tmp_path: Path) -> None:
    write(
        tmp_path / "perfgate.toml",
        """
        project = "from-file"
        database_url = "sqlite:///file.db"
        base_branch = "develop"
        """,
    )
    file_only = load_config(env={}, cwd=tmp_path)
    assert (file_only.project, file_only.database_url, file_only.base_branch) == (
        "from-file",
        "sqlite:///file.db",
        "develop",
    )
    env = {"PERFGATE_DATABASE_URL": "sqlite:///env.db", "PERFGATE_PROJECT": "from-env"}
    with_env = load_config(env=env, cwd=tmp_path)
    assert (with_env.project, with_env.database_url) == ("from-env", "sqlite:///env.db")
    with_flag = load_config(env=env, cwd=tmp_path, database_url="sqlite:///flag.db")
    assert with_flag.database_url == "sqlite:///flag.db"
    assert with_flag.project == "from-env"


def test_pyproject_tool_table_and_suite(tmp_path: Path) -> None:
    write(
        tmp_path / "pyproject.toml",
        """
        [project]
        name = "x"

        [tool.perfgate]
        project = "pp"
        fail_on = ["regression", "inconclusive"]

        [tool.perfgate.defaults]
        repeats = 5

        [tool.perfgate.metrics.step_time_ms]
        min_effect_pct = 7.5

        [[tool.perfgate.benchmarks]]
        name = "small"
        workload = "mlp"
        params = { batch_size = 32 }

        [[tool.perfgate.benchmarks]]
        name = "mine"
        entry = "bench:build"
        repeats = 2
        device = "cuda"
        """,
    )
    config = load_config(env={}, cwd=tmp_path)
    assert config.project == "pp"
    assert config.fail_on == frozenset({Verdict.REGRESSION, Verdict.INCONCLUSIVE})
    assert config.policy("step_time_ms").min_effect_pct == 7.5
    small, mine = config.benchmarks
    assert (small.repeats, small.params, small.workload) == (5, {"batch_size": 32}, "mlp")
    assert (mine.repeats, mine.entry, mine.device) == (2, "bench:build", "cuda")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("projetc = 'x'", "projetc: unknown key"),
        ("[[benchmarks]]\nname = 'a'", "give exactly one of 'workload'"),
        ("[[benchmarks]]\nname = 'a'\nentry = 'nocolon'", "expected 'module:function'"),
        (
            "[[benchmarks]]\nname = 'a'\nworkload = 'mlp'\nrepeats = 0",
            "repeats: expected an integer >= 1",
        ),
        (
            "[[benchmarks]]\nname = 'a'\nworkload = 'mlp'\ndevice = 'tpu'",
            "expected one of cpu, cuda, npu",
        ),
        ("[metrics.step_time_ms]\ndirection = 'sideways'", "expected 'lower' or 'higher'"),
        ("fail_on = ['catastrophe']", "fail_on: expected a list of verdicts"),
        (
            "[[benchmarks]]\nname = 'a'\nworkload = 'mlp'\n"
            "[[benchmarks]]\nname = 'a'\nworkload = 'cnn'",
            "benchmark name 'a' is repeated",
        ),
        # inf became a 3% minimum effect (100 inf / inf is nan), 1e308 an exit 4 in --json
        (
            "[metrics.step_time_ms]\nmin_effect_abs = inf",
            "metrics.step_time_ms.min_effect_abs: expected a finite number >= 0, got inf",
        ),
        # a nan parameter was measured in full, then refused by the store (exit 3)
        (
            "[[benchmarks]]\nname = 'a'\nworkload = 'mlp'\nparams = { lr = nan }",
            "benchmarks[0].params.lr: expected a finite number, got nan",
        ),
    ],
)
def test_invalid_suites_name_file_and_key(tmp_path: Path, body: str, message: str) -> None:
    path = write(tmp_path / "perfgate.toml", body)
    with pytest.raises(ConfigError) as err:
        load_config(path, env={})
    assert str(path) in str(err.value)
    assert message in str(err.value)


def test_git_context_precedence_flags_ci_repo(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "topic"], cwd=tmp_path, check=True)
    subprocess.run(
        [
            "git",
            "-c",
            "user.email=a@b",
            "-c",
            "user.name=a",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        cwd=tmp_path,
        check=True,
    )
    repo = detect_git_context({}, tmp_path)
    assert repo.branch == "topic" and len(repo.commit) == 40
    github = {
        "GITHUB_SHA": "a" * 40,
        "GITHUB_HEAD_REF": "feature",
        "GITHUB_BASE_REF": "main",
        "GITHUB_REF": "refs/pull/17/merge",
    }
    gh = detect_git_context(github, tmp_path)
    assert (gh.commit, gh.branch, gh.base_branch, gh.pr_number) == ("a" * 40, "feature", "main", 17)
    gitlab = {
        "CI_COMMIT_SHA": "b" * 40,
        "CI_COMMIT_REF_NAME": "mr-branch",
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "develop",
        "CI_MERGE_REQUEST_IID": "5",
    }
    gl = detect_git_context(gitlab, tmp_path)
    assert (gl.commit, gl.branch, gl.base_branch, gl.pr_number) == (
        "b" * 40,
        "mr-branch",
        "develop",
        5,
    )
    flagged = detect_git_context(gitlab, tmp_path, branch="x", commit="c", base_branch="y")
    assert (flagged.branch, flagged.commit, flagged.base_branch) == ("x", "c", "y")
    ci = detect_ci_context(
        {
            "GITHUB_ACTIONS": "true",
            "GITHUB_REPOSITORY": "o/r",
            "GITHUB_RUN_ID": "9",
            "GITHUB_EVENT_NAME": "pull_request",
        }
    )
    assert (ci.provider, ci.job_url, ci.trigger) == (
        "github",
        "https://github.com/o/r/actions/runs/9",
        "pull_request",
    )


def test_gate_path_works_without_torch(tmp_path: Path) -> None:
    """--help, the store and the gate never import torch (it is an optional extra)."""
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["torch"] = None  # any 'import torch' now raises ImportError
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from helpers import perfgate
        r = perfgate(None, "--help")
        assert r.returncode == 0, r.stdout + r.stderr
        from perfgate.store import open_store
        open_store("sqlite:///{tmp_path}/s.db").close()
        r = perfgate(None, "history", "--db", "sqlite:///{tmp_path}/s.db")
        assert r.returncode == 0, r.stdout + r.stderr
        import perfgate.app, perfgate.parsers, perfgate.stats, perfgate.reporters.render
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
