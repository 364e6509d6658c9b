"""Worker lifecycle: a signal sent to perfgate stops its workers and removes its temporary
directories.

Every worker (one repeat, or one torchrun job) is started in a session of its own, so it and
whatever it starts form one process group the parent stops as a whole (:func:`kill_group`).
While the runner works it holds :func:`interruptible`: SIGTERM, SIGINT and SIGHUP raise
:class:`Interrupted` in the main thread, so the ``finally`` blocks that kill the worker's
group and remove the temporary directories run on the way out; the command exits 3.

SIGKILL cannot be handled, so a worker dies with its parent (:func:`die_with_parent`), and
perfgate's temporary directories stay locked while their process lives (:func:`work_dir`):
each new one first removes the stale ones and kills what still runs from them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from perfgate.errors import RunnerError

PARENT_ENV = "PERFGATE_PARENT_PID"  # the pid of the perfgate a worker is to die with
#: The temporary directory a worker runs for: marks it and what it starts, so that a later
#: perfgate can stop them when the perfgate that started them was killed.
WORK_DIR_ENV = "PERFGATE_WORK_DIR"
WORK_PREFIX = "perfgate-"
_LOCK_NAME = ".owner"
_STALE_NAME = re.compile(r"perfgate-(\d+)-[^/]+")
_PR_SET_PDEATHSIG = 1
#: How old an unlocked directory must be to count as stale: its owner may be between
#: creating and locking it (in another pid namespace sharing the same /tmp).
_UNLOCKED_GRACE_S = 60.0
TERM_GRACE_S = 5.0  # how long a worker's group gets after SIGTERM before SIGKILL

_SIGNALS = tuple(
    s for s in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)) if s is not None
)
_depth = 0
_stopping = False


class Interrupted(RunnerError):
    """perfgate was sent SIGTERM, SIGINT or SIGHUP while it ran benchmarks."""

    def __init__(self, signum: int) -> None:
        name = signal.Signals(signum).name
        super().__init__(f"stopped by {name}; the running worker was killed and nothing recorded")
        self.signum = signum


def _raise(signum: int, frame: FrameType | None) -> None:
    global _stopping
    if _stopping:  # a second signal while the first one's cleanup runs: let it finish
        return
    _stopping = True
    raise Interrupted(signum)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Within: the first SIGTERM, SIGINT or SIGHUP raises :class:`Interrupted` (later ones
    are ignored until its cleanup is done). Re-entrant; the previous handlers are back
    afterwards. Outside the main thread (no signals handled there) it changes nothing."""
    global _depth, _stopping
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = None
    if _depth == 0:
        previous = {s: signal.getsignal(s) for s in _SIGNALS}
        _stopping = False
        for s in _SIGNALS:
            signal.signal(s, _raise)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if previous is not None:
            for s, handler in previous.items():
                signal.signal(s, handler)
            _stopping = False


def kill_group(proc: subprocess.Popen[bytes], grace_s: float = TERM_GRACE_S) -> None:
    """Stop ``proc`` (a session leader: started with ``start_new_session=True``) and every
    process in its group: SIGTERM, ``grace_s`` to exit, then SIGKILL to what is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    # The leader may be gone while processes it started still hold the group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


# -- SIGKILL of perfgate: workers die with it, and the next start cleans up ------------------------


def worker_env(workdir: Path) -> dict[str, str]:
    """The variables a worker started in ``workdir`` gets (see :func:`die_with_parent`)."""
    return {PARENT_ENV: str(os.getpid()), WORK_DIR_ENV: str(workdir)}


def die_with_parent() -> None:
    """In a worker: end when the perfgate process named by ``PERFGATE_PARENT_PID`` ends,
    SIGKILL included: on Linux the kernel sends SIGKILL (``prctl(PR_SET_PDEATHSIG)``, even
    while the step is stuck in native code); elsewhere a thread polls the parent's pid and
    kills the worker's group. A worker whose parent is already gone ends at once; without
    the variable (a worker started by hand) nothing changes."""
    try:
        parent = int(os.environ.pop(PARENT_ENV, ""))
    except ValueError:
        return
    armed = False
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    if os.getppid() != parent:  # the parent died before the signal was armed
        os.kill(os.getpid(), signal.SIGKILL)
    if not armed:
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    with contextlib.suppress(OSError):
        os.killpg(os.getpgid(0), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def work_dir() -> Iterator[str]:
    """A temporary directory ``perfgate-<pid>-*`` for one command's workers, locked while
    this process lives and removed afterwards; the stale ones are removed first."""
    clean_stale_work_dirs()
    with tempfile.TemporaryDirectory(prefix=f"{WORK_PREFIX}{os.getpid()}-") as tmp:
        lock = _lock(Path(tmp) / _LOCK_NAME, os.O_WRONLY | os.O_CREAT)
        try:
            yield tmp
        finally:
            if lock is not None:
                os.close(lock)


def _lock(path: Path, flags: int) -> int | None:
    """A descriptor of ``path`` (opened with ``flags``, not inherited by workers) holding an
    exclusive lock on it; None where it cannot be opened, a live process holds the lock (in
    another pid namespace, say), or locks are not available."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    try:
        fd = os.open(path, flags, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def clean_stale_work_dirs(root: Path | None = None) -> list[Path]:
    """Remove (and return) the ``perfgate-<pid>-*`` directories under ``root`` (the
    temporary directory) of this user whose perfgate died without removing them: its pid is
    gone and its lock, if any, free. What still runs from one is killed first
    (:func:`_kill_marked`). Best effort: what cannot be checked or removed stays."""
    base = Path(tempfile.gettempdir()) if root is None else root
    removed: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _STALE_NAME.fullmatch(entry.name)
        if match is None or not _stale(entry, int(match.group(1))):
            continue
        _kill_marked(entry)
        shutil.rmtree(entry, ignore_errors=True)
        if not entry.exists():
            removed.append(entry)
    return removed


def _stale(entry: Path, pid: int) -> bool:
    try:
        st = entry.lstat()
    except OSError:
        return False
    if not entry.is_dir() or entry.is_symlink() or st.st_uid != os.getuid():
        return False
    if pid == os.getpid() or _alive(pid):
        return False
    lock = entry / _LOCK_NAME
    if not lock.exists():  # unlocked: an old perfgate's, or one being created this instant
        return time.time() - st.st_mtime > _UNLOCKED_GRACE_S
    fd = _lock(lock, os.O_RDONLY)
    if fd is not None:
        os.close(fd)
    return fd is not None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: alive
        pass
    return True


def _kill_marked(directory: Path) -> None:
    """SIGKILL every process of this user whose ``PERFGATE_WORK_DIR`` (inherited by a worker
    and what it starts) names ``directory`` or a path under it; only where ``/proc`` is."""
    proc = Path("/proc")
    if not proc.is_dir():
        return
    marker = f"{WORK_DIR_ENV}={directory}".encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if any(item == marker or item.startswith(marker + b"/") for item in environ.split(b"\0")):
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGKILL)
