"""What a benchmark entry returns: the step to time and what describes it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from perfgate.models import ParamValue


@dataclass(frozen=True)
class Workload:
    """A benchmark ready to run.

    Attributes:
        step: one full training (or inference) step; it may return the loss.
        batch_size: samples per step, for throughput.
        params: the effective parameters (defaults filled in); they enter the fingerprint.
    """

    step: Callable[[], object]
    batch_size: int
    params: Mapping[str, ParamValue] = field(default_factory=dict)


def extra_rows(batch_size: int, slowdown: float) -> int:
    """Rows of extra forward/backward work that make a step ``slowdown`` times longer."""
    if slowdown < 0:
        raise ValueError(f"slowdown must be >= 0, got {slowdown}")
    return int(round(batch_size * slowdown))


_collective_wait_ns = [0]


def record_collective_wait(ns: int) -> None:
    """Add ``ns`` to this process's time blocked in collectives (a multi-device step calls it
    for the part of its step spent waiting for the other ranks: DDP's gradient all-reduce,
    its own blocking collectives). The distributed runner subtracts it from each timed step
    to get the rank's own work; a step that never calls it counts wholly as own work."""
    _collective_wait_ns[0] += int(ns)


def collective_wait_ns() -> int:
    """This process's time blocked in collectives so far (see :func:`record_collective_wait`)."""
    return _collective_wait_ns[0]
