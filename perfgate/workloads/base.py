"""What a benchmark entry returns: the step to time and what describes it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perfgate.models import ParamValue

if TYPE_CHECKING:
    import torch
    from torch import nn


@dataclass(frozen=True)
class Workload:
    """A benchmark ready to run.

    Attributes:
        step: one full training (or inference) step; it may return the loss.
        batch_size: samples per step, for throughput.
        params: the effective parameters (defaults filled in); they enter the fingerprint.
    """

    step: Callable[[], object]
    batch_size: int
    params: Mapping[str, ParamValue] = field(default_factory=dict)


SIZES = frozenset(
    {"batch_size", "features", "hidden", "classes", "image_size", "channels"}
    | {"seq_len", "d_model", "heads", "layers"}
)
"""The built-in workloads' size parameters: a count of rows, units or layers, at least 1
(``batch_size=0`` measured an empty step at 0 samples/s and a NaN loss)."""


def own_params(args: Mapping[str, Any]) -> dict[str, Any]:
    """A builder's effective parameters: its arguments (``locals()`` on entry), in order,
    less ``device``, which is not a parameter of the measurement.

    Raises:
        ValueError: a size (:data:`SIZES`) below 1.
    """
    params = {name: value for name, value in args.items() if name != "device"}
    for name in SIZES & params.keys():
        if params[name] < 1:
            raise ValueError(f"{name} must be >= 1, got {params[name]}")
    return params


def extra_rows(batch_size: int, slowdown: float) -> int:
    """Rows of extra forward/backward work that make a step ``slowdown`` times longer."""
    if slowdown < 0:
        raise ValueError(f"slowdown must be >= 0, got {slowdown}")
    return int(round(batch_size * slowdown))


def tile_rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    """``rows`` rows of ``t``, repeated as often as needed (no random numbers drawn)."""
    times = rows // t.shape[0] + 1
    return t.repeat(times, *([1] * (t.dim() - 1)))[:rows]


def with_extra_rows(x: torch.Tensor, rows: int) -> torch.Tensor:
    """``x`` with ``rows`` more rows tiled from it below its own: the ``slowdown`` knob's work
    as the same calls over more rows (the MLP's), so it shows in time, not in operator counts.

    The step takes its loss on the first ``x.shape[0]`` output rows only: a linear layer's
    output row is its own row's product with the weights, and the extra rows add exact zeros
    to the weight gradient after the batch's own terms. With one MKL thread the MLP's loss
    was equal to the last bit at batch 8-128, slowdown 0.05-3 (``tests/test_numerics.py``);
    with two threads on an AVX-512 CPU MKL splits the rows by their count and the loss moves
    about 1e-7 relative, far inside the numerics guard's 0.1%. A model whose rows meet in one
    call (batch norm, attention across a batch) keeps :func:`extra_work`.
    """
    if rows <= 0:
        return x
    import torch

    return torch.cat([x, tile_rows(x, rows)])


def extra_work(
    model: nn.Module,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    target: torch.Tensor,
    rows: int,
) -> Callable[[], None] | None:
    """The ``slowdown`` knob's work where more rows in the step's own calls would move the
    loss (the CNN's batch norm, the transformer): a forward and backward pass of ``model``
    over ``rows`` rows tiled from the step's batch; None for no rows.

    It stands in for a change that only costs time, so the loss (DESIGN.md §5) stays the
    same bit for bit: the step runs it *before* its own ``zero_grad()``, which throws its
    gradients away, and it draws no random numbers. (A batch norm's running statistics do
    move; a training forward does not read them.)
    """
    if rows <= 0:
        return None
    xs, ts = tile_rows(x, rows), tile_rows(target, rows)

    def work() -> None:
        loss_fn(model(xs), ts).backward()

    return work


def training(
    model: nn.Module,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    target: torch.Tensor,
    params: Mapping[str, ParamValue],
    slowdown: float,
    optimizer: Sgd | torch.optim.Optimizer | None = None,
    *,
    same_calls: bool = False,
) -> Workload:
    """A training step of ``model`` on the batch ``x`` (the optimizer: SGD, lr 0.01, momentum
    0.9 unless given), with the ``slowdown`` knob's rows of extra work: in the step's own
    calls with ``same_calls`` (:func:`with_extra_rows`, the loss on the batch's own rows),
    else in a pass of their own (:func:`extra_work`)."""
    batch_size = x.shape[0]
    opt = Sgd(model.parameters(), lr=0.01, momentum=0.9) if optimizer is None else optimizer
    rows = extra_rows(batch_size, slowdown)
    xs = with_extra_rows(x, rows) if same_calls else x
    extra = None if same_calls else extra_work(model, loss_fn, x, target, rows)

    def step() -> torch.Tensor:
        if extra is not None:
            extra()  # time only: its gradients are thrown away on the next line
        opt.zero_grad()
        out = model(xs)
        loss = loss_fn(out[:batch_size] if same_calls else out, target)
        loss.backward()
        opt.step()
        return loss.detach()

    return Workload(step=step, batch_size=batch_size, params=params)


class Sgd:
    """``torch.optim.SGD(params, lr, momentum)``'s update (dampening 0, no weight decay, not
    Nesterov), op for op, so the loss is the same bit for bit. ``torch.optim`` imports
    ``torch._dynamo`` on first use: 1.5-2 s of start-up in every worker on a 2-core runner,
    untimed but waited for by every repeat (a profiled one pays it anyway).
    """

    def __init__(self, params: Iterable[torch.Tensor], lr: float, momentum: float) -> None:
        self.params = list(params)
        self.lr = lr
        self.momentum = momentum
        self.buffers: list[torch.Tensor | None] = [None] * len(self.params)

    def zero_grad(self) -> None:
        """Drop the gradients (``zero_grad(set_to_none=True)``)."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        import torch

        with torch.no_grad():
            for i, p in enumerate(self.params):
                grad = p.grad
                if grad is None:
                    continue
                buf = self.buffers[i]
                if buf is None:
                    buf = self.buffers[i] = torch.clone(grad).detach()
                else:
                    buf.mul_(self.momentum).add_(grad)
                p.add_(buf, alpha=-self.lr)


_collective_wait_ns = [0]


def record_collective_wait(ns: int) -> None:
    """Add ``ns`` to this process's time blocked in collectives (waiting for the other
    ranks). The distributed runner subtracts it from each timed step to get the rank's own
    work; a step that never calls it counts wholly as own work."""
    _collective_wait_ns[0] += int(ns)


def collective_wait_ns() -> int:
    """This process's time blocked in collectives so far (see :func:`record_collective_wait`)."""
    return _collective_wait_ns[0]
