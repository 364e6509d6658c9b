"""Attribution: which ops explain a time metric's change between a run and its baseline.

The current run's profile is diffed op by op against the baseline window's profiles. Each
op's time per step is its **self** time (its own time minus its child ops'), so nested
operators are not counted twice: on a CPU trace ``aten::linear`` contains ``aten::addmm``,
and only their self times add up to the step's op time. Assumptions, stated up front:

- the profiles are per-step summaries of comparable steps (same benchmark and environment);
- the baseline value of an op is the median over the baseline profiles (an op absent from
  one of them counts 0 there), and the baseline's own spread of that op (max - min over the
  profiles) is its noise: a change within it is not a cause;
- when the profile saw an accelerator, only device ops (kernels, NPU tasks) are compared:
  host ops run alongside them and would count the same time twice.

Pure: no I/O, no torch.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from perfgate.models import Attribution, OpDelta, OpStat, ProfileSummary

__all__ = ["MAX_OPS", "MIN_SHARE", "attribute"]

MAX_OPS = 10
"""Ops listed at most (new, vanished and shape-changed ops included)."""
MIN_SHARE = 0.02
"""An op moving less than 2% of the metric's change is not listed."""
OFFSET_SHARE = 0.10
"""An op moving against the change is listed when it offsets at least 10% of it."""

_Key = tuple[str, str]


def _table(profile: ProfileSummary, device_only: bool) -> dict[_Key, OpStat]:
    return {(o.name, o.device): o for o in profile.ops if not device_only or o.device != "cpu"}


def attribute(
    benchmark: str,
    metric: str,
    delta_ms: float,
    current: ProfileSummary,
    baseline: Sequence[ProfileSummary],
) -> Attribution:
    """Name the ops that account for ``delta_ms``, the change per step of a time metric
    (``step_time_ms``, ``computing_ms``, ...): current centre minus baseline centre, in ms.

    ``baseline`` holds the baseline window runs' profiles, oldest first (the newest one's
    input shapes are the baseline's shapes). The ops listed (at most :data:`MAX_OPS`, none
    below :data:`MIN_SHARE` of ``|delta_ms|``) are the changes outside the baseline's spread,
    largest contribution first (ops that moved against the change last), each with its
    ``share`` of ``delta_ms``; ``explained_share`` is their sum over ``delta_ms`` (None when
    it is 0). New and vanished ops carry that status; an op whose input shapes differ
    carries both shape lists.
    """
    if not baseline:
        return Attribution(
            benchmark, metric, delta_ms, (), None, "no baseline profile to compare with"
        )
    device_only = any(o.device != "cpu" for o in current.ops)
    now = _table(current, device_only)
    before = [_table(p, device_only) for p in baseline]
    floor = abs(delta_ms) * MIN_SHARE
    sign = 1.0 if delta_ms >= 0 else -1.0
    deltas: list[OpDelta] = []
    quiet_shapes: list[str] = []
    for key in sorted(set(now).union(*before)):
        values = [t[key].self_time_ms_per_step if key in t else 0.0 for t in before]
        base_ms = statistics.median(values)
        spread = max(values) - min(values)
        op = now.get(key)
        cur_ms = op.self_time_ms_per_step if op is not None else 0.0
        change = cur_ms - base_ms
        status = "vanished" if op is None else "changed" if any(key in t for t in before) else "new"
        # the input shapes of the newest baseline profile that has the op
        base_shapes = next((t[key].input_shapes for t in reversed(before) if key in t), ())
        cur_shapes = op.input_shapes if op is not None else ()
        shape_changed = bool(base_shapes and cur_shapes) and set(base_shapes) != set(cur_shapes)
        if abs(change) <= spread or abs(change) < floor or change == 0:
            if shape_changed:
                quiet_shapes.append(key[0])
            continue
        if change * sign < 0 and abs(change) < abs(delta_ms) * OFFSET_SHARE:
            continue
        share = change / delta_ms if delta_ms else None
        shapes_before = base_shapes if shape_changed or status == "vanished" else ()
        shapes_now = cur_shapes if shape_changed or status == "new" else ()
        deltas.append(OpDelta(*key, base_ms, cur_ms, share, status, shapes_before, shapes_now))
    deltas.sort(key=lambda d: (-d.delta_ms * sign, d.name, d.device))
    listed = tuple(deltas[:MAX_OPS])
    explained = sum(d.delta_ms for d in listed) / delta_ms if delta_ms else None
    notes = [
        f"per-op self time per step against the median of {len(baseline)} baseline "
        f"profile{'s' if len(baseline) != 1 else ''}"
        + (" (device ops only)" if device_only else "")
        + "; changes within the baseline's own spread left out"
    ]
    if len(deltas) > len(listed):
        notes.append(f"{len(deltas) - len(listed)} smaller changes not listed")
    if quiet_shapes:
        notes.append("input shapes changed without a time change: " + ", ".join(quiet_shapes[:5]))
    return Attribution(benchmark, metric, delta_ms, listed, explained, "; ".join(notes))
