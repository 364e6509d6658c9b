"""The GitLab template's nightly job under gitlab-ci-local, naming a culprit on a loopback forge.

A throwaway project: 8 commits of a one-benchmark suite (a pure-Python CPU loop), commit
``--at`` doubling the loop's work (bench/bisect_run.py's repository), its .gitlab-ci.yml
including ci/gitlab/perfgate.gitlab-ci.yml byte for byte. History on main: ``--before``
runs (20) recorded at the first commit and ``--after`` (10) at the last, so the change
point's commit range spans all 7 commits. Then gitlab-ci-local runs ``perfgate-nightly`` as
a schedule on the default branch against tests/fake_forge.py's GitLab API: the job's own
run, ``history
analyze --alert --json`` (opens the tracking issue) and ``bisect --changes --alert`` (names
the culprit there). Prints the job log's perfgate lines, the issue's body and comments, and
exits 0 when the one tracking issue names commit ``--at`` as the first bad commit with its
author line; 1 otherwise; 2 without gitlab-ci-local. Takes about ten minutes on a busy
2-core machine: recording the history (30 runs) and the bisection's 3 rounds of 10
A/B pairs, each pair two fresh worker processes.

    npm install --prefix /tmp/gcl gitlab-ci-local@4.65.1
    python bench/nightly_ci_local.py --gitlab-ci-local /tmp/gcl/node_modules/.bin/gitlab-ci-local
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import bisect_run  # noqa: E402
import ci_local  # noqa: E402
from fake_forge import FakeForge  # noqa: E402

from perfgate.reporters.markdown import escape  # noqa: E402

PROJECT_ID = "42"
TOKEN = ci_local.TOKEN


def make_project(where: Path, *, at: int, factor: float) -> tuple[Path, list[str]]:
    project = where / "project"
    (project / "ci" / "gitlab").mkdir(parents=True)
    shutil.copyfile(ci_local.TEMPLATE, project / "ci" / "gitlab" / ci_local.TEMPLATE.name)
    (project / ".gitlab-ci.yml").write_text(
        "include:\n  - local: ci/gitlab/perfgate.gitlab-ci.yml\n", encoding="utf-8"
    )
    (project / ".gitignore").write_text(
        ".gitlab-ci-local/\nperfgate-report/\n.perfgate/\n__pycache__/\nperfgate-changes.json\n"
    )
    shas = bisect_run.build_repo(project, commits=8, at=at, factor=factor)
    bisect_run._git(
        project, "remote", "add", "origin", "https://gitlab.example.invalid/team/model.git"
    )
    bisect_run._git(project, "update-ref", "refs/remotes/origin/main", "HEAD")
    bisect_run._git(project, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
    return project, shas


def record(project: Path, store: str, sha: str, runs: int) -> None:
    """``runs`` runs of the suite recorded on main at commit ``sha`` (a worktree of it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CI_", "GITLAB", "GITHUB"))}
    env.pop("CI", None)
    env["PERFGATE_DATABASE_URL"] = store
    tree = Path(tempfile.mkdtemp(prefix="nightly-record-")) / "tree"
    bisect_run._git(project, "worktree", "add", "-q", "--detach", str(tree), sha)
    try:
        for _ in range(runs):
            subprocess.run(
                [sys.executable, "-m", "perfgate", "run", "--suite", "perfgate.toml",
                 "--branch", "main", "--commit", sha],
                cwd=tree, env=env, check=True, capture_output=True, text=True,
            )  # fmt: skip
    finally:
        bisect_run._git(project, "worktree", "remove", "--force", str(tree))


def analyze(project: Path, store: str) -> list[dict[str, object]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CI_", "GITLAB", "GITHUB"))}
    env["PERFGATE_DATABASE_URL"] = store
    out = subprocess.run(
        [sys.executable, "-m", "perfgate", "history", "analyze", "--suite", "perfgate.toml",
         "--branch", "main", "--json"],
        cwd=project, env=env, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    rows = json.loads(out)["change_points"]
    keep = ("metric", "change_pct", "p_value", "commit_range")
    return [{k: r[k] for k in keep} for r in rows]


def run_job(
    exe: str, project: Path, home: Path, variables: dict[str, str], job: str
) -> subprocess.CompletedProcess[str]:
    command = [exe, "--home", str(home), "--force-shell-executor"]
    command += [
        "--ignore-predefined-vars",
        ",".join(k for k in variables if k.startswith(("CI", "GITLAB"))),
    ]
    for key, value in variables.items():
        command += ["--variable", f"{key}={value}"]
    command.append(job)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CI_", "GITLAB", "GITHUB"))}
    env.pop("CI", None)
    env.pop("PERFGATE_DATABASE_URL", None)
    return subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=2400, check=False
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gitlab-ci-local")
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--before", type=int, default=20)
    parser.add_argument("--after", type=int, default=10)
    parser.add_argument("--at", type=int, default=5)
    parser.add_argument("--factor", type=float, default=2.0)
    parser.add_argument("--budget", default="20m")
    args = parser.parse_args(argv)
    exe = ci_local.find_gitlab_ci_local(args.gitlab_ci_local)
    if exe is None:
        print("nightly: gitlab-ci-local is not installed")
        return 2
    began = time.monotonic()
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    print(f"gitlab-ci-local {version.stdout.strip()}, node {ci_local.node_version()}", flush=True)
    where = args.keep or Path(tempfile.mkdtemp(prefix="perfgate-nightly-"))
    if args.keep is not None:
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
    project, shas = make_project(where, at=args.at, factor=args.factor)
    print(f"project {project}: commits (oldest first)", flush=True)
    print(bisect_run._git(project, "log", "--reverse", "--format=  %h %s (%an <%ae>)"))
    store = f"sqlite:///{where / 'store.db'}"
    t = time.monotonic()
    record(project, store, shas[0], args.before)
    record(project, store, shas[-1], args.after)
    # The detector can miss even a doubling on a short history (its serial inflation,
    # measured around a running median, reads a clean step as wandering noise: 12 runs then
    # 8 at twice the time, CoV 1-6%, are missed in 2-4 series of 30; 20 then 10 in 0-1):
    # add runs at the head until the analysis sees the change, as more nights would.
    found = analyze(project, store)
    for _ in range(4):
        if found:
            break
        print("history analyze: no change point yet; one more run at the head", flush=True)
        record(project, store, shas[-1], 1)
        found = analyze(project, store)
    print(f"history analyze before the nightly: {json.dumps(found)}", flush=True)
    print(
        f"recorded {args.before} runs at {shas[0][:10]} and {args.after} at {shas[-1][:10]} "
        f"on main in {(time.monotonic() - t) / 60:.1f} min",
        flush=True,
    )
    python = ci_local.make_venv(where)
    install = ci_local.snapshot(ROOT.resolve(), where)
    problems: list[str] = []
    with FakeForge() as forge:
        variables = {
            "PERFGATE_INSTALL": str(install),
            "PERFGATE_PYTHON": str(python),
            "PERFGATE_DATABASE_URL": store,
            "PERFGATE_BISECT_BUDGET": args.budget,
            "GITLAB_CI": "true",
            "CI_PIPELINE_SOURCE": "schedule",
            "CI_COMMIT_BRANCH": "main",
            "CI_DEFAULT_BRANCH": "main",
            "CI_API_V4_URL": forge.gitlab_url,
            "CI_SERVER_URL": forge.url,
            "CI_PROJECT_ID": PROJECT_ID,
            "CI_COMMIT_SHA": shas[-1],
            "GITLAB_TOKEN": TOKEN,
        }
        shown = {k: v for k, v in variables.items() if k != "GITLAB_TOKEN"}
        print("variables: " + json.dumps(shown, indent=1), flush=True)
        print("\n=== gitlab-ci-local perfgate-nightly", flush=True)
        t = time.monotonic()
        proc = run_job(exe, project, where / "home", variables, "perfgate-nightly")
        job_minutes = (time.monotonic() - t) / 60
        log = proc.stdout + proc.stderr
        (where / "nightly.log").write_text(log, encoding="utf-8")
        keep = [
            line
            for line in log.splitlines()
            if " $ " in line
            or "finished in" in line
            or line.startswith((" PASS", " FAIL"))
            or re.search(r"> (perfgate|bisect|first bad|  author|  measured|\d+ round|ERROR)", line)
            and not re.search(r": (repeat|pair) \d+/\d+", line)  # progress, one a pair
        ]
        print("\n".join(keep))
        print(f"--- exit {proc.returncode}, {job_minutes:.1f} min")
        issues = forge.issues.get(PROJECT_ID, [])
        requests = [f"{r.method} {r.path}" for r in forge.requests]
    print("\n=== forge requests\n" + "\n".join(requests))
    print(f"\n=== tracking issues: {len(issues)}")
    for issue in issues:
        print(f"--- issue #{issue['iid']}: {issue['title']} labels={issue['labels']}")
        print(issue["description"])
        for i, comment in enumerate(issue["comments"], 1):
            print(f"--- comment {i}\n{comment}")
    culprit = shas[args.at]
    comments = [c for i in issues for c in i["comments"]]
    if proc.returncode != 0:
        problems.append(f"gitlab-ci-local exited {proc.returncode}")
    if len(issues) != 1:
        problems.append(f"{len(issues)} tracking issues, not 1")
    if "no new change points to report" in log:
        problems.append("the job's history analyze found no change point (the detector's miss)")
    if not any(f"first bad commit **{culprit[:12]}**" in c for c in comments):
        problems.append(f"no comment names {culprit[:12]} as the first bad commit")
    if not any(f"- author: {escape('A Developer <dev@example.com>')}" in c for c in comments):
        problems.append("no comment gives the author line")
    if TOKEN in log + json.dumps(issues):
        problems.append("the token appears in the log or on the issue")
    print(f"\nculprit expected: {culprit} (commit index {args.at})")
    print(f"total {(time.monotonic() - began) / 60:.1f} min")
    print("\nnightly: " + ("; ".join(problems) if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
