"""A PR is judged against its base branch as it was at the PR's merge-base.

Real git repositories in tmp_path (main, a fork point, a branch, main moving on after it), a
real SQLite store filled with synthetic runs at those commits, the real CLI. What landed on
main after the fork point must neither fail nor flatter the PR; the report says main moved.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from helpers import fill, perfgate, record

from perfgate.models import RunRecord
from perfgate.reporters.markdown import escape

CI_VARIABLES = (
    "GITHUB_EVENT_PATH",
    "GITHUB_EVENT_NAME",
    "GITHUB_HEAD_REF",
    "GITHUB_BASE_REF",
    "GITHUB_REF_NAME",
    "GITHUB_REF",
    "GITHUB_SHA",
    "CI_MERGE_REQUEST_DIFF_BASE_SHA",
    "CI_MERGE_REQUEST_TARGET_BRANCH_NAME",
    "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME",
    "CI_COMMIT_REF_NAME",
    "CI_COMMIT_SHA",
)

FORK = 13
"""Main's runs 0..FORK are before the PR's fork point (run FORK is at the merge-base)."""


@pytest.fixture(autouse=True)
def no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests set the CI's variables themselves; the CI running them must not."""
    for name in CI_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@dataclass(frozen=True)
class Fork:
    repo: Path
    main: list[str]  # main's commits, oldest first; main[FORK] is the merge-base
    head: str  # the PR's commit, on a branch from main[FORK]


def fork(tmp_path: Path, after: int) -> Fork:
    """A repository: main with FORK + 1 commits, a branch ``feat`` from the last of them with
    one commit, then ``after`` more commits on main; ``feat`` checked out."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    main = [commit(repo, f"main {i}") for i in range(FORK + 1)]
    git(repo, "checkout", "-q", "-b", "feat")
    head = commit(repo, "the PR")
    git(repo, "checkout", "-q", "main")
    main += [commit(repo, f"main {i}") for i in range(FORK + 1, FORK + 1 + after)]
    git(repo, "checkout", "-q", "feat")
    return Fork(repo, main, head)


def at(run: RunRecord, sha: str) -> RunRecord:
    return replace(run, git=replace(run.git, commit=sha))


def history(
    url: str, commits: list[str], head: str, *, moved: float, skip: int | None = None
) -> None:
    """One run of main per commit (20 ms up to the fork point, ``20 * moved`` after it, run
    ``skip`` left out), and the PR's run at ``head``, equal to main at the fork point."""
    runs = [
        at(record(i, 20.0 if i <= FORK else 20.0 * moved), sha)
        for i, sha in enumerate(commits)
        if i != skip
    ]
    fill(url, [*runs, at(record(100, 20.0, branch="feat"), head)])


def gate(url: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, object]]:
    result = perfgate(
        None, "gate", "--db", url, "--json", "--branch", "feat", "--against", "main", *args, env=env
    )
    assert result.returncode in (0, 1), result.stdout + result.stderr
    return result.returncode, json.loads(result.stdout)


def only(data: dict[str, object]) -> dict[str, object]:
    (c,) = data["comparisons"]  # type: ignore[misc]
    return c  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("moved", "after", "word"),
    [(1.10, 3, "worse"), (0.90, 6, "better")],
    ids=["main-regressed", "main-improved"],
)
def test_what_main_did_after_the_fork_point_is_not_the_prs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moved: float, after: int, word: str
) -> None:
    # Before: main regressed 3 runs ago gave 'inconclusive' (its window mixed both levels),
    # improved 6 runs ago gave 'regression' and exit 1, though the PR changed nothing.
    f = fork(tmp_path, after)
    url = f"sqlite:///{tmp_path / 's.db'}"
    history(url, f.main, f.head, moved=moved)
    monkeypatch.chdir(f.repo)
    code, data = gate(url)
    c = only(data)
    assert code == 0
    assert c["verdict"] == "unchanged", c["reason"]
    assert c["baseline_runs"][-1] == f"mlp-main-{FORK:03d}"  # type: ignore[index]
    (note,) = data["notes"]  # type: ignore[misc]
    said = re.fullmatch(
        rf"mlp: main is (\d+\.\d)% {word} on step_time_ms since your branch point "
        rf"\({after} runs after {f.main[FORK][:7]}\): rebase to compare with it",
        note,
    )
    assert said is not None, note
    assert 9.0 <= float(said.group(1)) <= 11.0
    text = perfgate(None, "gate", "--db", url, "--branch", "feat", "--against", "main")
    assert text.returncode == 0
    assert f"note: {note}" in " ".join(text.stdout.split())  # wrapped at 100 columns
    out = tmp_path / "out"
    posted = perfgate(
        None, "gate", "--db", url, "--branch", "feat", "--against", "main", "--report-dir", str(out)
    )
    assert posted.returncode == 0, posted.stdout + posted.stderr
    assert f"ℹ️ {escape(note, 500)}" in (out / "report.md").read_text(encoding="utf-8")


