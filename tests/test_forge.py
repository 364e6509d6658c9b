"""The forge HTTP client and the GitHub/GitLab posters against a real HTTP server on
loopback (tests/fake_forge.py): pagination, upsert by marker, retries and their limits,
errors that never carry the token."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fake_forge import FakeForge

from perfgate.errors import ConfigError, ReportError
from perfgate.reporters import github, gitlab
from perfgate.reporters.forge import ForgeClient, RetryPolicy

TOKEN = "good-token-123"
MARK = "<!-- perfgate:report project=p suite=s testbed=t -->"


class FakeTime:
    """Sleeps recorded, not slept; the clock advances by what was slept."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def forge() -> Iterator[FakeForge]:
    with FakeForge(page_size=2) as server:
        yield server


def gh(
    forge: FakeForge, token: str = TOKEN, fake: FakeTime | None = None, **policy: float
) -> github.GitHubReporter:
    fake = fake or FakeTime()
    client = github.client_for(
        forge.url,
        token,
        policy=RetryPolicy(**policy),  # type: ignore[arg-type]
        sleep=fake.sleep,
        clock=fake.clock,
    )
    return github.GitHubReporter(client, "o/r")


def test_github_finds_the_marker_comment_on_page_three_and_edits_it(forge: FakeForge) -> None:
    for i in range(4):
        forge.add_comment("o/r", 7, f"unrelated {i}")
    mine = forge.add_comment("o/r", 7, MARK + "\nold")
    forge.add_comment("o/r", 7, "after")
    reporter = gh(forge)
    assert reporter.upsert_comment(7, MARK, MARK + "\nnew") == "updated"
    assert mine["body"] == MARK + "\nnew"
    assert len(forge.comments[("o/r", 7)]) == 6
    pages = [r for r in forge.requests if r.method == "GET"]
    assert len(pages) == 3  # per_page=100 asked, 2 served: Link rel="next" followed twice
    patch = forge.requests[-1]
    assert (patch.method, patch.path) == ("PATCH", f"/repos/o/r/issues/comments/{mine['id']}")
    assert patch.headers["authorization"] == f"Bearer {TOKEN}"
    assert reporter.upsert_comment(8, MARK, MARK + "\nfirst") == "created"
    assert reporter.upsert_comment(9, MARK, "x", create=False) == "skipped"
    assert ("o/r", 9) not in forge.comments


def test_gitlab_notes_follow_x_next_page_and_put(forge: FakeForge) -> None:
    for i in range(4):
        forge.add_note("grp/proj", 3, f"note {i}")
    mine = forge.add_note("grp/proj", 3, MARK)
    client = gitlab.client_for(forge.gitlab_url, TOKEN, policy=RetryPolicy())
    reporter = gitlab.GitLabReporter(client, "grp/proj")
    assert reporter.upsert_comment(3, MARK, MARK + "\nnew") == "updated"
    assert mine["body"] == MARK + "\nnew"
    gets = [r.path for r in forge.requests if r.method == "GET"]
    assert gets == ["/api/v4/projects/grp%2Fproj/merge_requests/3/notes"] * 3
    assert forge.requests[-1].headers["private-token"] == TOKEN
    reporter.set_status("abc", "failure", context="perfgate/p", description="d" * 300)
    assert forge.statuses[-1]["state"] == "failed"
    assert forge.statuses[-1]["name"] == "perfgate/p"
    assert len(forge.statuses[-1]["description"]) == 140


def test_gitlab_job_token_header(forge: FakeForge) -> None:
    client = gitlab.client_for(forge.gitlab_url, TOKEN, job_token=True)
    gitlab.GitLabReporter(client, "9").upsert_comment(1, MARK, MARK)
    assert forge.requests[-1].headers["job-token"] == TOKEN
    assert "private-token" not in forge.requests[-1].headers


def test_429_honours_retry_after(forge: FakeForge) -> None:
    forge.fail("GET", r"/comments$", 429, headers={"Retry-After": "7"})
    fake = FakeTime()
    client = github.client_for(forge.url, TOKEN, sleep=fake.sleep, clock=fake.clock)
    assert github.GitHubReporter(client, "o/r").upsert_comment(1, MARK, MARK) == "created"
    assert fake.sleeps == [7.0]


def test_github_secondary_rate_limit_403_is_retried(forge: FakeForge) -> None:
    forge.fail("POST", r"/statuses/", 403, headers={"Retry-After": "2"})
    fake = FakeTime()
    client = github.client_for(forge.url, TOKEN, sleep=fake.sleep, clock=fake.clock)
    github.GitHubReporter(client, "o/r").set_status(
        "abc", "success", context="perfgate/p", description="ok"
    )
    assert fake.sleeps == [2.0] and forge.statuses[-1]["state"] == "success"


