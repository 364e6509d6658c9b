"""GitCode (AtomGit), the forge of the Ascend/CANN projects: the real gate and the nightly
alert posting over real HTTP to a loopback server that speaks the endpoints of GitCode's API
v5 that perfgate uses (tests/fake_forge.py). One comment per PR however often the gate runs,
one tracking issue, the token only ever in a header, and a forge that refuses or fails never
changes the gate's exit code."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_forge import FakeForge
from helpers import Done, creeping_runs, fill, perfgate, record

from perfgate.errors import ReportError, UsageError
from perfgate.reporters.forges import detect_forge, forge_named, forge_names, gitcode
from perfgate.reporters.forges.api import RetryPolicy

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "good-token-123"
HEAD = "c0ffee" + "0" * 34
MARK = "<!-- perfgate:report project=p suite=s testbed=t -->"


@pytest.fixture
def forge() -> Iterator[FakeForge]:
    with FakeForge(page_size=2) as server:
        yield server


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 's.db'}"
    runs = [record(i, 20.0, benchmark="a") for i in range(8)]
    runs += [record(50, 26.0, branch="feat", benchmark="a")]
    runs += [record(52, 20.0, branch="calm", benchmark="a")]
    fill(url, runs)
    return url


def gitcode_env(forge: FakeForge, **extra: str) -> dict[str, str | None]:
    """What ci/gitcode's template passes a step: the GITCODE_* variables, nothing else of
    any CI (the runner's own variables removed)."""
    env: dict[str, str | None] = {
        k: None
        for k in os.environ
        if k.startswith(("GITHUB_", "GITLAB_", "CI_", "RUNNER_", "GITCODE_", "ATOMGIT_"))
        or k in ("CI", "GITLAB_CI")
        or k.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    env.update(
        GITCODE_TOKEN=TOKEN,
        GITCODE_API_URL=forge.gitcode_url,
        GITCODE_REPOSITORY="ascend/op-plugin",
        GITCODE_PR_NUMBER="7",
        GITCODE_SHA=HEAD,
        PERFGATE_HTTP_BACKOFF_S="0.01",
        PERFGATE_HTTP_TIMEOUT_S="1",
        PERFGATE_HTTP_BUDGET_S="3",
    )
    env.update(extra)
    return env


def invoke(env: dict[str, str | None], *args: str) -> Done:
    return perfgate(None, *args, env=env)


def gate(db: str, env: dict[str, str | None], branch: str = "feat", *extra: str) -> Done:
    return invoke(
        env, "gate", "--db", db, "--branch", branch, "--against", "main", "--comment", *extra
    )


def ours(forge: FakeForge) -> list[dict[str, Any]]:
    return [
        c
        for c in forge.gitcode_comments.get(("ascend/op-plugin", 7), [])
        if str(c["body"]).startswith("<!-- perfgate:report ")
    ]


def leaks(forge: FakeForge, *results: Done) -> list[str]:
    """Every place the token showed up: outputs, bodies held, and request URLs."""
    where = [r.stdout + r.stderr for r in results] + [forge.all_text()]
    where += [f"{r.path}?{r.query}" for r in forge.requests]
    return [w for w in where if TOKEN in w]


def test_the_registry_knows_gitcode_and_reads_its_variables() -> None:
    assert "gitcode" in forge_names()
    lab = forge_named("gitcode")
    env = {
        "GITCODE_REPOSITORY": "ascend/op-plugin",
        "GITCODE_PR_NUMBER": "12",
        "GITCODE_SHA": HEAD,
    }
    assert detect_forge(env) is lab
    assert (lab.repo(env), lab.read_number(env), lab.read_sha(env)) == (
        "ascend/op-plugin",
        12,
        HEAD,
    )
    assert lab.api_url(env) == "https://api.gitcode.com/api/v5"
    assert lab.api_url({"GITCODE_API_URL": "https://gc.example/api/v5"}).startswith("https://gc")
    assert lab.token({"GITCODE_TOKEN": "a", "ATOMGIT_TOKEN": "b"}).variable == "GITCODE_TOKEN"
    assert lab.token({"ATOMGIT_TOKEN": "b"}).variable == "ATOMGIT_TOKEN"
    with pytest.raises(ReportError, match="gitcode: no token: set GITCODE_TOKEN or ATOMGIT_TOKEN"):
        lab.token({"GITHUB_TOKEN": "x"})
    assert lab.read_number({"GITCODE_PR_NUMBER": "7a"}) is None
    assert not lab.statuses
    with pytest.raises(UsageError, match="expected github or gitlab or gitcode"):
        forge_named("gitee")


def test_the_gate_upserts_one_comment_on_the_pr(forge: FakeForge, db: str) -> None:
    for i in range(5):  # two pages of reviewers' comments before perfgate's
        forge.add_gitcode_comment("ascend/op-plugin", 7, f"LGTM {i}")
    env = gitcode_env(forge)
    first = gate(db, env)
    assert first.returncode == 1, first.stderr  # a regression
    assert "comment created on PR !7" in first.stderr
    assert "no commit status on gitcode" in first.stderr
    assert "warning" not in first.stderr
    second = gate(db, env)
    assert second.returncode == 1, second.stderr
    assert "comment updated on PR !7" in second.stderr
    (mine,) = ours(forge)
    assert len(forge.gitcode_comments[("ascend/op-plugin", 7)]) == 6
    patch = [r for r in forge.requests if r.method == "PATCH"]
    assert [r.path for r in patch] == [
        f"/api/v5/repos/ascend/op-plugin/pulls/comments/{mine['id']}"
    ]
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in forge.requests)
    assert not any("access_token" in r.query for r in forge.requests)
    assert not forge.statuses
    assert leaks(forge, first, second) == []


def test_a_calm_pr_is_commented_too_and_passes(forge: FakeForge, db: str) -> None:
    result = gate(db, gitcode_env(forge), "calm")
    assert result.returncode == 0, result.stderr
    (mine,) = ours(forge)
    assert "regression" not in str(mine["body"]).splitlines()[0]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"GITCODE_TOKEN": "wrong-token-789"}, "401"),
        ({"GITCODE_REPOSITORY": "ascend/missing"}, None),
        ({"GITCODE_API_URL": "http://127.0.0.1:9/api/v5"}, "cannot connect"),
    ],
    ids=["401", "404", "unreachable"],
)
@pytest.mark.parametrize(("branch", "code"), [("feat", 1), ("calm", 0)])
def test_a_posting_problem_never_changes_the_exit_code(
    forge: FakeForge,
    db: str,
    change: dict[str, str],
    words: str | None,
    branch: str,
    code: int,
) -> None:
    env = gitcode_env(forge, **change)
    if "GITCODE_REPOSITORY" in change:
        forge.fail("GET", r"/ascend/missing/", 404, times=99)
    result = gate(db, env, branch)
    assert result.returncode == code, result.stderr
    warning = [x for x in result.stderr.splitlines() if x.startswith("perfgate: warning:")]
    assert len(warning) == 1 and "comment not posted: GitCode: GET" in warning[0], result.stderr
    if words:
        assert words in warning[0]
    else:
        assert "404" in warning[0] and "check the repository" in warning[0]
    assert "Traceback" not in result.stderr and leaks(forge, result) == []
    assert not ours(forge)


