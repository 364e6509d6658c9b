"""What every forge's poster shares that needs no HTTP client: the retry policy, a decoded
response, the upsert of a marked comment and the checks on a forge's answers.

Apart from :mod:`.http` (the client, on ``requests``) so that the registry, the gate and
``perfgate detect`` can read a forge's settings without loading an HTTP stack: ``requests``
is imported only when a delivery actually posts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from perfgate.errors import ConfigError, ReportError

if TYPE_CHECKING:
    from perfgate.reporters.forges.http import ForgeClient

MAX_BYTES = 8 * 1024 * 1024
"""The largest response body a client reads (no forge answer perfgate asks for is near it)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard a client tries: each request ``attempts`` times at most, each try at most
    ``timeout_s``, and all of the client's requests (every page and retry, and the waits
    between) within ``budget_s`` together; waits double from ``backoff_s`` up to
    ``max_backoff_s`` unless the server's ``Retry-After`` says otherwise. A response body
    over ``max_bytes`` is an error."""

    attempts: int = 5
    timeout_s: float = 10.0
    budget_s: float = 60.0
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    max_bytes: int = MAX_BYTES

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RetryPolicy:
        """``PERFGATE_HTTP_{ATTEMPTS,TIMEOUT_S,BUDGET_S,BACKOFF_S}`` over the defaults."""
        base = cls()

        def number(name: str, default: float) -> float:
            raw = env.get(name, "")
            if not raw:
                return default
            try:
                value = float(raw)
            except ValueError:
                raise ConfigError(f"{name}={raw!r}: expected a number") from None
            if not value >= 0:
                raise ConfigError(f"{name}={raw!r}: expected a number >= 0")
            return value

        return cls(
            attempts=max(1, int(number("PERFGATE_HTTP_ATTEMPTS", base.attempts))),
            timeout_s=number("PERFGATE_HTTP_TIMEOUT_S", base.timeout_s) or base.timeout_s,
            budget_s=number("PERFGATE_HTTP_BUDGET_S", base.budget_s) or base.budget_s,
            backoff_s=number("PERFGATE_HTTP_BACKOFF_S", base.backoff_s),
            max_backoff_s=base.max_backoff_s,
            max_bytes=base.max_bytes,
        )


@dataclass(frozen=True)
class Response:
    """A decoded API response; header names are lower-case."""

    status: int
    headers: Mapping[str, str]
    data: Any


MAX_NESTING = 64
"""The deepest JSON a forge answer may nest (theirs nest a few levels): json.loads recurses
once a level, and near the recursion limit even a finalizer the garbage collector runs
meanwhile fails, where no caller can catch it."""
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


def decode(raw: bytes) -> Any:
    """A response body's JSON (None for an empty one); ValueError says why it is not."""
    if raw.count(b"[") + raw.count(b"{") > MAX_NESTING:
        depth = deepest = 0
        for byte in _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS):
            depth += 1 if byte in b"[{" else -1
            deepest = max(deepest, depth)
        if deepest > MAX_NESTING:
            raise ValueError(f"nests deeper than {MAX_NESTING} levels")
    try:
        return json.loads(raw) if raw.strip() else None
    except (ValueError, RecursionError):
        raise ValueError("is not JSON") from None


PER_PAGE = 100
MAX_PAGES = 50
FALLBACK_PAGES = 5
"""Unlabelled open issues scanned for the tracking issue when the label finds none."""


