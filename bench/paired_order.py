"""``check --mode ab``: false alarms and power of the paired decision, the t test alone (the
rule before stop 27) against the t test *and* the pair-order test (perfgate's rule), side
by side on the same simulated pairs.

One check is what ``check --mode ab`` does with the suite's default 3 repeats and a budget
that buys the round's cap of 12 more: look 0 judges the first 3 pairs; a benchmark left
open gets 12 more pairs, and look 1 judges all 15. Every verdict comes from perfgate's real
``compare_pairs`` + ``decide_paired``; the two rules take the same path as ``check``:

* **t alone**: both looks at the common level of
  :func:`perfgate.stats.sequential.look_level` (rho = sqrt(3/15)), each deciding on the
  t test's p (``p_t``); "unchanged" on the t bound alone.
* **perfgate**: the pair-order test must agree (``p = max(p_t, p_order)``); 3 pairs cannot
  reach alpha with it, so look 0 calls nothing and look 1 is judged at ALPHA
  (:func:`perfgate.app.check._ab_level`).

Noise of one pair's log-ratio log(head/base) under no change (a change adds log(1 + e)):

* ``gauss 5%``: normal, SD 5%.
* ``t3 5%``: Student t with 3 degrees of freedom, scaled to SD 5%.
* ``job scale``: normal, but each check's SD drawn log-uniform in 1-27% (A/A checks on this
  project's 2-core runner spread 5-27% from one job to the next).
* ``two levels``: each worker process lands at one of two speed levels 7% apart (fair coin),
  plus 0.3% jitter: a pair's log-ratio is 0 or +-7%, and 3 pairs agree one time in 32.
* ``runner``: the A/A pairs measured on this runner (``bench/data/aa_pairs.json``, step CPU
  time of the MLP, ``perfgate run --ab`` of a commit against an identical one), drawn with
  replacement; the sign of each is a fair coin (the order inside a pair is).

Printed per model: the share of A/A checks with a false regression (target <= 1%), the
share of true 10% and 30% slowdowns called a regression, and the pairs a check measured on
average. Seeds are fixed: the same numbers on every machine.

Run from the repository root with the virtual environment active::

    python bench/paired_order.py               # about 3 minutes on 2 cores
    python bench/paired_order.py --checks 500  # smaller
    python bench/paired_order.py --collect 4   # measure the runner's A/A pairs first:
                                               # 4 runs of 10 pairs quiet, 4 beside the
                                               # demo's CPU hog (~15 minutes), into DATA
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfgate.models import Direction, MetricPolicy, Verdict  # noqa: E402
from perfgate.stats import sequential  # noqa: E402
from perfgate.stats.decide import ALPHA  # noqa: E402
from perfgate.stats.paired import Pair, PairedEvidence, compare_pairs, decide_paired  # noqa: E402

FIRST = 3
"""Pairs of the first look: the suite's default repeats."""
EXTRA = 12
"""Pairs the second look adds: check's MAX_EXTRA (a 10m budget buys it for the MLP)."""
POLICY = MetricPolicy(Direction.LOWER_IS_BETTER, 5.0)
"""step_cpu_ms's minimum effect in the catalogue."""
EFFECTS = (0.10, 0.30)
DATA = Path(__file__).resolve().parent / "data" / "aa_pairs.json"

Draw = Callable[[np.random.Generator, int], np.ndarray]


