"""A forge that misbehaves on the wire (issue 2.6 B): a body that drips, a body that never
ends, answers of the wrong shape, pagination that goes on and on. Each is a ReportError from
the client (never another exception), so the gate prints a warning line and exits with its
verdict's code.

The server is a small loopback HTTP server in this file; each route answers in one of a few
styles. Deadlines are asserted on a fake clock that ticks on every reading (the client
checks it before each try and between body chunks); where the real CLI runs, the deadlines
are tiny and only the outcome is asserted, never the elapsed time.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from helpers import Done, fill, perfgate, record

from perfgate.errors import ReportError
from perfgate.reporters.forges import github, gitlab
from perfgate.reporters.forges.api import RetryPolicy, api_int
from perfgate.reporters.forges.http import ForgeClient

TOKEN = "good-token-123"
HEAD = "c0ffee" + "0" * 34
MARK = "<!-- perfgate:report project=p suite=s testbed=t -->"

Behaviour = Callable[["_Handler"], None]


@dataclass
class Server:
    """``routes``: (method, path regex) -> how to answer; the first match wins, else 404.
    ``requests``: (method, path) of every request seen."""

    routes: list[tuple[str, re.Pattern[str], Behaviour]] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def on(self, method: str, path: str, behaviour: Behaviour) -> None:
        self.routes.insert(0, (method, re.compile(path), behaviour))

    def count(self, method: str) -> int:
        return sum(m == method for m, _ in self.requests)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _any(self) -> None:
        state: Server = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        self.body = json.loads(self.rfile.read(length)) if length else None
        path = urlsplit(self.path).path
        state.requests.append((self.command, path))
        for method, pattern, behaviour in state.routes:
            if method == self.command and pattern.search(path):
                try:
                    behaviour(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True
                return
        json_answer(404, {"message": "Not Found"})(self)

    do_GET = do_POST = do_PATCH = do_PUT = _any


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.state = state  # type: ignore[attr-defined]
    host, port = httpd.server_address[:2]
    state.url = f"http://{host!s}:{port}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02})
    thread.daemon = True
    thread.start()
    try:
        yield state
    finally:
        state.stop.set()
        httpd.shutdown()
        httpd.server_close()


# -- how a route answers ------------------------------------------------------------------------


def json_answer(status: int, data: Any, headers: dict[str, str] | None = None) -> Behaviour:
    def answer(h: _Handler) -> None:
        raw(status, json.dumps(data).encode(), headers)(h)

    return answer


def raw(status: int, body: bytes, headers: dict[str, str] | None = None) -> Behaviour:
    def answer(h: _Handler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Connection", "close")  # as the handler closes it after each answer
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    return answer


def drip(every_s: float = 0.02) -> Behaviour:
    """A 200 whose (valid JSON, blank-padded) body comes one byte at a time, for ever as far
    as any client deadline is concerned (a megabyte at ``every_s`` per byte)."""
    body = b"[]" + b" " * 1_000_000

    def answer(h: _Handler) -> None:
        state: Server = h.server.state
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.flush()
        for i in range(len(body)):
            if state.stop.wait(every_s):
                return
            h.wfile.write(body[i : i + 1])
            h.wfile.flush()

    return answer


def drip_headers(every_s: float = 0.02) -> Behaviour:
    """A status line and then headers, a byte at a time, never finished."""

    def answer(h: _Handler) -> None:
        state: Server = h.server.state
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        h.wfile.flush()
        line = b"X-Slow: " + b"a" * 60000
        for i in range(len(line)):
            if state.stop.wait(every_s):
                return
            h.wfile.write(line[i : i + 1])
            h.wfile.flush()

    return answer


def flood(chunk: int = 64 * 1024, most: int = 256 * 1024 * 1024) -> Behaviour:
    """A 200 with no length whose body never ends (up to ``most`` bytes, a safety bound)."""

    def answer(h: _Handler) -> None:
        state: Server = h.server.state
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(b"[")
        block = b" " * chunk
        for _ in range(most // chunk):
            if state.stop.is_set():
                return
            h.wfile.write(block)

    return answer


def endless_pages(every_s: float = 0.0) -> Behaviour:
    """One comment per page, and always a next page."""

    def answer(h: _Handler) -> None:
        state: Server = h.server.state
        page = int(dict(re.findall(r"(\w+)=(\w+)", urlsplit(h.path).query)).get("page", "1"))
        if every_s:
            state.stop.wait(every_s)
        path = urlsplit(h.path).path
        link = f'<{state.url}{path}?per_page=100&page={page + 1}>; rel="next"'
        item = {"id": page, "body": f"someone else's comment {page}"}
        json_answer(200, [item], {"Link": link})(h)

    return answer


# -- a fake clock that ticks whenever the client reads it ---------------------------------------


class TickClock:
    """Time moves only when the client looks at it (``step`` per reading) or sleeps."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        self.now += self.step
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def client(
    server: Server, fake: TickClock | None = None, forge: str = "github", **policy: Any
) -> ForgeClient:
    kwargs: dict[str, Any] = {"policy": RetryPolicy(**{"backoff_s": 0.01, **policy})}
    if fake is not None:
        kwargs.update(sleep=fake.sleep, clock=fake.clock)
    if forge == "gitlab":
        return gitlab.client_for(server.url + "/api/v4", TOKEN, **kwargs)
    return github.client_for(server.url, TOKEN, **kwargs)


