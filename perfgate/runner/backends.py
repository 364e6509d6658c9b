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
    """A device's operations; the defaults are a host-only device's (the CPU's)."""

    device: str
    activities: tuple[str, ...] = ("CPU",)

    def synchronize(self) -> None:
        return None

    def reset_peak_memory(self) -> None:
        return None

    def set_device(self, index: int) -> None:
        """Run on the host's device ``index`` (a rank's local one)."""
        return None

    def peak_memory_bytes(self) -> int: ...

    def memory_capacity_bytes(self) -> int:
        """The memory :meth:`peak_memory_bytes` is a share of; 0 where it is not known."""
        ...

    def profiler_activities(self) -> list[Any]:
        """torch.profiler's activities named by :attr:`activities`."""
        from torch.profiler import ProfilerActivity

        return [getattr(ProfilerActivity, name) for name in self.activities]

    def describe(self) -> dict[str, Any]: ...

    def timing_event(self) -> Any | None:
        """A device event that can be recorded on the stream and timed against another
        (``record()``, ``elapsed_time(other)`` in ms); None where the device has none."""
        return None

    def profile(self, step: Callable[[], Any], steps: int, trace_path: str) -> str | None:
        """Profile ``steps`` steps (after one warm-up step) at or under ``trace_path``; the
        path the parser should read, or None where the window ran no operator (nothing
        is written: a trace without one has no op table to read)."""
        return torch_profile(self, step, steps, trace_path)


_CPUINFO = "/proc/cpuinfo"
_MIDR = "/sys/devices/system/cpu/cpu0/regs/identification/midr_el1"

_ARM_IMPLEMENTERS: dict[int, str] = {
    0x41: "ARM",
    0x42: "Broadcom",
    0x43: "Cavium",
    0x46: "Fujitsu",
    0x48: "HiSilicon",
    0x4E: "NVIDIA",
    0x50: "APM",
    0x51: "Qualcomm",
    0x61: "Apple",
    0x6D: "Microsoft",
    0x70: "Phytium",
    0xC0: "Ampere",
}
"""The MIDR implementer byte, from the Linux kernel's ``arch/arm64/include/asm/cputype.h``
(``ARM_CPU_IMP_*``) and util-linux's ``sys-utils/lscpu-arm.c`` (``hw_implementer``; Phytium
0x70 is only there)."""

_ARM_PARTS: dict[tuple[int, int], str] = {
    # ARM's own cores (kernel ARM_CPU_PART_*). Graviton 2/3/4, Ampere Altra and NVIDIA Grace
    # are built from these and report ARM's implementer; Azure Cobalt reports Microsoft's.
    (0x41, 0xD03): "Cortex-A53",
    (0x41, 0xD04): "Cortex-A35",
    (0x41, 0xD05): "Cortex-A55",
    (0x41, 0xD07): "Cortex-A57",
    (0x41, 0xD08): "Cortex-A72",
    (0x41, 0xD09): "Cortex-A73",
    (0x41, 0xD0A): "Cortex-A75",
    (0x41, 0xD0B): "Cortex-A76",
    (0x41, 0xD0C): "Neoverse N1",
    (0x41, 0xD0D): "Cortex-A77",
    (0x41, 0xD40): "Neoverse V1",
    (0x41, 0xD41): "Cortex-A78",
    (0x41, 0xD44): "Cortex-X1",
    (0x41, 0xD46): "Cortex-A510",
    (0x41, 0xD47): "Cortex-A710",
    (0x41, 0xD48): "Cortex-X2",
    (0x41, 0xD49): "Neoverse N2",
    (0x41, 0xD4F): "Neoverse V2",
    (0x41, 0xD80): "Cortex-A520",
    (0x41, 0xD81): "Cortex-A720",
    (0x41, 0xD82): "Cortex-X4",
    (0x41, 0xD84): "Neoverse V3",
    (0x41, 0xD8E): "Neoverse N3",
    # HiSilicon: 0xd01 is the kernel's TSV110, which lscpu names Kunpeng-920 (TaiShan
    # v110); 0xd02 is the kernel's HIP09, lscpu's TaiShan-v120; 0xd06 the kernel's HIP12.
    (0x48, 0xD01): "Kunpeng 920 (TaiShan v110)",
    (0x48, 0xD02): "TaiShan v120 (HIP09)",
    (0x48, 0xD06): "HIP12",
    (0x46, 0x001): "A64FX",
    (0x43, 0x0AF): "ThunderX2",
    (0x4E, 0x003): "Denver 2",
    (0x4E, 0x004): "Carmel",
    (0x6D, 0xD49): "Azure Cobalt 100",
    (0x70, 0x660): "FTC660",
    (0x70, 0x661): "FTC661",
    (0x70, 0x662): "FTC662",
    (0x70, 0x663): "FTC663",
    (0xC0, 0xAC3): "AmpereOne",
    (0xC0, 0xAC4): "AmpereOne A",
}
"""Named (implementer, part) pairs, from the same two sources. A pair not here is described
by its numbers, so two different unknown CPUs still get different fingerprints."""


