"""The GitHub PR workflow as shipped, its composite action's steps run here as a runner runs them.

A throwaway repository holds ``.github/workflows/perfgate-pr.yml`` (copied byte for byte from
``ci/github/``), a tiny suite on ``main`` and a branch ``feat`` (checked out, full history).
The workflow's ``perfgate`` job is walked step by step, ``--runs`` times, against
tests/fake_forge.py's GitHub API on loopback:

- ``actions/checkout``: stands done (the repository is here, full history, ``origin/main``);
- ``uses: perfgate/perfgate@...``: this checkout's ``action.yml`` from a copy of it at
  ``GITHUB_ACTION_PATH`` (what a runner fetches for that ref); each composite step's ``run:``
  with ``bash --noprofile --norc -eo pipefail``, its ``env:`` from the inputs (action.yml's
  defaults, the workflow's ``with:``, then the overrides below), ``GITHUB_OUTPUT`` read back
  into the step's outputs;
- ``actions/upload-artifact``: skipped (nothing here to upload to), said so.

The runner is a clean CPU one: ``python3`` on PATH is a bare venv (pip only: no torch, no
perfgate dependencies), the job's own install step brings torch and perfgate. What a team
on a CPU runner changes in the shipped ``with:`` is overridden, and printed: ``torch: cpu``
(the template says preinstalled, for its Ascend runner), ``extras: ""`` (ascend's advisor
has nothing to read on a CPU), the store (a file here), ``budget: 1``. The event is a
``pull_request`` for PR #7 of team/model; ``GITHUB_TOKEN`` the fake server's write token.
Where PyTorch's index cannot be reached, pip's own variables stand in as in
bench/ci_local.py (``PIP_CONSTRAINT`` pinning ``torch==TORCH_PIN``, ``PIP_RETRIES=0``).

It prints each run's step logs (trimmed), what the server holds and the PR comment's body,
and exits 0 when there is exactly one PR comment (the second run updated the first's), one
status a run, the first run installed torch and each installed perfgate and wrote the
report; 1 otherwise. Takes 5 to 12 minutes (torch's install).

    python bench/action_local.py [--runs 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "ci" / "github" / "perfgate-pr.yml"
sys.path.insert(0, str(ROOT / "tests"))


def _load_ci_local() -> Any:
    """bench/ci_local.py by its path (bench/ is no package, and not put on sys.path: its
    file names may shadow the standard library's)."""
    spec = importlib.util.spec_from_file_location("ci_local", ROOT / "bench" / "ci_local.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ci_local"] = module
    spec.loader.exec_module(module)
    return module


ci_local = _load_ci_local()
BENCH, SUITE, TORCH_PIN = ci_local.BENCH, ci_local.SUITE, ci_local.TORCH_PIN
git, make_clean_venv, pip_overrides = ci_local.git, ci_local.make_clean_venv, ci_local.pip_overrides
snapshot, trimmed = ci_local.snapshot, ci_local.trimmed

from fake_forge import FakeForge  # noqa: E402  (tests/ is not a package)

REPO = "team/model"
PR = 7
TOKEN = "good-token-123"  # the fake server's write token; nothing real


def make_project(where: Path) -> tuple[Path, str]:
    """A repository holding the PR workflow, copied unchanged, and the tiny suite on main;
    one more commit on feat (checked out). Returns it and feat's commit."""
    project = where / "project"
    (project / ".github" / "workflows").mkdir(parents=True)
    shutil.copyfile(WORKFLOW, project / ".github" / "workflows" / WORKFLOW.name)
    (project / "perfgate.toml").write_text(SUITE.lstrip(), encoding="utf-8")
    (project / "bench_tiny.py").write_text(BENCH.lstrip(), encoding="utf-8")
    (project / ".gitignore").write_text("perfgate-report/\n.perfgate/\n__pycache__/\n")
    git(project, "init", "-q", "-b", "main")
    git(project, "remote", "add", "origin", f"https://github.example.invalid/{REPO}.git")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "the suite")
    git(project, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(project, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
    git(project, "checkout", "-q", "-b", "feat")
    (project / "NOTES.md").write_text("a change that does not touch the step\n")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "feat")
    return project, git(project, "rev-parse", "HEAD")


def expand(text: str, inputs: dict[str, str], github: dict[str, str]) -> str:
    """``${{ inputs.X }}`` and ``${{ github.X }}``: the only expressions the action uses."""

    def one(match: re.Match[str]) -> str:
        scope, name = match.group(1), match.group(2)
        return (inputs if scope == "inputs" else github)[name]

    return re.sub(r"\$\{\{\s*(inputs|github)\.([\w-]+)\s*\}\}", one, text)


def run_action(
    action_dir: Path, given: dict[str, str], runner_env: dict[str, str], cwd: Path, log: list[str]
) -> tuple[int, dict[str, str]]:
    """The composite action at ``action_dir`` with the ``with:`` values ``given``: each
    step as the runner runs it; the first failing step's exit code, and the outputs."""
    action = yaml.safe_load((action_dir / "action.yml").read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    github = {"token": runner_env["GITHUB_TOKEN"], "action_path": str(action_dir)}
    inputs = {k: expand(str(v.get("default", "")), {}, github) for k, v in action["inputs"].items()}
    unknown = set(given) - set(inputs)
    assert not unknown, f"inputs the action does not have: {unknown}"
    inputs.update(given)
    outputs: dict[str, str] = {}
    for step in action["runs"]["steps"]:
        assert step.get("shell") == "bash", step
        out_file = cwd.parent / f"output-{step.get('id', 'step')}"
        out_file.write_text("")
        env = dict(runner_env)
        env.update({k: expand(str(v), inputs, github) for k, v in step.get("env", {}).items()})
        env["GITHUB_ACTION_PATH"] = str(action_dir)
        env["GITHUB_OUTPUT"] = str(out_file)
        script = cwd.parent / f"step-{step.get('id', 'step')}.sh"
        script.write_text(expand(step["run"], inputs, github), encoding="utf-8")
        log.append(f"$ ({step['name']}) bash --noprofile --norc -eo pipefail {script.name}")
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        log.append(proc.stdout + proc.stderr)
        for line in out_file.read_text().splitlines():
            key, _, value = line.partition("=")
            outputs[key] = value
        if proc.returncode != 0:
            log.append(f"step '{step['name']}' exited {proc.returncode}")
            return proc.returncode, outputs
    return 0, outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="what the action's ref is")
    parser.add_argument("--runs", type=int, default=2, help="workflow runs in a row (default 2)")
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    args = parser.parse_args(argv)
    where = args.keep or Path(tempfile.mkdtemp(prefix="perfgate-action-local-"))
    if args.keep is not None:
        shutil.rmtree(where, ignore_errors=True)  # a fresh project, runner and store each time
        where.mkdir(parents=True)
    project, sha = make_project(where)
    python = make_clean_venv(where)
    workflow = yaml.safe_load((project / ".github" / "workflows" / WORKFLOW.name).read_text())
    job = workflow["jobs"]["perfgate"]
    # what GitHub fetches for `uses: perfgate/perfgate@REF`: the action's repository at REF
    action_dir = where / "_actions" / "perfgate" / "perfgate" / "ref"
    action_dir.parent.mkdir(parents=True)
    shutil.move(snapshot(args.checkout.resolve(), where), action_dir)
    overrides = {
        "torch": "cpu",
        "extras": "",
        "database-url": f"sqlite:///{where / 'store.db'}",
        "budget": "1",
    }
    problems: list[str] = []
    with FakeForge() as forge:
        event = {
            "number": PR,
            "pull_request": {
                "number": PR,
                "head": {"sha": sha, "ref": "feat"},
                "base": {"sha": git(project, "rev-parse", "main"), "ref": "main"},
            },
        }
        (where / "event.json").write_text(json.dumps(event), encoding="utf-8")
        runner_env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CI", "GITLAB", "GITHUB", "PERFGATE", "VIRTUAL_ENV"))
        }
        runner_env.update(
            {
                # python3: the runner's; HOME and pip's variables stay the machine's (its pip
                # configuration: where pip finds packages here)
                "PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin",
                "CI": "true",
                "GITHUB_ACTIONS": "true",
                "GITHUB_EVENT_NAME": "pull_request",
                "GITHUB_EVENT_PATH": str(where / "event.json"),
                "GITHUB_REPOSITORY": REPO,
                "GITHUB_API_URL": forge.url,
                "GITHUB_SERVER_URL": "https://github.example.invalid",
                "GITHUB_REF": f"refs/pull/{PR}/merge",
                "GITHUB_HEAD_REF": "feat",
                "GITHUB_BASE_REF": "main",
                "GITHUB_SHA": sha,
                "GITHUB_RUN_ID": "1",
                "GITHUB_WORKSPACE": str(project),
                "GITHUB_STEP_SUMMARY": str(where / "step-summary.md"),
                "RUNNER_TEMP": str(where / "runner-temp"),
                "GITHUB_TOKEN": TOKEN,
                **pip_overrides(where),
            }
        )
        (where / "runner-temp").mkdir()
        shown = {
            k: runner_env[k]
            for k in sorted(runner_env)
            if k.startswith(("GITHUB_", "PIP_")) and k != "GITHUB_TOKEN"
        }
        print(f"runner env: {json.dumps(shown, indent=1)}")
        print(f"with: overrides for a CPU runner: {json.dumps(overrides)}")
        for run in range(1, args.runs + 1):
            print(f"\n=== run {run}: workflow {workflow['name']!r}, job perfgate")
            log: list[str] = []
            code = 0
            for step in job["steps"]:
                uses = step.get("uses", "")
                if uses.startswith("actions/checkout@"):
                    print(f"- {uses}: stands done (the repository, full history)")
                elif uses.startswith("perfgate/perfgate@"):
                    given = {k: str(v) for k, v in step.get("with", {}).items()}
                    given.update(overrides)
                    print(f"- {uses} with {json.dumps(given)}")
                    (where / "step-summary.md").write_text("")
                    code, outputs = run_action(action_dir, given, runner_env, project, log)
                    print(f"  outputs: {outputs}")
                else:
                    print(f"- {uses or step.get('name')}: skipped here")
            text = "\n".join(log)
            (where / f"run-{run}.log").write_text(text, encoding="utf-8")
            print(trimmed(text))
            print(f"--- exit {code}")
            # exit 1 is the gate's own verdict failing the job; anything else did not run
            if code not in (0, 1):
                problems.append(f"run {run}: the action exited {code}")
            if not re.search(r"Successfully installed .*\bperfgate-\d", text):
                problems.append(f"run {run}: the install step did not install perfgate")
            if run == 1 and f"torch-{TORCH_PIN}" not in text:
                problems.append(f"run 1: the install step did not install torch {TORCH_PIN}")
            if not (project / "perfgate-report" / "report.md").is_file():
                problems.append(f"run {run}: perfgate-report/report.md missing")
            comments = forge.comments.get((REPO, PR), [])
            print(f"--- PR #{PR} comments on the server: {len(comments)}")
        report = summary(forge, sha)
    print("\n=== the server holds")
    body = report.pop("comment_body")
    print(json.dumps(report, indent=1))
    print(f"\n=== PR #{PR}'s comment, as the last run left it\n{body}")
    if report["comments"] != 1:
        problems.append(f"{report['comments']} PR comments, not 1")
    if report["statuses"] != args.runs:
        problems.append(f"{report['statuses']} statuses, not {args.runs}")
    if report["comment_posts"] != 1 or report["comment_updates"] != args.runs - 1:
        problems.append("not one POST then updates in place")
    if TOKEN in json.dumps(report) + body:
        problems.append("the token appears in what was posted")
    print("\naction_local: " + ("; ".join(problems) if problems else "ok"))
    if args.keep is None:
        shutil.rmtree(where, ignore_errors=True)
    return 1 if problems else 0


def summary(forge: FakeForge, sha: str) -> dict[str, Any]:
    comments = forge.comments.get((REPO, PR), [])
    seen = [(r.method, r.path) for r in forge.requests]
    path = f"/repos/{REPO}/issues/{PR}/comments"
    return {
        "comments": len(comments),
        "comment_body": comments[-1]["body"] if comments else "",
        "comment_posts": sum(1 for m, p in seen if m == "POST" and p == path),
        "comment_updates": sum(
            1 for m, p in seen if m == "PATCH" and p.startswith(f"/repos/{REPO}/issues/comments/")
        ),
        "statuses": len(forge.statuses),
        "status_states": [(s.get("context"), s.get("state")) for s in forge.statuses],
        "status_sha_is_head": all(s["sha"] == sha for s in forge.statuses),
        "requests": [f"{m} {p}" for m, p in seen],
    }


if __name__ == "__main__":
    sys.exit(main())
