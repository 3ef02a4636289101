"""The checkpoints of a run's directory: which are complete and readable, the newest of them, and the old ones to
remove.

A periodic checkpoint is `DIR/step-N`; it is complete once its marker is in place (written last, then the
directory renamed into place). Only rank 0 reads or changes the directory; the others learn its answer.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
from pathlib import Path

import torch.distributed.checkpoint as dcp

from . import rank_state
from .save_load import MARKER, read_marker

__all__ = ["PREFIX", "complete", "newest_readable", "problem", "remove_debris", "retire", "step_dir"]

PREFIX = "step-"
_NAME = re.compile(rf"{PREFIX}(\d+)")


def step_dir(root: Path, step: int) -> Path:
    return root / f"{PREFIX}{step}"


def complete(root: Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint in `root` holding its marker, newest first."""
    if not root.is_dir():
        return []
    found = []
    for d in root.iterdir():
        m = _NAME.fullmatch(d.name)
        if m and (d / MARKER).is_file():
            found.append((int(m.group(1)), d))
    return sorted(found, reverse=True)


def problem(path: Path) -> str | None:
    """Why `path` cannot be loaded (an unreadable marker or DCP metadata, a data file missing or shorter than the
    metadata says, a rank's state missing), or None. Reads only the small files and the data files' sizes."""
    try:
        meta = read_marker(path)
        metadata = dcp.FileSystemReader(str(path)).read_metadata()
    except (ValueError, OSError, EOFError, json.JSONDecodeError, RuntimeError) as e:
        return str(e).removeprefix(f"{path}: ")
    except Exception as e:  # noqa: BLE001 - unpickling a truncated .metadata raises anything
        return f"unreadable DCP metadata ({type(e).__name__}: {e})"
    ends: dict[str, int] = {}
    for info in getattr(metadata, "storage_data", {}).values():
        ends[info.relative_path] = max(ends.get(info.relative_path, 0), info.offset + info.length)
    for name, end in sorted(ends.items()):
        f = path / name
        if not f.is_file():
            return f"{name} is missing"
        if f.stat().st_size < end:
            return f"{name} holds {f.stat().st_size} bytes, the metadata says at least {end} (truncated)"
    world = (meta.get("layout") or {}).get("world_size")
    if meta.get("rank_state") and world:
        for r in range(world):
            try:
                rank_state.read(path, r)
            except Exception as e:  # noqa: BLE001 - a missing or truncated pickle raises anything
                return f"rank-{r}.pt is not readable ({type(e).__name__})"
    return None


def newest_readable(root: Path) -> tuple[Path | None, list[str]]:
    """The newest complete checkpoint in `root` that `problem` finds nothing wrong with, and a warning for each newer
    one skipped."""
    skipped: list[str] = []
    for _, path in complete(root):
        why = problem(path)
        if why is None:
            return path, skipped
        skipped.append(f"{path}: skipped, not readable ({why}); trying the previous checkpoint")
    return None, skipped


def retire(root: Path, keep_last: int, *, newest: Path | None = None) -> None:
    """Remove the complete checkpoints beyond the newest `keep_last` (0: keep all), oldest first, counting from
    `newest` (the one just written) down: steps above it (another run's, in the same dir) are left alone. Each is
    renamed out of the catalog first (one atomic step), then deleted: a crash mid-deletion leaves hidden debris, never
    a half-deleted checkpoint that looks complete, and nothing newer is touched."""
    if keep_last <= 0:
        return
    found = complete(root)
    if newest is not None:
        mine = _NAME.fullmatch(newest.name)
        if mine is None:
            return
        found = [(step, path) for step, path in found if step <= int(mine.group(1))]
    for _, old in reversed(found[keep_last:]):
        doomed = root / f".{old.name}.deleting-{uuid.uuid4().hex[:12]}"
        old.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)


def remove_debris(root: Path) -> None:
    """What killed saves and deletions left: hidden partial, old and deleting directories of step checkpoints. A save
    killed between its two renames (re-saving a step) left its finished copy hidden and no `step-N`: that copy (the new
    one, or else the old) is put back first."""
    if not root.is_dir():
        return
    hidden = [d for d in root.glob(f".{PREFIX}*")
              if d.is_dir() and re.fullmatch(rf"\.{PREFIX}\d+\.(partial|old|deleting)-[0-9a-f]+", d.name)]
    for kind in ("partial", "old"):
        for d in hidden:
            target = root / d.name[1:].split(".")[0]
            if f".{kind}-" in d.name and not target.exists() and (d / MARKER).is_file():
                d.rename(target)
    for d in hidden:
        if d.exists():
            shutil.rmtree(d, ignore_errors=True)
