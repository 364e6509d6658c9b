"""One small JSON-over-HTTP client for every forge's API, on ``urllib.request``.

Every request has a bounded total time (all attempts and waits together); 429, 5xx,
timeouts and connection errors are retried with exponential backoff, honouring
``Retry-After`` when it fits in what is left of the budget; 401/403/404 (and every other
4xx) are not retried. Failures raise :class:`~perfgate.errors.ReportError` with a one-line
message that never contains the token. Redirects are not followed (a token must never be
sent to another host), and pagination links are followed only under the API base URL.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from perfgate import __version__
from perfgate.errors import ConfigError, ReportError

RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one request tries: ``attempts`` at most, each at most ``timeout_s``, all of
    them (and the waits between) within ``budget_s``; waits double from ``backoff_s`` up to
    ``max_backoff_s`` unless the server's ``Retry-After`` says otherwise."""

    attempts: int = 5
    timeout_s: float = 10.0
    budget_s: float = 60.0
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0

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
        )


@dataclass(frozen=True)
class Response:
    """A decoded API response; header names are lower-case."""

    status: int
    headers: Mapping[str, str]
    data: Any


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds the server asks to wait: ``Retry-After`` (seconds or an HTTP date), or
    GitHub's ``X-RateLimit-Reset`` when ``X-RateLimit-Remaining`` is 0."""
    raw = headers.get("retry-after", "").strip()
    if raw:
        try:
            return max(0.0, float(raw))
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError):
                return None
            return max(0.0, when.timestamp() - now)
    if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset"):
        try:
            return max(0.0, float(headers["x-ratelimit-reset"]) - now)
        except ValueError:
            return None
    return None


class ForgeClient:
    """JSON requests to one API base URL with one set of credentials.

    Args:
        name: the forge's name for messages (``GitHub``, ``GitLab``).
        base_url: the API root, e.g. ``https://api.github.com`` or
            ``https://gitlab.example.com/api/v4``.
        headers: sent with every request (the credential header among them).
        secret: the token, scrubbed from every message this client produces.
        sleep, clock, wall_clock: injectable for tests.
    """

    def __init__(
        self,
        name: str,
        base_url: str,
        *,
        headers: Mapping[str, str],
        secret: str = "",
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ConfigError(
                f"{name} API URL {self._safe_url(base_url)!r}: expected http(s)://HOST/…"
            )
        self.name = name
        self.base_url = base_url.rstrip("/")
        self._headers = {
            "Accept": "application/json",
            "User-Agent": f"perfgate/{__version__}",
            **headers,
        }
        self._secret = secret
        self.policy = policy or RetryPolicy()
        self._sleep = sleep
        self._clock = clock
        self._wall = wall_clock
        self._opener = urllib.request.build_opener(_NoRedirect())

    @staticmethod
    def _safe_url(url: str) -> str:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))

    def scrub(self, text: str) -> str:
        """``text`` with the token (if any) replaced by ``***``."""
        if self._secret and len(self._secret) >= 4:
            text = text.replace(self._secret, "***")
        return text

    def url(self, path: str, query: Mapping[str, str | int] | None = None) -> str:
        """The absolute URL of ``path`` (a path under the base, or an absolute URL under it)."""
        if path.startswith(("http://", "https://")):
            if not (path == self.base_url or path.startswith(self.base_url + "/")):
                outside = self._safe_url(self.base_url)
                raise ReportError(f"{self.name}: refusing to follow a link outside {outside}")
            url = path
        else:
            url = self.base_url + "/" + path.lstrip("/")
        if query:
            sep = "&" if "?" in url else "?"
            url += sep + urllib.parse.urlencode({k: str(v) for k, v in query.items()})
        return url

    def _fail(self, method: str, url: str, what: str) -> ReportError:
        path = urllib.parse.urlsplit(url).path
        return ReportError(self.scrub(f"{self.name}: {method} {path}: {what}"))

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        query: Mapping[str, str | int] | None = None,
    ) -> Response:
        """Send one JSON request, retrying what is worth retrying within the budget."""
        url = self.url(path, query)
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self._headers)
        if data is not None:
            headers["Content-Type"] = "application/json"
        policy = self.policy
        deadline = self._clock() + policy.budget_s
        last = "no attempt made"
        for attempt in range(policy.attempts):
            remaining = deadline - self._clock()
            if remaining <= 0:
                break
            wait: float | None = None
            req = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with self._opener.open(req, timeout=min(policy.timeout_s, remaining)) as resp:
                    raw = resp.read()
                    status = resp.status
                    resp_headers = {k.lower(): v for k, v in resp.headers.items()}
                return Response(status, resp_headers, self._decode(method, url, raw))
            except urllib.error.HTTPError as exc:
                resp_headers = {k.lower(): v for k, v in exc.headers.items()} if exc.headers else {}
                detail = self._api_message(exc)
                last = f"{exc.code} {exc.reason}" + (f" ({detail})" if detail else "")
                rate_limited = exc.code == 403 and (
                    "retry-after" in resp_headers
                    or resp_headers.get("x-ratelimit-remaining") == "0"
                )
                if exc.code not in RETRIED_STATUS and not rate_limited:
                    raise self._fail(method, url, last + self._hint(exc.code)) from None
                wait = _retry_after(resp_headers, self._wall())
            except TimeoutError:
                last = f"no response within {min(policy.timeout_s, remaining):g} s"
            except urllib.error.URLError as exc:
                reason = exc.reason
                if isinstance(reason, TimeoutError):
                    last = f"no response within {min(policy.timeout_s, remaining):g} s"
                else:
                    last = f"cannot connect ({reason})"
            except (http.client.HTTPException, ConnectionError, OSError) as exc:
                last = f"connection failed ({type(exc).__name__}: {exc})"
            if attempt == policy.attempts - 1:
                break
            if wait is None:
                wait = min(policy.backoff_s * 2**attempt, policy.max_backoff_s)
            remaining = deadline - self._clock()
            if wait >= remaining:
                last += (
                    f"; the next try (in {wait:g} s) would pass the {policy.budget_s:g} s budget"
                )
                break
            self._sleep(wait)
        raise self._fail(method, url, f"gave up: {last}")

    def _decode(self, method: str, url: str, raw: bytes) -> Any:
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise self._fail(method, url, "the response is not JSON") from None

    def _api_message(self, exc: urllib.error.HTTPError) -> str:
        try:
            payload = json.loads(exc.read() or b"null")
        except (ValueError, OSError):
            return ""
        if isinstance(payload, dict):
            message = payload.get("message") or payload.get("error") or ""
            return " ".join(str(message).split())[:200]
        return ""

    def _hint(self, status: int) -> str:
        if status in (401, 403):
            return "; the token lacks permission (fork PRs: post from a follow-up job, see ci/)"
        if status == 404:
            return "; check the repository/project, the PR/MR number and the API URL"
        return ""


def carries_marker(body: str, marker: str) -> bool:
    """Whether a comment, note or issue ``body`` is perfgate's own: it starts with the hidden
    marker. A person quoting perfgate's comment carries the marker too, but after a quote
    sign, and is left alone."""
    return body.lstrip().startswith(marker)
