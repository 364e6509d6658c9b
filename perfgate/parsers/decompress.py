"""Bounded reading of profile and result files.

- Only regular files are read (:func:`regular_file`): a FIFO, socket or device named like a
  trace would block the read forever or never end, so it is refused in one line.
- A small compressed file can expand to gigabytes (a "gzip bomb"), so every gzip read of a
  profile goes through :class:`CappedReader`, which counts the bytes inflated and stops with
  a one-line ParseError when they reach a cap, never inflating more than one byte past it.
- A file read whole into memory (:func:`read_whole`: a torch trace, a result file) is held
  at most once: its decompressed content must stay under the same cap, and a plain file
  larger than the cap is refused before a byte of it is read (TooLargeError, exit 3), with
  its size and the limit: parsing it would need several times its size in memory.

The cap is 1024 MiB, or ``PERFGATE_MAX_DECOMPRESSED_MB`` (a positive integer, in MiB).
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import zlib
from collections.abc import Mapping
from pathlib import Path

from perfgate.errors import ParseError, TooLargeError, UsageError

ENV_VAR = "PERFGATE_MAX_DECOMPRESSED_MB"
DEFAULT_MAX_MB = 1024
CHUNK = 1 << 20


def max_decompressed_mb(env: Mapping[str, str] | None = None) -> int:
    """The cap in MiB: ``PERFGATE_MAX_DECOMPRESSED_MB`` when set, else 1024."""
    value = (os.environ if env is None else env).get(ENV_VAR, "").strip()
    if not value:
        return DEFAULT_MAX_MB
    try:
        mb = int(value)
    except ValueError:
        mb = 0
    if mb < 1:
        raise UsageError(f"{ENV_VAR}: expected a positive whole number of MiB, not {value!r}")
    return mb


_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def regular_file(path: Path, label: str) -> int:
    """The size of ``path``, a regular file (a symbolic link to one is one).

    Raises:
        ParseError: it does not exist, cannot be looked at, is a directory, or is not a
            regular file (a FIFO, socket or device: reading one could block forever).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ParseError(f"{label}: no such file") from None
    except OSError as exc:
        raise ParseError(f"{label}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise ParseError(f"{label}: is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise ParseError(
            f"{label}: {kind}, not a regular file; perfgate reads profiles and results only "
            "from regular files and directories"
        )
    return st.st_size


def read_whole(path: Path, label: str) -> bytearray:
    """The content of the regular file ``path``, inflated when it is gzip, held once.

    Raises:
        ParseError: not a regular file (:func:`regular_file`), unreadable, a corrupt or
            truncated gzip, or one that inflates to the cap or more.
        TooLargeError: a plain file of the cap or more; nothing of it is read.
    """
    size = regular_file(path, label)
    limit_mb = max_decompressed_mb()
    try:
        with open(path, "rb") as raw:
            if raw.read(2) != b"\x1f\x8b":
                if size >= limit_mb * (1 << 20):
                    raise TooLargeError(
                        f"{label}: {size / (1 << 20):.0f} MiB, at or over the {limit_mb} MiB "
                        f"perfgate reads whole (parsing needs several times that in memory; "
                        f"raise {ENV_VAR} where the job has it)"
                    )
                raw.seek(0)
                data = bytearray(size)
                del data[raw.readinto(data) :]  # a buffered readinto reads to the end
                return data
            raw.seek(0)
            try:
                with CappedReader(gzip.GzipFile(fileobj=raw), label, limit_mb) as stream:
                    return stream.read_all()
            except EOFError:
                raise ParseError(f"{label}: truncated gzip (compressed data ends early)") from None
            except (gzip.BadGzipFile, zlib.error) as exc:
                raise ParseError(f"{label}: corrupt gzip ({' '.join(str(exc).split())})") from None
    except OSError as exc:
        raise ParseError(f"{label}: cannot be read ({exc.strerror or exc})") from None


class CappedReader(io.BufferedIOBase):
    """Reads ``inner`` (a decompressing stream) and raises ParseError once the bytes that
    came out of it reach ``limit_mb`` MiB; never reads more than one byte past the cap."""

    def __init__(self, inner: io.BufferedIOBase, label: str, limit_mb: int) -> None:
        super().__init__()
        self._inner = inner
        self._label = label
        self._limit_mb = limit_mb
        self._limit = limit_mb * (1 << 20)
        self._total = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return bytes(self.read_all())
        data = self._inner.read(min(size, self._limit - self._total + 1))
        self._total += len(data)
        if self._total >= self._limit:
            raise ParseError(
                f"{self._label}: decompresses to {self._limit_mb} MiB or more "
                f"(raise {ENV_VAR} if it is a real profile)"
            )
        return data

    def read_all(self) -> bytearray:
        """The rest of the stream in one buffer that grows in place (no list of chunks
        joined at the end, which would hold it twice)."""
        out = bytearray()
        while chunk := self.read(CHUNK):
            out += chunk
        return out

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            super().close()
