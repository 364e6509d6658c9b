"""Output files written atomically: all of the new content, or the previous file untouched.

Every file perfgate writes for a person or another tool (baseline files, the report
directory, the HTML site, TensorBoard event files) goes through :func:`write_atomic`: the
bytes go to a temporary file in the same directory, which then replaces the target with
:func:`os.replace`. A full disk, a file-size limit or a kill half-way leaves the previous
file as it was (and no temporary file behind, where the failure is seen).
"""

from __future__ import annotations

import os
import secrets
from contextlib import suppress
from pathlib import Path


def write_atomic(path: Path, data: str | bytes, *, durable: bool = True) -> int:
    """Write ``data`` to ``path`` through a temporary file beside it; the bytes written.

    The new file gets the mode a plain ``open(path, "w")`` would give it (``0o666`` less
    the umask), or the mode of the file it replaces. With ``durable`` the content is
    fsynced before the rename, so a power cut leaves the old or the new file, never an
    empty one.

    Raises:
        OSError: the directory cannot be written, or the disk is full (``filename`` is
            ``path``); ``path`` is then as it was.
    """
    payload = data.encode() if isinstance(data, str) else data
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise _named(exc, path) from exc
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            out.flush()
            if durable:
                os.fsync(out.fileno())
        with suppress(OSError):
            os.chmod(temp, path.stat().st_mode & 0o7777)
        os.replace(temp, path)
    except BaseException as exc:
        with suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, OSError):
            raise _named(exc, path) from exc
        raise
    return len(payload)


def _named(exc: OSError, path: Path) -> OSError:
    """``exc`` as the same kind of OSError, naming ``path`` (not the temporary file)."""
    if exc.errno is None:
        return exc
    return OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path))
