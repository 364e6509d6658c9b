"""The real CLI posting to a real HTTP server on loopback (tests/fake_forge.py) from a real
SQLite store: `gate --comment` on GitHub and GitLab, every posting failure leaving the
verdict's exit code and the report on disk, the fork-PR flow (`gate --report-dir` then
`comment --from`), and the nightly `history analyze --alert` tracking issue."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from fake_forge import FakeForge
from helpers import (
    HEAD,
    TOKEN,
    Done,
    ci_env,
    fill,
    github_env,
    gitlab_env,
    marked,
    perfgate,
    record,
)

from perfgate.models import RunRecord
from perfgate.reporters.forges.api import RetryPolicy


@pytest.fixture
def forge() -> Iterator[FakeForge]:
    with FakeForge(page_size=2) as server:
        yield server


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 's.db'}"
    runs = [record(i, 20.0, benchmark=b) for b in ("a", "b") for i in range(8)]
    runs += [
        record(50, 26.0, branch="feat", benchmark="a"),
        record(51, 20.1, branch="feat", benchmark="b"),
        record(52, 20.0, branch="calm", benchmark="b"),
    ]
    fill(url, runs)
    return url


def invoke(env: dict[str, str | None], *args: str) -> Done:
    return perfgate(None, *args, env=env)


def gate(db: str, env: dict[str, str | None], *args: str, branch: str = "feat") -> Done:
    return invoke(env, "gate", "--db", db, "--branch", branch, "--against", "main", *args)


def no_token_anywhere(result: Done, *paths: Path) -> None:
    assert TOKEN not in result.stdout and TOKEN not in result.stderr
    for path in paths:
        if path.is_file():
            assert TOKEN not in path.read_text(encoding="utf-8"), path
        for file in path.glob("*") if path.is_dir() else ():
            assert TOKEN not in file.read_text(encoding="utf-8"), file


def test_github_gate_comments_once_and_edits_it_on_the_next_run(
    forge: FakeForge, db: str, tmp_path: Path
) -> None:
    for i in range(5):
        forge.add_comment("o/r", 7, f"review comment {i}")
    env = github_env(forge, tmp_path)
    first = gate(db, env, "--comment")
    assert first.returncode == 1, first.stderr
    assert "perfgate: comment created on PR #7" in first.stderr
    assert f"perfgate: status failure set on {HEAD[:12]}" in first.stderr
    comments = forge.comments[("o/r", 7)]
    (mine,) = marked(comments)
    assert len(comments) == 6  # the marker comment is the 6th: page 3 at 2 per page
    assert "### ❌ perfgate: 1 regression in 2 benchmarks" in str(mine["body"])
    assert "testbed=cpu%3AXeon" in str(mine["body"]).splitlines()[0]
    (status,) = forge.statuses
    assert status["sha"] == HEAD and status["state"] == "failure"
    assert status["context"] == "perfgate/default"
    assert status["target_url"] == "https://github.com/o/r/actions/runs/99"
    assert len(status["description"]) <= 140 and "1 regression" in status["description"]
    forge.requests.clear()

    second = gate(db, env, "--comment")
    assert second.returncode == 1
    assert "perfgate: comment updated on PR #7" in second.stderr
    assert len(forge.comments[("o/r", 7)]) == 6 and marked(forge.comments[("o/r", 7)]) == [mine]
    gets = [r for r in forge.requests if r.method == "GET"]
    assert len(gets) == 3  # pages 1, 2, 3
    assert any(
        r.method == "PATCH" and r.path.endswith(f"/comments/{mine['id']}") for r in forge.requests
    )
    assert not any(r.method == "POST" and r.path.endswith("/comments") for r in forge.requests)
    summary = tmp_path / "summary.md"
    assert summary.read_text(encoding="utf-8").count("<!-- perfgate:report ") == 2
    no_token_anywhere(second, summary)
    assert TOKEN not in forge.all_text()


def test_a_person_quoting_the_comment_is_not_mistaken_for_it(
    forge: FakeForge, db: str, tmp_path: Path
) -> None:
    env = github_env(forge, tmp_path)
    assert gate(db, env, "--comment").returncode == 1
    (mine,) = marked(forge.comments[("o/r", 7)])
    quoted = "\n".join(f"> {line}" for line in str(mine["body"]).splitlines()[:3])
    human = forge.add_comment("o/r", 7, f"{quoted}\n\nIs this real?")
    forge.comments[("o/r", 7)].reverse()  # the quote now comes first
    again = gate(db, env, "--comment")
    assert again.returncode == 1 and "comment updated on PR #7" in again.stderr
    bodies = {c["id"]: c["body"] for c in forge.comments[("o/r", 7)]}
    assert bodies[human["id"]] == f"{quoted}\n\nIs this real?"
    assert any(r.method == "PATCH" and r.path.endswith(f"/comments/{mine['id']}")
               for r in forge.requests)  # fmt: skip


def test_gitlab_gate_upserts_one_mr_note_and_a_status(forge: FakeForge, db: str) -> None:
    for i in range(5):
        forge.add_note("grp/proj", 3, f"note {i}")
    env = gitlab_env(forge)
    for expected in ("created", "updated"):
        result = gate(db, env, "--comment")
        assert result.returncode == 1, result.stderr
        assert f"perfgate: comment {expected} on MR !3" in result.stderr
    notes = forge.notes[("grp/proj", 3)]
    assert len(notes) == 6 and len(marked(notes)) == 1
    assert [s["state"] for s in forge.statuses] == ["failed", "failed"]
    assert forge.statuses[0]["name"] == "perfgate/default" and forge.statuses[0]["sha"] == HEAD
    assert any(r.method == "PUT" for r in forge.requests)
    assert all(r.headers.get("private-token") == TOKEN for r in forge.requests)


def test_comment_mode_skips_a_new_comment_but_keeps_an_old_one_current(
    forge: FakeForge, db: str, tmp_path: Path
) -> None:
    env = github_env(forge, tmp_path)
    quiet = gate(db, env, "--comment", "--comment-mode", "regression", branch="calm")
    assert quiet.returncode == 0
    assert "comment skipped on PR #7 (comment mode regression)" in quiet.stderr
    assert ("o/r", 7) not in forge.comments
    assert forge.statuses[-1]["state"] == "success"
    loud = gate(db, env, "--comment", "--comment-mode", "regression")
    assert loud.returncode == 1 and "comment created" in loud.stderr
    fixed = gate(db, env, "--comment", "--comment-mode", "regression", branch="calm")
    assert "comment updated" in fixed.stderr  # a stale regression comment is not left behind
    (mine,) = marked(forge.comments[("o/r", 7)])
    assert "### ✅ perfgate: no change in 1 benchmark" in str(mine["body"])


def _fault_read_only(forge: FakeForge, env: dict[str, str | None]) -> None:
    env["GITHUB_TOKEN"] = "read-token-456"


def _fault_bad_token(forge: FakeForge, env: dict[str, str | None]) -> None:
    env["GITHUB_TOKEN"] = "wrong-token-789"


def _fault_5xx(forge: FakeForge, env: dict[str, str | None]) -> None:
    forge.fail("GET", r"/comments$", 500, times=99)
    forge.fail("POST", r"/statuses/", 502, times=99)


def _fault_hang(forge: FakeForge, env: dict[str, str | None]) -> None:
    forge.fail("GET", r"/comments$", hang_s=5.0, times=99)
    forge.fail("POST", r"/statuses/", hang_s=5.0, times=99)


def _fault_unreachable(forge: FakeForge, env: dict[str, str | None]) -> None:
    env["GITHUB_API_URL"] = "http://127.0.0.1:9"


def _fault_no_token(forge: FakeForge, env: dict[str, str | None]) -> None:
    env["GITHUB_TOKEN"] = None


FAULTS = {
    "403-read-only-token": (_fault_read_only, "403 Forbidden"),
    "401-bad-token": (_fault_bad_token, "401 Unauthorized"),
    "500-forever": (_fault_5xx, "gave up: 500"),
    "hang": (_fault_hang, "no response within"),
    "unreachable": (_fault_unreachable, "cannot connect"),
    "no-token": (_fault_no_token, "no token: set GITHUB_TOKEN"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize(("branch", "verdict_code"), [("feat", 1), ("calm", 0)])
def test_a_posting_failure_keeps_the_exit_code_and_the_report(
    forge: FakeForge, db: str, tmp_path: Path, fault: str, branch: str, verdict_code: int
) -> None:
    env = github_env(forge, tmp_path)
    setup, words = FAULTS[fault]
    setup(forge, env)
    out = tmp_path / "out"
    result = gate(db, env, "--comment", "--report-dir", str(out), "--json", branch=branch)
    assert result.returncode == verdict_code, result.stderr
    # Bounded, not timed: no request was tried more often than the retry policy allows.
    attempts = RetryPolicy.from_env({k: v for k, v in env.items() if v is not None}).attempts
    tries = Counter((r.method, r.path) for r in forge.requests)
    assert all(n <= attempts for n in tries.values()), tries
    assert json.loads(result.stdout)["failed"] is (verdict_code == 1)
    warnings = [x for x in result.stderr.splitlines() if x.startswith("perfgate: warning:")]
    assert warnings and all(words in w or "status" in w for w in warnings), result.stderr
    assert any(words in w for w in warnings)
    report = (out / "report.md").read_text(encoding="utf-8")
    assert report.startswith("<!-- perfgate:report project=default suite=default testbed=")
    target = json.loads((out / "target.json").read_text(encoding="utf-8"))
    assert target["number"] == 7 and target["sha"] == HEAD and target["repo"] == "o/r"
    assert target["state"] == ("failure" if verdict_code else "success")
    assert "perfgate:report" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    no_token_anywhere(result, out, tmp_path / "summary.md")
    assert ("o/r", 7) not in forge.comments and not forge.statuses


def test_posting_a_report_dir_without_a_token_is_a_setup_error(
    forge: FakeForge, db: str, tmp_path: Path
) -> None:
    """``comment --from`` in a job that was given no token (or no forge) cannot post: the job's
    setup is wrong, so exit 2 with one line saying what to set, not 3 (a forge that failed,
    worth a retry). The gate's own delivery keeps saying it as a warning (the faults above)."""
    out = tmp_path / "out"
    assert (
        gate(db, github_env(forge, tmp_path, GITHUB_TOKEN=""), "--report-dir", str(out)).returncode
        == 1
    )
    no_token = ci_env(GITHUB_ACTIONS="true", GITHUB_API_URL=forge.url)
    done = invoke(no_token, "comment", "--from", str(out), "--conclusion", "failure")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "perfgate: error: github: no token: set GITHUB_TOKEN"
    assert not forge.requests


