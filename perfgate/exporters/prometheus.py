"""The push of the latest values to a Prometheus Pushgateway: the one I/O of ``perfgate export
prometheus`` (:mod:`perfgate.reporters.prometheus` names the values and builds their text).
Credentials in the gateway's URL are sent as HTTP basic auth and never shown; a failed push is
a :class:`~perfgate.errors.ReportError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from urllib.error import URLError
from urllib.parse import unquote

from perfgate.errors import ConfigError, ReportError, shown_url, split_userinfo
from perfgate.reporters.prometheus import LatestValue, registry_of


def split_credentials(gateway: str) -> tuple[str, str | None, str | None]:
    """``http://user:pass@host:9091/x`` as (``http://host:9091/x``, user, password), the
    credentials ending at the *last* ``@`` of the authority (a host name has none, so an
    unencoded ``@`` in the password stays in the password); a URL without credentials
    comes back as it is, with (None, None)."""
    bare, userinfo = split_userinfo(gateway)
    if userinfo is None:
        return gateway, None, None
    user, _, password = userinfo.partition(":")
    return bare, unquote(user), unquote(password)


def push_prometheus(
    values: Sequence[LatestValue], gateway: str, *, job: str, timeout: float = 10.0
) -> None:
    """PUT ``values`` to the Pushgateway at ``gateway`` under ``/metrics/job/<job>``
    (replacing what that job pushed before). Credentials in the URL
    (``http://user:password@host:9091``) are sent as HTTP basic auth."""
    # Messages show the URL without user:password@ (a credential never reaches a CI log).
    bare, user, password = split_credentials(gateway)
    shown = shown_url(gateway)
    if not gateway.startswith(("http://", "https://")):
        raise ConfigError(f"--push-gateway {shown!r}: expected an http(s):// URL")
    if not job.strip():  # the gateway refuses it: a failed push (exit 3) for a bad option
        raise ConfigError("--job: empty; the Pushgateway groups what it keeps by a job name")
    registry = registry_of(values)
    from prometheus_client import push_to_gateway
    from prometheus_client.exposition import basic_auth_handler, default_handler

    auth = partial(basic_auth_handler, username=user, password=password)
    handler = default_handler if user is None else auth
    try:
        push_to_gateway(bare, job=job, registry=registry, timeout=timeout, handler=handler)
    except (URLError, OSError, ValueError) as exc:
        reason = str(getattr(exc, "reason", None) or exc)
        reason = reason.replace(gateway, shown).replace(bare, shown)
        if password:
            reason = reason.replace(password, "***")
        raise ReportError(f"push to the Pushgateway {shown} failed: {reason}") from None
