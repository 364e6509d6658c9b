"""Inference workloads: one step is one request, a forward pass at the given batch size.

The worker runs every request under ``torch.inference_mode()`` and times each one. The
``tail_every`` / ``tail_factor`` knob makes one request in ``tail_every`` do
``tail_factor`` times the work (the forward pass repeated; a fractional factor runs the
remainder over that share of the rows): a latency tail that leaves the median untouched.
"""

from __future__ import annotations

import torch

from perfgate.workloads import mlp
from perfgate.workloads.base import Workload, own_params


def build_mlp(
    device: str = "cpu",
    batch_size: int = 32,
    features: int = 512,
    hidden: int = 1024,
    classes: int = 10,
    tail_every: int = 0,
    tail_factor: float = 1.0,
) -> Workload:
    """Forward passes of the MLP of :mod:`perfgate.workloads.mlp` in eval mode."""
    params = own_params(locals())
    if tail_every < 0:
        raise ValueError(f"tail_every must be >= 0, got {tail_every}")
    if tail_factor < 1.0:
        raise ValueError(f"tail_factor must be >= 1, got {tail_factor}")
    torch.manual_seed(0)
    model = mlp.make_model(features, hidden, classes).to(device).eval()
    x = torch.randn(batch_size, features, device=device)
    whole = int(tail_factor)  # tail_factor >= 1: its whole part
    part = int(round((tail_factor - whole) * batch_size))
    count = 0

    def step() -> torch.Tensor:
        nonlocal count
        count += 1
        out: torch.Tensor = model(x)
        if tail_every and count % tail_every == 0:
            for _ in range(whole - 1):
                out = model(x)
            if part:
                model(x[:part])
        return out

    return Workload(step=step, batch_size=batch_size, params=params)
