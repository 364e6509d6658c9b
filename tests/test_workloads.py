"""The built-in workloads are real training steps, and ``slowdown`` adds real work."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from perfgate.workloads import cnn, mlp, transformer  # noqa: E402


@pytest.mark.parametrize("module", [mlp, cnn, transformer])
def test_step_trains_and_params_describe_it(module: object) -> None:
    torch.set_num_threads(1)
    workload = module.build(batch_size=8)  # type: ignore[attr-defined]
    losses = [float(workload.step()) for _ in range(8)]
    assert all(loss == loss for loss in losses)  # finite, not NaN
    assert losses[-1] < losses[0]  # the optimizer is really stepping
    assert workload.batch_size == 8
    assert workload.params["batch_size"] == 8
    assert workload.params["slowdown"] == 0.0


@pytest.mark.parametrize("module", [mlp, cnn, transformer])
def test_same_seed_gives_the_same_loss(module: object) -> None:
    a = module.build(batch_size=4)  # type: ignore[attr-defined]
    b = module.build(batch_size=4)  # type: ignore[attr-defined]
    assert float(a.step()) == float(b.step())


def test_slowdown_adds_proportional_rows_of_work() -> None:
    """Counted in FLOPs of the step, not in time: deterministic."""
    from torch.utils.flop_counter import FlopCounterMode

    def flops(slowdown: float) -> int:
        workload = mlp.build(batch_size=100, slowdown=slowdown)
        with FlopCounterMode(display=False) as counter:
            workload.step()
        return int(counter.get_total_flops())

    base, slowed = flops(0.0), flops(0.3)
    assert slowed / base == pytest.approx(1.3, rel=0.01)
    with pytest.raises(ValueError):
        mlp.build(slowdown=-1.0)


def test_the_mlp_slowdown_is_the_same_operators_doing_more_work() -> None:
    """The MLP's slowdown adds rows to the step's own calls, not calls: the same operators,
    called as often, with the FLOPs of 30% more rows. A time regression the operator count
    cannot see (so the gate's time metric has to)."""
    from collections import Counter

    from torch.utils._python_dispatch import TorchDispatchMode

    class Calls(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: Counter[str] = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.seen[str(func)] += 1
            return func(*args, **(kwargs or {}))

    def calls(slowdown: float) -> Counter[str]:
        workload = mlp.build(batch_size=100, slowdown=slowdown)
        workload.step()  # the first step makes the momentum buffers: count a later one
        with Calls() as counter:
            workload.step()
        return counter.seen

    assert calls(0.0) == calls(0.3)


def _small_mlp() -> object:
    return mlp.make_model(features=16, hidden=32, classes=4), (8, 16)


def _small_cnn() -> object:
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 4),
    )  # fmt: skip
    return model, (8, 3, 8, 8)


@pytest.mark.parametrize("make", [_small_mlp, _small_cnn])
def test_the_built_in_optimizer_updates_as_torch_optim_sgd_does(make: object) -> None:
    """The workloads' own SGD (which spares every worker the import of torch._dynamo that
    torch.optim triggers) trains exactly as torch.optim.SGD with momentum would: the same
    losses and weights, bit for bit, over steps where the momentum buffers matter."""
    import torch.nn.functional as F

    from perfgate.workloads.base import Sgd

    def train(optimizer_of: object) -> tuple[list[float], list[torch.Tensor]]:
        torch.manual_seed(0)
        torch.set_num_threads(1)
        model, shape = make()  # type: ignore[operator]
        x, y = torch.randn(*shape), torch.randint(0, 4, (shape[0],))
        optimizer = optimizer_of(list(model.parameters()))  # type: ignore[operator]
        losses = []
        for _ in range(6):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
        return losses, [p.detach().clone() for p in model.parameters()]

    ours = train(lambda ps: Sgd(ps, lr=0.01, momentum=0.9))
    theirs = train(lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9))
    assert ours[0] == theirs[0]
    assert all(torch.equal(a, b) for a, b in zip(ours[1], theirs[1], strict=True))
    assert ours[0][-1] < ours[0][0]


def test_a_worker_of_a_built_in_workload_does_not_import_torch_dynamo() -> None:
    """torch.optim's first call imports torch._dynamo, about as costly as torch itself; the
    built-in CPU workloads' steps (unprofiled) need none of it."""
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "from perfgate.workloads import mlp, cnn\n"
        "for m in (mlp, cnn):\n"
        "    w = m.build(batch_size=2)\n"
        "    w.step(); w.step()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip() == "False"
