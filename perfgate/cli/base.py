"""The command group, the options commands share, and the one place where errors become exit codes
(``0`` pass, ``1`` regression, ``2`` usage or configuration, ``3`` infrastructure,
``4`` internal error).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar, cast

import click

from perfgate import __version__
from perfgate.errors import ConfigError, ExitCode, PerfgateError
from perfgate.models import ParamValue

if TYPE_CHECKING:
    from perfgate.config import Config

F = TypeVar("F", bound=Callable[..., Any])


class PathType(click.Path):
    """``click.Path`` giving a :class:`~pathlib.Path`, that refuses an empty value: ``''``
    would be ``.``, and a file option given an unset variable (``--junit "$OUT"``) would
    write into the working directory or fail deep inside the command."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(path_type=Path, **kw)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("an empty path", param, ctx)
        return super().convert(value, param, ctx)


class _Group(click.Group):
    """Maps perfgate's errors to one line on stderr and the exit-code table."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PerfgateError as exc:
            click.echo(f"perfgate: error: {one_line(str(exc))}", err=True)
            ctx.exit(int(exc.exit_code))
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except MemoryError:  # the job's memory, not a bug: an input too large for it
            click.echo(
                "perfgate: error: out of memory: the input is too large for this job's memory "
                "(PERFGATE_MAX_DECOMPRESSED_MB caps what is read whole)",
                err=True,
            )
            ctx.exit(int(ExitCode.INFRASTRUCTURE))
        except Exception as exc:  # a bug in perfgate: say so, distinctly from a regression
            said = one_line(f"{type(exc).__name__}: {exc}")
            click.echo(f"perfgate: internal error: {said}", err=True)
            if os.environ.get("PERFGATE_DEBUG"):
                traceback.print_exc()
            ctx.exit(int(ExitCode.INTERNAL))


class _ClosedStdoutGuard:
    """``sys.stdout`` that outlives its reader: once a write or flush finds the pipe closed
    (``perfgate gate | head``), stdout is pointed at the null device and the rest of the
    output goes there, so the command finishes and exits with its own code (the verdict),
    not with a BrokenPipeError."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._discard()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._discard()

    def _discard(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)
        # what the closed pipe refused is still buffered: let it go to the null device
        with contextlib.suppress(OSError):
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_stdout() -> None:
    """Make a closed stdout harmless for the rest of the process (see
    :class:`_ClosedStdoutGuard`); only for a real stdout with a file descriptor."""
    stream = sys.stdout
    if stream is None or isinstance(stream, _ClosedStdoutGuard):
        return
    try:
        stream.fileno()
    except (OSError, ValueError, AttributeError):
        return
    sys.stdout = cast(TextIO, _ClosedStdoutGuard(stream))


@dataclass(frozen=True)
class StoreFlags:
    """The flags of :func:`store_options` as given."""

    suite: Path | None
    db_url: str | None
    project: str | None

    def config(self, **more: Any) -> Config:
        """The configuration these flags (and ``more`` of :func:`~perfgate.config.load_config`'s
        arguments) select."""
        from perfgate.config import load_config

        if self.suite is not None and not self.suite.is_file():
            raise ConfigError(f"{self.suite}: suite file not found")
        if self.project is not None and not self.project.strip():
            # an unset variable ("--project $PROJECT") would file the runs under a blank project
            raise ConfigError("--project: an empty project name; give one or leave the flag out")
        return load_config(self.suite, database_url=self.db_url, project=self.project, **more)


