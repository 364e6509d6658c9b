"""The README's main scenario, for real: does ``perfgate gate`` catch a slowdown of the
built-in MLP workload on this machine, quiet and under a CPU hog, and stay quiet on an A/A?

Each trial is the scenario as a user types it, in a fresh temporary directory (so the
default store ``sqlite:///.perfgate/perfgate.db`` is new): three baseline runs

    python -m perfgate run --workload mlp --repeats 3 --branch main

then, for each slowdown S of ``--slowdowns``, one run on a feature branch and the gate

    python -m perfgate run --workload mlp --repeats 3 --branch feat-S --param slowdown=S
    python -m perfgate gate --branch feat-S --against main --json

(``--command check``: one ``python -m perfgate check --workload mlp --repeats 3 --branch
feat-S --param slowdown=S --against main --json`` instead of the run and the gate). The
slowdowns of one trial share its three main runs (cost); every trial has its own store.
``slowdown=S`` makes a step do S times more real work (S = 0 is an A/A: the same code).

``--command check-ab``: the PR job of ``action.yml`` (``mode: ab``), no stored history. Per
trial a fresh git repository with a suite (``perfgate.toml``: one benchmark ``mlp``, entry
``bench_mlp:build``, the built-in MLP with ``SLOWDOWN = 0.0`` in the code, ``profiled = 0``)
committed on ``main``; per slowdown S a branch ``feat-S`` off ``main`` whose one commit sets
``SLOWDOWN = S`` in ``bench_mlp.py``, checked out, and

    python -m perfgate check --mode ab --against main --budget 10m --json

(the merge-base measured in the same job, 3 pairs, then up to 12 more pairs for an
inconclusive benchmark as the budget buys). The change is in the code, as in a PR: in ab
mode both sides run the head's suite entries with the head's ``params``, so a PR that only
edits ``params = { slowdown = S }`` in the suite measures S on both sides (an A/A). No
profiled window: the slowdown's extra operators would decide through the operator count
(a deterministic metric, exactly and at the first look, so nothing would be re-measured),
and the demo is about the time. Printed beside the targets: which deciding metrics each
regression was called on.

Machine states (``--states``): ``quiet`` (whatever else the machine runs) and ``hog``: one
busy pure-Python process per core (``python -c "while True: pass"``, ``os.cpu_count()`` of
them) for the whole state, stopped at the end, on an error and on SIGTERM/SIGINT/SIGHUP.
``--hog-only [--seconds S]`` just runs the hog (until S seconds pass or it is stopped), so
something else can be measured under the same load.

Printed per (state, slowdown): trials; gate verdicts (regression, gate failures = exit 1,
inconclusive, unchanged, other, errors); the median change % of ``step_time_ms`` and
``step_cpu_ms`` as the gate judged them (``-`` where the gate does not judge a metric), and
the same change read from the ``perfgate run --json`` centres (feature run against the
median of the three main runs); the median MDE % (80% power) of each; the median seconds
of the feature run + gate, and of a whole trial. Then one line per target:

* slowdown 0.3: a regression in >= 9/10 trials quiet, >= 7/10 under the hog;
* slowdown 1.0: a regression in >= 9/10 trials, quiet and under the hog;
* slowdown 0 (A/A): no gate failure, in either state;
* ``check-ab`` (issue 38, its default slowdowns 0, 0.05, 0.1): slowdown 0.1 a regression in
  >= 9/10 trials quiet, >= 8/10 under the hog; slowdown 0.05 >= 5/10 quiet;

scaled to ``--trials`` (ceil(share x trials)); an errored trial counts as a miss. For
``check-ab``, each check's stated MDE of ``step_cpu_ms`` against a fixed-sample t test's at
alpha 0.01 on the same pairs (issue 38: within 1.3x), plain and with the minimum effect as
its floor (:func:`oracle_ratio`).

Run from the repository root with the project's virtual environment active::

    python bench/demo.py                                # 10 trials x quiet, hog
    python bench/demo.py --trials 3 --states quiet      # a quick look, ~6 minutes
    python bench/demo.py --hog-only --seconds 600       # the hog alone, for other things
    python bench/demo.py --command check-ab             # check --mode ab, 10 trials x 2 states
    python bench/demo.py --report rows.json             # a --json file's tables again

Cost: a trial is ~6 perfgate runs of ~20 s each on 2 quiet cores (about 2 minutes), about
3x that under the hog; the default (10 trials x 2 states) takes about 1.5 hours.
``check-ab``: each check is 3 pairs and, when re-measured, 12 more (2 processes of ~8-15 s
a pair), 3-7 minutes; a trial 10-20 minutes quiet, more under the hog. The
results depend on the machine (cores, other load, CPU frequency scaling), so they are a
demonstration for this machine, not a property of perfgate. ``--json PATH`` writes every
trial's row. Exit status 0 when every command ran (whatever the verdicts), 1 when one
failed (its stderr is printed; ``--strict`` stops at the first), 130/143 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
METRICS = ("step_time_ms", "step_cpu_ms")
BASELINE_RUNS = 3
REPEATS = 3
AB_BUDGET = "10m"
"""``check-ab``'s ``--budget``: action.yml's default."""
AB_SUITE = """\
[defaults]
repeats = 3
# no profiled window: the slowdown adds operators, so a profiled pair's operator count (a
# deterministic metric) would decide at the first look, and the demo would measure that
profiled = 0

