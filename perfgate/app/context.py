"""Where a run comes from: the git commit, branch and base, and the CI job (the only reader
of CI variables besides the forge registry)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from perfgate.models import (
    CIContext,
    GitContext,
)


def _git(cwd: Path, *args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def detect_git_context(
    env: Mapping[str, str],
    cwd: Path,
    *,
    branch: str | None = None,
    commit: str | None = None,
    base_branch: str | None = None,
) -> GitContext:
    """Commit, branch and base from flags, else CI variables, else the git repository."""
    ref_name = env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") or ""
    ci_branch = (
        env.get("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME") or env.get("CI_COMMIT_REF_NAME") or ref_name
    )
    ci_commit = env.get("CI_COMMIT_SHA") or env.get("GITHUB_SHA") or ""
    ci_base = env.get("CI_MERGE_REQUEST_TARGET_BRANCH_NAME") or env.get("GITHUB_BASE_REF") or ""
    pr = env.get("CI_MERGE_REQUEST_IID") or ""
    if not pr and env.get("GITHUB_REF", "").startswith("refs/pull/"):
        pr = env["GITHUB_REF"].split("/")[2]
    resolved_branch = branch or ci_branch or _git(cwd, "rev-parse", "--abbrev-ref", "HEAD")
    if resolved_branch == "HEAD":
        resolved_branch = ""
    return GitContext(
        commit=commit or ci_commit or _git(cwd, "rev-parse", "HEAD"),
        branch=resolved_branch,
        base_branch=base_branch or ci_base,
        pr_number=int(pr) if pr.isdigit() else None,
    )


def detect_ci_context(env: Mapping[str, str]) -> CIContext:
    if env.get("GITHUB_ACTIONS") == "true":
        server = env.get("GITHUB_SERVER_URL", "https://github.com")
        url = ""
        if env.get("GITHUB_REPOSITORY") and env.get("GITHUB_RUN_ID"):
            url = f"{server}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
        return CIContext("github", url, env.get("GITHUB_EVENT_NAME", ""))
    if env.get("GITLAB_CI") == "true":
        return CIContext("gitlab", env.get("CI_JOB_URL", ""), env.get("CI_PIPELINE_SOURCE", ""))
    return CIContext()


def default_actor(env: Mapping[str, str]) -> str:
    """Who a triage action is recorded as when ``--by`` is not given: the CI user, else the
    login name."""
    for name in ("GITLAB_USER_LOGIN", "GITHUB_ACTOR", "USER", "USERNAME"):
        if env.get(name):
            return env[name]
    return "unknown"