def test_main_unchanged_since_the_fork_point_adds_no_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = fork(tmp_path, 4)
    url = f"sqlite:///{tmp_path / 's.db'}"
    history(url, f.main, f.head, moved=1.0)
    monkeypatch.chdir(f.repo)
    code, data = gate(url)
    assert code == 0
    assert only(data)["baseline_runs"][-1] == f"mlp-main-{FORK:03d}"  # type: ignore[index]
    assert data["notes"] == []


def test_base_sha_option_ends_the_window_without_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No repository: the stored runs' commits are matched to --base-sha (a prefix will do).
    commits = [hashlib.sha1(f"main {i}".encode()).hexdigest() for i in range(FORK + 6)]
    url = f"sqlite:///{tmp_path / 's.db'}"
    history(url, commits, "f" * 40, moved=0.9)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    before, _ = gate(url)
    assert before == 1  # today's latest runs: main's improvement reads as the PR's regression
    code, data = gate(url, "--base-sha", commits[FORK][:10].upper())
    assert code == 0
    assert only(data)["baseline_runs"][-1] == f"mlp-main-{FORK:03d}"  # type: ignore[index]
    assert any("since your branch point (5 runs after" in n for n in data["notes"])  # type: ignore[attr-defined]
    compared = perfgate(
        None, "compare", "--db", url, "--json", "--branch", "feat", "--against", "main",
        "--base-sha", commits[FORK],
    )  # fmt: skip
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert only(json.loads(compared.stdout))["verdict"] == "unchanged"
    bad = perfgate(None, "gate", "--db", url, "--branch", "feat", "--base-sha", "no!")
    assert bad.returncode == 2
    assert "--base-sha 'no!': not a commit id (no git repository here)" in bad.stdout + bad.stderr
    assert "Traceback" not in bad.stdout + bad.stderr


def test_github_event_base_sha_is_taken_to_the_merge_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GitHub's pull_request.base.sha is main's tip when the PR was pushed, not the fork
    # point: git's merge-base of it and the PR's commit is.
    f = fork(tmp_path, 6)
    url = f"sqlite:///{tmp_path / 's.db'}"
    history(url, f.main, f.head, moved=0.9)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"base": {"sha": f.main[-1]}}}))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # no repository here: the base sha is taken as it is
    code, data = gate(url, env={"GITHUB_EVENT_PATH": str(event)})
    assert code == 1  # main's tip is the base: the PR is compared with the improved main
    assert only(data)["baseline_runs"][-1] == f"mlp-main-{FORK + 6:03d}"  # type: ignore[index]
    monkeypatch.chdir(f.repo)
    code, data = gate(url, env={"GITHUB_EVENT_PATH": str(event)})
    assert code == 0
    assert only(data)["baseline_runs"][-1] == f"mlp-main-{FORK:03d}"  # type: ignore[index]
    (note,) = data["notes"]  # type: ignore[misc]
    assert "better on step_time_ms since your branch point (6 runs after" in note


def test_gitlab_diff_base_sha_ends_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = fork(tmp_path, 3)
    url = f"sqlite:///{tmp_path / 's.db'}"
    history(url, f.main, f.head, moved=1.1)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, data = gate(url, env={"CI_MERGE_REQUEST_DIFF_BASE_SHA": f.main[FORK]})
    assert code == 0
    c = only(data)
    assert c["verdict"] == "unchanged", c["reason"]
    assert c["baseline_runs"] == [f"mlp-main-{i:03d}" for i in range(FORK + 1)]
    (note,) = data["notes"]  # type: ignore[misc]
    assert (
        f"worse on step_time_ms since your branch point (3 runs after {f.main[FORK][:7]})" in note
    )


def test_no_run_at_the_merge_base_compares_with_the_nearest_earlier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = fork(tmp_path, 3)
    url = f"sqlite:///{tmp_path / 's.db'}"
    history(url, f.main, f.head, moved=1.0, skip=FORK)
    monkeypatch.chdir(f.repo)
    code, data = gate(url)
    assert code == 0
    assert only(data)["baseline_runs"][-1] == f"mlp-main-{FORK - 1:03d}"  # type: ignore[index]
    assert data["notes"] == [
        f"mlp: no run of main at your merge-base {f.main[FORK][:7]}; compared with the "
        f"{FORK} runs up to {f.main[FORK - 1][:7]}"
    ]
    # the same from the CI's base commit, without git: nothing to find the earlier run by
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, data = gate(url, "--base-sha", f.main[FORK])
    assert only(data)["baseline_runs"][-1] == f"mlp-main-{FORK + 3:03d}"  # type: ignore[index]
    assert data["notes"] == [
        f"mlp: no run of main at your merge-base {f.main[FORK][:7]}, and no git repository "
        "here to find the nearest earlier one: compared with the latest runs"
    ]


