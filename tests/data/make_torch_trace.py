"""Regenerate tests/data/torch_trace/mlp_cpu.pt.trace.json.gz.

A tiny MLP training step (Linear-ReLU-Linear, cross-entropy, Adam) on CPU, profiled the way
perfgate's runner profiles: CPU activity, ``record_shapes=True``, ``profile_memory=True``,
one warm-up step and three active steps, exported with ``export_chrome_trace``.

Run from the repository root::

    python tests/data/make_torch_trace.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "torch_trace" / "mlp_cpu.pt.trace.json.gz"
ACTIVE_STEPS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    out: Path = parser.parse_args().out

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))

    def step() -> None:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()

    # repeat=1: after the active steps the profiler stops recording. With the default
    # repeat=0 the schedule starts a new (empty) cycle and export_chrome_trace() after the
    # loop would write that empty cycle instead.
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        profile_memory=True,
        schedule=schedule(wait=0, warmup=1, active=ACTIVE_STEPS, repeat=1),
    ) as prof:
        for _ in range(1 + ACTIVE_STEPS):
            step()
            prof.step()
    out.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(out))  # a ".gz" suffix makes torch gzip it
    print(f"wrote {out} ({out.stat().st_size} bytes, torch {torch.__version__})")


if __name__ == "__main__":
    main()
