"""Runs benchmarks: one fresh worker process per repeat, so process-level noise is sampled.

The parent never imports torch; workers do (see :mod:`perfgate.runner.worker`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from subprocess import DEVNULL
from typing import Any

from perfgate.errors import ConfigError, RunnerError, require
from perfgate.models import BenchmarkSpec, LaunchOptions, ParamValue, ProfileSummary
from perfgate.runner.lifecycle import interruptible, kill_group, work_dir, worker_env
from perfgate.runner.watchdog import fixed_timeout, timeout_unset, wait_for_worker

#: Called with one line after each finished repeat (or A/B pair); the CLI prints it on stderr.
ProgressFn = Callable[[str], None]


def repeat_progress(name: str, what: str, done: int, total: int, value: str) -> str:
    """The progress line of a finished repeat or pair (``value``: :func:`repeat_value`)."""
    left = total - done
    return f"{name}: {what} {done}/{total}: {value}; " + (f"{left} left" if left else "done")


def repeat_value(result: RepeatResult) -> str:
    """A finished repeat in a few words: the medians of its timed steps' clocks, in ms."""
    from statistics import median

    clocks = (("step", result.step_ms), ("cpu", result.cpu_ms), ("device", result.device_ms))
    return ", ".join(f"{name} {median(ms):.4g} ms" for name, ms in clocks if ms) or "no timed step"


NO_OPERATORS = "profiled window: no operator events, so no op table"
"""Said after a repeat whose profiled window ran no torch operator (a step of plain Python):
the profiler's trace is then not written, and the run is recorded without a profile."""


def _unprofiled(result: RepeatResult) -> bool:
    """Whether a repeat asked to profile came back without a profile of any rank."""
    if result.ranks:
        return all(rank.profile is None for rank in result.ranks)
    return result.trace_path is None


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_STEM_MAX = 100  # well under a file name's 255 bytes, with the suffixes added to it


def trace_stem(name: str) -> str:
    """The file-name stem of ``name``'s trace: ``name`` itself when it is a plain file name
    (ASCII letters, digits, ``_``, ``.``, ``-``; not starting with ``.`` or ``-``; short),
    else its plain characters with a hash of the whole name, so that the file always lies
    in the traces directory and two names never share it ("a/b" -> ``a_b-1c3f5a7e``)."""
    plain = _UNSAFE.sub("_", name).lstrip(".-")[:_STEM_MAX]
    if plain == name:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{plain or 'benchmark'}-{digest}"


def check_environment() -> None:
    """UsageError now, not after measuring, for a bad ``PERFGATE_MAX_DECOMPRESSED_MB`` (the
    cap on reading the profiled window): not a positive whole number."""
    from perfgate.parsers.decompress import max_decompressed_mb

    max_decompressed_mb()


@contextlib.contextmanager
def trace_dir_scope(trace_dir: Path | None) -> Iterator[None]:
    """Within: the run may create ``trace_dir`` (and its parents). Afterwards no directory
    it created is left empty, and when the run raised, a ``trace_dir`` it created is removed
    with what it holds: a benchmark that fails records nothing and leaves nothing."""
    created: list[Path] = []  # trace_dir and its parents that do not exist yet, deepest first
    path = trace_dir
    while path is not None and not path.exists() and path != path.parent:
        created.append(path)
        path = path.parent
    try:
        yield
    except BaseException:
        if created:
            shutil.rmtree(created[0], ignore_errors=True)
        raise
    finally:
        if created and created[0].is_dir():
            for folder, _, _ in sorted(os.walk(created[0]), reverse=True):  # deepest first
                with contextlib.suppress(OSError):  # not empty: kept
                    os.rmdir(folder)
        for parent in created[1:]:
            with contextlib.suppress(OSError):
                parent.rmdir()


@dataclass(frozen=True)
class ProcessSetup:
    """How a worker process is set up around its timed steps: the noise-floor knobs that
    ``bench/floor.py`` measures (its table in ``bench/README.md`` chose the defaults).

    Attributes:
        fixed_layout: address-space randomisation off in the worker (Linux
            ``personality(ADDR_NO_RANDOMIZE)``, as ``setarch -R``; where refused the worker
            says so in ``RepeatResult.address_layout``). Off by default: two trees (an A/B
            pair's base and head, two commits) would each get one fixed layout, a bias no
            number of pairs removes (A/A pairs beside a CPU hog read the head 14-18% faster
            in every pair of 6 of 9 checks), while a layout drawn per process is noise the
            pairs' spread measures (Mytkowicz et al. 2009).
        gc_off: no Python garbage collection inside the timed loop (a collection before it).
        pin_cpu: the one CPU the worker (and its threads) may run on; None: any.
    """

    fixed_layout: bool = False
    gc_off: bool = False
    pin_cpu: int | None = None

    def request(self) -> dict[str, Any]:
        return asdict(self)


