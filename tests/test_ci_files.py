"""The CI templates and action.yml validate offline against the schemas GitHub and GitLab
publish (bundled with check-jsonschema), and say what they must: least-privilege
permissions, pinned actions, the perfgate commands."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
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


def load(path: Path) -> dict[Any, Any]:
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
    on: Any = nightly.get("on", nightly.get(True))  # YAML 1.1 reads a bare `on` as true
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


# --- perfgate check in the templates: mode (ab | history) and budget -------------------------


def action_step(step_id: str) -> dict[str, Any]:
    steps: list[dict[str, Any]] = load(ROOT / "action.yml")["runs"]["steps"]
    (step,) = [s for s in steps if s.get("id") == step_id]
    return step


def fake_python(tmp_path: Path) -> Path:
    """A stand-in for the action's ``python`` input: ``-m perfgate ...`` records its argv (one
    JSON list a line) and writes a target.json like gate's into --report-dir, then exits
    FAKE_EXIT; ``- FILE`` (the step's output snippet) runs the stdin program for real."""
    fake = tmp_path / "fake-python"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "if sys.argv[1] == '-':\n"
        "    sys.argv = sys.argv[1:]\n"
        "    exec(compile(sys.stdin.read(), '<stdin>', 'exec'), {'__name__': '__main__'})\n"
        "    sys.exit(0)\n"
        "argv = sys.argv[1:]\n"
        "with open(os.environ['FAKE_ARGV'], 'a', encoding='utf-8') as f:\n"
        "    f.write(json.dumps(argv) + '\\n')\n"
        "if '--report-dir' in argv:\n"
        "    out = argv[argv.index('--report-dir') + 1]\n"
        "    os.makedirs(out, exist_ok=True)\n"
        "    failed = os.environ.get('FAKE_EXIT', '0') == '1'\n"
        "    with open(os.path.join(out, 'target.json'), 'w', encoding='utf-8') as f:\n"
        "        json.dump({'verdict': 'regression' if failed else 'unchanged',\n"
        "                   'failed': failed}, f)\n"
        "sys.exit(int(os.environ.get('FAKE_EXIT', '0')))\n",
        encoding="utf-8",
    )
    fake.chmod(0o755)
    return fake