[[benchmarks]]
name = "mlp"
entry = "bench_mlp:build"
"""
AB_ENTRY = """\
from perfgate.workloads.mlp import build as mlp

SLOWDOWN = {slowdown}


def build(device="cpu", slowdown=SLOWDOWN, **params):
    return mlp(device, slowdown=slowdown, **params)
"""
COMMANDS = ("gate", "check", "check-ab")
TERM_GRACE_S = 15.0
"""How long a perfgate command gets after SIGTERM (it stops its own workers) before SIGKILL."""
TARGETS: dict[str, dict[str, float]] = {
    "0.05": {"quiet": 0.5},
    "0.1": {"quiet": 0.9, "hog": 0.8},
    "0.3": {"quiet": 0.9, "hog": 0.7},
    "1": {"quiet": 0.9, "hog": 0.9},
}
"""Slowdown -> state -> share of trials that must end in a regression verdict."""
STATES = ("quiet", "hog")
HOG_CODE = "while True: pass"


def out(line: str = "") -> None:
    print(line, flush=True)


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def fmt(value: float | None, spec: str = "+.1f") -> str:
    return "-" if value is None else format(value, spec)


def slowdown_key(s: float) -> str:
    return format(s, "g")


# --- stopping cleanly ----------------------------------------------------------------------

_stopping = False


def _raise(signum: int, frame: FrameType | None) -> None:
    """SIGTERM/SIGHUP -> SystemExit, SIGINT -> KeyboardInterrupt, so every ``finally`` runs;
    a second signal while that cleanup runs is ignored."""
    global _stopping
    if _stopping:
        return
    _stopping = True
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def install_handlers() -> None:
    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, _raise)


def stop_group(proc: subprocess.Popen[str], grace_s: float) -> None:
    """Stop ``proc`` (a session leader) and its process group: SIGTERM, then SIGKILL."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _die_with_parent() -> None:
    """In a hog process (Linux): be killed when the bench dies, even by SIGKILL."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@contextlib.contextmanager
def hog(on: bool) -> Iterator[list[int]]:
    """``os.cpu_count()`` busy processes while inside (none when ``on`` is false)."""
    procs: list[subprocess.Popen[str]] = []
    try:
        if on:
            for _ in range(os.cpu_count() or 1):
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-c", HOG_CODE],
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                        preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                        text=True,
                    )
                )
            progress(
                f"hog: {len(procs)} busy processes, pids {' '.join(str(p.pid) for p in procs)}"
            )
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.terminate()
        deadline = time.monotonic() + 5.0
        for p in procs:
            try:
                p.wait(timeout=max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if procs:
            progress(f"hog: stopped {len(procs)} processes")


# --- running perfgate ------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    args: tuple[str, ...]
    rc: int | None
    """Exit status; None when it ran past ``--timeout`` and was killed."""
    stdout: str
    stderr: str
    seconds: float

    def json(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.stdout)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def describe(self) -> str:
        what = "timed out" if self.rc is None else f"exit {self.rc}"
        tail = "\n".join(self.stderr.strip().splitlines()[-15:])
        cmd = shlex.join(["python", "-m", "perfgate", *self.args])
        return f"{cmd}: {what} after {self.seconds:.0f} s\n{tail}"


def bench_env() -> dict[str, str]:
    """The caller's environment, without PERFGATE_DATABASE_URL (the store is the default one
    under the trial's directory), with this checkout first on the module path."""
    env = {k: v for k, v in os.environ.items() if k != "PERFGATE_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def perfgate(args: Sequence[str], cwd: Path, timeout: float) -> Result:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfgate", *args],
        cwd=cwd,
        env=bench_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        stop_group(proc, TERM_GRACE_S)
        stdout, stderr = proc.communicate()
        rc = None
    except BaseException:
        stop_group(proc, TERM_GRACE_S)
        raise
    return Result(tuple(args), rc, stdout, stderr, time.perf_counter() - t0)


