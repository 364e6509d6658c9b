"""The environment fingerprint of a run (modelled on what pyperf collects, plus the device)."""

from __future__ import annotations

import platform
from collections.abc import Mapping
from typing import Any

from perfgate import __version__
from perfgate.models import Fingerprint, ParamValue

# Bumped whenever perfgate changes *how* it measures, so old and new numbers never mix.
TIMING_METHOD = "wall-sync-v1"


def build_fingerprint(
    env: Mapping[str, Any],
    *,
    device: str,
    params: Mapping[str, ParamValue],
    host_label: str = "",
) -> Fingerprint:
    """Fingerprint from a worker's environment description and the comparable parameters."""
    return Fingerprint(
        device_kind=device,
        device_model=str(env.get("device_model", "")),
        device_count=int(env.get("device_count", 1)),
        cpu_model=str(env.get("cpu_model", "")),
        cpu_cores=int(env.get("cpu_cores", 0)),
        os=f"{platform.system()}-{platform.machine()}",
        os_release=platform.release(),
        python_version=".".join(platform.python_version_tuple()[:2]),
        torch_version=str(env.get("torch_version", "")),
        torch_npu_version=str(env.get("torch_npu_version", "")),
        cuda_version=str(env.get("cuda_version", "")),
        cann_version=str(env.get("cann_version", "")),
        driver_version=str(env.get("driver_version", "")),
        perfgate_version=__version__,
        timing_method=TIMING_METHOD,
        params=dict(sorted(params.items())),
        host_label=host_label,
    )
