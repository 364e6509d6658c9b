"""GitLab: one merge request note per marker (updated in place), a commit status, and the
nightly tracking issue — over the REST API v4 with :class:`ForgeClient`; and what a GitLab CI
job's variables say about where to post."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from perfgate.errors import DeliverySetupError, ReportError
from perfgate.reporters.forges.api import MAX_PAGES, Poster, RetryPolicy

if TYPE_CHECKING:
    from perfgate.reporters.forges.http import ForgeClient

DEFAULT_API_URL = "https://gitlab.com/api/v4"
MAX_CHARS = 1_000_000
"""The longest note body GitLab accepts."""
JOB_TOKEN_VARIABLE = "CI_JOB_TOKEN"


def detect(env: Mapping[str, str]) -> bool:
    """Whether this is a GitLab CI job."""
    return env.get("GITLAB_CI") == "true"


def read_number(env: Mapping[str, str]) -> int | None:
    """The merge request's iid (``CI_MERGE_REQUEST_IID``), in merge request pipelines."""
    iid = env.get("CI_MERGE_REQUEST_IID", "")
    return int(iid) if iid.isdigit() else None


def read_sha(env: Mapping[str, str]) -> str:
    """The commit for the status (``CI_COMMIT_SHA``)."""
    return env.get("CI_COMMIT_SHA", "")


def client_for(api_url: str, token: str, *, job_token: bool = False, **kwargs: Any) -> ForgeClient:
    """A client authenticated with a personal/project access token (``PRIVATE-TOKEN``) or,
    with ``job_token``, the CI job token (``JOB-TOKEN``)."""
    from perfgate.reporters.forges.http import ForgeClient

    header = "JOB-TOKEN" if job_token else "PRIVATE-TOKEN"
    return ForgeClient(
        "GitLab", api_url or DEFAULT_API_URL, headers={header: token}, secret=token, **kwargs
    )


class GitLabReporter(Poster):
    """Posts to one project (numeric id or ``group/name`` path) through ``client``."""

    COMMENT = "note"
    OPEN = "opened"
    ISSUE_BODY = "description"
    ISSUE_NUMBER = "iid"
    STATES = {"success": "success", "failure": "failed", "error": "failed"}
    STATUS_NAME = "name"

    def __init__(self, client: ForgeClient, project: str) -> None:
        if not project.strip():
            raise DeliverySetupError("GitLab: no project id")
        self.client, self.project = client, quote(project, safe="")
        self.base = f"projects/{self.project}"

    def _pages(
        self, path: str, query: dict[str, str | int], max_pages: int = MAX_PAGES
    ) -> Iterator[dict[str, Any]]:
        page: str = "1"
        for _ in range(max_pages):
            response = self.client.request("GET", path, query={**query, "page": page})
            if not isinstance(response.data, list):
                raise ReportError(f"GitLab: GET {path}: expected a list")
            yield from (item for item in response.data if isinstance(item, dict))
            page = response.headers.get("x-next-page", "").strip()
            if not page.isdigit():
                return

    def _comments(self, number: int) -> str:
        return f"{self.base}/merge_requests/{number}/notes"

    def _edit(self, number: int, comment_id: int) -> tuple[str, str]:
        return "PUT", f"{self._comments(number)}/{comment_id}"

    def head_sha(self, number: int) -> str | None:
        """None: the merge request's head is not checked on GitLab."""
        return None

    def create_issue(self, title: str, body: str, label: str) -> int:
        payload = {"title": title, "description": body, "labels": label}
        return self._new_issue(self._issues(), payload)

    def update_issue(self, number: int, body: str) -> None:
        self.client.request("PUT", f"{self._issues()}/{number}", {"description": body})


def connect(
    api_url: str, repo: str, token: str, *, variable: str, policy: RetryPolicy
) -> GitLabReporter:
    """A poster for project ``repo``; a token read from ``CI_JOB_TOKEN`` is sent as the job
    token, any other as a personal/project access token."""
    client = client_for(api_url, token, job_token=variable == JOB_TOKEN_VARIABLE, policy=policy)
    return GitLabReporter(client, repo)
