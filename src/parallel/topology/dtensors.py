"""FSDP2 keeps sharded parameters, their gradients and optimizer state as DTensors; this package's own collectives
and checks work on the local shards (views: writing to one writes to the DTensor)."""

from __future__ import annotations

import torch
from torch.distributed.tensor import DTensor

__all__ = ["is_data_sharded", "local"]


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of `t` (a view of a DTensor's local shard), or `t` itself."""
    return t.to_local() if isinstance(t, DTensor) else t


def is_data_sharded(p: torch.Tensor) -> bool:
    """True for a parameter FSDP2 shards over the data axes (sharding, with dp replicating it): its gradient is
    reduced by FSDP2 itself, over dp × sharding."""
    return isinstance(p, DTensor)
