"""The overhead of perfgate's distributed timing per step, against a plain torchrun DDP loop.

One torchrun job (2 ranks, gloo on CPU, one intra-op thread each) runs the built-in
``ddp_mlp`` workload. Each rank alternates blocks of two loops over the same warm DDP step:

- **P** (plain): what a user's torchrun training loop timing itself does — one clock read
  before and after each step, no barrier;
- **G** (perfgate): :func:`perfgate.runner.distributed.timed_steps`, the worker's own loop
  (called as is) — one barrier before the first step and one after the last, each step
  timed on this rank until the device is synchronised, with the rank's time blocked in
  collectives read before and after it.

Both loops run the same step (the ``ddp_mlp`` step, whose DDP communication hook notes the
gradient all-reduce's wait); the block's own two barriers are outside both timings.

Blocks run in the orders PG and GP in turn, so load drift hits both alike. Reported per
rank and job: the wall time per step of each loop (G's includes its barriers: that is the
overhead a job pays), and the median timed step of each loop (what each records). Target:
perfgate's wall time per step within 3% of the plain loop's.

Run from the repository root with the project's virtual environment active::

    python bench/distributed.py [--blocks 20] [--steps 25] [--batch-size 512] [--hidden 256]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _rank(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    from perfgate.runner.distributed import timed_steps
    from perfgate.workloads.base import collective_wait_ns
    from perfgate.workloads.ddp import build_mlp

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    step = build_mlp(batch_size=args.batch_size, hidden=args.hidden).step
    for _ in range(10):
        step()
    clock = time.perf_counter_ns

    def plain(n: int) -> list[int]:
        out = []
        for _ in range(n):
            t0 = clock()
            step()
            out.append(clock() - t0)
        return out

    def perfgate(n: int) -> list[int]:
        return timed_steps(step, n, lambda: None, dist.barrier, collective_wait_ns)[0]

    walls: dict[str, list[float]] = {"plain": [], "perfgate": []}
    steps: dict[str, list[int]] = {"plain": [], "perfgate": []}
    loops = {"plain": plain, "perfgate": perfgate}
    for block in range(args.blocks):
        order = ("plain", "perfgate") if block % 2 == 0 else ("perfgate", "plain")
        for name in order:
            dist.barrier()
            t0 = clock()
            samples = loops[name](args.steps)
            dist.barrier()  # the block ends when every rank is done (both loops alike)
            walls[name].append((clock() - t0) / args.steps / 1e6)
            steps[name].extend(samples)
    mine = {
        "rank": rank,
        "wall_ms": walls,
        "step_ms": {k: statistics.median(v) / 1e6 for k, v in steps.items()},
    }
    gathered: list[object] | None = [None] * dist.get_world_size() if rank == 0 else None
    dist.gather_object(mine, gathered, dst=0)
    if rank == 0:
        Path(args.out).write_text(json.dumps(gathered), encoding="utf-8")
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--out", default="")
    parser.add_argument("--rank-mode", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_mode:
        _rank(args)
        return 0
    from perfgate.runner.distributed import free_port

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [
            sys.executable, "-m", "torch.distributed.run",
            "--nproc-per-node", str(args.nproc), "--nnodes", "1",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
            __file__, "--rank-mode", "--out", str(out),
            "--blocks", str(args.blocks), "--steps", str(args.steps),
            "--batch-size", str(args.batch_size), "--hidden", str(args.hidden),
        ]  # fmt: skip
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        started = time.time()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not out.exists():
            print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
            return 1
        ranks = json.loads(out.read_text(encoding="utf-8"))
    load = os.getloadavg()
    print(
        f"ddp_mlp batch {args.batch_size} hidden {args.hidden}, {args.nproc} ranks (gloo, 1 "
        f"thread each), {args.blocks} blocks x {args.steps} steps per loop, "
        f"{time.time() - started:.0f} s, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(
        f"{'rank':>4}  {'plain wall/step':>15}  {'perfgate wall/step':>18}  {'overhead':>8}  "
        f"{'plain median step':>17}  {'perfgate median step':>20}"
    )
    ratios = []
    for r in ranks:
        p = statistics.median(r["wall_ms"]["plain"])
        g = statistics.median(r["wall_ms"]["perfgate"])
        per_block = [
            b / a - 1 for a, b in zip(r["wall_ms"]["plain"], r["wall_ms"]["perfgate"], strict=True)
        ]
        ratios.append(statistics.median(per_block))
        print(
            f"{r['rank']:>4}  {p:>12.3f} ms  {g:>15.3f} ms  {statistics.median(per_block):>+8.1%}"
            f"  {r['step_ms']['plain']:>14.3f} ms  {r['step_ms']['perfgate']:>17.3f} ms"
        )
    extra = max(
        statistics.median(r["wall_ms"]["perfgate"]) - statistics.median(r["wall_ms"]["plain"])
        for r in ranks
    )
    print(f"absolute cost per step (worst rank, medians): {extra:+.3f} ms")
    worst = max(ratios)
    verdict = "within" if worst <= 0.03 else "ABOVE"
    print(f"wall-time overhead per step (median of per-block ratios, worst rank): {worst:+.1%}")
    print(f"target <= 3%: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
