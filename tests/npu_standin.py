"""A CPU stand-in for torch_npu: the one mock in perfgate's tests, because an Ascend NPU
cannot exist on a CI runner.

It provides just the surface :class:`perfgate.runner.npu.NpuBackend` calls — the
``torch.npu`` device functions and ``torch_npu.profiler`` — and records every call. Device
functions map onto the CPU (``synchronize`` is a no-op, memory comes from a counter the test
sets). The profiler's ``tensorboard_trace_handler`` does what the real one does at the end of
a window: it writes one ``{worker}_{timestamp}_ascend_pt`` directory; the content is a real
torch_npu profile copied from ``tests/data/ascend``, since only CANN can produce one.
"""

from __future__ import annotations

import shutil
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROFILE = (
    Path(__file__).parent / "data" / "ascend" / "msinsight_pt_text_level1_2rank" / "rank0_ascend_pt"
)


class StandIn:
    """``torch_npu`` and ``torch.npu`` replacements sharing one call log."""

    def __init__(self, *, available: bool = True, peak_bytes: int = 123 << 20) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.available = available
        self.peak_bytes = peak_bytes
        self.npu = self._npu_namespace()
        self.torch_npu = self._module()

    def _log(self, name: str, value: Any = None) -> None:
        self.calls.append((name, value))

    def _npu_namespace(self) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            is_available=lambda: self.available,
            synchronize=lambda: self._log("synchronize"),
            reset_peak_memory_stats=lambda: self._log("reset_peak_memory_stats"),
            max_memory_allocated=lambda: self.peak_bytes,
            get_device_name=lambda index=0: "Ascend910B (stand-in)",
            device_count=lambda: 1,
        )

    def _module(self) -> types.ModuleType:
        log = self._log
        module = types.ModuleType("torch_npu")
        module.__version__ = "2.1.0.post-standin"  # type: ignore[attr-defined]
        prof = types.ModuleType("torch_npu.profiler")
        prof.ProfilerActivity = types.SimpleNamespace(CPU="CPU", NPU="NPU")  # type: ignore[attr-defined]
        prof.ProfilerLevel = types.SimpleNamespace(
            Level0="Level0", Level1="Level1", Level2="Level2"
        )  # type: ignore[attr-defined]
        prof.AiCMetrics = types.SimpleNamespace(  # type: ignore[attr-defined]
            AiCoreNone="ACL_AICORE_NONE", PipeUtilization="ACL_AICORE_PIPE_UTILIZATION"
        )
        prof.ExportType = types.SimpleNamespace(Text="text", Db="db")  # type: ignore[attr-defined]

        def experimental_config(**kw: Any) -> dict[str, Any]:
            log("experimental_config", kw)
            return kw

        def schedule(**kw: Any) -> dict[str, Any]:
            log("schedule", kw)
            return kw

        def tensorboard_trace_handler(dir_name: str) -> Callable[[Any], None]:
            def ready(_session: Any) -> None:
                target = Path(dir_name) / "standin-host_4242_20260101000000000_ascend_pt"
                shutil.copytree(PROFILE, target)
                log("trace_ready", str(target))

            return ready

        class Profile:
            def __init__(self, **kw: Any) -> None:
                log("profile", kw)
                self.kw = kw
                self.steps = 0

            def __enter__(self) -> Profile:
                return self

            def step(self) -> None:
                self.steps += 1
                log("profiler_step", self.steps)

            def __exit__(self, *exc: object) -> None:
                sched = self.kw["schedule"]
                if self.steps >= sched["warmup"] + sched["active"]:
                    self.kw["on_trace_ready"](self)

        prof._ExperimentalConfig = experimental_config  # type: ignore[attr-defined]
        prof.schedule = schedule  # type: ignore[attr-defined]
        prof.tensorboard_trace_handler = tensorboard_trace_handler  # type: ignore[attr-defined]
        prof.profile = Profile  # type: ignore[attr-defined]
        module.profiler = prof  # type: ignore[attr-defined]
        return module