# ``threads`` (the runner's parameter, not the entry's): torch's intra-op threads. CPU
# defaults to 1: on shared runners multi-threaded step times are bimodal (a preempted core
# stalls every barrier); 0 keeps torch's default.
DEFAULT_CPU_THREADS = 1


@dataclass(frozen=True)
class RankResult:
    """What one rank of a multi-device (torchrun) job measured."""

    rank: int
    step_ms: tuple[float, ...]
    peak_memory_bytes: int
    profile: ProfileSummary | None = None
    host: str = ""
    wait_ms: tuple[float, ...] = ()  # per timed step, blocked in collectives (if reported)
    memory_capacity_bytes: int = 0  # what the peak is a share of (its device's); 0: unknown

    @property
    def own_ms(self) -> tuple[float, ...]:
        """Per timed step, this rank's own work: its step less its wait in collectives."""
        if len(self.wait_ms) != len(self.step_ms):
            return self.step_ms
        return tuple(max(s - w, 0.0) for s, w in zip(self.step_ms, self.wait_ms, strict=True))


@dataclass(frozen=True)
class RepeatResult:
    """What one worker process (or one torchrun job) measured. For a job, ``step_ms`` is
    step by step the slowest rank's, and ``ranks`` holds every rank's samples and profile."""

    step_ms: tuple[float, ...]
    batch_size: int
    params: Mapping[str, ParamValue]
    peak_memory_bytes: int
    env: Mapping[str, Any]
    trace_path: str | None
    ranks: tuple[RankResult, ...] = ()
    world_size: int = 1
    cpu_ms: tuple[float, ...] = ()  # per timed step on the CPU, its CPU time (``cpu_clock``)
    cpu_clock: str = ""  # "thread" (one intra-op thread), "process" (all threads) or ""
    device_ms: tuple[float, ...] = ()  # per timed step on an accelerator, between two events
    memory_capacity_bytes: int = 0
    """What ``peak_memory_bytes`` is a share of: the device's memory (CUDA, NPU), the host's
    RAM or container limit (CPU); for a job, the largest peak's rank's. 0 when not known."""
    loss: float | None = None  # the last step's (a job: rank 0's), for the numerics guard
    address_layout: str = ""  # "fixed", "randomized" (ProcessSetup) or "" where not known

    @property
    def peak_memory_pct(self) -> float | None:
        """The peak as a % of the capacity; None when the capacity is not known."""
        if self.memory_capacity_bytes <= 0:
            return None
        return self.peak_memory_bytes * 100.0 / self.memory_capacity_bytes


@dataclass(frozen=True)
class BenchmarkOutcome:
    spec: BenchmarkSpec
    threads: int
    repeats: tuple[RepeatResult, ...]
    started_at: datetime
    finished_at: datetime

    @property
    def trace_path(self) -> str | None:
        return next((rep.trace_path for rep in self.repeats if rep.trace_path), None)


def split_threads(spec: BenchmarkSpec) -> tuple[int, dict[str, ParamValue]]:
    """Separate the runner's ``threads`` parameter from the entry's own parameters."""
    params = dict(spec.params)
    raw = params.pop("threads", DEFAULT_CPU_THREADS if spec.device == "cpu" else 0)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise ConfigError(f"benchmark {spec.name}: 'threads' must be an integer >= 0, got {raw!r}")
    return raw, params


def resolve_target(spec: BenchmarkSpec) -> str:
    """The ``module:function`` a worker calls."""
    if spec.entry:
        return spec.entry
    from perfgate.workloads import BUILTIN

    if spec.workload not in BUILTIN:
        raise ConfigError(
            f"benchmark {spec.name}: unknown workload {spec.workload!r} "
            f"(built-in: {', '.join(BUILTIN)})"
        )
    return BUILTIN[spec.workload]


def _request(
    spec: BenchmarkSpec,
    params: Mapping[str, ParamValue],
    threads: int,
    sys_path: list[str],
    *,
    profile: bool,
) -> dict[str, Any]:
    """What a worker process (one repeat, or one rank of a torchrun job) is asked to do."""
    return {
        "target": resolve_target(spec),
        "kind": spec.kind,
        "device": spec.device,
        "params": dict(params),
        "threads": threads,
        "seed": 1234,
        "warmup": spec.warmup,
        "measured": spec.measured,
        "profiled": spec.profiled if profile else 0,
        "sys_path": sys_path,
    }


