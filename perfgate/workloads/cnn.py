"""A small convolutional classifier (two conv blocks + linear head) training step."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from perfgate.workloads.base import Workload, own_params, training


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
    params = own_params(locals())
    torch.manual_seed(0)
    model = make_model(channels, classes).to(device)
    x = torch.randn(batch_size, 3, image_size, image_size, device=device)
    y = torch.randint(0, classes, (batch_size,), device=device)
    return training(model, F.cross_entropy, x, y, params, slowdown)