# -- the client on its own ----------------------------------------------------------------------


def test_a_dripping_body_is_cut_off_at_the_deadline(server: Server) -> None:
    server.on("GET", r"/comments$", drip())
    fake = TickClock(step=1.0)
    # a per-try timeout far above the fake deadline: only the deadline checks between body
    # chunks (on the fake clock) can end the tries
    c = client(server, fake, timeout_s=5.0, budget_s=12.0, attempts=5)
    with pytest.raises(ReportError, match=r"gave up: no response within .*body was still"):
        github.GitHubReporter(c, "o/r").find_comment(1, MARK)
    # nothing read past the deadline: what is beyond it is the few clock readings (ticks) and
    # the short back-off of deciding to stop
    assert fake.now <= c.deadline + 3 * fake.step + sum(fake.sleeps)
    assert server.count("GET") <= 5


def test_a_try_is_cut_off_on_the_socket_too(server: Server) -> None:
    """A try is cut at its end even while a read blocks (status line and headers dripping:
    the client waits for the try's thread no longer): real time, tiny limits, only the
    outcome is asserted."""
    server.on("GET", r"/comments$", drip_headers(every_s=0.02))
    c = client(server, timeout_s=0.3, budget_s=0.9, attempts=2)
    with pytest.raises(ReportError, match=r"gave up: no response within 0\.3 s"):
        github.GitHubReporter(c, "o/r").find_comment(1, MARK)
    assert server.count("GET") == 2


def test_an_endless_body_is_capped(server: Server) -> None:
    server.on("GET", r"/comments$", flood())
    c = client(server, max_bytes=1024 * 1024, timeout_s=30.0, budget_s=60.0)
    with pytest.raises(ReportError, match=r"GET /repos/o/r/issues/1/comments: .*larger than 1 MiB"):
        github.GitHubReporter(c, "o/r").find_comment(1, MARK)
    assert server.count("GET") == 1  # too large is not retried


def test_a_declared_length_over_the_cap_is_refused_before_reading(server: Server) -> None:
    server.on("GET", r"/comments$", raw(200, b"[" + b" " * 5000 + b"]"))
    c = client(server, max_bytes=1000)
    with pytest.raises(ReportError, match="larger than 1000 bytes"):
        github.GitHubReporter(c, "o/r").find_comment(1, MARK)


def test_all_pages_share_one_deadline(server: Server) -> None:
    server.on("GET", r"/comments$", endless_pages())
    fake = TickClock(step=0.5)
    c = client(server, fake, timeout_s=5.0, budget_s=10.0)
    with pytest.raises(ReportError, match="gave up: no time left of the 10 s budget"):
        github.GitHubReporter(c, "o/r").find_comment(1, MARK)
    # a budget per request would have read all MAX_PAGES pages (and found nothing)
    assert 1 < server.count("GET") < github.MAX_PAGES // 2
    assert fake.now <= c.deadline + 3 * fake.step + sum(fake.sleeps)


def test_a_forge_that_drops_every_connection_gives_up_at_the_deadline_naming_both(
    server: Server,
) -> None:
    """Every try fails on the wire (the server hangs up without an answer) until the budget
    is spent: the one line says what failed and that the budget ended it."""
    server.on("GET", r"/comments$", lambda h: None)  # no answer: the connection is closed
    fake = TickClock(step=0.5)
    c = client(server, fake, budget_s=4.0, attempts=100)
    with pytest.raises(ReportError) as info:
        github.GitHubReporter(c, "o/r").find_comment(1, MARK)
    message = str(info.value)
    # the budget is named whether it ran out before the next try or would have during it
    assert re.search(r"gave up: connection failed \(.+\); .*the 4 s budget", message), message
    assert "\n" not in message and TOKEN not in message
    assert server.count("GET") > 1  # retried until the deadline, not given up at once


