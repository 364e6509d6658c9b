"""The CI templates and action.yml validate offline against the schemas GitHub and GitLab
publish (bundled with check-jsonschema), and say what they must: least-privilege
permissions, pinned actions, the perfgate commands."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / "ci" / "github").glob("*.yml"))
GITLAB = ROOT / "ci" / "gitlab" / "perfgate.gitlab-ci.yml"

needs_checker = pytest.mark.skipif(
    importlib.util.find_spec("check_jsonschema") is None,
    reason="check-jsonschema is not installed (pip install -e '.[dev]')",
)


def check_jsonschema(schema: str, *files: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("check-jsonschema")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "check_jsonschema"]
    return subprocess.run(
        [*command, "--builtin-schema", schema, *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def load(path: Path) -> dict[str, Any]:
    yaml = pytest.importorskip("yaml")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_the_expected_templates_exist() -> None:
    names = {p.name for p in WORKFLOWS}
    assert names == {"perfgate-pr.yml", "perfgate-nightly.yml", "perfgate-fork-comment.yml"}
    assert (ROOT / "action.yml").is_file() and GITLAB.is_file()


@needs_checker
def test_workflows_match_the_github_workflow_schema() -> None:
    result = check_jsonschema("vendor.github-workflows", *WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_checker
def test_action_matches_the_github_action_schema() -> None:
    result = check_jsonschema("vendor.github-actions", ROOT / "action.yml")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_checker
def test_gitlab_include_matches_the_gitlab_ci_schema() -> None:
    result = check_jsonschema("vendor.gitlab-ci", GITLAB)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_checker
def test_a_broken_workflow_is_caught(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    stepz: []\n")
    assert check_jsonschema("vendor.github-workflows", bad).returncode != 0


def test_workflows_grant_least_privilege_and_pin_actions() -> None:
    expected = {
        "perfgate-pr.yml": {"contents": "read", "pull-requests": "write", "statuses": "write"},
        "perfgate-nightly.yml": {"contents": "read", "issues": "write"},
        "perfgate-fork-comment.yml": {
            "actions": "read",
            "pull-requests": "write",
            "statuses": "write",
        },
    }
    for path in WORKFLOWS:
        data = load(path)
        assert data["permissions"] == {}, path.name
        (job,) = data["jobs"].values()
        assert job["permissions"] == expected[path.name], path.name
        for step in job["steps"]:
            uses = step.get("uses", "")
            if uses.startswith("actions/"):
                ref = uses.split("@")[1]
                assert len(ref) == 40 and all(c in "0123456789abcdef" for c in ref), uses
            if uses.startswith("actions/checkout"):
                assert step["with"]["persist-credentials"] is False
    pr = load(ROOT / "ci" / "github" / "perfgate-pr.yml")
    assert pr["jobs"]["perfgate"]["runs-on"] == ["self-hosted", "ascend"]
    nightly = load(ROOT / "ci" / "github" / "perfgate-nightly.yml")
    on = nightly.get("on", nightly.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "schedule" in on
    runs = " ".join(s.get("run", "") for s in nightly["jobs"]["nightly"]["steps"])
    assert "history analyze" in runs and "--alert" in runs
    fork = load(ROOT / "ci" / "github" / "perfgate-fork-comment.yml")
    on = fork.get("on", fork.get(True))
    assert on["workflow_run"]["workflows"] == [pr["name"]]
    steps = fork["jobs"]["comment"]["steps"]
    assert not any(s.get("uses", "").startswith("actions/checkout") for s in steps)
    assert any("perfgate comment --from" in s.get("run", "") for s in steps)


def test_action_inputs_and_no_input_interpolated_into_scripts() -> None:
    action = load(ROOT / "action.yml")
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) >= {
        "suite",
        "database-url",
        "base-branch",
        "comment-mode",
        "fail-on",
        "pip-args",
        "python",
    }
    for step in action["runs"]["steps"]:
        assert "${{" not in step.get("run", ""), step.get("name")  # inputs go through env


def test_gitlab_include_has_mr_and_schedule_jobs() -> None:
    data = load(GITLAB)
    assert "stages" not in data  # an include must not replace the project's stages
    jobs = {k: v for k, v in data.items() if not k.startswith(".") and isinstance(v, dict)}
    jobs.pop("variables")
    assert set(jobs) == {"perfgate-mr", "perfgate-nightly"}
    template = data[".perfgate"]
    assert template["stage"] == "test"
    for name, job in jobs.items():
        assert job["extends"] == ".perfgate" and job["script"], name
        assert job.get("rules") or job.get("only"), name
    assert "merge_request_event" in jobs["perfgate-mr"]["rules"][0]["if"]
    assert "schedule" in jobs["perfgate-nightly"]["rules"][0]["if"]
    assert any("--comment" in line for line in jobs["perfgate-mr"]["script"])
    assert any("--alert" in line for line in jobs["perfgate-nightly"]["script"])
