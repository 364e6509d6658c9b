"""``perfgate bisect``: the first commit of a range that made a benchmark slower."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from perfgate.cli.base import PathType, StoreFlags, cli
from perfgate.cli.progress import progress_for_command
from perfgate.errors import ConfigError, ExitCode, UsageError

if TYPE_CHECKING:
    from perfgate.app.bisect import BisectOutcome, Step


@cli.command()
@click.option(
    "--suite",
    type=PathType(dir_okay=False),
    help="Suite file (default ./perfgate.toml); each commit runs the benchmark as its own "
    "copy of this file defines it.",
)
@click.option("--project", help="Project name (env PERFGATE_PROJECT): the tracking issue's.")
@click.option("--benchmark", metavar="NAME", help="The benchmark that got slower.")
@click.option("--good", metavar="REF", help="A commit where it was fast.")
@click.option("--bad", metavar="REF", help="A later commit where it is slow.")
@click.option(
    "--changes",
    type=PathType(dir_okay=False),
    help="Instead of --benchmark/--good/--bad: the JSON of 'history analyze --json'; the "
    "largest regression whose commit range spans more than one commit (and whose culprit "
    "the tracking issue does not name yet, with --alert) is searched, with half its change "
    "as the minimum effect.",
)
@click.option(
    "--budget",
    default="20m",
    show_default=True,
    metavar="TIME",
    help="Time the whole search may spend measuring (600s, 20m, 1h).",
)
@click.option(
    "--min-effect",
    "min_effect",
    type=click.FloatRange(min=0.0, min_open=True),
    metavar="PCT",
    help="A midpoint is bad when at least this much slower than the last good commit, good "
    "when within it (default: the metric's minimum effect).",
)
@click.option("--branch", help="The branch named on the tracking issue (default: base_branch).")
@click.option(
    "--alert",
    is_flag=True,
    help="Name the culprit (its author line and measured change) on the project's tracking "
    "issue, as 'history analyze --alert' reports change points. Exits 3 if that fails.",
)
@click.option("--forge", metavar="FORGE", help="github, gitlab or gitcode (default: detected).")
@click.option(
    "--forge-url", metavar="URL", help="API base URL (GitHub Enterprise, GitLab, GitCode)."
)
@click.option("--repo", help="GitHub/GitCode owner/name or GitLab project id (default: from CI).")
@click.option("--json", "as_json", is_flag=True, help='Print {"culprit": SHA, "steps": [...]}.')
def bisect(
    suite: Path | None,
    project: str | None,
    benchmark: str | None,
    good: str | None,
    bad: str | None,
    changes: Path | None,
    budget: str,
    min_effect: float | None,
    branch: str | None,
    alert: bool,
    forge: str | None,
    forge_url: str | None,
    repo: str | None,
    as_json: bool,
) -> None:
    """Find the commit between --good and --bad that made a benchmark slower.

    Each round checks a midpoint out in a git worktree and measures it against the last
    commit known good in alternating pairs, as 'check --mode ab' does, until the paired rule
    decides (a midpoint left inconclusive is measured again, adding pairs at looks within
    its share of --budget); then the range is halved. A commit that does not build or run
    is skipped and said. Exit 0 with the culprit named; 3 when the budget ran out, a
    midpoint stayed inconclusive or every commit left was skipped (the range narrowed so
    far is printed); 2 on bad input.

    \b
    Example:
        perfgate bisect --suite perfgate.toml --benchmark mlp --good v1.2 --bad main
        perfgate bisect --changes changes.json --alert        # the nightly
    """
    from perfgate.app import bisect as use_case
    from perfgate.app.deliver import TargetOverrides

    seconds = _budget_seconds(changes, benchmark, good, bad, budget)
    found = use_case.bisect_job(
        StoreFlags(suite, None, project).config(),
        suite=suite,
        seconds=seconds,
        benchmark=benchmark,
        good=good or "",
        bad=bad or "",
        changes=changes,
        min_effect_pct=min_effect,
        branch=branch,
        alert=TargetOverrides(forge=forge, api_url=forge_url, repo=repo) if alert else None,
        progress=progress_for_command(),
        note=lambda step: click.echo(f"perfgate: bisect: {_step_line(step)}", err=True),
    )
    if found.outcome is None:
        return _nothing_to_bisect(as_json=as_json)
    _show(found.outcome, found.delivered, as_json=as_json)


def _budget_seconds(
    changes: Path | None, benchmark: str | None, good: str | None, bad: str | None, budget: str
) -> float:
    """The search's budget in seconds, once the range options are known to make sense."""
    from perfgate.app.check import parse_budget

    given = [o for o, v in (("--benchmark", benchmark), ("--good", good), ("--bad", bad)) if v]
    if changes is None and len(given) < 3:
        missing = sorted({"--benchmark", "--good", "--bad"} - set(given))
        raise UsageError(f"bisect: give {', '.join(missing)} (or --changes FILE)")
    if changes is not None and (good or bad):
        raise UsageError("bisect: --changes picks the range itself: drop --good/--bad")
    plan = parse_budget(budget)
    if plan.seconds is None:
        raise ConfigError(f"--budget {budget!r}: bisect's budget is a time (600s, 20m, 1h)")
    return plan.seconds


