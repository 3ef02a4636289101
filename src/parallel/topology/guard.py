"""Collectives that fail loudly: a failed or timed-out collective names the operation, the ranks and the cause."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch.distributed as dist

__all__ = ["CollectiveError", "guard"]


class CollectiveError(RuntimeError):
    """A collective failed: usually a peer rank died, or did not arrive within the group's timeout."""


@contextmanager
def guard(what: str, group: dist.ProcessGroup | None) -> Iterator[None]:
    """Re-raise a failed collective as a CollectiveError that names the operation, the ranks and the cause."""
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
