"""Multi-device benchmarks: one repeat is one torchrun job, one rank per device.

The parent (:func:`run_job`, no torch) launches::

    python -m torch.distributed.run --nproc-per-node N --nnodes M --node-rank K \\
        --rdzv-backend c10d --rdzv-endpoint HOST:PORT -m perfgate.runner.distributed REQUEST

(one node: ``127.0.0.1`` and a free port). Every rank (:func:`main`) joins the process group
with the device's backend (:data:`DIST_BACKENDS`), builds the workload, runs the warm-up and
then the measured steps (:func:`timed_steps`), timing its own steps and the part of each it
was blocked in collectives: a rank slow *between* synchronisations makes the others' next
steps as long as its own, so its step less its wait (its own work) is what tells it apart.
Then every rank profiles its own window; rank 0 gathers every rank's samples and summary
(``gather_object``) and writes the result, with its own loss (every rank of a DDP job holds
the same model but its own batch, so rank 0's is one fixed number for the numerics guard).

A rank whose code raises writes its own error file and exits; torchrun stops the others and
the parent names the rank that failed first. A job past its timeout is stopped as a whole
(:func:`_kill_job`), so no process is left.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from subprocess import DEVNULL, STDOUT
from typing import Any

from perfgate.errors import ConfigError, RunnerError
from perfgate.models import LaunchOptions
from perfgate.runner.lifecycle import WORK_DIR_ENV, kill_group

DIST_BACKENDS: Mapping[str, str] = {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}
TERM_GRACE_S = 10.0  # how long torchrun gets to stop its ranks after SIGTERM
_WORKER_MODULE = "perfgate.runner.distributed"


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun_command(
    request_path: Path, *, nproc: int, nnodes: int, launch: LaunchOptions
) -> list[str]:
    """The command line of one job."""
    endpoint = launch.rdzv_endpoint
    if endpoint is None:
        if nnodes > 1:
            raise ConfigError(
                "a multi-node job needs --rdzv-endpoint HOST:PORT (the same on every node)"
            )
        endpoint = f"127.0.0.1:{free_port()}"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc)]
    cmd += ["--nnodes", str(nnodes), "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint]
    cmd += ["--rdzv-id", launch.rdzv_id, "--max-restarts", "0"]
    if launch.node_rank is not None:
        cmd += ["--node-rank", str(launch.node_rank)]
    return [*cmd, "-m", _WORKER_MODULE, str(request_path)]


# --- parent side -----------------------------------------------------------------------------


def _alive_rank(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return _WORKER_MODULE.encode() in fh.read()
    except OSError:
        return False


def _rank_states(workdir: Path) -> list[tuple[int, int, str]]:
    """What each rank last wrote of itself: (rank, pid, phase)."""
    states = []
    for path in workdir.glob("state-rank*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            data = json.loads(path.read_text(encoding="utf-8"))
            states.append((int(data["rank"]), int(data["pid"]), str(data["phase"])))
    return states


def _kill_job(proc: subprocess.Popen[bytes], workdir: Path) -> None:
    """Stop torchrun's group (SIGTERM: torchrun stops its ranks; then SIGKILL), then every
    rank's own session (torchrun makes each rank a session leader)."""
    kill_group(proc, TERM_GRACE_S)
    for _, pid, _ in _rank_states(workdir):
        if _alive_rank(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def _first_failure(workdir: Path) -> dict[str, Any] | None:
    """The error of the rank that failed first (the others usually fail because it did)."""
    failures: list[dict[str, Any]] = []
    for path in workdir.glob("error-rank*.json"):
        with contextlib.suppress(OSError, ValueError):
            failures.append(json.loads(path.read_text(encoding="utf-8")))
    return min(
        failures, key=lambda f: (float(f.get("time", 0.0)), int(f.get("rank", 0))), default=None
    )


def _last_line(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    useful = [line for line in lines if line.strip() and not line.startswith("W")]
    return (useful or lines or [""])[-1].strip()


def run_job(
    request: Mapping[str, Any],
    *,
    where: str,
    workdir: Path,
    nproc: int,
    nnodes: int,
    launch: LaunchOptions,
    timeout_s: float,
) -> dict[str, Any] | None:
    """Launch one torchrun job for ``request`` and return rank 0's result document; None
    when the job succeeded but rank 0 ran on another node (whose perfgate records the run).

    Raises:
        ConfigError: a rank could not build the workload as configured.
        RunnerError: a rank raised (named), the job died, or it outlived ``timeout_s``.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    request_path = workdir / "request.json"
    result_path = workdir / "result.json"
    request = {
        **request,
        "result_path": str(result_path),
        "workdir": str(workdir),
        "timeout_s": timeout_s,
    }
    request_path.write_text(json.dumps(request), encoding="utf-8")
    env = {"PYTHONHASHSEED": "0", **os.environ}
    env[WORK_DIR_ENV] = str(workdir)  # marks torchrun and its ranks for a later cleanup
    env["OMP_NUM_THREADS"] = str(max(int(request.get("threads", 1)), 1))
    cmd = torchrun_command(request_path, nproc=nproc, nnodes=nnodes, launch=launch)
    log = workdir / "torchrun.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdin=DEVNULL, stdout=out, stderr=STDOUT, env=env, start_new_session=True
        )
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_job(proc, workdir)
            unfinished = ", ".join(
                f"rank {r} ({phase})"
                for r, _, phase in sorted(_rank_states(workdir))
                if phase != "done"
            )
            raise RunnerError(
                f"{where}: the job did not finish within {timeout_s:g} s and was killed"
                + (f"; ranks not done: {unfinished}" if unfinished else "")
                + " (raise the limit with --timeout SECONDS or the benchmark's timeout key)"
            ) from None
        except BaseException:
            _kill_job(proc, workdir)
            raise
    failure = _first_failure(workdir)
    if failure is not None:
        rank = failure.get("rank", "?")
        if failure.get("kind") == "config":
            raise ConfigError(f"{where}: rank {rank}: {failure['message']}")
        raise RunnerError(f"{where}: rank {rank} raised {failure['message']}")
    if code != 0:
        tail = _last_line(log)
        raise RunnerError(
            f"{where}: torchrun exited with code {code}"
            + (f"; last output: {tail}" if tail else "")
        )
    if not result_path.exists():
        if nnodes > 1:
            return None
        raise RunnerError(f"{where}: the job finished but rank 0 wrote no result")
    result: dict[str, Any] = json.loads(result_path.read_text(encoding="utf-8"))
    return result


# --- rank side -------------------------------------------------------------------------------


def _state(workdir: str, rank: int, phase: str) -> None:
    from perfgate.runner.worker import write_json

    state = {"rank": rank, "pid": os.getpid(), "phase": phase}
    write_json(os.path.join(workdir, f"state-rank{rank}.json"), state)


def timed_steps(
    step: Callable[[], object],
    n: int,
    sync: Callable[[], None],
    barrier: Callable[[], object],
    waited: Callable[[], int] = lambda: 0,
) -> tuple[list[int], list[int], object]:
    """``n`` steps timed on this rank (ns per step, each until the device is synchronised),
    the part of each blocked in collectives (``waited``: a cumulative ns counter, see
    :func:`perfgate.workloads.base.record_collective_wait`), and the last step's return.

    The ranks are aligned by one barrier before the first step and one after the last, not
    per step (a gloo barrier costs ~0.5 ms on loopback, 10% of a short step). In a
    synchronous job (DDP) step ``i`` runs concurrently on every rank, coupled by its
    collectives, so the job's step ``i`` is the slowest rank's."""
    clock = time.perf_counter_ns
    samples = [0] * n
    waits = [0] * n
    returned: object = None
    barrier()
    for i in range(n):
        w0 = waited()
        t0 = clock()
        returned = step()
        sync()
        samples[i] = clock() - t0
        waits[i] = waited() - w0
    barrier()
    return samples, waits, returned


def _measure_rank(request: Mapping[str, Any], rank: int, local_rank: int) -> dict[str, Any]:
    import torch.distributed as dist

    from perfgate.parsers import read_profile
    from perfgate.runner import worker
    from perfgate.workloads.base import collective_wait_ns

    workdir = str(request["workdir"])
    device = str(request["device"])
    backend = worker.prepare_process(request)
    backend.set_device(local_rank)
    dist.init_process_group(
        backend=DIST_BACKENDS[device], timeout=timedelta(seconds=float(request["timeout_s"]))
    )
    world = dist.get_world_size()
    _state(workdir, rank, "building")
    step, batch_size, effective = worker.build_from(request, device)
    with worker.step_mode(request):
        _state(workdir, rank, "warm-up")
        for _ in range(int(request["warmup"])):
            step()
        backend.synchronize()
        gc.collect()
        backend.reset_peak_memory()
        _state(workdir, rank, "measuring")
        samples_ns, wait_ns, returned = timed_steps(
            step, int(request["measured"]), backend.synchronize, dist.barrier, collective_wait_ns
        )
        mine = {
            "rank": rank,
            "step_ns": samples_ns,
            "wait_ns": wait_ns,
            "peak_memory_bytes": backend.peak_memory_bytes(),
            "memory_capacity_bytes": backend.memory_capacity_bytes(),
            "profile": None,
            "host": socket.gethostname(),
        }
        loss = worker.loss_value(returned, str(request.get("kind", "training")))
        del returned
        trace_dir = request.get("trace_dir")
        profiled = int(request["profiled"])
        if trace_dir and profiled > 0:
            _state(workdir, rank, "profiling")
            dist.barrier()
            stem = str(request["trace_stem"])  # a safe file name (runner.trace_stem)
            path = os.path.join(str(trace_dir), f"{stem}.rank{rank}.pt.trace.json")
            written = backend.profile(step, profiled, path)
            if written is not None:  # None: the window ran no operator
                # a torch.profiler trace file or the NPU profile directory: one dispatcher
                summary = replace(read_profile(Path(written)).ranks[0], rank=rank)
                mine["profile"] = summary.to_dict()
    _state(workdir, rank, "gathering")
    gathered: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object(mine, gathered, dst=0)
    dist.barrier()
    dist.destroy_process_group()
    return {
        "ok": True,
        "ranks": gathered,
        "world_size": world,
        "loss": loss,
        "batch_size": batch_size,
        "params": effective,
        "env": backend.describe(),
    }


def main(argv: Sequence[str]) -> int:
    """One rank of a job (run by torchrun): measure, and rank 0 writes the result."""
    from perfgate.runner.worker import failure, read_request, write_json

    request = read_request(argv[0])
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    workdir = str(request["workdir"])
    _state(workdir, rank, "starting")
    try:
        result = _measure_rank(request, rank, local_rank)
    except BaseException as exc:  # the benchmark's code (or the job) failed: say which rank
        doc, code = failure(exc)
        error = {**doc, "rank": rank, "time": time.time()}
        write_json(os.path.join(workdir, f"error-rank{rank}.json"), error)
        return code
    if rank == 0:
        write_json(str(request["result_path"]), result)
    _state(workdir, rank, "done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