def _read(path: str) -> str | None:
    """The text of ``path`` (undecodable bytes replaced); None where it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _hex(value: str) -> int | None:
    try:
        return int(value.strip(), 16)
    except ValueError:
        return None


def arm_cpu_name(implementer: int, part: int, machine: str = "aarch64") -> str:
    """The name of an Arm core from its MIDR implementer and part number
    ("HiSilicon Kunpeng 920 (TaiShan v110)"), or its numbers where the pair is not known
    ("aarch64 (implementer 0x48, part 0xd0f)")."""
    name = _ARM_PARTS.get((implementer, part))
    if name is None:
        return f"{machine} (implementer 0x{implementer:02x}, part 0x{part:03x})"
    return f"{_ARM_IMPLEMENTERS[implementer]} {name}"


def cpu_model_from_cpuinfo(
    cpuinfo_text: str, midr_text: str = "", machine: str = "aarch64"
) -> str | None:
    """The CPU model a fingerprint records, from the text of ``/proc/cpuinfo`` (and of cpu0's
    ``midr_el1``, used only where cpuinfo carries no ID); None where neither says.

    x86 names itself in a ``model name`` line. arm64 has none: each processor block carries
    its MIDR as ``CPU implementer`` and ``CPU part``, decoded here, so a Kunpeng 920 host is
    not just "aarch64". A big.LITTLE host lists each kind of core once, in cpuinfo's order
    ("ARM Cortex-A55 + ARM Cortex-A76"); an unknown core is described by ``machine``.
    """
    model_name: str | None = None
    pairs: list[tuple[int, int]] = []
    implementer: int | None = None
    for line in [*cpuinfo_text.splitlines(), ""]:
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if not sep or not key:
            implementer = None  # a blank line ends a processor's block
            continue
        if key == "model name" and model_name is None and value.strip():
            model_name = value.strip()
        elif key == "cpu implementer":
            implementer = _hex(value)
        elif key == "cpu part" and implementer is not None:
            part = _hex(value)
            if part is not None and (implementer, part) not in pairs:
                pairs.append((implementer, part))
    midr = _hex(midr_text)  # a register value ("0x00000000481fd010")
    if not pairs and midr is not None:  # implementer: bits 31-24; part number: bits 15-4
        pairs.append(((midr >> 24) & 0xFF, (midr >> 4) & 0xFFF))
    if pairs:
        # 32-bit Arm kernels do print "model name", but only as "ARMv7 Processor rev 4".
        return " + ".join(arm_cpu_name(i, p, machine) for i, p in pairs)
    return model_name


def cpu_model_name(cpuinfo_path: str = _CPUINFO, midr_path: str = _MIDR) -> str:
    """The CPU's name for the fingerprint: from /proc/cpuinfo (see
    :func:`cpu_model_from_cpuinfo`), else what :mod:`platform` knows."""
    cpuinfo, midr, machine = _read(cpuinfo_path), _read(midr_path), platform.machine()
    found = cpu_model_from_cpuinfo(cpuinfo or "", midr or "", machine=machine or "aarch64")
    return found or platform.processor() or platform.machine()


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity), else the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 0


_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
"""Where a container's memory limit is read: cgroup v2, then v1 ("max" or a huge number when
there is none)."""


def host_memory_bytes(cgroup_limits: tuple[str, ...] = _CGROUP_LIMITS) -> int:
    """The memory a CPU process's RSS can grow to: the machine's RAM, or the container's
    limit where lower (a CI job in a 16 GiB container on a 512 GiB host runs out at 16 GiB);
    0 when neither is known. Others share it: 60% of it says how close this process alone
    came, not that 40% was free."""
    total = 0
    with contextlib.suppress(AttributeError, OSError, ValueError):
        total = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    for path in cgroup_limits:
        text = _read(path)
        if text is None:
            continue
        if text.strip().isdigit() and int(text) > 0:
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
        "cpu_cores": usable_cores(),
        "intra_op_threads": torch.get_num_threads(),
    }


class CpuBackend(Backend):
    """CPU: nothing to synchronise; peak memory is the worker process's peak RSS."""

    device = "cpu"

    def peak_memory_bytes(self) -> int:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak if sys.platform == "darwin" else peak * 1024)  # macOS: bytes; Linux: KiB

    def memory_capacity_bytes(self) -> int:
        return host_memory_bytes()

    def describe(self) -> dict[str, Any]:
        info = base_description()
        info.update(device_model=info["cpu_model"], device_count=1)
        return info