def test_5xx_is_retried_and_a_5xx_that_lasts_is_a_warning(forge: FakeForge, db: str) -> None:
    env = gitcode_env(forge)
    forge.fail("POST", r"/pulls/7/comments$", 502, times=1)
    forge.fail("POST", r"/pulls/7/comments$", 503, times=1)
    first = gate(db, env)
    assert first.returncode == 1 and "comment created" in first.stderr, first.stderr
    assert len(ours(forge)) == 1
    forge.fail("PATCH", r"/pulls/comments/", 500, times=99)
    env["PERFGATE_HTTP_ATTEMPTS"] = "2"
    second = gate(db, env)
    assert second.returncode == 1, second.stderr
    assert "comment not posted: GitCode: PATCH" in second.stderr and "gave up: 500" in second.stderr
    assert leaks(forge, first, second) == []


def test_the_nightly_alert_opens_one_issue_then_updates_it(
    forge: FakeForge, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'nightly.db'}"
    fill(url, creeping_runs(0, 160))
    env = gitcode_env(forge, GITCODE_PR_NUMBER="", GITCODE_SHA="")

    def analyze() -> Done:
        return invoke(env, "history", "analyze", "--db", url, "--branch", "main", "--alert")

    first = analyze()
    assert first.returncode == 0, first.stderr
    assert "tracking issue 1 opened with 1 drift (mlp step_time_ms: main is " in first.stderr
    (issue,) = forge.issues["ascend/op-plugin"]
    title = issue["title"]
    assert [x["name"] for x in issue["labels"]] == ["perfgate"]
    assert analyze().returncode == 0 and len(forge.issues["ascend/op-plugin"]) == 1

    step = [record(200 + i, 20.0 if i < 12 else 30.0, benchmark="b") for i in range(24)]
    fill(url, step)  # a new benchmark steps up: one more change point for the same issue
    third = analyze()
    assert third.returncode == 0, third.stderr
    assert "tracking issue 1 updated with 1 new change point(s)" in third.stderr
    (issue,) = forge.issues["ascend/op-plugin"]
    assert issue["title"] == title  # the API requires it on an edit; it is kept
    assert str(issue["body"]).count("(drift: main is ") == 1 and " b " in str(issue["body"])
    assert len(issue["comments"]) == 1
    assert leaks(forge, first, third) == []


