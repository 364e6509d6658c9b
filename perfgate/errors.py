"""One error hierarchy and one exit-code table.

Library code raises :class:`PerfgateError` subclasses; only ``cli.py`` turns them into
exit codes, through :attr:`PerfgateError.exit_code`.
"""

from __future__ import annotations

from enum import IntEnum, unique


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

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


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


class RunnerError(PerfgateError):
    """A benchmark could not be run or measured (its code raised, a worker died, ...)."""

    exit_code = ExitCode.INFRASTRUCTURE


class ReportError(PerfgateError):
    """A report could not be delivered (forge API refused it, timed out, or is unreachable).

    The message never carries a token; a failure to post never changes a gate's verdict.
    """

    exit_code = ExitCode.INFRASTRUCTURE
