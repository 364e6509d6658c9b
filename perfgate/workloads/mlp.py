"""A 3-layer MLP classifier training step."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from perfgate.workloads.base import Sgd, Workload, extra_rows, extra_work


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
    torch.manual_seed(0)
    model = make_model(features, hidden, classes).to(device)
    optimizer = Sgd(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch_size, features, device=device)
    y = torch.randint(0, classes, (batch_size,), device=device)

    extra = extra_work(model, F.cross_entropy, x, y, extra_rows(batch_size, slowdown))

    def step() -> torch.Tensor:
        if extra is not None:
            extra()  # time only: its gradients are thrown away on the next line
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    params = {"batch_size": batch_size, "features": features, "hidden": hidden, "classes": classes}
    return Workload(step=step, batch_size=batch_size, params={**params, "slowdown": slowdown})