def test_the_fork_flow_posts_a_labelled_comment_on_gitcode(
    forge: FakeForge, db: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    fork = gitcode_env(forge, GITCODE_TOKEN="")
    written = invoke(
        fork, "gate", "--db", db, "--branch", "feat", "--against", "main", "--report-dir", str(out)
    )
    assert written.returncode == 1, written.stderr
    assert not forge.requests
    forge.pulls[("ascend/op-plugin", 7)] = HEAD
    posted = invoke(
        gitcode_env(forge),
        "comment",
        "--from",
        str(out),
        "--expect-sha",
        HEAD,
        "--conclusion",
        "failure",
    )
    assert posted.returncode == 0, posted.stderr
    (mine,) = ours(forge)
    assert "unprivileged fork PR run" in str(mine["body"]).splitlines()[1]
    assert not forge.statuses


def test_the_poster_pages_until_a_short_page(forge: FakeForge) -> None:
    for i in range(4):
        forge.add_gitcode_comment("o/r", 3, f"comment {i}")
    client = gitcode.client_for(forge.gitcode_url, TOKEN, policy=RetryPolicy())
    reporter = gitcode.GitCodeReporter(client, "o/r")
    assert reporter.find_comment(3, MARK) is None
    pages = [r.query for r in forge.requests if r.method == "GET"]
    assert pages == ["per_page=100&page=1", "per_page=100&page=2", "per_page=100&page=3"]
    with pytest.raises(ReportError, match="not owner/name"):
        gitcode.GitCodeReporter(client, "just-a-name")


def test_the_pipeline_template_passes_what_perfgate_reads() -> None:
    path = ROOT / "ci" / "gitcode" / "perfgate-pr.yml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    (job,) = data["jobs"].values()
    (step,) = [s for s in job["steps"] if "--forge gitcode" in s.get("run", "")]
    env = step["env"]
    for name in ("GITCODE_TOKEN", "GITCODE_REPOSITORY", "GITCODE_PR_NUMBER", "GITCODE_SHA"):
        assert name in env, name
    assert env["GITCODE_TOKEN"].startswith("${{ secrets.")
    assert "--forge gitcode" in step["run"] and "${{" not in step["run"]
