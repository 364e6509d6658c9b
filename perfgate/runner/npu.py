"""The Ascend NPU backend: the only module of perfgate that imports torch_npu.

Timing and memory as on CUDA (:class:`~perfgate.runner.backends.AcceleratorBackend`), through
``torch.npu``; the capacity is the device's HBM. Profiling: ``torch_npu.profiler`` over
the profiled window (one warm-up step, then ``steps`` active ones), CPU and NPU activities,
shapes and memory, with an experimental config (profiler level, AI Core metrics, text
export) and ``tensorboard_trace_handler``, which writes one ``*_ascend_pt`` directory and
parses it on the spot (this needs the CANN toolkit on the runner); perfgate reads it with
:mod:`perfgate.parsers.ascend`, as ``perfgate ingest`` would.

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

from perfgate.runner.backends import AcceleratorBackend, _read, base_description, profiled_steps

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
        for line in (_read(os.path.join(home, name)) or "").splitlines():
            key, _, value = line.partition("=")
            if key.strip().lower() in ("version", "toolkit_version"):
                return value.strip().strip("[]")
    return ""


class NpuBackend(AcceleratorBackend):
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
        self._device = npu
        self._torch_npu = torch_npu
        self._env = dict(os.environ if env is None else env)
        self.level, self.aic_metrics = profiler_settings(self._env)

    def profiler_activities(self) -> list[Any]:
        activity = self._torch_npu.profiler.ProfilerActivity
        return [activity.CPU, activity.NPU]

    def describe(self) -> dict[str, Any]:
        return {
            **base_description(),
            "device_model": str(self._device.get_device_name(0)),
            "device_count": int(self._device.device_count()),
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
        config = self._experimental_config()
        on_ready = prof.tensorboard_trace_handler(str(out))
        profiled_steps(self, step, steps, prof, on_trace_ready=on_ready, experimental_config=config)
        return str(out)
