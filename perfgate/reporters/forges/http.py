"""One small JSON-over-HTTP client for every forge's API, on ``urllib.request``.

A client has one bounded total time, ``budget_s``, shared by everything it sends (every
page, every retry, and the waits between): it starts with the first request, each try is
given at most ``min(timeout_s, what is left)``, and a try that outlives its time is cut
off whatever the server does (a watchdog shuts the connection's socket down, so a server
that drips its status line, headers or body a byte at a time cannot hold it longer; the
body is also read in chunks with the deadline checked between them). A body larger than
``max_bytes`` is refused. 429, 5xx, timeouts and connection errors are retried with
exponential backoff, honouring ``Retry-After`` when it fits in what is left of the budget;
401/403/404 (and every other 4xx) are not retried. An answer that is not what the API
documents (not JSON, the wrong types, an id that is not a number: :func:`api_int`) is a
:class:`~perfgate.errors.ReportError` too. Every failure raises ReportError with a one-line
message that never contains the token. Redirects are not followed (a token must never be
sent to another host), and pagination links are followed only under the API base URL.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import socket
import threading
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
MAX_BYTES = 8 * 1024 * 1024
"""The largest response body a client reads (no forge answer perfgate asks for is near it)."""
CHUNK = 64 * 1024
ERROR_BODY_BYTES = 64 * 1024
"""How much of an error response's body is read for its message."""


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


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
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


