"""One repeat of one benchmark, in a fresh interpreter.

Run as ``python -m perfgate.runner.worker REQUEST.json``. The request names the entry, its
parameters and the step counts; the result (or the error) is written as JSON to the path
the request gives, never to stdout, which belongs to the benchmark's own code.

Order inside the worker: the process set up as the request's :class:`~perfgate.runner.
ProcessSetup` keys ask (:func:`setup_process`, before torch is imported); the workload built
(seeded); warm-up steps; measured steps timed with a monotonic clock and device
synchronisation, profiler off (beside each, on the CPU its CPU time, on an accelerator its
device time from timing events); then the allocator's peak (RSS on the CPU) with the
capacity it is a share of, and the last step's loss (:func:`loss_value`); then, only if a
trace path was given, a separate profiled window exported as a Chrome trace (never timed;
not written where it ran no torch operator: the result's ``trace_path`` is then null).

An inference benchmark (``kind = "inference"``) runs every step (one request) under
``torch.inference_mode()``; each measured sample is one request's latency.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import importlib
import inspect
import json
import math
import os
import random
import sys
import time
import traceback
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfgate.runner.backends import Backend


ADDR_NO_RANDOMIZE = 0x0040000  # personality(2): address-space randomisation off (setarch -R)
_PERSONALITY_QUERY = 0xFFFFFFFF


def _personality(persona: int) -> int:
    """``personality(2)``: set ``persona`` (or, with 0xffffffff, only read) and return the
    previous one; -1 where it failed or there is none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return -1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.personality(ctypes.c_ulong(persona)))
    except (OSError, AttributeError):
        return -1


def address_layout() -> str:
    """``fixed`` (address-space randomisation off), ``randomized``, or "" (not Linux)."""
    current = _personality(_PERSONALITY_QUERY)
    if current < 0:
        return ""
    return "fixed" if current & ADDR_NO_RANDOMIZE else "randomized"


def setup_process(request: Mapping[str, Any], argv: list[str]) -> None:
    """A fixed address layout (this worker re-executed once with randomisation off, so the
    new image is laid out without it) and the CPU pinned to, as the request asks."""
    if request.get("fixed_layout") and address_layout() == "randomized":
        # off for the images this process executes next, where the kernel allows it
        _personality(_personality(_PERSONALITY_QUERY) | ADDR_NO_RANDOMIZE)
        if address_layout() == "fixed":
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(sys.executable, [sys.executable, "-m", "perfgate.runner.worker", *argv])
    cpu = request.get("pin_cpu")
    if isinstance(cpu, int) and not isinstance(cpu, bool) and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):  # not a CPU this process may use: it runs unpinned
            os.sched_setaffinity(0, {cpu})


class EntryError(Exception):
    """The benchmark entry cannot be imported, called or understood (a configuration error)."""


def load_entry(target: str) -> Callable[..., Any]:
    module_name, _, func_name = target.partition(":")
    if not module_name or not func_name:
        raise EntryError(f"entry {target!r} is not of the form 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise EntryError(
            f"cannot import module {module_name!r} of entry {target!r}: {type(exc).__name__}: {exc}"
        ) from exc
    func = getattr(module, func_name, None)
    if func is None or not callable(func):
        raise EntryError(f"module {module_name!r} has no callable {func_name!r}")
    return func  # type: ignore[no-any-return]


_PLAIN_TYPES: dict[type, tuple[type, ...]] = {int: (int,), float: (int, float), bool: (bool,)}
"""A parameter annotated with one of these takes values of the types beside it (a suite's or
``--param``'s value is a TOML or command-line scalar: bool, int, float or string)."""


def _check_types(func: Callable[..., Any], params: Mapping[str, Any]) -> None:
    """EntryError for a parameter whose value is not of the plain type the entry annotates
    it with (``batch_size: int`` given ``"abc"``), before the entry fails on it inside
    torch with a message of many lines. Other annotations are not checked."""
    try:
        hints = typing.get_type_hints(func)
    except Exception:  # an annotation that does not resolve: nothing to check against
        return
    for name, value in params.items():
        accepted = _PLAIN_TYPES.get(hints.get(name, object))
        if accepted is None:
            continue
        if (isinstance(value, bool) and bool not in accepted) or not isinstance(value, accepted):
            raise EntryError(
                f"parameter {name}: {value!r} is not {'an' if accepted == (int,) else 'a'} "
                f"{hints[name].__name__}"
            )


