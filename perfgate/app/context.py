"""Where a run comes from: the git commit, branch and base, and the CI job (the only reader
of CI variables besides the forge registry); and the git history a PR gate asks where the PR
left its base branch."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from perfgate.errors import ConfigError
from perfgate.models import CIContext, GitContext


def _run_git(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` in ``cwd``; a git that cannot be started or hangs is exit status -1."""
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return subprocess.CompletedProcess(args, -1, "", "")


def _git(cwd: Path, *args: str) -> str:
    out = _run_git(cwd, *args)
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
    names = ("GITLAB_USER_LOGIN", "GITHUB_ACTOR", "USER", "USERNAME")
    return next((env[name] for name in names if env.get(name)), "unknown")


_SHA = re.compile(r"[0-9a-fA-F]{4,40}")


class GitHistory:
    """Ancestry questions asked of the git repository at ``cwd``, each answer cached (a gate
    asks the same commits once per benchmark). A commit the checkout does not have (a shallow
    clone, a run recorded elsewhere) is *unknown*: ``None``, never an error."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self._ancestor: dict[tuple[str, str], bool | None] = {}
        self._resolved: dict[str, str] = {}
        self._merge_bases: dict[tuple[str, str], str] = {}

    def resolve(self, rev: str) -> str:
        """The full commit id of ``rev`` (a sha, a prefix, a ref), or "" when unknown here."""
        if rev not in self._resolved:
            self._resolved[rev] = _git(self.cwd, "rev-parse", "--verify", "-q", f"{rev}^{{commit}}")
        return self._resolved[rev]

    def resolve_all(self, revs: Iterable[str]) -> None:
        """Resolve ``revs`` ahead, in one ``git cat-file --batch-check`` (a gate asks about the
        run of every benchmark: one git process instead of one per run); :meth:`resolve` then
        answers from the cache. A rev with white space in it is left to :meth:`resolve`."""
        todo = list(
            dict.fromkeys(
                r for r in revs if r and r not in self._resolved and not any(c.isspace() for c in r)
            )
        )
        if not todo:
            return
        stdin = "".join(f"{r}^{{commit}}\n" for r in todo)
        out = _run_git(self.cwd, "cat-file", "--batch-check", stdin=stdin)
        answers = out.stdout.splitlines()
        if out.returncode != 0 or len(answers) != len(todo):
            return  # left to resolve(), one at a time
        for rev, line in zip(todo, answers, strict=True):
            # "<sha> commit <size>", or "<rev>^{commit} missing" / "... ambiguous"
            sha, kind, *_ = (*line.split(), "", "")
            self._resolved[rev] = sha if kind == "commit" else ""

    def is_ancestor(self, commit: str, of: str) -> bool | None:
        """Whether ``commit`` is ``of`` or one of its ancestors; ``None`` when either is unknown."""
        key = (commit, of)
        if key not in self._ancestor:
            answer: bool | None = None
            if commit and of and self.resolve(commit) and self.resolve(of):  # shallow: unknown
                code = _run_git(self.cwd, "merge-base", "--is-ancestor", commit, of).returncode
                answer = {0: True, 1: False}.get(code)
            self._ancestor[key] = answer
        return self._ancestor[key]

    def merge_base(self, a: str, b: str) -> str:
        """The best common ancestor of ``a`` and ``b``, or "" when git cannot tell."""
        if (a, b) not in self._merge_bases:
            self._merge_bases[a, b] = _git(self.cwd, "merge-base", a, b) if a and b else ""
        return self._merge_bases[a, b]


def open_git_history(cwd: Path) -> GitHistory | None:
    """The git repository at ``cwd``, or ``None`` outside one (or without git)."""
    return GitHistory(cwd) if _git(cwd, "rev-parse", "--git-dir") else None


def _event_base_sha(env: Mapping[str, str]) -> str:
    """``pull_request.base.sha`` of the GitHub event payload, when there is one. The payload
    is the CI's, not the user's: one that cannot be read gives no base rather than an error."""
    path = env.get("GITHUB_EVENT_PATH", "")
    if not path:
        return ""
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return ""
    pr = event.get("pull_request") if isinstance(event, dict) else None
    base = pr.get("base") if isinstance(pr, dict) else None
    sha = base.get("sha") if isinstance(base, dict) else None
    return sha if isinstance(sha, str) and _SHA.fullmatch(sha) else ""


def detect_base_sha(
    env: Mapping[str, str], *, base_sha: str | None = None, git: GitHistory | None = None
) -> str:
    """The base-branch commit a PR is measured on top of: ``--base-sha``, else the CI's
    (GitHub: the pull_request event's ``base.sha``; GitLab: ``CI_MERGE_REQUEST_DIFF_BASE_SHA``),
    else "". A ``--base-sha`` that is a ref (``origin/main``) is resolved through ``git``.

    Raises:
        ConfigError: ``--base-sha`` is neither a commit id nor a revision git knows here.
    """
    if base_sha is not None:
        given = base_sha.strip()
        resolved = git.resolve(given) if git is not None and given else ""
        if resolved:
            return resolved
        if _SHA.fullmatch(given):
            return given.lower()
        where = "git does not know it here" if git is not None else "no git repository here"
        raise ConfigError(f"--base-sha {base_sha!r}: not a commit id ({where})")
    gitlab = env.get("CI_MERGE_REQUEST_DIFF_BASE_SHA", "").strip()
    return _event_base_sha(env) or (gitlab.lower() if _SHA.fullmatch(gitlab) else "")


@dataclass(frozen=True)
class PRBase:
    """Where a branch left its base branch, as a gate asks it: the base commit (``sha``: the
    ``--base-sha`` given or the CI's, "" when neither says) and the git history at hand
    (``git``: ``None`` outside a repository) that finds the merge-base with it."""

    sha: str
    git: GitHistory | None


def detect_pr_base(env: Mapping[str, str], cwd: Path, *, base_sha: str | None = None) -> PRBase:
    """The base commit and git history a gate (``gate``, ``compare``, ``comment``, ``check``)
    or ``run --confirm`` measures a branch against: the one place ``--base-sha``, the GitHub
    event file and GitLab's ``CI_MERGE_REQUEST_DIFF_BASE_SHA`` are weighed
    (:func:`detect_base_sha`); commands pass their ``--base-sha`` through.

    Raises:
        ConfigError: ``--base-sha`` is neither a commit id nor a revision git knows here.
    """
    git = open_git_history(cwd)
    return PRBase(detect_base_sha(env, base_sha=base_sha, git=git), git)
