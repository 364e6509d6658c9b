"""What every forge's poster shares that needs no HTTP client: the retry policy, a decoded
response, the upsert of a marked comment and the checks on a forge's answers.

Apart from :mod:`.http` (the client, on ``requests``) so that the registry, the gate and
``perfgate detect`` can read a forge's settings without loading an HTTP stack: ``requests``
is imported only when a delivery actually posts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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


def upsert_marked(
    client: ForgeClient,
    found: Mapping[str, Any] | None,
    *,
    body: str,
    create: bool,
    what: str,
    edit: Callable[[int], tuple[str, str]],
    post: str,
) -> str:
    """The one upsert of a forge's marked comment: edit ``found`` (the comment carrying the
    marker; ``edit(id)`` gives the method and path), else (when ``create``) post a new one
    at ``post``. ``what`` names the id in an error. Returns ``updated``, ``created`` or
    ``skipped``."""
    if found is not None:
        method, path = edit(api_int(found.get("id"), what))
        client.request(method, path, {"body": body})
        return "updated"
    if not create:
        return "skipped"
    client.request("POST", post, {"body": body})
    return "created"


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
