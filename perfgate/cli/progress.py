"""Progress lines on stderr for the commands that take long (``run``, ``check``, a large
``ingest``): one line per finished repeat or A/B pair, on a terminal and in a CI log alike
(a CI log has no terminal, and a ten-minute job that prints nothing looks hung).

Each line is ``perfgate: [MM:SS] <benchmark>: repeat 2/5: step 12.3 ms, cpu 11.9 ms; 3
left``: the time since the command started, the benchmark, which repeat, its value and what
is left. ``--quiet`` turns them off. They go to stderr, so stdout (a report, ``--json``)
stays as it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def elapsed_text(seconds: float) -> str:
    """``MM:SS`` (``H:MM:SS`` from an hour on)."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class ProgressLines:
    """A progress callback (``ProgressFn``) that prints each line with the time since it was
    made (the command's start); ``clock`` and ``echo`` are injectable for tests."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        echo: Callable[[str], None] | None = None,
    ) -> None:
        self._clock = clock
        self._start = clock()
        self._echo = echo or (lambda line: click.echo(line, err=True))

    def __call__(self, line: str) -> None:
        self._echo(f"perfgate: [{elapsed_text(self._clock() - self._start)}] {line}")


def quiet_option(func: F) -> F:
    """``--quiet`` / ``-q``: no progress lines. It is kept in the click context (read by
    :func:`progress_for_command`), so the commands' signatures do not change."""

    def remember(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
        ctx.meta["perfgate.quiet"] = value
        return value

    return click.option(
        "--quiet",
        "-q",
        is_flag=True,
        expose_value=False,
        callback=remember,
        help="No progress lines on stderr (one per finished repeat or pair by default).",
    )(func)


def progress_for_command() -> ProgressLines | None:
    """The progress callback of the running command: None under ``--quiet``."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.meta.get("perfgate.quiet"):
        return None
    return ProgressLines()
