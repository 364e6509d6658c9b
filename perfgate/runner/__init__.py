"""Runs benchmarks: one fresh worker process per repeat, so process-level noise is sampled.

The parent never imports torch; workers do (see :mod:`perfgate.runner.worker`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfgate.errors import ConfigError, RunnerError
from perfgate.models import BenchmarkSpec, ParamValue

ProgressFn = Callable[[str], None]

# ``threads`` is the runner's own parameter, not the entry's: the number of intra-op threads
# torch may use. CPU benchmarks default to 1 because on shared runners multi-threaded step
# times are bimodal (a preempted core stalls every barrier); 0 keeps torch's default.
DEFAULT_CPU_THREADS = 1


@dataclass(frozen=True)
class RepeatResult:
    """What one worker process measured."""

    step_ms: tuple[float, ...]
    batch_size: int
    params: Mapping[str, ParamValue]
    peak_memory_bytes: int
    env: Mapping[str, Any]
    trace_path: str | None


@dataclass(frozen=True)
class BenchmarkOutcome:
    spec: BenchmarkSpec
    threads: int
    repeats: tuple[RepeatResult, ...]
    started_at: datetime
    finished_at: datetime

    @property
    def trace_path(self) -> str | None:
        for rep in self.repeats:
            if rep.trace_path:
                return rep.trace_path
        return None


def split_threads(spec: BenchmarkSpec) -> tuple[int, dict[str, ParamValue]]:
    """Separate the runner's ``threads`` parameter from the entry's own parameters."""
    params = dict(spec.params)
    raw = params.pop("threads", DEFAULT_CPU_THREADS if spec.device == "cpu" else 0)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise ConfigError(f"benchmark {spec.name}: 'threads' must be an integer >= 0, got {raw!r}")
    return raw, params


def resolve_target(spec: BenchmarkSpec) -> str:
    """The ``module:function`` a worker calls for this benchmark."""
    if spec.entry:
        return spec.entry
    from perfgate.workloads import BUILTIN

    if spec.workload not in BUILTIN:
        raise ConfigError(
            f"benchmark {spec.name}: unknown workload {spec.workload!r} "
            f"(built-in: {', '.join(BUILTIN)})"
        )
    return BUILTIN[spec.workload]


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
) -> RepeatResult:
    """One worker process: one repeat of ``spec``; see :func:`run_benchmark`."""
    tag = f"{label}-{repeat}" if label else str(repeat)
    result_path = workdir / f"result-{tag}.json"
    request = {
        "target": resolve_target(spec),
        "device": spec.device,
        "params": dict(params),
        "threads": threads,
        "seed": 1234,
        "warmup": spec.warmup,
        "measured": spec.measured,
        "profiled": spec.profiled if trace_path is not None else 0,
        "trace_path": None if trace_path is None else str(trace_path),
        "result_path": str(result_path),
        "sys_path": sys_path,
    }
    request_path = workdir / f"request-{tag}.json"
    request_path.write_text(json.dumps(request), encoding="utf-8")
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    where = (
        f"benchmark {spec.name}{f' ({label})' if label else ''}, repeat {repeat + 1}/{spec.repeats}"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "perfgate.runner.worker", str(request_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RunnerError(f"{where}: worker did not finish within {timeout_s:.0f} s") from None
    if not result_path.exists():
        lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        tail = f"; last output: {lines[-1]}" if lines else ""
        raise RunnerError(f"{where}: worker exited with code {proc.returncode}{tail}")
    result = json.loads(result_path.read_text(encoding="utf-8"))
    if not result["ok"]:
        if result["kind"] == "config":
            raise ConfigError(f"{where}: {result['message']}")
        raise RunnerError(f"{where}: the step raised {result['message']}")
    return RepeatResult(
        step_ms=tuple(ns / 1e6 for ns in result["step_ns"]),
        batch_size=int(result["batch_size"]),
        params=dict(result["params"]),
        peak_memory_bytes=int(result["peak_memory_bytes"]),
        env=dict(result["env"]),
        trace_path=result["trace_path"],
    )


def run_benchmark(
    spec: BenchmarkSpec,
    *,
    trace_dir: Path | None,
    progress: ProgressFn | None = None,
    sys_path: list[str] | None = None,
    timeout_s: float = 3600.0,
) -> BenchmarkOutcome:
    """Run ``spec.repeats`` worker processes one after the other; profile in the first only.

    Args:
        spec: the benchmark.
        trace_dir: where the profiled window's Chrome trace goes; ``None`` skips profiling.
        progress: called with a short line before each repeat.
        sys_path: directories the worker puts first on ``sys.path`` (for user entries).
        timeout_s: the most one worker may take.

    Raises:
        ConfigError: the entry cannot be imported or called as configured.
        RunnerError: a step raised, or a worker died or hung.
    """
    threads, params = split_threads(spec)
    started = datetime.now(timezone.utc)
    results: list[RepeatResult] = []
    with tempfile.TemporaryDirectory(prefix="perfgate-") as tmp:
        for repeat in range(spec.repeats):
            if progress is not None:
                progress(f"{spec.name}: repeat {repeat + 1}/{spec.repeats}")
            trace_path = None
            if trace_dir is not None and repeat == 0 and spec.profiled > 0:
                trace_dir.mkdir(parents=True, exist_ok=True)
                trace_path = trace_dir / f"{spec.name}.pt.trace.json"
            results.append(
                run_repeat(
                    spec,
                    repeat,
                    threads=threads,
                    params=params,
                    trace_path=trace_path,
                    workdir=Path(tmp),
                    sys_path=sys_path or [],
                    timeout_s=timeout_s,
                )
            )
    return BenchmarkOutcome(
        spec=spec,
        threads=threads,
        repeats=tuple(results),
        started_at=started,
        finished_at=datetime.now(timezone.utc),
    )