def test_the_deadline_is_shared_by_the_client_s_requests(server: Server) -> None:
    server.on("POST", r"/statuses/", json_answer(201, {"id": 1}))
    fake = TickClock(step=1.0)
    c = client(server, fake, budget_s=8.0)
    reporter = github.GitHubReporter(c, "o/r")
    with pytest.raises(ReportError, match="no time left"):
        for _ in range(20):
            reporter.set_status(HEAD, "success", context="perfgate/p", description="ok")
    assert 1 < server.count("POST") < 8


def test_slow_pages_on_gitlab_share_the_deadline_too(server: Server) -> None:
    def page(h: _Handler) -> None:
        n = int(dict(re.findall(r"(\w+)=(\w+)", urlsplit(h.path).query)).get("page", "1"))
        json_answer(200, [{"id": n, "body": "other"}], {"X-Next-Page": str(n + 1)})(h)

    server.on("GET", r"/notes$", page)
    fake = TickClock(step=0.5)
    c = client(server, fake, forge="gitlab", budget_s=10.0)
    with pytest.raises(ReportError, match="no time left"):
        gitlab.GitLabReporter(c, "grp/proj").find_comment(3, MARK)
    assert 1 < server.count("GET") < gitlab.MAX_PAGES // 2


MALFORMED: dict[str, bytes] = {
    "not JSON": b"<html>rate limited</html>",
    "a dict, not a list": json.dumps({"comments": []}).encode(),
    "id not a number": json.dumps([{"id": "not-a-number", "body": MARK}]).encode(),
    "id null": json.dumps([{"id": None, "body": MARK}]).encode(),
    "id a boolean": json.dumps([{"id": True, "body": MARK}]).encode(),
    "id missing": json.dumps([{"body": MARK}]).encode(),
    "id a float": json.dumps([{"id": 1.5, "body": MARK}]).encode(),
    "deeply nested": b"[" * 100_000 + b"]" * 100_000,
    "not UTF-8": b'[{"id": 1, "body": "\xff\xfe"}]',
}


@pytest.mark.parametrize("what", sorted(MALFORMED))
@pytest.mark.parametrize("forge", ["github", "gitlab"])
def test_a_malformed_listing_is_a_report_error(server: Server, what: str, forge: str) -> None:
    server.on("GET", r"/(comments|notes)$", raw(200, MALFORMED[what]))
    server.on("PATCH", r".", json_answer(200, {"id": 1}))
    server.on("PUT", r".", json_answer(200, {"id": 1}))
    server.on("POST", r".", json_answer(201, {"id": 1}))
    c = client(server, forge=forge)
    reporter: Any = github.GitHubReporter(c, "o/r")
    if forge == "gitlab":
        reporter = gitlab.GitLabReporter(c, "grp/proj")
    with pytest.raises(ReportError) as info:
        reporter.upsert_comment(1, MARK, MARK + "\nnew")
    assert "\n" not in str(info.value) and TOKEN not in str(info.value)
    assert server.count("PATCH") + server.count("PUT") + server.count("POST") == 0


@pytest.mark.parametrize(
    ("answer", "call"),
    [
        ([{"number": "x", "body": MARK, "labels": []}], "find"),
        ({"number": "not-a-number"}, "create"),
        ({"number": [1]}, "create"),
    ],
)
def test_malformed_issue_numbers_are_report_errors(server: Server, answer: Any, call: str) -> None:
    server.on("GET", r"/issues$", json_answer(200, answer))
    server.on("POST", r"/issues$", json_answer(201, answer))
    reporter = github.GitHubReporter(client(server), "o/r")
    with pytest.raises(ReportError, match="not a number"):
        if call == "find":
            reporter.find_issue(MARK, "perf")
        else:
            reporter.create_issue("t", "b", "perf")


def test_api_int() -> None:
    assert api_int(7, "x") == 7 and api_int("12", "x") == 12
    for bad in ("not-a-number", None, True, 1.0, "", "-1", "١٢", [1]):
        with pytest.raises(ReportError, match="x is not a number"):
            api_int(bad, "x")


# -- the real gate, posting to a misbehaving forge -----------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 's.db'}"
    runs = [record(i, 20.0, benchmark=b) for b in ("a", "b") for i in range(8)]
    runs += [
        record(50, 26.0, branch="feat", benchmark="a"),
        record(52, 20.0, branch="calm", benchmark="b"),
    ]
    fill(url, runs)
    return url


