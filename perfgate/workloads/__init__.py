"""Built-in reference training steps (this package imports no torch; its modules do).

Each ``build(device, **params) -> Workload`` is a full training step with fixed seeds; each
takes ``slowdown`` (``0.3``: 30% more rows through forward and backward, the loss the same
bit for bit: :mod:`perfgate.workloads.base`) for demos and tests of a known regression.
``ddp_*`` run under DistributedDataParallel; ``mlp_infer`` is an inference benchmark.
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
