"""The command line: parse options, call one function of :mod:`perfgate.app`, render, exit.

One module per command group (:mod:`~perfgate.cli.run`, :mod:`~perfgate.cli.check`,
:mod:`~perfgate.cli.gate`, :mod:`~perfgate.cli.history`, :mod:`~perfgate.cli.look`,
:mod:`~perfgate.cli.team`); the group,
its shared options and the mapping of errors to exit codes (``0`` pass, ``1`` regression, ``2``
usage or configuration, ``3`` infrastructure, ``4`` internal error) are in
:mod:`~perfgate.cli.base`. The only package that imports click.
"""

from __future__ import annotations

from perfgate.cli import bisect, check, gate, history, look, run, team  # noqa: F401  (registers the commands)
from perfgate.cli.base import cli, guard_stdout

__all__ = ["cli", "main"]


def main() -> None:
    guard_stdout()
    cli(prog_name="perfgate")
