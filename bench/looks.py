"""``check --mode ab`` measuring until decided, on simulated pairs: false alarms over every
look, detections, pairs spent and why each sequence stopped (:mod:`perfgate.stats.looks`).

Each trial is one benchmark: 3 first pairs, then looks through
:func:`perfgate.stats.looks.measure_until_decided` with a budget of ``--extra`` more pairs
(45: about what a 10-minute budget buys a ~3.4 ms step here, 12 s a pair), every look judged
by the real paired rule (:func:`perfgate.stats.paired.compare_pairs` and
:func:`~perfgate.stats.paired.decide_paired`, minimum effect 3%). Pair log-ratios are drawn
normal, or Student t3 scaled to the same SD, around log(1 + change). Beside it, the fixed
design it replaces: one look at 15 pairs (3 + 12) at alpha.

Then the same on noise shaped like a CI job's rather than like the rule's model: each
member of a pair measured in turn (base, then head), each measurement's log noise normal
with SD ``sd / sqrt(2)`` plus, per shape, what a shared runner adds (:class:`CiNoise`):

* ``turbo``: each measurement in a slow clock state, +8%, with probability 0.3;
* ``burst``: a neighbour for 5-15 consecutive pairs (starting in the first 30), the
  measurements' noise 4x while it stays;
* ``neighbour``: 5% of measurements slowed by 5-30% (uniform);
* ``AR(1) 0.9``: the noise of consecutive measurements correlated (a slow wander);
* ``drift``: the machine slowing 0.2% a measurement (the head, always second, pays it).

    python bench/looks.py                      # the table in the module's report
    python bench/looks.py --trials 200 --sd 0.05
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections import Counter
from collections.abc import Mapping

import numpy as np

from perfgate.models import Direction, MetricPolicy, Verdict
from perfgate.stats.decide import ALPHA
from perfgate.stats.looks import Budget, measure_until_decided
from perfgate.stats.paired import Pair, compare_pairs, decide_paired

POLICY = MetricPolicy(direction=Direction.LOWER_IS_BETTER, min_effect_pct=3.0)


def _draw(
    rng: np.random.Generator, change: float, sd: float, k: int, tails: float | None
) -> np.ndarray:
    if tails is None:
        noise = rng.normal(0.0, sd, k)
    else:
        noise = rng.standard_t(tails, k) * sd / math.sqrt(tails / (tails - 2.0))
    out: np.ndarray = math.log1p(change) + noise
    return out


class CiNoise:
    """One sequence of measurements on a shared runner: :meth:`pairs` gives the next
    ``k`` pair log-ratios, base measured first, head second."""

    def __init__(self, rng: np.random.Generator, shape: str, change: float, sd: float) -> None:
        self.rng, self.shape, self.change = rng, shape, change
        self.sd = sd / math.sqrt(2.0)
        self.t = 0
        self.wander = 0.0
        self.burst = (int(rng.integers(0, 30)), int(rng.integers(5, 16)))

    def _one(self) -> float:
        rng, sd, pair = self.rng, self.sd, self.t // 2
        if self.shape == "burst" and self.burst[0] <= pair < sum(self.burst):
            sd *= 4.0
        e = float(rng.normal(0.0, sd))
        if self.shape == "turbo" and rng.random() < 0.3:
            e += math.log(1.08)
        elif self.shape == "neighbour" and rng.random() < 0.05:
            e += float(rng.uniform(math.log(1.05), math.log(1.3)))
        elif self.shape == "AR(1) 0.9":
            self.wander = 0.9 * self.wander + float(rng.normal(0.0, sd * math.sqrt(1 - 0.81)))
            e = self.wander
        elif self.shape == "drift":
            e += 0.002 * self.t
        self.t += 1
        return e

    def pairs(self, k: int) -> list[float]:
        out = []
        for _ in range(k):
            base = self._one()
            out.append(self._one() + math.log1p(self.change) - base)
        return out


def _verdict(logs: list[float], level: float) -> Verdict:
    ev = compare_pairs(
        [Pair(1.0, math.exp(x)) for x in logs],
        benchmark="b",
        metric="step_cpu_ms",
        unit="ms",
        direction=POLICY.direction,
        policy=POLICY,
        run_id="h",
        base_run_id="b",
        alpha=level,
    )
    (c,) = decide_paired([ev])
    return c.verdict


def trial(
    seed: int, change: float, sd: float, extra: int, tails: float | None, shape: str | None = None
) -> tuple[Verdict, int, str, Verdict]:
    """(verdict with looks, pairs spent, why it stopped, verdict of the fixed 15 pairs);
    ``shape``: a :class:`CiNoise` shape instead of independent pairs."""
    rng = np.random.default_rng(seed)
    if shape is None:
        logs = list(_draw(rng, change, sd, 3, tails))
        fixed_logs = logs + list(_draw(rng, change, sd, 12, tails))
    else:
        noise = CiNoise(rng, shape, change, sd)
        logs = noise.pairs(3)
        fixed_logs = logs + CiNoise(np.random.default_rng([seed, 1]), shape, change, sd).pairs(12)
    seen: dict[str, Verdict] = {}

    def measure(b: str, k: int, level: float) -> None:
        logs.extend(_draw(rng, change, sd, k, tails) if shape is None else noise.pairs(k))

    def judge(levels: Mapping[str, float]) -> set[str]:
        seen["b"] = _verdict(logs, levels["b"])
        return set() if seen["b"] is Verdict.INCONCLUSIVE else {"b"}

    (stop,) = measure_until_decided(
        {"b": 3},
        seconds_per_pair={"b": 1.0},
        budget=Budget(pairs=extra),
        measure=measure,
        judge=judge,
        clock=lambda: 0.0,
    )
    return seen["b"], stop.pairs, stop.why, _verdict(fixed_logs, ALPHA)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--aa-trials", type=int, default=2000)
    parser.add_argument("--sd", type=float, default=0.10, help="SD of one pair's log-ratio")
    parser.add_argument("--extra", type=int, default=45, help="pairs the budget adds")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    rows: list[tuple[str, float, float | None, int, str | None]] = [
        ("A/A normal", 0.0, None, args.aa_trials, None),
        ("A/A t3", 0.0, 3.0, args.aa_trials, None),
        ("+5% normal", 0.05, None, args.trials, None),
        ("+10% normal", 0.10, None, args.trials, None),
        ("+10% t3", 0.10, 3.0, args.trials, None),
        ("+40% normal", 0.40, None, args.trials, None),
    ]
    for shape in ("turbo", "burst", "neighbour", "AR(1) 0.9", "drift"):
        rows += [
            (f"A/A {shape}", 0.0, None, args.aa_trials // 2, shape),
            (f"+10% {shape}", 0.10, None, args.trials // 2, shape),
        ]
    print(
        f"pair SD {args.sd:.0%}, min effect {POLICY.min_effect_pct:g}%, alpha {ALPHA:g}, "
        f"3 first pairs + up to {args.extra}; fixed design: 15 pairs, one look"
    )
    print(
        f"{'case':<15} {'trials':>6} {'regr':>6} {'impr':>6} {'unch':>6} {'inconc':>6} "
        f"{'pairs med':>9} {'mean':>6} {'stops (why)':<34} {'fixed 15: regr':>14}"
    )
    master = np.random.default_rng(args.seed)
    for name, change, tails, n, shape in rows:
        verdicts: Counter[Verdict] = Counter()
        fixed: Counter[Verdict] = Counter()
        whys: Counter[str] = Counter()
        spent = []
        for _ in range(n):
            v, pairs, why, f = trial(
                int(master.integers(1 << 31)), change, args.sd, args.extra, tails, shape
            )
            verdicts[v] += 1
            fixed[f] += 1
            whys[why] += 1
            spent.append(pairs)
        share = {v: verdicts[v] / n for v in Verdict}
        stops = ", ".join(f"{k} {c / n:.0%}" for k, c in whys.most_common())
        print(
            f"{name:<15} {n:>6} {share[Verdict.REGRESSION]:>6.1%} "
            f"{share[Verdict.IMPROVEMENT]:>6.1%} {share[Verdict.UNCHANGED]:>6.1%} "
            f"{share[Verdict.INCONCLUSIVE]:>6.1%} {statistics.median(spent):>9g} "
            f"{statistics.fmean(spent):>6.1f} {stops:<34} "
            f"{fixed[Verdict.REGRESSION] / n:>14.1%}"
        )


if __name__ == "__main__":
    main()
