"""Benjamini–Hochberg adjustment of p-values (false discovery rate control)."""

from __future__ import annotations

from collections.abc import Sequence


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """BH-adjusted p-values, in the input order.

    The adjusted value of the i-th smallest of m p-values is the minimum over j >= i of
    ``p_(j) * m / j``, capped at 1; rejecting those below alpha controls the false discovery
    rate at alpha under independence or positive dependence.
    """
    m = len(p_values)
    if m == 0:
        return []
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, p_values[i] * m / rank)
        adjusted[i] = min(running, 1.0)
    return adjusted
