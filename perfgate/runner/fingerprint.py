"""The environment fingerprint of a run (modelled on what pyperf collects, plus the device).

:func:`collect_fingerprint` is the one place a :class:`~perfgate.models.Fingerprint` is
built, for ``run`` (from what the worker saw, :func:`build_fingerprint`) and for ``ingest``
(a profile or another harness's result file, which say little about the host: the rest is
read where perfgate runs, which is where the job ran).
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from typing import Any

from perfgate import __version__
from perfgate.models import RUNNER_TIMING, Fingerprint, ParamValue
from perfgate.runner.backends import cpu_model_name, usable_cores

TIMING_METHOD = RUNNER_TIMING


def collect_fingerprint(
    *,
    device_kind: str,
    timing_method: str,
    params: Mapping[str, ParamValue],
    host_label: str = "",
    device_model: str = "",
    device_count: int = 1,
    torch_version: str = "",
    torch_npu_version: str = "",
    cuda_version: str = "",
    cann_version: str = "",
    driver_version: str = "",
    cpu_model: str | None = None,
    cpu_cores: int | None = None,
    os_name: str | None = None,
    os_release: str | None = None,
    python_version: str | None = None,
) -> Fingerprint:
    """The fingerprint of a run; each host field given as None (CPU model and cores, OS and
    its release, Python's major.minor) is read on this machine."""
    if python_version is None:
        python_version = ".".join(platform.python_version_tuple()[:2])
    return Fingerprint(
        device_kind=device_kind,
        device_model=device_model,
        device_count=device_count,
        cpu_model=cpu_model_name() if cpu_model is None else cpu_model,
        cpu_cores=usable_cores() if cpu_cores is None else cpu_cores,
        os=f"{platform.system()}-{platform.machine()}" if os_name is None else os_name,
        os_release=platform.release() if os_release is None else os_release,
        python_version=python_version,
        torch_version=torch_version,
        torch_npu_version=torch_npu_version,
        cuda_version=cuda_version,
        cann_version=cann_version,
        driver_version=driver_version,
        perfgate_version=__version__,
        timing_method=timing_method,
        params=dict(sorted(params.items())),
        host_label=host_label,
    )


def build_fingerprint(
    env: Mapping[str, Any], *, device: str, params: Mapping[str, ParamValue], host_label: str = ""
) -> Fingerprint:
    """Fingerprint of a ``run`` from a worker's environment description and the comparable
    parameters (the CPU as the worker saw it; OS and Python here)."""
    return collect_fingerprint(
        device_kind=device,
        timing_method=TIMING_METHOD,
        params=params,
        host_label=host_label,
        device_count=int(env.get("device_count", 1)),
        cpu_cores=int(env.get("cpu_cores", 0)),
        **{key: str(env.get(key, "")) for key in _ENV_TEXT},
    )


# The text fields of a fingerprint that a worker's environment description holds.
_ENV_TEXT = (
    "device_model cpu_model driver_version torch_version torch_npu_version "
    "cuda_version cann_version"
).split()
