"""The GitLab template as shipped, run by gitlab-ci-local with its shell executor.

A throwaway project (a git repository with a tiny suite on ``main`` and a branch ``feat``)
includes ``ci/gitlab/perfgate.gitlab-ci.yml`` byte for byte; gitlab-ci-local runs its MR job
(``perfgate-mr``: the install line, then ``perfgate check`` in ab mode with the MR note, the
commit status, JUnit and metrics reports) ``--runs`` times against tests/fake_forge.py's
GitLab API on loopback. What it overrides are the template's documented variables and what
GitLab itself would set for a merge request:

- ``PERFGATE_INSTALL`` -> this checkout (``--checkout``), ``PERFGATE_PYTHON`` -> a venv made
  here that has perfgate's dependencies (this interpreter's, on a path line) and no perfgate,
  so the job's own ``pip install`` is what puts perfgate there;
- ``PERFGATE_BUDGET`` -> 1 extra pair, so an inconclusive tiny benchmark settles quickly;
- ``CI_PIPELINE_SOURCE=merge_request_event``, ``CI_MERGE_REQUEST_IID``, the target branch,
  ``CI_API_V4_URL`` -> the loopback server, ``CI_PROJECT_ID``, ``GITLAB_TOKEN``.

``--torch cpu`` is the clean CPU runner instead: ``PERFGATE_PYTHON`` is a bare venv (pip and
nothing else: no torch, no perfgate dependencies) and ``PERFGATE_TORCH=cpu``, so the job's
own install lines bring torch (PyTorch's CPU build, ``torch==TORCH_PIN``) and perfgate with
every dependency. Where PyTorch's index cannot be reached (an offline mirror, this project's
machines), pip's own CI/CD variables stand in, as the template says: ``PIP_CONSTRAINT`` (a
file pinning ``torch==TORCH_PIN``, so the CPU build pip finds on its configured find-links
or mirror is the one taken) and ``PIP_RETRIES=0`` (the unreachable index fails at once; the
command line's ``--index-url`` cannot be replaced by ``PIP_INDEX_URL``, so pip tries it).

It prints each run's job log (trimmed), then what the server holds and the MR note's body,
and exits 0 when there is exactly one MR note (the second run updated the first run's,
found by its marker), one status a run, and each run installed perfgate (and with ``--torch
cpu`` the first installed torch) and wrote the reports; 1 otherwise; 2 when gitlab-ci-local
is not installed. Takes about a minute; ``--torch cpu`` 5 to 12 (torch's install).

    npm install --prefix /tmp/gcl gitlab-ci-local@4.65.1   # 4.65.x runs on Node 20
    python bench/ci_local.py --gitlab-ci-local /tmp/gcl/node_modules/.bin/gitlab-ci-local
    python bench/ci_local.py --gitlab-ci-local ... --torch cpu   # a clean CPU runner
"""

from __future__ import annotations

import argparse
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

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "ci" / "gitlab" / "perfgate.gitlab-ci.yml"
sys.path.insert(0, str(ROOT / "tests"))

from fake_forge import FakeForge  # noqa: E402  (tests/ is not a package)

PROJECT_ID = "42"
MR_IID = 7
TOKEN = "good-token-123"  # the fake server's write token; nothing real

SUITE = """
[defaults]
repeats = 1
warmup = 1
measured = 3
profiled = 0

[[benchmarks]]
name = "tiny"
entry = "bench_tiny:build"
"""

BENCH = """
def build(device="cpu"):
    def step():
        return sum(i * i for i in range(20000))
    return {"step": step, "batch_size": 1}
"""