def options(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """One decorator of click's option ``decorators``, the first on top."""

    def apply(func: F) -> F:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


def grouped(name: str, make: Callable[..., Any], *decorators: Callable[[F], F]) -> Callable[[F], F]:
    """:func:`options` whose values reach the command as one argument ``name``: ``make``
    called with them by their parameter names."""
    probe = click.command()(options(*decorators)(cast(F, lambda: None)))
    names = [param.name for param in probe.params if param.name]

    def apply(func: F) -> F:
        @functools.wraps(func)
        def command(*args: Any, **kwargs: Any) -> Any:
            made = make(**{n: kwargs.pop(n) for n in names})
            return func(*args, **{name: made}, **kwargs)

        return options(*decorators)(cast(F, command))

    return apply


store_options = grouped(
    "store",
    StoreFlags,
    click.option(
        "--db",
        "db_url",
        metavar="URL",
        help="Store URL (default sqlite:///.perfgate/perfgate.db; env PERFGATE_DATABASE_URL).",
    ),
    click.option(
        "--suite",
        type=PathType(dir_okay=False),
        help="Suite file (default ./perfgate.toml or [tool.perfgate] in ./pyproject.toml).",
    ),
    click.option("--project", help="Project name (env PERFGATE_PROJECT)."),
)
"""Options every command that reads the store shares, handed to it as one ``store``
(:class:`StoreFlags`)."""


def parse_param(text: str) -> tuple[str, ParamValue]:
    """``key=value`` with the value read as bool, int, float or string, in that order."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"--param {text!r}: expected KEY=VALUE")
    if raw.lower() in ("true", "false"):
        return key.strip(), raw.lower() == "true"
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return key.strip(), kind(raw)
    return key.strip(), raw


def one_line(text: str) -> str:
    """``text`` with its control characters escaped (``\\n``, ``\\x1b``): an error or warning
    names what the user wrote (a quoted TOML key, a file name), which may hold a line break
    that would split the line or a terminal escape that would act on the screen."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def warn_line(line: str) -> None:
    """A use case's warning (``warn=``), one line on stderr."""
    click.echo(f"perfgate: warning: {one_line(line)}", err=True)


class _CommandGuard:
    """A text stream over ``raw`` that lets through no workflow command but perfgate's own.

    In a GitHub Actions job the runner acts on every line of a step's output (stdout and
    stderr) that looks like ``::name ...::message``: a branch, benchmark or file name with a
    newline and ``::error::`` in it would otherwise add an annotation, mask a value or stop
    command processing. Each line is passed through
    :func:`perfgate.reporters.annotations.neutralize`; the annotations perfgate means to
    print go to ``raw`` through :func:`echo_command`."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw
        self._at_line_start = True

    def write(self, text: str) -> int:
        from perfgate.reporters.annotations import ends_line, neutralize

        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if text:
            self.raw.write(neutralize(text, at_line_start=self._at_line_start))
            self._at_line_start = ends_line(text)
        return len(text)

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:
        return str(getattr(self.raw, "encoding", None) or "utf-8")

    def __getattr__(self, name: str) -> Any:
        if name in ("flush", "isatty", "fileno", "errors", "closed"):
            return getattr(self.raw, name)
        raise AttributeError(name)  # no ``buffer``: every write goes through :meth:`write`


def _guard_workflow_commands(ctx: click.Context) -> None:
    """In a GitHub Actions job (``GITHUB_ACTIONS=true``), stdout and stderr through
    :class:`_CommandGuard` until the command's context closes."""
    if os.environ.get("GITHUB_ACTIONS") != "true" or isinstance(sys.stdout, _CommandGuard):
        return
    saved = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, _CommandGuard(sys.stdout))
    sys.stderr = cast(TextIO, _CommandGuard(sys.stderr))

    def restore() -> None:
        sys.stdout, sys.stderr = saved

    ctx.call_on_close(restore)


def echo_command(line: str, *, err: bool = False) -> None:
    """Print ``line``, a workflow command perfgate means (an annotation), past the guard
    that neutralizes any other."""
    stream = sys.stderr if err else sys.stdout
    if isinstance(stream, _CommandGuard):
        stream.flush()
        stream = stream.raw
    click.echo(line, file=stream)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perfgate")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """perfgate: a CI performance-regression gate for deep-learning training and inference.

    \b
    Typical use:
        perfgate run --workload mlp --branch main      # record a baseline run
        perfgate gate --branch feat --against main     # exit 1 on a regression
    """
    _guard_workflow_commands(ctx)


def echo_report(
    value: Any, as_json: bool, to_dict: Callable[[Any], Any], to_text: Callable[[Any], str]
) -> None:
    """Print ``value`` as versioned JSON (``to_dict``) with ``as_json``, else as ``to_text``."""
    from perfgate.reporters.render import render_json

    click.echo(render_json(to_dict(value)) if as_json else to_text(value), nl=False)


def _echo_json(data: dict[str, Any]) -> None:
    import json

    click.echo(json.dumps({"format_version": 1, **data}, indent=2, allow_nan=False))


_by_option = options(
    click.option("--by", help="Who (default: GITLAB_USER_LOGIN, GITHUB_ACTOR or USER)."),
    click.option(
        "--reason", required=True, help="Why (recorded with the action; shown in the trail)."
    ),
)
"""``--by`` and ``--reason`` of a triage action."""
