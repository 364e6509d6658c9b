"""A small transformer encoder block (self-attention + MLP) trained on a regression target."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from perfgate.workloads.base import Workload, own_params, training


def build(
    device: str = "cpu",
    batch_size: int = 16,
    seq_len: int = 32,
    d_model: int = 128,
    heads: int = 4,
    layers: int = 2,
    slowdown: float = 0.0,
) -> Workload:
    params = own_params(locals())
    if d_model % heads:
        raise ValueError(f"d_model ({d_model}) must be a multiple of heads ({heads})")
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(
        d_model, heads, dim_feedforward=4 * d_model, dropout=0.0, batch_first=True
    )
    model = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(batch_size, seq_len, d_model, device=device)
    target = torch.randn(batch_size, seq_len, d_model, device=device)
    return training(model, F.mse_loss, x, target, params, slowdown, optimizer)
