"""One fingerprint collector for run and ingest (perfgate.runner.fingerprint)."""

from __future__ import annotations

import platform

from perfgate import __version__
from perfgate.runner.backends import cpu_model_name, usable_cores
from perfgate.runner.fingerprint import TIMING_METHOD, build_fingerprint, collect_fingerprint


def test_host_fields_not_given_are_read_here() -> None:
    fp = collect_fingerprint(device_kind="cpu", timing_method="t", params={"b": 1, "a": 2})
    assert (fp.cpu_model, fp.cpu_cores) == (cpu_model_name(), usable_cores())
    assert fp.os == f"{platform.system()}-{platform.machine()}"
    assert fp.os_release == platform.release()
    assert fp.python_version == ".".join(platform.python_version_tuple()[:2])
    assert fp.perfgate_version == __version__
    assert list(fp.params) == ["a", "b"]  # sorted, whatever order they came in
    assert (fp.device_model, fp.device_count, fp.torch_version) == ("", 1, "")


def test_host_fields_given_are_kept_even_empty() -> None:
    fp = collect_fingerprint(
        device_kind="cpu",
        timing_method="t",
        params={},
        cpu_model="",
        cpu_cores=0,
        os_name="Plan9-mips",
        os_release="4",
        python_version="3.99",
    )
    assert (fp.cpu_model, fp.cpu_cores, fp.os, fp.os_release, fp.python_version) == (
        "",
        0,
        "Plan9-mips",
        "4",
        "3.99",
    )


def test_a_run_takes_the_cpu_and_device_from_the_worker() -> None:
    env = {"cpu_model": "Worker CPU", "cpu_cores": 3, "device_model": "A100", "device_count": 2,
           "torch_version": "2.4.0", "cuda_version": "12.1"}  # fmt: skip
    fp = build_fingerprint(env, device="cuda", params={"threads": 1}, host_label="rack")
    assert (fp.cpu_model, fp.cpu_cores, fp.device_model, fp.device_count) == (
        "Worker CPU",
        3,
        "A100",
        2,
    )
    assert (fp.torch_version, fp.cuda_version, fp.timing_method) == ("2.4.0", "12.1", TIMING_METHOD)
    assert fp.host_label == "rack" and fp.os_release == platform.release()
