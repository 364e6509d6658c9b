"""A small GitHub + GitLab + GitCode API server on loopback, with state, pagination,
permissions and injected faults, for testing perfgate's posters over real HTTP.

GitHub lives at the root (``/repos/...``), GitLab under ``/api/v4``, GitCode under
``/api/v5`` (its Gitee-style REST API v5: PR comments edited at ``pulls/comments/{id}``,
issues created at ``repos/{owner}/issues`` with the repository in the body, pages read until
a short one, a token as ``Authorization: Bearer``, ``PRIVATE-TOKEN`` or ``access_token``).
Tokens: ``tokens`` maps a token to ``"write"`` or ``"read"``; an unknown token is 401, a
read token writing is 403. Faults (:meth:`FakeForge.fail`) answer the next matching
requests with a status (and headers) or hang past the client's timeout.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

GITLAB = "/api/v4"
GITCODE = "/api/v5"


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int = 500
    times: int = 1
    headers: dict[str, str] = field(default_factory=dict)
    hang_s: float = 0.0


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    query: str = ""


class FakeForge:
    """Start with ``with FakeForge() as forge:``; ``forge.url`` is the GitHub API base and
    ``forge.gitlab_url`` the GitLab one."""

    def __init__(self, *, page_size: int | None = None) -> None:
        self.page_size = page_size
        self.tokens: dict[str, str] = {"good-token-123": "write", "read-token-456": "read"}
        self.comments: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.notes: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.statuses: list[dict[str, Any]] = []
        self.issues: dict[str, list[dict[str, Any]]] = {}
        self.pulls: dict[tuple[str, int], str] = {}
        self.gitcode_comments: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.requests: list[Seen] = []
        self.faults: list[Fault] = []
        self._next_id = 1000
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.forge = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def gitlab_url(self) -> str:
        return self.url + GITLAB

    @property
    def gitcode_url(self) -> str:
        return self.url + GITCODE

    def __enter__(self) -> FakeForge:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def fail(
        self,
        method: str,
        path: str,
        status: int = 500,
        *,
        times: int = 1,
        headers: dict[str, str] | None = None,
        hang_s: float = 0.0,
    ) -> None:
        """Answer the next ``times`` requests matching (method, path regex) with ``status``,
        or (``hang_s``) say nothing for that long."""
        self.faults.append(Fault(method, re.compile(path), status, times, headers or {}, hang_s))

    def new_id(self) -> int:
        with self._lock:
            self._next_id += 1
            return self._next_id

    def add_comment(self, repo: str, number: int, body: str) -> dict[str, Any]:
        item = {"id": self.new_id(), "body": body, "user": {"login": "someone"}}
        self.comments.setdefault((repo, number), []).append(item)
        return item

    def add_note(self, project: str, iid: int, body: str) -> dict[str, Any]:
        item = {"id": self.new_id(), "body": body, "system": False}
        self.notes.setdefault((project, iid), []).append(item)
        return item

    def add_gitcode_comment(self, repo: str, number: int, body: str) -> dict[str, Any]:
        item = {"id": self.new_id(), "body": body, "comment_type": "DiscussionNote"}
        self.gitcode_comments.setdefault((repo, number), []).append(item)
        return item

    def all_text(self) -> str:
        """Every body the server holds, for 'the token never leaks' checks."""
        return json.dumps(
            [
                list(self.comments.values()),
                list(self.notes.values()),
                list(self.gitcode_comments.values()),
                self.statuses,
                self.issues,
            ]
        )


class _Handler(BaseHTTPRequestHandler):
    server: ThreadingHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    @property
    def forge(self) -> FakeForge:
        return self.server.forge  # type: ignore[attr-defined, no-any-return]

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _send(self, status: int, data: Any = None, headers: dict[str, str] | None = None) -> None:
        raw = b"" if data is None else json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)

    def _handle(self) -> None:
        forge = self.forge
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        forge.requests.append(
            Seen(
                self.command,
                parts.path,
                {k.lower(): v for k, v in self.headers.items()},
                body,
                parts.query,
            )
        )
        for fault in forge.faults:
            if fault.times > 0 and fault.method == self.command and fault.path.search(parts.path):
                fault.times -= 1
                if fault.hang_s:
                    forge._stop.wait(fault.hang_s)
                    self.close_connection = True
                    return
                self._send(fault.status, {"message": f"injected {fault.status}"}, fault.headers)
                return
        gitlab = parts.path.startswith(GITLAB)
        gitcode = parts.path.startswith(GITCODE)
        if gitlab:
            token = self.headers.get("PRIVATE-TOKEN") or self.headers.get("JOB-TOKEN") or ""
        elif gitcode:
            token = (
                (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                or self.headers.get("PRIVATE-TOKEN")
                or query.get("access_token", "")
            )
        else:
            token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        scope = forge.tokens.get(token)
        if scope is None:
            self._send(401, {"message": "Bad credentials" if not gitlab else "401 Unauthorized"})
            return
        if self.command != "GET" and scope != "write":
            message = "Resource not accessible by integration" if not gitlab else "403 Forbidden"
            self._send(403, {"message": message})
            return
        if gitlab or gitcode:
            path = parts.path[len(GITLAB) :]
        else:
            path = parts.path.removeprefix("/api/v3")
        segments = [unquote(s) for s in path.strip("/").split("/")]
        route = self._gitlab if gitlab else self._gitcode if gitcode else self._github
        with forge._lock:
            handled = route(segments, query, body)
        if handled is None:
            self._send(404, {"message": "Not Found"})
        else:
            self._send(*handled)

    def _page(
        self, items: list[dict[str, Any]], query: dict[str, str]
    ) -> tuple[list[dict[str, Any]], int, bool]:
        size = int(query.get("per_page", "30"))
        if self.forge.page_size:
            size = min(size, self.forge.page_size)
        page = int(query.get("page", "1"))
        chunk = items[(page - 1) * size : page * size]
        return chunk, page, page * size < len(items)

    def _github(
        self, seg: list[str], query: dict[str, str], body: Any
    ) -> tuple[int, Any] | tuple[int, Any, dict[str, str]] | None:
        forge = self.forge
        m = self.command
        if len(seg) < 3 or seg[0] != "repos":
            return None
        repo, rest = f"{seg[1]}/{seg[2]}", seg[3:]
        if m == "GET" and len(rest) == 3 and rest[0] == "issues" and rest[2] == "comments":
            items = forge.comments.get((repo, int(rest[1])), [])
            return self._github_page(items, query)
        if m == "POST" and len(rest) == 3 and rest[0] == "issues" and rest[2] == "comments":
            item = forge.add_comment(repo, int(rest[1]), body["body"])
            return 201, item
        if m == "PATCH" and len(rest) == 3 and rest[:2] == ["issues", "comments"]:
            for items in forge.comments.values():
                for item in items:
                    if item["id"] == int(rest[2]):
                        item["body"] = body["body"]
                        return 200, item
            return None
        if m == "POST" and len(rest) == 2 and rest[0] == "statuses":
            forge.statuses.append({"forge": "github", "repo": repo, "sha": rest[1], **body})
            return 201, {"id": forge.new_id(), **body}
        if m == "GET" and len(rest) == 2 and rest[0] == "pulls":
            sha = forge.pulls.get((repo, int(rest[1])))
            return None if sha is None else (200, {"number": int(rest[1]), "head": {"sha": sha}})
        if rest == ["issues"] and m == "GET":
            items = forge.issues.get(repo, [])
            label = query.get("labels")
            if label:
                items = [i for i in items if label in [x["name"] for x in i["labels"]]]
            return self._github_page(items, query)
        if rest == ["issues"] and m == "POST":
            items = forge.issues.setdefault(repo, [])
            item = {
                "number": 100 + len(items),
                "title": body["title"],
                "body": body["body"],
                "labels": [{"name": x} for x in body.get("labels", [])],
                "comments": [],
            }
            items.append(item)
            return 201, item
        if len(rest) == 2 and rest[0] == "issues" and m == "PATCH":
            for item in forge.issues.get(repo, []):
                if item["number"] == int(rest[1]):
                    item.update(body)
                    return 200, item
            return None
        return None

    def _github_page(
        self, items: list[dict[str, Any]], query: dict[str, str]
    ) -> tuple[int, Any, dict[str, str]]:
        chunk, page, more = self._page(items, query)
        headers = {}
        if more:
            nxt = dict(query, page=str(page + 1))
            qs = "&".join(f"{k}={v}" for k, v in nxt.items())
            path = urlsplit(self.path).path
            headers["Link"] = f'<{self.forge.url}{path}?{qs}>; rel="next"'
        return 200, chunk, headers

    def _gitlab(
        self, seg: list[str], query: dict[str, str], body: Any
    ) -> tuple[int, Any] | tuple[int, Any, dict[str, str]] | None:
        forge = self.forge
        m = self.command
        if len(seg) < 2 or seg[0] != "projects":
            return None
        project, rest = seg[1], seg[2:]
        if len(rest) >= 3 and rest[0] == "merge_requests" and rest[2] == "notes":
            key = (project, int(rest[1]))
            if m == "GET" and len(rest) == 3:
                chunk, page, more = self._page(forge.notes.get(key, []), query)
                return (
                    200,
                    chunk,
                    {"X-Next-Page": str(page + 1) if more else "", "X-Page": str(page)},
                )
            if m == "POST" and len(rest) == 3:
                return 201, forge.add_note(project, key[1], body["body"])
            if m == "PUT" and len(rest) == 4:
                for item in forge.notes.get(key, []):
                    if item["id"] == int(rest[3]):
                        item["body"] = body["body"]
                        return 200, item
            return None
        if m == "POST" and len(rest) == 2 and rest[0] == "statuses":
            forge.statuses.append({"forge": "gitlab", "repo": project, "sha": rest[1], **body})
            return 201, {"id": forge.new_id(), **body}
        if rest == ["issues"] and m == "GET":
            items = forge.issues.get(project, [])
            label = query.get("labels")
            if label:
                items = [i for i in items if label in i["labels"]]
            chunk, page, more = self._page(items, query)
            return 200, chunk, {"X-Next-Page": str(page + 1) if more else ""}
        if rest == ["issues"] and m == "POST":
            items = forge.issues.setdefault(project, [])
            item = {
                "iid": 1 + len(items),
                "title": body["title"],
                "description": body["description"],
                "labels": body.get("labels", "").split(","),
                "comments": [],
            }
            items.append(item)
            return 201, item
        if len(rest) == 2 and rest[0] == "issues" and m == "PUT":
            for item in forge.issues.get(project, []):
                if item["iid"] == int(rest[1]):
                    item.update(body)
                    return 200, item
            return None
        if len(rest) == 3 and rest[0] == "issues" and rest[2] == "notes" and m == "POST":
            for item in forge.issues.get(project, []):
                if item["iid"] == int(rest[1]):
                    item["comments"].append(body["body"])
                    return 201, {"id": forge.new_id(), "body": body["body"]}
            return None
        return None

    def _gitcode(
        self, seg: list[str], query: dict[str, str], body: Any
    ) -> tuple[int, Any] | tuple[int, Any, dict[str, str]] | None:
        """GitCode API v5: no pagination headers (a short page is the last one)."""
        forge = self.forge
        m = self.command
        if len(seg) < 3 or seg[0] != "repos":
            return None
        owner = seg[1]
        if seg[2] == "issues":  # /repos/{owner}/issues[/{number}]: the repo is in the body
            if not isinstance(body, dict) or not body.get("repo"):
                return 400, {"message": "repo is missing"}
            repo, rest = f"{owner}/{body['repo']}", seg[3:]
            items = forge.issues.setdefault(repo, [])
            if m == "POST" and not rest:
                if not body.get("title"):
                    return 400, {"message": "title is missing"}
                item = {
                    "number": 1 + len(items),
                    "title": body["title"],
                    "body": body.get("body", ""),
                    "state": "open",
                    "labels": [{"name": x} for x in str(body.get("labels", "")).split(",") if x],
                    "comments": [],
                }
                items.append(item)
                return 201, item
            if m == "PATCH" and len(rest) == 1:
                if not body.get("title"):
                    return 400, {"message": "title is missing"}
                for item in items:
                    if str(item["number"]) == rest[0]:
                        item.update({k: v for k, v in body.items() if k != "repo"})
                        return 200, item
            return None
        repo, rest = f"{owner}/{seg[2]}", seg[3:]
        if len(rest) >= 2 and rest[0] == "pulls" and rest[1] == "comments":
            if m == "PATCH" and len(rest) == 3:
                for items in forge.gitcode_comments.values():
                    for item in items:
                        if str(item["id"]) == rest[2]:
                            item["body"] = body["body"]
                            return 200, {}
            return None
        if len(rest) >= 2 and rest[0] == "pulls":
            number = int(rest[1])
            if m == "GET" and len(rest) == 2:
                sha = forge.pulls.get((repo, number))
                return None if sha is None else (200, {"number": number, "head": {"sha": sha}})
            if rest[2:] == ["comments"] and m == "GET":
                chunk, _, _ = self._page(forge.gitcode_comments.get((repo, number), []), query)
                return 200, chunk
            if rest[2:] == ["comments"] and m == "POST":
                return 201, forge.add_gitcode_comment(repo, number, body["body"])
            return None
        if rest == ["issues"] and m == "GET":
            items = [i for i in forge.issues.get(repo, []) if i["state"] == "open"]
            label = query.get("labels")
            if label:
                items = [i for i in items if label in [x["name"] for x in i["labels"]]]
            chunk, _, _ = self._page(items, query)
            return 200, chunk
        if len(rest) == 2 and rest[0] == "issues" and m == "GET":
            for item in forge.issues.get(repo, []):
                if str(item["number"]) == rest[1]:
                    return 200, item
            return None
        if len(rest) == 3 and rest[0] == "issues" and rest[2] == "comments" and m == "POST":
            for item in forge.issues.get(repo, []):
                if str(item["number"]) == rest[1]:
                    item["comments"].append(body["body"])
                    return 201, {"id": forge.new_id(), "body": body["body"]}
            return None
        return None
