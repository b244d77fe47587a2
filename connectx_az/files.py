"""Atomic file writes: a run killed at any instant leaves the old file or the new one, never half."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from connectx_az.errors import UserError


class NotARegularFile(UserError, OSError):
    """The path to write exists and is not a regular file: writing would replace it by one (one line)."""

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def atomic_write(path: str | Path, write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write(f)`` on a temp file beside ``path``, fsync, then rename it over ``path``.

    The file gets ``0644`` less the umask (``mkstemp``'s ``0600`` would not); raises ``OSError``, and
    ``NotARegularFile`` where ``path`` exists and is not a regular file (a device such as ``/dev/full``, a pipe, a
    folder), which the rename would replace by a file."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise NotARegularFile(errno.EEXIST, "not a regular file (a device, a pipe or a folder), so not replaced",
                              str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _readable_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    return atomic_write(path, lambda f: f.write(data))


def _readable_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o644 & ~umask
