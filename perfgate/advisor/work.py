"""Work changed: which operators a run's step calls that its baseline's did not, no longer
calls, or calls a different number of times.

An operator count (``op_calls_per_step``) does not decide a gate by default: one more cheap
call can make a step faster (``loss.detach()``) and a slower kernel keeps the count, so the
time decides, and the count explains it, by name: "work changed: +1 aten::clone per step".
Assumptions, stated up front:

- the profiles are per-step summaries of comparable steps (same benchmark and environment),
  and an op's calls per step is deterministic for a fixed step;
- an op changed count when its calls per step now lie outside the range its baseline
  profiles span (an op absent from one counts 0 there): an op whose count already varied
  between baseline runs (a data loader's, say) is named only beyond that spread; its
  baseline count is the median over them;
- every op of the profile is compared, nested ones included (a ``.clone()`` on CPU adds
  ``aten::clone`` with its ``aten::empty_like`` and ``aten::copy_``); ordered by total time
  per step, an op that contains others comes before them.

Pure: no I/O, no torch.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from perfgate.models import OpCountChange, ProfileSummary, WorkChange

__all__ = ["MAX_OPS", "work_change"]

MAX_OPS = 10
"""Changed ops a work change lists at most (the rest are counted in ``more``)."""

_Key = tuple[str, str]


def work_change(
    benchmark: str,
    current: ProfileSummary,
    baseline: Sequence[tuple[str, ProfileSummary]],
    *,
    max_ops: int = MAX_OPS,
) -> WorkChange | None:
    """The operators whose calls per step changed between ``current`` and ``baseline``
    (``(run id, profile)`` of the baseline window's runs, oldest first; the newest with an op
    table is named as the baseline).

    None when there is no baseline profile, no op table on either side, or no op whose count
    moved beyond the baseline's own range; else at most ``max_ops`` changed ops, largest total
    time per step first (now, or in the baseline for one that vanished).
    """
    profiled = [(run_id, p) for run_id, p in baseline if p.ops]
    if not profiled or not current.ops:
        return None
    now = {(o.name, o.device): o for o in current.ops}
    before = [{(o.name, o.device): o for o in p.ops} for _, p in profiled]
    changed: list[OpCountChange] = []
    for key in set(now).union(*before):
        counts = [t[key].calls_per_step if key in t else 0.0 for t in before]
        op = now.get(key)
        calls = op.calls_per_step if op is not None else 0.0
        if min(counts) <= calls <= max(counts):
            continue
        then = [t[key].total_time_ms_per_step if key in t else 0.0 for t in before]
        time_ms = op.total_time_ms_per_step if op is not None else statistics.median(then)
        changed.append(OpCountChange(key[0], key[1], statistics.median(counts), calls, time_ms))
    if not changed:
        return None
    changed.sort(key=lambda c: (-c.time_ms, -abs(c.delta_calls), c.name, c.device))
    listed = tuple(changed[:max_ops])
    return WorkChange(benchmark, listed, profiled[-1][0], more=len(changed) - len(listed))
