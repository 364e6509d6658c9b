"""The MLP and CNN training steps wrapped in DistributedDataParallel (run with ``--nproc N``).

Each rank trains on its own batch (seeded by rank). Knobs that inject multi-device problems,
all real work:

- ``slowdown``: every rank does that share of the step's forward and backward work again
  before it;
- ``straggler_rank`` / ``straggler_extra``: that rank (-1, the default: none) does
  ``straggler_extra`` times the step's work again after the optimizer step, outside the
  gradient synchronisation (as rank-0-only logging would be); the others wait for it in the
  next step's all-reduce;
- ``extra_allreduce``: a blocking all-reduce of that many float32 values per step, after
  the backward pass (communication that cannot overlap);
- ``bucket_cap_mb``: DDP's gradient bucket size (default 25).

The extra work runs on a private copy of the model and the extra all-reduce's values are
unused, so only ``bucket_cap_mb`` (a collective may sum regrouped gradients in another
order) can move the loss the numerics guard (DESIGN.md §5) checks. The step reports its
wait in collectives (:func:`perfgate.workloads.base.record_collective_wait`): from the last
gradient bucket's launch (the backward compute is done) until every bucket completed, plus
the extra all-reduce. The process group must already be initialised (the distributed worker
does it).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from perfgate.workloads import cnn, mlp
from perfgate.workloads.base import (
    Workload,
    extra_rows,
    extra_work,
    own_params,
    record_collective_wait,
)


def _time_buckets(ddp: DistributedDataParallel) -> tuple[list[int], list[int]]:
    """DDP's default gradient all-reduce (mean over ranks) as a communication hook that
    notes when each bucket's all-reduce is launched and when it completes (monotonic ns)."""
    launched: list[int] = []
    done: list[int] = []
    world = dist.get_world_size()
    clock = time.perf_counter_ns

    def hook(state: Any, bucket: Any) -> torch.futures.Future[torch.Tensor]:
        launched.append(clock())
        tensor = bucket.buffer().div_(world)
        fut = dist.all_reduce(tensor, async_op=True).get_future()  # type: ignore[union-attr]

        def finish(f: torch.futures.Future[Any]) -> torch.Tensor:
            done.append(clock())
            return f.value()[0]  # type: ignore[no-any-return]

        return fut.then(finish)  # type: ignore[no-any-return]

    # DDP checks the hook's annotations as objects (this module's are strings)
    hook.__annotations__ = {
        "state": Any,
        "bucket": dist.GradBucket,  # type: ignore[attr-defined]
        "return": torch.futures.Future[torch.Tensor],
    }
    ddp.register_comm_hook(None, hook)
    return launched, done


def _build(
    make_model: Callable[[], nn.Module], shape: tuple[int, ...], device: str, params: dict[str, Any]
) -> Workload:
    """``make_model()`` under DDP, trained on a batch of ``shape`` drawn with the rank's seed;
    ``params``: the builder's own (:func:`~perfgate.workloads.base.own_params`)."""
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError(
            "DDP workloads run under torch.distributed: use 'perfgate run --nproc N' "
            "(or nproc = N in the suite entry)"
        )
    rank = dist.get_rank()
    for knob in ("straggler_extra", "extra_allreduce"):
        if params[knob] < 0:
            raise ValueError(f"{knob} must be >= 0, got {params[knob]}")
    if params["bucket_cap_mb"] <= 0:
        raise ValueError(f"bucket_cap_mb must be > 0, got {params['bucket_cap_mb']}")
    torch.manual_seed(0)
    model = make_model().to(device)
    torch.manual_seed(1000 + rank)
    x = torch.randn(*shape, device=device)
    y = torch.randint(0, params["classes"], (shape[0],), device=device)
    ddp = DistributedDataParallel(model, bucket_cap_mb=params["bucket_cap_mb"])
    launched, done = _time_buckets(ddp)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    # Extra work on a private copy of the model, outside DDP: no collective, no effect on
    # the trained model and so none on the loss.
    slow_rows = extra_rows(shape[0], params["slowdown"])
    straggler = rank == params["straggler_rank"]
    lag_rows = extra_rows(shape[0], params["straggler_extra"]) if straggler else 0
    shadow = copy.deepcopy(model) if slow_rows or lag_rows else None
    slow = None if shadow is None else extra_work(shadow, F.cross_entropy, x, y, slow_rows)
    lag = None if shadow is None else extra_work(shadow, F.cross_entropy, x, y, lag_rows)
    size = params["extra_allreduce"]
    buffer = torch.ones(size, device=device) if size else None
    clock = time.perf_counter_ns

    def step() -> torch.Tensor:
        if slow is not None and shadow is not None:
            shadow.zero_grad(set_to_none=True)
            slow()
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(x), y)
        launched.clear()
        done.clear()
        loss.backward()
        if launched and done:
            # blocked from the last bucket's launch (the backward compute is over) until
            # every bucket's all-reduce has completed: the wait for the other ranks
            record_collective_wait(max(0, max(done) - max(launched)))
        if buffer is not None:
            t0 = clock()
            dist.all_reduce(buffer)
            record_collective_wait(clock() - t0)
        optimizer.step()
        if lag is not None and shadow is not None:
            shadow.zero_grad(set_to_none=True)
            lag()
        return loss.detach()

    return Workload(step=step, batch_size=shape[0], params=params)


def build_mlp(
    device: str = "cpu",
    batch_size: int = 128,
    features: int = 512,
    hidden: int = 1024,
    classes: int = 10,
    slowdown: float = 0.0,
    straggler_rank: int = -1,
    straggler_extra: float = 0.0,
    extra_allreduce: int = 0,
    bucket_cap_mb: float = 25.0,
) -> Workload:
    """The MLP of :mod:`perfgate.workloads.mlp` under DDP; ``batch_size`` is per rank."""
    params = own_params(locals())
    model = partial(mlp.make_model, features, hidden, classes)
    return _build(model, (batch_size, features), device, params)


def build_cnn(
    device: str = "cpu",
    batch_size: int = 32,
    image_size: int = 32,
    channels: int = 16,
    classes: int = 10,
    slowdown: float = 0.0,
    straggler_rank: int = -1,
    straggler_extra: float = 0.0,
    extra_allreduce: int = 0,
    bucket_cap_mb: float = 25.0,
) -> Workload:
    """The CNN of :mod:`perfgate.workloads.cnn` under DDP; ``batch_size`` is per rank."""
    params = own_params(locals())
    model = partial(cnn.make_model, channels, classes)
    return _build(model, (batch_size, 3, image_size, image_size), device, params)