def _nothing_to_bisect(*, as_json: bool) -> None:
    line = "nothing to bisect: no new regression spans more than one commit"
    if as_json:
        click.echo(json.dumps({"culprit": None, "steps": [], "why": line}, indent=2))
    click.echo(f"perfgate: {line}", err=True)


def _show(outcome: BisectOutcome, delivered: str, *, as_json: bool) -> None:
    """Print the outcome; exit 3 when it names no culprit."""
    from perfgate.app import bisect as use_case

    if as_json:
        click.echo(json.dumps({"format_version": 1, **outcome.to_dict()}, indent=2))
    else:
        click.echo(_render_text(outcome), nl=False)
    if delivered:
        click.echo(f"perfgate: {delivered}", err=True)
    if outcome.culprit is None:
        click.echo(
            f"perfgate: bisect stopped: {use_case.why_text(outcome)}; the first bad commit "
            f"is one of {len(outcome.candidates)} after {outcome.good.sha[:12]} up to "
            f"{outcome.bad.sha[:12]}",
            err=True,
        )
        sys.exit(int(ExitCode.INFRASTRUCTURE))


def _step_line(step: Step) -> str:
    change = f" {step.change_pct:+.1f}%" if step.change_pct is not None else ""
    ci = f" [{step.ci[0]:+.1f}%, {step.ci[1]:+.1f}%]" if step.ci else ""
    against = f" against {step.against[:10]}" if step.against else ""
    metric = f" {step.metric}" if step.metric else ""
    pairs = f", {step.pairs} pairs" if step.pairs else ""
    why = f" ({step.note})" if step.note and step.verdict in ("skip", "inconclusive") else ""
    return (
        f"{step.sha[:10]} {step.subject[:60]}: {step.verdict}{metric}{change}{ci}{against}"
        f"{pairs}, {step.seconds:.0f} s{why}"
    )


def _render_text(outcome: BisectOutcome) -> str:
    lines = [f"bisect {outcome.benchmark}: {len(outcome.steps)} step(s)"]
    lines += [f"  {_step_line(s)}" for s in outcome.steps]
    if outcome.culprit is not None:
        c = outcome.culprit
        step = outcome.culprit_step
        measured = (
            f"{step.change_pct:+.1f}% ({step.metric})"
            if step is not None and step.change_pct is not None
            else "not measured on its own: every commit before it measured good"
        )
        lines += [
            f"first bad commit: {c.sha} {c.subject}",
            f"  author: {c.author}",
            f"  measured change: {measured}",
        ]
    else:
        lines.append(
            f"not narrowed to one commit: after {outcome.good.sha[:12]} up to and including "
            f"{outcome.bad.sha[:12]} ({len(outcome.candidates)} commits: "
            + ", ".join(c.sha[:10] for c in outcome.candidates)
            + ")"
        )
    lines.append(f"{outcome.rounds} round(s), {outcome.seconds / 60:.1f} min")
    return "\n".join(lines) + "\n"