def _tail(path: Path, size: int = 65536) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(max(path.stat().st_size - size, 0))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def need_torch() -> None:
    """MissingExtra unless torch is installed: looked up, not imported, so a missing torch is
    one line and exit 2, not a worker dying on each repeat."""
    require("torch", extra="torch", feature="perfgate run", load=False)


def run_repeat(
    spec: BenchmarkSpec,
    repeat: int,
    *,
    threads: int,
    params: Mapping[str, ParamValue],
    trace_path: Path | None,
    workdir: Path,
    sys_path: list[str],
    timeout_s: float,
    cwd: Path | None = None,
    label: str = "",
    setup: ProcessSetup | None = None,
) -> RepeatResult:
    """One worker process: one repeat of ``spec`` (see :func:`run_benchmark`), stopped after
    ``timeout_s`` and, where the spec's timeout was not set, once its warm-up says a step
    hangs (:mod:`perfgate.runner.watchdog`)."""
    need_torch()
    tag = f"{label}-{repeat}" if label else str(repeat)
    result_path = workdir / f"result-{tag}.json"
    progress = workdir / f"progress-{tag}.txt"
    request = {
        **_request(spec, params, threads, sys_path, profile=trace_path is not None),
        **(setup or ProcessSetup()).request(),
        "trace_path": None if trace_path is None else str(trace_path),
        "result_path": str(result_path),
        "progress_path": str(progress),
    }
    request_path = workdir / f"request-{tag}.json"
    request_path.write_text(json.dumps(request), encoding="utf-8")
    # worker_env: the worker dies with perfgate, even a SIGKILLed one
    env = {"PYTHONHASHSEED": "0", **os.environ, **worker_env(workdir)}
    named = f"{spec.name} ({label})" if label else spec.name
    where = f"benchmark {named}, repeat {repeat + 1}/{spec.repeats}"
    log_path = workdir / f"stderr-{tag}.log"
    with interruptible(), log_path.open("wb") as log:
        cmd = [sys.executable, "-m", "perfgate.runner.worker", str(request_path)]
        proc = subprocess.Popen(
            cmd, stdin=DEVNULL, stdout=DEVNULL, stderr=log, env=env, cwd=cwd, start_new_session=True
        )
        try:
            returncode = wait_for_worker(
                proc,
                progress_path=progress,
                timeout_s=timeout_s,
                measured=spec.measured,
                where=where,
                derive=timeout_unset(spec),
            )
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise RunnerError(
                f"{where}: the worker did not finish within {timeout_s:g} s and was killed "
                "(raise the limit with --timeout SECONDS or the benchmark's timeout key)"
            ) from None
        except BaseException:
            kill_group(proc)
            raise
    if not result_path.exists():
        lines = _tail(log_path).strip().splitlines()
        tail = f"; last output: {lines[-1]}" if lines else ""
        raise RunnerError(f"{where}: worker exited with code {returncode}{tail}")
    result = json.loads(result_path.read_text(encoding="utf-8"))
    if not result["ok"]:
        if result["kind"] == "config":
            raise ConfigError(f"{where}: {result['message']}")
        raise RunnerError(f"{where}: the step raised {result['message']}")
    return RepeatResult(
        step_ms=_ms(result["step_ns"]),
        batch_size=int(result["batch_size"]),
        params=dict(result["params"]),
        peak_memory_bytes=int(result["peak_memory_bytes"]),
        env=dict(result["env"]),
        trace_path=result["trace_path"],
        cpu_ms=_ms(result.get("cpu_ns", ())),
        cpu_clock=str(result.get("cpu_clock", "")),
        device_ms=tuple(float(ms) for ms in result.get("device_ms", ())),
        memory_capacity_bytes=int(result.get("memory_capacity_bytes") or 0),
        loss=result["loss"],
        address_layout=str(result.get("address_layout", "")),
    )


def _ms(ns: Iterable[int]) -> tuple[float, ...]:
    return tuple(n / 1e6 for n in ns)


def job_result(result: Mapping[str, Any]) -> RepeatResult:
    """A torchrun job's result document (rank 0's) as one repeat: the job's step time is,
    step by step, the slowest rank's (the ranks' steps run concurrently, coupled by their
    collectives; see :func:`perfgate.runner.distributed.timed_steps`)."""
    ranks = tuple(sorted(map(_rank_result, result["ranks"]), key=lambda r: r.rank))
    world = int(result["world_size"])
    largest = max(ranks, key=lambda r: r.peak_memory_bytes)
    return RepeatResult(
        step_ms=tuple(map(max, zip(*(r.step_ms for r in ranks), strict=True))),
        batch_size=int(result["batch_size"]),
        params=dict(result["params"]),
        peak_memory_bytes=largest.peak_memory_bytes,
        env={**result["env"], "device_count": world},
        trace_path=None,
        ranks=ranks,
        world_size=world,
        memory_capacity_bytes=largest.memory_capacity_bytes,
        loss=result["loss"],
    )


