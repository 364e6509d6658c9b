"""One error hierarchy and one exit-code table.

Library code raises :class:`PerfgateError` subclasses; only the CLI turns them into exit
codes, in one place (``perfgate/cli/base.py``), through :attr:`PerfgateError.exit_code`.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from enum import IntEnum, unique
from urllib.parse import unquote_plus

SECRET_QUERY_WORDS = ("password", "secret", "token")
"""Words that make a URL query parameter a secret, its value shown as ``***`` in every
message: libpq's ``password`` and ``sslpassword`` (the client key's passphrase), the options
libpq itself marks as secret, and a driver's, gateway's or proxy's ``..._secret`` or
``..._token``. A path to a secret (``passfile``, ``sslkey``) is not one."""


_KEYWORD_SECRET = re.compile(
    rf"(?i)\b(\w*(?:{'|'.join(SECRET_QUERY_WORDS)})\w*)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)"
)


def split_userinfo(url: str) -> tuple[str, str | None]:
    """``url`` without its ``user:password@``, and that ``user:password`` (None without
    one). The credentials end at the *last* ``@`` of the authority (a host name has none,
    so an unencoded ``@`` in the password stays in the password)."""
    scheme, sep, rest = url.partition("://")
    end = next((i for i, ch in enumerate(rest) if ch in "/?#"), len(rest))
    if not sep or "@" not in rest[:end]:
        return url, None
    userinfo, _, host = rest[:end].rpartition("@")
    return f"{scheme}://{host}{rest[end:]}", userinfo


def shown_url(url: str) -> str:
    """``url`` as output shows it: without ``user:password@`` (:func:`split_userinfo`) and
    with each secret of its query as ``***`` (:func:`mask_query`): a Pushgateway's URL in a
    message, a report's link in a comment."""
    return mask_query(split_userinfo(url)[0])


def mask_query(shown: str) -> str:
    """``shown`` (a URL) with the value of each secret parameter of its query (what follows
    its first ``?``; :data:`SECRET_QUERY_WORDS`) replaced by ``***``: the one place a
    message's URL loses its query's secrets (the store's URL, the Pushgateway's)."""
    base, mark, query = shown.partition("?")
    if not mark:  # a libpq key=value string (host=... password=...) masks its secrets too
        return shown if "://" in shown else _KEYWORD_SECRET.sub(r"\1=***", shown)
    pairs = []
    for pair in query.split("&"):
        name, eq, _ = pair.partition("=")
        secret = any(word in unquote_plus(name).lower() for word in SECRET_QUERY_WORDS)
        pairs.append(f"{name}=***" if eq and secret else pair)
    return f"{base}?{'&'.join(pairs)}"


@unique
class ExitCode(IntEnum):
    """Process exit status of every perfgate command (DESIGN.md §9)."""

    OK = 0
    REGRESSION = 1
    USAGE = 2
    INFRASTRUCTURE = 3
    INTERNAL = 4


class PerfgateError(Exception):
    """Base of every error perfgate raises on purpose; its message is one line for a person."""

    exit_code: ExitCode = ExitCode.INTERNAL


class ConfigError(PerfgateError):
    """A suite file, flag or environment variable is wrong."""

    exit_code = ExitCode.USAGE


class UsageError(PerfgateError):
    """The command was asked for something it cannot do as asked."""

    exit_code = ExitCode.USAGE


class ParseError(PerfgateError):
    """A profile or data file cannot be read as the format it claims to be."""

    exit_code = ExitCode.USAGE


class StoreError(PerfgateError):
    """The baseline store cannot be opened, read or written."""

    exit_code = ExitCode.INFRASTRUCTURE


class NotFoundError(StoreError):
    """The store holds no record the given id, id prefix or commit names (or several): the
    caller's mistake, so a usage error, not an infrastructure one."""

    exit_code = ExitCode.USAGE


class RunnerError(PerfgateError):
    """A benchmark could not be run or measured (its code raised, a worker died, ...)."""

    exit_code = ExitCode.INFRASTRUCTURE


class ReportError(PerfgateError):
    """A report could not be delivered (forge API refused it, timed out, or is unreachable).

    The message never carries a token; a failure to post never changes a gate's verdict.
    """

    exit_code = ExitCode.INFRASTRUCTURE


class DeliverySetupError(ReportError):
    """A report cannot be delivered because the job is not set up to (no token, no
    repository, a forge perfgate cannot tell): the job's configuration, so a usage error
    where it ends a command (``perfgate comment``); a gate's delivery says it as a warning,
    as it does every :class:`ReportError`."""

    exit_code = ExitCode.USAGE


class TooLargeError(PerfgateError):
    """An input is larger than perfgate reads into memory (a trace read whole): the job's
    limit, not a broken file, so an infrastructure error; the message gives the size and
    the limit."""

    exit_code = ExitCode.INFRASTRUCTURE


# What a CI template's user sets when torch is missing: the templates install no torch unless
# told which build the runner needs (``preinstalled``, the default, leaves the runner's own).
TORCH_IN_CI = (
    "; in CI set the template's torch choice (the action's `torch` input, "
    "PERFGATE_TORCH on GitLab and GitCode) to cpu or cuda"
)


class MissingExtra(PerfgateError):
    """An optional dependency a command needs is not installed; the message names the extra
    that installs it."""

    exit_code = ExitCode.USAGE

    def __init__(self, feature: str, package: str, extra: str) -> None:
        hint = TORCH_IN_CI if package == "torch" else ""
        super().__init__(f"{feature} needs {package}: pip install 'perfgate[{extra}]'{hint}")
        self.feature = feature
        self.package = package
        self.extra = extra

    def __reduce__(self) -> tuple[type[MissingExtra], tuple[str, str, str]]:
        # Raised in a worker process (the HTML site's pool), it is pickled back to the parent.
        return (type(self), (self.feature, self.package, self.extra))


def require(module: str, *, extra: str, feature: str, load: bool = True) -> None:
    """Make sure the optional ``module`` can be used by ``feature``, or raise
    :class:`MissingExtra` naming ``extra``.

    With ``load`` (the default) the module is imported, so a broken install counts as a
    missing one and the caller's own ``import`` that follows is a dictionary lookup; without
    it the module is only looked up, not imported (the runner's parent process checks for
    torch this way and leaves importing it to the worker).
    """
    package = module.partition(".")[0]
    try:
        if load:
            importlib.import_module(module)
            return
        if importlib.util.find_spec(package) is not None:
            return
    except (ImportError, ValueError) as exc:
        raise MissingExtra(feature, package, extra) from exc
    raise MissingExtra(feature, package, extra)
