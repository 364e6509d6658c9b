"""The PR-gate part of the detection benchmark: false alarms and power, side by side.

From one simulation with realistic noise (``bench/gate_sim.py``: log-normal run-to-run noise
with job, process and step components, heavy tails, stalls and single-run spikes):

1. A/A gates (20 metrics, 30 runs of history, 3 repeats): the share of gates that raise any
   false regression, perfgate at its defaults next to four rules used by other tools.
2. Power for 5% and 10% slowdowns with 1, 3 and 5 repeats: every method at its default, and
   every other method again with its threshold calibrated so that its per-metric false-alarm
   rate under A/A equals perfgate's measured one.
3. Paired A/B (``compare_pairs``) against the history-based gate (``compare_candidates``)
   when job-level noise dominates.

perfgate is run through its real entry points (``compare_candidates`` on RunPoints built as
the store returns them; ``compare_pairs`` / ``decide_paired``). The other methods are
re-implementations of their decision rules, described next to each table.

Run from the repository root with the project's virtual environment active::

    python bench/detection_gate.py            # 5-10 minutes on a 2-core machine
    python bench/detection_gate.py --scale 0.1   # every simulation 10x smaller, ~30 s
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gate_sim  # noqa: E402
from gate_sim import NoiseModel, Series  # noqa: E402

from perfgate.config import Config  # noqa: E402
from perfgate.metrics import CATALOGUE  # noqa: E402
from perfgate.models import Direction, RunPoint, Verdict  # noqa: E402
from perfgate.stats import ALPHA, Candidate, compare_candidates  # noqa: E402
from perfgate.stats.compare import median_variance  # noqa: E402
from perfgate.stats.paired import (  # noqa: E402
    Pair,
    PairedEvidence,
    PairNoise,
    compare_pairs,
    decide_paired,
    pair_noise_from_repeats,
)

GATE = 20
"""Metrics per gate."""
WINDOW = Config().baseline_window
"""Baseline runs (perfgate's default window)."""
POLICY = CATALOGUE["step_time_ms"].policy
EFFECTS = (0.05, 0.10)
REPEATS = (1, 3, 5, 15)
"""Pairs per A/B run in section 3: 15 is what ``check --mode ab`` measures (3, then 12)."""
VERIFY_GATES = 15
"""The smallest simulation size (gates or metrics) of a setting, whatever ``--scale``."""
WAVE2_GATES = 2000
"""A/A gates per row of the wave-2 table: at a 1% rate its 95% interval is about
0.6-1.5%, narrow enough to tell a row at the target from one above it (500 gates gave
0.3-2.3%)."""

_T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
_IDS = [f"run{i:03d}" for i in range(WINDOW + 1)]
_COMMITS = [f"{i:07x}" for i in range(WINDOW + 1)]
_TIMES = [_T0 + timedelta(hours=i) for i in range(WINDOW + 1)]


# --------------------------------------------------------------------------- other methods


@dataclass(frozen=True)
class Method:
    """A rule that flags a regression when its statistic reaches a threshold."""

    name: str
    default: float
    rule: str


CONBENCH = Method("conbench z>=5", 5.0, "z = (x - mean(H)) / SD(H), flag z >= 5")
ASV = Method(
    "asv 1.1x & MWU",
    1.10,
    "r = median(steps now) / median(steps of the last run); flag r >= 1.1 and MWU p < 0.002",
)
BENCHER = Method(
    "Bencher t 0.99",
    float(stats.t.ppf(0.99, WINDOW - 1)),
    "t = (x - mean(H)) / SD_pop(H), flag above the 0.99 quantile of t(n-1)",
)
FIXED = Method("fixed 10%", 1.10, "r = x / (last run), flag r >= 1.1")
OTHERS = (CONBENCH, ASV, BENCHER, FIXED)


def method_stats(series: Series) -> dict[str, np.ndarray]:
    """Each method's statistic per metric (larger = more regressed)."""
    centres = series.run_centres
    hist, now = centres[:, :-1], centres[:, -1]
    mean = hist.mean(axis=1)
    last_steps, now_steps = series.steps[:, 0], series.steps[:, 1]
    mwu = stats.mannwhitneyu(now_steps, last_steps, axis=1, method="asymptotic").pvalue
    ratio = np.median(now_steps, axis=1) / np.median(last_steps, axis=1)
    return {
        CONBENCH.name: (now - mean) / hist.std(axis=1, ddof=1),
        ASV.name: np.where(mwu < 0.002, ratio, 0.0),
        BENCHER.name: (now - mean) / hist.std(axis=1, ddof=0),
        FIXED.name: now / hist[:, -1],
    }


# --------------------------------------------------------------------------- perfgate


def _candidate(runs: list[list[float]], benchmark: str) -> Candidate:
    points = tuple(
        RunPoint(
            run_id=_IDS[i],
            benchmark=benchmark,
            metric="step_time_ms",
            unit="ms",
            direction=Direction.LOWER_IS_BETTER,
            branch="main",
            commit=_COMMITS[i],
            fingerprint_key="sim",
            started_at=_TIMES[i],
            centre=float(statistics.median(reps)),
            repeat_centres=tuple(reps),
        )
        for i, reps in enumerate(runs)
    )
    return Candidate(current=points[-1], baseline=points[:-1], policy=POLICY)


def _aa_task(model: NoiseModel, repeats: int, gates: int, key: int) -> dict[str, Any]:
    """A/A gates judged whole by compare_candidates, plus the other methods' statistics."""
    series = gate_sim.simulate_series(
        gate_sim.rng_for(key, repeats), model, gates * GATE, WINDOW + 1, repeats, gate_size=GATE
    )
    rows = series.centres.tolist()
    flagged = np.zeros(gates * GATE, dtype=bool)
    p_raw = np.ones(gates * GATE)
    for g in range(gates):
        cands = [_candidate(rows[g * GATE + m], f"b{m}") for m in range(GATE)]
        for m, c in enumerate(compare_candidates(cands)):
            flagged[g * GATE + m] = c.verdict is Verdict.REGRESSION
            p_raw[g * GATE + m] = 1.0 if c.p_value is None else c.p_value
    return {
        "flagged": flagged,
        "p_raw": p_raw,
        "stats": method_stats(series),
        "current_spiked": series.spiked[:, -1],
        "centres": series.centres,
    }


def _power_task(
    model: NoiseModel, repeats: int, effect: float, n: int, key: int, null: np.ndarray
) -> dict[str, Any]:
    """Regressed metrics, each judged by compare_candidates in a whole gate with 19 A/A
    metrics of the A/A pool (``null``: their repeat centres, gate by gate)."""
    rng = gate_sim.rng_for(key, repeats, round(effect * 1000))
    series = gate_sim.simulate_series(rng, model, n, WINDOW + 1, repeats, effect=effect)
    rows = series.centres.tolist()
    gates = null.shape[0] // GATE
    regression = np.zeros(n, dtype=bool)
    inconclusive = np.zeros(n, dtype=bool)
    for i in range(n):
        g = i % gates
        others = null[g * GATE + 1 : (g + 1) * GATE].tolist()
        gate = [_candidate(rows[i], "slow")] + [
            _candidate(o, f"b{m}") for m, o in enumerate(others, start=1)
        ]
        verdict = compare_candidates(gate)[0].verdict
        regression[i] = verdict is Verdict.REGRESSION
        inconclusive[i] = verdict is Verdict.INCONCLUSIVE
    return {
        "regression": regression,
        "inconclusive": inconclusive,
        "stats": method_stats(series),
        "mismatches": 0,
    }


def _paired_evidence(
    base: list[float], head: list[float], benchmark: str, noise: PairNoise | None
) -> PairedEvidence:
    return compare_pairs(
        [Pair(b, h) for b, h in zip(base, head, strict=True)],
        benchmark=benchmark,
        metric="step_time_ms",
        unit="ms",
        direction=Direction.LOWER_IS_BETTER,
        policy=POLICY,
        run_id="head",
        base_run_id="base",
        noise=noise,
    )


def _paired_task(model: NoiseModel, repeats: int, gates: int, n: int, key: int) -> dict[str, Any]:
    """A/A gates and power of paired A/B, judged exactly by compare_pairs + decide_paired.

    Two variants on the same pairs: the pairs' own spread only, and with the pair noise the
    metric's base-branch history implies (pair_noise_from_repeats over 30 simulated runs).
    """
    rng = gate_sim.rng_for(key, repeats)

    def priors(count: int) -> list[PairNoise | None]:
        hist = gate_sim.simulate_series(rng, model, count, WINDOW, repeats).centres.tolist()
        return [pair_noise_from_repeats(runs) for runs in hist]

    out: dict[str, Any] = {}
    base, head = gate_sim.simulate_ab(rng, model, gates * GATE, repeats, gate_size=GATE)
    aa_rows = list(zip(base.tolist(), head.tolist(), strict=True))
    aa_priors = priors(gates * GATE)
    reg_rows = {}
    reg_priors = {}
    for effect in EFFECTS:
        b, h = gate_sim.simulate_ab(rng, model, n, repeats, effect=effect)
        reg_rows[effect] = list(zip(b.tolist(), h.tolist(), strict=True))
        reg_priors[effect] = priors(n)
    for variant in ("alone", "history"):
        pool: list[list[PairedEvidence]] = []
        flagged = np.zeros(gates * GATE, dtype=bool)
        for g in range(gates):
            evs = []
            for m in range(GATE):
                b_row, h_row = aa_rows[g * GATE + m]
                noise = aa_priors[g * GATE + m] if variant == "history" else None
                evs.append(_paired_evidence(b_row, h_row, f"b{m}", noise))
            pool.append(evs)
            for m, c in enumerate(decide_paired(evs)):
                flagged[g * GATE + m] = c.verdict is Verdict.REGRESSION
        out[f"{variant}.flagged"] = flagged
        for effect in EFFECTS:
            verdicts = []
            for i, (b_row, h_row) in enumerate(reg_rows[effect]):
                noise = reg_priors[effect][i] if variant == "history" else None
                ev = _paired_evidence(b_row, h_row, "slow", noise)
                verdicts.append(decide_paired([ev, *pool[i % gates][1:]])[0].verdict)
            out[f"{variant}.power{effect}"] = np.mean([v is Verdict.REGRESSION for v in verdicts])
            out[f"{variant}.inconclusive{effect}"] = np.mean(
                [v is Verdict.INCONCLUSIVE for v in verdicts]
            )
    return out


# --------------------------------------------------------------------------- wave-2 table


@dataclass(frozen=True)
class Row:
    """One A/A condition of the wave-2 table."""

    label: str
    model: NoiseModel
    window: int = WINDOW
    repeats: int = 3
    extra: tuple[tuple[str, int], ...] = ()
    key: int = 0
    """Its setting key (the seed): fixed per row, so that adding a row changes no other."""


def _gate_of(rows: list[list[list[float]]], g: int, window: int) -> list[Candidate]:
    return [_candidate(rows[g * GATE + m][-(window + 1) :], f"b{m}") for m in range(GATE)]


def _row_task(row: Row, gates: int, key: int) -> dict[str, Any]:
    """A/A gates of one row judged whole by compare_candidates, and the peers' statistics."""
    series = gate_sim.simulate_series(
        gate_sim.rng_for(key, row.repeats),
        row.model,
        gates * GATE,
        row.window + 1,
        row.repeats,
        gate_size=GATE,
        **dict(row.extra),
    )
    rows = series.centres.tolist()
    flagged = np.zeros(gates * GATE, dtype=bool)
    for g in range(gates):
        for m, c in enumerate(compare_candidates(_gate_of(rows, g, row.window))):
            flagged[g * GATE + m] = c.verdict is Verdict.REGRESSION
    return {
        "flagged": flagged,
        "stats": method_stats(series),
        "spiked": series.spiked[:, -1].reshape(-1, GATE).any(axis=1),
    }


@dataclass(frozen=True)
class PowerRow:
    label: str
    model: NoiseModel
    effect: float
    window: int = WINDOW
    repeats: int = 3


def _oracle_mde(row: PowerRow) -> float:
    """The MDE (80% power, in %) of a test that knows the noise: the run summary's true
    variance (job + the median of the repeats), a z test at alpha / GATE, the minimum effect."""
    job = row.model.job_sd**2
    step_sd = gate_sim.step_median_law(row.model)[1]
    proc = row.model.process_sd**2 + step_sd**2
    run_var = job + median_variance(row.repeats) * proc
    sd = math.sqrt(run_var * (1.0 + median_variance(row.window)))
    crit = float(stats.norm.ppf(1.0 - ALPHA / GATE / 2.0)) * sd
    floor = math.log1p(POLICY.min_effect_pct / 100.0)
    return 100.0 * math.expm1(max(crit, floor) + float(stats.norm.ppf(0.8)) * sd)


def _power_row_task(row: PowerRow, gates: int, key: int) -> dict[str, Any]:
    """One regressed metric in each of ``gates`` gates (with GATE - 1 A/A metrics), judged
    whole: the share called regression / unchanged, the interval's coverage of the true
    change, and the share caught when the change is exactly the reported MDE.

    The regressed metric is the gate's own first metric with its current run slowed: its
    jobs are the gate's jobs, so a job-wide spike hits it with the other 19, as the model
    says a spike does (it was once simulated apart, with job spikes of its own that no other
    metric of its gate shared)."""
    rng = gate_sim.rng_for(key, row.repeats, round(row.effect * 1000))
    null = gate_sim.simulate_series(
        rng, row.model, gates * GATE, row.window + 1, row.repeats, gate_size=GATE
    )
    rows = null.centres.tolist()

    def slowed(g: int, effect_pct: float) -> Candidate:
        runs = [list(r) for r in rows[g * GATE][-(row.window + 1) :]]
        runs[-1] = [x * (1.0 + effect_pct / 100.0) for x in runs[-1]]
        return _candidate(runs, "b0")

    out: dict[str, Any] = {"regression": 0, "unchanged": 0, "covered": 0, "at_mde": 0, "mde": []}
    for g in range(gates):
        gate = _gate_of(rows, g, row.window)
        gate[0] = slowed(g, 100.0 * row.effect)
        first = compare_candidates(gate)[0]
        out["regression"] += first.verdict is Verdict.REGRESSION
        out["unchanged"] += first.verdict is Verdict.UNCHANGED
        true_pct = 100.0 * row.effect
        out["covered"] += (first.ci_low_pct or 0.0) <= true_pct <= (first.ci_high_pct or 0.0)
        # the same gate with no change, then with a change of exactly its reported MDE
        gate[0] = _candidate(rows[g * GATE][-(row.window + 1) :], "b0")
        mde = compare_candidates(gate)[0].mde_pct or float("inf")
        out["mde"].append(mde)
        if math.isfinite(mde):
            gate[0] = slowed(g, mde)
            out["at_mde"] += compare_candidates(gate)[0].verdict is Verdict.REGRESSION
    return out


def _conditions(base: NoiseModel) -> list[Row]:
    """The issue's A/A conditions (tails, runner pools, a noisier machine, main that moved,
    1-repeat runs, short histories), each on the noise model ``base``."""
    rep = dataclasses.replace
    return [
        Row("t3 job tails", rep(base, label="t3", job_df=3.0)),
        Row("t4 job tails", rep(base, label="t4", job_df=4.0)),
        *(Row(f"pool x1.25 mixed {p:.0%}", rep(base, pool_rate=p)) for p in (0.1, 0.2, 0.3, 0.5)),
        Row("pool 30% sticky 6", rep(base, pool_rate=0.3, pool_block=6)),
        Row("noise x3 last 3", base, extra=(("noisy_last", 3),)),
        Row("noise x3 last 5", base, extra=(("noisy_last", 5),)),
        *(Row(f"main +10% {j} run(s) ago", base, extra=(("main_shift", j),)) for j in (1, 2, 3, 4)),
        Row("1-repeat runs", base, repeats=1),
        Row("3-run history", base, window=3),
        Row("5-run history", base, window=5),
    ]


def _wave2_rows() -> tuple[list[Row], list[PowerRow]]:
    cov1, cov3, cov5 = (gate_sim.mixed_model(c) for c in (0.01, 0.03, 0.05))
    gauss1, gauss3, gauss5 = (gate_sim.gaussian_model(c) for c in (0.01, 0.03, 0.05))
    rows = [
        Row("mixed CoV 1% (spikes, t3 steps)", cov1),
        Row("mixed CoV 3% (spikes, t3 steps)", cov3),
        Row("mixed CoV 5% (spikes, t3 steps)", cov5),
        *_conditions(cov3),
    ]
    rows = [dataclasses.replace(row, key=40 + i) for i, row in enumerate(rows)]
    # the literal Gaussian rows (no spikes, no stalls, normal steps), after the
    # mixed ones in the table but with keys of their own, so no other row's seed moves
    gaussian = [
        Row(m.label, m, key=40 + len(rows) + i) for i, m in enumerate((gauss1, gauss3, gauss5))
    ]
    rows = rows[:3] + gaussian + rows[3:]
    # the same conditions one at a time on the Gaussian CoV 3% model (the rows above put
    # each on the mixed model, so they carry its spikes and stalls too); keys after the
    # Gaussian rows', so no earlier row's seed moves
    rows += [
        dataclasses.replace(row, label=f"{row.label}, {gauss3.label}", key=40 + len(rows) + i)
        for i, row in enumerate(_conditions(gauss3))
    ]
    process10 = gate_sim.NoiseModel(
        "process CoV 10%",
        job_sd=0.0,
        process_sd=0.10,
        step_sd=0.002,
        job_spike_rate=0.0,
        process_spike_rate=0.0,
    )
    power = [
        PowerRow("5% at CoV 1%", cov1, 0.05),
        PowerRow("10% at CoV 3%", cov3, 0.10),
        PowerRow("5% at CoV 3%", cov3, 0.05),
        PowerRow("20% at CoV 5%", cov5, 0.20),
        PowerRow("25%, 3 runs x 3, process 10%", process10, 0.25, window=3),
        PowerRow("5% at CoV 1%, Gaussian", gauss1, 0.05),
        PowerRow("10% at CoV 3%, Gaussian", gauss3, 0.10),
        # what heavy tails cost: the gate takes the heaviest tail its residuals do not rule
        # out, and the oracle here assumes normal job noise (it does not know the tail)
        PowerRow("20% at CoV 3%, t4 job", dataclasses.replace(cov3, job_df=4.0), 0.20),
    ]
    return rows, power


def _section_wave2(
    out: Callable[[str], None], rows: Sequence[Row], aa: Any, power: Sequence[PowerRow], pw: Any
) -> None:
    out("-" * 100)
    out(f"0. Wave-2 table. A/A: share of {GATE}-metric gates with any false regression")
    out("   [95% Clopper-Pearson]; target <= 1% in every row. 'no job spike': gates whose")
    out("   current job was not hit by the model's job-wide spike (0.5% of runs, every metric")
    out("   x1.1-1.4 at once, which no single gate can tell from a regression of everything).")
    out("-" * 100)
    out(
        f"  {'condition':<40}{'gates':>6}  {'perfgate':<19}{'no job spike':>13}  "
        + "".join(f"{m.name:<17}" for m in OTHERS)
    )
    for row in rows:
        res = aa[row]
        k, n = _gate_rate(res["flagged"])
        per_gate = res["flagged"].reshape(-1, GATE).any(axis=1)
        quiet = ~res["spiked"]
        kq = int((per_gate & quiet).sum())
        cells = f"{_pct(k / n) + ' ' + _ci(k, n):<19}{_pct(kq / max(int(quiet.sum()), 1)):>13}  "
        for m in OTHERS:
            mk, mn = _gate_rate(res["stats"][m.name] >= m.default)
            cells += f"{_pct(mk / mn):<17}"
        out(f"  {row.label:<40}{n:>6}  {cells}")
    out("")
    out("  Power and honesty: one regressed metric per gate with 19 A/A metrics, judged whole.")
    out("  'unchanged': share of true changes (all >= the 3% minimum effect) called unchanged")
    out("  (target 0%); 'coverage': the reported 95% interval holds the true change (93-97%);")
    out("  'at MDE': caught when the change is exactly the MDE perfgate reported (75-85%);")
    out("  'MDE': median reported MDE, beside the MDE of a test that knows the noise (oracle;")
    out("  in the t4 row it knows only the variance: the gap is what the heavy tail costs).")
    out(
        f"  {'condition':<30}{'gates':>6}{'power':>9}{'unchanged':>11}{'coverage':>10}"
        f"{'at MDE':>9}{'MDE':>9}{'oracle':>9}{'ratio':>7}"
    )
    for prow in power:
        res = pw[prow]
        n = len(res["mde"])
        mde = float(np.median(res["mde"]))
        oracle = _oracle_mde(prow)
        out(
            f"  {prow.label:<30}{n:>6}{_pct(res['regression'] / n):>9}"
            f"{_pct(res['unchanged'] / n):>11}{_pct(res['covered'] / n):>10}"
            f"{_pct(res['at_mde'] / n):>9}{mde:>8.1f}%{oracle:>8.1f}%{mde / oracle:>7.2f}"
        )
    out("")


# --------------------------------------------------------------------------- reporting


def _pct(x: float, digits: int = 1) -> str:
    return f"{100.0 * x:.{digits}f}%"


def _ci(k: int, n: int) -> str:
    """Clopper-Pearson 95% interval of k successes in n."""
    low = 0.0 if k == 0 else float(stats.beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(0.975, k + 1, n - k))
    return f"[{100 * low:.1f}, {100 * high:.1f}]"


def _power_cell(power: float, inconclusive: float, width: int = 14) -> str:
    return f"{_pct(power) + ' (' + _pct(inconclusive, 0) + ')':>{width}}"


def _gate_rate(flags: np.ndarray) -> tuple[int, int]:
    per_gate = flags.reshape(-1, GATE).any(axis=1)
    return int(per_gate.sum()), int(per_gate.size)


def _threshold_above(values: np.ndarray, count: int) -> float:
    """Threshold t with ``count`` of ``values`` strictly above it (ties aside)."""
    ordered = np.sort(values)[::-1]
    return float(ordered[min(count, values.size - 1)])


@dataclass(frozen=True)
class Setting:
    model: NoiseModel
    repeats: int
    gates: int
    power_n: int
    key: int


def _section_defaults(out: Callable[[str], None], cfgs: Sequence[Setting], aa: Any) -> None:
    out("-" * 100)
    out(
        f"1. PR gate, A/A: share of gates ({GATE} metrics, {WINDOW} runs of history, 3 repeats) "
        "raising any"
    )
    out("   false regression, each method at its default; [95% Clopper-Pearson interval].")
    out("   Target for perfgate: <= 1% at CoV 3%.")
    out("-" * 100)
    out(f"  {'noise':<16}{'gates':>6}  {'perfgate':<19}" + "".join(f"{m.name:<19}" for m in OTHERS))
    for cfg in cfgs:
        res = aa[cfg]
        k, n = _gate_rate(res["flagged"])
        cells = f"{_pct(k / n) + ' ' + _ci(k, n):<19}"
        for m in OTHERS:
            mk, mn = _gate_rate(res["stats"][m.name] >= m.default)
            cells += f"{_pct(mk / mn) + ' ' + _ci(mk, mn):<19}"
        out(f"  {cfg.model.label:<16}{n:>6}  {cells}")
    out("")
    out("  Where perfgate's false alarms come from (a job spike in the current run slows every")
    out("  metric of that run at once; no history-based rule can tell it from a regression):")
    for cfg in cfgs:
        res = aa[cfg]
        flagged, spiked = res["flagged"], res["current_spiked"]
        by_gate = flagged.reshape(-1, GATE).any(axis=1)
        spiked_gate = spiked.reshape(-1, GATE).any(axis=1)
        out(
            f"    {cfg.model.label:<16} alarmed gates {int(by_gate.sum()):>3}, "
            f"{int((by_gate & spiked_gate).sum()):>2} of them with a spiked current job "
            f"(of {int(spiked_gate.sum())}); flagged metrics {int(flagged.sum()):>3}, "
            f"{int((flagged & spiked).sum())} in spiked jobs"
        )
    out("")
    out("  Rules of the other methods (on run centres = median of repeat centres; H = the 30")
    out("  history runs, x = the current run):")
    for m in OTHERS:
        out(f"    {m.name:<16} {m.rule}")
    out("")


def _section_power(
    out: Callable[[str], None], cfgs: Sequence[Setting], aa: Any, power: Any
) -> None:
    out("-" * 100)
    out("2. PR gate, power for 5% and 10% slowdowns, at each method's default and at perfgate's")
    out("   false-alarm rate. perfgate judges each regressed metric inside a gate with")
    out(f"   {GATE - 1} A/A metrics (BH across the gate); the others judge each metric alone.")
    out("   Matching: each other method's threshold is set from its statistic over the same A/A")
    out("   pool (same simulation, same seeds) so that exactly as many A/A metrics (per metric)")
    out("   or A/A gates (per gate: the gate's largest statistic) lie above it as perfgate")
    out("   flagged (at least one); power is then the share of regressed metrics above it.")
    out("   perfgate's power cells: share flagged (its 'inconclusive' share in brackets).")
    out("-" * 100)
    for cfg in cfgs:
        res = aa[cfg]
        flagged = res["flagged"]
        n_aa = flagged.size
        k_metric = int(flagged.sum())
        k_gate, n_gates = _gate_rate(flagged)
        pw = [power[(cfg, e)] for e in EFFECTS]
        pg_power = [float(p["regression"].mean()) for p in pw]
        out(
            f"  {cfg.model.label}, {cfg.repeats} repeat{'s' if cfg.repeats > 1 else ''}: A/A pool "
            f"{n_aa:,} metrics in {n_gates:,} gates; {cfg.power_n:,} regressed metrics per effect"
        )
        out(
            f"    {'at the default':<18}{'FA/metric':>11}{'FA/gate':>9}{'power 5%':>14}"
            f"{'power 10%':>14}"
        )
        line = f"    {'perfgate':<18}{_pct(k_metric / n_aa, 3):>11}{_pct(k_gate / n_gates):>9}"
        line += "".join(
            _power_cell(float(p["regression"].mean()), float(p["inconclusive"].mean())) for p in pw
        )
        out(line)
        matched: list[str] = []
        for m in OTHERS:
            aa_stat = res["stats"][m.name]
            mk, mg = _gate_rate(aa_stat >= m.default)
            line = f"    {m.name:<18}{_pct(float(np.mean(aa_stat >= m.default)), 3):>11}"
            line += f"{_pct(mk / mg):>9}"
            line += "".join(
                f"{_pct(float(np.mean(p['stats'][m.name] >= m.default))):>14}" for p in pw
            )
            out(line)
            thr_m = _threshold_above(aa_stat, max(k_metric, 1))
            thr_g = _threshold_above(aa_stat.reshape(-1, GATE).max(axis=1), max(k_gate, 1))
            cells = f"    {m.name:<18}"
            for thr in (thr_m, thr_g):
                p5, p10 = (float(np.mean(p["stats"][m.name] > thr)) for p in pw)
                cells += f"{thr:>11.3f}{_pct(p5):>10}{_pct(p10):>10}    "
            matched.append(cells.rstrip())
        out(
            f"    {'matched':<18}{'per metric: FA ' + _pct(max(k_metric, 1) / n_aa, 3):^31}    "
            f"{'per gate: FA ' + _pct(max(k_gate, 1) / n_gates):^31}"
        )
        out(f"    {'':<18}" + f"{'threshold':>11}{'power 5%':>10}{'power 10%':>10}    " * 2)
        pg_cells = f"{'(own)':>11}{_pct(pg_power[0]):>10}{_pct(pg_power[1]):>10}    "
        out(f"    {'perfgate':<18}{pg_cells * 2}".rstrip())
        for line in matched:
            out(line)
        out("")


def _section_paired(
    out: Callable[[str], None],
    history: Sequence[Setting],
    paired: Sequence[Setting],
    aa: Any,
    power: Any,
    ab: Any,
) -> None:
    out("-" * 100)
    out("3. Paired A/B (perfgate run --ab: base and head alternate in one job; compare_pairs +")
    out("   decide_paired) against the history-based gate (compare_candidates, 30 runs of")
    out("   history), all at their defaults. 'repeats' = head processes (an A/B run also runs as")
    out("   many base processes). 'paired' uses the pairs' own spread; 'paired+hist' also the")
    out("   pair noise implied by the base branch's runs (pair_noise_from_history; none with 1")
    out("   repeat). FA: A/A gates of 20 with any regression; power: regressed metric judged in a")
    out("   gate with 19 A/A metrics, (inconclusive share).")
    out("-" * 100)
    out(f"  {'noise':<21}{'rep':>4} | {'history-based':^36} | {'paired':^36} | {'paired+hist':^36}")
    sub = f"{'FA/gate':>8}{'power 5%':>14}{'power 10%':>14}"
    out(f"  {'':<21}{'':>4} | {sub} | {sub} | {sub}")
    hist_by = {(c.model.label, c.repeats): c for c in history}
    for cfg in paired:
        h = hist_by.get((cfg.model.label, cfg.repeats))
        if h is None:  # (no history-based setting with this many repeats)
            cells = [f"{'-':>8}" + "".join(f"{'-':>14}" for _ in EFFECTS)]
        else:
            hk, hg = _gate_rate(aa[h]["flagged"])
            cells = [
                f"{_pct(hk / hg):>8}"
                + "".join(
                    _power_cell(
                        float(power[(h, e)]["regression"].mean()),
                        float(power[(h, e)]["inconclusive"].mean()),
                    )
                    for e in EFFECTS
                )
            ]
        res = ab[cfg]
        for variant in ("alone", "history"):
            k, g = _gate_rate(res[f"{variant}.flagged"])
            cells.append(
                f"{_pct(k / g):>8}"
                + "".join(
                    _power_cell(
                        float(res[f"{variant}.power{e}"]), float(res[f"{variant}.inconclusive{e}"])
                    )
                    for e in EFFECTS
                )
            )
        out(f"  {cfg.model.label:<21}{cfg.repeats:>4} | " + " | ".join(cells))
    out(
        f"  (history-based: {history[0].gates} / {history[5].gates} A/A gates at CoV 3% / "
        f"job-dominated, {history[0].power_n} / {history[5].power_n} regressed metrics per effect;"
        f" paired: {paired[0].gates} A/A gates, {paired[0].power_n} regressed metrics per effect)"
    )
    out("")


def run(out: Callable[[str], None], *, jobs: int | None = None, scale: float = 1.0) -> None:
    """Run the PR-gate detection benchmark and write its report line by line to ``out``."""
    _run(lambda line: out(line.rstrip()), jobs=jobs, scale=scale)


def _run(out: Callable[[str], None], *, jobs: int | None, scale: float) -> None:
    started = time.perf_counter()
    jobs = jobs or min(2, os.cpu_count() or 1)

    def size(x: int) -> int:
        return max(VERIFY_GATES, int(x * scale))

    cov1, cov3, cov5 = (gate_sim.mixed_model(c) for c in (0.01, 0.03, 0.05))
    job = gate_sim.job_dominated_model()
    heavy = dataclasses.replace(cov3, label="CoV 3%, t4 job", job_df=4.0)
    history = [
        Setting(cov3, 3, size(1000), size(1000), 1),
        Setting(cov3, 1, size(400), size(800), 2),
        Setting(cov3, 5, size(400), size(800), 3),
        Setting(cov1, 3, size(400), size(400), 4),
        Setting(cov5, 3, size(400), size(400), 5),
        Setting(job, 1, size(200), size(400), 6),
        Setting(job, 3, size(200), size(400), 7),
        Setting(job, 5, size(200), size(400), 8),
    ]
    sensitivity = [Setting(heavy, 3, size(250), 0, 9)]
    paired = [
        Setting(model, r, size(300), size(800), 20 + i)
        for i, (model, r) in enumerate((m, r) for m in (cov3, job) for r in REPEATS)
    ]

    out("=" * 100)
    out("perfgate detection benchmark, PR gate (bench/detection_gate.py)")
    out("=" * 100)
    out("command: python bench/detection_gate.py" + (f" --scale {scale:g}" if scale != 1 else ""))
    out(
        f"seeds: numpy default_rng([{gate_sim.BASE_SEED}, setting key, repeats(, effect in "
        "per mille)]);"
    )
    out(
        "       setting keys 1-9 history-based, 20-27 paired, 40-77 wave-2 A/A rows, 80-87 "
        "wave-2 power rows, 999 noise table, 0 step-median law"
    )
    out(
        f"perfgate defaults: window {WINDOW} runs, alpha (FDR) {ALPHA}, minimum effect "
        f"{POLICY.min_effect_pct:g}%, gate of {GATE} metrics; {jobs} worker processes"
    )
    out("")
    out("Noise models (multiplicative; bench/gate_sim.py has the details):")
    gaussian = [gate_sim.gaussian_model(c) for c in (0.01, 0.03, 0.05)]
    for model in (cov1, cov3, cov5, *gaussian, job, heavy):
        out(f"  {model.describe()}")
    out("")
    out("Noise they produce (CoV = SD/mean / robust = 1.4826*MAD/median), 20,000 draws each:")
    out(f"  {'model':<22}{'repeats':>8}{'repeat centre':>22}{'run centre':>22}{'pair ratio':>22}")
    for model in (cov1, cov3, cov5, job):
        for r in (1, 3):
            c = gate_sim.realised_cov(model, r)
            cells = "".join(
                f"{_pct(c[k], 2) + ' / ' + _pct(c[k + '_robust'], 2):>22}"
                for k in ("repeat", "run", "pair")
            )
            out(f"  {model.label:<22}{r:>8}{cells}")
    out("")

    wave2_rows, wave2_power = _wave2_rows()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        w2_aa = {row: pool.submit(_row_task, row, size(WAVE2_GATES), row.key) for row in wave2_rows}
        w2_pw = {
            row: pool.submit(_power_row_task, row, size(400), 80 + i)
            for i, row in enumerate(wave2_power)
        }
        aa_futures = {
            cfg: pool.submit(_aa_task, cfg.model, cfg.repeats, cfg.gates, cfg.key)
            for cfg in history + sensitivity
        }
        paired_futures = {
            cfg: pool.submit(_paired_task, cfg.model, cfg.repeats, cfg.gates, cfg.power_n, cfg.key)
            for cfg in paired
        }
        aa = {cfg: f.result() for cfg, f in aa_futures.items()}
        power_futures = {
            (cfg, effect): pool.submit(
                _power_task,
                cfg.model,
                cfg.repeats,
                effect,
                cfg.power_n,
                cfg.key,
                aa[cfg]["centres"],
            )
            for cfg in history
            for effect in EFFECTS
        }
        power = {k: f.result() for k, f in power_futures.items()}
        ab = {cfg: f.result() for cfg, f in paired_futures.items()}
        w2_aa_res = {row: f.result() for row, f in w2_aa.items()}
        w2_pw_res = {row: f.result() for row, f in w2_pw.items()}

    _section_wave2(out, wave2_rows, w2_aa_res, wave2_power, w2_pw_res)
    _section_defaults(out, [history[3], history[0], history[4], *sensitivity], aa)
    _section_power(out, history[:5], aa, power)
    _section_paired(out, history, paired, aa, power, ab)
    out(f"total time {time.perf_counter() - started:.0f} s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default 2)")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiply every simulation size (quick: 0.1)"
    )
    args = parser.parse_args(argv)
    run(print, jobs=args.jobs, scale=args.scale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