def run_args(branch: str, slowdown: str | None) -> list[str]:
    args = ["run", "--workload", "mlp", "--repeats", str(REPEATS), "--branch", branch]
    return args + (["--param", f"slowdown={slowdown}"] if slowdown is not None else [])


def run_json_args(branch: str, slowdown: str | None) -> list[str]:
    return [*run_args(branch, slowdown), "--json"]


def run_centres(result: Result) -> dict[str, float]:
    """The centre of each metric of ``perfgate run --json``'s (first) run."""
    data = result.json() or {}
    runs = data.get("runs") or [{}]
    measurements = runs[0].get("measurements") or {}
    return {
        m: float(measurements[m]["centre"])
        for m in METRICS
        if isinstance(measurements.get(m), dict) and measurements[m].get("centre") is not None
    }


# --- one trial ---------------------------------------------------------------------------------


@dataclass
class Row:
    state: str
    trial: int
    slowdown: float
    command: str
    exit_code: int | None = None
    """The gate's (or check's) exit status; None when it did not run or timed out."""
    verdict: str | None = None
    failed: bool | None = None
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per metric the gate judged: verdict, change_pct, ci_low_pct, ci_high_pct, mde_pct,
    reason."""
    run_change_pct: dict[str, float] = field(default_factory=dict)
    """Per metric: the feature run's centre against the median of the main runs' (from
    ``perfgate run --json``; not with ``--command check``)."""
    notes: list[str] = field(default_factory=list)
    pairs: int | None = None
    """``check-ab``: the pairs the deciding paired comparison judged (3, or 3 + extra)."""
    remeasured: str = ""
    """``check`` and ``check-ab``: its ``check: ...`` line (what it re-measured)."""
    regressed: list[str] = field(default_factory=list)
    """The deciding metrics the gate called a regression (``paired:step_cpu_ms``, ...)."""
    seconds: float = 0.0
    """The feature side: run + gate (or check)."""
    trial_seconds: float = 0.0
    """The whole trial: main runs and every slowdown's feature side."""
    error: str | None = None


class StrictError(Exception):
    pass


