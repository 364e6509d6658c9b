"""A 3-layer MLP classifier training step.

``slowdown`` makes the step's own operators do more work: the forward and backward run over
``batch_size * (1 + slowdown)`` rows in the same calls (no operator is added), and the loss
is taken on the batch's own rows, so it is the same, bit for bit, as without it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from perfgate.workloads.base import Workload, own_params, training


def make_model(features: int = 512, hidden: int = 1024, classes: int = 10) -> nn.Module:
    """The 3-layer MLP (also used by the DDP and inference workloads)."""
    return nn.Sequential(
        nn.Linear(features, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, classes),
    )


def build(
    device: str = "cpu",
    batch_size: int = 128,
    features: int = 512,
    hidden: int = 1024,
    classes: int = 10,
    slowdown: float = 0.0,
) -> Workload:
    params = own_params(locals())
    torch.manual_seed(0)
    model = make_model(features, hidden, classes).to(device)
    x = torch.randn(batch_size, features, device=device)
    y = torch.randint(0, classes, (batch_size,), device=device)
    return training(model, F.cross_entropy, x, y, params, slowdown, same_calls=True)