def run_gate_step(
    tmp_path: Path, event: str, *, exit_code: int = 0, **inputs: str
) -> tuple[subprocess.CompletedProcess[str], list[list[str]], str]:
    """Run the action's check step's script with bash as a composite step runs it
    (``bash --noprofile --norc -eo pipefail``), its env as the action maps the inputs
    (defaults from action.yml), and the fake interpreter; the process, the perfgate argv
    lists it was called with and what it wrote to GITHUB_OUTPUT. Each call works in a
    fresh directory under ``tmp_path``."""
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))
    action = load(ROOT / "action.yml")
    step = action_step("gate")
    values = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    values.update({k.replace("_", "-"): v for k, v in inputs.items()})
    env: dict[str, str] = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for key, expr in step["env"].items():
        name = expr.removeprefix("${{ inputs.").split(" ")[0].removesuffix("}}").strip()
        env[key] = values.get(name, "")
    env["PERFGATE_BASE"] = values.get("base-branch") or "main"  # || github.base_ref || 'main'
    env["PERFGATE_PYTHON"] = str(fake_python(tmp_path))
    env["GITHUB_EVENT_NAME"] = event
    env["GITHUB_OUTPUT"] = str(tmp_path / "github_output")
    env["FAKE_ARGV"] = str(tmp_path / "argv.jsonl")
    env["FAKE_EXIT"] = str(exit_code)
    script = tmp_path / "step.sh"
    script.write_text(step["run"], encoding="utf-8")
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    proc = subprocess.run(
        [bash, "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    argv_file = tmp_path / "argv.jsonl"
    calls = (
        [json.loads(line) for line in argv_file.read_text().splitlines()]
        if argv_file.exists()
        else []
    )
    output_file = tmp_path / "github_output"
    return proc, calls, output_file.read_text() if output_file.exists() else ""


def flag(argv: list[str], name: str) -> str:
    assert name in argv, argv
    return argv[argv.index(name) + 1]


def test_action_has_mode_and_budget_inputs() -> None:
    inputs = load(ROOT / "action.yml")["inputs"]
    assert inputs["mode"]["default"] == ""  # empty: ab on pull requests, history otherwise
    assert inputs["budget"]["default"] == "10m"
    step = action_step("gate")
    assert "perfgate" in step["run"] and "check" in step["run"] and "--mode" in step["run"]
    assert step["env"]["PERFGATE_MODE"] == "${{ inputs.mode }}"
    assert step["env"]["PERFGATE_BUDGET"] == "${{ inputs.budget }}"
    outputs = load(ROOT / "action.yml")["outputs"]
    assert outputs["verdict"]["value"] == "${{ steps.gate.outputs.verdict }}"
    assert "fetch-depth: 0" in (ROOT / "action.yml").read_text()  # the header says so


@pytest.mark.parametrize("event", ["pull_request", "pull_request_target"])
def test_action_defaults_to_ab_on_pull_requests(tmp_path: Path, event: str) -> None:
    proc, calls, output = run_gate_step(tmp_path, event, base_branch="develop")
    assert proc.returncode == 0, proc.stderr
    (argv,) = calls
    assert argv[:3] == ["-m", "perfgate", "check"]
    assert flag(argv, "--mode") == "ab"
    assert flag(argv, "--budget") == "10m"
    assert flag(argv, "--against") == "develop"
    assert flag(argv, "--base-branch") == "develop"
    assert flag(argv, "--suite") == "perfgate.toml"
    assert flag(argv, "--fail-on") == "regression"
    assert flag(argv, "--report-dir") == "perfgate-report"
    assert "--summary" in argv
    assert flag(argv, "--comment-mode") == "always" and "--comment" in argv
    assert output.splitlines() == ["verdict=unchanged", "failed=false"]


@pytest.mark.parametrize("event", ["push", "schedule", "workflow_dispatch", ""])
def test_action_defaults_to_history_elsewhere(tmp_path: Path, event: str) -> None:
    proc, calls, _ = run_gate_step(tmp_path, event)
    assert proc.returncode == 0, proc.stderr
    (argv,) = calls
    assert argv[2] == "check" and flag(argv, "--mode") == "history"
    assert flag(argv, "--against") == "main"


def test_action_explicit_mode_and_budget_win(tmp_path: Path) -> None:
    proc, calls, _ = run_gate_step(
        tmp_path, "pull_request", mode="history", budget="8", comment="false"
    )
    assert proc.returncode == 0, proc.stderr
    (argv,) = calls
    assert flag(argv, "--mode") == "history" and flag(argv, "--budget") == "8"
    assert "--comment" not in argv and "--comment-mode" not in argv
    proc, calls, _ = run_gate_step(tmp_path, "push", mode="ab")
    assert proc.returncode == 0, proc.stderr
    assert flag(calls[0], "--mode") == "ab"


@pytest.mark.parametrize("mode", ["AB", "a/b", "paired", "ab "])
def test_action_rejects_a_bad_mode_with_exit_2(tmp_path: Path, mode: str) -> None:
    proc, calls, output = run_gate_step(tmp_path, "pull_request", mode=mode)
    assert proc.returncode == 2
    assert calls == []  # perfgate never started
    assert output == ""
    (line,) = proc.stderr.strip().splitlines()
    assert "mode must be ab or history" in line and repr(mode).strip('"') in line


def test_action_exit_code_and_outputs_follow_perfgate(tmp_path: Path) -> None:
    proc, calls, output = run_gate_step(tmp_path, "pull_request", exit_code=1)
    assert proc.returncode == 1
    assert output.splitlines() == ["verdict=regression", "failed=true"]
    proc, _, output = run_gate_step(tmp_path, "push", exit_code=3)
    assert proc.returncode == 3 and output.splitlines() == ["verdict=unchanged", "failed=false"]


def test_action_run_false_gates_earlier_runs_with_gate(tmp_path: Path) -> None:
    # mode does not apply without a run: even a bad value is not looked at
    proc, calls, output = run_gate_step(tmp_path, "pull_request", run="false", mode="bogus")
    assert proc.returncode == 0, proc.stderr
    (argv,) = calls
    assert argv[:3] == ["-m", "perfgate", "gate"]
    assert "--mode" not in argv and "--budget" not in argv
    assert flag(argv, "--against") == "main" and "--summary" in argv
    assert output.splitlines() == ["verdict=unchanged", "failed=false"]


def test_action_has_one_step_that_runs_perfgate() -> None:
    steps = load(ROOT / "action.yml")["runs"]["steps"]
    assert [s["name"] for s in steps] == ["Install perfgate", "Check and report"]


def test_pr_workflow_uses_mode_ab_with_the_full_history() -> None:
    pr = load(ROOT / "ci" / "github" / "perfgate-pr.yml")
    steps = pr["jobs"]["perfgate"]["steps"]
    (checkout,) = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["fetch-depth"] == 0
    (gate,) = [s for s in steps if s.get("id") == "perfgate"]
    assert gate["with"]["mode"] == "ab"
    assert set(gate["with"]) <= set(load(ROOT / "action.yml")["inputs"])


def gitlab_mr_argv(tmp_path: Path) -> list[list[str]]:
    """Run the MR job's script lines with bash, ``python3`` a fake on PATH that records its
    argv, and the variables GitLab would set."""
    data = load(GITLAB)
    job = data["perfgate-mr"]
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = fake_python(tmp_path)
    (bindir / "python3").symlink_to(fake)
    env = {k: str(v) for k, v in data["variables"].items()}
    env.update({k: str(v) for k, v in job.get("variables", {}).items()})
    env.update(
        PATH=f"{bindir}:/usr/bin:/bin",
        HOME=str(tmp_path),
        CI_MERGE_REQUEST_TARGET_BRANCH_NAME="release/1.2",
        FAKE_ARGV=str(tmp_path / "argv.jsonl"),
    )
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    for line in job["script"]:
        proc = subprocess.run(
            [bash, "-e", "-c", line],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
    return [json.loads(x) for x in (tmp_path / "argv.jsonl").read_text().splitlines()]


def test_gitlab_mr_job_calls_check_with_mode_and_budget(tmp_path: Path) -> None:
    data = load(GITLAB)
    assert data["variables"]["PERFGATE_MODE"] == "ab"
    assert data["variables"]["PERFGATE_BUDGET"] == "10m"
    assert str(data["perfgate-mr"]["variables"]["GIT_DEPTH"]) == "0"
    (argv,) = gitlab_mr_argv(tmp_path)
    assert argv[:3] == ["-m", "perfgate", "check"]
    assert flag(argv, "--mode") == "ab" and flag(argv, "--budget") == "10m"
    assert flag(argv, "--against") == "release/1.2"
    assert flag(argv, "--suite") == "perfgate.toml"
    assert "--comment" in argv and flag(argv, "--comment-mode") == "change"
    nightly = " ".join(data["perfgate-nightly"]["script"])
    assert "perfgate run" in nightly and "history analyze" in nightly
    assert "check" not in nightly


def test_the_flags_the_templates_pass_exist_on_the_cli(tmp_path: Path) -> None:
    """Whatever the action and the GitLab job pass, the CLI accepts (once `check` is there)."""
    from perfgate.cli import cli

    calls = [run_gate_step(tmp_path, event)[1][0] for event in ("pull_request", "push")]
    calls.append(run_gate_step(tmp_path, "push", run="false")[1][0])
    calls += gitlab_mr_argv(tmp_path)
    missing = False
    for argv in calls:
        command = cli.commands.get(argv[2])
        if command is None:
            missing = True
            continue
        known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        passed = {a for a in argv[3:] if a.startswith("--")}
        assert passed <= known, (argv[2], passed - known)
    if missing:
        pytest.skip("perfgate check is not registered yet")
