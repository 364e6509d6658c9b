"""``perfgate comment --from DIR`` posts a report directory an unprivileged fork job wrote,
with the base repository's write token, to a real HTTP forge on loopback
(tests/fake_forge.py). Nothing in the directory decides what that token vouches for: the
status has perfgate's own context and the state of ``--conclusion``, the Markdown is
sanitised (no raw HTML, images or off-forge links), and every field of ``target.json`` is
checked, a bad one being one line and exit 2 before any request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
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

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- perfgate:report project=default suite=default testbed=fork -->"


@pytest.fixture
def forge() -> Iterator[FakeForge]:
    with FakeForge() as server:
        yield server


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 's.db'}"
    runs = [record(i, 20.0, benchmark="a") for i in range(8)]
    runs.append(record(50, 26.0, branch="feat", benchmark="a"))
    fill(url, runs)
    return url


def invoke(env: dict[str, str | None], *args: str) -> Done:
    return perfgate(None, *args, env=env)


def privileged(forge: FakeForge, **extra: str) -> dict[str, str | None]:
    """The follow-up job: its own CI variables, a write token, no fork event."""
    values = dict(
        GITHUB_ACTIONS="true",
        GITHUB_TOKEN=TOKEN,
        GITHUB_API_URL=forge.url,
        GITHUB_SERVER_URL="https://github.com",
    )
    values.update(extra)
    return ci_env(**values)


def fork_dir(forge: FakeForge, db: str, tmp_path: Path) -> Path:
    """What a real fork job's ``gate --report-dir`` wrote (a regression on PR #7)."""
    out = tmp_path / "out"
    fork = github_env(forge, tmp_path, GITHUB_TOKEN="")
    written = invoke(
        fork, "gate", "--db", db, "--branch", "feat", "--against", "main", "--report-dir", str(out)
    )
    assert written.returncode == 1, written.stderr
    assert not forge.requests
    return out


def edit_target(out: Path, **changes: Any) -> dict[str, Any]:
    target: dict[str, Any] = json.loads((out / "target.json").read_text(encoding="utf-8"))
    target.update(changes)
    for key in [k for k, v in changes.items() if v is ...]:
        del target[key]
    (out / "target.json").write_text(json.dumps(target), encoding="utf-8")
    return target


def comment_from(env: dict[str, str | None], out: Path, *args: str) -> Done:
    return invoke(env, "comment", "--from", str(out), "--expect-sha", HEAD, *args)


@pytest.mark.parametrize(("conclusion", "state"), [("failure", "failure"), ("success", "success")])
def test_a_forged_state_and_context_are_not_posted(
    forge: FakeForge, db: str, tmp_path: Path, conclusion: str, state: str
) -> None:
    out = fork_dir(forge, db, tmp_path)
    edit_target(
        out,
        state="success" if state == "failure" else "failure",
        context="ci/required-build",
        description="All required checks passed",
        job_url="https://evil.example/phish",
    )
    forge.pulls[("o/r", 7)] = HEAD
    result = comment_from(privileged(forge), out, "--conclusion", conclusion)
    assert result.returncode == 0, result.stderr
    (status,) = forge.statuses
    assert status["context"] == "perfgate (fork PR)"
    assert status["state"] == state and status["sha"] == HEAD
    assert "unprivileged" in status["description"]
    assert "required" not in status["description"].replace("not a trusted", "")
    assert "evil" not in json.dumps(status)  # an off-forge job URL is dropped
    (mine,) = marked(forge.comments[("o/r", 7)])
    first, label = str(mine["body"]).splitlines()[:2]
    assert first.startswith("<!-- perfgate:report project=default suite=default")
    assert "unprivileged fork PR run" in label and f"conclusion: {conclusion}" in label