def find_gitlab_ci_local(given: str | None) -> str | None:
    """The gitlab-ci-local to run: ``--gitlab-ci-local``, ``$GITLAB_CI_LOCAL``, else PATH."""
    for candidate in (given, os.environ.get("GITLAB_CI_LOCAL")):
        if candidate:
            return candidate if Path(candidate).exists() else None
    return shutil.which("gitlab-ci-local")


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def make_project(where: Path) -> tuple[Path, str]:
    """A repository whose .gitlab-ci.yml includes the template, copied unchanged; the tiny
    suite on main, one more commit on feat (checked out). Returns it and feat's commit."""
    project = where / "project"
    (project / "ci" / "gitlab").mkdir(parents=True)
    shutil.copyfile(TEMPLATE, project / "ci" / "gitlab" / TEMPLATE.name)
    (project / ".gitlab-ci.yml").write_text(
        "include:\n  - local: ci/gitlab/perfgate.gitlab-ci.yml\n", encoding="utf-8"
    )
    (project / "perfgate.toml").write_text(textwrap.dedent(SUITE), encoding="utf-8")
    (project / "bench_tiny.py").write_text(textwrap.dedent(BENCH), encoding="utf-8")
    (project / ".gitignore").write_text(
        ".gitlab-ci-local/\nperfgate-report/\n.perfgate/\n__pycache__/\n"
    )
    git(project, "init", "-q", "-b", "main")
    git(project, "remote", "add", "origin", "https://gitlab.example.invalid/team/model.git")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "the suite")
    # what a clone has: origin/main and origin/HEAD (the MR's target, and the default branch)
    git(project, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(project, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
    git(project, "checkout", "-q", "-b", "feat")
    (project / "NOTES.md").write_text("a change that does not touch the step\n")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "feat")
    return project, git(project, "rev-parse", "HEAD")


def make_venv(where: Path) -> Path:
    """A venv with perfgate's dependencies (this interpreter's site-packages on a path
    line, so nothing is downloaded) and no perfgate: the job's pip install puts it there."""
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (purelib,) = venv.glob("lib/python*/site-packages")
    (purelib / "_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return venv / "bin" / "python"


TORCH_PIN = "2.13.0"  # the CPU build .ci/run installs: what a clean CPU runner gets here


def make_clean_venv(where: Path) -> Path:
    """A clean CPU runner's Python: a venv with pip and nothing else (no torch, no numpy):
    the job's own install lines must bring everything."""
    venv = where / "runner-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    found = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print(u.find_spec('torch') is None)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == "True", "the clean venv sees a torch"
    return python


def pip_overrides(where: Path) -> dict[str, str]:
    """pip's own variables for a runner that cannot reach PyTorch's index: the CPU build
    pinned by a constraints file (its lines added to the machine's own constraints file,
    if pip has one), and no retries on the unreachable index."""
    lines = [f"torch=={TORCH_PIN}"]
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    found = re.search(r"^global\.constraint='([^']*)'$", listed, re.MULTILINE)
    configured = found.group(1) if found else ""
    if configured and Path(configured).is_file():
        lines += [
            line
            for line in Path(configured).read_text().splitlines()
            if line.strip() and not line.startswith(("#", "torch=", "torch<", "torch>"))
        ]
    constraints = where / "pip-constraints.txt"
    constraints.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"PIP_CONSTRAINT": str(constraints), "PIP_RETRIES": "0"}


def snapshot(checkout: Path, where: Path) -> Path:
    """A copy of the checkout to install from, so pip's in-tree build writes nothing into
    the checkout (other people's working tree) and files changing there mid-run do not
    matter."""
    copy = where / "perfgate-src"
    skip = ("tests", "bench", "node_modules", "build", "dist", "*.egg-info", "__pycache__")
    shutil.copytree(
        checkout, copy, ignore=shutil.ignore_patterns(".*", *skip, "*.db", "site", "baselines")
    )
    return copy


def run_pipeline(
    exe: str, project: Path, home: Path, variables: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    command = [exe, "--home", str(home), "--force-shell-executor"]
    # these stand for what GitLab sets in an MR pipeline: no warning about overriding them
    command += [
        "--ignore-predefined-vars",
        ",".join(k for k in variables if k.startswith(("CI", "GITLAB"))),
    ]
    for key, value in variables.items():
        command += ["--variable", f"{key}={value}"]
    command.append("perfgate-mr")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CI_", "GITLAB", "GITHUB"))}
    env.pop("CI", None)
    env.pop("PERFGATE_DATABASE_URL", None)
    return subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=900, check=False
    )


def trimmed(log: str, table_rows: int = 4) -> str:
    """The lines a person reads a job log for: the commands the job ran, pip's result, what
    perfgate said, the verdict table's first rows, the job's end."""
    keep: list[str] = []
    rows = 0
    for line in log.splitlines():
        text = line.split(" > ", 1)[-1]
        if " $ " in line or line.startswith((" PASS", " FAIL")) or "finished in" in line:
            keep.append(line)
        elif text.startswith(("Successfully installed", "perfgate:", "ERROR", "benchmark ")):
            keep.append(line)
        elif text.startswith("tiny ") and rows < table_rows:
            keep.append(line)
            rows += 1
    return "\n".join(keep)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gitlab-ci-local", help="the executable (default: on PATH)")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="what PERFGATE_INSTALL is")
    parser.add_argument("--runs", type=int, default=2, help="pipelines in a row (default 2)")
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    parser.add_argument(
        "--torch",
        choices=("preinstalled", "cpu"),
        default="preinstalled",
        help="preinstalled: a venv that sees this interpreter's packages (default); cpu: a "
        "clean runner, a bare venv, PERFGATE_TORCH=cpu",
    )
    args = parser.parse_args(argv)
    exe = find_gitlab_ci_local(args.gitlab_ci_local)
    if exe is None:
        print("ci_local: gitlab-ci-local is not installed (npm install gitlab-ci-local)")
        return 2
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    print(f"gitlab-ci-local {version.stdout.strip()}, node {node_version()}")
    where = args.keep or Path(tempfile.mkdtemp(prefix="perfgate-ci-local-"))
    if args.keep is not None:
        shutil.rmtree(where, ignore_errors=True)  # a fresh project and store each time
        where.mkdir(parents=True)
    project, sha = make_project(where)
    clean = args.torch == "cpu"
    python = make_clean_venv(where) if clean else make_venv(where)
    install = snapshot(args.checkout.resolve(), where) if clean else args.checkout.resolve()
    problems: list[str] = []
    with FakeForge() as forge:
        variables = {
            "PERFGATE_INSTALL": str(install),
            "PERFGATE_PYTHON": str(python),
            "PERFGATE_BUDGET": "1",
            "PERFGATE_DATABASE_URL": f"sqlite:///{where / 'store.db'}",
            "GITLAB_CI": "true",
            "CI_PIPELINE_SOURCE": "merge_request_event",
            "CI_MERGE_REQUEST_IID": str(MR_IID),
            "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
            "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "feat",
            "CI_API_V4_URL": forge.gitlab_url,
            "CI_SERVER_URL": forge.url,
            "CI_PROJECT_ID": PROJECT_ID,
            "CI_COMMIT_SHA": sha,
            "GITLAB_TOKEN": TOKEN,
        }
        if clean:
            variables["PERFGATE_TORCH"] = "cpu"
            variables.update(pip_overrides(where))
        shown = {k: v for k, v in variables.items() if k != "GITLAB_TOKEN"}
        print("variables: " + json.dumps(shown, indent=1))
        for run in range(1, args.runs + 1):
            print(f"\n=== pipeline {run}: gitlab-ci-local perfgate-mr")
            proc = run_pipeline(exe, project, where / "home", variables)
            log = proc.stdout + proc.stderr
            (where / f"pipeline-{run}.log").write_text(log, encoding="utf-8")
            print(trimmed(log))
            print(f"--- exit {proc.returncode}")
            # exit 1 is the gate's own verdict failing the job; anything else did not run
            if proc.returncode not in (0, 1):
                problems.append(f"pipeline {run}: gitlab-ci-local exited {proc.returncode}")
            if not re.search(r"Successfully installed .*\bperfgate-\d", log):
                problems.append(f"pipeline {run}: the job's pip install did not install perfgate")
            if clean and run == 1 and f"torch-{TORCH_PIN}" not in log:
                problems.append(f"pipeline 1: the job did not install torch {TORCH_PIN}")
            for name in ("report.md", "target.json", "junit.xml", "metrics.txt"):
                if not (project / "perfgate-report" / name).is_file():
                    problems.append(f"pipeline {run}: perfgate-report/{name} missing")
            notes = forge.notes.get((PROJECT_ID, MR_IID), [])
            print(f"--- MR !{MR_IID} notes on the server: {len(notes)}")
        report = summary(forge, sha)
    print("\n=== the server holds")
    body = report.pop("note_body")
    print(json.dumps(report, indent=1))
    print(f"\n=== MR !{MR_IID}'s note, as the last pipeline left it\n{body}")
    if report["notes"] != 1:
        problems.append(f"{report['notes']} MR notes, not 1")
    if report["statuses"] != args.runs:
        problems.append(f"{report['statuses']} statuses, not {args.runs}")
    if report["note_posts"] != 1 or report["note_updates"] != args.runs - 1:
        problems.append("not one POST then updates in place")
    if TOKEN in json.dumps(report) + body:
        problems.append("the token appears in what was posted")
    print("\nci_local: " + ("; ".join(problems) if problems else "ok"))
    if args.keep is None:
        shutil.rmtree(where, ignore_errors=True)
    return 1 if problems else 0


def summary(forge: FakeForge, sha: str) -> dict[str, Any]:
    notes = forge.notes.get((PROJECT_ID, MR_IID), [])
    seen = [(r.method, r.path) for r in forge.requests]
    notes_path = f"/api/v4/projects/{PROJECT_ID}/merge_requests/{MR_IID}/notes"
    return {
        "notes": len(notes),
        "note_first_line": notes[0]["body"].splitlines()[0] if notes else "",
        "note_body": notes[-1]["body"] if notes else "",
        "note_posts": sum(1 for m, p in seen if m == "POST" and p == notes_path),
        "note_updates": sum(1 for m, p in seen if m == "PUT" and p.startswith(notes_path + "/")),
        "statuses": len(forge.statuses),
        "status_states": [
            (s["name"] if "name" in s else s.get("context"), s.get("state")) for s in forge.statuses
        ],
        "status_sha_is_head": all(s["sha"] == sha for s in forge.statuses),
        "requests": [f"{m} {p}" for m, p in seen],
    }


def node_version() -> str:
    node = shutil.which("node")
    if node is None:
        return "?"
    return subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