def test_retry_after_beyond_the_budget_gives_up_at_once(forge: FakeForge) -> None:
    forge.fail("GET", r"/comments$", 429, headers={"Retry-After": "3600"})
    fake = FakeTime()
    client = github.client_for(
        forge.url, TOKEN, policy=RetryPolicy(budget_s=60), sleep=fake.sleep, clock=fake.clock
    )
    with pytest.raises(ReportError, match="429.*would pass the 60 s budget"):
        github.GitHubReporter(client, "o/r").find_comment(1, MARK)
    assert fake.sleeps == []


def test_5xx_backs_off_exponentially_then_succeeds(forge: FakeForge) -> None:
    forge.fail("POST", r"/comments$", 502, times=2)
    forge.fail("POST", r"/comments$", 503, times=1)
    fake = FakeTime()
    assert gh(forge, fake=fake, backoff_s=0.5).upsert_comment(1, MARK, MARK) == "created"
    assert fake.sleeps == [0.5, 1.0, 2.0]


def test_5xx_forever_gives_up_after_the_attempts(forge: FakeForge) -> None:
    forge.fail("GET", r"/comments$", 500, times=99)
    reporter = gh(forge, attempts=3, backoff_s=0.1)
    with pytest.raises(
        ReportError, match=r"GitHub: GET /repos/o/r/issues/1/comments: gave up: 500"
    ):
        reporter.find_comment(1, MARK)
    assert sum(r.method == "GET" for r in forge.requests) == 3


@pytest.mark.parametrize(
    ("token", "method", "status", "words"),
    [
        ("wrong-token-789", "GET", 401, "Bad credentials"),
        ("read-token-456", "POST", 403, "Resource not accessible by integration"),
    ],
)
def test_auth_failures_are_not_retried_and_hide_the_token(
    forge: FakeForge, token: str, method: str, status: int, words: str
) -> None:
    reporter = gh(forge, token=token)
    with pytest.raises(ReportError) as info:
        reporter.upsert_comment(1, MARK, MARK)
    message = str(info.value)
    assert f"{status}" in message and words in message and "lacks permission" in message
    assert token not in message
    assert len([r for r in forge.requests if r.method == method]) == 1


def test_404_names_what_to_check(forge: FakeForge) -> None:
    with pytest.raises(ReportError, match="404 Not Found.*check the repository"):
        gh(forge).pull_head_sha(5)
    with pytest.raises(ReportError):
        github.GitHubReporter(github.client_for(forge.url, TOKEN), "not a repo")


def test_a_hanging_response_times_out_within_the_budget(forge: FakeForge) -> None:
    forge.fail("GET", r"/comments$", hang_s=5.0, times=9)
    client = github.client_for(
        forge.url, TOKEN, policy=RetryPolicy(timeout_s=0.2, budget_s=0.7, backoff_s=0.05)
    )
    start = time.monotonic()
    with pytest.raises(ReportError, match="no response within"):
        github.GitHubReporter(client, "o/r").find_comment(1, MARK)
    assert time.monotonic() - start < 2.0


def test_unreachable_server_is_a_report_error(forge: FakeForge) -> None:
    client = github.client_for(
        "http://127.0.0.1:9", TOKEN, policy=RetryPolicy(attempts=2, backoff_s=0.01)
    )
    with pytest.raises(ReportError, match="cannot connect"):
        github.GitHubReporter(client, "o/r").find_comment(1, MARK)


def test_links_outside_the_api_are_not_followed(forge: FakeForge) -> None:
    client = ForgeClient("GitHub", forge.url + "/api/v3", headers={}, secret=TOKEN)
    with pytest.raises(ReportError, match="outside"):
        client.request("GET", "https://evil.example/repos/o/r/issues/1/comments?page=2")


def test_retry_policy_from_env() -> None:
    policy = RetryPolicy.from_env(
        {
            "PERFGATE_HTTP_BACKOFF_S": "0.01",
            "PERFGATE_HTTP_TIMEOUT_S": "2",
            "PERFGATE_HTTP_ATTEMPTS": "2",
        }
    )
    assert (policy.backoff_s, policy.timeout_s, policy.attempts, policy.budget_s) == (
        0.01,
        2.0,
        2,
        60.0,
    )
    with pytest.raises(ConfigError, match="PERFGATE_HTTP_BUDGET_S"):
        RetryPolicy.from_env({"PERFGATE_HTTP_BUDGET_S": "soon"})
