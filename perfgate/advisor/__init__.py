"""Advisors: what a profile says about *why* a benchmark is slow or got slower.

``msprof`` runs Huawei's msprof-analyze advisor on an Ascend profile and turns its report
into :class:`~perfgate.models.Finding` values.
"""
