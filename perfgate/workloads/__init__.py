"""Built-in reference training steps.

Each workload module has ``build(device, **params) -> Workload``: a full training step
(forward, loss, backward, optimizer step) with fixed seeds. Every one takes ``slowdown``, a
knob that adds a proportional amount of real extra work (``slowdown=0.3``: 30% more rows
through the forward and backward passes, :mod:`perfgate.workloads.base`), for demos and for
tests of a known regression; the loss is the same, bit for bit. ``ddp_mlp`` / ``ddp_cnn``
are the same steps under DistributedDataParallel (:mod:`perfgate.workloads.ddp`);
``mlp_infer`` is an inference benchmark (:mod:`perfgate.workloads.inference`). This package
imports no torch; the modules it names do.
"""

from __future__ import annotations

from perfgate.workloads.base import Workload

BUILTIN: dict[str, str] = {
    "mlp": "perfgate.workloads.mlp:build",
    "cnn": "perfgate.workloads.cnn:build",
    "transformer": "perfgate.workloads.transformer:build",
    "ddp_mlp": "perfgate.workloads.ddp:build_mlp",
    "ddp_cnn": "perfgate.workloads.ddp:build_cnn",
    "mlp_infer": "perfgate.workloads.inference:build_mlp",
}

BUILTIN_KINDS: dict[str, str] = {"mlp_infer": "inference"}
"""The benchmark kind of a built-in workload that is not ``training``."""

__all__ = ["BUILTIN", "BUILTIN_KINDS", "Workload"]