class AcceleratorBackend(Backend):
    """A device behind a torch module (``torch.cuda``, ``torch.npu``): steps end with its
    ``synchronize()`` so the clock sees the device's work; peak memory is its caching
    allocator's ``max_memory_allocated()`` since ``reset_peak_memory_stats()``."""

    _device: Any  # torch.cuda or torch.npu

    def synchronize(self) -> None:
        self._device.synchronize()

    def reset_peak_memory(self) -> None:
        self._device.reset_peak_memory_stats()

    def set_device(self, index: int) -> None:
        self._device.set_device(index)

    def peak_memory_bytes(self) -> int:
        return int(self._device.max_memory_allocated())

    def memory_capacity_bytes(self) -> int:
        """The current device's memory (``get_device_properties(d).total_memory``, else the
        total of ``mem_get_info()``); 0 for a module (a torch_npu) with neither."""
        props = getattr(self._device, "get_device_properties", None)
        if props is not None:
            current = getattr(self._device, "current_device", None)
            total = getattr(props(current() if current is not None else 0), "total_memory", 0)
            if total:
                return int(total)
        info = getattr(self._device, "mem_get_info", None)
        return int(info()[1]) if info is not None else 0

    def timing_event(self) -> Any | None:
        """``Event(enable_timing=True)``; None for a torch_npu without it (no device time)."""
        event = getattr(self._device, "Event", None)
        return None if event is None else event(enable_timing=True)


class CudaBackend(AcceleratorBackend):
    device = "cuda"
    activities = ("CPU", "CUDA")

    def __init__(self) -> None:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' asked for, but torch.cuda.is_available() is False")
        self._torch = torch
        self._device = torch.cuda

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


def _nvidia_driver_version() -> str:
    first = (_read("/proc/driver/nvidia/version") or "").partition("\n")[0]
    for token in first.split():
        if token.count(".") >= 1 and token.replace(".", "").isdigit():
            return token
    return ""


def profiled_steps(
    backend: Backend, step: Callable[[], Any], steps: int, profiler: Any, **options: Any
) -> Any:
    """One warm-up step then ``steps`` active ones under ``profiler.profile`` (the module
    ``torch.profiler``, or ``torch_npu.profiler``: the same interface) with the backend's
    activities, shapes and memory, plus ``options``; the profile session."""
    with profiler.profile(
        activities=backend.profiler_activities(),
        record_shapes=True,
        profile_memory=True,
        # repeat=1: one cycle only, else the export after the loop holds an empty new cycle
        schedule=profiler.schedule(wait=0, warmup=1, active=steps, repeat=1),
        **options,
    ) as session:
        for _ in range(1 + steps):
            step()
            backend.synchronize()
            session.step()
    return session


_OPERATOR_ACTIVITIES = frozenset({"cpu_op", "operator"})
"""The profiler's activity types of a torch operator: the trace's ``cat`` of the events the
parser builds its op table from (:mod:`perfgate.parsers.torch_trace`)."""


def ran_operators(session: Any) -> bool:
    """Whether a finished ``torch.profiler`` session recorded a torch operator; True where
    its events cannot be looked at (then the trace is exported as before)."""
    try:
        events = session.profiler.kineto_results.events()
        return any(e.activity_type() in _OPERATOR_ACTIVITIES for e in events)
    except (AttributeError, RuntimeError, TypeError):
        return True


def torch_profile(
    backend: Backend, step: Callable[[], Any], steps: int, trace_path: str
) -> str | None:
    """torch.profiler over ``steps`` steps, exported as one Chrome trace at ``trace_path``;
    None, and nothing written, where no torch operator ran (a step of plain Python)."""
    import torch.profiler

    session = profiled_steps(backend, step, steps, torch.profiler)
    if not ran_operators(session):
        return None
    session.export_chrome_trace(trace_path)
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
