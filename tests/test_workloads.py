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
    """Counted in FLOPs of the first layer's matmul, not in time: deterministic."""
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
