"""checkpoint_configs: periodic checkpoints and resume, checked before a run starts (a directory that cannot be
written, a resume path that is not there, saves with nowhere to go), each error at the field's line."""

# Annotations stay evaluated (no `from __future__ import annotations`): see layout.py.

import os
from collections.abc import Mapping
from pathlib import Path

from .._generated.distributed_strategy_pb2 import DistributedStrategy
from ..errors import Location, StrategyError
from .settings import CheckpointSettings

__all__ = ["settings"]

FIELD = "checkpoint_configs"


def settings(s: DistributedStrategy, positions: Mapping[str, Location], source: str | None) -> CheckpointSettings:
    """The effective checkpoint settings of `s` (its checkpoint_configs is set).

    Raises:
        StrategyError: every_steps > 0 without a dir, a dir that cannot be written, a resume path that is no
            directory; located at the field.
    """
    c = getattr(s, FIELD)

    def fail(name: str, message: str) -> StrategyError:
        path = f"{FIELD}.{name}"
        return StrategyError.at(positions.get(path) or positions.get(FIELD) or Location(source), message, field=path)

    if c.every_steps > 0 and not c.dir:
        raise fail("every_steps", f"{FIELD}.every_steps {c.every_steps} saves every {c.every_steps} steps, but "
                   f"{FIELD}.dir is not set: say where the checkpoints go (dir: \"checkpoints\")")
    if c.dir:
        why = _unwritable(Path(c.dir))
        if why:
            raise fail("dir", f"{FIELD}.dir {c.dir!r} cannot be written: {why}; choose a directory this user can write")
    k = s.gradient_merge_configs.k_steps if s.gradient_merge else 1
    if c.every_steps > 0 and k > 1 and c.every_steps % k:
        raise fail("every_steps", f"{FIELD}.every_steps {c.every_steps} is not a multiple of gradient_merge_configs."
                   f"k_steps {k}: a save inside a merge would lose the gradients of its micro-steps; save after an "
                   f"update (every_steps: {c.every_steps // k * k or k})")
    if c.resume not in ("auto", "never") and (not c.resume or not Path(c.resume).is_dir()):
        raise fail("resume", f"{FIELD}.resume {c.resume!r} is no directory: give \"auto\" (the newest checkpoint in dir, "
                   "if any), \"never\", or the path of a checkpoint")
    return CheckpointSettings(dir=c.dir, every_steps=c.every_steps, keep_last=c.keep_last, async_save=c.async_save,
                              resume=c.resume)


def _unwritable(path: Path) -> str | None:
    """Why `path` cannot be made or written into, or None: its nearest existing ancestor must be a directory this user
    may write (to create the rest), or the path itself one."""
    probe = path.absolute()
    while not probe.exists():
        if probe.parent == probe:
            return "no part of it exists"
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is a file, not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable"
    return None