def _rank_result(r: Mapping[str, Any]) -> RankResult:
    profile = None if r["profile"] is None else ProfileSummary.from_dict(r["profile"])
    return RankResult(
        rank=int(r["rank"]),
        step_ms=_ms(r["step_ns"]),
        peak_memory_bytes=int(r["peak_memory_bytes"]),
        profile=profile,
        host=str(r.get("host", "")),
        wait_ms=_ms(r.get("wait_ns", ())),
        memory_capacity_bytes=int(r.get("memory_capacity_bytes") or 0),
    )


def run_benchmark(
    spec: BenchmarkSpec,
    *,
    trace_dir: Path | None,
    progress: ProgressFn | None = None,
    sys_path: list[str] | None = None,
    timeout_s: float | None = None,
    launch: LaunchOptions | None = None,
) -> BenchmarkOutcome:
    """Run ``spec.repeats`` worker processes one after the other; profile in the first only.

    Args:
        trace_dir: where the profiled window's Chrome trace goes (named by
            :func:`trace_stem`, always inside it; none where the window ran no operator);
            ``None`` skips profiling. Left behind only when it holds a trace.
        progress: called with a short line after each repeat.
        sys_path: directories the worker puts first on ``sys.path`` (for user entries).
        timeout_s: the most one worker (or torchrun job) may take, a fixed limit; None: the
            spec's (when unset, a worker also stops once its warm-up says a step hangs).
        launch: how a multi-device spec's torchrun job (one per repeat, every rank profiled
            in the first: :mod:`perfgate.runner.distributed`) is launched. A node that did
            not hold rank 0 records nothing: its outcome has no repeats.

    Raises:
        UsageError: a bad environment (:func:`check_environment`), before measuring.
        ConfigError: the entry cannot be imported or called as configured.
        RunnerError: a step raised, a worker died or outlived the timeout, or perfgate was
            sent SIGTERM/SIGINT (:class:`~perfgate.runner.lifecycle.Interrupted`); the
            worker's process group is killed and the temporary directory removed first.
        MissingExtra: torch is not installed (``perfgate[torch]``).
    """
    threads, params = split_threads(spec)
    check_environment()
    timed = fixed_timeout(spec, timeout_s)
    launch = launch or LaunchOptions()
    sys_path = sys_path or []
    started = datetime.now(timezone.utc)
    results: list[RepeatResult] = []
    with trace_dir_scope(trace_dir), interruptible(), work_dir() as tmp:
        for repeat in range(spec.repeats):
            profiled = trace_dir if repeat == 0 and spec.profiled > 0 else None
            if profiled is not None:
                profiled.mkdir(parents=True, exist_ok=True)
            if spec.distributed:
                need_torch()
                from perfgate.runner.distributed import run_job

                job = run_job(
                    {
                        **_request(spec, params, threads, sys_path, profile=bool(profiled)),
                        "trace_dir": profiled and str(profiled),
                        "trace_stem": trace_stem(spec.name),
                    },
                    where=f"benchmark {spec.name}, repeat {repeat + 1}/{spec.repeats}",
                    workdir=Path(tmp) / f"job-{repeat}",
                    nproc=spec.nproc,
                    nnodes=launch.nnodes or spec.nnodes,
                    launch=launch,
                    timeout_s=timed.timeout_s,
                )
                if job is None:  # rank 0 ran on another node
                    break
                result = job_result(job)
            else:
                result = run_repeat(
                    timed,
                    repeat,
                    threads=threads,
                    params=params,
                    trace_path=profiled and profiled / f"{trace_stem(spec.name)}.pt.trace.json",
                    workdir=Path(tmp),
                    sys_path=sys_path,
                    timeout_s=timed.timeout_s,
                )
            results.append(result)
            if progress is not None:
                value = repeat_value(result)
                if profiled is not None and _unprofiled(result):
                    value = f"{value} ({NO_OPERATORS})"
                progress(repeat_progress(spec.name, "repeat", repeat + 1, spec.repeats, value))
    finished = datetime.now(timezone.utc)
    return BenchmarkOutcome(spec, threads, tuple(results), started, finished)