def gate_env(server: Server, tmp_path: Path) -> dict[str, str | None]:
    env: dict[str, str | None] = {
        k: None
        for k in os.environ
        if k.startswith(("GITHUB_", "GITLAB_", "CI_", "RUNNER_", "PERFGATE_HTTP_"))
        or k in ("CI", "GITLAB_CI", "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")
    }
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "head": {"sha": HEAD}}}))
    env.update(
        GITHUB_ACTIONS="true",
        GITHUB_API_URL=server.url,
        GITHUB_REPOSITORY="o/r",
        GITHUB_EVENT_PATH=str(event),
        GITHUB_TOKEN=TOKEN,
        PERFGATE_HTTP_ATTEMPTS="2",
        PERFGATE_HTTP_BACKOFF_S="0.01",
        PERFGATE_HTTP_TIMEOUT_S="0.3",
        PERFGATE_HTTP_BUDGET_S="1",
    )
    return env


def gate(db: str, env: dict[str, str | None], branch: str) -> Done:
    return perfgate(
        None, "gate", "--db", db, "--branch", branch, "--against", "main", "--comment", env=env
    )


def warnings(result: Done) -> list[str]:
    return [x for x in result.stderr.splitlines() if x.startswith("perfgate: warning:")]


@pytest.mark.parametrize(("branch", "code"), [("feat", 1), ("calm", 0)])
def test_the_gate_keeps_its_verdict_when_the_forge_drips(
    server: Server, db: str, tmp_path: Path, branch: str, code: int
) -> None:
    server.on("GET", r"/comments$", drip())
    server.on("POST", r"/statuses/", drip_headers())
    result = gate(db, gate_env(server, tmp_path), branch)
    assert result.returncode == code, result.stderr
    lines = warnings(result)
    assert lines and all(("no response within" in w or "no time left" in w) for w in lines)
    assert any(w.startswith("perfgate: warning: comment not posted: GitHub: GET") for w in lines)
    assert "Traceback" not in result.stderr and TOKEN not in result.stderr
    assert server.count("GET") + server.count("POST") <= 4  # 2 attempts each, at most


def test_the_gate_keeps_its_verdict_when_the_forge_floods(
    server: Server, db: str, tmp_path: Path
) -> None:
    server.on("GET", r"/comments$", flood())
    server.on("POST", r"/statuses/", json_answer(201, {"id": 1}))
    env = gate_env(server, tmp_path)
    env["PERFGATE_HTTP_TIMEOUT_S"] = "30"  # loopback delivers 8 MiB well within it
    env["PERFGATE_HTTP_BUDGET_S"] = "60"
    result = gate(db, env, "feat")
    assert result.returncode == 1, result.stderr
    (line,) = warnings(result)
    assert "comment not posted" in line and "larger than 8 MiB" in line
    assert server.count("GET") == 1
    assert "status failure set" in result.stderr


def test_a_comment_with_a_malformed_id_is_a_warning_not_an_internal_error(
    server: Server, db: str, tmp_path: Path
) -> None:
    posted: list[str] = []

    def listing(h: _Handler) -> None:
        items = [{"id": "not-a-number", "body": body} for body in posted]
        json_answer(200, items)(h)

    def create(h: _Handler) -> None:
        posted.append(h.body["body"])
        json_answer(201, {"id": "not-a-number", "body": h.body["body"]})(h)

    server.on("GET", r"/comments$", listing)
    server.on("POST", r"/issues/7/comments$", create)
    server.on("POST", r"/statuses/", json_answer(201, {"id": 1}))
    env = gate_env(server, tmp_path)
    first = gate(db, env, "feat")
    assert first.returncode == 1 and "comment created" in first.stderr, first.stderr
    again = gate(db, env, "feat")  # finds its comment, whose id it cannot use
    assert again.returncode == 1, again.stderr
    (line,) = warnings(again)
    assert "comment not posted: GitHub: the id of a comment on #7 is not a number" in line
    assert "'not-a-number'" in line
    assert server.count("PATCH") == 0
    assert "status failure set" in again.stderr


def test_slow_pagination_is_bounded_by_one_deadline_in_the_gate(
    server: Server, db: str, tmp_path: Path
) -> None:
    server.on("GET", r"/comments$", endless_pages(every_s=0.1))
    server.on("POST", r"/statuses/", json_answer(201, {"id": 1}))
    result = gate(db, gate_env(server, tmp_path), "calm")
    assert result.returncode == 0, result.stderr
    lines = warnings(result)
    assert any("comment not posted" in w for w in lines), result.stderr
    assert server.count("GET") < github.MAX_PAGES
