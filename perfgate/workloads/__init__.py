"""Built-in reference training steps.

Each workload module has ``build(device, **params) -> Workload``: a full training step
(forward, loss, backward, optimizer step) with fixed seeds. Every one takes ``slowdown``, a
knob that adds a proportional amount of real extra work (``slowdown=0.3`` computes the
forward and backward passes over 30% more rows), for demos and for tests of a known
regression. This package imports no torch; the modules it names do.
"""

from __future__ import annotations

from perfgate.workloads.base import Workload

BUILTIN: dict[str, str] = {
    "mlp": "perfgate.workloads.mlp:build",
    "cnn": "perfgate.workloads.cnn:build",
    "transformer": "perfgate.workloads.transformer:build",
}

__all__ = ["BUILTIN", "Workload"]
