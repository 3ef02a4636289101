"""Write a file atomically (a temporary file beside it, fsync, rename), and replace a directory the same way (the new
one renamed into place before the old one goes). No truncated output, no debris."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import uuid
from collections.abc import Callable
from pathlib import Path

__all__ = ["replace_directory", "restore_interrupted", "write_atomic"]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _fsync_dir(folder: str) -> None:
    """Make the rename itself durable (best effort: some filesystems refuse)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace `path` with `data` in one step, keeping an existing file's permissions."""
    target = os.path.realpath(os.fspath(path))  # write through a symlink, don't replace it
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
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
        _fsync_dir(folder)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def replace_directory(finished: Path, target: Path) -> None:
    """Put the directory `finished` in place of `target`: an existing `target` is renamed aside first (`.NAME.old-*`)
    and removed only once `finished` is in place, so a crash leaves one of the two whole (`restore_interrupted`)."""
    old = None
    if target.exists():
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:12]}"
        os.rename(target, old)
    os.rename(finished, target)
    _fsync_dir(str(target.parent))  # the renames themselves are durable
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def restore_interrupted(target: Path, *, whole: Callable[[Path], bool] = lambda d: True) -> None:
    """A `replace_directory` killed between its two renames leaves the previous directory as `.NAME.old-*` and no
    `target`: put it back (the one aside for which `whole` holds, when there is exactly one)."""
    if target.exists():
        return
    olds = [d for d in target.parent.glob(f".{target.name}.old-*") if whole(d)]
    if len(olds) == 1:
        os.rename(olds[0], target)
