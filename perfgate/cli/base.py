"""The command group, the options commands share, and the one place where errors become exit codes
(``0`` pass, ``1`` regression, ``2`` usage or configuration, ``3`` infrastructure,
``4`` internal error).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from perfgate import __version__
from perfgate.errors import ConfigError, ExitCode, PerfgateError, ReportError
from perfgate.models import ParamValue

F = TypeVar("F", bound=Callable[..., Any])


class _Group(click.Group):
    """Maps perfgate's errors to one line on stderr and the exit-code table."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PerfgateError as exc:
            click.echo(f"perfgate: error: {exc}", err=True)
            ctx.exit(int(exc.exit_code))
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:  # a bug in perfgate: say so, distinctly from a regression
            click.echo(f"perfgate: internal error: {type(exc).__name__}: {exc}", err=True)
            if os.environ.get("PERFGATE_DEBUG"):
                traceback.print_exc()
            ctx.exit(int(ExitCode.INTERNAL))


def store_options(func: F) -> F:
    """Options every command that reads the store shares."""
    options = [
        click.option(
            "--db",
            "db_url",
            metavar="URL",
            help="Store URL (default sqlite:///.perfgate/perfgate.db; env PERFGATE_DATABASE_URL).",
        ),
        click.option(
            "--suite",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Suite file (default ./perfgate.toml or [tool.perfgate] in ./pyproject.toml).",
        ),
        click.option("--project", help="Project name (env PERFGATE_PROJECT)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _config(suite: Path | None, db_url: str | None, project: str | None, **kw: Any) -> Any:
    from perfgate.config import load_config

    if suite is not None and not suite.is_file():
        raise ConfigError(f"{suite}: suite file not found")
    return load_config(suite, database_url=db_url, project=project, **kw)


def _open_store(url: str, *, create: bool = True) -> Any:
    """The store at ``url``; commands that only read pass ``create=False``, so that a
    mistyped SQLite path is an error rather than a new, empty store."""
    from perfgate.app import open_store

    return open_store(url, create=create)


@contextmanager
def _writing(where: Path) -> Iterator[None]:
    """Output that cannot be written under ``where`` (not a directory, no permission, disk
    full): one line and exit 3, not an internal error."""
    try:
        yield
    except OSError as exc:
        raise ReportError(f"cannot write {exc.filename or where}: {exc.strerror or exc}") from None


def parse_param(text: str) -> tuple[str, ParamValue]:
    """``key=value`` with the value read as bool, int, float or string, in that order."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"--param {text!r}: expected KEY=VALUE")
    value: ParamValue
    if raw.lower() in ("true", "false"):
        value = raw.lower() == "true"
    else:
        try:
            value = int(raw)
        except ValueError:
            try:
                value = float(raw)
            except ValueError:
                value = raw
    return key.strip(), value


def _progress_fn() -> Callable[[str], None] | None:
    if os.environ.get("CI") or not sys.stderr.isatty():
        return None
    return lambda line: click.echo(f"  … {line}", err=True)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perfgate")
def cli() -> None:
    """perfgate: a CI performance-regression gate for deep-learning training and inference.

    \b
    Typical use:
        perfgate run --workload mlp --branch main      # record a baseline run
        perfgate gate --branch feat --against main     # exit 1 on a regression
    """


def _echo_json(data: dict[str, Any]) -> None:
    import json

    click.echo(json.dumps({"format_version": 1, **data}, indent=2, allow_nan=False))


def _by_option(func: F) -> F:
    func = click.option(
        "--reason", required=True, help="Why (recorded with the action; shown in the trail)."
    )(func)
    return click.option(
        "--by",
        help="Who (default: GITLAB_USER_LOGIN, GITHUB_ACTOR or USER).",
    )(func)


def _actor(by: str | None) -> str:
    from perfgate import app

    return by or app.default_actor(os.environ)
