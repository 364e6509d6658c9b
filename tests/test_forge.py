"""The forge registry, the HTTP client and the GitHub/GitLab posters against a real HTTP server on
loopback (tests/fake_forge.py): pagination, upsert by marker, retries and their limits,
errors that never carry the token."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_forge import FakeForge

from perfgate.errors import ConfigError, ExitCode, ReportError, UsageError
from perfgate.reporters.forges import FORGES, detect_forge, forge_named, forge_names, github, gitlab
from perfgate.reporters.forges.http import ForgeClient, RetryPolicy

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


class TimedSession:
    """The client's session, on a fake clock: a try that times out moves the clock by the
    timeout it was given (the socket really waits that long on loopback; the test never reads
    the wall clock)."""

    def __init__(self, session: Any, fake: FakeTime) -> None:
        self.session = session
        self.fake = fake
        self.timeouts: list[float] = []

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        self.timeouts.append(kwargs["timeout"])
        try:
            return self.session.request(method, url, **kwargs)
        except Exception:
            self.fake.now += kwargs["timeout"]
            raise


def test_a_hanging_response_times_out_within_the_budget(
    forge: FakeForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    forge.fail("GET", r"/comments$", hang_s=5.0, times=9)
    fake = FakeTime()
    policy = RetryPolicy(timeout_s=0.2, budget_s=0.7, backoff_s=0.05)
    client = github.client_for(forge.url, TOKEN, policy=policy, sleep=fake.sleep, clock=fake.clock)
    session = TimedSession(client._session, fake)
    monkeypatch.setattr(client, "_session", session)
    with pytest.raises(ReportError, match="gave up: no response within"):
        github.GitHubReporter(client, "o/r").find_comment(1, MARK)
    # 0.2 + 0.05 + 0.2 + 0.1 + 0.15 = 0.7: the last try gets what is left of the budget and the
    # next wait (0.2 s) would pass it.
    assert session.timeouts == pytest.approx([0.2, 0.2, 0.15])
    assert fake.sleeps == [0.05, 0.1]
    assert sum(session.timeouts) + sum(fake.sleeps) == pytest.approx(policy.budget_s)
    assert len([r for r in forge.requests if r.method == "GET"]) == 3


def test_unreachable_server_is_a_report_error(forge: FakeForge) -> None:
    client = github.client_for(
        "http://127.0.0.1:9", TOKEN, policy=RetryPolicy(attempts=2, backoff_s=0.01)
    )
    with pytest.raises(ReportError, match="cannot connect"):
        github.GitHubReporter(client, "o/r").find_comment(1, MARK)


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_an_error_and_the_token_never_follows_it(
    forge: FakeForge, status: int
) -> None:
    with FakeForge() as elsewhere:
        target = f"{elsewhere.url}/repos/o/r/issues/1/comments"
        forge.fail("GET", r"/comments$", status, headers={"Location": target})
        with pytest.raises(ReportError) as info:
            gh(forge).find_comment(1, MARK)
        assert not elsewhere.requests  # not followed, with or without the token
    message = str(info.value)
    assert f"GET /repos/o/r/issues/1/comments: {status} " in message
    assert "not followed" in message and "127.0.0.1" in message and TOKEN not in message
    assert len([r for r in forge.requests if r.method == "GET"]) == 1  # nor retried


def test_proxies_come_from_the_environment(
    forge: FakeForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forward proxy from ``http_proxy`` (the fake forge answers absolute-URI requests, as a
    proxy would), and ``no_proxy`` bypasses it - as urllib did before."""
    with FakeForge() as proxy:
        monkeypatch.setenv("http_proxy", proxy.url)
        api = "http://forge.perfgate.invalid"
        client = github.client_for(api, TOKEN, policy=RetryPolicy(attempts=1))
        assert github.GitHubReporter(client, "o/r").upsert_comment(1, MARK, MARK) == "created"
        assert [r.method for r in proxy.requests] == ["GET", "POST"]
        assert proxy.comments[("o/r", 1)][0]["body"] == MARK
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        direct = github.client_for(forge.url, TOKEN, policy=RetryPolicy(attempts=1))
        github.GitHubReporter(direct, "o/r").upsert_comment(2, MARK, MARK)
        assert len(proxy.requests) == 2 and ("o/r", 2) in forge.comments


