"""The cluster view: how the ranks of one multi-device job compare with each other.

Built from the ranks' :class:`~perfgate.models.ProfileSummary` values (one per rank, as the
parsers return them): each rank's step time, the slowest rank, the spread of step and
communication-wait times across ranks, and the links slower than the suite expects
(:attr:`~perfgate.models.Thresholds.slow_link_gb_s`). The rules in
:mod:`perfgate.advisor.rules` judge the view (``slow_rank``, ``slow_link``) and the ranks'
pairs (``low_pair_utilisation``, ``pair_wait``), with :func:`pair_utilisation` deciding how
much of its link a pair uses (the HTML heatmap colours by the same number). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from perfgate.errors import ParseError, UsageError
from perfgate.models import ClusterView, ProfileSummary, RankPair, Thresholds

__all__ = ["cluster_view", "pair_utilisation"]

LOCAL_LINK = "LOCAL"


def pair_utilisation(pair: RankPair, thresholds: Thresholds) -> float | None:
    """The share (0..1) of its link type's nominal bandwidth a rank pair achieved.

    ``bandwidth_gb_s`` over :attr:`~perfgate.models.Thresholds.link_nominal_gb_s` for the
    pair's link (compared case-insensitively), capped at 1 (short transfers can beat the
    nominal figure on timing granularity). None for a rank to itself (``LOCAL``, on-chip
    copies with no link to judge), a link type without a nominal figure, or a pair that
    moved nothing.
    """
    link = pair.link.upper()
    if link == LOCAL_LINK or pair.transit_time_ms <= 0 or pair.transit_size_mb <= 0:
        return None
    nominal = {name.upper(): float(gb_s) for name, gb_s in thresholds.link_nominal_gb_s}
    limit = nominal.get(link)
    if limit is None or limit <= 0:
        return None
    return max(0.0, min(1.0, pair.bandwidth_gb_s / limit))


def spread_pct(values: Sequence[float]) -> float:
    """(max - min) / min in percent; 0 for fewer than two values or a minimum of 0."""
    if len(values) < 2 or min(values) <= 0:
        return 0.0
    return (max(values) - min(values)) / min(values) * 100.0


def _gb_s(value: float) -> str:
    return f"{round(value, 1):g}"


def cluster_view(
    ranks: Sequence[ProfileSummary], thresholds: Thresholds | None = None
) -> ClusterView:
    """Compare the ranks of one job: step time per rank, the slowest rank, the spread of
    step and communication-wait times, and the links slower than expected.

    A rank's step time is its ``breakdown.step_ms`` (the mean of ``step_times_ms`` when it
    has no breakdown); a rank without a number is identified by its position. A link is
    slow when its bandwidth is below ``thresholds.slow_link_gb_s`` for its link type
    (defaults when ``thresholds`` is None).

    Raises:
        UsageError: no ranks.
        ParseError: a rank has no step time.
    """
    if not ranks:
        raise UsageError("cluster view: no ranks to compare")
    t = thresholds or Thresholds()
    expected = {link.upper(): float(gb_s) for link, gb_s in t.slow_link_gb_s}
    ids: list[int] = []
    step_ms: list[float] = []
    waits: list[float | None] = []
    slow: list[str] = []
    for index, summary in enumerate(ranks):
        rank = summary.rank if summary.rank is not None else index
        ids.append(rank)
        if summary.breakdown is not None:
            step_ms.append(summary.breakdown.step_ms)
        elif summary.step_times_ms:
            step_ms.append(sum(summary.step_times_ms) / len(summary.step_times_ms))
        else:
            raise ParseError(f"rank {rank}: no step time in its profile summary")
        comm = summary.communication
        waits.append(None if comm is None else comm.wait_ms)
        for link in () if comm is None else comm.links:
            limit = expected.get(link.link.upper())
            if limit is not None and link.bandwidth_gb_s < limit:
                slow.append(
                    f"rank {rank} {link.link} {_gb_s(link.bandwidth_gb_s)} GB/s "
                    f"< {_gb_s(limit)} GB/s expected"
                )
    slowest = ids[max(range(len(step_ms)), key=lambda i: step_ms[i])]
    known = [w for w in waits if w is not None]
    return ClusterView(
        ranks=tuple(ids),
        step_ms=tuple(step_ms),
        slowest_rank=slowest,
        step_spread_pct=spread_pct(step_ms),
        comm_wait_ms=tuple(waits),
        comm_wait_spread_pct=spread_pct(known) if len(known) >= 2 else None,
        slow_links=tuple(slow),
    )
