"""The Ascend NPU backend: the only module of perfgate that imports torch_npu.

Timing: each measured step ends with ``torch.npu.synchronize()``, and is bracketed by two
``torch.npu.Event(enable_timing=True)`` for its device time; peak memory is the caching
allocator's ``torch.npu.max_memory_allocated()`` since ``reset_peak_memory_stats()``, held
against the device's ``get_device_properties(d).total_memory`` (its HBM).

Profiling: ``torch_npu.profiler.profile`` over the profiled window (one warm-up step, then
``steps`` active steps, ``repeat=1``), CPU and NPU activities, shapes and memory, with an
experimental config (profiler level, AI Core metrics, text export) and
``tensorboard_trace_handler``, which writes one ``*_ascend_pt`` directory and parses it on
the spot (this needs the CANN toolkit on the runner). perfgate then reads that directory
with :mod:`perfgate.parsers.ascend`, exactly as ``perfgate ingest`` would.

The profiler settings come from the environment, so that a runner can choose them without
touching the suite:

- ``PERFGATE_NPU_PROFILER_LEVEL``: ``Level0``, ``Level1`` (default) or ``Level2``;
- ``PERFGATE_NPU_AIC_METRICS``: an ``AiCMetrics`` member, default ``PipeUtilization``
  (``AiCoreNone`` to collect none).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

DEFAULT_PROFILER_LEVEL = "Level1"
DEFAULT_AIC_METRICS = "PipeUtilization"

_TOOLKIT_INFO = ("ascend_toolkit_install.info", "version.info", "version.cfg")


def profiler_settings(env: Mapping[str, str]) -> tuple[str, str]:
    """(profiler level, AI Core metrics) asked for in ``env``, with the defaults."""
    level = env.get("PERFGATE_NPU_PROFILER_LEVEL", "").strip() or DEFAULT_PROFILER_LEVEL
    metrics = env.get("PERFGATE_NPU_AIC_METRICS", "").strip() or DEFAULT_AIC_METRICS
    return level, metrics


def cann_version(env: Mapping[str, str]) -> str:
    """The CANN toolkit version from its install info under ``ASCEND_TOOLKIT_HOME``."""
    home = env.get("ASCEND_TOOLKIT_HOME") or env.get("ASCEND_HOME_PATH") or ""
    if not home:
        return ""
    for name in _TOOLKIT_INFO:
        try:
            text = (Path(home) / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key.strip().lower() in ("version", "toolkit_version"):
                return value.strip().strip("[]")
    return ""


class NpuBackend:
    """Ascend NPU through torch_npu (which registers ``torch.npu`` when imported)."""

    device = "npu"

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        import torch

        try:
            import torch_npu
        except ImportError as exc:
            raise RuntimeError(
                "device 'npu' asked for, but torch_npu is not installed (install the torch_npu "
                "build matching your torch and CANN versions)"
            ) from exc
        # torch.npu exists only once torch_npu is imported (it registers the device).
        npu: Any = getattr(torch, "npu", None)
        if npu is None or not npu.is_available():
            raise RuntimeError("device 'npu' asked for, but torch.npu.is_available() is False")
        self._npu = npu
        self._torch_npu = torch_npu
        self._env = dict(os.environ if env is None else env)
        self.level, self.aic_metrics = profiler_settings(self._env)

    def synchronize(self) -> None:
        self._npu.synchronize()

    def reset_peak_memory(self) -> None:
        self._npu.reset_peak_memory_stats()

    def peak_memory_bytes(self) -> int:
        return int(self._npu.max_memory_allocated())

    def memory_capacity_bytes(self) -> int:
        """The current NPU's HBM: ``torch.npu.get_device_properties(d).total_memory``, else
        the total of ``torch.npu.mem_get_info()``; 0 for a torch_npu with neither."""
        npu = self._npu
        props = getattr(npu, "get_device_properties", None)
        if props is not None:
            current = getattr(npu, "current_device", None)
            total = getattr(props(current() if current is not None else 0), "total_memory", 0)
            if total:
                return int(total)
        info = getattr(npu, "mem_get_info", None)
        return int(info()[1]) if info is not None else 0

    def timing_event(self) -> Any | None:
        """``torch.npu.Event(enable_timing=True)``, torch_npu's counterpart of CUDA's event;
        None for a torch_npu without it (then no device time is recorded)."""
        event = getattr(self._npu, "Event", None)
        return None if event is None else event(enable_timing=True)

    def profiler_activities(self) -> list[Any]:
        activity = self._torch_npu.profiler.ProfilerActivity
        return [activity.CPU, activity.NPU]

    def describe(self) -> dict[str, Any]:
        from perfgate.runner.backends import base_description

        return {
            **base_description(),
            "device_model": str(self._npu.get_device_name(0)),
            "device_count": int(self._npu.device_count()),
            "torch_npu_version": str(getattr(self._torch_npu, "__version__", "")),
            "cann_version": cann_version(self._env),
            "profiler_level": self.level,
            "aic_metrics": self.aic_metrics,
        }

    def _experimental_config(self) -> Any:
        prof = self._torch_npu.profiler
        try:
            level = getattr(prof.ProfilerLevel, self.level)
            metrics = getattr(prof.AiCMetrics, self.aic_metrics)
        except AttributeError as exc:
            raise RuntimeError(
                f"PERFGATE_NPU_PROFILER_LEVEL={self.level!r} / PERFGATE_NPU_AIC_METRICS="
                f"{self.aic_metrics!r}: not known to this torch_npu ({exc})"
            ) from exc
        return prof._ExperimentalConfig(
            profiler_level=level, aic_metrics=metrics, export_type=prof.ExportType.Text
        )

    def profile(self, step: Callable[[], Any], steps: int, trace_path: str) -> str:
        """Profile the window into ``<trace_path without .pt.trace.json>_npu/``, which then
        holds one ``*_ascend_pt`` directory; returns that parent directory."""
        prof = self._torch_npu.profiler
        out = Path(trace_path.removesuffix(".pt.trace.json") + "_npu")
        out.mkdir(parents=True, exist_ok=True)
        with prof.profile(
            activities=self.profiler_activities(),
            schedule=prof.schedule(wait=0, warmup=1, active=steps, repeat=1),
            on_trace_ready=prof.tensorboard_trace_handler(str(out)),
            record_shapes=True,
            profile_memory=True,
            experimental_config=self._experimental_config(),
        ) as session:
            for _ in range(1 + steps):
                step()
                self.synchronize()
                session.step()
        return str(out)
