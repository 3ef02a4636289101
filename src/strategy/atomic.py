"""Write a file atomically: a temporary file beside it, fsync, rename. No truncated output, no debris."""

from __future__ import annotations

import contextlib
import os
import stat

__all__ = ["write_atomic"]


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace `path` with `data` in one step, keeping an existing file's permissions."""
    target = os.fspath(path)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    import tempfile  # not at import time: the CLI starts faster

    folder, name = os.path.split(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