def test_no_netrc_credentials_are_added(
    forge: FakeForge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine 127.0.0.1 login someone password hunter2\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    gh(forge).upsert_comment(1, MARK, MARK)
    assert {r.headers["authorization"] for r in forge.requests} == {f"Bearer {TOKEN}"}


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


def test_the_registry_lists_its_forges_and_nothing_is_a_fallback() -> None:
    assert forge_names() == ("github", "gitlab", "gitcode")
    assert [forge_named(name).name for name in forge_names()] == list(forge_names())
    with pytest.raises(
        UsageError, match="unknown forge 'gitea': expected github or gitlab or gitcode"
    ) as info:
        forge_named("gitea")
    assert info.value.exit_code is ExitCode.USAGE and int(info.value.exit_code) == 2
    assert detect_forge({"GITHUB_ACTIONS": "true"}) is forge_named("github")
    assert detect_forge({"GITLAB_CI": "true"}) is forge_named("gitlab")
    assert detect_forge({"CI": "true"}) is None


def test_each_forge_reads_its_own_ci_variables(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text('{"pull_request": {"number": 7, "head": {"sha": "head1"}}}')
    gh_env = {"GITHUB_EVENT_PATH": str(event), "GITHUB_SHA": "merge1", "GITHUB_REPOSITORY": "o/r"}
    hub = forge_named("github")
    assert (hub.read_number(gh_env), hub.read_sha(gh_env), hub.repo(gh_env)) == (7, "head1", "o/r")
    assert hub.api_url(gh_env) == "https://api.github.com"
    assert hub.read_number({"GITHUB_REF": "refs/pull/12/merge"}) == 12
    assert hub.change_ref(7) == "PR #7" and hub.max_chars == 65_536
    lab = forge_named("gitlab")
    gl_env = {
        "CI_MERGE_REQUEST_IID": "3",
        "CI_COMMIT_SHA": "c1",
        "CI_API_V4_URL": "https://g/api/v4",
    }
    assert (lab.read_number(gl_env), lab.read_sha(gl_env), lab.api_url(gl_env)) == (
        3,
        "c1",
        "https://g/api/v4",
    )
    assert lab.change_ref(3) == "MR !3" and lab.max_chars == 1_000_000
    assert {forge.name for forge in FORGES} == set(forge_names())


def test_tokens_come_from_the_forge_s_variables_in_order() -> None:
    lab = forge_named("gitlab")
    assert lab.token({"GITLAB_TOKEN": "a", "CI_JOB_TOKEN": "b"}).variable == "GITLAB_TOKEN"
    assert lab.token({"CI_JOB_TOKEN": "b"}).variable == "CI_JOB_TOKEN"
    with pytest.raises(ReportError, match="gitlab: no token: set GITLAB_TOKEN .* or CI_JOB_TOKEN"):
        lab.token({"GITHUB_TOKEN": "x"})
    with pytest.raises(ReportError, match="github: no token: set GITHUB_TOKEN"):
        forge_named("github").token({"GITLAB_TOKEN": "x"})


def test_a_job_token_is_sent_as_one(forge: FakeForge) -> None:
    poster = forge_named("gitlab").poster(
        forge.gitlab_url, "9", {"CI_JOB_TOKEN": TOKEN}, RetryPolicy()
    )
    poster.upsert_comment(1, MARK, MARK)
    assert forge.requests[-1].headers["job-token"] == TOKEN
    assert poster.head_sha(1) is None


def test_github_primary_rate_limit_waits_for_the_reset_or_gives_up_at_once(
    forge: FakeForge,
) -> None:
    """A 403 with ``X-RateLimit-Remaining: 0`` is retried at ``X-RateLimit-Reset`` (epoch
    seconds, on the wall clock); a reset past the budget ends the request without a wait."""
    forge.fail(
        "GET",
        r"/comments$",
        403,
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1005"},
    )
    fake = FakeTime()
    client = github.client_for(
        forge.url, TOKEN, sleep=fake.sleep, clock=fake.clock, wall_clock=lambda: 1000.0
    )
    assert github.GitHubReporter(client, "o/r").find_comment(1, MARK) is None
    assert fake.sleeps == [5.0]
    forge.fail(
        "GET",
        r"/comments$",
        403,
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "9999"},
    )
    with pytest.raises(ReportError, match=r"403 Forbidden \(injected 403\); the next try .*budget"):
        github.GitHubReporter(client, "o/r").find_comment(1, MARK)
    assert fake.sleeps == [5.0]


def test_retry_after_as_an_http_date(forge: FakeForge) -> None:
    """``Retry-After`` may be a date (urllib3's Retry reads it against the wall clock)."""
    when = email.utils.formatdate(time.time() + 3600, usegmt=True)
    forge.fail("POST", r"/statuses/", 503, headers={"Retry-After": when})
    fake = FakeTime()
    client = github.client_for(forge.url, TOKEN, sleep=fake.sleep, clock=fake.clock)
    with pytest.raises(ReportError, match=r"503 .*would pass the 60 s budget"):
        github.GitHubReporter(client, "o/r").set_status(
            "abc", "success", context="c", description="d"
        )
    assert fake.sleeps == []


def test_an_answer_is_json_at_most_64_levels_deep() -> None:
    # the depth json.loads may recurse to on a forge's answer: 64 levels decode, 65 are
    # refused before json.loads runs, brackets inside strings do not count, and an empty
    # body is no data (a 204)
    from perfgate.reporters.forges.api import MAX_NESTING, decode

    deepest = "[" * MAX_NESTING + "]" * MAX_NESTING
    assert decode(deepest.encode()) == _nested(MAX_NESTING)
    with pytest.raises(ValueError, match="nests deeper than 64 levels"):
        decode(("[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1)).encode())
    quoted = '{"body": "' + "[{" * 200 + '\\" ]"}'
    assert decode(quoted.encode()) == {"body": "[{" * 200 + '" ]'}
    assert decode(b"  \n") is None
    with pytest.raises(ValueError, match="is not JSON"):
        decode(b"<html>rate limited</html>")


def _nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value
