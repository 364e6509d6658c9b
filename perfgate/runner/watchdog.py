"""How long the parent waits for a worker: the default limit derived from the warm-up.

A benchmark's ``timeout`` (``--timeout``) is a fixed limit on one repeat. Left at its
default (:data:`DEFAULT_TIMEOUT_S`, 900 s), that is only the cap: the worker writes its
progress to a file (a line per warm-up step with its ns, ``m`` when the timed steps begin,
``p`` when the profiled window does), and once the warm-up shows what a step takes:

- until the first warm-up step ends (importing, building, compiling): the cap;
- each later warm-up step: ``STALL_FACTOR`` x a typical warm-up step (the median of those
  after the first, which carries the one-off costs), at least ``STALL_FLOOR_S``;
- the timed steps together: that x their number, at least ``STALL_FLOOR_S``;
- the profiled window (its overhead does not scale with the step): the cap.

So a step that hangs after the warm-up stops the job in about a minute, not fifteen, and
the error says how the limit was derived. An explicit ``timeout`` is exactly that limit.
"""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from perfgate.errors import RunnerError
from perfgate.models import BenchmarkSpec

#: A benchmark's ``timeout`` when neither the suite nor ``--timeout`` sets it.
DEFAULT_TIMEOUT_S: float = BenchmarkSpec.timeout_s
STALL_FLOOR_S = 60.0  # the derived limit is never shorter
STALL_FACTOR = 20.0  # typical warm-up steps' time a step (or each timed step) may take
POLL_S = 0.25  # how often the parent reads the worker's progress while it waits

_PHASES = {"w": "warmup", "m": "measured", "p": "profiled"}  # what each progress line starts


@dataclass
class _Progress:
    """What the parent has read of a worker's progress file."""

    path: Path
    offset: int = 0
    warmup_s: list[float] = field(default_factory=list)
    phase: str = "start"  # "start", "warmup", "measured" or "profiled"

    def read(self) -> bool:
        """Take in the complete lines written since the last read; whether there were any."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return False
        end = data.rfind(b"\n") + 1
        if end == 0:
            return False
        self.offset += end
        for line in data[:end].decode("ascii", "replace").splitlines():
            kind, _, value = line.partition(" ")
            self.phase = _PHASES.get(kind, self.phase)
            if kind == "w":
                with contextlib.suppress(ValueError):
                    self.warmup_s.append(int(value) / 1e9)
        return True


def timeout_unset(spec: BenchmarkSpec) -> bool:
    """Whether ``spec``'s timeout was left at the default, so the limit is also derived from
    the warm-up: neither the suite nor ``--timeout`` gave one (:attr:`BenchmarkSpec.
    timeout_set`), and a spec built in code did not change it."""
    return not spec.timeout_set and spec.timeout_s == DEFAULT_TIMEOUT_S


def fixed_timeout(spec: BenchmarkSpec, timeout_s: float | None) -> BenchmarkSpec:
    """``spec`` under a limit its caller gives (a fixed one, whatever its value); ``spec``
    itself for None."""
    return spec if timeout_s is None else replace(spec, timeout_s=timeout_s, timeout_set=True)


def wait_for_worker(
    proc: subprocess.Popen[bytes],
    *,
    progress_path: Path,
    timeout_s: float,
    measured: int,
    where: str,
    derive: bool,
) -> int:
    """Wait for ``proc`` and return its exit code: ``timeout_s`` in all and, with
    ``derive`` (the timeout was not set), no longer than the warm-up says (see the module).
    The caller kills the worker's group on either error.

    Raises:
        subprocess.TimeoutExpired: the cap ``timeout_s`` passed.
        RunnerError: the derived limit passed (the message says how it was derived).
    """
    started = time.monotonic()
    cap = started + timeout_s
    progress = _Progress(progress_path)
    deadline = cap
    why = ""
    while True:
        now = time.monotonic()
        if now >= deadline:
            if deadline >= cap:
                raise subprocess.TimeoutExpired(proc.args, timeout_s)
            raise RunnerError(
                f"{where}: {why}; the worker was killed (a hung step? set --timeout SECONDS "
                "or the benchmark's timeout key for a fixed limit)"
            )
        with contextlib.suppress(subprocess.TimeoutExpired):
            return proc.wait(timeout=min(POLL_S, deadline - now))
        if not derive or not progress.read():
            continue
        now = time.monotonic()
        warm = progress.warmup_s[1:] or progress.warmup_s  # without the first's one-off costs
        if not warm or progress.phase == "profiled":
            deadline, why = cap, ""
            continue
        typical = statistics.median(warm)
        steps = measured if progress.phase == "measured" else 1
        limit = max(STALL_FLOOR_S, STALL_FACTOR * typical * max(steps, 1))
        what = f"the {measured} timed steps took" if progress.phase == "measured" else "a step took"
        why = (
            f"{what} over {limit:g} s, the default limit derived from the warm-up "
            f"({STALL_FACTOR:g} x its {typical * 1000:.3g} ms step"
            f"{f' x {steps}' if steps > 1 else ''}, at least {STALL_FLOOR_S:g} s)"
        )
        deadline = min(cap, now + limit)
