"""The noise floor of a paired A/B comparison on this machine, and what lowers it.

An A/A pair is two fresh worker processes of the same code, one after the other: the SD of
log(B / A) over many such pairs is the floor a paired comparison works against (a change
smaller than about 2.8 SD / sqrt(pairs) cannot be told from it). This script measures that
SD for step CPU time and step wall time with perfgate's real runner
(:func:`perfgate.runner.run_repeat`, one worker process per repeat, as ``check --mode ab``
runs them), for two steps:

* ``user``: a user-style entry (``entry = "floor_user:build"``, written to a temporary
  directory as a user's suite would hold it): a two-layer matmul MLP training step, 512 rows,
  about 3 ms of CPU on this machine;
* ``mlp``: the built-in ``mlp`` workload (batch 128), about 8-10 ms.

Settings that change how a process runs are separate *conditions*, measured in rounds: each
round runs one A/A pair of every condition, so load that comes and goes on this shared
machine hits all of them alike. The conditions (one intra-op thread unless said):

* ``base``: perfgate's process setup (address randomisation on, GC on, unpinned);
* ``fixed``: address-space randomisation off in the worker (``personality(ADDR_NO_
  RANDOMIZE)``: :class:`perfgate.runner.ProcessSetup` ``fixed_layout``);
* ``pin``: every worker pinned to CPU 0 (``os.sched_setaffinity``);
* ``nogc``: no garbage collection inside the timed loop;
* ``threads2``: two intra-op threads (the step's CPU time is then the process's).

Both members of an A/A pair here run one tree (the same directory), so ``fixed`` gives them
one layout: the floor it shows is not what an A/B of two trees sees, where each side has its
own fixed layout and their difference is a bias (why the default stays randomised:
``bench/README.md``).

``--quick`` measures ``base`` and ``fixed`` only. A worker takes 6-9 s on this machine under
its usual load (most of it importing torch), a pair of the two steps 14-18 s.

Everything else is read from the same processes afterwards, each process having run
``WARMUP_MAX + STEPS_MAX`` timed steps and no warm-up: ``w`` warm-up steps and ``k`` measured
ones are the steps ``[w, w + k)``; a process's value is the median, 25th percentile, 10%
trimmed mean, mean or minimum of those; pairs are (process 2i, process 2i + 1) of a condition,
read in ``ABAB`` order (A always first), ``ABBA`` order (every other pair reversed) or
perfgate's ``random`` order (a fair coin per pair, as :func:`perfgate.runner.ab.run_pairs`
draws). Warm-up read this way is the same steps a worker's warm-up runs (the worker's only
addition is one ``gc.collect()`` before its timed loop).

Printed: per row the pair SD (of log(B/A), in %) of CPU time and of wall time, the mean
log-ratio (the order's bias: the second process against the first), the pairs, and the
seconds a pair took; and the load (``uptime``) before and after. The SDs of a few dozen
pairs are themselves uncertain by about 1/sqrt(2 x pairs) (15% of the value at 24 pairs):
read differences smaller than that as none.

Run from the repository root with the virtual environment active::

    python bench/floor.py --quick      # at most 5 minutes: user and mlp, base and fixed
    python bench/floor.py              # at most 20 minutes: every condition
    python bench/floor.py --minutes 35 # longer (more pairs)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perfgate.models import BenchmarkSpec
from perfgate.runner import ProcessSetup, RepeatResult, run_repeat, split_threads
from perfgate.stats.steady import steady_start

WARMUP_MAX = 20
STEPS_MAX = 100
DEFAULT_WARMUP = 5
DEFAULT_STEPS = 30

USER_ENTRY = '''"""A user's own step: a two-layer matmul MLP (forward, backward, SGD)."""
import torch


def build(device="cpu", rows=512, features=256, hidden=512, outputs=16, slowdown=0.0):
    torch.manual_seed(0)
    w1 = torch.randn(features, hidden, device=device, requires_grad=True)
    w2 = torch.randn(hidden, outputs, device=device, requires_grad=True)
    x = torch.randn(rows + int(round(rows * slowdown)), features, device=device)

    def step():
        h = torch.relu(x @ w1)
        loss = (h @ w2)[:rows].square().mean()
        loss.backward()
        with torch.no_grad():
            for w in (w1, w2):
                w -= 1e-6 * w.grad
                w.grad = None
        return loss.detach()

    return {"step": step, "batch_size": rows}