def judged(row: Row, result: Result) -> None:
    """Fill ``row`` from a gate (or check) result; an exit status other than 0/1 is an error."""
    row.exit_code = result.rc
    data = result.json()
    if result.rc not in (0, 1):
        row.error = result.describe()
        return
    if data is None:
        row.error = f"{result.describe()}\n(no JSON on stdout)"
        return
    row.verdict = str(data.get("verdict"))
    row.failed = bool(data.get("failed"))
    row.notes = [str(n) for n in data.get("notes") or []]
    row.remeasured = next(
        (line.split("perfgate: ", 1)[1] for line in result.stderr.splitlines()
         if line.startswith("perfgate: check: ")),
        "",
    )  # fmt: skip
    comparisons = data.get("comparisons") or []
    row.regressed = sorted(
        {
            f"{c.get('method')}:{c.get('metric')}"
            for c in comparisons
            if c.get("decides") and c.get("verdict") == "regression"
        }
    )
    # ab mode: the paired comparisons decide; the history ones (no baseline) stand beside
    paired = [c for c in comparisons if c.get("method") == "paired"]
    for c in paired or comparisons:
        metric = c.get("metric")
        if metric in METRICS and metric not in row.metrics:
            row.metrics[metric] = {
                k: c.get(k)
                for k in (
                    "verdict",
                    "change_pct",
                    "ci_low_pct",
                    "ci_high_pct",
                    "mde_pct",
                    "min_effect_pct",
                    "reason",
                )
            }
    found = re.search(r"\((\d+) pairs", str(row.metrics.get("step_cpu_ms", {}).get("reason")))
    if paired and found:
        row.pairs = int(found.group(1))


def finished(row: Row, done: list[Row], sink: list[Row], *, strict: bool) -> None:
    """A slowdown's row is done: kept for the trial's time and handed to ``sink``; an error
    is printed, and stops the run under ``--strict``."""
    done.append(row)
    sink.append(row)
    if row.error is not None:
        progress(f"  error: {row.error}")
        if strict:
            raise StrictError(row.error)


def trial(
    state: str,
    k: int,
    n: int,
    slowdowns: Sequence[float],
    sink: list[Row],
    *,
    command: str,
    timeout: float,
    strict: bool,
) -> None:
    """One trial; each slowdown's row goes into ``sink`` once it is done (so an interrupted
    or ``--strict``-stopped trial leaves the rows it finished)."""
    t0 = time.perf_counter()
    done: list[Row] = []

    def finish(row: Row) -> None:
        finished(row, done, sink, strict=strict)

    try:
        with tempfile.TemporaryDirectory(prefix="perfgate-demo-") as tmp:
            cwd = Path(tmp)
            main: list[dict[str, float]] = []
            for i in range(BASELINE_RUNS):
                r = perfgate(run_json_args("main", None), cwd, timeout)
                progress(
                    f"{state} trial {k}/{n} main run {i + 1}/{BASELINE_RUNS}: ({r.seconds:.0f} s)"
                )
                if r.rc != 0:
                    for slowdown in slowdowns:
                        error = f"main run: {r.describe()}"
                        finish(Row(state, k, slowdown, command, error=error))
                    return
                main.append(run_centres(r))
            for slowdown in slowdowns:
                row = Row(state, k, slowdown, command)
                s = slowdown_key(slowdown)
                branch = f"feat-{s}"
                t1 = time.perf_counter()
                if command == "check":
                    check = ["check", *run_args(branch, s)[1:], "--against", "main", "--json"]
                    judged(row, perfgate(check, cwd, timeout))
                else:
                    r = perfgate(run_json_args(branch, s), cwd, timeout)
                    if r.rc != 0:
                        row.error = f"feature run: {r.describe()}"
                    else:
                        for m, v in run_centres(r).items():
                            base = median([c[m] for c in main if m in c])
                            if base:
                                row.run_change_pct[m] = 100.0 * (v / base - 1.0)
                        gate = ["gate", "--branch", branch, "--against", "main", "--json"]
                        judged(row, perfgate(gate, cwd, timeout))
                row.seconds = time.perf_counter() - t1
                what = row.verdict if row.error is None else "error"
                progress(
                    f"{state} trial {k}/{n} slowdown {s}: {what} "
                    f"(exit {row.exit_code}, {row.seconds:.0f} s)"
                )
                finish(row)
    finally:
        for row in done:
            row.trial_seconds = time.perf_counter() - t0


