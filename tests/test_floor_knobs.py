"""How a worker process is set up around its timed steps (:class:`perfgate.runner.ProcessSetup`):
address-space randomisation off, GC off in the timed loop, one CPU.

Real worker processes, started by the runner as ``check --mode ab`` starts them, running a
probe entry whose step returns what it sees (the worker records the step's number as the
"loss"). Nothing here asserts on a time: the knobs' effect on the noise floor is
``bench/floor.py``'s business, on a machine whose load is known.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from perfgate.models import BenchmarkSpec
from perfgate.runner import ProcessSetup, RepeatResult, run_repeat
from perfgate.runner import worker as worker_module

pytest.importorskip("torch")

LINUX = sys.platform.startswith("linux")

PROBE = """
import gc
import os

import perfgate.runner.worker as worker

WHAT = os.environ.get("PROBE_WHAT", "gc")


def build(device="cpu"):
    def step():
        if WHAT == "gc":
            return 1.0 if gc.isenabled() else 0.0
        if WHAT == "cpus":
            return float(len(os.sched_getaffinity(0)))
        return 1.0 if worker.address_layout() == "fixed" else 0.0

    return step
"""


def randomisation_on() -> bool:
    """Whether the kernel randomises address spaces at all (``randomize_va_space`` > 0)."""
    try:
        return Path("/proc/sys/kernel/randomize_va_space").read_text().strip() != "0"
    except OSError:
        return False


def probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str, setup: ProcessSetup | None
) -> RepeatResult:
    code = tmp_path / "suite"
    code.mkdir(exist_ok=True)
    (code / "knob_probe.py").write_text(PROBE, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    monkeypatch.setenv("PROBE_WHAT", what)
    spec = BenchmarkSpec(
        name="probe", entry="knob_probe:build", warmup=1, measured=3, profiled=0, repeats=1
    )
    return run_repeat(
        spec,
        0,
        threads=1,
        params={},
        trace_path=None,
        workdir=work,
        sys_path=[str(code)],
        timeout_s=300.0,
        cwd=code,
        setup=setup,
    )


@pytest.mark.skipif(not LINUX, reason="personality(2) is Linux's")
def test_fixed_layout_worker_reports_randomisation_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = probe(tmp_path, monkeypatch, "layout", ProcessSetup(fixed_layout=True))
    assert rep.address_layout == "fixed"
    assert rep.loss == 1.0  # the step itself ran in the re-executed, fixed-layout process


@pytest.mark.skipif(not LINUX or not randomisation_on(), reason="no randomisation to turn off")
def test_randomized_layout_worker_reports_randomisation_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = probe(tmp_path, monkeypatch, "layout", ProcessSetup(fixed_layout=False))
    assert rep.address_layout == "randomized"
    assert rep.loss == 0.0


@pytest.mark.skipif(not LINUX, reason="personality(2) is Linux's")
def test_default_setup_is_what_the_runner_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = probe(tmp_path, monkeypatch, "layout", None)
    expected = "fixed" if ProcessSetup().fixed_layout else "randomized"
    assert rep.address_layout == expected or not randomisation_on()


@pytest.mark.parametrize("gc_off", [True, False])
def test_gc_off_holds_inside_the_timed_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gc_off: bool
) -> None:
    rep = probe(tmp_path, monkeypatch, "gc", ProcessSetup(gc_off=gc_off))
    assert rep.loss == (0.0 if gc_off else 1.0)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_pinned_worker_runs_on_one_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = min(os.sched_getaffinity(0))
    rep = probe(tmp_path, monkeypatch, "cpus", ProcessSetup(pin_cpu=cpu))
    assert rep.loss == 1.0


def test_pin_to_a_cpu_not_allowed_runs_unpinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity here")
    allowed = os.sched_getaffinity(0)
    rep = probe(tmp_path, monkeypatch, "cpus", ProcessSetup(pin_cpu=4096))
    assert rep.loss == float(len(allowed))


def test_setup_request_keys() -> None:
    assert ProcessSetup(fixed_layout=False, gc_off=True, pin_cpu=1).request() == {
        "fixed_layout": False,
        "gc_off": True,
        "pin_cpu": 1,
    }


def test_no_reexec_when_the_kernel_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where personality(2) fails (not Linux, a sandbox), the worker runs as it was started:
    it neither loops re-executing itself nor fails."""
    monkeypatch.setattr(worker_module, "_personality", lambda persona: -1)
    execs: list[object] = []
    monkeypatch.setattr(os, "execv", lambda *a: execs.append(a))
    worker_module.setup_process({"fixed_layout": True}, ["request.json"])
    assert execs == []
    assert worker_module.address_layout() == ""


def test_reexec_once_with_the_flag_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """Randomised now and the kernel accepts the flag: one re-exec of the worker module."""
    state = {"persona": 0}

    def personality(persona: int) -> int:
        previous = state["persona"]
        if persona != 0xFFFFFFFF:
            state["persona"] = persona
        return previous

    monkeypatch.setattr(worker_module, "_personality", personality)
    execs: list[tuple[object, ...]] = []
    monkeypatch.setattr(os, "execv", lambda *a: execs.append(a))
    worker_module.setup_process({"fixed_layout": True}, ["request.json"])
    assert state["persona"] & worker_module.ADDR_NO_RANDOMIZE
    assert len(execs) == 1
    assert execs[0][1][-3:] == ["-m", "perfgate.runner.worker", "request.json"]  # type: ignore[index]
    # the re-executed process finds the flag set and goes on
    worker_module.setup_process({"fixed_layout": True}, ["request.json"])
    assert len(execs) == 1