'''

RANDOMIZED = ProcessSetup(fixed_layout=False)


@dataclass(frozen=True)
class Condition:
    name: str
    step: str  # "user" or "mlp"
    setup: ProcessSetup
    threads: int = 1


@dataclass
class Chain:
    """The processes one condition ran, in order, and the seconds each pair took."""

    condition: Condition
    processes: list[RepeatResult] = field(default_factory=list)
    pair_seconds: list[float] = field(default_factory=list)


def conditions(quick: bool) -> list[Condition]:
    fixed = ProcessSetup(fixed_layout=True)
    if quick:
        return [
            Condition("base", "user", RANDOMIZED),
            Condition("fixed", "user", fixed),
            Condition("base", "mlp", RANDOMIZED),
            Condition("fixed", "mlp", fixed),
        ]
    return [
        Condition("base", "user", RANDOMIZED),
        Condition("fixed", "user", fixed),
        Condition("pin", "user", ProcessSetup(fixed_layout=False, pin_cpu=0)),
        Condition("nogc", "user", ProcessSetup(fixed_layout=False, gc_off=True)),
        Condition("threads2", "user", RANDOMIZED, threads=2),
        Condition("base", "mlp", RANDOMIZED),
        Condition("fixed", "mlp", fixed),
    ]


def spec_of(cond: Condition) -> BenchmarkSpec:
    params: dict[str, int | float | str | bool] = {"threads": cond.threads}
    user = cond.step == "user"
    return BenchmarkSpec(
        name=f"{cond.step}-{cond.name}",
        workload=None if user else "mlp",
        entry="floor_user:build" if user else None,
        params=params,
        warmup=0,
        measured=WARMUP_MAX + STEPS_MAX,
        profiled=0,
        repeats=2,
        timeout_s=300.0,
    )


def run_pair(chain: Chain, code_dir: Path, workdir: Path, index: int) -> None:
    spec = spec_of(chain.condition)
    threads, params = split_threads(spec)
    t0 = time.monotonic()
    for side in "AB":
        chain.processes.append(
            run_repeat(
                spec,
                index,
                threads=threads,
                params=params,
                trace_path=None,
                workdir=workdir,
                sys_path=[str(code_dir)],
                timeout_s=spec.timeout_s,
                cwd=code_dir,
                label=f"{spec.name}-{side}",
                setup=chain.condition.setup,
            )
        )
    chain.pair_seconds.append(time.monotonic() - t0)


# How a process's steps are summarised to one value.
def trimmed_mean(values: Sequence[float], cut: float = 0.1) -> float:
    ordered = sorted(values)
    k = int(len(ordered) * cut)
    kept = ordered[k : len(ordered) - k] or ordered
    return statistics.fmean(kept)


def p25(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=4, method="inclusive")[0]


def steady_median(values: Sequence[float]) -> float:
    """What perfgate takes as a process's value: the median after the warm-up transient MSER
    finds (:func:`perfgate.stats.steady.steady_start`)."""
    return statistics.median(values[steady_start(values) :])


SUMMARIES: dict[str, Callable[[Sequence[float]], float]] = {
    "median": statistics.median,
    "steady": steady_median,
    "p25": p25,
    "trim10": trimmed_mean,
    "mean": statistics.fmean,
    "min": min,
}


@dataclass(frozen=True)
class Reading:
    warmup: int = DEFAULT_WARMUP
    steps: int = DEFAULT_STEPS
    summary: str = "median"
    order: str = "random"


def log_ratios(chain: Chain, reading: Reading, clock: str) -> list[float]:
    """Per pair, log(B / A) of the processes' summarised values, A and B as ``reading.order``
    assigns them."""
    summarise = SUMMARIES[reading.summary]
    window = slice(reading.warmup, reading.warmup + reading.steps)
    values = []
    for rep in chain.processes:
        steps = rep.cpu_ms if clock == "cpu" else rep.step_ms
        values.append(summarise(steps[window]))
    rng = random.Random(1234)  # perfgate's order: a fair coin per pair
    out = []
    for i in range(len(values) // 2):
        first, second = values[2 * i], values[2 * i + 1]
        d = math.log(second / first)
        if reading.order == "ABBA" and i % 2:
            d = -d
        elif reading.order == "random" and rng.random() < 0.5:
            d = -d
        out.append(d)
    return out


def sd_pct(values: Sequence[float]) -> float:
    return 100.0 * statistics.stdev(values) if len(values) >= 2 else math.nan


def row(label: str, chain: Chain, reading: Reading) -> str:
    cpu = log_ratios(chain, reading, "cpu")
    wall = log_ratios(chain, reading, "wall")
    secs = statistics.fmean(chain.pair_seconds) if chain.pair_seconds else math.nan
    bias = 100.0 * statistics.fmean(cpu) if cpu else math.nan
    return (
        f"| {label} | {sd_pct(cpu):.2f} | {sd_pct(wall):.2f} | {bias:+.2f} | {len(cpu)} "
        f"| {secs:.1f} |"
    )


def find(chains: Sequence[Chain], step: str, name: str) -> Chain | None:
    return next((c for c in chains if (c.condition.step, c.condition.name) == (step, name)), None)


def table(chains: Sequence[Chain]) -> list[str]:
    lines = [
        "| setting | pair SD CPU % | pair SD wall % | mean CPU log-ratio % | pairs | s/pair |",
        "|---|---|---|---|---|---|",
    ]
    default = Reading()
    for chain in chains:
        c = chain.condition
        lines.append(row(f"{c.step} {c.name}", chain, default))
    for step in ("user", "mlp"):
        base = find(chains, step, "base")
        if base is None:
            continue
        chain = base
        for steps in (10, 100):
            lines.append(row(f"{step} base, {steps} steps", chain, Reading(steps=steps)))
        for warmup in (0, 20):
            lines.append(row(f"{step} base, warm-up {warmup}", chain, Reading(warmup=warmup)))
        for summary in SUMMARIES:
            if summary != "median":
                lines.append(row(f"{step} base, {summary}", chain, Reading(summary=summary)))
        for order in ("ABAB", "ABBA"):
            lines.append(row(f"{step} base, order {order}", chain, Reading(order=order)))
        lines.append(
            row(f"{step} base, warm-up 20, 100 steps, p25", chain, Reading(20, 100, "p25"))
        )
    for step in ("user", "mlp"):
        for name in ("base", "fixed"):
            found = find(chains, step, name)
            if found is None:
                continue
            chain = found
            if name == "fixed":
                lines.append(row(f"{step} fixed, 100 steps", chain, Reading(steps=100)))
                lines.append(row(f"{step} fixed, p25", chain, Reading(summary="p25")))
            lines.append(row(f"{step} {name}, warm-up 20, 100 steps", chain, Reading(20, 100)))
            lines.append(
                row(
                    f"{step} {name}, warm-up 0, 120 steps, steady", chain, Reading(0, 120, "steady")
                )
            )
    return lines


def layouts(chains: Sequence[Chain]) -> str:
    seen = {}
    for chain in chains:
        kinds = sorted({rep.address_layout or "?" for rep in chain.processes})
        seen[f"{chain.condition.step} {chain.condition.name}"] = "/".join(kinds)
    return ", ".join(f"{k}: {v}" for k, v in seen.items())


def uptime() -> str:
    try:
        return subprocess.run(
            ["uptime"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        return "?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 conditions, about 5 minutes")
    parser.add_argument("--minutes", type=float, default=None, help="time bound [5 quick, 20]")
    parser.add_argument("--pairs", type=int, default=60, help="most pairs per condition [60]")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write every process's steps")
    args = parser.parse_args(argv)
    minutes = args.minutes if args.minutes is not None else (5.0 if args.quick else 20.0)
    chains = [Chain(c) for c in conditions(args.quick)]
    start_load = uptime()
    started = time.monotonic()
    deadline = started + 60.0 * minutes
    print(f"load before: {start_load}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="perfgate-floor-") as tmp:
        code_dir = Path(tmp) / "suite"
        code_dir.mkdir()
        (code_dir / "floor_user.py").write_text(USER_ENTRY, encoding="utf-8")
        workdir = Path(tmp) / "work"
        workdir.mkdir()
        rounds = 0
        per_round = 0.0
        while rounds < args.pairs:
            if rounds and time.monotonic() + per_round > deadline:
                break
            t0 = time.monotonic()
            for chain in chains:
                run_pair(chain, code_dir, workdir, rounds)
            rounds += 1
            per_round = time.monotonic() - t0
            print(f"round {rounds}: {per_round:.0f} s", file=sys.stderr)
    elapsed = (time.monotonic() - started) / 60.0
    command = "python bench/floor.py" + (" --quick" if args.quick else "")
    if args.minutes is not None:
        command += f" --minutes {args.minutes:g}"
    print(
        f"`{command}`: {rounds} rounds in {elapsed:.1f} min, {os.cpu_count()} CPUs, "
        "torch 1 thread unless said"
    )
    print(f"load before: {start_load}")
    print(f"load after:  {uptime()}")
    print(f"address layout seen: {layouts(chains)}")
    print(
        f"defaults of a row: warm-up {DEFAULT_WARMUP}, {DEFAULT_STEPS} steps, median, random order"
    )
    print()
    for line in table(chains):
        print(line)
    if args.json is not None:
        rows = [
            {
                "step": ch.condition.step,
                "condition": ch.condition.name,
                "pair_seconds": ch.pair_seconds,
                "processes": [
                    {"cpu_ms": r.cpu_ms, "step_ms": r.step_ms, "layout": r.address_layout}
                    for r in ch.processes
                ],
            }
            for ch in chains
        ]
        args.json.write_text(json.dumps({"command": command, "chains": rows}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
