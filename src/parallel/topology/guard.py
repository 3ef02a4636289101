"""Collectives that fail loudly: a failed or timed-out collective names the operation, the ranks and the cause."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch.distributed as dist

__all__ = ["CollectiveError", "collective_seconds", "guard", "time_collectives"]

# Seconds spent inside guarded collectives, counted only while a parallel.Meter asks (`time_collectives`): [total,
# meters asking]. Off, a guard reads no clock.
_WAIT = [0.0, 0]


def time_collectives(on: bool) -> None:
    """A meter starts (True) or stops (False) asking for the time spent in collectives."""
    _WAIT[1] += 1 if on else -1


def collective_seconds() -> float:
    """Seconds spent inside this project's collectives while a meter asked: on gloo (and on a device the collective
    waits for) that is the transfer and the wait for the slowest peer."""
    return _WAIT[0]


class CollectiveError(RuntimeError):
    """A collective failed: usually a peer rank died, or did not arrive within the group's timeout."""


@contextmanager
def guard(what: str, group: dist.ProcessGroup | None) -> Iterator[None]:
    """Re-raise a failed collective as a CollectiveError that names the operation, the ranks and the cause; while a
    meter asks, add the time spent in it to `collective_seconds`."""
    start = time.perf_counter() if _WAIT[1] else None
    try:
        yield
    except CollectiveError:
        raise
    except (RuntimeError, dist.DistError) as e:
        ranks: object
        try:
            ranks = dist.get_process_group_ranks(group) if group is not None else list(range(dist.get_world_size()))
        except Exception:  # noqa: BLE001 - the group itself may be gone
            ranks = "?"
        raise CollectiveError(
            f"{what} over ranks {ranks} failed on rank {dist.get_rank()}: {e}. A peer rank probably died or "
            "did not reach this collective within the process-group timeout (parallel.init(timeout=...)); "
            "see the other ranks' logs"
        ) from e
    finally:
        if start is not None:
            _WAIT[0] += time.perf_counter() - start