def _gauss(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.normal(0.0, 0.05, n)


def _t3(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.standard_t(3, n) * 0.05 / math.sqrt(3.0)


def _job_scale(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.normal(0.0, math.exp(rng.uniform(math.log(0.01), math.log(0.27))), n)


def _two_levels(rng: np.random.Generator, n: int) -> np.ndarray:
    def member() -> np.ndarray:
        return np.log1p(0.07 * rng.integers(0, 2, n)) + rng.normal(0.0, 0.003, n)

    return member() - member()


def _resample(pool: tuple[float, ...], rng: np.random.Generator, n: int) -> np.ndarray:
    """n of the measured pairs' sizes, with replacement, each with a fair coin's sign."""
    return rng.choice(np.abs(np.asarray(pool)), n) * rng.choice((-1.0, 1.0), n)


def _evidence(d: np.ndarray, alpha: float) -> PairedEvidence:
    return compare_pairs(
        [Pair(10.0, 10.0 * math.exp(float(x))) for x in d],
        benchmark="mlp",
        metric="step_cpu_ms",
        unit="ms",
        direction=POLICY.direction,
        policy=POLICY,
        run_id="head",
        base_run_id="base",
        alpha=alpha,
    )


def _verdict(d: np.ndarray, alpha: float, *, t_alone: bool) -> Verdict:
    ev = _evidence(d, alpha)
    if t_alone:  # the rule before: the t test's p, the t bound alone for "unchanged"
        ev = replace(ev, p_value=ev.p_t, p_equivalence=0.0 if ev.p_t is not None else None)
    return decide_paired([ev])[0].verdict


def check(d: np.ndarray, *, t_alone: bool) -> tuple[Verdict, int]:
    """One ``check --mode ab`` on the pairs ``d`` (FIRST + EXTRA log-ratios): its verdict
    and the pairs it measured."""
    if t_alone:
        level = sequential.look_level(sequential.pairs_correlation(FIRST, EXTRA), tests=1)
    else:
        level = ALPHA
    first = _verdict(d[:FIRST], level, t_alone=t_alone)
    if first is not Verdict.INCONCLUSIVE:
        return first, FIRST
    return _verdict(d, level, t_alone=t_alone), FIRST + EXTRA


def run_model(draw: Draw, checks: int, key: int, rule: str) -> dict[str, float]:
    """One rule's checks on one model: the share called a regression per effect, and the
    pairs measured. The pairs depend on ``key`` alone: both rules judge the same ones."""
    out: dict[str, float] = {}
    rng = np.random.default_rng([2027, key])
    for effect in (0.0, *EFFECTS):
        hits, pairs = 0, 0
        for _ in range(checks):
            d = draw(rng, FIRST + EXTRA) + math.log1p(effect)
            verdict, n = check(d, t_alone=rule == "t alone")
            hits += verdict is Verdict.REGRESSION
            pairs += n
        out[f"{effect:g}"] = hits / checks
        out[f"{effect:g}/pairs"] = pairs / checks
    return out


def collect(rounds: int, pairs: int = 10) -> dict[str, object]:
    """Real A/A pairs on this machine: the demo's repository (bench/demo.py: the MLP entry
    committed on main, a branch with the same file), ``perfgate run --ab main --repeats
    PAIRS`` ``rounds`` times quiet and ``rounds`` times beside the demo's hog; the step CPU
    time's log-ratio head/base of every pair."""
    import tempfile

    import demo

    found: dict[str, list[float]] = {"quiet": [], "hog": []}
    for state in ("quiet", "hog"):
        with demo.hog(state == "hog"), tempfile.TemporaryDirectory(prefix="pg-aa-") as tmp:
            cwd = Path(tmp)
            demo.ab_repo(cwd)
            demo.ab_branch(cwd, "feat-0", 0.0)
            for r in range(rounds):
                args = ["run", "--suite", "perfgate.toml", "--ab", "main"]
                args += ["--repeats", str(pairs), "--branch", "feat-0", "--json"]
                done = demo.perfgate(args, cwd, timeout=1800)
                if done.rc != 0:
                    raise RuntimeError(f"perfgate {' '.join(args)}: {done.stderr.strip()[-500:]}")
                runs = json.loads(done.stdout)["runs"]
                base = next(x for x in runs if x["branch"].endswith(":base"))
                head = next(x for x in runs if not x["branch"].endswith(":base"))
                b = base["measurements"]["step_cpu_ms"]["repeat_centres"]
                h = head["measurements"]["step_cpu_ms"]["repeat_centres"]
                ratios = [math.log(y / x) for x, y in zip(b, h, strict=True)]
                found[state].extend(ratios)
                spread = float(np.std(ratios, ddof=1))
                print(
                    f"  {state} run {r + 1}/{rounds}: mean {100 * float(np.mean(ratios)):+.1f}%,"
                    f" SD {100 * spread:.1f}%",
                    flush=True,
                )
    return {
        "what": "log(head/base) of step_cpu_ms (median of the measured steps of one worker "
        "process each side), A/A: perfgate run --ab main of a commit with the same files",
        "machine": demo.cpu_model(),
        "collected": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": f"python bench/paired_order.py --collect {rounds}",
        "quiet": found["quiet"],
        "hog": found["hog"],
        "log_ratios": found["quiet"] + found["hog"],
    }


def _interval(k: int, n: int) -> str:
    from scipy import stats

    low = 0.0 if k == 0 else float(stats.beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(0.975, k + 1, n - k))
    return f"[{100 * low:.1f}, {100 * high:.1f}]"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checks", type=int, default=1000, help="checks per model and effect")
    parser.add_argument(
        "--collect",
        type=int,
        metavar="ROUNDS",
        help=f"first measure ROUNDS x 10 A/A pairs quiet and as many beside a CPU hog into {DATA}",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.collect:
        DATA.parent.mkdir(exist_ok=True)
        DATA.write_text(json.dumps(collect(args.collect), indent=1) + "\n")
    models: list[tuple[str, Draw]] = [
        ("gauss 5%", _gauss),
        ("t3 5%", _t3),
        ("job scale", _job_scale),
        ("two levels", _two_levels),
    ]
    if DATA.is_file():
        measured = json.loads(DATA.read_text())
        ratios = tuple(float(x) for x in measured["log_ratios"])
        models.append((f"runner ({len(ratios)} pairs)", partial(_resample, ratios)))
    print("perfgate: check --mode ab, the paired decision (bench/paired_order.py)")
    print(
        f"command: python bench/paired_order.py --checks {args.checks}; {FIRST} pairs, then "
        f"{EXTRA} more; alpha {ALPHA}; minimum effect {POLICY.min_effect_pct:g}%"
    )
    print("A/A: checks with a false regression [95% CI]; power: regressions called; pairs: mean")
    head = f"{'model':<22} {'rule':<9} {'A/A':>18} {'10%':>7} {'30%':>7} {'pairs A/A':>10}"
    print(head)
    print("-" * len(head))
    rules = ("t alone", "perfgate")
    tasks = [(d, args.checks, key, rule) for key, (_, d) in enumerate(models) for rule in rules]
    with ProcessPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        results = list(pool.map(run_model, *zip(*tasks, strict=True)))
    for i, res in enumerate(results):
        name, rule = models[i // len(rules)][0], rules[i % len(rules)]
        k = round(res["0"] * args.checks)
        print(
            f"{name:<22} {rule:<9} {100 * res['0']:>5.2f}% {_interval(k, args.checks):>12} "
            f"{100 * res['0.1']:>6.1f}% {100 * res['0.3']:>6.1f}% {res['0/pairs']:>10.1f}"
        )
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