def test_429_and_500_are_retried_and_then_posted(forge: FakeForge, db: str, tmp_path: Path) -> None:
    forge.fail("GET", r"/comments$", 429, headers={"Retry-After": "0.05"})
    forge.fail("POST", r"/comments$", 500)
    forge.fail("POST", r"/statuses/", 503)
    result = gate(db, github_env(forge, tmp_path), "--comment")
    assert result.returncode == 1 and "warning" not in result.stderr, result.stderr
    assert len(marked(forge.comments[("o/r", 7)])) == 1 and len(forge.statuses) == 1
    assert sum(r.method == "GET" for r in forge.requests) == 2


def test_fork_pr_report_dir_then_comment_from_a_privileged_job(
    forge: FakeForge, db: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    fork = github_env(forge, tmp_path, GITHUB_TOKEN="")
    written = gate(db, fork, "--report-dir", str(out))
    assert written.returncode == 1 and "warning" not in written.stderr
    assert not forge.requests  # the fork's job never calls the API
    target = json.loads((out / "target.json").read_text(encoding="utf-8"))
    assert set(target) >= {"forge", "repo", "number", "sha", "marker", "verdict", "state"}
    assert target["forge"] == "github" and target["verdict"] == "regression"

    # a tampered target cannot send the token elsewhere: the API URL comes from this job
    target["api_url"] = "http://127.0.0.1:9"
    (out / "target.json").write_text(json.dumps(target), encoding="utf-8")
    # the follow-up job: trusted head sha from workflow_run; the PR's head must match it
    forge.pulls[("o/r", 7)] = "f" * 40
    privileged = ci_env(GITHUB_ACTIONS="true", GITHUB_TOKEN=TOKEN, GITHUB_API_URL=forge.url)
    fork_job = ("--conclusion", "failure")  # github.event.workflow_run.conclusion
    wrong = invoke(privileged, "comment", "--from", str(out), "--expect-sha", "f" * 40, *fork_job)
    assert wrong.returncode == 2 and "not posted" in wrong.stderr
    forge.pulls[("o/r", 7)] = HEAD
    posted = invoke(privileged, "comment", "--from", str(out), "--expect-sha", HEAD, *fork_job)
    assert posted.returncode == 0, posted.stderr
    assert "perfgate: comment created on PR #7" in posted.stderr
    (mine,) = marked(forge.comments[("o/r", 7)])
    assert str(mine["body"]).splitlines()[0] == target["marker"]
    assert forge.statuses[-1]["state"] == "failure" and forge.statuses[-1]["sha"] == HEAD
    assert forge.statuses[-1]["context"] == "perfgate (fork PR)"
    again = invoke(privileged, "comment", "--from", str(out), *fork_job)
    assert "comment updated" in again.stderr and len(forge.comments[("o/r", 7)]) == 1

    denied = invoke(
        dict(privileged, GITHUB_TOKEN="read-token-456"), "comment", "--from", str(out), *fork_job
    )
    assert denied.returncode == 3
    assert denied.stderr.startswith("perfgate: error: comment not posted: GitHub: PATCH")
    assert "403 Forbidden" in denied.stderr
    no_token_anywhere(denied)


def test_comment_from_a_tampered_dir_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("hello @everyone\n")
    (out / "target.json").write_text(json.dumps({"format_version": 1, "marker": "x"}))
    result = invoke(ci_env(GITHUB_TOKEN=TOKEN), "comment", "--from", str(out), "--no-status")
    assert result.returncode == 2 and "not perfgate's marker" in result.stderr


def sha(i: int) -> str:
    return hashlib.sha1(str(i).encode()).hexdigest()


def main_runs(start: int, end: int, level: float) -> list[RunRecord]:
    """Runs on main with realistic commit ids (the first 8 digits differ)."""
    out = []
    for i in range(start, end):
        r = record(i, level)
        out.append(replace(r, git=replace(r.git, commit=sha(i))))
    return out


def test_nightly_alert_keeps_one_tracking_issue_and_reports_each_change_once(
    forge: FakeForge, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'n.db'}"
    env = github_env(forge, tmp_path)
    forge.issues["o/r"] = [
        {"number": 1, "title": "unrelated", "body": "x", "labels": [{"name": "perfgate"}]},
    ]

    def analyze() -> Done:
        return invoke(env, "history", "analyze", "--db", url, "--branch", "main", "--alert")

    fill(url, main_runs(0, 30, 20.0) + main_runs(30, 42, 24.0))
    first = analyze()
    assert first.returncode == 0, first.stderr
    assert "tracking issue 101 opened with 1 change point(s)" in first.stderr
    (issue,) = [i for i in forge.issues["o/r"] if i["number"] != 1]
    assert issue["labels"] == [{"name": "perfgate"}]
    assert issue["title"] == "perfgate: performance change points on main (default)"
    assert str(issue["body"]).count("🔴 regression") == 1
    assert f"{sha(29)[:8]}..{sha(30)[:8]}" in str(issue["body"])

    fill(url, main_runs(42, 50, 24.0))
    second = analyze()
    assert "no new change points to report (issue 101)" in second.stderr
    assert issue["comments"] == [] and not forge.comments.get(("o/r", 101))

    fill(url, main_runs(50, 62, 30.0))
    third = analyze()
    assert "tracking issue 101 updated with 1 new change point(s)" in third.stderr
    assert len(forge.issues["o/r"]) == 2  # still one tracking issue
    body = str(issue["body"])
    assert body.count("🔴 regression") == 2
    assert body.index(sha(49)[:8]) < body.index(sha(29)[:8])  # newest first
    (note,) = forge.comments[("o/r", 101)]
    assert sha(49)[:8] in str(note["body"]) and sha(29)[:8] not in str(note["body"])
    assert len(str(body).split("<!-- perfgate:reported ")[1].split("-->")[0].split()) == 2
    no_token_anywhere(third)


def test_nightly_alert_on_gitlab(forge: FakeForge, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'n.db'}"
    fill(url, [record(i, 20.0) for i in range(30)] + [record(i, 15.0) for i in range(30, 42)])
    env = gitlab_env(forge)
    args = ["history", "analyze", "--db", url, "--branch", "main", "--alert"]
    assert "opened with 1" in invoke(env, *args).stderr
    assert "no new change points" in invoke(env, *args).stderr
    (issue,) = forge.issues["grp/proj"]
    assert "🟢 improvement" in str(issue["description"]) and issue["labels"] == ["perfgate"]


def test_alert_failure_is_an_infrastructure_error(forge: FakeForge, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'n.db'}"
    fill(url, [record(i, 20.0) for i in range(12)])
    env = github_env(forge, tmp_path, GITHUB_TOKEN="wrong-token-789")
    result = invoke(env, "history", "analyze", "--db", url, "--branch", "main", "--alert")
    assert result.returncode == 3 and "401" in result.stderr
    assert "wrong-token-789" not in result.stderr
