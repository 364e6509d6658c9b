"""One small JSON-over-HTTP client for every forge's API, on ``requests`` (one Session per
client) with urllib3's :class:`~urllib3.util.Retry` deciding what is retried and how long to
wait.

A client has one bounded total time, ``budget_s``, shared by everything it sends (every
page, every retry, and the waits between): it starts with the first request, each try is
given at most ``min(timeout_s, what is left)``, and a try that outlives its time is cut off
whatever the server does. Socket timeouts alone cannot do that (they bound one read, and a
server that drips a byte every two seconds never lets one expire), so a watchdog shuts the
try's sockets down when its time is up, and the body is read as it arrives (``read1``: what
the socket has, never "wait for a whole chunk") with the deadline and ``max_bytes`` checked
between reads.

429, 500, 502, 503 and 504, timeouts and connection errors are retried, each request
``attempts`` times at most: the wait doubles from ``backoff_s`` (urllib3's Retry counts the
tries and computes it) unless the server's ``Retry-After`` says otherwise, and a wait that
would pass the budget ends the request at once. 401/403/404 (and every other 4xx) are not
retried, but for GitHub's rate-limit 403. Redirects are never followed (a token must never go
to another host): a 3xx is an error naming its status. Pagination links are followed only
under the API base URL. An answer that is not what the API documents (not JSON, the wrong
types, an id that is not a number: :func:`perfgate.reporters.forges.api.api_int`) is a
:class:`~perfgate.errors.ReportError` too. Every failure raises ReportError with a one-line
message that never contains the token.

Proxies come from the environment (``http_proxy``/``https_proxy``/``no_proxy``, as
``urllib`` read them); certificates from the system's store (``SSL_CERT_FILE`` honoured) as
well as requests' bundle. Nothing else is taken from the environment: no ``.netrc``
credentials are ever added to a request.
"""

from __future__ import annotations

import contextvars
import email.utils
import json
import os
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import requests
import requests.adapters
import requests.utils
import urllib3
import urllib3.connection
import urllib3.connectionpool
import urllib3.exceptions
from urllib3.util.retry import Retry

from perfgate import __version__
from perfgate.errors import ConfigError, ReportError
from perfgate.reporters.forges.api import Response, RetryPolicy

RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})
CHUNK = 64 * 1024
ERROR_BODY_BYTES = 64 * 1024
"""How much of an error response's body is read for its message."""


# --- the watchdog: one try's time limit, enforced on its sockets ---------------------------


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


_IN_FLIGHT: contextvars.ContextVar[_TryClock | None] = contextvars.ContextVar(
    "perfgate_forge_try", default=None
)
"""The try now in flight in this thread (a client sends one request at a time); the
connections below hand it every socket they open or reuse."""


def _watch(sock: socket.socket | None) -> None:
    clock = _IN_FLIGHT.get()
    if clock is not None and sock is not None:
        clock.watch(sock)


