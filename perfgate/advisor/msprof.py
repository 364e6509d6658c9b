"""Findings from msprof-analyze's advisor (PyPI ``msprof-analyze``, extra ``perfgate[ascend]``).

perfgate runs ``msprof-analyze advisor all -d DIR -l en --force --agent`` in a child process
with a timeout. In ``--agent`` mode the tool prints one JSON object to stdout::

    {"status": "success", "code": 0,
     "message": {"problems": {"headers": [...], "data": [[category, description, suggestion,
                 problem count, total_time(us), time ratio, income(us), income ratio], ...]},
                 "Overall Summary": {...}, ...},
     "log_path": "..."}

and writes no HTML or spreadsheet. Each row of ``problems`` becomes one finding with
``source="msprof-analyze"``; the numeric cells (often empty) become its evidence. A row
that reports a check which found nothing (its description says "There is no slow rank
issues", or its problem count is 0) is not a finding and is left out.

The tool is optional: when it is not installed, exits non-zero, times out or prints
something else, the outcome carries one line saying so and no findings, and the caller
goes on. ``msprof-analyze --version`` is never called: that build prints a repository URL
carrying a credential. The version comes from the package metadata instead.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfgate.models import Finding, Severity

__all__ = ["SOURCE", "AdvisorOutcome", "findings_from_agent_output", "msprof_version", "run"]

SOURCE = "msprof-analyze"
DEFAULT_TIMEOUT_S = 300.0

# Rows that describe the profile rather than a problem in it.
_INFORMATIONAL = frozenset({"Overall Summary", "slow link"})
# Descriptions of a check that found nothing ("There is no slow rank issues"): not findings.
_NOTHING_FOUND = re.compile(
    r"^(there (is|are|were|was) no\b|no (problems?|issues?)\b|nothing (was )?found\b)"
)
# Header of each numeric column of the ``problems`` table -> evidence key in perfgate.
_EVIDENCE_COLUMNS: Mapping[str, str] = {
    "problem count": "problem_count",
    "total_time(us)": "total_time_us",
    "time ratio": "time_ratio",
    "income(us)": "income_us",
    "income ratio": "income_ratio",
}


@dataclass(frozen=True)
class AdvisorOutcome:
    """What one advisor run gave: findings, or ``problem`` (one line) when it gave none."""

    findings: tuple[Finding, ...] = ()
    problem: str | None = None
    version: str | None = None


def msprof_version() -> str | None:
    """The installed msprof-analyze version from package metadata, or None."""
    try:
        return importlib.metadata.version("msprof-analyze")
    except importlib.metadata.PackageNotFoundError:
        return None


def _command() -> list[str] | None:
    if importlib.util.find_spec("msprof_analyze") is not None:
        code = "from msprof_analyze.cli.entrance import msprof_analyze_cli; msprof_analyze_cli()"
        return [sys.executable, "-c", code]
    found = shutil.which("msprof-analyze")
    return None if found is None else [found]


def run(
    profile_dir: Path, *, location: str = "", timeout_s: float = DEFAULT_TIMEOUT_S
) -> AdvisorOutcome:
    """Run the advisor on one ``*_ascend_pt`` directory (or the parent of several ranks).

    Never raises for the tool's own failures: they come back as ``problem``.
    """
    version = msprof_version()
    command = _command()
    if command is None:
        return AdvisorOutcome(
            problem="msprof-analyze is not installed (pip install 'perfgate[ascend]'); "
            "no Ascend advisor findings"
        )

    def failed(problem: str) -> AdvisorOutcome:
        return AdvisorOutcome(problem=problem, version=version)

    # Absolute: the tool runs in a scratch directory, so that whatever it writes lands there.
    target = str(profile_dir.resolve())
    argv = [*command, "advisor", "all", "-d", target, "-l", "en", "--force", "--agent"]
    with tempfile.TemporaryDirectory(prefix="perfgate-msprof-") as scratch:
        env = {**os.environ, "TMPDIR": scratch, "PYTHONWARNINGS": "ignore"}
        argv += ["-o", scratch]
        try:
            done = subprocess.run(
                argv, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            return failed(
                f"msprof-analyze advisor timed out after {timeout_s:g} s on "
                f"{profile_dir}; no Ascend advisor findings"
            )
        except OSError as exc:
            return failed(f"msprof-analyze advisor could not start: {exc.strerror}")
    # Its stderr is not echoed: progress bars and log lines only, nothing a report needs.
    if done.returncode != 0:
        return failed(
            f"msprof-analyze advisor exited with status {done.returncode} on "
            f"{profile_dir}; run 'msprof-analyze advisor all -d {profile_dir} -l en' to see why"
        )
    try:
        findings = findings_from_agent_output(done.stdout, location=location)
    except ValueError as exc:
        return failed(f"msprof-analyze advisor: {exc}")
    return AdvisorOutcome(findings=findings, version=version)


def _agent_document(text: str) -> Mapping[str, Any]:
    """The ``--agent`` JSON object in ``text`` (stdout may carry other lines before it)."""
    candidates = [text.strip()] + [ln for ln in text.splitlines() if ln.startswith("{")]
    for candidate in candidates:
        try:
            doc = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(doc, dict) and "status" in doc:
            return doc
    raise ValueError("printed no --agent JSON report")


def _number(cell: Any) -> float | None:
    if isinstance(cell, int | float) and not isinstance(cell, bool):
        return float(cell)
    text = cell.strip() if isinstance(cell, str) else ""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        return None
    return value / 100.0 if text.endswith("%") else value


def findings_from_agent_output(text: str, *, location: str = "") -> tuple[Finding, ...]:
    """Findings from the stdout of ``msprof-analyze advisor ... --agent`` (pure).

    Raises:
        ValueError: the text holds no report, or the report says the run failed.
    """
    doc = _agent_document(text)
    if doc.get("status") != "success":
        raise ValueError(f"reported status {str(doc.get('status'))[:40]!r}")
    message = doc.get("message")
    problems = message.get("problems") if isinstance(message, dict) else None
    if not isinstance(problems, dict):
        return ()
    raw_headers, raw_rows = problems.get("headers"), problems.get("data")
    if not isinstance(raw_headers, list) or not isinstance(raw_rows, list):
        return ()
    headers = [str(h).strip().lower() for h in raw_headers]
    out: list[Finding] = []
    for row in raw_rows:
        if not isinstance(row, list) or not row:
            continue
        cells = dict(zip(headers, row, strict=False))
        category = str(cells.get("category", row[0])).strip()
        numbers = {key: _number(cells.get(header)) for header, key in _EVIDENCE_COLUMNS.items()}
        evidence = {key: value for key, value in numbers.items() if value is not None}
        description = " ".join(str(cells.get("description", "")).split())
        if _NOTHING_FOUND.match(description.lower()) or evidence.get("problem_count") == 0:
            continue
        severity = Severity.INFO if category in _INFORMATIONAL else Severity.WARNING
        suggestion = str(cells.get("suggestion", "")).strip()
        out.append(Finding(category, severity, location, description, suggestion, evidence, SOURCE))
    return tuple(out)