def test_runs_the_checkout_does_not_have_are_named_not_guessed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A shallow clone: the PR's commit is here, main's runs were made at commits that are not.
    f = fork(tmp_path, 3)
    elsewhere = [hashlib.sha1(f"elsewhere {i}".encode()).hexdigest() for i in range(FORK + 4)]
    url = f"sqlite:///{tmp_path / 's.db'}"
    history(url, elsewhere, f.head, moved=1.0)
    monkeypatch.chdir(f.repo)
    code, data = gate(url)
    assert code == 0
    assert only(data)["baseline_runs"][-1] == f"mlp-main-{FORK + 3:03d}"  # type: ignore[index]
    assert data["notes"] == [
        "mlp: the runs of main are not in this checkout's git history (a shallow clone?): "
        "compared with the latest runs; fetch the history or pass --base-sha"
    ]


def test_without_git_or_base_sha_the_window_is_the_latest_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = fork(tmp_path, 3)
    url = f"sqlite:///{tmp_path / 's.db'}"
    history(url, f.main, f.head, moved=1.0)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, data = gate(url)
    assert code == 0
    assert only(data)["baseline_runs"][-1] == f"mlp-main-{FORK + 3:03d}"  # type: ignore[index]
    assert data["notes"] == []


def test_one_place_weighs_the_option_the_event_and_gitlab(tmp_path: Path) -> None:
    """``detect_pr_base``: ``--base-sha`` first (a ref resolved through git), then GitHub's
    event file, then GitLab's variable; outside a repository no git history, and a ref that
    cannot be resolved is one clear error. The commands pass their option through."""
    from perfgate.app.context import detect_pr_base
    from perfgate.errors import ConfigError

    f = fork(tmp_path, 2)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"base": {"sha": f.main[-1]}}}))
    both = {"GITHUB_EVENT_PATH": str(event), "CI_MERGE_REQUEST_DIFF_BASE_SHA": f.main[1]}
    given = detect_pr_base(both, f.repo, base_sha="main~1")
    assert given.sha == f.main[-2] and given.git is not None
    assert detect_pr_base(both, f.repo).sha == f.main[-1]
    gitlab = {"CI_MERGE_REQUEST_DIFF_BASE_SHA": f.main[1].upper()}
    assert detect_pr_base(gitlab, f.repo).sha == f.main[1]
    outside = tmp_path / "work"
    outside.mkdir()
    bare = detect_pr_base({}, outside)
    assert (bare.sha, bare.git) == ("", None)
    with pytest.raises(ConfigError, match="no git repository here"):
        detect_pr_base({}, outside, base_sha="main~1")


def test_resolving_every_run_in_one_git_call_gives_what_one_at_a_time_gives(
    tmp_path: Path,
) -> None:
    """A gate resolves the commit of every benchmark's run at once (one ``git cat-file``);
    each answer must be the one ``git rev-parse`` gives for it alone: full ids, prefixes,
    branch names and ``HEAD`` resolved; unknown ids, tags of nothing and blanks unknown."""
    from perfgate.app.context import GitHistory, open_git_history

    f = fork(tmp_path, after=2)
    git(f.repo, "tag", "-a", "-m", "t", "v1", f.main[3])  # an annotated tag peels to a commit
    revs = [
        f.head, f.main[0], f.main[-1][:10], "main", "HEAD", "v1", "0" * 40, "nosuch",
        f"{f.main[1]} {f.main[2]}", "",
    ]  # fmt: skip
    one_at_a_time = GitHistory(f.repo)
    expected = {r: one_at_a_time.resolve(r) for r in revs}
    assert expected[f.head] == f.head and expected["main"] == f.main[-1]
    assert expected["v1"] == f.main[3] and expected["0" * 40] == "" and expected["nosuch"] == ""
    batched = open_git_history(f.repo)
    assert batched is not None
    batched.resolve_all(revs)
    calls: list[str] = []
    real_run = subprocess.run

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(str(args[0]))
        return real_run(*args, **kwargs)  # type: ignore[call-overload]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(subprocess, "run", counting)
        got = {r: batched.resolve(r) for r in revs if r and " " not in r}
    assert calls == []  # every one answered from the one batch
    assert got == {r: v for r, v in expected.items() if r and " " not in r}
    assert batched.resolve(f"{f.main[1]} {f.main[2]}") == expected[f"{f.main[1]} {f.main[2]}"]
