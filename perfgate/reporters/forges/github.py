"""GitHub: one PR comment per marker (updated in place), a commit status, the job summary,
and the nightly tracking issue — over the REST API with :class:`ForgeClient`; and what a
GitHub Actions job's variables say about where to post."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.errors import DeliverySetupError, ReportError
from perfgate.reporters.forges.api import MAX_PAGES, Poster, RetryPolicy

if TYPE_CHECKING:
    from perfgate.reporters.forges.http import ForgeClient

DEFAULT_API_URL = "https://api.github.com"
MAX_CHARS = 65_536
"""The longest comment body GitHub accepts."""
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def detect(env: Mapping[str, str]) -> bool:
    """Whether this is a GitHub Actions job."""
    return env.get("GITHUB_ACTIONS") == "true"


def _event(env: Mapping[str, str]) -> Mapping[str, Any]:
    """The webhook payload of the job's event (``GITHUB_EVENT_PATH``); empty if unreadable."""
    path = env.get("GITHUB_EVENT_PATH", "")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _pull(env: Mapping[str, str]) -> Mapping[str, Any]:
    pull = _event(env).get("pull_request")
    return pull if isinstance(pull, dict) else {}


def read_number(env: Mapping[str, str]) -> int | None:
    """The PR number: the event's pull request, else a ``refs/pull/N/...`` ref."""
    pull = _pull(env)
    if isinstance(pull.get("number"), int):
        return int(pull["number"])
    if env.get("GITHUB_REF", "").startswith("refs/pull/"):
        part = env["GITHUB_REF"].split("/")[2]
        return int(part) if part.isdigit() else None
    return None


def read_sha(env: Mapping[str, str]) -> str:
    """The commit for the status: the PR's head (not the merge commit), else ``GITHUB_SHA``."""
    head = _pull(env).get("head")
    head_sha = str(head.get("sha", "")) if isinstance(head, dict) else ""
    return head_sha or env.get("GITHUB_SHA", "")


def client_for(api_url: str, token: str, **kwargs: Any) -> ForgeClient:
    from perfgate.reporters.forges.http import ForgeClient

    return ForgeClient(
        "GitHub",
        api_url or DEFAULT_API_URL,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        },
        secret=token,
        **kwargs,
    )


class GitHubReporter(Poster):
    """Posts to one repository (``owner/name``) through ``client``."""

    REFERENCE = "#"

    def __init__(self, client: ForgeClient, repo: str) -> None:
        if not _REPO.match(repo):
            raise DeliverySetupError(f"GitHub: repository {repo!r} is not owner/name")
        self.client, self.repo, self.base = client, repo, f"repos/{repo}"

    def _pages(
        self, path: str, query: dict[str, str | int], max_pages: int = MAX_PAGES
    ) -> Iterator[dict[str, Any]]:
        url: str | None = path
        for page in range(max_pages):
            if url is None:
                return
            response = self.client.request("GET", url, query=None if page else query)
            if not isinstance(response.data, list):
                raise ReportError(f"GitHub: GET {path}: expected a list")
            yield from (item for item in response.data if isinstance(item, dict))
            found = _NEXT.search(response.headers.get("link", ""))  # the Link header's rel="next"
            url = found.group(1) if found else None

    def _comments(self, number: int) -> str:
        return f"{self._issues()}/{number}/comments"

    def _edit(self, number: int, comment_id: int) -> tuple[str, str]:
        return "PATCH", f"{self._issues()}/comments/{comment_id}"

    def _is_issue(self, item: Mapping[str, Any]) -> bool:
        return "pull_request" not in item

    pull_head_sha = Poster.head_sha

    def create_issue(self, title: str, body: str, label: str) -> int:
        return self._new_issue(self._issues(), {"title": title, "body": body, "labels": [label]})

    def update_issue(self, number: int, body: str) -> None:
        self.client.request("PATCH", f"{self._issues()}/{number}", {"body": body})


def connect(
    api_url: str, repo: str, token: str, *, variable: str, policy: RetryPolicy
) -> GitHubReporter:
    """A poster for ``repo`` with ``token`` (read from ``variable``)."""
    return GitHubReporter(client_for(api_url, token, policy=policy), repo)
