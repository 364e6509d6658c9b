"""Benjamini–Hochberg adjustment of p-values (false discovery rate control)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence


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


def by_direction(p_values: Sequence[float], sides: Sequence[Hashable]) -> list[float]:
    """BH-adjusted two-sided p-values, one family per side a change points to.

    A gate makes two decisions of its m tests: which got worse (it fails on those) and which
    got better. Each is a family of m one-sided tests at alpha / 2, which is BH over the m
    two-sided p-values with every test of the other side at p = 1: its one-sided p on this
    side is 1 - p / 2, never below alpha / 2. So speedups a change really made do not lower
    the bar a slowdown elsewhere is called at (pooled BH would: with R of m called, the next
    is tested at (R + 1) alpha / m), and a gate of m unchanged tests is called at each side
    as often as before (alpha / 2 each, alpha in all).
    """
    adjusted = [1.0] * len(p_values)
    for side in set(sides):
        family = [p if s == side else 1.0 for p, s in zip(p_values, sides, strict=True)]
        for i, q in enumerate(benjamini_hochberg(family)):
            if sides[i] == side:
                adjusted[i] = q
    return adjusted