def git(cwd: Path, *args: str) -> None:
    """A git command in a trial's repository (a fixed identity, no user config needed)."""
    done = subprocess.run(
        ["git", "-c", "user.email=demo@perfgate", "-c", "user.name=demo", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {shlex.join(args)}: {done.stderr.strip()}")


def ab_repo(cwd: Path) -> None:
    """The trial's repository: the suite and its entry (no slowdown) committed on main."""
    git(cwd, "init", "-q", "-b", "main")
    (cwd / ".gitignore").write_text(".perfgate/\n")
    (cwd / "perfgate.toml").write_text(AB_SUITE)
    (cwd / "bench_mlp.py").write_text(AB_ENTRY.format(slowdown=0.0))
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "-m", "main: the mlp benchmark")


def ab_branch(cwd: Path, branch: str, slowdown: float) -> None:
    """``branch`` off main with one commit setting the entry's slowdown, checked out."""
    git(cwd, "checkout", "-q", "-b", branch, "main")
    (cwd / "bench_mlp.py").write_text(AB_ENTRY.format(slowdown=float(slowdown)))
    git(cwd, "commit", "-q", "--allow-empty", "-am", f"slowdown {slowdown_key(slowdown)}")


def check_ab_args(budget: str) -> list[str]:
    return ["check", "--mode", "ab", "--against", "main", "--budget", budget, "--json"]


def trial_ab(
    state: str,
    k: int,
    n: int,
    slowdowns: Sequence[float],
    sink: list[Row],
    *,
    budget: str,
    timeout: float,
    strict: bool,
) -> None:
    """One ``check-ab`` trial: a fresh repository, then per slowdown its branch and one
    ``check --mode ab`` (rows into ``sink`` as they are done, as :func:`trial`)."""
    t0 = time.perf_counter()
    done: list[Row] = []
    try:
        with tempfile.TemporaryDirectory(prefix="perfgate-demo-ab-") as tmp:
            cwd = Path(tmp)
            ab_repo(cwd)
            for slowdown in slowdowns:
                row = Row(state, k, slowdown, "check-ab")
                s = slowdown_key(slowdown)
                t1 = time.perf_counter()
                try:
                    ab_branch(cwd, f"feat-{s}", slowdown)
                except RuntimeError as exc:
                    row.error = str(exc)
                else:
                    judged(row, perfgate(check_ab_args(budget), cwd, timeout))
                row.seconds = time.perf_counter() - t1
                what = row.verdict if row.error is None else "error"
                progress(
                    f"{state} trial {k}/{n} slowdown {s}: {what} (exit {row.exit_code}, "
                    f"{row.pairs or '?'} pairs, {row.seconds:.0f} s)"
                )
                finished(row, done, sink, strict=strict)
    finally:
        for row in done:
            row.trial_seconds = time.perf_counter() - t0


# --- the report --------------------------------------------------------------------------------


def target(state: str, slowdown: float, rows: Sequence[Row], trials: int) -> str:
    s = slowdown_key(slowdown)
    errors = sum(r.error is not None for r in rows)
    tail = f" ({errors} errored)" if errors else ""
    if slowdown == 0:
        failures = sum(r.exit_code == 1 for r in rows if r.error is None)
        ok = failures == 0 and errors == 0
        return f"A/A: gate failures {failures}/{trials}, target 0: {_met(ok)}{tail}"
    share = TARGETS.get(s, {}).get(state)
    regressions = sum(r.verdict == "regression" for r in rows)
    if share is None:
        return f"regressions {regressions}/{trials}: no target for slowdown {s} {state}"
    need = math.ceil(share * trials - 1e-9)
    return (
        f"regressions {regressions}/{trials}, target >= {need}/{trials}: "
        f"{_met(regressions >= need)}{tail}"
    )


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


COLUMNS = (
    ("state", 6),
    ("slowdown", 8),
    ("trials", 6),
    ("regr", 5),
    ("fail", 5),
    ("inconc", 6),
    ("unch", 5),
    ("other", 5),
    ("err", 4),
    ("gate d% time", 12),
    ("cpu", 6),
    ("run d% time", 11),
    ("cpu", 6),
    ("MDE% time", 9),
    ("cpu", 5),
    ("pairs", 5),
    ("feat s", 6),
    ("trial s", 7),
)


def _line(cells: Sequence[str]) -> str:
    return " ".join(
        c.ljust(w) if i == 0 else c.rjust(w)
        for i, (c, (_, w)) in enumerate(zip(cells, COLUMNS, strict=True))
    )


def _gate_median(rows: Sequence[Row], metric: str, key: str) -> float | None:
    values = [r.metrics.get(metric, {}).get(key) for r in rows]
    return median([float(v) for v in values if v is not None])


def _run_median(rows: Sequence[Row], metric: str) -> float | None:
    return median([r.run_change_pct[metric] for r in rows if metric in r.run_change_pct])


def oracle_ratio(row: Row, metric: str = "step_cpu_ms") -> tuple[float, float] | None:
    """``check-ab``: the stated MDE of ``metric`` against a fixed-sample t test's on the same
    pairs (issue 38: within 1.3x): the pairs' standard error from the 95% interval the check
    printed (t with n - 1 degrees of freedom), then the change that test at alpha 0.01
    catches with 80% power, and the same at least the minimum effect (a change below it is
    never a regression). None where the row has no interval, MDE or pair count."""
    from scipy import stats

    m = row.metrics.get(metric, {})
    lo, hi, mde, n = m.get("ci_low_pct"), m.get("ci_high_pct"), m.get("mde_pct"), row.pairs
    if lo is None or hi is None or mde is None or n is None or n < 3:
        return None
    dof = n - 1
    se = (math.log1p(hi / 100.0) - math.log1p(lo / 100.0)) / (2.0 * stats.t.ppf(0.975, dof))
    crit, power = stats.t.ppf(1.0 - 0.01 / 2.0, dof) * se, stats.t.ppf(0.8, dof) * se
    floor = math.log1p(float(m.get("min_effect_pct") or 3.0) / 100.0)
    plain, floored = (100.0 * math.expm1(c + power) for c in (crit, max(crit, floor)))
    return float(mde) / plain, float(mde) / floored


def report(
    rows: Sequence[Row], states: Sequence[str], slowdowns: Sequence[float], trials: int
) -> None:
    out("d% = median change of the centre (gate: as judged; run: feature run against the")
    out("median of the 3 main runs, from `perfgate run --json`); MDE = median of the gate's")
    out("minimum detectable effect at 80% power; pairs = median pairs judged (check-ab);")
    out("feat s = run + gate (or the check); - = not there")
    head = _line([name for name, _ in COLUMNS])
    out(head)
    out("-" * len(head))
    targets: list[str] = []
    for state in states:
        for s in slowdowns:
            mine = [r for r in rows if r.state == state and r.slowdown == s]
            ok = [r for r in mine if r.error is None]
            verdicts = [r.verdict for r in ok]
            known = ("regression", "inconclusive", "unchanged")
            out(
                _line(
                    [
                        state,
                        slowdown_key(s),
                        str(len(mine)),
                        str(verdicts.count("regression")),
                        str(sum(r.exit_code == 1 for r in ok)),
                        str(verdicts.count("inconclusive")),
                        str(verdicts.count("unchanged")),
                        str(sum(v not in known for v in verdicts)),
                        str(len(mine) - len(ok)),
                        fmt(_gate_median(ok, "step_time_ms", "change_pct")),
                        fmt(_gate_median(ok, "step_cpu_ms", "change_pct")),
                        fmt(_run_median(ok, "step_time_ms")),
                        fmt(_run_median(ok, "step_cpu_ms")),
                        fmt(_gate_median(ok, "step_time_ms", "mde_pct"), ".1f"),
                        fmt(_gate_median(ok, "step_cpu_ms", "mde_pct"), ".1f"),
                        fmt(median([r.pairs for r in ok if r.pairs is not None]), ".0f"),
                        fmt(median([r.seconds for r in ok]), ".0f"),
                        fmt(median([r.trial_seconds for r in mine]), ".0f"),
                    ]
                )
            )
            what = target(state, s, mine, trials)
            targets.append(f"  {state:<6} slowdown {slowdown_key(s):<4} {what}")
    out("")
    out("targets:")
    for line in targets:
        out(line)
    decided = []
    for state in states:
        for s in slowdowns:
            counts: dict[str, int] = {}
            for r in rows:
                if r.state == state and r.slowdown == s:
                    for m in r.regressed:
                        counts[m] = counts.get(m, 0) + 1
            if counts:
                what = ", ".join(f"{m} {n}" for m, n in sorted(counts.items()))
                decided.append(f"  {state:<6} slowdown {slowdown_key(s):<4} {what}")
    if decided:
        out("")
        out("regressions called on (method:metric trials):")
        for line in decided:
            out(line)
    ratios = [(r, oracle_ratio(r)) for r in rows if r.command == "check-ab"]
    if any(x is not None for _, x in ratios):
        out("")
        out("stated MDE (step_cpu_ms) against a t test at alpha 0.01 on the same pairs")
        out("(target <= 1.3x): plain, and with the minimum effect as its floor")
        for state in states:
            for s in slowdowns:
                got = [x for r, x in ratios if x and r.state == state and r.slowdown == s]
                if got:
                    plain = ", ".join(f"{a:.2f}" for a, _ in got)
                    floored = ", ".join(f"{b:.2f}" for _, b in got)
                    out(f"  {state:<6} slowdown {slowdown_key(s):<4} {plain}; floored {floored}")
    notes = sorted({n for r in rows for n in r.notes})
    if notes:
        out("")
        out("gate notes seen:")
        for n in notes:
            out(f"  {n}")


def report_file(path: Path) -> int:
    """The tables of a ``--json`` file (e.g. with the MDE-against-oracle lines added since)."""
    data = json.loads(path.read_text())
    rows = [Row(**r) for r in data["rows"]]
    states = list(dict.fromkeys(r.state for r in rows))
    slowdowns = sorted({r.slowdown for r in rows})
    out(f"from {path}: {data.get('command')}")
    report(rows, states, slowdowns, int(data.get("trials") or 1))
    return 0


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{platform.machine()} {line.split(':', 1)[1].strip()}"
    return platform.machine() or "?"


def perfgate_version() -> str:
    try:
        from importlib.metadata import version

        return version("perfgate")
    except Exception:  # noqa: BLE001 - only for the header
        return "?"


def hog_only(seconds: float | None) -> int:
    try:
        with hog(True):
            if seconds is None:
                while True:
                    time.sleep(3600)
            time.sleep(seconds)
    except KeyboardInterrupt:
        return 130
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--states", default=",".join(STATES), help="comma-separated: quiet, hog")
    parser.add_argument("--trials", type=int, default=10, help="trials per state [10]")
    parser.add_argument(
        "--slowdowns",
        default=None,
        help="comma-separated [0,0.3,1.0; check-ab: 0,0.05,0.1 (issue 38's targets)]",
    )
    parser.add_argument(
        "--command",
        choices=COMMANDS,
        default="gate",
        help="feature side: run + gate, one perfgate check, or check-ab: a git repository "
        "per trial, a branch per slowdown, perfgate check --mode ab [gate]",
    )
    parser.add_argument(
        "--budget",
        default=AB_BUDGET,
        help=f"check-ab: check's --budget [{AB_BUDGET}, action.yml's default]",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds one perfgate command may take [1800]"
    )
    parser.add_argument("--strict", action="store_true", help="stop at the first failed command")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write every trial's row here")
    parser.add_argument(
        "--report", type=Path, metavar="PATH", help="print the tables of a --json file, run nothing"
    )
    parser.add_argument("--hog-only", action="store_true", help="only run the hog, then exit")
    parser.add_argument("--seconds", type=float, help="with --hog-only: how long [until stopped]")
    args = parser.parse_args(argv)
    install_handlers()
    if args.hog_only:
        return hog_only(args.seconds)
    if args.report is not None:
        return report_file(args.report)

    states = [s.strip() for s in args.states.split(",") if s.strip()]
    bad = [s for s in states if s not in STATES]
    if bad or not states:
        parser.error(f"--states: unknown {bad}; choose from {', '.join(STATES)}")
    if args.slowdowns is None:
        args.slowdowns = "0,0.05,0.1" if args.command == "check-ab" else "0,0.3,1.0"
    try:
        slowdowns = [float(s) for s in args.slowdowns.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--slowdowns: not numbers: {args.slowdowns}")
    if not slowdowns or any(s < 0 for s in slowdowns) or args.trials < 1:
        parser.error("--slowdowns must be >= 0 and --trials >= 1")

    cmd = shlex.join(["python", "bench/demo.py", *(sys.argv[1:] if argv is None else argv)])
    if args.command == "check-ab":
        out(
            "bench/demo.py: the PR job in ab mode (a git repository per trial, main with the "
            "mlp suite, per slowdown a branch changing bench_mlp.py and "
            f"`perfgate {shlex.join(check_ab_args(args.budget))}`), {args.trials} trials per "
            "state, fresh store per trial"
        )
    else:
        out(
            f"bench/demo.py: the README scenario ({BASELINE_RUNS} x `perfgate run --workload "
            f"mlp --repeats {REPEATS} --branch main`, then per slowdown a feature run and "
            f"`perfgate {args.command}`), {args.trials} trials per state, fresh store per trial"
        )
    out(
        f"machine: {cpu_model()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, perfgate {perfgate_version()}"
    )
    out(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    started = time.perf_counter()
    rows: list[Row] = []
    status = 0
    try:
        for state in states:
            t_state = time.perf_counter()
            with hog(state == "hog"):
                for k in range(1, args.trials + 1):
                    if args.command == "check-ab":
                        trial_ab(
                            state,
                            k,
                            args.trials,
                            slowdowns,
                            rows,
                            budget=args.budget,
                            timeout=args.timeout,
                            strict=args.strict,
                        )
                        continue
                    trial(
                        state,
                        k,
                        args.trials,
                        slowdowns,
                        rows,
                        command=args.command,
                        timeout=args.timeout,
                        strict=args.strict,
                    )
            progress(f"{state}: {time.perf_counter() - t_state:.0f} s")
    except StrictError:
        status = 1
    except KeyboardInterrupt:
        status = 130
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 1
    if status:
        out(f"stopped early (status {status}); results so far:")
    out("")
    report(rows, [s for s in states if any(r.state == s for r in rows)], slowdowns, args.trials)
    out("")
    out(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    out(f"total wall time {time.perf_counter() - started:.0f} s")
    out(f"command: {cmd}")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "command": cmd,
                    "cpus": os.cpu_count(),
                    "trials": args.trials,
                    "budget": args.budget if args.command == "check-ab" else None,
                    "rows": [asdict(r) for r in rows],
                },
                indent=2,
            )
            + "\n"
        )
        out(f"rows written to {args.json}")
    if status == 0 and any(r.error is not None for r in rows):
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
