"""Paired A/B measurement in one job: the base commit and the head, repeat by repeat.

``git worktree`` checks the base commit out beside the working tree; the two sides' repeats
then alternate (the order in each pair drawn with a recorded seed), so load that comes and
goes hits both sides alike and cancels in the pairwise ratios. Each side's user code is
imported from its own tree; the perfgate that measures is the one installed.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from perfgate.errors import RunnerError, UsageError
from perfgate.models import BenchmarkSpec
from perfgate.runner import (
    BenchmarkOutcome,
    ProgressFn,
    RepeatResult,
    check_environment,
    repeat_progress,
    repeat_value,
    run_repeat,
    split_threads,
    trace_dir_scope,
    trace_stem,
)
from perfgate.runner.lifecycle import interruptible, work_dir
from perfgate.runner.watchdog import fixed_timeout


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=120)


def repo_root(directory: Path) -> Path | None:
    """The top of the git checkout holding ``directory``, or None outside one."""
    out = _git(directory, "rev-parse", "--show-toplevel")
    top = out.stdout.strip()
    return Path(top).resolve() if out.returncode == 0 and top else None


def resolve_commit(repo: Path, ref: str) -> str:
    """The full commit id ``ref`` names in ``repo``."""
    top = repo_root(repo)
    if top is None:
        raise UsageError(f"--ab {ref}: {repo} is not inside a git checkout")
    out = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if out.returncode != 0 or not out.stdout.strip():
        raise UsageError(f"--ab {ref}: no such commit in {top}")
    return out.stdout.strip()


@contextmanager
def base_worktree(repo: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of ``commit``, removed afterwards whatever happens (SIGTERM and
    SIGINT included: see :func:`~perfgate.runner.lifecycle.interruptible`)."""
    top = repo_root(repo)
    if top is None:
        raise UsageError(f"{repo} is not inside a git checkout")
    with interruptible():
        parent = Path(tempfile.mkdtemp(prefix="perfgate-ab-"))
        path = parent / "base"
        try:
            added = _git(top, "worktree", "add", "--detach", str(path), commit)
            if added.returncode != 0:
                message = (added.stderr.strip().splitlines() or ["git worktree add failed"])[-1]
                raise RunnerError(f"cannot check {commit[:12]} out for the A/B run: {message}")
            yield path
        finally:
            _git(top, "worktree", "remove", "--force", str(path))
            shutil.rmtree(parent, ignore_errors=True)
            _git(top, "worktree", "prune")


def run_pairs(
    spec: BenchmarkSpec,
    *,
    head_dir: Path,
    base_dir: Path,
    suite_dir: Path,
    trace_dir: Path | None,
    seed: int,
    progress: ProgressFn | None = None,
    timeout_s: float | None = None,
    base_spec: BenchmarkSpec | None = None,
) -> tuple[BenchmarkOutcome, BenchmarkOutcome, tuple[str, ...]]:
    """Alternate ``spec.repeats`` pairs of base and head repeats; returns (base outcome, head
    outcome, the order of each pair: "AB" or "BA" with A = base).

    Each side imports user entries from ``suite_dir`` (relative to the repository root) of
    its own tree. ``timeout_s`` bounds each repeat, a fixed limit (None: the spec's).
    ``base_spec`` is what the base side runs (:func:`perfgate.app.specs.base_side_spec`);
    None: ``spec``.
    """
    base_spec = spec if base_spec is None else base_spec
    check_environment()
    rng = random.Random(seed)
    started = datetime.now(timezone.utc)
    base_results: list[RepeatResult] = []
    head_results: list[RepeatResult] = []
    orders: list[str] = []
    sides = {
        "A": (base_dir, base_results, "base", fixed_timeout(base_spec, timeout_s)),
        "B": (head_dir, head_results, "head", fixed_timeout(spec, timeout_s)),
    }
    with trace_dir_scope(trace_dir), interruptible(), work_dir() as tmp:
        for i in range(spec.repeats):
            order = "AB" if rng.random() < 0.5 else "BA"
            orders.append(order)
            for side in order:
                tree, results, label, side_spec = sides[side]
                threads, params = split_threads(side_spec)
                trace_path = None
                if trace_dir is not None and i == 0 and spec.profiled > 0:
                    (trace_dir / label).mkdir(parents=True, exist_ok=True)
                    trace_path = trace_dir / label / f"{trace_stem(spec.name)}.pt.trace.json"
                code_dir = tree / suite_dir
                results.append(
                    run_repeat(
                        side_spec,
                        i,
                        threads=threads,
                        params=params,
                        trace_path=trace_path,
                        workdir=Path(tmp),
                        sys_path=[str(code_dir), str(tree)],
                        timeout_s=side_spec.timeout_s,
                        cwd=code_dir,
                        label=label,
                    )
                )
            if progress is not None:
                base, head = repeat_value(base_results[-1]), repeat_value(head_results[-1])
                value = f"base ({base}), head ({head})"
                progress(repeat_progress(spec.name, "pair", i + 1, spec.repeats, value))
    finished = datetime.now(timezone.utc)

    def outcome(side_spec: BenchmarkSpec, results: list[RepeatResult]) -> BenchmarkOutcome:
        threads, _ = split_threads(side_spec)
        return BenchmarkOutcome(side_spec, threads, tuple(results), started, finished)

    return outcome(base_spec, base_results), outcome(spec, head_results), tuple(orders)
