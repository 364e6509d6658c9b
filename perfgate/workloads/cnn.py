"""A small convolutional classifier (two conv blocks + linear head) training step."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from perfgate.workloads.base import Workload, extra_rows


def make_model(channels: int = 16, classes: int = 10) -> nn.Module:
    """The two-conv-block classifier (also used by the DDP workload)."""
    return nn.Sequential(
        nn.Conv2d(3, channels, 3, padding=1),
        nn.BatchNorm2d(channels),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(channels, channels * 2, 3, padding=1),
        nn.BatchNorm2d(channels * 2),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(4),
        nn.Flatten(),
        nn.Linear(channels * 2 * 16, classes),
    )


def build(
    device: str = "cpu",
    batch_size: int = 32,
    image_size: int = 32,
    channels: int = 16,
    classes: int = 10,
    slowdown: float = 0.0,
) -> Workload:
    torch.manual_seed(0)
    model = make_model(channels, classes).to(device)
    rows = batch_size + extra_rows(batch_size, slowdown)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(rows, 3, image_size, image_size, device=device)
    y = torch.randint(0, classes, (rows,), device=device)

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    params = {
        "batch_size": batch_size,
        "image_size": image_size,
        "channels": channels,
        "classes": classes,
    }
    return Workload(step=step, batch_size=batch_size, params={**params, "slowdown": slowdown})
