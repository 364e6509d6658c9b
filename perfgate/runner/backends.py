"""Device backends: how to synchronise, read peak memory and profile on each device.

Imported only inside worker processes: with :mod:`perfgate.runner.npu` (the Ascend backend,
the only module that imports torch_npu) this is the one part of the runner that touches
torch, and it imports it lazily.
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import sys
from collections.abc import Callable
from typing import Any, Protocol


class Backend(Protocol):
    name: str
    device: str

    def synchronize(self) -> None: ...

    def reset_peak_memory(self) -> None: ...

    def peak_memory_bytes(self) -> int: ...

    def memory_capacity_bytes(self) -> int:
        """The memory :meth:`peak_memory_bytes` is a share of (for
        ``peak_memory_pct_of_capacity``); 0 where it is not known."""
        ...

    def profiler_activities(self) -> list[Any]: ...

    def describe(self) -> dict[str, Any]: ...

    def timing_event(self) -> Any | None:
        """A device event that can be recorded on the stream and timed against another
        (``record()``, ``elapsed_time(other)`` in ms); None where the device has none."""
        ...

    def profile(self, step: Callable[[], Any], steps: int, trace_path: str) -> str:
        """Profile ``steps`` steps (after one warm-up step under the profiler) and write the
        result at or under ``trace_path``; returns the path the parser should read."""
        ...


def cpu_model_name() -> str:
    """The CPU's marketing name from /proc/cpuinfo, else what platform knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _rss_peak_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
"""Where a container's memory limit is read: cgroup v2, then v1 ("max" or a huge number when
there is none)."""


def host_memory_bytes(cgroup_limits: tuple[str, ...] = _CGROUP_LIMITS) -> int:
    """The memory a CPU process's RSS can grow to: the machine's physical RAM, or the
    container's memory limit where that is lower (a CI job in a 16 GiB container on a 512 GiB
    host runs out at 16 GiB); 0 when neither is known. Other processes share it, so a peak
    RSS of 60% of it says how close this process alone came, not that 40% was free."""
    total = 0
    with contextlib.suppress(AttributeError, OSError, ValueError):
        total = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    for path in cgroup_limits:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) > 0:
            limit = int(text)
            total = min(total, limit) if total > 0 else limit
        break
    return max(total, 0)


def base_description() -> dict[str, Any]:
    import torch

    return {
        "torch_version": torch.__version__.split("+")[0],
        "torch_build": torch.__version__,
        "cpu_model": cpu_model_name(),
        "cpu_cores": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "intra_op_threads": torch.get_num_threads(),
    }


class CpuBackend:
    """CPU: nothing to synchronise; peak memory is the worker process's peak RSS."""

    name = "cpu"
    device = "cpu"

    def synchronize(self) -> None:
        return None

    def reset_peak_memory(self) -> None:
        return None

    def peak_memory_bytes(self) -> int:
        return _rss_peak_bytes()

    def memory_capacity_bytes(self) -> int:
        """The host's RAM (or the container's limit): what an RSS can grow to."""
        return host_memory_bytes()

    def timing_event(self) -> Any | None:
        return None

    def profiler_activities(self) -> list[Any]:
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU]

    def describe(self) -> dict[str, Any]:
        info = base_description()
        info.update(device_model=info["cpu_model"], device_count=1)
        return info

    def profile(self, step: Callable[[], Any], steps: int, trace_path: str) -> str:
        return torch_profile(self, step, steps, trace_path)


class CudaBackend:
    """CUDA: steps end with ``torch.cuda.synchronize()`` so the clock sees the device's work;
    peak memory is the caching allocator's ``max_memory_allocated``."""

    name = "cuda"
    device = "cuda"

    def __init__(self) -> None:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' asked for, but torch.cuda.is_available() is False")
        self._torch = torch

    def synchronize(self) -> None:
        self._torch.cuda.synchronize()

    def reset_peak_memory(self) -> None:
        self._torch.cuda.reset_peak_memory_stats()

    def peak_memory_bytes(self) -> int:
        return int(self._torch.cuda.max_memory_allocated())

    def memory_capacity_bytes(self) -> int:
        """The current device's total memory (``get_device_properties().total_memory``)."""
        cuda = self._torch.cuda
        return int(cuda.get_device_properties(cuda.current_device()).total_memory)

    def timing_event(self) -> Any | None:
        event: Any = self._torch.cuda.Event
        return event(enable_timing=True)

    def profiler_activities(self) -> list[Any]:
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU, ProfilerActivity.CUDA]

    def describe(self) -> dict[str, Any]:
        torch = self._torch
        info = base_description()
        props = torch.cuda.get_device_properties(0)
        info.update(
            device_model=torch.cuda.get_device_name(0),
            device_count=torch.cuda.device_count(),
            cuda_version=torch.version.cuda or "",
            device_memory_bytes=int(props.total_memory),
            compute_capability=f"{props.major}.{props.minor}",
        )
        driver = _nvidia_driver_version()
        if driver:
            info["driver_version"] = driver
        return info

    def profile(self, step: Callable[[], Any], steps: int, trace_path: str) -> str:
        return torch_profile(self, step, steps, trace_path)


def _nvidia_driver_version() -> str:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            first = fh.readline()
    except OSError:
        return ""
    for token in first.split():
        if token.count(".") >= 1 and token.replace(".", "").isdigit():
            return token
    return ""


def torch_profile(backend: Backend, step: Callable[[], Any], steps: int, trace_path: str) -> str:
    """torch.profiler over ``steps`` steps, exported as one Chrome trace at ``trace_path``."""
    from torch.profiler import profile, schedule

    with profile(
        activities=backend.profiler_activities(),
        record_shapes=True,
        profile_memory=True,
        # repeat=1: one cycle only, else the export after the loop holds an empty new cycle
        schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
    ) as prof:
        for _ in range(1 + steps):
            step()
            backend.synchronize()
            prof.step()
    prof.export_chrome_trace(trace_path)
    return trace_path


def get_backend(device: str) -> Backend:
    """The backend for ``device`` (``cpu``, ``cuda`` or ``npu``)."""
    if device == "cpu":
        return CpuBackend()
    if device == "cuda":
        return CudaBackend()
    if device == "npu":
        from perfgate.runner.npu import NpuBackend

        return NpuBackend()
    raise RuntimeError(f"unknown device {device!r} (expected cpu, cuda or npu)")