@pytest.mark.parametrize("forged", [..., None, 7, "ok"])
def test_the_files_state_context_and_description_are_never_read(
    forge: FakeForge, db: str, tmp_path: Path, forged: Any
) -> None:
    """Missing, null or nonsense: the fork's own words about its status change nothing."""
    out = fork_dir(forge, db, tmp_path)
    edit_target(out, state=forged, context=forged, description=forged, failed=False)
    forge.pulls[("o/r", 7)] = HEAD
    result = comment_from(privileged(forge), out, "--conclusion", "failure")
    assert result.returncode == 0, result.stderr
    (status,) = forge.statuses
    assert (status["state"], status["context"]) == ("failure", "perfgate (fork PR)")
    assert status["description"].startswith("From an unprivileged fork PR run (job failure)")


def test_other_conclusions_and_a_missing_one(forge: FakeForge, db: str, tmp_path: Path) -> None:
    out = fork_dir(forge, db, tmp_path)
    forge.pulls[("o/r", 7)] = HEAD
    env = privileged(forge)
    missing = comment_from(env, out)
    assert missing.returncode == 2 and len(missing.stderr.splitlines()) == 1
    assert "--conclusion" in missing.stderr and not forge.requests
    bogus = comment_from(env, out, "--conclusion", "great")
    assert bogus.returncode == 2 and len(bogus.stderr.splitlines()) == 1
    assert "--conclusion: expected success|failure" in bogus.stderr and not forge.requests
    cancelled = comment_from(env, out, "--conclusion", "cancelled")
    assert cancelled.returncode == 0, cancelled.stderr
    assert forge.statuses[-1]["state"] == "error"
    no_status = comment_from(env, out, "--no-status")
    assert no_status.returncode == 0 and len(forge.statuses) == 1
    assert "comment updated" in no_status.stderr


EVIL = """\
<img src="https://evil.example/x.png" onerror="alert(1)">
![x](http://evil.example/pixel.png) and ![y][ref]
[click](http://evil.example/login) and [click2][ref] and [ref]
[ref]: http://evil.example/ref
<script>alert(document.cookie)</script>
<a href="http://evil.example">a</a> <!-- hidden --> <http://evil.example/auto>
bare http://evil.example/bare and www.evil.example too, cc @everyone #1
[the PR](https://github.com/o/r/pull/7) [api](https://github.com@evil.example/)
<details><summary>Details</summary>

| a | b |
|---|---|
| 1 | 2 |
</details>
"""


def test_the_forks_markdown_is_sanitised(forge: FakeForge, db: str, tmp_path: Path) -> None:
    out = fork_dir(forge, db, tmp_path)
    marker = json.loads((out / "target.json").read_text(encoding="utf-8"))["marker"]
    (out / "report.md").write_text(marker + "\n" + EVIL, encoding="utf-8")
    forge.pulls[("o/r", 7)] = HEAD
    result = comment_from(privileged(forge), out, "--conclusion", "failure")
    assert result.returncode == 0, result.stderr
    (mine,) = marked(forge.comments[("o/r", 7)])
    body = str(mine["body"])
    first, rest = body.split("\n", 1)
    assert first == marker  # perfgate's own hidden marker line is kept
    for bad in ("<img", "<script", "<a ", "<!--", "<http", "](http://evil", "http://evil"):
        assert bad not in rest, bad
    assert "www.evil" not in rest and "@everyone" not in rest
    assert "![" not in rest and "[ref]" not in rest and "[click" not in rest
    assert "&lt;script>" in rest and "click" in rest  # escaped text, not gone
    assert "[the PR](https://github.com/o/r/pull/7)" in rest  # the forge's own host
    assert "](https://github.com@" not in rest  # a user-info trick is not the forge's host
    assert "<details><summary>Details</summary>" in rest and "</details>" in rest
    assert "| 1 | 2 |" in rest