Built = tuple[Callable[[], object], int, dict[str, Any]]  # (step, batch size, params)


def build_workload(func: Callable[..., Any], device: str, params: Mapping[str, Any]) -> Built:
    """Call the entry and normalise what it returns to (step, batch_size, params)."""
    kwargs = dict(params)
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        accepts_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
        if "device" in signature.parameters or accepts_any:
            kwargs["device"] = device
        unknown = [k for k in params if k not in signature.parameters and not accepts_any]
        if unknown:
            known = [n for n in signature.parameters if n != "device"]
            raise EntryError(
                f"unknown parameter(s) {', '.join(sorted(unknown))} "
                f"(it takes: {', '.join(known) or 'none'})"
            )
        _check_types(func, params)
    built = func(**kwargs)
    get: Callable[[str, Any], Any]  # (key, default) -> what the entry returned under key
    if isinstance(built, Mapping):
        get = built.get
    elif getattr(built, "step", None) is not None:
        get = functools.partial(getattr, built)
    elif callable(built):
        get = {"step": built}.get
    else:
        raise EntryError(
            f"the entry returned {type(built).__name__}; expected a Workload, a dict with "
            "'step', or a step callable"
        )
    step = get("step", None)
    batch_size = get("batch_size", params.get("batch_size", 1))
    effective = dict(get("params", params))
    if not callable(step):
        raise EntryError("the entry's 'step' is not callable")
    if isinstance(batch_size, bool) or not (
        isinstance(batch_size, int | float) and batch_size >= 1 and batch_size == int(batch_size)
    ):  # a throughput of -4 or 0 samples a step, or 2.9 cut to 2, would be recorded and gated
        raise EntryError(f"batch_size {batch_size!r} is not a whole number >= 1")
    return step, int(batch_size), effective


def build_from(request: Mapping[str, Any], device: str) -> Built:
    """:func:`build_workload` of the request's entry; a bad parameter is the entry's error
    (torch's own message can run to many lines, and the first says it)."""
    func = load_entry(str(request["target"]))
    try:
        return build_workload(func, device, request["params"])
    except (TypeError, ValueError) as exc:
        raise EntryError(f"cannot build the workload: {str(exc).splitlines()[0]}") from exc


def step_mode(request: Mapping[str, Any]) -> contextlib.AbstractContextManager[Any]:
    """``torch.inference_mode()`` for an inference benchmark, else nothing."""
    if request.get("kind") == "inference":
        import torch

        return torch.inference_mode()
    return contextlib.nullcontext()


def prepare_process(request: Mapping[str, Any]) -> Backend:
    """Seed Python and torch, set torch's intra-op threads; the request's device backend (a
    device that cannot be used is the entry's error)."""
    from perfgate.runner.backends import get_backend

    threads = int(request["threads"])
    seed = int(request["seed"])
    random.seed(seed)
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    try:
        return get_backend(str(request["device"]))
    except RuntimeError as exc:
        raise EntryError(str(exc)) from exc


def cpu_time_clock(device: str) -> tuple[str, Callable[[], int]]:
    """The CPU-time clock of a measured step on ``device``, and its name.

    Contention stretches a step's wall time but hardly its CPU time (the CPU clock stands
    still while a neighbour runs). With one intra-op thread the step runs on this thread;
    with more, torch's pool threads do the work, so the process's CPU time is taken. Off the
    CPU the host thread mostly waits for the device: the name is empty, nothing recorded.
    """
    if device != "cpu":
        return "", time.thread_time_ns
    import torch

    if torch.get_num_threads() > 1:
        return "process", time.process_time_ns
    return "thread", time.thread_time_ns


def loss_value(returned: object, kind: str = "training") -> float | None:
    """The loss a training step returned (a number or a one-element tensor), as a float for
    the numerics guard (DESIGN.md §5); None for anything else, an inference benchmark, or a
    loss that is not finite (a diverged run shows in its times and the loss missing). Called
    once, after the timed loop: ``float()`` of a device tensor waits for the device.
    """
    if kind == "inference" or returned is None or isinstance(returned, bool):
        return None
    numel = getattr(returned, "numel", None)
    if not isinstance(returned, int | float) and not (callable(numel) and numel() == 1):
        return None
    try:
        value = float(returned)  # type: ignore[arg-type]
    except (TypeError, ValueError, RuntimeError):
        return None
    return value if math.isfinite(value) else None