class Poster:
    """What every forge's poster shares: its marked comment found and upserted, and the
    tracking issue found by its label, else among all open issues (labels may be dropped
    at creation). A forge names its paths and the words its API uses."""

    client: ForgeClient
    base: str
    """The repository's path in the API (``repos/OWNER/NAME``, ``projects/ID``)."""
    COMMENT = "comment"
    """What the forge calls a comment on a change request (``note`` on GitLab); its plural
    ends the path of an issue's comments."""
    REFERENCE = "!"
    """How a change request is referenced in an error message (``#`` on GitHub)."""
    OPEN = "open"
    ISSUE_BODY = "body"
    ISSUE_NUMBER = "number"
    STATES = {"success": "success", "failure": "failure", "error": "error"}
    """A commit status's state in the forge's words (``failed`` on GitLab)."""
    STATUS_NAME = "context"
    """The field that names a commit status (``name`` on GitLab)."""

    def _pages(
        self, path: str, query: dict[str, str | int], max_pages: int = MAX_PAGES
    ) -> Iterator[dict[str, Any]]:
        raise NotImplementedError

    def _comments(self, number: int) -> str:
        """The path of change request ``number``'s comments."""
        raise NotImplementedError

    def _edit(self, number: int, comment_id: int) -> tuple[str, str]:
        """The method and path that edit one comment on change request ``number``."""
        raise NotImplementedError

    def _issues(self) -> str:
        """The path that lists the open issues."""
        return f"{self.base}/issues"

    def _is_issue(self, item: Mapping[str, Any]) -> bool:
        """Whether an item the issue listing returned is an issue (GitHub lists PRs too)."""
        return True

    def _seen(self, number: int, item: Mapping[str, Any]) -> None:
        """Called with the tracking issue found (GitCode keeps its title)."""

    def _new_issue(self, path: str, payload: Mapping[str, Any]) -> int:
        """POST a new issue at ``path``; its number, 0 when the answer has none."""
        data = self.client.request("POST", path, payload).data
        if isinstance(data, dict) and self.ISSUE_NUMBER in data:
            what = f"{self.client.name}: the new issue's {self.ISSUE_NUMBER}"
            return api_int(data[self.ISSUE_NUMBER], what)
        return 0

    def set_status(
        self, sha: str, state: str, *, context: str, description: str, target_url: str = ""
    ) -> None:
        """A commit status on ``sha``: ``success``, ``failure`` or ``error``."""
        if state not in self.STATES:
            raise ValueError(f"state {state!r}")
        payload = {"state": self.STATES[state], self.STATUS_NAME: context}
        payload["description"] = description[:140]
        if target_url:
            payload["target_url"] = target_url
        self.client.request("POST", f"{self.base}/statuses/{quote(sha, safe='')}", payload)

    def create_issue(self, title: str, body: str, label: str) -> int:
        raise NotImplementedError

    def update_issue(self, number: int, body: str) -> None:
        raise NotImplementedError

    def head_sha(self, number: int) -> str | None:
        """The head commit of pull request ``number``; None where the forge's poster does
        not check it."""
        data = self.client.request("GET", f"{self.base}/pulls/{number}").data
        head = data.get("head") if isinstance(data, dict) else None
        return str(head.get("sha", "")) if isinstance(head, dict) else ""

    def comment_issue(self, number: int, body: str) -> None:
        self.client.request("POST", f"{self._issues()}/{number}/{self.COMMENT}s", {"body": body})

    def find_comment(self, number: int, marker: str) -> dict[str, Any] | None:
        """The first comment on change request ``number`` that carries ``marker``."""
        for item in self._pages(self._comments(number), {"per_page": PER_PAGE}):
            if carries_marker(str(item.get("body") or ""), marker):
                return item
        return None

    def upsert_comment(self, number: int, marker: str, body: str, *, create: bool = True) -> str:
        """Edit the comment carrying ``marker`` or (when ``create``) post a new one.

        Returns ``updated``, ``created`` or ``skipped``.
        """
        found = self.find_comment(number, marker)
        if found is not None:
            what = f"{self.client.name}: the id of a {self.COMMENT} on {self.REFERENCE}{number}"
            method, path = self._edit(number, api_int(found.get("id"), what))
            self.client.request(method, path, {"body": body})
            return "updated"
        if not create:
            return "skipped"
        self.client.request("POST", self._comments(number), {"body": body})
        return "created"

    def find_issue(self, marker: str, label: str) -> tuple[int, str] | None:
        """(number, body) of the open issue labelled ``label`` whose body carries ``marker``;
        falls back to all open issues when the label was not applied."""
        queries: tuple[tuple[dict[str, str | int], int], ...] = (
            ({"state": self.OPEN, "labels": label, "per_page": PER_PAGE}, MAX_PAGES),
            ({"state": self.OPEN, "per_page": PER_PAGE}, FALLBACK_PAGES),
        )
        what = f"{self.client.name}: the tracking issue's {self.ISSUE_NUMBER}"
        for query, pages in queries:
            for item in self._pages(self._issues(), query, pages):
                body = str(item.get(self.ISSUE_BODY) or "")
                if self._is_issue(item) and carries_marker(body, marker):
                    number = api_int(item.get(self.ISSUE_NUMBER), what)
                    self._seen(number, item)
                    return number, body
        return None


def api_int(value: Any, what: str) -> int:
    """``value`` (from a forge's answer) as the integer the API documents, else ReportError
    naming ``what`` (``GitHub: comment id``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
    raise ReportError(f"{what} is not a number in the answer ({shown})")


def carries_marker(body: str, marker: str) -> bool:
    """Whether a comment, note or issue ``body`` is perfgate's own: it starts with the hidden
    marker. A person quoting perfgate's comment carries the marker too, but after a quote
    sign, and is left alone."""
    return body.lstrip().startswith(marker)