class _WatchedHTTPConnection(urllib3.connection.HTTPConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _watch(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        _watch(self.sock)  # a kept-alive connection from an earlier try
        super().request(*args, **kwargs)


class _WatchedHTTPSConnection(urllib3.connection.HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _watch(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        _watch(self.sock)
        super().request(*args, **kwargs)


class _HTTPPool(urllib3.connectionpool.HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _HTTPSPool(urllib3.connectionpool.HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


_POOLS: dict[str, type[urllib3.connectionpool.HTTPConnectionPool]] = {
    "http": _HTTPPool,
    "https": _HTTPSPool,
}


class _Adapter(requests.adapters.HTTPAdapter):
    """requests' adapter with watched connections, the system's certificate store, and no
    retries of its own (the client's loop asks its :class:`_Retry`)."""

    def __init__(self) -> None:
        super().__init__(max_retries=0)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("ssl_context", ssl.create_default_context())
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if isinstance(manager, urllib3.PoolManager):
            manager.pool_classes_by_scheme = _POOLS
        return manager


def _session(headers: Mapping[str, str]) -> requests.Session:
    session = requests.Session()
    # proxies are read per request (get_environ_proxies); trust_env would also add .netrc
    # credentials over the token's header
    session.trust_env = False
    session.headers.clear()
    session.headers.update(headers)
    session.mount("http://", _Adapter())
    session.mount("https://", _Adapter())
    return session


# --- what is retried and how long to wait ----------------------------------------------------


class _Retry(Retry):
    """urllib3's Retry whose first retry waits ``backoff_factor`` (urllib3 retries the first
    at once) and whose waits double from there, capped at ``backoff_max``."""

    def get_backoff_time(self) -> float:
        tries = len(self.history)
        if tries == 0:
            return 0.0
        return float(min(self.backoff_max, self.backoff_factor * 2 ** (tries - 1)))


class _TooLarge(Exception):
    pass


class _TooSlow(Exception):
    pass


def read_capped(stream: Any, limit: int, expired: Callable[[], bool], chunk: int = CHUNK) -> bytes:
    """A response body read as it arrives (``read1``: what the socket has, at most ``chunk``
    bytes; ``read`` where a stream has no ``read1``), checking ``expired`` between reads;
    _TooLarge past ``limit`` bytes, _TooSlow once ``expired`` says so."""
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


def _rate_limit_wait(headers: Mapping[str, str], now: float) -> float | None:
    """GitHub's ``X-RateLimit-Reset`` (epoch seconds) when ``X-RateLimit-Remaining`` is 0."""
    if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset"):
        try:
            return max(0.0, float(headers["x-ratelimit-reset"]) - now)
        except ValueError:
            return None
    return None


def _retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds ``Retry-After`` asks for (seconds, or an HTTP date against ``now``)."""
    raw = headers.get("retry-after", "").strip()
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


class ForgeClient:
    """JSON requests to one API base URL with one set of credentials, over one
    :class:`requests.Session`.

    Args:
        name: the forge's name for messages (``GitHub``, ``GitLab``, ``GitCode``).
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
        self._secret = secret
        self.policy = policy or RetryPolicy()
        self._sleep = sleep
        self._clock = clock
        self._wall = wall_clock
        self._session = _session(
            {
                "Accept": "application/json",
                "Accept-Encoding": "identity",
                "User-Agent": f"perfgate/{__version__}",
                **headers,
            }
        )
        self._deadline: float | None = None

    @property
    def deadline(self) -> float:
        """When (on the client's clock) this client's budget runs out; the budget starts
        with its first request."""
        if self._deadline is None:
            self._deadline = self._clock() + self.policy.budget_s
        return self._deadline

    def close(self) -> None:
        """Close the session's pooled connections."""
        self._session.close()

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

    def _retry(self) -> _Retry:
        policy = self.policy
        return _Retry(
            total=policy.attempts - 1,
            connect=None,
            read=None,
            status=None,
            other=None,
            redirect=0,
            allowed_methods=None,  # every method: a POST that failed was not applied
            status_forcelist=RETRIED_STATUS,
            backoff_factor=policy.backoff_s,
            backoff_max=policy.max_backoff_s,
            respect_retry_after_header=True,
            raise_on_status=False,
        )

    @contextmanager
    def _try(self, seconds: float) -> Iterator[_TryClock]:
        watch = _TryClock(seconds)
        token = _IN_FLIGHT.set(watch)
        try:
            with watch:
                yield watch
        finally:
            _IN_FLIGHT.reset(token)

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
        headers = {"Content-Type": "application/json"} if data is not None else {}
        proxies = requests.utils.get_environ_proxies(url)
        policy = self.policy
        deadline = self.deadline
        retry = self._retry()
        out_of_time = f"no time left of the {policy.budget_s:g} s budget"
        last = out_of_time
        while True:
            remaining = deadline - self._clock()
            if remaining <= 0:
                if last != out_of_time:  # the deadline ended it, after that failed try
                    last += f"; {out_of_time}"
                break
            per_try = min(policy.timeout_s, remaining)
            try_end = self._clock() + per_try
            slow = f"no response within {per_try:g} s"
            failed: Any = None  # what Retry.increment is told: a response or an error
            wait: float | None = None
            with self._try(per_try) as watch:
                try:
                    resp = self._session.request(
                        method,
                        url,
                        data=data,
                        headers=headers,
                        timeout=per_try,
                        allow_redirects=False,
                        stream=True,
                        proxies=proxies,
                    )
                except requests.RequestException as exc:
                    if watch.fired or isinstance(exc, requests.Timeout):
                        last = slow
                    elif isinstance(exc, requests.ConnectionError) and _refused(exc):
                        last = f"cannot connect ({_reason(exc)})"
                    else:
                        last = f"connection failed ({_reason(exc)})"
                    failed = urllib3.exceptions.ProtocolError(last)
                else:
                    with resp:
                        outcome = self._answer(method, url, resp, watch, try_end, slow, retry)
                    if isinstance(outcome, Response):
                        return outcome
                    last, failed, wait = outcome
            if failed is None:
                break
            try:
                if isinstance(failed, urllib3.BaseHTTPResponse):
                    retry = retry.increment(method, url, response=failed)
                else:
                    retry = retry.increment(method, url, error=failed)
            except urllib3.exceptions.MaxRetryError:
                break
            if wait is None:
                wait = retry.get_backoff_time()
            remaining = deadline - self._clock()
            if wait >= remaining:
                last += (
                    f"; the next try (in {wait:g} s) would pass the {policy.budget_s:g} s budget"
                )
                break
            self._sleep(wait)
        raise self._fail(method, url, f"gave up: {last}")

    def _answer(
        self,
        method: str,
        url: str,
        resp: requests.Response,
        watch: _TryClock,
        try_end: float,
        slow: str,
        retry: Retry,
    ) -> Response | tuple[str, Any, float | None]:
        """The decoded response, or (what went wrong, what to tell Retry, the wait the
        server asked for) for a try worth repeating; ReportError for one that is not."""
        policy = self.policy

        def expired() -> bool:
            return watch.fired or self._clock() >= try_end

        status = resp.status_code
        resp_headers = {k.lower(): v for k, v in resp.headers.items()}
        if 300 <= status < 400:
            where = urllib.parse.urlsplit(resp_headers.get("location", "")).hostname or "?"
            raise self._fail(
                method,
                url,
                f"{status} {resp.reason}: a redirect (to {where}) is not followed with the token;"
                " check the API URL",
            )
        if status >= 400:
            detail = self._api_message(resp.raw, expired)
            last = f"{status} {resp.reason}" + (f" ({detail})" if detail else "")
            has_retry_after = "retry-after" in resp_headers
            rate_limited = status == 403 and (
                has_retry_after or resp_headers.get("x-ratelimit-remaining") == "0"
            )
            if not (retry.is_retry(method, status, has_retry_after) or rate_limited):
                raise self._fail(method, url, last + self._hint(status))
            now = self._wall()
            wait = _retry_after(resp_headers, now)
            if wait is None:
                wait = _rate_limit_wait(resp_headers, now)
            return last, resp.raw, wait
        length = resp_headers.get("content-length", "").strip()
        if length.isdigit() and int(length) > policy.max_bytes:
            raise self._fail(method, url, f"the response is larger than {_size(policy.max_bytes)}")
        try:
            raw = read_capped(resp.raw, policy.max_bytes, expired)
            if watch.fired:  # a body cut off by the watchdog ends early, as if complete
                raise _TooSlow
        except _TooLarge:
            raise self._fail(
                method, url, f"the response is larger than {_size(policy.max_bytes)}"
            ) from None
        except (_TooSlow, OSError, urllib3.exceptions.HTTPError, requests.RequestException) as exc:
            cut = watch.fired or isinstance(
                exc, (_TooSlow, TimeoutError, urllib3.exceptions.TimeoutError)
            )
            last = (
                f"{slow} (the body was still arriving)"
                if cut
                else f"the body broke off ({_reason(exc)})"
            )
            return last, urllib3.exceptions.ReadTimeoutError(None, url, last), None  # type: ignore[arg-type]
        return Response(status, resp_headers, self._decode(method, url, raw))

    def _decode(self, method: str, url: str, raw: bytes) -> Any:
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise self._fail(method, url, "the response is not JSON") from None

    def _api_message(self, stream: Any, expired: Callable[[], bool]) -> str:
        try:
            raw = read_capped(stream, ERROR_BODY_BYTES, expired)
        except (_TooLarge, _TooSlow, OSError, urllib3.exceptions.HTTPError, ValueError):
            return ""
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


def _reason(exc: BaseException) -> str:
    """The innermost cause of a requests/urllib3 error, in one short line (never the URL's
    query, which requests would show)."""
    inner: BaseException = exc
    seen = 0
    while seen < 8:
        seen += 1
        nxt = getattr(inner, "reason", None) or inner.__cause__ or inner.__context__
        if not isinstance(nxt, BaseException) or nxt is inner:
            break
        inner = nxt
    if isinstance(inner, urllib3.exceptions.NewConnectionError):
        text = str(inner).split(": ", 1)[-1]
    else:
        text = str(inner)
    return " ".join(f"{type(inner).__name__}: {text}".split())[:200]


def _refused(exc: requests.ConnectionError) -> bool:
    inner: BaseException | None = exc
    for _ in range(8):
        if inner is None:
            return False
        if isinstance(inner, (ConnectionRefusedError, socket.gaierror)) or isinstance(
            inner, urllib3.exceptions.NewConnectionError
        ):
            return True
        inner = getattr(inner, "reason", None) or inner.__cause__ or inner.__context__
    return False


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:g} MiB" if n >= 1024 * 1024 else f"{n} bytes"
