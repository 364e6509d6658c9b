"""Profiler output → :class:`~perfgate.models.ProfileSummary`; pure, no torch import."""

from perfgate.parsers.torch_trace import parse_torch_trace

__all__ = ["parse_torch_trace"]
