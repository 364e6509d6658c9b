"""Bounded gzip reading for profile files: a small compressed file can expand to gigabytes
(a "gzip bomb"), so every gzip read of a profile goes through :class:`CappedReader`, which
stops with a one-line ParseError past a cap on the decompressed size.

The cap is 1024 MiB, or ``PERFGATE_MAX_DECOMPRESSED_MB`` (a positive integer, in MiB).
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping

from perfgate.errors import ParseError, UsageError

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


class CappedReader(io.BufferedIOBase):
    """Reads ``inner`` (a decompressing stream) and raises ParseError once more than
    ``limit_mb`` MiB came out of it; never reads more than one byte past the cap."""

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
            parts = []
            while chunk := self.read(CHUNK):
                parts.append(chunk)
            return b"".join(parts)
        data = self._inner.read(min(size, self._limit - self._total + 1))
        self._total += len(data)
        if self._total > self._limit:
            raise ParseError(
                f"{self._label}: decompresses to more than {self._limit_mb} MiB "
                f"(raise {ENV_VAR} if it is a real profile)"
            )
        return data

    def read1(self, size: int = -1) -> bytes:
        return self.read(CHUNK if size < 0 else size)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            super().close()
