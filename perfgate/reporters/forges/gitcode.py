"""GitCode (AtomGit, where the Ascend/CANN projects live): one pull request comment per
marker (updated in place) and the nightly tracking issue, over its REST API v5 with
:class:`ForgeClient`; and the job variables perfgate reads there.

Source: GitCode's own API documentation, https://docs.gitcode.com/en/docs/ ("GitCode REST
API" guide: a personal access token in the ``Authorization: Bearer`` header, or
``PRIVATE-TOKEN``, or an ``access_token`` query parameter; the "Pull Request API" and
"Issues API" pages, mirrored as reStructuredText in the Trenza1ore/GitCode-API repository,
docs/rest_api/). The API is Gitee-style, and these are the endpoints used:

- ``GET  /repos/{owner}/{repo}/pulls/{number}/comments`` (``page``, ``per_page`` <= 100)
- ``POST /repos/{owner}/{repo}/pulls/{number}/comments`` ``{"body"}``
- ``PATCH /repos/{owner}/{repo}/pulls/comments/{id}`` ``{"body"}`` ("Edit a Comment")
- ``GET  /repos/{owner}/{repo}/pulls/{number}`` (``head.sha``)
- ``GET  /repos/{owner}/{repo}/issues`` (``state``, ``labels``, ``page``, ``per_page``)
- ``POST /repos/{owner}/issues`` ``{"repo", "title", "body", "labels"}`` (the repository is
  a body field, Gitee's way)
- ``PATCH /repos/{owner}/issues/{number}`` ``{"repo", "title", "body"}`` (``title`` is
  required there)
- ``POST /repos/{owner}/{repo}/issues/{number}/comments`` ``{"body"}``

The token goes in the header only, never in the URL: a URL is what proxies and servers
log. The documentation shows no pagination headers, so listings are read page by page
until a short or empty one. GitCode documents no commit status endpoint in API v5, so this forge
sets none: the pipeline job's own result is the check.

The variables a GitCode pipeline (``.gitcode/workflows/*.yml``) sets are not documented
where perfgate looked, so nothing here guesses at them: the template under ``ci/gitcode/``
passes what perfgate needs in ``GITCODE_*`` variables of its own, read here (the token may
also come as ``ATOMGIT_TOKEN``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from perfgate.errors import DeliverySetupError, ReportError
from perfgate.reporters.forges.api import MAX_PAGES, Poster, RetryPolicy

if TYPE_CHECKING:
    from perfgate.reporters.forges.http import ForgeClient

DEFAULT_API_URL = "https://api.gitcode.com/api/v5"
MAX_CHARS = 65_536
"""The longest comment body posted (GitCode documents no limit; GitHub's is used)."""
TOKEN_VARIABLES = ("GITCODE_TOKEN", "ATOMGIT_TOKEN")
API_URL_VARIABLE = "GITCODE_API_URL"
SERVER_URL_VARIABLE = "GITCODE_SERVER_URL"
REPO_VARIABLE = "GITCODE_REPOSITORY"
NUMBER_VARIABLE = "GITCODE_PR_NUMBER"
SHA_VARIABLE = "GITCODE_SHA"
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def detect(env: Mapping[str, str]) -> bool:
    """Whether this job names a GitCode repository (``GITCODE_REPOSITORY``, which the
    pipeline template sets)."""
    return bool(env.get(REPO_VARIABLE))


def read_number(env: Mapping[str, str]) -> int | None:
    """The pull request number (``GITCODE_PR_NUMBER``)."""
    raw = env.get(NUMBER_VARIABLE, "").strip()
    return int(raw) if raw.isascii() and raw.isdigit() else None


def read_sha(env: Mapping[str, str]) -> str:
    """The commit judged (``GITCODE_SHA``)."""
    return env.get(SHA_VARIABLE, "")


def client_for(api_url: str, token: str, **kwargs: Any) -> ForgeClient:
    """A client that sends ``token`` as ``Authorization: Bearer`` (never in the URL)."""
    from perfgate.reporters.forges.http import ForgeClient

    return ForgeClient(
        "GitCode",
        api_url or DEFAULT_API_URL,
        headers={"Authorization": f"Bearer {token}"},
        secret=token,
        **kwargs,
    )


class GitCodeReporter(Poster):
    """Posts to one repository (``owner/name``) through ``client``."""

    def __init__(self, client: ForgeClient, repo: str) -> None:
        if not _REPO.match(repo):
            raise DeliverySetupError(f"GitCode: repository {repo!r} is not owner/name")
        self.client = client
        self.owner, self.name = (quote(part, safe="") for part in repo.split("/"))
        self.base = f"repos/{self.owner}/{self.name}"
        self._titles: dict[int, str] = {}

    def _pages(
        self, path: str, query: dict[str, str | int], max_pages: int = MAX_PAGES
    ) -> Iterator[dict[str, Any]]:
        full = 0  # the longest page yet: a server may serve fewer than per_page asks
        for page in range(1, max_pages + 1):
            response = self.client.request("GET", path, query={**query, "page": page})
            if not isinstance(response.data, list):
                raise ReportError(f"GitCode: GET {path}: expected a list")
            yield from (item for item in response.data if isinstance(item, dict))
            if not response.data or len(response.data) < full:
                return
            full = len(response.data)

    def _comments(self, number: int) -> str:
        return f"{self.base}/pulls/{number}/comments"

    def _edit(self, number: int, comment_id: int) -> tuple[str, str]:
        return "PATCH", f"{self.base}/pulls/comments/{comment_id}"

    def _seen(self, number: int, item: Mapping[str, Any]) -> None:
        self._titles[number] = str(item.get("title") or "")

    def set_status(
        self, sha: str, state: str, *, context: str, description: str, target_url: str = ""
    ) -> None:
        """Never called: GitCode's API v5 has no commit status (the registry says so)."""
        raise ReportError("GitCode: the API has no commit status")

    def create_issue(self, title: str, body: str, label: str) -> int:
        payload = {"repo": self.name, "title": title, "body": body, "labels": label}
        number = self._new_issue(f"repos/{self.owner}/issues", payload)
        if number:
            self._titles[number] = title
        return number

    def update_issue(self, number: int, body: str) -> None:
        """Replace the issue's body (its title, which the API requires, is kept)."""
        title = self._titles.get(number)
        if title is None:
            data = self.client.request("GET", f"{self._issues()}/{number}").data
            title = str(data.get("title") or "") if isinstance(data, dict) else ""
        payload = {"repo": self.name, "title": title, "body": body}
        self.client.request("PATCH", f"repos/{self.owner}/issues/{number}", payload)


def connect(
    api_url: str, repo: str, token: str, *, variable: str, policy: RetryPolicy
) -> GitCodeReporter:
    """A poster for ``repo`` with ``token`` (read from ``variable``)."""
    return GitCodeReporter(client_for(api_url, token, policy=policy), repo)