def test_a_real_report_keeps_its_shape(forge: FakeForge, db: str, tmp_path: Path) -> None:
    out = fork_dir(forge, db, tmp_path)
    original = (out / "report.md").read_text(encoding="utf-8")
    forge.pulls[("o/r", 7)] = HEAD
    assert comment_from(privileged(forge), out, "--conclusion", "failure").returncode == 0
    (mine,) = marked(forge.comments[("o/r", 7)])
    body = str(mine["body"])
    assert body.splitlines()[0] == original.splitlines()[0]
    assert body.splitlines()[1].startswith("> **Produced by an unprivileged fork PR run**")
    assert ("<details>" in body) == ("<details>" in original)
    assert ("[CI job](https://github.com/" in body) == ("[CI job](https://github.com/" in original)
    assert body.count("\n|") == original.count("\n|")  # the tables are intact


def test_gitlab_gets_perfgates_context_too(forge: FakeForge, db: str, tmp_path: Path) -> None:
    out = fork_dir(forge, db, tmp_path)
    edit_target(out, forge="gitlab", repo="grp/proj", number=3, context="required")
    env = gitlab_env(forge, CI_SERVER_URL="https://gitlab.example")
    result = invoke(env, "comment", "--from", str(out), "--conclusion", "failure")
    assert result.returncode == 0, result.stderr
    (status,) = forge.statuses
    assert status["forge"] == "gitlab" and status["state"] == "failed"
    assert "fork PR" in json.dumps(status) and "required" not in status.get("name", "")


BAD_FIELDS = [
    ({"mode": "bogus"}, "mode"),
    ({"mode": 3}, "mode"),
    ({"number": 0}, "number"),
    ({"number": -7}, "number"),
    ({"number": "7"}, "number"),
    ({"number": True}, "number"),
    ({"number": 7.0}, "number"),
    ({"sha": "not-hex-at-all"}, "sha"),
    ({"sha": "abc12"}, "sha"),
    ({"sha": "a" * 41}, "sha"),
    ({"sha": 123}, "sha"),
    ({"forge": "bitbucket"}, "forge"),
    ({"forge": 1}, "forge"),
    ({"repo": ["o/r"]}, "repo"),
    ({"repo": "o/r; rm -rf /"}, "repo"),
    ({"marker": "<!-- evil -->"}, "marker"),
    ({"verdict": "great"}, "verdict"),
    ({"post": "yes"}, "post"),
    ({"failed": 1}, "failed"),
    ({"job_url": 5}, "job_url"),
    ({"job_url": "https://github.com/" + "x" * 3000}, "job_url"),
    ({"marker": ...}, "'marker'"),
    ({"format_version": 2}, "version 1"),
]


@pytest.mark.parametrize(("change", "field"), BAD_FIELDS, ids=[f"{c}" for c, _ in BAD_FIELDS])
def test_a_bad_field_is_one_line_exit_2_naming_it(
    forge: FakeForge, db: str, tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    out = fork_dir(forge, db, tmp_path)
    edit_target(out, **change)
    result = comment_from(privileged(forge), out, "--conclusion", "success")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("perfgate: error: "), result.stderr
    assert "target.json" in lines[0] and field in lines[0], lines[0]
    assert "Traceback" not in result.stderr
    assert not forge.requests  # refused before the token was used


def test_not_json_and_not_an_object(forge: FakeForge, db: str, tmp_path: Path) -> None:
    out = fork_dir(forge, db, tmp_path)
    for text in ("{", "[1, 2]", '"x"'):
        (out / "target.json").write_text(text, encoding="utf-8")
        result = comment_from(privileged(forge), out, "--conclusion", "success")
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert not forge.requests


def test_the_fork_workflow_passes_the_runs_conclusion() -> None:
    data = yaml.safe_load((ROOT / "ci" / "github" / "perfgate-fork-comment.yml").read_text())
    (step,) = [
        s for s in data["jobs"]["comment"]["steps"] if "perfgate comment" in s.get("run", "")
    ]
    assert step["env"]["CONCLUSION"] == "${{ github.event.workflow_run.conclusion }}"
    assert '--conclusion "$CONCLUSION"' in step["run"]
    assert "${{" not in step["run"]  # nothing the fork controls is interpolated into the script
