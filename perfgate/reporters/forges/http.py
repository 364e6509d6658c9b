"""The JSON-over-HTTP client of every forge's API: ``requests``, urllib3's ``Retry`` (what is
retried, ``Retry-After``) and one deadline, ``budget_s``, for all of a client's requests, pages,
retries and waits. A socket timeout bounds a read, not a try (a server may drip a byte a
second), so the body is read as it arrives with the deadline checked between reads, and a try
runs in a thread waited for no longer than ``min(timeout_s, what is left)``. 429, 5xx and wire
failures are retried, 4xx not (but GitHub's rate-limit 403); redirects and links outside the
API are never followed (the token stays on its host). Failures are one :class:`ReportError`
line without the token. Proxies from ``http(s)_proxy``/``no_proxy``, never ``.netrc``.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as Late
from typing import Any, TypeAlias

import requests
import requests.adapters
import requests.utils
from urllib3.exceptions import HTTPError, InvalidHeader, MaxRetryError
from urllib3.exceptions import TimeoutError as ReadLate
from urllib3.util.retry import Retry

from perfgate import __version__
from perfgate.errors import ConfigError, ReportError
from perfgate.reporters.forges.api import Response, RetryPolicy, decode

__all__ = ["ForgeClient", "RetryPolicy"]

RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})
CHUNK = 64 * 1024
ERROR_BODY_BYTES = 64 * 1024  # read of an error answer, for its message
GRACE_S = 0.1  # a try's thread is waited for this much longer: its socket timeout reports first
DENIED = "; the token lacks permission (fork PRs: post from a follow-up job, see ci/)"
MISSING = "; check the repository/project, the PR/MR number and the API URL"
HINTS = {401: DENIED, 403: DENIED, 404: MISSING}

Json: TypeAlias = "Mapping[str, Any]"
Query: TypeAlias = "Mapping[str, str | int]"
Expired: TypeAlias = "Callable[[], bool]"
Retryable: TypeAlias = "tuple[str, float | None]"  # what went wrong, the wait asked for


class _Adapter(requests.adapters.HTTPAdapter):  # verifies with the system's certificate store
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("ssl_context", ssl.create_default_context())
        super().init_poolmanager(*args, **kwargs)


class ForgeClient:
    """JSON requests to one API base URL with ``headers`` (the token's among them); messages name
    forge ``name`` and never show ``secret``. ``sleep``, ``clock``, ``wall_clock``: for tests."""

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
            raise ConfigError(f"{name} API URL {_safe_url(base_url)!r}: expected http(s)://HOST/…")
        self.name, self.base_url, self._secret = name, base_url.rstrip("/"), secret
        self.policy = policy or RetryPolicy()
        self._sleep, self._clock, self._wall = sleep, clock, wall_clock
        self._session = requests.Session()
        self._session.trust_env = False  # proxies are read per request: never .netrc
        self._session.headers.clear()
        self._session.headers.update({"Accept": "application/json", "Accept-Encoding": "identity"})
        self._session.headers.update({"User-Agent": f"perfgate/{__version__}", **headers})
        self._session.mount("https://", _Adapter())
        self._deadline: float | None = None

    @property
    def deadline(self) -> float:
        """When (on the client's clock) the budget, started by the first request, runs out."""
        if self._deadline is None:
            self._deadline = self._clock() + self.policy.budget_s
        return self._deadline

    def url(self, path: str, query: Query | None = None) -> str:
        """The absolute URL of ``path`` (a path under the base, or an absolute URL under it)."""
        url = self.base_url + "/" + path.lstrip("/")
        if path.startswith(("http://", "https://")):
            if not (path == self.base_url or path.startswith(self.base_url + "/")):
                outside = _safe_url(self.base_url)
                raise ReportError(f"{self.name}: refusing to follow a link outside {outside}")
            url = path
        if query:
            sep = "&" if "?" in url else "?"
            url += sep + urllib.parse.urlencode({k: str(v) for k, v in query.items()})
        return url

    def _fail(self, method: str, url: str, what: str) -> ReportError:
        text = f"{self.name}: {method} {urllib.parse.urlsplit(url).path}: {what}"
        return ReportError(text.replace(self._secret, "***") if len(self._secret) > 3 else text)

    def request(
        self, method: str, path: str, body: Json | None = None, *, query: Query | None = None
    ) -> Response:
        """Send one JSON request, retried within what is left of the client's shared budget."""
        url, policy, deadline = self.url(path, query), self.policy, self.deadline
        # every method is retried: a POST that failed was not applied
        retry = Retry(policy.attempts - 1, allowed_methods=None, status_forcelist=RETRIED_STATUS)
        budget, last = f"the {policy.budget_s:g} s budget", ""
        while True:
            remaining = deadline - self._clock()
            if remaining <= 0:
                last = (f"{last}; " if last else "") + f"no time left of {budget}"
                break
            outcome = self._try(method, url, body, min(policy.timeout_s, remaining), retry)
            if isinstance(outcome, Response):
                return outcome
            last, wait = outcome
            try:
                retry = retry.increment(method, url)
            except MaxRetryError:
                break
            if wait is None:  # doubling from the first retry (urllib3's Retry skips that wait)
                wait = min(policy.max_backoff_s, policy.backoff_s * 2 ** (len(retry.history) - 1))
            if wait >= deadline - self._clock():
                last += f"; the next try (in {wait:g} s) would pass {budget}"
                break
            self._sleep(wait)
        raise self._fail(method, url, f"gave up: {last}")

    def _try(
        self, method: str, url: str, body: Any, seconds: float, retry: Retry
    ) -> Response | Retryable:
        """One try, in a thread waited for at most ``seconds`` (and :data:`GRACE_S`)."""
        clock, slow, cut = self._clock, f"no response within {seconds:g} s", [False]
        end = clock() + seconds
        proxies = requests.utils.get_environ_proxies(url)
        options = {"json": body, "timeout": seconds, "allow_redirects": False, "proxies": proxies}

        def send() -> Response | Retryable:
            try:
                resp = self._session.request(method, url, stream=True, **options)
            except requests.RequestException as exc:
                timeout = cut[0] or isinstance(exc, requests.Timeout)
                return (slow if timeout else _wire_error(exc)), None
            with resp:
                try:  # the deadline is checked between reads of the body
                    return self._answer(method, url, resp, lambda: cut[0] or clock() >= end, retry)
                except (OSError, HTTPError, requests.RequestException) as exc:
                    if cut[0] or isinstance(exc, (TimeoutError, ReadLate)):
                        return f"{slow} (the body was still arriving)", None
                    return _wire_error(exc, "the body broke off"), None

        done: Future[Response | Retryable] = Future()

        def run() -> None:
            try:
                done.set_result(send())
            except BaseException as exc:  # raised in the caller by done.result()
                done.set_exception(exc)

        threading.Thread(target=run, name="perfgate-forge-try", daemon=True).start()
        try:
            return done.result(timeout=seconds + GRACE_S)
        except Late:
            cut[0] = True  # the thread stops at its next read, or its socket's timeout
            return slow, None

    def _answer(
        self, method: str, url: str, resp: requests.Response, expired: Expired, retry: Retry
    ) -> Response | Retryable:
        """The decoded response, or a try worth repeating; ReportError for one that is not."""
        status, headers = resp.status_code, {k.lower(): v for k, v in resp.headers.items()}
        if 300 <= status < 400:
            where = urllib.parse.urlsplit(headers.get("location", "")).hostname or "?"
            what = f"a redirect (to {where}) is not followed with the token; check the API URL"
            raise self._fail(method, url, f"{status} {resp.reason}: {what}")
        if status >= 400:
            last = f"{status} {resp.reason}{_api_message(resp.raw, expired)}"
            spent, asked = headers.get("x-ratelimit-remaining") == "0", "retry-after" in headers
            if not (retry.is_retry(method, status, asked) or status == 403 and (asked or spent)):
                raise self._fail(method, url, last + HINTS.get(status, ""))
            try:
                wait = retry.get_retry_after(resp.raw)
            except InvalidHeader:
                wait = None
            if wait is None and spent and (reset := headers.get("x-ratelimit-reset", "")).isdigit():
                wait = max(0.0, float(reset) - self._wall())
            return last, wait
        size, length = self.policy.max_bytes, headers.get("content-length", "").strip()
        raw = None if length.isdigit() and int(length) > size else _read(resp.raw, size, expired)
        if raw is None:
            limit = f"{size / 1024 / 1024:g} MiB" if size >= 1024 * 1024 else f"{size} bytes"
            raise self._fail(method, url, f"the response is larger than {limit}")
        try:
            return Response(status, headers, decode(raw))
        except ValueError as exc:
            raise self._fail(method, url, f"the response {exc}") from None


def _read(stream: Any, limit: int, expired: Expired) -> bytes | None:
    """A body read as it arrives (``read1``), ``expired`` checked between reads; None past limit."""
    read, body = getattr(stream, "read1", None) or stream.read, bytearray()
    while not expired():
        body += (part := read(CHUNK))
        if not part or len(body) > limit:
            return bytes(body) if len(body) <= limit else None
    raise TimeoutError


def _api_message(stream: Any, expired: Expired) -> str:
    """`` (message)`` from an error answer's JSON ``message`` (or ``error``), on one line."""
    try:
        payload = json.loads(_read(stream, ERROR_BODY_BYTES, expired) or b"null")
    except (ValueError, RecursionError, OSError, HTTPError):
        return ""
    message = payload.get("message") or payload.get("error") if isinstance(payload, dict) else ""
    text = " ".join(str(message or "").split())[:200]
    return f" ({text})" if text else ""


def _wire_error(exc: BaseException, what: str = "") -> str:
    """What failed on the wire, with its innermost cause (not requests' URL) on one line."""
    for _ in range(8):
        inner = getattr(exc, "reason", None) or exc.__cause__ or exc.__context__
        if not isinstance(inner, BaseException):
            break
        exc = inner
    unreachable = isinstance(exc, (ConnectionRefusedError, socket.gaierror))
    what = what or ("cannot connect" if unreachable else "connection failed")
    return f"{what} ({' '.join(f'{type(exc).__name__}: {exc}'.split())[:200]})"


def _safe_url(url: str) -> str:  # without credentials, query or fragment
    return str(requests.utils.urldefragauth(url)).partition("?")[0]