def _progress_writer(path: object) -> Callable[[str], None] | None:
    """Appends one line (between steps, never inside a timed one) to the progress file the
    parent watches (:mod:`perfgate.runner.watchdog`); None when the request names none."""
    if not isinstance(path, str) or not path:
        return None
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def report(line: str) -> None:
        os.write(fd, f"{line}\n".encode("ascii"))

    return report


def _measure(request: Mapping[str, Any]) -> dict[str, Any]:
    backend = prepare_process(request)
    step, batch_size, effective = build_from(request, backend.device)
    sync = backend.synchronize
    clock = time.perf_counter_ns
    cpu_name, cpu_clock = cpu_time_clock(backend.device)
    report = _progress_writer(request.get("progress_path"))
    with step_mode(request):
        for _ in range(int(request["warmup"])):
            t0 = clock()
            step()
            if report is not None:  # what the parent derives its default limit from
                sync()
                report(f"w {clock() - t0}")
        sync()
        gc.collect()
        gc_off = bool(request.get("gc_off"))
        backend.reset_peak_memory()
        measured = int(request["measured"])
        samples_ns = [0] * measured
        cpu_ns = [0] * measured
        returned: object = None
        # Events made before the window; read after it (elapsed_time after one synchronize).
        events: list[tuple[Any, Any]] = []
        if backend.timing_event() is not None:
            events = [(backend.timing_event(), backend.timing_event()) for _ in range(measured)]
        if report is not None:
            report("m")
        if gc_off:
            gc.disable()
        for i in range(measured):
            # The CPU clock and the start event sit outside the wall-clock window; only the
            # end event is inside it (queued before the synchronize, it marks the work's end).
            c0 = cpu_clock()
            if events:
                events[i][0].record()
            t0 = clock()
            returned = step()
            if events:
                events[i][1].record()
            sync()
            samples_ns[i] = clock() - t0
            cpu_ns[i] = cpu_clock() - c0
        if gc_off:
            gc.enable()
        sync()
        # The last measured step's loss, read once the timing is over.
        loss = loss_value(returned, str(request.get("kind", "training"))) if measured else None
        del returned
        result = {
            "ok": True,
            "step_ns": samples_ns,
            "cpu_ns": cpu_ns if cpu_name else [],
            "cpu_clock": cpu_name,
            "device_ms": [float(a.elapsed_time(b)) for a, b in events],
            "batch_size": batch_size,
            "params": effective,
            "peak_memory_bytes": backend.peak_memory_bytes(),
            "memory_capacity_bytes": backend.memory_capacity_bytes(),
            "loss": loss,
            "env": backend.describe(),
            "trace_path": None,
            "address_layout": address_layout(),
        }
        trace_path = request.get("trace_path")
        profiled = int(request["profiled"])
        if trace_path and profiled > 0:
            if report is not None:
                report("p")
            result["trace_path"] = backend.profile(step, profiled, str(trace_path))
    return result


def failure(exc: BaseException) -> tuple[dict[str, Any], int]:
    """The result document of a run that raised ``exc``, and the exit code: 2 for the
    entry's configuration (:class:`EntryError`), else 3 with where the code raised."""
    if isinstance(exc, EntryError):
        return {"ok": False, "kind": "config", "message": str(exc)}, 2
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    doc = {"ok": False, "kind": "runner", "message": f"{type(exc).__name__}: {exc}{where}"}
    return {**doc, "traceback": traceback.format_exc()}, 3


def write_json(path: str, doc: Mapping[str, Any]) -> None:
    """Write ``doc`` at ``path`` through a temporary file: a reader never sees half."""
    with open(path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    os.replace(path + ".tmp", path)


def read_request(path: str) -> dict[str, Any]:
    """The request at ``path``, with its ``sys_path`` put first on :data:`sys.path`."""
    with open(path, encoding="utf-8") as fh:
        request: dict[str, Any] = json.load(fh)
    for entry in request.get("sys_path", []):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    return request


def main(argv: list[str]) -> int:
    from perfgate.runner.lifecycle import die_with_parent

    die_with_parent()
    request = read_request(argv[0])
    setup_process(request, argv)
    try:
        result, code = _measure(request), 0
    except BaseException as exc:  # the benchmark's own code failed: report it, whatever it was
        result, code = failure(exc)
    write_json(request["result_path"], result)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
