"""Worker lifecycle: a signal sent to perfgate stops its workers and removes its temporary
directories.

Every worker (one repeat, or one torchrun job) is started in a session of its own
(``start_new_session=True``), so it and whatever it starts form one process group that the
parent can stop as a whole (:func:`kill_group`). While the runner works it holds
:func:`interruptible`: SIGTERM, SIGINT and SIGHUP then raise :class:`Interrupted` in the main
thread instead of ending the process on the spot, so the ``finally`` blocks that kill the
worker's group and the ``TemporaryDirectory`` context managers that hold the requests and
results run on the way out. The command then exits 3 with one line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from types import FrameType

from perfgate.errors import RunnerError

TERM_GRACE_S = 5.0
"""How long a worker's group gets after SIGTERM before it is sent SIGKILL."""

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
    """Within: SIGTERM, SIGINT and SIGHUP raise :class:`Interrupted` (the first one; later
    ones are ignored until the cleanup it starts is done). Re-entrant; the previous
    handlers are back afterwards. Outside the main thread (signals cannot be handled there)
    it changes nothing."""
    global _depth, _stopping
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _depth > 0:
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    previous = {s: signal.getsignal(s) for s in _SIGNALS}
    _stopping = False
    for s in _SIGNALS:
        signal.signal(s, _raise)
    _depth = 1
    try:
        yield
    finally:
        _depth = 0
        for s, handler in previous.items():
            signal.signal(s, handler)
        _stopping = False


def kill_group(proc: subprocess.Popen[bytes], grace_s: float = TERM_GRACE_S) -> None:
    """Stop ``proc`` (a session leader: started with ``start_new_session=True``) and every
    process in its group: SIGTERM, ``grace_s`` to exit, then SIGKILL to what is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    # The leader may be gone while processes it started still hold the group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