class _TryClock:
    """One try's time limit, enforced on its connections: when it passes, their sockets
    are shut down (through a duplicate of the descriptor, which works under TLS too), so no
    read - status line, headers or body - outlives it however slowly the server sends."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def watch(self, sock: socket.socket) -> None:
        try:
            dup = socket.socket(fileno=os.dup(sock.fileno()))
        except OSError:
            return
        with self._lock:
            self._socks.append(dup)
            fired = self.fired
        if fired:
            self._shutdown(dup)

    @staticmethod
    def _shutdown(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            socks = list(self._socks)
        for sock in socks:
            self._shutdown(sock)

    def __enter__(self) -> _TryClock:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        with self._lock:
            socks, self._socks = self._socks, []
        for sock in socks:
            sock.close()


class _Watched:
    """The try now in flight (one client sends one request at a time)."""

    current: _TryClock | None = None


def _watched(cls: type[http.client.HTTPConnection], holder: _Watched) -> Any:
    """A connection factory for ``urllib``'s ``do_open`` whose sockets the try in flight
    watches."""

    def make(host: str, **kwargs: Any) -> http.client.HTTPConnection:
        conn = cls(host, **kwargs)
        create = conn._create_connection  # type: ignore[attr-defined]

        def connect(*args: Any, **kw: Any) -> socket.socket:
            sock: socket.socket = create(*args, **kw)
            if holder.current is not None:
                holder.current.watch(sock)
            return sock

        conn._create_connection = connect  # type: ignore[attr-defined]
        return conn

    return make


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, holder: _Watched) -> None:
        super().__init__()
        self._holder = holder

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPConnection, self._holder), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, holder: _Watched) -> None:
        super().__init__()
        self._holder = holder

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        context = getattr(self, "_context", None)
        return self.do_open(
            _watched(http.client.HTTPSConnection, self._holder), req, context=context
        )


class _TooLarge(Exception):
    pass


class _TooSlow(Exception):
    pass


def read_capped(stream: Any, limit: int, expired: Callable[[], bool], chunk: int = CHUNK) -> bytes:
    """A response body read ``chunk`` bytes at a time (what the socket has, not a full
    chunk), checking ``expired`` between reads; _TooLarge past ``limit`` bytes, _TooSlow once
    ``expired`` says so."""
    read = getattr(stream, "read1", None) or stream.read
    parts: list[bytes] = []
    size = 0
    while True:
        if expired():
            raise _TooSlow
        part = read(chunk)
        if not part:
            return b"".join(parts)
        size += len(part)
        if size > limit:
            raise _TooLarge
        parts.append(part)


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
        self._watched = _Watched()
        self._opener = urllib.request.build_opener(
            _NoRedirect(), _HTTPHandler(self._watched), _HTTPSHandler(self._watched)
        )
        self._deadline: float | None = None

    @property
    def deadline(self) -> float:
        """When (on the client's clock) this client's budget runs out; the budget starts
        with its first request."""
        if self._deadline is None:
            self._deadline = self._clock() + self.policy.budget_s
        return self._deadline

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
        """Send one JSON request, retrying what is worth retrying within what is left of
        the client's budget (shared with its other requests)."""
        url = self.url(path, query)
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self._headers)
        if data is not None:
            headers["Content-Type"] = "application/json"
        policy = self.policy
        deadline = self.deadline
        last = f"no time left of the {policy.budget_s:g} s budget"
        for attempt in range(policy.attempts):
            remaining = deadline - self._clock()
            if remaining <= 0:
                break
            wait: float | None = None
            per_try = min(policy.timeout_s, remaining)
            try_end = self._clock() + per_try
            req = urllib.request.Request(url, data=data, headers=headers, method=method)
            watch = _TryClock(per_try)
            slow = f"no response within {per_try:g} s"

            def expired(watch: _TryClock = watch, try_end: float = try_end) -> bool:
                return watch.fired or self._clock() >= try_end

            self._watched.current = watch
            watch.__enter__()
            try:
                with self._opener.open(req, timeout=per_try) as resp:
                    slow = f"no response within {per_try:g} s (the body was still arriving)"
                    status = resp.status
                    resp_headers = {k.lower(): v for k, v in resp.headers.items()}
                    length = resp_headers.get("content-length", "").strip()
                    if length.isdigit() and int(length) > policy.max_bytes:
                        raise _TooLarge
                    raw = read_capped(resp, policy.max_bytes, expired)
                    if watch.fired:
                        raise _TooSlow
                return Response(status, resp_headers, self._decode(method, url, raw))
            except _TooLarge:
                raise self._fail(
                    method, url, f"the response is larger than {_size(policy.max_bytes)}"
                ) from None
            except _TooSlow:
                last = slow
            except urllib.error.HTTPError as exc:
                resp_headers = {k.lower(): v for k, v in exc.headers.items()} if exc.headers else {}
                detail = self._api_message(exc, expired)
                last = f"{exc.code} {exc.reason}" + (f" ({detail})" if detail else "")
                rate_limited = exc.code == 403 and (
                    "retry-after" in resp_headers
                    or resp_headers.get("x-ratelimit-remaining") == "0"
                )
                if exc.code not in RETRIED_STATUS and not rate_limited:
                    raise self._fail(method, url, last + self._hint(exc.code)) from None
                wait = _retry_after(resp_headers, self._wall())
            except TimeoutError:
                last = slow
            except urllib.error.URLError as exc:
                reason = exc.reason
                if isinstance(reason, TimeoutError) or watch.fired:
                    last = slow
                else:
                    last = f"cannot connect ({reason})"
            except (http.client.HTTPException, ConnectionError, OSError, ValueError) as exc:
                if watch.fired:
                    last = slow
                else:
                    last = f"connection failed ({type(exc).__name__}: {exc})"
            finally:
                self._watched.current = None
                watch.__exit__()
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
        except (ValueError, RecursionError):
            raise self._fail(method, url, "the response is not JSON") from None

    def _api_message(self, exc: urllib.error.HTTPError, expired: Callable[[], bool]) -> str:
        try:
            raw = read_capped(exc, ERROR_BODY_BYTES, expired)
        except (_TooLarge, _TooSlow, OSError, http.client.HTTPException, ValueError):
            return ""
        finally:
            exc.close()
        try:
            payload = json.loads(raw or b"null")
        except (ValueError, RecursionError):
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


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:g} MiB" if n >= 1024 * 1024 else f"{n} bytes"


def carries_marker(body: str, marker: str) -> bool:
    """Whether a comment, note or issue ``body`` is perfgate's own: it starts with the hidden
    marker. A person quoting perfgate's comment carries the marker too, but after a quote
    sign, and is left alone."""
    return body.lstrip().startswith(marker)
